#if !canImport(Darwin)
import Foundation
import KeychainEngine
import KeychainSecretService
import KeychainServices
import SecretServiceDaemon
import Testing

/// Why these tests cannot run here, or nil.
let skipReason: String? = SecretServiceDaemon.unavailableReason
    ?? (FileManager.default.isExecutableFile(atPath: "/usr/bin/secret-tool") ? nil : "secret-tool not installed (apt-get install libsecret-tools)")
let pythonKeyringMissing: String? = {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { return "/usr/bin/python3 not installed" }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments = ["-c", "import keyring, secretstorage"]
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return "/usr/bin/python3 cannot run" }
    process.waitUntilExit()
    return process.terminationStatus == 0 ? nil : "Python keyring not installed (apt-get install python3-keyring)"
}()

/// A running private Secret Service and a Keystone engine over it.
struct Fixture {
    let daemon: SecretServiceDaemon
    let storage: SecretServiceStorage
    let engine: KeychainEngine

    init(compatibility: Bool = false, callTimeout: Duration = .seconds(10), maxMessageSize: Int? = 1_000_000_000,
         configure: (inout SecretServiceStorage.Options) -> Void = { _ in }) throws {
        daemon = try SecretServiceDaemon.start(maxMessageSize: maxMessageSize)
        var options = SecretServiceStorage.Options(busAddress: daemon.busAddress, compatibility: compatibility ? Compatibility() : nil)
        options.callTimeout = callTimeout
        options.unlockPrompt = .never
        configure(&options)
        storage = try SecretServiceStorage(options: options)
        engine = KeychainEngine(storage: storage)
    }

    /// Runs a tool on the daemon's bus; its output as text.
    func tool(_ arguments: String..., input: String? = nil) throws -> (status: Int32, out: String, err: String) {
        let run = try daemon.run(arguments, input: input.map { Data($0.utf8) })
        return (run.status, String(decoding: run.stdout, as: UTF8.self), String(decoding: run.stderr, as: UTF8.self))
    }

    func python(_ arguments: String..., input: String? = nil) throws -> (status: Int32, out: String, err: String) {
        let run = try daemon.run(["/usr/bin/python3", "-m", "keyring"] + arguments, input: input.map { Data($0.utf8) })
        return (run.status, String(decoding: run.stdout, as: UTF8.self), String(decoding: run.stderr, as: UTF8.self))
    }
}

func password(_ service: String, _ account: String, _ extra: KeychainQuery = [:]) -> KeychainQuery {
    [Key.class: .string("genp"), Key.service: .string(service), Key.account: .string(account)].merging(extra) { $1 }
}

func status(_ body: () throws -> Void) -> Int32 {
    do { try body(); return 0 } catch let error as EngineError { return error.status } catch { return -1 }
}

func secret(_ engine: KeychainEngine, _ service: String, _ account: String) throws -> String? {
    try engine.copyMatching(password(service, account, [Key.returnData: .bool(true)]))?.data.map { String(decoding: $0, as: UTF8.self) }
}

@Suite("Secret Service storage: shared with the desktop's tools, never hanging, never losing data",
       .enabled(if: skipReason == nil, Comment(rawValue: skipReason ?? "")))
struct SecretServiceTests {
    @Test("a generic password stored by Keystone is found by `secret-tool lookup service S account A`")
    func secretToolFindsKeystoneItems() throws {
        let f = try Fixture()
        try f.engine.add(password("mail.example", "alice", [Key.valueData: .data(Data("s3cret".utf8))]))
        let found = try f.tool("secret-tool", "lookup", "service", "mail.example", "account", "alice")
        #expect(found.status == 0)
        #expect(found.out == "s3cret")
        #expect(try f.tool("secret-tool", "lookup", "service", "mail.example", "account", "bob").status != 0)
    }

