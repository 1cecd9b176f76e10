#if NIO && !canImport(Darwin)
import Foundation
import Testing
import EtcdCluster
import KeychainEngine
import KeychainEtcd

/// The history harness: 4 child processes (Tests/EtcdHistoryWorker, one etcd client and engine each, as 4 machines)
/// run random adds, updates, deletes and reads on a few items of one etcd keychain of a real 3-member cluster while
/// the test kills, pauses (SIGSTOP) and restarts members, once two at a time (no quorum); every call's invocation
/// and response is recorded, then checked by ``LinearizabilityChecker``, with a final read of every item after the
/// cluster healed (an acknowledged write lost would make that read, or an earlier one, unexplainable).
///
/// Size: `KEYSTONE_ETCD_LINEARIZABILITY_FAULTS` fault rounds (default 6: about 15–25 s in all) and
/// `KEYSTONE_ETCD_LINEARIZABILITY_KEYS` items (default 3); set more faults for a longer run.
@Suite("etcd: linearizability of 4 processes under member kills and pauses (a real etcd cluster)",
       .enabled(if: etcdMissing == nil, etcdSkipReason), .serialized)
struct LinearizabilityHarnessTests {
    /// The worker, built next to the test bundle by `swift build --build-tests`.
    static var workerBinary: String? {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("EtcdHistoryWorker").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }

    static func environmentNumber(_ name: String, default value: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap(Int.init).flatMap { $0 > 0 ? $0 : nil } ?? value
    }

    @Test("adds, updates, deletes and reads from 4 processes while members are killed, paused and restarted: linearizable, no acknowledged write lost")
    func historyUnderFaults() throws {
        let faults = Self.environmentNumber("KEYSTONE_ETCD_LINEARIZABILITY_FAULTS", default: 6)
        let keys = Self.environmentNumber("KEYSTONE_ETCD_LINEARIZABILITY_KEYS", default: 3)
        let cluster = try EtcdTestCluster.start(EtcdTestCluster.Options(members: 3))
        defer { cluster.stop() }
        let run = try Self.record(on: cluster, faults: faults, keys: keys)
        let history = run.history
        let writes = history.filter { $0.call != .read }
        let acknowledged = writes.filter { $0.response?.outcome == .success }.count
        let unknown = writes.filter { $0.response == nil }.count
        let checkAndSets = history.filter { if case .checkAndSet = $0.call { true } else { false } }
        let started = DispatchTime.now().uptimeNanoseconds
        let verdict = LinearizabilityChecker.check(history)
        let checkMilliseconds = (DispatchTime.now().uptimeNanoseconds - started) / 1_000_000
        print("linearizability: \(history.count) operations on \(keys) items (\(writes.count) writes, \(acknowledged) acknowledged, "
            + "\(unknown) of unknown outcome; \(checkAndSets.count) check-and-sets, "
            + "\(checkAndSets.filter { $0.response?.outcome == .conflict }.count) of them conflicts), faults: \(run.faults.joined(separator: ", ")); "
            + "\(verdict) in \(checkMilliseconds) ms" + (run.unknownReasons.isEmpty ? "" : "; unknown outcomes: \(run.unknownReasons)"))
        #expect(verdict.isLinearizable, "\(verdict)")
        if !verdict.isLinearizable {
            // The failing keys' operations in invocation order: what a reader needs to tell a real anomaly from a
            // model gap (values name their writer and its call number; no secret of any real item is involved).
            for anomaly in verdict.anomalies {
                print("history of \(anomaly.key):\n" + history.filter { $0.key == anomaly.key }
                    .sorted { $0.invoked < $1.invoked }.map(\.description).joined(separator: "\n"))
            }
        }
        // The history must have exercised what it checks: every kind of call answered, some under contention.
        for kind in ["add", "update", "delete", "read"] {
            #expect(history.contains { $0.response != nil && Self.kind($0.call) == kind }, "no answered \(kind)")
        }
        #expect(history.contains { $0.response?.outcome == .duplicate }, "no add ever found its item already there")
        #expect(checkAndSets.contains { $0.response?.outcome == .success }, "no check-and-set succeeded")
        #expect(checkAndSets.contains { $0.response?.outcome == .conflict }, "no check-and-set met a version conflict")
    }

    @Test("the harness catches a broken client: workers that answer reads from their own memory give a history the checker rejects")
    func catchesStaleReads() throws {
        let cluster = try EtcdTestCluster.shared()
        let run = try Self.record(on: cluster, faults: 0, keys: 2, staleReads: true)
        let verdict = LinearizabilityChecker.check(run.history)
        #expect(!verdict.isLinearizable, "\(run.history.count) operations: \(verdict)")
    }

