import Foundation
import Keystone
import KeychainEngine
import KeystoneTesting
import Testing

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let time = Locked(Date(timeIntervalSinceReferenceDate: 800_000_000))
    var now: Date { time.current }
    func advance(_ seconds: TimeInterval) { time.withLock { $0 += seconds } }
}

/// Wraps a store and records what went in and came out (for "never reads the secret" checks).
final class RecordingStore: KeychainStore {
    struct Entry: Sendable {
        let operation: KeychainOperation
        let query: KeychainQuery
        let result: ItemResult?
        let onMainThread: Bool
    }

    let base: any KeychainStore
    private let entries = Locked<[Entry]>([])
    init(_ base: any KeychainStore) { self.base = base }

    var log: [Entry] { entries.current }
    func entries(_ operation: KeychainOperation) -> [Entry] { log.filter { $0.operation == operation } }

    private func record(_ op: KeychainOperation, _ q: KeychainQuery, _ r: ItemResult?) {
        let entry = Entry(operation: op, query: q, result: r, onMainThread: Thread.isMainThread)
        entries.withLock { $0.append(entry) }
    }

    func add(_ attributes: KeychainQuery) throws -> ItemResult? {
        record(.add, attributes, nil)
        return try base.add(attributes)
    }
    func copyMatching(_ query: KeychainQuery) throws -> ItemResult? {
        let result = try base.copyMatching(query)
        record(.copy, query, result)
        return result
    }
    func update(_ query: KeychainQuery, with: KeychainQuery) throws {
        record(.update, query, nil)
        try base.update(query, with: with)
    }
    func delete(_ query: KeychainQuery) throws {
        record(.delete, query, nil)
        try base.delete(query)
    }
}

/// The two engine-over-memory stores (the test double and the bare engine) of the suites that script authentication
/// outcomes or set lock states directly (error and option tests, CryptoKit keys). The typed API's core suites run on
/// every stack of ``TypedStack``, the production ones included.
enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case inMemoryKeychain
    case engine

    var testDescription: String { rawValue }

    /// A fresh fixture on this backend.
    func make(outcomes: [AuthenticationOutcome] = []) -> Fixture { Fixture(self, outcomes: outcomes) }
}

/// A keychain on one backend, with a hand-moved clock, a lock switch and a scripted authenticator.
struct Fixture {
    let clock = TestClock()
    let recorder: RecordingStore
    let storage: MemoryStorage
    let engine: KeychainEngine
    let authenticator: ScriptedAuthenticator
    let keychain: Keychain

    init(_ backend: Backend, outcomes: [AuthenticationOutcome] = []) {
        let store: any KeychainStore
        switch backend {
        case .inMemoryKeychain:
            let memory = InMemoryKeychain()
            memory.enqueueAuthentication(outcomes: outcomes)
            storage = memory.storage
            engine = memory.engine
            authenticator = memory.authenticator
            store = memory
        case .engine:
            storage = MemoryStorage()
            authenticator = ScriptedAuthenticator(outcomes)
            engine = KeychainEngine(storage: storage, authenticator: authenticator)
            store = engine
        }
        let clock = self.clock
        engine.configuration.now = { clock.now }
        recorder = RecordingStore(store)
        keychain = Keychain(store: recorder)
    }

    func keychain(options: ItemOptions = ItemOptions(), authentication: AuthenticationOptions = AuthenticationOptions()) -> Keychain {
        Keychain(store: recorder, options: options, authentication: authentication)
    }

    var lockState: LockState {
        get { storage.lockState }
        nonmutating set { storage.lockState = newValue }
    }
}

extension InMemoryKeychain {
    func enqueueAuthentication(outcomes: [AuthenticationOutcome]) { authenticator.enqueue(outcomes) }
}

func generic(_ account: String = "alice", service: String = "com.example.api") -> GenericPassword {
    try! GenericPassword(service: service, account: account)
}

/// A secret recognisable in any text it might leak into.
let secretText = "sup3r-s3cret-value-XYZZY"
let secretData = Data(secretText.utf8)