    @Test("the label desktop tools show reads `service (account)`, or the item's own label")
    func labels() throws {
        let f = try Fixture()
        try f.engine.add(password("mail.example", "alice", [Key.valueData: .data(Data("a".utf8))]))
        try f.engine.add(password("mail.example", "bob", [Key.valueData: .data(Data("b".utf8)), Key.label: .string("Bob's mail")]))
        let listing = try f.tool("secret-tool", "search", "--all", "service", "mail.example")
        #expect(listing.out.contains("label = mail.example (alice)"))
        #expect(listing.out.contains("label = Bob's mail"))
    }

    @Test("the secret travels only as the item's secret: no attribute holds it")
    func secretNotInAttributes() throws {
        let f = try Fixture()
        try f.engine.add(password("svc", "acct", [Key.valueData: .data(Data("TOPSECRET-123".utf8)), Key.comment: .string("note")]))
        let listing = try f.tool("secret-tool", "search", "--all", "--unlock", "service", "svc")
        let attributeLines = (listing.out + listing.err).split(separator: "\n").filter { $0.hasPrefix("attribute.") || $0.hasPrefix("label") }
        #expect(!attributeLines.isEmpty)
        for line in attributeLines { #expect(!line.contains("TOPSECRET-123")) }
    }

    @Test("accounts that are not text (bytes, a NUL) round-trip and stay distinct")
    func binaryAccounts() throws {
        let f = try Fixture()
        let raw = Data([0xff, 0x00, 0x41])
        try f.engine.add([Key.class: .string("genp"), Key.service: .string("bin"), Key.account: .data(raw), Key.valueData: .data(Data("x".utf8))])
        try f.engine.add([Key.class: .string("genp"), Key.service: .string("bin"), Key.account: .string("base64:/wBB"), Key.valueData: .data(Data("y".utf8))])
        let x = try f.engine.copyMatching([Key.class: .string("genp"), Key.service: .string("bin"), Key.account: .data(raw), Key.returnData: .bool(true)])
        let y = try f.engine.copyMatching([Key.class: .string("genp"), Key.service: .string("bin"), Key.account: .string("base64:/wBB"), Key.returnData: .bool(true)])
        #expect(x?.data == Data("x".utf8))
        #expect(y?.data == Data("y".utf8))
    }

    @Test("KEYSTONE_BACKEND=secret-service makes the SecItem functions' keychain the Secret Service, once installed")
    func environmentSelects() throws {
        let f = try Fixture()
        // As an app does at start-up (product KeychainSecretService).
        KeychainServicesDefaults.bootstrap(.secretService)
        let engine = try KeychainServicesDefaults.environmentEngine(["KEYSTONE_BACKEND": "secret-service", "DBUS_SESSION_BUS_ADDRESS": f.daemon.busAddress])
        #expect(engine.storage is SecretServiceStorage)
        try engine.add(password("env", "a", [Key.valueData: .data(Data("via env".utf8))]))
        #expect(try f.tool("secret-tool", "lookup", "service", "env", "account", "a").out == "via env")
        #expect(status { _ = try KeychainServicesDefaults.environmentEngine(["KEYSTONE_BACKEND": "bogus"]) } == Status.param)
    }

    // MARK: - Locked, gone, stuck

    @Test("a locked collection answers errSecInteractionNotAllowed to every operation, prompts nobody, and loses nothing")
    func lockedCollection() throws {
        let f = try Fixture()
        try f.engine.add(password("svc", "a", [Key.valueData: .data(Data("one".utf8))]))
        try f.engine.add(password("svc", "b", [Key.valueData: .data(Data("two".utf8))]))
        try f.daemon.lockDefaultCollection()
        #expect(status { _ = try secret(f.engine, "svc", "a") } == Status.interactionNotAllowed)
        #expect(status { try f.engine.add(password("svc", "c", [Key.valueData: .data(Data("3".utf8))])) } == Status.interactionNotAllowed)
        #expect(status { try f.engine.update(password("svc", "a"), with: [Key.valueData: .data(Data("changed".utf8))]) } == Status.interactionNotAllowed)
        #expect(status { try f.engine.delete([Key.class: .string("genp"), Key.service: .string("svc")]) } == Status.interactionNotAllowed)
        #expect(f.storage.lockState == .locked)
        // Unlock the way a login does (the daemon started again with the password): everything is as it was.
        try f.daemon.restartKeyringDaemon()
        #expect(try secret(f.engine, "svc", "a") == "one")
        #expect(try secret(f.engine, "svc", "b") == "two")
        #expect(status { _ = try secret(f.engine, "svc", "c") } == Status.itemNotFound)
        #expect(f.storage.lockState == .unlocked)
    }

    @Test("the daemon killed mid-run: calls fail with errSecNotAvailable saying what to start; after a restart the items are there")
    func daemonKilled() throws {
        let f = try Fixture()
        try f.engine.add(password("svc", "a", [Key.valueData: .data(Data("kept".utf8))]))
        try f.daemon.killKeyringDaemon()
        do {
            _ = try secret(f.engine, "svc", "a")
            Issue.record("a read with no daemon succeeded")
        } catch let error as EngineError {
            #expect(error.status == Status.notAvailable)
            #expect(error.reason.contains("gnome-keyring-daemon"))
        }
        #expect(status { try f.engine.add(password("svc", "b", [Key.valueData: .data(Data("x".utf8))])) } == Status.notAvailable)
        try f.daemon.restartKeyringDaemon()
        #expect(try secret(f.engine, "svc", "a") == "kept")  // the same storage connects again, with a new session
    }

    @Test("no session bus, or no Secret Service on it: errSecNotAvailable with what to start")
    func nothingToConnectTo() throws {
        do {
            _ = try SecretServiceStorage(options: .init(busAddress: "unix:path=/nonexistent/keystone-bus"))
            Issue.record("connected to a bus that does not exist")
        } catch let error as EngineError {
            #expect(error.status == Status.notAvailable)
            #expect(error.reason.contains("dbus-run-session"))
        }
        let daemon = try SecretServiceDaemon.start()
        try daemon.killKeyringDaemon()
        do {
            _ = try SecretServiceStorage(options: .init(busAddress: daemon.busAddress))
            Issue.record("connected with no Secret Service on the bus")
        } catch let error as EngineError {
            #expect(error.status == Status.notAvailable)
            #expect(error.reason.contains("gnome-keyring-daemon"))
        }
        #expect(throws: EngineError.self) {
            _ = try SecretServiceStorage(options: .init(collection: .named("no-such-collection"), busAddress: daemon.busAddress))
        }
        daemon.stop()
    }

