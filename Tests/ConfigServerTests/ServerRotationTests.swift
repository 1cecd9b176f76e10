import EtcdCluster
import Foundation
import Testing

/// Why these tests cannot run here, or nil.
private let rotationSkipReason: String? = {
    if let reason = EtcdTestCluster.unavailableReason { return reason }
    if Binaries.configServer == nil { return "the ConfigServer binary is missing (swift build --build-tests --traits NIO)" }
    if Binaries.keystone == nil { return "the keystone binary is missing (swift build --build-tests --traits NIO)" }
    if Binaries.noKeyringExec == nil { return "the no-keyring-exec helper is missing (swift build --build-tests --traits NIO)" }
    return nil
}()

/// An environment with nothing of the test's: no KEYSTONE_* variable, no secret, its own XDG directories.
private func cleanEnvironment(_ root: URL, extra: [String: String] = [:]) -> [String: String] {
    var environment = [
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": root.path,
        "XDG_DATA_HOME": root.appendingPathComponent("data").path,
        "XDG_CONFIG_HOME": root.appendingPathComponent("config").path,
        "LANG": "C.UTF-8",
    ]
    environment.merge(extra) { $1 }
    return environment
}

/// The `keystone` CLI as a machine of the fleet runs it: its own process, its own etcd member first in the URL.
private func keystone(_ arguments: [String], root: URL, input: String? = nil) throws -> Finished {
    try runToEnd(try Binaries.keystone.orThrow("keystone is built"), arguments, environment: cleanEnvironment(root), input: input)
}