    /// Runs the 4 workers against `cluster` while `faults` fault rounds happen (none: about 1.5 s of calls), then
    /// reads every item once more after they finished; returns the history and the faults made.
    static func record(on cluster: EtcdTestCluster, faults: Int, keys: Int, staleReads: Bool = false) throws
        -> (history: [LinearizableOperation], faults: [String], unknownReasons: [String: Int]) {
        let worker = try #require(Self.workerBinary, "build EtcdHistoryWorker first (swift build --build-tests --traits NIO)")
        let name = "linearizability-\(UUID().uuidString.prefix(8))"
        let password = UUID().uuidString
        let passwordFile = cluster.directory.appendingPathComponent("keychain-password")
        try Data((password + "\n").utf8).write(to: passwordFile)
        let keychain = try EtcdKeychain.create(try EtcdConfiguration(url: cluster.url(name: name), environment: [:]), password: password)
        defer { keychain.lock() }

        // The workers: each lists the endpoints starting at a different member; a 1-second deadline per call.
        var children: [(process: Process, input: Pipe, output: Locked<Data>, done: DispatchSemaphore)] = []
        for index in 0..<4 {
            let members = (0..<3).map { ($0 + index) % 3 }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: worker)
            process.arguments = ["--url", cluster.url(name: name, members: members, query: "timeout=1"),
                                 "--password-file", passwordFile.path, "--process", String(index), "--keys", String(keys),
                                 "--operations", "100000", "--seed", String(0x5EED + faults), "--think-ms", "4"]
                + (staleReads ? ["--stale-reads"] : [])
            let input = Pipe(), output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            let collected = Locked(Data()), done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                let data = output.fileHandleForReading.readDataToEndOfFile()
                collected.withLock { $0 = data }
                done.signal()
            }
            children.append((process, input, collected, done))
        }
        defer { for child in children where child.process.isRunning { kill(child.process.processIdentifier, SIGKILL) } }

        // The faults: one member at a time killed or paused for a while and brought back, in turn; every third round
        // two members paused at once (no quorum: calls fail with errSecNotAvailable, writes' outcomes are unknown).
        func hold(_ milliseconds: Int) { usleep(UInt32(milliseconds * 1000)) }
        hold(300)
        var log: [String] = []
        for round in 0..<faults {
            // Each kind of fault moves to another member every three rounds (the leader is among them sooner or later).
            let member = (round + round / 3) % 3
            switch round % 3 {
            case 0:
                cluster.kill(member: member)
                log.append("kill m\(member)")
                hold(900)
                try cluster.restart(member: member)
            case 1:
                cluster.pause(member: member)
                log.append("pause m\(member)")
                hold(900)
                cluster.resume(member: member)
            default:
                let other = (member + 1) % 3
                cluster.pause(member: member)
                cluster.pause(member: other)
                log.append("pause m\(member)+m\(other)")
                hold(1500)
                cluster.resume(member: member)
                cluster.resume(member: other)
            }
            try cluster.waitUntilHealthy(timeout: 30)
            hold(400)
        }
        if faults == 0 { hold(1500) }
        for child in children { try child.input.fileHandleForWriting.close() }
        for child in children {
            #expect(child.done.wait(timeout: .now() + 60) == .success, "a worker did not finish")
            child.process.waitUntilExit()
            #expect(child.process.terminationStatus == 0, "worker exit status \(child.process.terminationStatus)")
        }

        // The history, then a final read of every item on a healed cluster, after every worker finished.
        var history: [LinearizableOperation] = []
        var unknownReasons: [String: Int] = [:]
        for child in children {
            for line in String(decoding: child.output.current, as: UTF8.self).split(separator: "\n") {
                let parsed = try #require(Self.operation(from: Data(line.utf8)), "unreadable line: \(line)")
                if case .operation(let operation, let reason) = parsed {
                    history.append(operation)
                    if let reason { unknownReasons[reason, default: 0] += 1 }
                }
            }
        }
        let engine = KeychainEngine(storage: keychain)
        for key in 0..<keys {
            let invoked = monotonicNanoseconds()
            let outcome: LinearizableOutcome
            do {
                let data = try engine.copyMatching([Key.class: .string("genp"), Key.service: .string("linearizability"),
                                                    Key.account: .string("k\(key)"), Key.returnData: .bool(true)])?.data
                outcome = .value(String(decoding: data ?? Data(), as: UTF8.self))
            } catch let error as EngineError where error.status == Status.itemNotFound {
                outcome = .notFound
            }
            history.append(LinearizableOperation(process: 99, key: "k\(key)", call: .read, invoked: invoked,
                                                 response: (monotonicNanoseconds(), outcome)))
        }
        return (history, log, unknownReasons)
    }

    static func kind(_ call: LinearizableCall) -> String {
        switch call {
        case .add: "add"
        case .update, .checkAndSet: "update"
        case .delete: "delete"
        case .read: "read"
        }
    }

    /// What one worker line says.
    enum Line {
        /// An operation, with the reason of an unknown outcome.
        case operation(LinearizableOperation, unknownReason: String?)
        /// A read that got no answer: it changed nothing, the history leaves it out.
        case failedRead
    }

    /// Parses one worker line; nil when it is unreadable.
    static func operation(from line: Data) -> Line? {
        guard let fields = try? JSONSerialization.jsonObject(with: line) as? [String: Any],
              let process = fields["p"] as? Int, let key = fields["k"] as? String, let function = fields["f"] as? String,
              let result = fields["r"] as? String, let invoked = (fields["t0"] as? NSNumber)?.uint64Value
        else { return nil }
        let value = fields["v"] as? String ?? ""
        let call: LinearizableCall
        switch function {
        case "add": call = .add(value)
        case "update":
            if let expected = fields["expected"] as? String {
                call = .checkAndSet(expected: expected, value: value)
            } else {
                call = .update(value)
            }
        case "delete": call = .delete
        case "read": call = .read
        default: return nil
        }
        let responded = (fields["t1"] as? NSNumber)?.uint64Value
        let outcome: LinearizableOutcome?
        switch result {
        case "ok": outcome = .success
        case "duplicate": outcome = .duplicate
        case "notFound": outcome = .notFound
        case "conflict": outcome = .conflict
        case "value": outcome = .value(fields["out"] as? String ?? "")
        case "failed": return .failedRead
        case "unknown": outcome = nil
        default: return nil
        }
        if outcome != nil && responded == nil { return nil }
        let operation = LinearizableOperation(process: process, key: key, call: call, invoked: invoked,
                                              response: outcome.map { (responded!, $0) })
        return .operation(operation, unknownReason: outcome == nil ? "status \(fields["status"] as? Int ?? 0)" : nil)
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the workers' clock.
func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}
#endif
