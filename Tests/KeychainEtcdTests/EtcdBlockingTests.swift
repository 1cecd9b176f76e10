#if NIO && !canImport(Darwin)
import Dispatch
import EtcdCluster
import Foundation
import KeychainEngine
@testable import KeychainEtcd
@testable import Keystone
import Testing

// The etcd storage is synchronous (`KeychainStorage.read`/`write`), so some thread waits while etcd answers. These
// tests prove which: never a SwiftNIO event-loop thread (the client refuses such a call with a typed error instead of
// deadlocking on its own loop or crashing in NIO's precondition), and never a thread of Swift's cooperative pool when
// the call comes through Keystone's async API. Every wait below is a deterministic signal (a call returned, a barrier
// filled); the 60-second bounds are watchdogs that turn a hang into a failure, not measures of speed.

/// A watchdog, not a measure of speed: a call that has not returned after this long never will.
private let watchdogSeconds = 120

/// Runs `body` on `client`'s own event-loop thread and returns what it returned; nil when it had not returned when
/// the watchdog fired (a hang: the test then fails instead of hanging).
private func onEventLoop<T: Sendable>(of client: EtcdClient, _ body: @escaping @Sendable () -> T) async -> T? {
    let outcome = Locked<(continuation: CheckedContinuation<T?, Never>?, done: Bool)>((nil, false))
    return await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
        outcome.withLock { $0.continuation = continuation }
        @Sendable func finish(_ value: T?) {
            let waiting: CheckedContinuation<T?, Never>? = outcome.withLock { state in
                guard !state.done else { return nil }
                state.done = true
                return state.continuation
            }
            waiting?.resume(returning: value)
        }
        client.onEventLoop { finish(body()) }
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(watchdogSeconds)) { finish(nil) }
    }
}

/// A fresh keychain on the shared 3-member cluster, unlocked.
private func makeKeychain(_ label: String) throws -> EtcdKeychain {
    let cluster = try EtcdTestCluster.shared()
    let configuration = try EtcdConfiguration(url: cluster.url(name: "\(label)-\(UUID().uuidString)"), environment: [:])
    return try EtcdKeychain.create(configuration, password: "pw")
}

@Suite("etcd storage never blocks a SwiftNIO event loop", .enabled(if: etcdMissing == nil, etcdSkipReason))
struct EtcdEventLoopTests {
    @Test("a storage operation made on the etcd client's own event loop fails with errSecParam naming the event loop, instead of deadlocking")
    func storageCallOnOwnEventLoop() async throws {
        let keychain = try makeKeychain("event-loop")
        let engine = KeychainEngine(storage: keychain)
        try engine.add(genp("svc", "alice", [Key.valueData: .data(Data("s3cret".utf8))]))
        // Returning at all is the signal: before the fix the call either waited for its own loop forever or stopped
        // the process in a precondition.
        let failure = await onEventLoop(of: keychain.client) {
            error { _ = try engine.copyMatching(genp("svc", "alice", [Key.returnData: .bool(true)])) }
        }
        guard let failure else {
            Issue.record("the call on the client's own event loop had not returned after \(watchdogSeconds) s: a deadlock")
            return
        }
        #expect(failure?.status == Status.param, "\(String(describing: failure))")
        #expect(failure?.reason.contains("own event-loop thread") == true, "\(failure?.reason ?? "")")
        #expect(failure?.reason.contains("s3cret") == false)
        // The same keychain works from a thread the caller owns: nothing was broken by the refused call.
        #expect(try engine.copyMatching(genp("svc", "alice", [Key.returnData: .bool(true)]))?.data == Data("s3cret".utf8))
    }

    @Test("a client call made on another client's event loop fails with .calledOnEventLoop, a write too, and sends nothing")
    func clientCallOnForeignEventLoop() async throws {
        let keychain = try makeKeychain("foreign-loop")
        let other = try makeKeychain("foreign-loop-other")
        let client = keychain.client
        let key = Data("blocking-test-\(UUID().uuidString)".utf8)
        let outcomes = await onEventLoop(of: other.client) { () -> [String] in
            var outcomes: [String] = []
            do { _ = try client.range(key); outcomes.append("read returned") } catch { outcomes.append("\(error)") }
            do { _ = try client.put(key, Data("x".utf8)); outcomes.append("write returned") } catch { outcomes.append("\(error)") }
            return outcomes
        }
        guard let outcomes else {
            Issue.record("calls on another event loop had not returned after \(watchdogSeconds) s")
            return
        }
        #expect(outcomes.count == 2)
        for outcome in outcomes {
            #expect(outcome.contains("SwiftNIO event-loop thread"), "\(outcome)")
        }
        // Refused before anything was sent: the write never reached the cluster.
        #expect(try client.range(key).kvs.isEmpty)
    }

