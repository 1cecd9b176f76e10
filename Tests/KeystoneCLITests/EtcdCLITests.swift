import EtcdCluster
import Foundation
import KeychainEngine
import Swtpm
import Testing

/// Why these tests cannot run here, or nil (printed once by the first test that looks).
private let etcdSkipReason: String? = {
    let reason = EtcdTestCluster.unavailableReason
    if let reason { print("EtcdCLITests skipped: \(reason)") }
    return reason
}()

/// The `keystone` binary on etcd keychains (`etcd://host:port,…/NAME`): every keychain verb, the items, doctor, and
/// several processes racing on one primary key through different members. Most tests share one cluster
/// (``EtcdTestCluster/shared()``), each with a keychain of its own name; the one that kills a member starts its own.
///
/// The tests block (they run processes and wait for them): they are synchronous, off Swift's cooperative pool.
@Suite("keystone CLI: etcd keychains (etcd://, KEYSTONE_KEYCHAIN, doctor, racing processes)",
       .enabled(if: etcdSkipReason == nil, Comment(rawValue: etcdSkipReason ?? "")))
struct EtcdCLITests {
    static let password = "etcd-cli-pass"

    /// A keychain name no other test uses (the unlock cache is per user on this machine, keyed by name and id).
    static func uniqueName(_ prefix: String) -> String { "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())" }

    /// A sandbox whose keystone has `KEYSTONE_KEYCHAIN` set (or unset with nil).
    static func run(_ box: Sandbox, _ arguments: [String], keychainVariable: String? = nil, backendVariable: String? = nil,
                    input: String? = nil) throws -> Run {
        var environment = box.environment
        for key in environment.keys where key.hasPrefix("KEYSTONE_") { environment[key] = nil }
        environment["KEYSTONE_KEYCHAIN"] = keychainVariable
        environment["KEYSTONE_BACKEND"] = backendVariable
        return try Run.launch(try #require(Sandbox.binary, "the keystone binary is built by `swift build`"), arguments,
                              environment: environment, input: input.map { Data($0.utf8) })
    }

    /// Creates the keychain at `url` with the password on standard input.
    static func create(_ box: Sandbox, _ url: String) throws {
        let created = try run(box, ["create-keychain", url], input: password + "\n")
        try #require(created.status == 0, "create-keychain \(url): \(created.stderr)")
    }

    /// The exit status of a duplicate add on a keychain file (security's: errSecDuplicateItem's low byte).
    static func fileDuplicateStatus(_ box: Sandbox) throws -> Int32 {
        let file = box.root.appendingPathComponent("dup.keychain-db").path
        #expect(try run(box, ["create-keychain", "-p", "x", file]).status == 0)
        #expect(try run(box, ["add-generic-password", "-s", "s", "-a", "a", "-w", "1", file]).status == 0)
        return try run(box, ["add-generic-password", "-s", "s", "-a", "a", "-w", "2", file]).status
    }

