#if !canImport(Darwin)
import Foundation
import KeychainEngine
import KeychainSecretService
import SecretServiceDaemon
import Testing

/// An item of the private daemon's login collection as another program of the session sees it.
struct ServiceItem {
    var path: String
    var attributes: [String: String]
}

extension Fixture {
    /// The object paths and attributes of the collection's items holding `attributes` (SearchItems, then the
    /// `Attributes` property of each, through `gdbus`: what any program of the session can do).
    func items(_ attributes: [String: String]) throws -> [ServiceItem] {
        let query = "{" + attributes.map { "'\($0.key)': '\($0.value)'" }.joined(separator: ", ") + "}"
        let search = try tool("gdbus", "call", "--address", daemon.busAddress, "--dest", "org.freedesktop.secrets",
                              "--object-path", "/org/freedesktop/secrets/collection/login",
                              "--method", "org.freedesktop.Secret.Collection.SearchItems", query)
        guard search.status == 0 else { throw Failure(description: "SearchItems failed: \(search.err)") }
        let paths = search.out.split(separator: "'").map(String.init).filter { $0.hasPrefix("/org/freedesktop/secrets/collection/") }
        return try paths.map { path in
            let got = try tool("gdbus", "call", "--address", daemon.busAddress, "--dest", "org.freedesktop.secrets",
                               "--object-path", path, "--method", "org.freedesktop.DBus.Properties.Get",
                               "org.freedesktop.Secret.Item", "Attributes")
            guard got.status == 0 else { throw Failure(description: "Get Attributes failed: \(got.err)") }
            var found: [String: String] = [:]
            let pattern = try NSRegularExpression(pattern: "'([^']*)': '([^']*)'")
            let text = got.out as NSString
            for match in pattern.matches(in: got.out, range: NSRange(location: 0, length: text.length)) {
                found[text.substring(with: match.range(at: 1))] = text.substring(with: match.range(at: 2))
            }
            return ServiceItem(path: path, attributes: found)
        }
    }

    /// Creates an item with exactly these attributes and this secret, as `secret-tool store` does.
    func plant(_ attributes: [String: String], secret: String, label: String = "planted") throws {
        var arguments = ["secret-tool", "store", "--label=\(label)"]
        for (key, value) in attributes.sorted(by: { $0.key < $1.key }) { arguments += [key, value] }
        let stored = try daemon.run(arguments, input: Data(secret.utf8))
        guard stored.status == 0 else { throw Failure(description: "secret-tool store failed: \(String(decoding: stored.stderr, as: UTF8.self))") }
    }

    /// Replaces an item's attributes (Properties.Set, as any program of the session can).
    func setAttributes(_ path: String, _ attributes: [String: String]) throws {
        let dictionary = "<{" + attributes.map { "'\($0.key)': '\($0.value)'" }.joined(separator: ", ") + "}>"
        let set = try tool("gdbus", "call", "--address", daemon.busAddress, "--dest", "org.freedesktop.secrets",
                           "--object-path", path, "--method", "org.freedesktop.DBus.Properties.Set",
                           "org.freedesktop.Secret.Item", "Attributes", dictionary)
        guard set.status == 0 else { throw Failure(description: "Properties.Set failed: \(set.err)") }
    }

    /// Keystone's item for a generic password (exactly one expected).
    func keystoneItem(_ service: String, _ account: String) throws -> ServiceItem {
        let found = try items(["xdg:schema": "dev.keystone.Keychain", "service": service, "account": account])
        guard found.count == 1, let item = found.first else { throw Failure(description: "expected one item, found \(found.count)") }
        return item
    }
}

struct Failure: Error, CustomStringConvertible {
    let description: String
}

@Suite("Secret Service storage: what other programs of the session write is never taken for Keystone's own",
       .enabled(if: skipReason == nil, Comment(rawValue: skipReason ?? "")))
