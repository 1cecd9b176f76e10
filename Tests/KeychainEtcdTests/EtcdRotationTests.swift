#if NIO && !canImport(Darwin)
import Foundation
import Glibc
import Testing
import EtcdCluster
import KeychainEngine
import KeychainSealing
@testable import KeychainEtcd

/// How many items the rotation tests rotate: `KEYSTONE_ETCD_ROTATION_ITEMS` (the issue's figure is 10,000), else 300.
private let rotationItems = ProcessInfo.processInfo.environment["KEYSTONE_ETCD_ROTATION_ITEMS"].flatMap(Int.init).flatMap { $0 > 0 ? $0 : nil } ?? 300

/// The keystone CLI, built next to the test bundle by `swift build --build-tests`.
private var keystoneBinary: String? {
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent("keystone").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    return nil
}

/// Adds `count` items of group `group` (`svc-N`, secret `value-N`) from 4 threads.
private func addItems(_ engine: KeychainEngine, group: String, count: Int) throws {
    let failures = onThreads(4) { lane -> Int in
        var failed = 0
        for index in stride(from: lane, to: count, by: 4) {
            let query = genp("svc-\(index)", "acct", [Key.accessGroup: .string(group), Key.valueData: .data(Data("value-\(index)".utf8))])
            // Setup, not what is tested: 4 adders contend on the row-id sequence and HEAD, and an add that gave up
            // (errSecNotAvailable after its attempts) changed nothing; it is tried again (a duplicate then means an
            // earlier answer was lost after the add was applied).
            var attempt = 0
            while true {
                do { _ = try engine.add(query); break } catch let error as EngineError where attempt > 0 && error.status == Status.duplicateItem {
                    break
                } catch let error as EngineError where error.status == Status.notAvailable && attempt < 5 {
                    attempt += 1
                } catch {
                    failed += 1
                    break
                }
            }
        }
        return failed
    }
    #expect(failures.reduce(0, +) == 0)
}

/// Reads every item; the number that failed or held another value.
private func unreadable(_ engine: KeychainEngine, count: Int, expected: @escaping @Sendable (Int) -> String = { "value-\($0)" }) -> Int {
    onThreads(4) { lane -> Int in
        var bad = 0
        for index in stride(from: lane, to: count, by: 4) {
            let data = try? engine.copyMatching(genp("svc-\(index)", "acct", [Key.returnData: .bool(true)]))?.data
            if data != Data(expected(index).utf8) { bad += 1 }
        }
        return bad
    }.reduce(0, +)
}

/// Every item row's key generation, by the extensions etcd holds.
private func generations(_ cluster: EtcdTestCluster, _ name: String) throws -> [UInt32: Int] {
    let output = try cluster.etcdctl(["get", "--prefix", "keystone/v1/\(name)/k/", "-w", "json"])
    let json = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]
    var counts: [UInt32: Int] = [:]
    for kv in json?["kvs"] as? [[String: Any]] ?? [] {
        guard let value = (kv["value"] as? String).flatMap({ Data(base64Encoded: $0) }), let row = EtcdRow(decoding: value) else { continue }
        counts[EtcdKeyName(extensions: row.extensions).generation, default: 0] += 1
    }
    return counts
}