/// A sandbox directory (0700) removed at the end.
private func makeSandbox() throws -> URL {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("config-server-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    return root
}

/// A fresh etcd keychain holding the app's two secrets, made with the `keystone` CLI; the password file for replicas.
private struct Fleet {
    static let service = "com.example.config-server"
    let cluster: EtcdTestCluster
    let root: URL
    let name: String
    let password: String
    let passwordFile: URL
    /// A systemd-style credentials directory (`$CREDENTIALS_DIRECTORY`): the password under the unit's credential name.
    let credentialsDirectory: URL

    init(tokens token: String, database: String) throws {
        cluster = try EtcdTestCluster.shared()
        root = try makeSandbox()
        name = "config-server-\(UUID().uuidString.prefix(8).lowercased())"
        password = "kc-\(UUID().uuidString)"
        passwordFile = root.appendingPathComponent("keychain-password")
        credentialsDirectory = root.appendingPathComponent("credentials")
        let created = try keystone(["create-keychain", url(first: 0)], root: root, input: password + "\n")
        try #require(created.status == 0, "create-keychain: \(created.stderr)")
        for (account, secret) in [("api.token", token), ("db.password", database)] {
            let added = try keystone(["add-generic-password", "-s", Self.service, "-a", account, "-w", secret, url(first: 0)], root: root)
            try #require(added.status == 0, "add-generic-password \(account): \(added.stderr)")
        }
        try Data((password + "\n").utf8).write(to: passwordFile)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: passwordFile.path)
        try FileManager.default.createDirectory(at: credentialsDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// The keychain's URL with member `first` tried first (each "machine" talks to another member).
    func url(first: Int) -> String {
        let count = cluster.clientEndpoints.count
        return cluster.url(name: name, members: (0..<count).map { (first + $0) % count })
    }

    /// Rotates `account` to `secret` from "another machine": `keystone add-generic-password -U` through member 1.
    func rotate(_ account: String, to secret: String) throws {
        let rotated = try keystone(["add-generic-password", "-U", "-s", Self.service, "-a", account, "-w", secret, url(first: 1)], root: root)
        try #require(rotated.status == 0, "add-generic-password -U \(account): \(rotated.stderr)")
    }

    /// A replica: ConfigServer under no-keyring-exec (as in a container with Docker's default seccomp profile: no
    /// kernel keyring, so no unlock cache shared with the CLI or the other replica: each replica unlocks with its own
    /// password source), on 127.0.0.1 and a free port.
    ///
    /// `.file` starts it with the Dockerfile's command line (ENTRYPOINT + CMD) and `.credential` with the systemd unit's
    /// ExecStart, only the address, the keychain's URL and the password file's path replaced by the test's, and the
    /// grace added: the recipes' command lines are the ones that run here.
    func replica(_ name: String, first member: Int, password: PasswordWay, grace: Int = 300) throws -> Replica {
        var replace = ["--host": "127.0.0.1", "--port": "0", "--keychain": url(first: member), "--token-grace-seconds": String(grace)]
        var extra: [String: String] = [:]
        let arguments: [String]
        switch password {
        case .file, .wrongFile:
            if case .wrongFile(let file) = password { replace["--password-file"] = file.path } else { replace["--password-file"] = passwordFile.path }
            arguments = try Recipes.replacing(Recipes.dockerArguments(), replace)
        case .credential:
            let unit = try Recipes.unitArguments()
            let credential = try #require(unit.firstIndex(of: "--password-credential").map { unit[$0 + 1] }, "the unit names its credential")
            try Data(self.password.utf8).write(to: credentialsDirectory.appendingPathComponent(credential))
            extra["CREDENTIALS_DIRECTORY"] = credentialsDirectory.path
            arguments = try Recipes.replacing(unit, replace)
        }
        // The keychain's name (random) is in the replica's command line: the watchdog's marker.
        return try Replica(name: name, wrapper: Binaries.noKeyringExec, arguments: arguments,
                           environment: cleanEnvironment(root, extra: extra), directory: root, marker: self.name)
    }

    enum PasswordWay { case file, credential, wrongFile(URL) }

    func remove() {
        _ = try? keystone(["delete-keychain", url(first: 0)], root: root)
        try? FileManager.default.removeItem(at: root)
    }
}

/// The client loop of the rotation test: requests to every replica, one after the other, on a thread of its own, each
/// request judged as it returns.
///
/// "No request failed" means, precisely (the window follows ``TokenVerifier``'s grace rule in the app):
/// - before the rotation: every request carries the old token and gets 200 `current`;
/// - during propagation (from just before `keystone add-generic-password -U` runs until every replica accepted the new
///   token): every request with the OLD token gets 200 (`current` before that replica saw the rotation, `previous`
///   after: the old token stays accepted for the grace, 300 s here). Beside it, the loop probes each replica with the
///   NEW token: a 401 there, before that replica first accepted the new token, is the propagation still under way,
///   counted apart and never a failure; a 401 for the new token AFTER that replica accepted it once is a failure;
/// - after propagation: every request carries the new token and gets 200 `current`.
/// Any other status, a connection error, a malformed answer, or a `GET /db` fingerprint other than the database
/// password's is a failure. The test requires 0 failures.
private final class RotationClient: @unchecked Sendable {
    // @unchecked Sendable: every variable is reached only inside `lock`.
    enum Phase: Equatable { case before, propagating, after, stopped }

    struct Tally {
        var phase = Phase.before
        var switched: [Bool]
        var requests: [String: Int] = [:]
        var failures: [String] = []
        var probesRefused = 0
        var finished = false
    }

    private let lock = NSCondition()
    private var tally: Tally
    private let ports: [UInt16]
    private let oldToken: String
    private let newToken: String
    private let fingerprint: String

    init(ports: [UInt16], oldToken: String, newToken: String, databasePassword: String) {
        self.ports = ports
        self.oldToken = oldToken
        self.newToken = newToken
        self.fingerprint = expectedFingerprint(databasePassword)
        self.tally = Tally(switched: Array(repeating: false, count: ports.count))
    }

    func start() {
        let thread = Thread { [self] in loop() }
        thread.name = "rotation-client"
        thread.start()
    }

    private func update(_ body: (inout Tally) -> Void) {
        lock.lock()
        body(&tally)
        lock.broadcast()
        lock.unlock()
    }

    var snapshot: Tally { lock.lock(); defer { lock.unlock() }; return tally }

    /// Waits until `condition` holds or `timeout` seconds passed (a hang guard); returns whether it holds.
    func wait(timeout: TimeInterval, until condition: (Tally) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        while !condition(tally) {
            if !lock.wait(until: deadline) { return condition(tally) }
        }
        return true
    }

    func beginRotation() { update { $0.phase = .propagating } }
    func stop() {
        update { $0.phase = .stopped }
        _ = wait(timeout: 60) { $0.finished }
    }

    private func loop() {
        let connections = ports.map { HTTPConnection(port: $0) }
        var round = 0
        while true {
            let phase = snapshot.phase
            if phase == .stopped { break }
            for (index, connection) in connections.enumerated() {
                let label = "\(phase)"
                func fail(_ what: String) { update { $0.failures.append("replica \(index), \(label): \(what)") } }
                func count(_ key: String) { update { $0.requests[key, default: 0] += 1 } }
                do {
                    switch phase {
                    case .before, .after:
                        let token = phase == .before ? oldToken : newToken
                        let answer = try connection.get("/token-check", bearer: token)
                        count(label)
                        if answer.status != 200 || answer.body != "current\n" {
                            fail("token-check answered \(answer.status) \(answer.body.debugDescription)")
                        }
                    case .propagating:
                        let wasSwitched = snapshot.switched[index]
                        let old = try connection.get("/token-check", bearer: oldToken)
                        count(label)
                        if old.status != 200 || !(old.body == "current\n" || old.body == "previous\n") {
                            fail("the old token got \(old.status) \(old.body.debugDescription)")
                        } else if wasSwitched && old.body != "previous\n" {
                            fail("the old token is current again after the new one was accepted")
                        }
                        let probe = try connection.get("/token-check", bearer: newToken)
                        count(label + "-probe")
                        switch (probe.status, probe.body) {
                        case (200, "current\n"):
                            update {
                                $0.switched[index] = true
                                if $0.switched.allSatisfy({ $0 }) && $0.phase == .propagating { $0.phase = .after }
                            }
                        case (401, _) where !wasSwitched: update { $0.probesRefused += 1 }
                        default: fail("the new token got \(probe.status) \(probe.body.debugDescription) (accepted before: \(wasSwitched))")
                        }
                    case .stopped: break
                    }
                    if round % 10 == 0 {
                        let db = try connection.get("/db")
                        count("db")
                        if db.status != 200 || db.body != "{\"fingerprint\":\"\(fingerprint)\"}\n" {
                            fail("GET /db answered \(db.status) \(db.body.debugDescription)")
                        }
                    }
                } catch {
                    fail("\(error)")
                }
            }
            round += 1
        }
        update { $0.finished = true }
    }
}

@Suite("ConfigServer: a Hummingbird app reading its secrets through swift-configuration from an etcd keychain; two replicas follow a rotation made with the keystone CLI",
       .enabled(if: rotationSkipReason == nil, Comment(rawValue: rotationSkipReason ?? "")))
struct ServerRotationTests {
    @Test("two replicas on a 3-member etcd cluster follow an API token rotation without a restart and no request fails; a second rotation ends the first token; a database password rotation reaches /db")
    func twoReplicasFollowRotation() throws {
        let (token1, token2, token3) = ("t1-\(UUID().uuidString)", "t2-\(UUID().uuidString)", "t3-\(UUID().uuidString)")
        let (database1, database2) = ("db1-\(UUID().uuidString)", "db2-\(UUID().uuidString)")
        let fleet = try Fleet(tokens: token1, database: database1)
        defer { fleet.remove() }
        // Replica A runs the Dockerfile's command line (its password from a file, as /run/secrets/…), B the systemd
        // unit's ExecStart (its password from $CREDENTIALS_DIRECTORY), each through another etcd member.
        let a = try fleet.replica("replica-a", first: 0, password: .file)
        defer { a.stop() }
        let b = try fleet.replica("replica-b", first: 2, password: .credential)
        defer { b.stop() }
        let pids = [a.process.processIdentifier, b.process.processIdentifier]

        let client = RotationClient(ports: [a.port, b.port], oldToken: token1, newToken: token2, databasePassword: database1)
        client.start()
        defer { client.stop() }
        #expect(client.wait(timeout: 120) { ($0.requests["before"] ?? 0) >= 100 }, "the client loop made no progress")

        client.beginRotation()
        try fleet.rotate("api.token", to: token2)
        let propagated = client.wait(timeout: 60) { $0.phase == .after && ($0.requests["after"] ?? 0) >= 100 }
        client.stop()
        let tally = client.snapshot
        #expect(propagated, "the new token did not reach every replica: accepted by \(tally.switched)")
        #expect(tally.failures.isEmpty, "failed requests: \(tally.failures.count): \(tally.failures.prefix(10))")
        #expect((tally.requests["before"] ?? 0) >= 100 && (tally.requests["after"] ?? 0) >= 100)
        print("ServerRotationTests: requests \(tally.requests), new-token probes refused during propagation: \(tally.probesRefused), failed: \(tally.failures.count)")

        // The same processes, never restarted, each saw exactly one rotation.
        #expect(a.process.isRunning && b.process.isRunning)
        #expect([a.process.processIdentifier, b.process.processIdentifier] == pids)
        for replica in [a, b] {
            let health = try HTTPConnection(port: replica.port).get("/healthz")
            #expect(health.status == 200 && health.body == "{\"rotations\":1}\n", "\(replica.name): \(health.body)")
        }

        // A second rotation: the first token is refused at once (at most the previous token is accepted).
        try fleet.rotate("api.token", to: token3)
        for replica in [a, b] {
            let connection = HTTPConnection(port: replica.port)
            #expect(try poll(timeout: 60) { try connection.get("/token-check", bearer: token3).status == 200 }, "\(replica.name) never accepted the third token")
            #expect(try connection.get("/token-check", bearer: token1).status == 401)
            #expect(try connection.get("/token-check", bearer: token2).body == "previous\n")
            #expect(try connection.get("/token-check", bearer: "not-a-token").status == 401)
            #expect(try connection.get("/token-check").status == 401)
        }

        // The database password: /db follows it (the snapshot the provider's watch keeps current), never anything else.
        try fleet.rotate("db.password", to: database2)
        let allowed = [expectedFingerprint(database1), expectedFingerprint(database2)].map { "{\"fingerprint\":\"\($0)\"}\n" }
        for replica in [a, b] {
            let connection = HTTPConnection(port: replica.port)
            var unexpected: [String] = []
            let followed = try poll(timeout: 60) {
                let answer = try connection.get("/db")
                if answer.status != 200 || !allowed.contains(answer.body) { unexpected.append("\(answer.status) \(answer.body)") }
                return answer.body == allowed[1]
            }
            #expect(followed, "\(replica.name) never served the new database password's fingerprint")
            #expect(unexpected.isEmpty, "\(replica.name) answered /db with: \(unexpected.prefix(5))")
        }

        // SIGTERM: a graceful stop (the keychain locked), exit status 0; no secret in anything they printed.
        #expect(a.stop() == 0, "\(a.stderr)")
        #expect(b.stop() == 0, "\(b.stderr)")
        for replica in [a, b] {
            let output = replica.stdout + replica.stderr
            for secret in [token1, token2, token3, database1, database2, fleet.password] {
                #expect(!output.contains(secret), "\(replica.name) printed a secret")
            }
        }
    }

    @Test("with --token-grace-seconds 0 a replica refuses the previous token as soon as it sees the rotation")
    func noGraceRefusesOldToken() throws {
        let (token1, token2) = ("t1-\(UUID().uuidString)", "t2-\(UUID().uuidString)")
        let fleet = try Fleet(tokens: token1, database: "db-\(UUID().uuidString)")
        defer { fleet.remove() }
        let replica = try fleet.replica("replica", first: 1, password: .file, grace: 0)
        defer { replica.stop() }
        let connection = HTTPConnection(port: replica.port)
        #expect(try connection.get("/token-check", bearer: token1).body == "current\n")
        #expect(try connection.get("/token-check", bearer: token2).status == 401)
        try fleet.rotate("api.token", to: token2)
        #expect(try poll(timeout: 60) { try connection.get("/token-check", bearer: token2).status == 200 })
        #expect(try connection.get("/token-check", bearer: token1).status == 401)
    }

    @Test("the previous token is refused once --token-grace-seconds passed after the replica saw the rotation")
    func graceEnds() throws {
        let (token1, token2) = ("t1-\(UUID().uuidString)", "t2-\(UUID().uuidString)")
        let fleet = try Fleet(tokens: token1, database: "db-\(UUID().uuidString)")
        defer { fleet.remove() }
        let replica = try fleet.replica("replica", first: 2, password: .file, grace: 1)
        defer { replica.stop() }
        let connection = HTTPConnection(port: replica.port)
        try fleet.rotate("api.token", to: token2)
        #expect(try poll(timeout: 60) { try connection.get("/token-check", bearer: token2).status == 200 })
        // The replica saw the rotation before it accepted token2; 1.5 s later its 1 s grace has ended whatever the
        // machine's speed (only a lower bound on the wait matters).
        usleep(1_500_000)
        #expect(try connection.get("/token-check", bearer: token1).status == 401)
        #expect(try connection.get("/token-check", bearer: token2).body == "current\n")
    }

    @Test("deleting the API token's item makes the replica answer 503 (no token) until the item is added again; it never accepts the deleted token meanwhile")
    func tokenDeleted() throws {
        let (token1, token2) = ("t1-\(UUID().uuidString)", "t2-\(UUID().uuidString)")
        let fleet = try Fleet(tokens: token1, database: "db-\(UUID().uuidString)")
        defer { fleet.remove() }
        let replica = try fleet.replica("replica", first: 0, password: .file)
        defer { replica.stop() }
        let connection = HTTPConnection(port: replica.port)
        #expect(try connection.get("/token-check", bearer: token1).body == "current\n")
        let deleted = try keystone(["delete-generic-password", "-s", Fleet.service, "-a", "api.token", fleet.url(first: 1)], root: fleet.root)
        try #require(deleted.status == 0, "\(deleted.stderr)")
        #expect(try poll(timeout: 60) { try connection.get("/token-check", bearer: token1).status == 503 })
        #expect(try connection.get("/token-check", bearer: token2).status == 503)
        #expect(try connection.get("/db").status == 200, "the database password is still there")
        let added = try keystone(["add-generic-password", "-s", Fleet.service, "-a", "api.token", "-w", token2, fleet.url(first: 1)], root: fleet.root)
        try #require(added.status == 0, "\(added.stderr)")
        #expect(try poll(timeout: 60) { try connection.get("/token-check", bearer: token2).status == 200 })
        #expect(try connection.get("/token-check", bearer: token1).status == 401, "a deleted token does not come back as the previous one")
        #expect(replica.process.isRunning)
    }

    @Test("a replica whose password file holds a wrong password does not serve: it exits non-zero naming the keychain, printing no password")
    func wrongPasswordFile() throws {
        let fleet = try Fleet(tokens: "t-\(UUID().uuidString)", database: "db-\(UUID().uuidString)")
        defer { fleet.remove() }
        let wrong = fleet.root.appendingPathComponent("wrong-password")
        let wrongPassword = "wrong-\(UUID().uuidString)"
        try Data(wrongPassword.utf8).write(to: wrong)
        do {
            let replica = try fleet.replica("wrong", first: 0, password: .wrongFile(wrong))
            replica.stop()
            Issue.record("a replica with a wrong keychain password started serving")
        } catch let failure as Replica.Failure {
            #expect(failure.description.contains("exited with 1"), "\(failure)")
            #expect(failure.description.contains(fleet.name), "the error names the keychain: \(failure)")
            #expect(!failure.description.contains(wrongPassword) && !failure.description.contains(fleet.password))
        }
    }
}

/// Calls `condition` until it is true or `timeout` seconds passed (a hang guard: the condition is what is waited for).
func poll(timeout: TimeInterval, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while true {
        if try condition() { return true }
        if Date() >= deadline { return false }
        usleep(10_000)
    }
}