struct SecretServiceIntegrityTests {
    @Test("a copy of an item with a higher keystone:generation and another secret is not returned as the owner's")
    func copiedHigherGeneration() throws {
        let f = try Fixture()
        try f.engine.add(password("mail", "alice", [Key.valueData: .data(Data("alice's own".utf8))]))
        var attributes = try f.keystoneItem("mail", "alice").attributes
        let generation = Int(attributes["keystone:generation"] ?? "") ?? 0
        attributes["keystone:generation"] = String(generation + 5)
        try f.plant(attributes, secret: "planted")
        #expect(try secret(f.engine, "mail", "alice") == "alice's own")
        // The owner's update lands on the owner's item, and the planted copy stays as it was.
        try f.engine.update(password("mail", "alice"), with: [Key.valueData: .data(Data("changed".utf8))])
        #expect(try secret(f.engine, "mail", "alice") == "changed")
        let copies = try f.items(["xdg:schema": "dev.keystone.Keychain", "service": "mail", "account": "alice",
                                  "keystone:generation": String(generation + 5)])
        #expect(copies.count == 1)
    }

    @Test("a same-length edit of keystone:attributes and the lookup attribute that renames the account is not returned under the new name")
    func renamedInPlace() throws {
        let f = try Fixture()
        try f.engine.add(password("mail", "alice", [Key.valueData: .data(Data("alice's own".utf8))]))
        let item = try f.keystoneItem("mail", "alice")
        guard let encoded = item.attributes["keystone:attributes"], var metadata = Data(base64Encoded: encoded),
              let range = metadata.range(of: Data("alice".utf8)) else {
            Issue.record("no account in keystone:attributes")
            return
        }
        metadata.replaceSubrange(range, with: Data("mally".utf8))
        var attributes = item.attributes
        attributes["keystone:attributes"] = metadata.base64EncodedString()
        attributes["account"] = "mally"
        try f.setAttributes(item.path, attributes)
        #expect(status { _ = try secret(f.engine, "mail", "mally") } == Status.itemNotFound)
        #expect(status { _ = try secret(f.engine, "mail", "alice") } == Status.itemNotFound)
        // Nothing is deleted because it could not be trusted: the edited item is still there for its owner to see.
        #expect(try f.tool("secret-tool", "lookup", "service", "mail", "account", "mally").out == "alice's own")
    }

    @Test("a twin of an item with another keystone:rowid does not make the owner's update fail")
    func twinDoesNotBlockUpdate() throws {
        let f = try Fixture()
        try f.engine.add(password("mail", "alice", [Key.valueData: .data(Data("alice's own".utf8))]))
        var attributes = try f.keystoneItem("mail", "alice").attributes
        guard let rowID = attributes["keystone:rowid"].flatMap(Int64.init) else {
            Issue.record("no keystone:rowid")
            return
        }
        attributes["keystone:rowid"] = String(rowID + 1)
        try f.plant(attributes, secret: "twin")
        try f.engine.update(password("mail", "alice"), with: [Key.valueData: .data(Data("changed".utf8))])
        #expect(try secret(f.engine, "mail", "alice") == "changed")
        let twins = try f.items(["xdg:schema": "dev.keystone.Keychain", "keystone:rowid": String(rowID + 1)])
        #expect(twins.count == 1)
    }