@Suite("etcd keychain: key rotation without downtime (a real etcd cluster)", .enabled(if: etcdMissing == nil, etcdSkipReason), .serialized)
struct EtcdRotationTests {
    @Test("rotating a group's key while 2 member machines read and write: 0 failed reads, every item readable after, items/s printed")
    func rotationWithReaders() throws {
        let cluster = try EtcdTestCluster.shared()
        let configuration = try EtcdConfiguration(url: cluster.url(name: "rotation-\(UUID().uuidString.prefix(8))"), environment: [:])
        let admin = try EtcdKeychain.create(configuration, password: "pw")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-rotation-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let adminEngine = KeychainEngine(storage: admin)
        let count = rotationItems
        try addItems(adminEngine, group: "R", count: count)
        // Three machines: the administrator (rotating) and two members of R (reading; one also writing).
        // (Every "machine" here shares this user's kernel keyring: the members unlock under one lock of the
        // administrator, whose cache a real member machine does not have.)
        var machineKeys: [String: EtcdMachineKey] = [:]
        for name in ["r1", "r2"] {
            let key = try EtcdMachineKey.software(file: directory.appendingPathComponent(name).path)
            try admin.enrollMachine(name, publicKey: key.publicKeyX963, groups: ["R"])
            machineKeys[name] = key
        }
        admin.lock()
        let members = try ["r1", "r2"].map { name in
            let member = try EtcdKeychain.open(configuration)
            try member.unlock(machineKey: machineKeys[name]!, machineID: name)
            return member
        }
        try admin.unlock(password: "pw")
        let readers = members.map { KeychainEngine(storage: $0) }
        #expect(unreadable(readers[0], count: count) == 0)

        let done = Locked(false)
        let failedReads = Locked(0)
        let reads = Locked(0)
        let written = Locked<[Int: Int]>([:])
        let group = DispatchGroup()
        for (number, reader) in readers.enumerated() {
            group.enter()
            Thread.detachNewThread {
                var index = number
                while !done.current {
                    let data = try? reader.copyMatching(genp("svc-\(index % count)", "acct", [Key.returnData: .bool(true)]))?.data
                    let text = data.map { String(decoding: $0, as: UTF8.self) }
                    if text == nil || !(text!.hasPrefix("value-\(index % count)")) { failedReads.withLock { $0 += 1 } }
                    reads.withLock { $0 += 1 }
                    index += 7
                }
                group.leave()
            }
        }
        // A writer on member r1: updates the first 10 items again and again (its writes win over the rotator's).
        group.enter()
        Thread.detachNewThread {
            var round = 0
            while !done.current {
                let index = round % min(10, count)
                if (try? readers[0].update(genp("svc-\(index)", "acct"), with: [Key.valueData: .data(Data("value-\(index)-\(round)".utf8))])) != nil {
                    written.withLock { $0[index] = round }
                }
                round += 1
            }
            group.leave()
        }
        let started = Date()
        let report = try admin.rotateKeys(group: "R")
        let seconds = Date().timeIntervalSince(started)
        done.withLock { $0 = true }
        group.wait()
        print("rotation: \(count) items re-sealed in \(String(format: "%.2f", seconds)) s (\(Int(Double(count) / max(seconds, 0.001))) items/s) by 1 rotator, 2 member machines reading (\(reads.current) reads, \(failedReads.current) failed) and one writing; \(report.conflicts) conflicts")
        #expect(failedReads.current == 0)
        #expect(reads.current > 0)
        #expect(report.generation == 2)
        let latest = written.current
        let expected: @Sendable (Int) -> String = { index in latest[index].map { "value-\(index)-\($0)" } ?? "value-\(index)" }
        for engine in readers + [adminEngine] { #expect(unreadable(engine, count: count, expected: expected) == 0) }
        #expect(try generations(cluster, configuration.name) == [2: count])
    }

    @Test("a rotation killed (SIGKILL) at random points leaves every item readable, and running it again resumes and completes it")
    func killedRotationResumes() throws {
        let binary = try #require(keystoneBinary, "build keystone first (swift build --build-tests --traits NIO)")
        let cluster = try EtcdTestCluster.shared()
        let url = cluster.url(name: "rotation-kill-\(UUID().uuidString.prefix(8))")
        let configuration = try EtcdConfiguration(url: url, environment: [:])
        let admin = try EtcdKeychain.create(configuration, password: "pw")
        let adminEngine = KeychainEngine(storage: admin)
        let count = min(rotationItems, 240)
        try addItems(adminEngine, group: "K", count: count)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-rotation-kill-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let memberKey = try EtcdMachineKey.software(file: directory.appendingPathComponent("m").path)
        try admin.enrollMachine("m", publicKey: memberKey.publicKeyX963, groups: ["K"])
        admin.lock()
        let member = try EtcdKeychain.open(configuration)
        try member.unlock(machineKey: memberKey, machineID: "m")
        try admin.unlock(password: "pw")
        let memberEngine = KeychainEngine(storage: member)

        /// Runs `keystone rotate-group-key` (password on standard input); kills it after `lines` progress lines
        /// (nil: lets it finish). Returns what it printed and whether it was killed.
        func rotate(killAfter lines: Int?) throws -> (output: String, killed: Bool, status: Int32) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["rotate-group-key", "--group", "K", "--batch", "8", url]
            var environment = ProcessInfo.processInfo.environment
            environment["KEYSTONE_KEYCHAIN_DIR"] = directory.path
            process.environment = environment
            let input = Pipe(), output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            input.fileHandleForWriting.write(Data("pw\n".utf8))
            try? input.fileHandleForWriting.close()
            var text = ""
            var killed = false
            while true {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                text += String(decoding: chunk, as: UTF8.self)
                if let lines, !killed, text.components(separatedBy: "resealed ").count - 1 >= lines {
                    kill(process.processIdentifier, SIGKILL)
                    killed = true
                }
            }
            process.waitUntilExit()
            return (text, killed && process.terminationReason == .uncaughtSignal, process.terminationStatus)
        }

        var kills = 0
        for round in 0..<3 {
            let lines = Int.random(in: 1...max(1, count / 8 / 2))
            let run = try rotate(killAfter: lines)
            if run.killed { kills += 1 }
            // Killed anywhere, every item stays readable: by the administrator and by the member machine.
            #expect(unreadable(adminEngine, count: count) == 0, "round \(round)")
            #expect(unreadable(memberEngine, count: count) == 0, "round \(round)")
        }
        #expect(kills > 0)
        let final = try rotate(killAfter: nil)
        #expect(final.status == 0)
        #expect(final.output.contains("resumed"))
        #expect(try generations(cluster, configuration.name).keys.sorted() == [2])
        #expect(unreadable(adminEngine, count: count) == 0)
        #expect(unreadable(memberEngine, count: count) == 0)
        #expect(try admin.groups().first { $0.name == "K" }?.rotating == false)
    }