    @Test("a daemon that stops answering: the call returns errSecNotAvailable at its deadline instead of hanging")
    func stuckDaemon() throws {
        let f = try Fixture(callTimeout: .seconds(1))
        try f.engine.add(password("svc", "a", [Key.valueData: .data(Data("x".utf8))]))
        let owner = try f.tool("gdbus", "call", "--address", f.daemon.busAddress, "--dest", "org.freedesktop.DBus",
                               "--object-path", "/org/freedesktop/DBus", "--method", "org.freedesktop.DBus.GetConnectionUnixProcessID",
                               "org.freedesktop.secrets")
        guard let pid = owner.out.split(separator: " ").last.flatMap({ Int32($0.filter(\.isNumber)) }) else {
            Issue.record("no pid for the daemon: \(owner.out)")
            return
        }
        kill(pid, SIGSTOP)
        defer { kill(pid, SIGCONT) }
        // Time is the behaviour here: the deadline (1 s) ends the call.
        let error = #expect(throws: EngineError.self) { _ = try secret(f.engine, "svc", "a") }
        #expect(error?.status == Status.notAvailable)
        #expect(error?.reason.contains("did not answer") == true)
        kill(pid, SIGCONT)
        #expect(try secret(f.engine, "svc", "a") == "x")
    }