    @Test("a .userPresence item is refused with errSecUnimplemented and nothing is written: its secret would be one `secret-tool lookup` away")
    func accessControlRefused() throws {
        let f = try Fixture()
        let control = AccessControl(accessibility: .whenUnlocked, flags: [.userPresence])
        let error = #expect(throws: EngineError.self) {
            try f.engine.add(password("vault", "alice", [Key.valueData: .data(Data("guarded".utf8)),
                                                        Key.accessControl: .accessControl(control)]))
        }
        #expect(error?.status == Status.unimplemented)
        #expect(error?.reason.contains("secret-tool") == true)
        #expect(try f.items(["service": "vault"]).isEmpty)
    }

    @Test("with KEYSTONE_SECRET_SERVICE_UNENFORCED_ACCESS_CONTROL=1 (the opt-in), a .userPresence item is stored, and the desktop's tools read its secret")
    func accessControlOptIn() throws {
        let options = SecretServiceStorage.Options(environment: ["KEYSTONE_SECRET_SERVICE_UNENFORCED_ACCESS_CONTROL": "1"])
        #expect(options.allowsUnenforcedAccessControl)
        #expect(!SecretServiceStorage.Options(environment: [:]).allowsUnenforcedAccessControl)
        let f = try Fixture { $0.allowsUnenforcedAccessControl = true }
        let control = AccessControl(accessibility: .whenUnlocked, flags: [.userPresence])
        try f.engine.add(password("vault", "alice", [Key.valueData: .data(Data("guarded".utf8)), Key.accessControl: .accessControl(control)]))
        #expect(try f.tool("secret-tool", "lookup", "service", "vault", "account", "alice").out == "guarded")
    }

    @Test("an item written before seals existed (no seal, no seal key yet) is still read, and still read after the first sealed write")
    func legacyItemsStayReadable() throws {
        let f = try Fixture()
        try f.engine.add(password("old", "alice", [Key.valueData: .data(Data("from before".utf8))]))
        var attributes = try f.keystoneItem("old", "alice").attributes
        attributes["keystone:seal"] = nil
        attributes["keystone:size"] = nil
        // The collection as an older Keystone left it: the item without a seal, and no seal key.
        #expect(try f.tool("secret-tool", "clear", "service", "old", "account", "alice").status == 0)
        #expect(try f.tool("secret-tool", "clear", "keystone:class", "seal-key").status == 0)
        try f.plant(attributes, secret: "from before")
        let fresh = try SecretServiceStorage(options: { var o = SecretServiceStorage.Options(busAddress: f.daemon.busAddress); o.unlockPrompt = .never; return o }())
        let engine = KeychainEngine(storage: fresh)
        #expect(try secret(engine, "old", "alice") == "from before")
        try engine.add(password("new", "bob", [Key.valueData: .data(Data("sealed".utf8))]))
        #expect(try f.items(["keystone:class": "seal-key"]).count == 1)
        #expect(try secret(engine, "old", "alice") == "from before")
        #expect(try secret(engine, "new", "bob") == "sealed")
        // Updating it writes a sealed version.
        try engine.update(password("old", "alice"), with: [Key.valueData: .data(Data("now sealed".utf8))])
        #expect(try f.keystoneItem("old", "alice").attributes["keystone:seal"] != nil)
        #expect(try secret(engine, "old", "alice") == "now sealed")
    }

    @Test("a 64 MiB secret fails with errSecDataTooLarge naming the limit; the daemon stays up and a small item still round-trips")
    func hugeSecret() throws {
        let f = try Fixture()
        let error = #expect(throws: EngineError.self) {
            try f.engine.add(password("big", "a", [Key.valueData: .data(Data(repeating: 0x61, count: 64 << 20))]))
        }
        #expect(error?.status == Status.dataTooLarge)
        #expect(error?.reason.contains("16 MiB") == true, "\(error?.reason ?? "")")
        try f.engine.add(password("small", "a", [Key.valueData: .data(Data("fits".utf8))]))
        #expect(try secret(f.engine, "small", "a") == "fits")
        #expect(status { _ = try secret(f.engine, "big", "a") } == Status.itemNotFound)
    }

    @Test("a secret the bus drops for its size (a bus whose max_message_size is 1 MiB) fails with errSecDataTooLarge, not 'no Secret Service'")
    func droppedByTheBus() throws {
        let f = try Fixture(maxMessageSize: 1 << 20)
        let error = #expect(throws: EngineError.self) {
            try f.engine.add(password("big", "a", [Key.valueData: .data(Data(repeating: 0x61, count: 2 << 20))]))
        }
        #expect(error?.status == Status.dataTooLarge)
        #expect(error?.reason.contains("max_message_size") == true, "\(error?.reason ?? "")")
        try f.engine.add(password("small", "a", [Key.valueData: .data(Data("fits".utf8))]))
        #expect(try secret(f.engine, "small", "a") == "fits")
    }

    @Test("reading several large secrets at once never makes the bus drop the daemon (dbus-daemon's default 32 MiB messages)")
    func largeSecretsReadTogether() throws {
        let f = try Fixture(maxMessageSize: nil)
        for account in ["a", "b", "c"] {
            try f.engine.add(password("large", account, [Key.valueData: .data(Data(repeating: UInt8(ascii: "x"), count: 12 << 20))]))
        }
        let all = try f.engine.copyMatching([Key.class: .string("genp"), Key.service: .string("large"),
                                             Key.matchLimit: .string(Key.matchLimitAll), Key.returnData: .bool(true)])
        #expect(all?.array?.count == 3)
        try f.engine.add(password("small", "a", [Key.valueData: .data(Data("fits".utf8))]))
        #expect(try secret(f.engine, "small", "a") == "fits")
    }
}
#endif

#if !canImport(Darwin)
@testable import KeychainSecretService

