import Foundation
import KeychainEngine
import KeychainFile
import SecretServiceDaemon
import Testing

/// Rows no well-behaved writer makes, planted in each storage the tests reach, then read by every read verb of the
/// tool: dates far out of range (±1e300 s, NaN, ±infinity, years before 1 and after 9999), the largest and smallest
/// integers, attributes of unexpected types, bytes that are not UTF-8, terminal escapes, empty values.
///
/// Each verb must end normally (never by a signal: a Swift trap is SIGILL), print no control character that a
/// terminal would act on, print no secret unless asked, and print valid JSON with `--json` (an invalid date is
/// `null` there, `<invalid date>` in `security`'s text form).
enum HostileRows {
    /// Seconds since 2001 that no calendar can show, or only with a year of more than four digits.
    static let hostileDates: [Double] = [1e300, -1e300, .nan, .infinity, -.infinity, 1e17, -1e17,
                                         253_402_300_800 - 978_307_200, -62_135_596_801 - 978_307_200]

    /// The attribute sets planted, one item each (keyed by the service or server they keep). The secrets are
    /// `s3cr3t-<service>`, never printed unless a verb is asked for them.
    static func genericVariants() -> [(service: String, attributes: [String: AttributeValue])] {
        var variants: [(String, [String: AttributeValue])] = []
        for (index, seconds) in hostileDates.enumerated() {
            let other = hostileDates[(index + 1) % hostileDates.count]
            variants.append(("date-\(index)", [Key.creationDate: .date(Date(timeIntervalSinceReferenceDate: seconds)),
                                               Key.modificationDate: .date(Date(timeIntervalSinceReferenceDate: other))]))
        }
        variants.append(("numbers", [
            Key.creator: .number(.max), Key.type: .number(.min), Key.customIcon: .number(.min), Key.scriptCode: .number(.max),
            Key.isInvisible: .number(.min), Key.isNegative: .number(-1),
        ]))
        variants.append(("types", [
            Key.creationDate: .string("yesterday"), Key.modificationDate: .number(.max), Key.creator: .date(Date(timeIntervalSinceReferenceDate: 1e300)),
            Key.type: .data(Data([0x1B, 0x5B, 0x32, 0x4A])), Key.customIcon: .date(Date(timeIntervalSinceReferenceDate: .nan)),
            Key.scriptCode: .string("\u{1B}[8m"), Key.isInvisible: .date(Date(timeIntervalSinceReferenceDate: -1e300)),
            Key.isNegative: .string("no"), Key.label: .number(.min), Key.comment: .bool(true),
        ]))
        variants.append(("escapes", [
            Key.label: .string("\u{1B}[2J\u{1B}]0;owned\u{07}label\u{9B}31m\u{7F}"),
            Key.description: .data(Data([0xFF, 0xFE, 0x1B, 0x5B, 0x48, 0x00, 0xC3])),
            Key.comment: .data(Data()), Key.generic: .string(""),
            Key.creator: .number(0x1B5B_324A), Key.type: .string("\u{1B}[8m"),
            Key.protection: .data(Data(repeating: 0x07, count: 3)),
        ]))
        return variants
    }

    /// Internet-password variants: the same, and the attributes only that class prints (its primary key included).
    static func internetVariants() -> [(server: String, attributes: [String: AttributeValue])] {
        [
            ("inet-date", [Key.creationDate: .date(Date(timeIntervalSinceReferenceDate: 1e300)),
                           Key.modificationDate: .date(Date(timeIntervalSinceReferenceDate: .nan))]),
            ("inet-escapes", [Key.protocol: .string("\u{1B}[2J"), Key.authenticationType: .data(Data([0x1B, 0x9B, 0xFF])),
                              Key.port: .date(Date(timeIntervalSinceReferenceDate: -1e300)), Key.path: .data(Data([0xFF, 0x07])),
                              Key.securityDomain: .string("\u{1B}]52;c;owned\u{07}")]),
            ("inet-numbers", [Key.port: .number(.min), Key.protocol: .number(.max), Key.authenticationType: .number(0x1B5B_324A)]),
        ]
    }

