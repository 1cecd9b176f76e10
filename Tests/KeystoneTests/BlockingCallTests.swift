import Dispatch
import Foundation
import KeychainEngine
@testable import Keystone
import Testing

/// A store whose `add` blocks its thread until the test opens the gate, and tells the test each time a call
/// has entered (a deterministic signal: no clock anywhere).
final class GatedStore: KeychainStore, @unchecked Sendable {
    // @unchecked Sendable: its properties are constants: a semaphore and an AsyncStream's continuation, both thread-safe.
    private let gate = DispatchSemaphore(value: 0)
    let entered: AsyncStream<Bool>
    private let enteredContinuation: AsyncStream<Bool>.Continuation

    init() {
        (entered, enteredContinuation) = AsyncStream.makeStream(of: Bool.self)
    }

    /// Lets `count` blocked calls return.
    func open(_ count: Int) { for _ in 0..<count { gate.signal() } }

    func add(_ attributes: KeychainQuery) throws -> ItemResult? {
        enteredContinuation.yield(BlockingCalls.isOnBlockingThread)
        gate.wait()
        return nil
    }
    func copyMatching(_ query: KeychainQuery) throws -> ItemResult? { throw KeychainError.itemNotFound }
    func update(_ query: KeychainQuery, with: KeychainQuery) throws {}
    func delete(_ query: KeychainQuery) throws {}
}

@Suite("Async forms never block Swift's cooperative pool")
struct BlockingCallTests {
    @Test("more blocked keychain calls than cores, and a plain task still runs to completion")
    func blockedCallsLeaveThePoolFree() async throws {
        let store = GatedStore()
        let keychain = Keychain(store: store)
        let blocked = 3 * max(2, ProcessInfo.processInfo.activeProcessorCount)
        let item = try GenericPassword(service: "com.example.api", account: "alice")
        let saves = (0..<blocked).map { _ in Task { try await keychain.save("v", for: item) } }
        // Wait until every call is inside the store, blocking a thread. A call that entered on another thread
        // (the cooperative pool) fails the test at once, and the gate opens so that nothing stays blocked.
        var iterator = store.entered.makeAsyncIterator()
        for _ in 0..<blocked {
            guard await iterator.next() == true else {
                Issue.record("a blocking keychain call ran on the cooperative pool")
                store.open(blocked)
                for save in saves { _ = try? await save.value }
                return
            }
        }
        // With every call blocked, the cooperative pool still runs other work: had the calls taken its threads
        // (as many as there are cores), this task could not start and the test would never get past this line.
        let plain = await Task { (1...1_000).reduce(0, +) }.value
        #expect(plain == 500_500)
        store.open(blocked)
        for save in saves { try await save.value }
    }

    @Test("an async form called from the main actor runs elsewhere and leaves the main actor free")
    func offTheMainActor() async throws {
        let store = GatedStore()
        let keychain = Keychain(store: store)
        let item = try GenericPassword(service: "com.example.api", account: "alice")
        let save = Task { @MainActor in try await keychain.save("v", for: item) }
        var iterator = store.entered.makeAsyncIterator()
        let offMain = await iterator.next()
        #expect(offMain == true, "the call runs on Keystone's own threads, not the main actor")
        if offMain == true {
            // The call is blocked; the main actor is free to run this (were the call on it, this would never run).
            await MainActor.run { store.open(1) }
        } else {
            store.open(1)
        }
        try await save.value
    }

    @Test("beyond the thread limit, calls wait their turn, and every one completes")
    func beyondTheLimit() async throws {
        let store = GatedStore()
        let keychain = Keychain(store: store)
        let item = try GenericPassword(service: "com.example.api", account: "alice")
        let total = BlockingCalls.maximumThreads + 6
        let saves = (0..<total).map { _ in Task { try await keychain.save("v", for: item) } }
        var iterator = store.entered.makeAsyncIterator()
        for _ in 0..<BlockingCalls.maximumThreads { _ = await iterator.next() }
        // The limit is reached: the others are queued. Opening the gate lets every call through, queued ones too.
        store.open(total)
        for save in saves { try await save.value }
        var entered = BlockingCalls.maximumThreads
        for _ in 0..<6 { if await iterator.next() != nil { entered += 1 } }
        #expect(entered == total)
    }
}