    @Test("rotating the master key re-seals the items outside groups; another administrator process reads them; a group's items keep their group key")
    func masterRotation() throws {
        let cluster = try EtcdTestCluster.shared()
        let configuration = try EtcdConfiguration(url: cluster.url(name: "rotation-master-\(UUID().uuidString.prefix(8))"), environment: [:])
        let admin = try EtcdKeychain.create(configuration, password: "pw")
        let engine = KeychainEngine(storage: admin)
        try addItems(engine, group: "default", count: 20)
        try engine.add(genp("grouped", "acct", [Key.accessGroup: .string("G"), Key.valueData: .data(Data("g".utf8))]))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-rotation-master-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try admin.enrollMachine("g", publicKey: try EtcdMachineKey.software(file: directory.appendingPathComponent("g").path).publicKeyX963, groups: ["G"])
        #expect(try generations(cluster, configuration.name) == [0: 20, 1: 1])
        let first = try admin.rotateKeys()
        #expect(first.generation == 1 && first.resealed == 20)
        try admin.rotateKeys()
        // 20 rows under master generation 2, the group's row still under its generation 1.
        #expect(try generations(cluster, configuration.name) == [2: 20, 1: 1])
        let other = try EtcdKeychain.open(configuration)
        try other.unlock(password: "pw")
        #expect(unreadable(KeychainEngine(storage: other), count: 20) == 0)
        #expect(try KeychainEngine(storage: other).copyMatching(genp("grouped", "acct", [Key.returnData: .bool(true)]))?.data == Data("g".utf8))
        // A new item is sealed under the newest generation.
        try KeychainEngine(storage: other).add(genp("fresh", "acct", [Key.valueData: .data(Data("f".utf8))]))
        #expect(try generations(cluster, configuration.name) == [2: 21, 1: 1])
    }
}
#endif