    /// What every read verb must do with a keychain holding the planted rows.
    static func check(_ run: Run, _ what: String, secretsAllowed: Bool = false, json: Bool = false,
                      sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!run.signaled, "\(what) was killed by signal \(run.status): \(run.stderr)", sourceLocation: sourceLocation)
        guard !run.signaled else { return }
        for (name, text) in [("standard output", run.stdout), ("standard error", run.stderr)] {
            let controls = text.unicodeScalars.filter { scalar in
                (scalar.value < 0x20 && scalar != "\n" && scalar != "\t") || (0x7F...0x9F).contains(scalar.value)
            }
            #expect(controls.isEmpty, "\(what) printed control characters on \(name): \(controls.map { String($0.value, radix: 16) })",
                    sourceLocation: sourceLocation)
            if !secretsAllowed {
                #expect(!text.contains("s3cr3t-"), "\(what) printed a secret on \(name)", sourceLocation: sourceLocation)
            }
        }
        if json && run.status == 0 {
            #expect(run.stdout.isEmpty == false, "\(what) printed no JSON: \(run.stderr)", sourceLocation: sourceLocation)
            #expect((try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8))) != nil,
                    "\(what) printed invalid JSON: \(run.stdout.prefix(300))", sourceLocation: sourceLocation)
        }
    }

    /// Every read verb, against `keychain`: dumps (with and without the secrets, text and JSON) and the find
    /// verbs for each planted item (attributes only, -g, --json, -g --json, -w).
    static func readEverything(_ keystone: ([String]) throws -> Run, keychain: String,
                               services: [String], servers: [String]) throws -> [String: Run] {
        var runs: [String: Run] = [:]
        func run(_ arguments: [String], secretsAllowed: Bool = false, json: Bool = false) throws {
            let result = try keystone(arguments)
            check(result, arguments.joined(separator: " "), secretsAllowed: secretsAllowed, json: json)
            runs[arguments.joined(separator: " ")] = result
        }
        try run(["dump-keychain", keychain])
        try run(["dump-keychain", "--json", keychain], json: true)
        try run(["dump-keychain", "-d", keychain], secretsAllowed: true)
        try run(["dump-keychain", "-d", "--json", keychain], secretsAllowed: true, json: true)
        for service in services {
            try run(["find-generic-password", "-s", service, keychain])
            try run(["find-generic-password", "-s", service, "--json", keychain], json: true)
            try run(["find-generic-password", "-s", service, "-g", keychain], secretsAllowed: true)
            try run(["find-generic-password", "-s", service, "-g", "--json", keychain], secretsAllowed: true, json: true)
            try run(["find-generic-password", "-s", service, "-w", keychain], secretsAllowed: true)
        }
        for server in servers {
            try run(["find-internet-password", "-s", server, keychain])
            try run(["find-internet-password", "-s", server, "--json", keychain], json: true)
            try run(["find-internet-password", "-s", server, "-g", keychain], secretsAllowed: true)
        }
        return runs
    }

    /// The `cdat` of the item with `service` in `dump-keychain --json`'s output (NSNull when shown as invalid).
    static func jsonAttribute(_ dump: Run, service: String, _ key: String) throws -> Any? {
        let items = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [[String: Any]])
        let item = try #require(items.first { ($0["attributes"] as? [String: Any])?[Key.service] as? String == service },
                                "\(service) is in the dump")
        return (item["attributes"] as? [String: Any])?[key]
    }
}