    @Test("shutting the client down on its own event loop returns (the loop's thread ends afterwards); later calls throw .unavailable")
    func shutdownOnOwnEventLoop() async throws {
        let keychain = try makeKeychain("shutdown-loop")
        let client = keychain.client
        let returned = await onEventLoop(of: client) { client.shutdown(); return true }
        #expect(returned == true, "shutdown() on the client's own event loop had not returned after \(watchdogSeconds) s")
        #expect { _ = try client.range(Data("k".utf8)) } throws: { error in
            if case EtcdError.unavailable = error { return true }
            return false
        }
    }
}

/// A storage that forwards to an etcd keychain and records, for each read, whether it ran inside a Swift task (on
/// the cooperative pool, or an actor's executor) and whether on one of Keystone's own threads; the first `barrierSize` reads wait until all of
/// them are inside at once (bounded by the watchdog), which only threads outside a pool of fewer threads can do.
/// Only reads made after ``armed`` is set take part.
private final class RecordingStorage: KeychainStorage {
    struct Entry: Sendable {
        var inTask: Bool
        var onKeystoneThread: Bool
    }

    let base: EtcdKeychain
    let barrierSize: Int
    let entries = Locked<[Entry]>([])
    private let arrived = Locked(0)
    private let barrier = DispatchSemaphore(value: 0)
    /// Set when a read waited for the barrier until the watchdog fired.
    let barrierTimedOut = Locked(false)
    /// Reads are recorded and meet at the barrier only once this is set (the test's own setup reads are not).
    let armed = Locked(false)

    init(_ base: EtcdKeychain, barrierSize: Int) {
        self.base = base
        self.barrierSize = barrierSize
    }

    var lockState: LockState { base.lockState }
    var isSharedAcrossMachines: Bool { base.isSharedAcrossMachines }

    func read<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        guard armed.current else { return try base.read(body) }
        let inTask = withUnsafeCurrentTask { $0 != nil }
        entries.withLock { $0.append(Entry(inTask: inTask, onKeystoneThread: BlockingCalls.isOnBlockingThread)) }
        let count = arrived.withLock { $0 += 1; return $0 }
        if count == barrierSize {
            for _ in 1..<barrierSize { barrier.signal() }
        } else if count < barrierSize && !barrierTimedOut.current {
            // After one timeout the others do not wait: a failing run fails after one watchdog period, not many.
            if barrier.wait(timeout: .now() + .seconds(watchdogSeconds)) == .timedOut { barrierTimedOut.withLock { $0 = true } }
        }
        return try base.read(body)
    }

    func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        try base.write(body)
    }
}

@Suite("etcd storage never blocks Swift's cooperative pool through the async API", .enabled(if: etcdMissing == nil, etcdSkipReason))
struct EtcdCooperativePoolTests {
    @Test("64 concurrent async reads on an etcd keychain all complete, each on a thread of Keystone's own, none inside a task, 32 of them at once")
    func manyAsyncReads() async throws {
        let tasks = 64
        // More reads blocked at once than Swift's cooperative pool has threads (one per core) on any machine with
        // fewer than 32 cores: had they run on the pool, the barrier could never fill and the watchdog would fire.
        let atOnce = 32
        let storage = RecordingStorage(try makeKeychain("async-reads"), barrierSize: atOnce)
        let engine = KeychainEngine(storage: storage)
        let keychain = Keychain(store: engine)
        let item = try GenericPassword(service: "com.example.etcd", account: "fleet")
        try await keychain.save("fleet-secret", for: item)
        storage.armed.withLock { $0 = true }

        let results = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<tasks { group.addTask { try await keychain.string(for: item) } }
            var results: [String?] = []
            for try await result in group { results.append(result) }
            return results
        }
        #expect(results.count == tasks)
        #expect(results.allSatisfy { $0 == "fleet-secret" }, "every read returned the secret the cluster holds")
        #expect(!storage.barrierTimedOut.current, "fewer than \(atOnce) reads ran at once: they were queued on a pool")
        let entries = storage.entries.current
        #expect(entries.count >= tasks)
        #expect(entries.allSatisfy { !$0.inTask }, "a storage read ran inside a Swift task (the cooperative pool)")
        #expect(entries.allSatisfy { $0.onKeystoneThread }, "a storage read ran on a thread that is not one of Keystone's own")
    }
}
#endif