/// The seal's verdicts themselves, with the service's dates given (no clock involved).
@Suite("Secret Service seals: which items are Keystone's as they stand")
struct SealVerdictTests {
    let key = Seal.Key(path: "/org/freedesktop/secrets/collection/login/1", bytes: Data(repeating: 7, count: 32), created: 1_000)
    let attributes: [(String, String)] = [("xdg:schema", "dev.keystone.Keychain"), ("keystone:class", "genp"), ("service", "mail"),
                                          ("account", "alice"), ("keystone:rowid", "42"), ("keystone:generation", "1"),
                                          ("keystone:attributes", "AAAA")]

    func info(_ attributes: [(String, String)], modified: UInt64 = 2_000) -> SecretServiceClient.ItemInfo {
        SecretServiceClient.ItemInfo(attributes: Dictionary(attributes, uniquingKeysWith: { $1 }), label: "x", locked: false,
                                     created: modified, modified: modified)
    }

    @Test("an item sealed at its own path verifies; the same attributes at another path (a copy) do not")
    func boundToPath() {
        let path = "/org/freedesktop/secrets/collection/login/5"
        let sealed = attributes + [(Seal.attribute, Seal.seal(path: path, attributes: attributes, key: key))]
        #expect(Seal.verdict(path: path, info: info(sealed), keys: [key]) == .sealed)
        guard case .refused = Seal.verdict(path: "/org/freedesktop/secrets/collection/login/6", info: info(sealed), keys: [key]) else {
            Issue.record("a copy at another path verified")
            return
        }
    }

    @Test("an unsealed item modified after the seal key was made is refused (a stripped seal); one from before is legacy")
    func strippedSeal() {
        #expect(Seal.verdict(path: "/p", info: info(attributes, modified: 1_001), keys: [key]) != .legacy)
        #expect(Seal.verdict(path: "/p", info: info(attributes, modified: 999), keys: [key]) == .legacy)
        #expect(Seal.verdict(path: "/p", info: info(attributes, modified: 5_000), keys: []) == .legacy)
    }

    @Test("attributes a Secret Service adds of its own do not break a seal; a changed Keystone attribute does")
    func covered() {
        let path = "/org/freedesktop/secrets/collection/login/5"
        let sealed = attributes + [(Seal.attribute, Seal.seal(path: path, attributes: attributes, key: key))]
        #expect(Seal.verdict(path: path, info: info(sealed + [("gkr:extra", "1")]), keys: [key]) == .sealed)
        let edited = sealed.map { $0.0 == "keystone:generation" ? ($0.0, "9") : $0 }
        #expect(Seal.verdict(path: path, info: info(edited), keys: [key]) != .sealed)
        #expect(Seal.verdict(path: path, info: info(sealed), keys: []) != .sealed)
    }
}
#endif

#if !canImport(Darwin)
@Suite("Secret Service seals: recovery after the seal key item was deleted",
       .enabled(if: skipReason == nil, Comment(rawValue: skipReason ?? "")))
struct SealRecoveryTests {
    @Test("without the seal key Keystone's items are ignored (never deleted); resealItems() adopts them again, and not a damaged one")
    func resealAfterKeyDeleted() throws {
        let f = try Fixture()
        try f.engine.add(password("mail", "alice", [Key.valueData: .data(Data("alice's own".utf8))]))
        try f.engine.add(password("mail", "bob", [Key.valueData: .data(Data("bob's own".utf8))]))
        // Bob's lookup attribute edited to another account: damaged, whatever the seal says.
        let bob = try f.keystoneItem("mail", "bob")
        var edited = bob.attributes
        edited["account"] = "carol"
        try f.setAttributes(bob.path, edited)
        #expect(try f.tool("secret-tool", "clear", "keystone:class", "seal-key").status == 0)
        #expect(status { _ = try secret(f.engine, "mail", "alice") } == Status.itemNotFound)
        #expect(try f.tool("secret-tool", "lookup", "service", "mail", "account", "alice").out == "alice's own")
        #expect(try f.storage.resealItems() == 1)
        #expect(try secret(f.engine, "mail", "alice") == "alice's own")
        #expect(status { _ = try secret(f.engine, "mail", "carol") } == Status.itemNotFound)
        #expect(try f.storage.resealItems() == 0)
    }
}
#endif