    // MARK: - Attacks

    @Test("an item whose lookup attributes another program changed is ignored, never returned as another account's, and left in place")
    func tamperedLookup() throws {
        let f = try Fixture()
        try f.engine.add(password("svc", "alice", [Key.valueData: .data(Data("alice's".utf8))]))
        let paths = try f.tool("secret-tool", "search", "--all", "service", "svc")
        guard let path = paths.out.split(separator: "\n").first(where: { $0.hasPrefix("[/") }).map({ String($0.dropFirst().prefix { $0 != "]" }) }) else {
            Issue.record("no item listed: \(paths.out)")
            return
        }
        // Read its attributes, change only `account` (as any program on the session bus can), write them back.
        let got = try f.tool("gdbus", "call", "--address", f.daemon.busAddress, "--dest", "org.freedesktop.secrets",
                             "--object-path", "/org/freedesktop/secrets/collection/login/" + path.split(separator: "/").last!,
                             "--method", "org.freedesktop.DBus.Properties.Get", "org.freedesktop.Secret.Item", "Attributes")
        let attributes = got.out.replacingOccurrences(of: "(<", with: "").replacingOccurrences(of: ">,)", with: "")
            .replacingOccurrences(of: "'account': 'alice'", with: "'account': 'mallory'")
        #expect(attributes.contains("'account': 'mallory'"))
        let set = try f.tool("gdbus", "call", "--address", f.daemon.busAddress, "--dest", "org.freedesktop.secrets",
                             "--object-path", "/org/freedesktop/secrets/collection/login/" + path.split(separator: "/").last!,
                             "--method", "org.freedesktop.DBus.Properties.Set", "org.freedesktop.Secret.Item", "Attributes",
                             "<\(attributes)>")
        #expect(set.status == 0, "\(set.err)")
        // Its seal no longer matches its attributes: it is not Keystone's item any more.
        #expect(status { _ = try secret(f.engine, "svc", "mallory") } == Status.itemNotFound)
        #expect(status { _ = try secret(f.engine, "svc", "alice") } == Status.itemNotFound)
        // A delete of the whole service leaves it alone: nothing is deleted because it could not be trusted.
        #expect(status { try f.engine.delete([Key.class: .string("genp"), Key.service: .string("svc")]) } == Status.itemNotFound)
        #expect(try f.tool("secret-tool", "lookup", "service", "svc", "account", "mallory").out == "alice's")
    }

    @Test("another program's items are not Keystone's without compatibility mode")
    func foreignItemsIgnored() throws {
        let f = try Fixture()
        #expect(try f.tool("secret-tool", "store", "--label=x", "service", "svc", "account", "a", input: "theirs").status == 0)
        #expect(status { _ = try secret(f.engine, "svc", "a") } == Status.itemNotFound)
        try f.engine.add(password("svc", "a", [Key.valueData: .data(Data("ours".utf8))]))  // no duplicate: not ours
        #expect(try secret(f.engine, "svc", "a") == "ours")
    }
}

@Suite("Secret Service compatibility mode: the same passwords as Python keyring, go-keyring and keyring-rs",
       .enabled(if: skipReason == nil && pythonKeyringMissing == nil, Comment(rawValue: skipReason ?? pythonKeyringMissing ?? "")))
struct SecretServiceCompatibilityTests {
    @Test("`python3 -m keyring get S U` prints what Keystone stored")
    func pythonReadsKeystone() throws {
        let f = try Fixture(compatibility: true)
        try f.engine.add(password("svc", "user", [Key.valueData: .data(Data("from keystone".utf8))]))
        let got = try f.python("get", "svc", "user")
        #expect(got.status == 0, "\(got.err)")
        #expect(got.out == "from keystone\n")
    }

