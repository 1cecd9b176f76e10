import Foundation
import SecretServiceDaemon
import Testing

/// Why these tests cannot run here, or nil: the daemons, and `secret-tool` for the round trips.
private let skipReason: String? = SecretServiceDaemon.unavailableReason
    ?? (FileManager.default.isExecutableFile(atPath: "/usr/bin/secret-tool")
        ? nil : "secret-tool not installed (apt-get install libsecret-tools)")

/// The fixture itself, against the real gnome-keyring-daemon: each test starts a daemon of its own.
@Suite(.enabled(if: skipReason == nil, Comment(rawValue: skipReason ?? "")))
struct SecretServiceDaemonTests {
    private func store(_ daemon: SecretServiceDaemon, _ secret: String) throws {
        let stored = try daemon.run(["secret-tool", "store", "--label=x", "service", "S", "account", "A"],
                                    input: Data(secret.utf8))
        #expect(stored.status == 0, "\(String(decoding: stored.stderr, as: UTF8.self))")
    }

    private func lookup(_ daemon: SecretServiceDaemon) throws -> (status: Int32, secret: String) {
        let found = try daemon.run(["secret-tool", "lookup", "service", "S", "account", "A"])
        return (found.status, String(decoding: found.stdout, as: UTF8.self))
    }

    @Test func storeAndLookUpWithSecretTool() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        try store(daemon, "s3cret")
        let found = try lookup(daemon)
        #expect(found.status == 0)
        #expect(found.secret == "s3cret")
    }

    @Test func lockedCollectionHidesTheSecret() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        try store(daemon, "s3cret")
        try daemon.lockDefaultCollection()
        let found = try lookup(daemon)
        #expect(found.status != 0)   // no prompter on the private bus: the unlock fails at once
        #expect(found.secret.isEmpty)
    }

    @Test func restartUnlocksTheStoredKeyring() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        try store(daemon, "s3cret")
        try daemon.lockDefaultCollection()
        try daemon.killKeyringDaemon()
        #expect(try lookup(daemon).status != 0)   // nobody serves org.freedesktop.secrets
        try daemon.restartKeyringDaemon()
        let found = try lookup(daemon)
        #expect(found.status == 0)
        #expect(found.secret == "s3cret")
    }

    @Test func stopLeavesNothingBehind() throws {
        let daemon = try SecretServiceDaemon.start()
        let root = daemon.root
        let before = processes(mentioning: root)
        #expect(before.count >= 3)   // dbus-daemon, gnome-keyring-daemon, the watchdog
        daemon.stop()
        #expect(processes(mentioning: root).isEmpty)
        // Gone altogether, not zombies (a zombie's command line and environment are empty).
        #expect(before.filter { FileManager.default.fileExists(atPath: "/proc/\($0)") } == [])
        #expect(!FileManager.default.fileExists(atPath: root))
        daemon.stop()   // idempotent
    }

    /// The pids of the processes whose command line or environment contains `text` (the daemons have the root in
    /// theirs: the bus's configuration file, HOME).
    private func processes(mentioning text: String) -> [String] {
        let own = "\(getpid())"
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return pids.filter { pid in
            guard pid != own, Int(pid) != nil else { return false }
            return ["cmdline", "environ"].contains { file in
                guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/\(file)") else { return false }
                return String(decoding: data, as: UTF8.self).contains(text)
            }
        }
    }
}