    private func doctorJSON(_ run: Run) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8))
        return try #require(object as? [String: Any], "doctor --json prints one object: \(run.stdout) \(run.stderr)")
    }

    @Test("create (password on stdin), add, find -w prints only the secret, find without -w prints the attributes and no secret, duplicate exits as on a file, delete")
    func roundTrip() throws {
        let cluster = try EtcdTestCluster.shared()
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let url = cluster.url(name: Self.uniqueName("trip"))
        try Self.create(box, url)
        #expect(try Self.run(box, ["create-keychain", url], input: "again\n").status == 48)  // errSecDuplicateKeychain

        let add = try Self.run(box, ["add-generic-password", "-s", "svc", "-a", "alice", "-w", "etcd-secret-1", url])
        #expect(add.status == 0, "\(add.stderr)")
        let onlySecret = try Self.run(box, ["find-generic-password", "-s", "svc", "-a", "alice", "-w", url])
        #expect(onlySecret.status == 0)
        #expect(onlySecret.stdout == "etcd-secret-1\n")
        let attributes = try Self.run(box, ["find-generic-password", "-s", "svc", "-a", "alice", url])
        #expect(attributes.status == 0)
        #expect(attributes.stdout.contains("keychain: \"\(url)\""))
        #expect(attributes.stdout.contains("\"acct\"<blob>=\"alice\""))
        #expect(attributes.stdout.contains("\"svce\"<blob>=\"svc\""))
        #expect(!attributes.stdout.contains("etcd-secret-1") && !attributes.stderr.contains("etcd-secret-1"))

        let duplicate = try Self.run(box, ["add-generic-password", "-s", "svc", "-a", "alice", "-w", "other", url])
        let fileDuplicate = try Self.fileDuplicateStatus(box)
        #expect(fileDuplicate == 45)
        #expect(duplicate.status == fileDuplicate)
        #expect(duplicate.stderr.contains("The specified item already exists in the keychain."))
        #expect(try Self.run(box, ["find-generic-password", "-s", "svc", "-a", "alice", "-w", url]).stdout == "etcd-secret-1\n")

        #expect(try Self.run(box, ["add-internet-password", "-s", "example.com", "-a", "bob", "-r", "htps", "-w", "inet-pw", url]).status == 0)
        #expect(try Self.run(box, ["find-internet-password", "-s", "example.com", "-w", url]).stdout == "inet-pw\n")
        let dump = try Self.run(box, ["dump-keychain", "-d", url])
        #expect(dump.status == 0)
        #expect(dump.stdout.contains("\"etcd-secret-1\"") && dump.stdout.contains("\"inet-pw\""))

        let deleted = try Self.run(box, ["delete-generic-password", "-s", "svc", "-a", "alice", url])
        #expect(deleted.status == 0)
        #expect(deleted.stdout.contains("password has been deleted."))
        #expect(try Self.run(box, ["find-generic-password", "-s", "svc", "-a", "alice", url]).status == 44)  // errSecItemNotFound
        #expect(try Self.run(box, ["delete-internet-password", "-s", "example.com", url]).status == 0)

        #expect(try Self.run(box, ["delete-keychain", url]).status == 0)
        let gone = try Self.run(box, ["find-generic-password", "-s", "svc", url])
        #expect(gone.status == 50)  // errSecNoSuchKeychain (-25294)
    }

    @Test("lock-keychain, then find exits 36 with the unlock-keychain hint; a wrong password is refused; unlock-keychain (stdin) makes it work")
    func lockAndUnlock() throws {
        let cluster = try EtcdTestCluster.shared()
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let url = cluster.url(name: Self.uniqueName("lock"))
        try Self.create(box, url)
        #expect(try Self.run(box, ["add-generic-password", "-s", "svc", "-a", "a", "-w", "before-lock", url]).status == 0)

        #expect(try Self.run(box, ["lock-keychain", url]).status == 0)
        let locked = try Self.run(box, ["find-generic-password", "-s", "svc", "-w", url])
        #expect(locked.status == 36)  // errSecInteractionNotAllowed's low byte, as on a keychain file
        #expect(locked.stderr.contains("User interaction is not allowed."))
        #expect(locked.stderr.contains("keystone unlock-keychain \(url)"))
        #expect(locked.stdout.isEmpty)
        let addLocked = try Self.run(box, ["add-generic-password", "-s", "svc2", "-a", "a", "-w", "x", url])
        #expect(addLocked.status == 36)
        #expect(addLocked.stderr.contains("keystone unlock-keychain \(url)"))

        #expect(try Self.run(box, ["unlock-keychain", url], input: "wrong\n").status == 51)  // errSecAuthFailed
        #expect(try Self.run(box, ["find-generic-password", "-s", "svc", "-w", url]).status == 36)
        let unlocked = try Self.run(box, ["unlock-keychain", url], input: Self.password + "\n")
        #expect(unlocked.status == 0, "\(unlocked.stderr)")
        #expect(try Self.run(box, ["find-generic-password", "-s", "svc", "-w", url]).stdout == "before-lock\n")
        #expect(try Self.run(box, ["delete-keychain", url]).status == 0)
    }

    @Test("show-keychain-info and set-keychain-settings read and write the keychain's lock timeout; set-keychain-password changes the password for later unlocks")
    func settingsAndPassword() throws {
        let cluster = try EtcdTestCluster.shared()
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let url = cluster.url(name: Self.uniqueName("settings"))
        try Self.create(box, url)
        #expect(try Self.run(box, ["show-keychain-info", url]).stdout == "Keychain \"\(url)\" no-timeout\n")
        #expect(try Self.run(box, ["set-keychain-settings", "-t", "600", url]).status == 0)
        #expect(try Self.run(box, ["show-keychain-info", url]).stdout == "Keychain \"\(url)\" timeout=600s\n")
        #expect(try Self.run(box, ["set-keychain-settings", url]).status == 0)
        #expect(try Self.run(box, ["show-keychain-info", url], keychainVariable: nil).stdout == "Keychain \"\(url)\" no-timeout\n")

        #expect(try Self.run(box, ["add-generic-password", "-s", "svc", "-a", "a", "-w", "kept", url]).status == 0)
        #expect(try Self.run(box, ["set-keychain-password", "-o", "wrong", "-p", "new-pass", url]).status == 51)
        #expect(try Self.run(box, ["set-keychain-password", "-o", Self.password, "-p", "new-pass", url]).status == 0)
        #expect(try Self.run(box, ["lock-keychain", url]).status == 0)
        #expect(try Self.run(box, ["unlock-keychain", url], input: Self.password + "\n").status == 51)
        #expect(try Self.run(box, ["unlock-keychain", url], input: "new-pass\n").status == 0)
        #expect(try Self.run(box, ["find-generic-password", "-s", "svc", "-w", url]).stdout == "kept\n")
        // With KEYSTONE_KEYCHAIN naming it, the verbs need no argument.
        #expect(try Self.run(box, ["show-keychain-info"], keychainVariable: url).stdout == "Keychain \"\(url)\" no-timeout\n")
        #expect(try Self.run(box, ["delete-keychain", url]).status == 0)
    }

    @Test("a keychain that does not exist is never created by an item verb: errSecNoSuchKeychain (50) naming create-keychain")
    func noSuchKeychain() throws {
        let cluster = try EtcdTestCluster.shared()
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let url = cluster.url(name: Self.uniqueName("absent"))
        let add = try Self.run(box, ["add-generic-password", "-s", "svc", "-a", "a", "-w", "x", url])
        #expect(add.status == 50)
        #expect(add.stderr.contains("create-keychain"))
        let doctor = try Self.run(box, ["doctor", url])
        #expect(doctor.status == 1)
        #expect(doctor.stdout.contains("PROBLEM  keychain:"))
        #expect(try Self.run(box, ["add-generic-password", "-s", "svc", "-a", "a", "-w", "x", url]).status == 50)
    }

    @Test("doctor lists every endpoint, the members by name, the leader etcdctl reports, each member healthy, the keychain and that this machine has it unlocked; also with KEYSTONE_KEYCHAIN")
    func doctor() throws {
        let cluster = try EtcdTestCluster.shared()
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let url = cluster.url(name: Self.uniqueName("doctor"))
        try Self.create(box, url)

        let text = try Self.run(box, ["doctor", url])
        #expect(text.status == 0, "\(text.stdout)")
        #expect(text.stdout.contains("storage: the etcd keychain \(url), named on the command line"))
        for endpoint in cluster.clientEndpoints {
            #expect(text.stdout.contains("ok       endpoint: \(endpoint): reachable, etcd 3."))
        }
        for name in ["m0", "m1", "m2"] {
            #expect(text.stdout.contains("ok       member \(name): healthy"))
        }
        #expect(text.stdout.contains("ok       leader: m"))
        #expect(text.stdout.contains("ok       keychain: "))
        #expect(text.stdout.contains("header format 1, no lock timeout"))
        #expect(text.stdout.contains("ok       this machine: unlocked"))

        // The leader doctor names is the one etcdctl reports (polled: an election may happen meanwhile).
        var agreed = false
        for _ in 0..<20 where !agreed {
            let json = try doctorJSON(try Self.run(box, ["doctor", "--json"], keychainVariable: url))
            let etcd = try #require(json["etcd"] as? [String: Any])
            #expect((json["storage"] as? [String: Any])?["kind"] as? String == "etcd")
            #expect((json["storage"] as? [String: Any])?["reason"] as? String == "KEYSTONE_KEYCHAIN")
            #expect(json["ok"] as? Bool == true)
            let endpoints = try #require(etcd["endpoints"] as? [[String: Any]])
            #expect(endpoints.map { $0["endpoint"] as? String } == cluster.clientEndpoints.map { $0 })
            #expect(endpoints.allSatisfy { $0["reachable"] as? Bool == true && ($0["dbSize"] as? Int ?? 0) > 0 })
            let members = try #require(etcd["members"] as? [[String: Any]])
            #expect(Set(members.compactMap { $0["name"] as? String }) == ["m0", "m1", "m2"])
            #expect(members.allSatisfy { $0["healthy"] as? Bool == true })
            #expect(members.filter { $0["leader"] as? Bool == true }.count == 1)
            let leader = try #require(etcd["leader"] as? [String: Any])
            let keychain = try #require(etcd["keychain"] as? [String: Any])
            #expect(keychain["exists"] as? Bool == true && keychain["lockState"] as? String == "unlocked")
            // etcdctl endpoint status: "endpoint, ID, version, db size, is leader, …".
            let status = try cluster.etcdctl(["endpoint", "status"])
            let leaderIDs = status.split(separator: "\n").compactMap { line -> String? in
                let columns = line.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                return columns.count > 4 && columns[4] == "true" ? columns[1] : nil
            }
            agreed = leaderIDs == [leader["id"] as? String ?? "?"]
        }
        #expect(agreed, "doctor's leader is etcdctl's")

        // KEYSTONE_BACKEND may name it too: doctor says so, and the item verbs use it without an argument.
        let backend = try doctorJSON(try Self.run(box, ["doctor", "--json"], backendVariable: url))
        #expect((backend["storage"] as? [String: Any])?["reason"] as? String == "KEYSTONE_BACKEND")
        #expect((backend["storage"] as? [String: Any])?["name"] as? String == url)
        #expect(try Self.run(box, ["add-generic-password", "-s", "via-backend", "-a", "a", "-w", "b-secret"], backendVariable: url).status == 0)
        #expect(try Self.run(box, ["find-generic-password", "-s", "via-backend", "-w", url]).stdout == "b-secret\n")

        #expect(try Self.run(box, ["lock-keychain", url]).status == 0)
        let locked = try Self.run(box, ["doctor", url])
        #expect(locked.status == 0)
        #expect(locked.stdout.contains("note     this machine: locked for you on this machine"))
        #expect(locked.stdout.contains("fix: run `keystone unlock-keychain \(url)`"))
        #expect(try Self.run(box, ["delete-keychain", url]).status == 0)
    }

    @Test("enroll-machine then unlock-keychain --tpm: this machine unlocks with its TPM (a real swtpm) and no password; another TPM cannot; --remove revokes it",
          .enabled(if: SwtpmFixture.unavailableReason == nil, Comment(rawValue: SwtpmFixture.unavailableReason ?? "swtpm is installed")))
    func machineEnrollment() throws {
        let cluster = try EtcdTestCluster.shared()
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let tpm = try SwtpmFixture.start()
        defer { tpm.stop() }
        let other = try SwtpmFixture.start()
        defer { other.stop() }
        func run(_ tcti: String, _ arguments: [String], input: String? = nil) throws -> Run {
            var environment = box.environment(tcti: tcti)
            environment["KEYSTONE_KEYCHAIN"] = nil
            environment["KEYSTONE_BACKEND"] = nil
            return try Run.launch(try #require(Sandbox.binary), arguments, environment: environment, input: input.map { Data($0.utf8) })
        }
        let url = cluster.url(name: Self.uniqueName("tpm"))
        try Self.create(box, url)
        #expect(try Self.run(box, ["add-generic-password", "-s", "svc", "-a", "a", "-w", "tpm-unlocked", url]).status == 0)
        let enrolled = try run(tpm.tcti, ["enroll-machine", url])
        #expect(enrolled.status == 0, "\(enrolled.stderr)")
        #expect(try Self.run(box, ["lock-keychain", url]).status == 0)
        #expect(try Self.run(box, ["find-generic-password", "-s", "svc", "-w", url]).status == 36)
        // Another machine's TPM under this machine's id: refused, still locked.
        let wrong = try run(other.tcti, ["unlock-keychain", "--tpm", url])
        #expect(wrong.status != 0)
        #expect(try Self.run(box, ["find-generic-password", "-s", "svc", "-w", url]).status == 36)
        let unlocked = try run(tpm.tcti, ["unlock-keychain", "--tpm", url])
        #expect(unlocked.status == 0, "\(unlocked.stderr)")
        #expect(try Self.run(box, ["find-generic-password", "-s", "svc", "-w", url]).stdout == "tpm-unlocked\n")
        let id = try run(tpm.tcti, ["enroll-machine", "--show-id"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!id.isEmpty)
        #expect(try run(tpm.tcti, ["enroll-machine", "--remove", id, url]).status == 0)
        #expect(try Self.run(box, ["lock-keychain", url]).status == 0)
        #expect(try run(tpm.tcti, ["unlock-keychain", "--tpm", url]).status == Int32(UInt8(truncatingIfNeeded: Status.authFailed)))
        #expect(try Self.run(box, ["delete-keychain", url]).status == 0)
    }

    @Test("after one member of a 3-member cluster is killed, doctor reports it down (and its endpoint unreachable) and exits 0; the keychain still works through the others")
    func memberDown() throws {
        let cluster = try EtcdTestCluster.start()
        defer { cluster.stop() }
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let url = cluster.url(name: Self.uniqueName("down"))
        try Self.create(box, url)
        #expect(try Self.run(box, ["add-generic-password", "-s", "svc", "-a", "a", "-w", "before-kill", url]).status == 0)

        cluster.kill(member: 2)
        // If m2 led, the others elect a new leader first: doctor is asked once they have one.
        try cluster.waitUntilHealthy()
        let text = try Self.run(box, ["doctor", url])
        #expect(text.status == 0, "\(text.stdout)")
        #expect(text.stdout.contains("warning  endpoint: \(cluster.clientEndpoints[2]): unreachable"))
        #expect(text.stdout.contains("warning  member m2: down"))
        #expect(text.stdout.contains("ok       member m0: healthy"))
        #expect(text.stdout.contains("ok       member m1: healthy"))
        #expect(text.stdout.contains("ok       leader: m0") || text.stdout.contains("ok       leader: m1"))
        let json = try doctorJSON(try Self.run(box, ["doctor", "--json", url]))
        let members = try #require((json["etcd"] as? [String: Any])?["members"] as? [[String: Any]])
        #expect(members.first { $0["name"] as? String == "m2" }?["healthy"] as? Bool == false)
        #expect(json["ok"] as? Bool == true)

        #expect(try Self.run(box, ["find-generic-password", "-s", "svc", "-w", url]).stdout == "before-kill\n")
        #expect(try Self.run(box, ["add-generic-password", "-s", "svc", "-a", "b", "-w", "after-kill", url]).status == 0)
        #expect(try Self.run(box, ["find-generic-password", "-s", "svc", "-a", "b", "-w", url]).stdout == "after-kill\n")
    }

    /// A `keystone` process started (not waited for), its output in files.
    private struct Started {
        let process: Process
        let secret: String
        let stderrFile: URL

        func wait() -> (status: Int32, stderr: String) {
            process.waitUntilExit()
            let stderr = (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? ""
            try? FileManager.default.removeItem(at: stderrFile)
            return (process.terminationStatus, stderr)
        }
    }

    private static func start(_ box: Sandbox, _ arguments: [String], keychainVariable: String?, secret: String) throws -> Started {
        var environment = box.environment
        for key in environment.keys where key.hasPrefix("KEYSTONE_") { environment[key] = nil }
        environment["KEYSTONE_KEYCHAIN"] = keychainVariable
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(Sandbox.binary, "the keystone binary is built by `swift build`"))
        process.arguments = arguments
        process.environment = environment
        let stderrFile = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-race-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: stderrFile.path, contents: nil)
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: stderrFile)
        try process.run()
        return Started(process: process, secret: secret, stderrFile: stderrFile)
    }

    @Test("four processes, two through member 0 and two through member 1, add the same primary key at once, 8 rounds: exactly one succeeds, three exit as a duplicate, and find returns the winner's secret",
          arguments: [false, true])
    func race(viaVariable: Bool) throws {
        let cluster = try EtcdTestCluster.shared()
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let name = Self.uniqueName(viaVariable ? "race-env" : "race")
        let urls = [cluster.url(name: name, members: [0, 1, 2]), cluster.url(name: name, members: [1, 0, 2])]
        try Self.create(box, urls[0])
        let duplicate = try Self.fileDuplicateStatus(box)

        for round in 0..<8 {
            let account = "acct-\(round)"
            var started: [Started] = []
            for contender in 0..<4 {
                let url = urls[contender % 2]
                let secret = "secret-\(round)-\(contender)"
                let arguments = ["add-generic-password", "-s", "race", "-a", account, "-w", secret] + (viaVariable ? [] : [url])
                started.append(try Self.start(box, arguments, keychainVariable: viaVariable ? url : nil, secret: secret))
            }
            let outcomes = started.map { ($0.secret, $0.wait()) }
            let winners = outcomes.filter { $0.1.status == 0 }
            let losers = outcomes.filter { $0.1.status == duplicate }
            #expect(winners.count == 1, "round \(round): \(outcomes.map { "\($0.1.status) \($0.1.stderr)" })")
            #expect(losers.count == 3, "round \(round): \(outcomes.map { "\($0.1.status) \($0.1.stderr)" })")
            #expect(losers.allSatisfy { $0.1.stderr.contains("The specified item already exists in the keychain.") })
            let found = try Self.run(box, ["find-generic-password", "-s", "race", "-a", account, "-w"] + (viaVariable ? [] : [urls[1]]),
                                     keychainVariable: viaVariable ? urls[1] : nil)
            #expect(found.status == 0)
            #expect(found.stdout == (winners.first.map { $0.0 + "\n" } ?? "no winner"))
        }
        #expect(try Self.run(box, ["delete-keychain", urls[0]]).status == 0)
    }
}
