import Foundation
import SecretServiceDaemon
import Testing

/// Why these tests cannot run here, or nil: the daemons, and `secret-tool` for the round trips.
private let skipReason: String? = SecretServiceDaemon.unavailableReason
    ?? (SecretServiceCLITests.secretTool == nil ? "secret-tool not installed (apt-get install libsecret-tools)" : nil)

/// The `keystone` binary against a private Secret Service: each test starts a daemon of its own (its own bus, keyring
/// and XDG directories) and runs the tool with the daemon's environment.
@Suite("keystone CLI: the Secret Service as a keychain (secret-service:, KEYSTONE_BACKEND, doctor)",
       .enabled(if: skipReason == nil, Comment(rawValue: skipReason ?? "")))
struct SecretServiceCLITests {
    static var secretTool: String? {
        ["/usr/bin/secret-tool", "/usr/local/bin/secret-tool"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs `keystone` with the daemon's environment (no KEYSTONE_* variable from outside), changed by `changes`
    /// (nil removes a variable).
    private func keystone(_ daemon: SecretServiceDaemon, _ arguments: [String], changes: [String: String?] = [:],
                          input: String? = nil) throws -> Run {
        var environment = daemon.environment
        for key in environment.keys where key.hasPrefix("KEYSTONE_") { environment[key] = nil }
        for (key, value) in changes { environment[key] = value }
        return try Run.launch(try #require(Sandbox.binary, "the keystone binary is built by `swift build`"), arguments,
                              environment: environment, input: input.map { Data($0.utf8) })
    }

    /// `secret-tool lookup service S account A`: its secret, or nil when it exits non-zero (nothing found).
    private func lookup(_ daemon: SecretServiceDaemon, service: String, account: String) throws -> String? {
        let found = try daemon.run(["secret-tool", "lookup", "service", service, "account", account])
        return found.status == 0 ? String(decoding: found.stdout, as: UTF8.self) : nil
    }

    private func doctorJSON(_ run: Run) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8))
        return try #require(object as? [String: Any], "doctor --json prints one object: \(run.stdout)")
    }

    @Test("add to secret-service: is what secret-tool finds; find prints it; a second add is a duplicate (45); delete removes it")
    func roundTrip() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        let add = try keystone(daemon, ["add-generic-password", "-s", "S", "-a", "A", "-w", "pw", "secret-service:"])
        #expect(add.status == 0, "\(add.stderr)")
        #expect(try lookup(daemon, service: "S", account: "A") == "pw")

        let find = try keystone(daemon, ["find-generic-password", "-s", "S", "-a", "A", "-w", "secret-service:"])
        #expect(find.status == 0, "\(find.stderr)")
        #expect(find.stdout == "pw\n")

        let duplicate = try keystone(daemon, ["add-generic-password", "-s", "S", "-a", "A", "-w", "other", "secret-service:"])
        #expect(duplicate.status == 45)
        #expect(duplicate.stderr.contains("The specified item already exists in the keychain."))
        #expect(try lookup(daemon, service: "S", account: "A") == "pw")

        let delete = try keystone(daemon, ["delete-generic-password", "-s", "S", "-a", "A", "secret-service:"])
        #expect(delete.status == 0, "\(delete.stderr)")
        #expect(delete.stdout.contains("password has been deleted."))
        #expect(try lookup(daemon, service: "S", account: "A") == nil)
        #expect(!FileManager.default.fileExists(atPath: "\(daemon.root)/data/keystone/login.keychain-db"),
                "no keychain file is created when the Secret Service is named")
    }

    @Test("KEYSTONE_BACKEND=secret-service makes the Secret Service the default keychain")
    func backendVariable() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        let backend: [String: String?] = ["KEYSTONE_BACKEND": "secret-service"]
        let add = try keystone(daemon, ["add-generic-password", "-s", "svc", "-a", "acct", "-w", "from-env"], changes: backend)
        #expect(add.status == 0, "\(add.stderr)")
        #expect(try lookup(daemon, service: "svc", account: "acct") == "from-env")
        let find = try keystone(daemon, ["find-generic-password", "-s", "svc", "-a", "acct", "-w"], changes: backend)
        #expect(find.status == 0 && find.stdout == "from-env\n", "\(find.stderr)")
        let shown = try keystone(daemon, ["default-keychain"], changes: backend)
        #expect(shown.stdout.contains("secret-service:"))
        #expect(!FileManager.default.fileExists(atPath: "\(daemon.root)/data/keystone/login.keychain-db"))

        // The named collection form, and `file` back to the keychain file.
        let named = try keystone(daemon, ["find-generic-password", "-s", "svc", "-a", "acct", "-w"],
                                 changes: ["KEYSTONE_BACKEND": "secret-service:login"])
        #expect(named.stdout == "from-env\n", "\(named.stderr)")
        let file = try keystone(daemon, ["find-generic-password", "-s", "svc", "-a", "acct", "-w"], changes: ["KEYSTONE_BACKEND": "file"])
        #expect(file.status == 44)
        // KEYSTONE_KEYCHAIN wins over KEYSTONE_BACKEND.
        let explicit = try keystone(daemon, ["find-generic-password", "-s", "svc", "-a", "acct", "-w"],
                                    changes: ["KEYSTONE_BACKEND": "file", "KEYSTONE_KEYCHAIN": "secret-service:"])
        #expect(explicit.stdout == "from-env\n", "\(explicit.stderr)")
    }

    @Test("a locked collection: find fails with errSecInteractionNotAllowed (-25308) without a prompt; the item survives a restart")
    func lockedCollection() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        #expect(try keystone(daemon, ["add-generic-password", "-s", "S", "-a", "A", "-w", "kept", "secret-service:"]).status == 0)
        try daemon.lockDefaultCollection()

        let find = try keystone(daemon, ["find-generic-password", "-s", "S", "-a", "A", "-w", "secret-service:"])
        #expect(find.status == 36)   // -25308's low byte
        #expect(find.stderr.contains("User interaction is not allowed."), "\(find.stderr)")
        #expect(find.stderr.contains("locked") && find.stderr.contains("keystone unlock-keychain secret-service:"))
        #expect(find.stdout.isEmpty)

        try daemon.restartKeyringDaemon()
        let again = try keystone(daemon, ["find-generic-password", "-s", "S", "-a", "A", "-w", "secret-service:"])
        #expect(again.status == 0 && again.stdout == "kept\n", "\(again.stderr)")
    }

    @Test("lock-keychain secret-service: locks the collection; unlock-keychain -p with it is a usage error")
    func lockAndUnlock() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        #expect(try keystone(daemon, ["add-generic-password", "-s", "S", "-a", "A", "-w", "x", "secret-service:"]).status == 0)
        let lock = try keystone(daemon, ["lock-keychain", "secret-service:"])
        #expect(lock.status == 0, "\(lock.stderr)")
        #expect(try keystone(daemon, ["find-generic-password", "-s", "S", "-a", "A", "-w", "secret-service:"]).status == 36)
        let withPassword = try keystone(daemon, ["unlock-keychain", "-p", "keystone-test", "secret-service:"])
        #expect(withPassword.status == 2)
        #expect(withPassword.stderr.contains("asks for its own password"))
        // Without -p: the Secret Service's own prompt, which this private bus cannot show (nothing is activatable):
        // the unlock fails at once, and nothing was read from standard input.
        let unlock = try keystone(daemon, ["unlock-keychain", "secret-service:"], input: "keystone-test\n")
        #expect(unlock.status != 0 && unlock.status != 2, "\(unlock.stderr)")
    }

    @Test("doctor --json with the daemon: the login collection unlocked, a session algorithm, exit 0")
    func doctorJSONWithDaemon() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        let run = try keystone(daemon, ["doctor", "--json"], changes: ["KEYSTONE_BACKEND": "secret-service"])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        let object = try doctorJSON(run)
        #expect(object["ok"] as? Bool == true)
        let storage = try #require(object["storage"] as? [String: Any])
        #expect(storage["kind"] as? String == "secret-service")
        #expect(storage["reason"] as? String == "KEYSTONE_BACKEND")
        let service = try #require(object["secretService"] as? [String: Any])
        #expect(service["busAddress"] as? String == daemon.busAddress)
        #expect(service["addressSource"] as? String == "DBUS_SESSION_BUS_ADDRESS")
        let collections = try #require(service["collections"] as? [[String: Any]])
        #expect(collections.contains {
            $0["path"] as? String == "/org/freedesktop/secrets/collection/login" && $0["locked"] as? Bool == false
        }, "\(collections)")
        #expect(service["defaultCollection"] as? String == "/org/freedesktop/secrets/collection/login")
        #expect(!((service["sessionAlgorithm"] as? String) ?? "").isEmpty)
        let daemonInfo = try #require(service["daemon"] as? [String: Any])
        #expect((daemonInfo["name"] as? String)?.hasPrefix(":") == true)
        #expect(service["findings"] is [[String: Any]])
        #expect(object["file"] is [String: Any])

        // Locked: still usable (reads answer -25308), so a warning with the unlock command, exit 0.
        try daemon.lockDefaultCollection()
        let locked = try keystone(daemon, ["doctor", "secret-service:"])
        #expect(locked.status == 0, "\(locked.stdout)")
        #expect(locked.stdout.contains("warning  lock: locked") && locked.stdout.contains("keystone unlock-keychain secret-service:"))
    }

    @Test("doctor with the Secret Service in use and no bus exits 1 with a fix; with the file in use the same is a note, exit 0")
    func doctorWithoutBus() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        let noBus: [String: String?] = ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent", "KEYSTONE_BACKEND": "secret-service"]
        let inUse = try keystone(daemon, ["doctor"], changes: noBus)
        #expect(inUse.status == 1, "\(inUse.stdout)\(inUse.stderr)")
        #expect(inUse.stdout.contains("PROBLEM  bus:"))
        #expect(inUse.stdout.contains("dbus-run-session") && inUse.stdout.contains("desktop session"))
        let json = try doctorJSON(try keystone(daemon, ["doctor", "--json"], changes: noBus))
        #expect(json["ok"] as? Bool == false)
        let findings = try #require((json["secretService"] as? [String: Any])?["findings"] as? [[String: Any]])
        #expect(findings.contains { $0["severity"] as? String == "problem" && $0["check"] as? String == "bus" && $0["fix"] is String })

        let fileInUse = try keystone(daemon, ["doctor"], changes: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"])
        #expect(fileInUse.status == 0, "\(fileInUse.stdout)\(fileInUse.stderr)")
        #expect(fileInUse.stdout.contains("storage: the keychain file"))
        #expect(fileInUse.stdout.contains("note     bus:") && !fileInUse.stdout.contains("PROBLEM"))
        let unset = try keystone(daemon, ["doctor", "--json"], changes: ["DBUS_SESSION_BUS_ADDRESS": nil, "XDG_RUNTIME_DIR": nil])
        #expect(unset.status == 0)
        #expect(((try doctorJSON(unset))["secretService"] as? [String: Any])?["addressSource"] as? String == "none")
    }

    @Test("bad input: secret-service: with a file-only verb, -p for it, and an unknown KEYSTONE_BACKEND are usage errors")
    func badInput() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        let password = try keystone(daemon, ["set-keychain-password", "-o", "old", "-p", "new", "secret-service:"])
        #expect(password.status == 2)
        #expect(password.stderr.contains("not a keychain file"))
        for verb in [["set-keychain-settings", "-t", "60"], ["create-keychain", "-p", "x"], ["delete-keychain"], ["show-keychain-info"]] {
            let run = try keystone(daemon, verb + ["secret-service:"])
            #expect(run.status == 2, "\(verb): \(run.stderr)")
        }
        // The default keychain being the Secret Service counts too.
        let byDefault = try keystone(daemon, ["set-keychain-password", "-o", "old", "-p", "new"], changes: ["KEYSTONE_BACKEND": "secret-service"])
        #expect(byDefault.status == 2 && byDefault.stderr.contains("KEYSTONE_BACKEND"))

        let bogus = try keystone(daemon, ["find-generic-password", "-s", "S"], changes: ["KEYSTONE_BACKEND": "bogus"])
        #expect(bogus.status == 2)
        #expect(bogus.stderr.contains("KEYSTONE_BACKEND=bogus") && bogus.stderr.contains("file")
                && bogus.stderr.contains("secret-service[:COLLECTION]"))
        #expect(try keystone(daemon, ["doctor"], changes: ["KEYSTONE_BACKEND": "bogus"]).status == 2)
    }

    @Test("internet passwords and dump-keychain work over secret-service:COLLECTION (a named collection)")
    func internetAndDump() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        let add = try keystone(daemon, ["add-internet-password", "-s", "example.com", "-a", "bob", "-r", "htps", "-w", "web",
                                        "secret-service:login"])
        #expect(add.status == 0, "\(add.stderr)")
        let find = try keystone(daemon, ["find-internet-password", "-s", "example.com", "-a", "bob", "-w", "secret-service:login"])
        #expect(find.stdout == "web\n", "\(find.stderr)")
        let dump = try keystone(daemon, ["dump-keychain", "secret-service:login"])
        #expect(dump.status == 0)
        #expect(dump.stdout.contains("keychain: \"secret-service:login\"") && dump.stdout.contains("\"srvr\"<blob>=\"example.com\""))
        #expect(!dump.stdout.contains("web\""))
        let missing = try keystone(daemon, ["find-internet-password", "-s", "example.com", "secret-service:nosuch"])
        #expect(missing.status != 0 && missing.stderr.contains("no collection named 'nosuch'"), "\(missing.stderr)")
        let delete = try keystone(daemon, ["delete-internet-password", "-s", "example.com", "-a", "bob", "secret-service:login"])
        #expect(delete.status == 0, "\(delete.stderr)")
    }
}