@Suite("keystone CLI: planted rows with hostile values never crash a read verb nor reach the terminal raw")
struct HostileRowsCLITests {
    /// A keychain file with an empty password (it opens unlocked in every process) holding one normal item per
    /// variant, whose rows are then rewritten with the variant's attributes through the storage itself.
    @Test("a keychain file with out-of-range dates, extreme numbers, mistyped attributes and escapes: every read verb ends normally")
    func keychainFileRows() throws {
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let path = box.root.appendingPathComponent("hostile.keychain-db").path
        #expect(try box.run("create-keychain", "-p", "", path).status == 0)
        let generic = HostileRows.genericVariants()
        let internet = HostileRows.internetVariants()
        do {
            let file = try KeychainFile.open(at: path)
            try file.unlock(password: "")
            let engine = KeychainEngine(storage: file)
            for (service, _) in generic {
                try engine.add([Key.class: .string("genp"), Key.service: .string(service), Key.account: .string("acct"),
                                Key.valueData: .data(Data("s3cr3t-\(service)".utf8))])
            }
            for (server, _) in internet {
                try engine.add([Key.class: .string("inet"), Key.server: .string(server), Key.account: .string("acct"),
                                Key.protocol: .string("htps"), Key.port: .number(443),
                                Key.valueData: .data(Data("s3cr3t-\(server)".utf8))])
            }
            try file.write { writer in
                for (itemClass, key, variants) in [(ItemClass.genericPassword, Key.service, generic.map { ($0.service, $0.attributes) }),
                                                   (.internetPassword, Key.server, internet.map { ($0.server, $0.attributes) })] {
                    for (name, attributes) in variants {
                        guard case .item(var row)? = try writer.candidates(in: itemClass, matching: [key: .string(name)]).first else {
                            Issue.record("\(name) was added")
                            continue
                        }
                        row.attributes.merge(attributes) { $1 }
                        try writer.replace(row)
                    }
                }
            }
            // And one through the engine, whose clock is far out of range: the dates it records are.
            var configuration = EngineConfiguration()
            configuration.now = { Date(timeIntervalSinceReferenceDate: 1e300) }
            try KeychainEngine(storage: file, configuration: configuration)
                .add([Key.class: .string("genp"), Key.service: .string("clock"), Key.valueData: .data(Data("s3cr3t-clock".utf8))])
        }
        let runs = try HostileRows.readEverything({ try box.run($0) }, keychain: path,
                                                  services: generic.map(\.service) + ["clock"], servers: internet.map(\.server))
        let dump = try #require(runs["dump-keychain \(path)"])
        #expect(dump.status == 0, "\(dump.stderr)")
        #expect(dump.stdout.contains("\"cdat\"<timedate>=<invalid date>"), "an out-of-range date is shown as invalid")
        let json = try #require(runs["dump-keychain --json \(path)"])
        #expect(try HostileRows.jsonAttribute(json, service: "clock", Key.creationDate) is NSNull, "an invalid date is null in JSON")
        #expect(try HostileRows.jsonAttribute(json, service: "date-0", Key.creationDate) is NSNull)
        // A date a calendar can show is still shown.
        let normal = try box.run("add-generic-password", "-s", "normal", "-a", "acct", "-w", "s3cr3t-normal", path)
        #expect(normal.status == 0)
        let dated = try box.run("find-generic-password", "-s", "normal", "--json", path)
        let attributes = try #require((try JSONSerialization.jsonObject(with: Data(dated.stdout.utf8)) as? [String: Any])?["attributes"] as? [String: Any])
        #expect((attributes[Key.creationDate] as? String)?.hasSuffix("Z") == true)
        for verb in [["show-keychain-info", path], ["doctor", path], ["doctor", "--json", path]] {
            HostileRows.check(try box.run(verb), verb.joined(separator: " "), json: verb.contains("--json"))
        }
    }