    @Test("Keystone reads what `python3 -m keyring set S U` stored, as a generic password")
    func keystoneReadsPython() throws {
        let f = try Fixture(compatibility: true)
        #expect(try f.python("set", "svc", "user", input: "from python\n").status == 0)
        #expect(try secret(f.engine, "svc", "user") == "from python")
        let attributes = try f.engine.copyMatching(password("svc", "user", [Key.returnAttributes: .bool(true)]))?.attributes
        #expect(attributes?[Key.label] == .string("Password for 'user' on 'svc'"))
        #expect(attributes?[Key.accessGroup] == .string("default"))
    }

    @Test("Python keyring's set over a Keystone item updates that item: one item, the new secret, for both")
    func pythonSetReplaces() throws {
        let f = try Fixture(compatibility: true)
        try f.engine.add(password("svc", "user", [Key.valueData: .data(Data("old".utf8))]))
        #expect(try f.python("set", "svc", "user", input: "new\n").status == 0)
        #expect(try secret(f.engine, "svc", "user") == "new")
        let all = try f.engine.copyMatching([Key.class: .string("genp"), Key.service: .string("svc"),
                                             Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true)])
        #expect(all?.array?.count == 1)
        #expect(try f.python("get", "svc", "user").out == "new\n")
    }

    @Test("adding a password Python keyring already stores fails with errSecDuplicateItem; update changes it for both")
    func duplicateAcrossTools() throws {
        let f = try Fixture(compatibility: true)
        #expect(try f.python("set", "svc", "user", input: "theirs\n").status == 0)
        #expect(status { try f.engine.add(password("svc", "user", [Key.valueData: .data(Data("mine".utf8))])) } == Status.duplicateItem)
        try f.engine.update(password("svc", "user"), with: [Key.valueData: .data(Data("updated".utf8))])
        #expect(try f.python("get", "svc", "user").out == "updated\n")
        #expect(try secret(f.engine, "svc", "user") == "updated")
        let listing = try f.tool("secret-tool", "search", "--all", "service", "svc")
        #expect(listing.out.components(separatedBy: "label = ").count - 1 == 1)  // replaced, not added beside
    }

    @Test("`python3 -m keyring del` removes what Keystone stored, and Keystone's delete removes what Python stored")
    func deletesAcrossTools() throws {
        let f = try Fixture(compatibility: true)
        try f.engine.add(password("svc", "a", [Key.valueData: .data(Data("1".utf8))]))
        #expect(try f.python("del", "svc", "a").status == 0)
        #expect(status { _ = try secret(f.engine, "svc", "a") } == Status.itemNotFound)
        #expect(try f.python("set", "svc", "b", input: "2\n").status == 0)
        try f.engine.delete(password("svc", "b"))
        #expect(try f.python("get", "svc", "b").status != 0 || (try f.python("get", "svc", "b").out.isEmpty))
    }
}
#endif

#if !canImport(Darwin)
/// CI's own session (`.ci/run` runs the tests under `dbus-run-session` with an unlocked gnome-keyring): the storage
/// with default options finds the bus and the default collection as a desktop program would. Opt-in, so a developer's
/// real keyring is never written to.
@Suite("Secret Service storage in this session's bus, with default options",
       .enabled(if: ProcessInfo.processInfo.environment["KEYSTONE_TEST_AMBIENT_SECRET_SERVICE"] == "1",
                "set KEYSTONE_TEST_AMBIENT_SECRET_SERVICE=1 under dbus-run-session with an unlocked keyring (as .ci/run does)"))
struct AmbientSecretServiceTests {
    @Test("default options reach the session's default collection: add, read, delete")
    func defaultOptions() throws {
        let engine = KeychainEngine(storage: try SecretServiceStorage())
        let service = "keystone-ci-\(UUID().uuidString)"
        try engine.add(password(service, "ci", [Key.valueData: .data(Data("ambient".utf8))]))
        #expect(try secret(engine, service, "ci") == "ambient")
        try engine.delete(password(service, "ci"))
        #expect(status { _ = try secret(engine, service, "ci") } == Status.itemNotFound)
    }
}
#endif