    /// The Secret Service: a real gnome-keyring on a private bus. Items are written by another program of the
    /// session (secret-tool), in Keystone's schema, copying the attributes of an item Keystone wrote and replacing
    /// its `keystone:attributes` with hostile values.
    @Test("Secret Service items in Keystone's schema with hostile dates and values: every read verb ends normally",
          .enabled(if: SecretServiceDaemon.unavailableReason == nil && SecretServiceCLITestsSupport.secretTool != nil,
                   Comment(rawValue: SecretServiceDaemon.unavailableReason ?? "secret-tool not installed (apt-get install libsecret-tools)")))
    func secretServiceRows() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        func keystone(_ arguments: [String]) throws -> Run {
            var environment = daemon.environment
            for key in environment.keys where key.hasPrefix("KEYSTONE_") { environment[key] = nil }
            return try Run.launch(try #require(Sandbox.binary, "the keystone binary is built by `swift build`"), arguments,
                                  environment: environment)
        }
        let generic = HostileRows.genericVariants()
        var planted: [String] = []
        for (service, hostile) in generic {
            #expect(try keystone(["add-generic-password", "-s", service, "-a", "acct", "-w", "s3cr3t-\(service)", "secret-service:"]).status == 0)
            // The attributes Keystone gave it, as any program of the session reads them.
            let search = try daemon.run(["secret-tool", "search", "--all", "service", service])
            let text = String(decoding: search.stdout, as: UTF8.self) + String(decoding: search.stderr, as: UTF8.self)
            var attributes: [(String, String)] = []
            for line in text.split(separator: "\n") where line.hasPrefix("attribute.") {
                guard let equals = line.range(of: " = ") else { continue }
                attributes.append((String(line[line.index(line.startIndex, offsetBy: "attribute.".count)..<equals.lowerBound]),
                                   String(line[equals.upperBound...])))
            }
            guard let encoded = attributes.first(where: { $0.0 == "keystone:attributes" })?.1, let metadata = Data(base64Encoded: encoded),
                  let rowText = attributes.first(where: { $0.0 == "keystone:rowid" })?.1, let rowID = Int64(rowText) else {
                Issue.record("secret-tool shows Keystone's attributes of \(service): \(text)")
                continue
            }
            var row = try RowCodec.decode(metadata, itemClass: .genericPassword, rowID: rowID)
            row.attributes.merge(hostile) { $1 }
            let forged = RowCodec.encode(row).base64EncodedString()
            #expect(try daemon.run(["secret-tool", "clear", "service", service]).status == 0)
            var store = ["secret-tool", "store", "--label=\(service)"]
            for (name, value) in attributes { store += [name, name == "keystone:attributes" ? forged : value] }
            if !attributes.contains(where: { $0.0 == "xdg:schema" }) { store += ["xdg:schema", "dev.keystone.Keychain"] }
            let stored = try daemon.run(store, input: Data("s3cr3t-\(service)".utf8))
            #expect(stored.status == 0, "\(String(decoding: stored.stderr, as: UTF8.self))")
            planted.append(service)
        }
        let runs = try HostileRows.readEverything(keystone, keychain: "secret-service:", services: planted, servers: [])
        let dump = try #require(runs["dump-keychain secret-service:"])
        #expect(dump.status == 0, "\(dump.stderr)")
        // Either the storage takes the copies for Keystone's items and the dates are shown as invalid, or it knows
        // them for copies (they are not sealed to their object path) and leaves them out: never a crash.
        let shown = planted.filter { dump.stdout.contains("\"svce\"<blob>=\"\($0)\"") }
        #expect(shown.isEmpty || dump.stdout.contains("<invalid date>"), "the planted dates are shown as invalid: \(dump.stdout.prefix(400))")
        for service in planted {
            let find = try #require(runs["find-generic-password -s \(service) secret-service:"])
            #expect(find.status == 0 || find.status == 44, "\(service): \(find.stderr)")
            #expect((find.status == 0) == shown.contains(service), "find and dump agree on \(service)")
        }
    }
}

/// Where `secret-tool` is (the Secret Service suite's is private to its file).
enum SecretServiceCLITestsSupport {
    static var secretTool: String? {
        ["/usr/bin/secret-tool", "/usr/local/bin/secret-tool"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}
