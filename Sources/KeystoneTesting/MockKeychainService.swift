import Foundation
import Keystone
import KeychainEngine

/// A simple keyed double for code that only needs save / read / update / delete, in the shape of the
/// common `MockKeychainService` (`errorToThrow`, `saveCallCount`, `readCallCount`, `deleteCallCount`),
/// but backed by the real keychain rules of an ``InMemoryKeychain``.
///
/// Differences from a dictionary-backed mock, on purpose:
/// - ``update(_:forKey:)`` of a missing key throws `KeychainError.itemNotFound`, as `SecItemUpdate` does.
/// - Locking ``keychain`` (``InMemoryKeychain/lockState``) makes calls throw
///   `KeychainError.interactionNotAllowed`, and the values are still there after unlocking.
/// - Injected failures can come from ``errorToThrow`` (every call) or from ``keychain``'s
///   ``InMemoryKeychain/injectFailure(_:on:_:)`` (one operation, on schedule).
///
/// Call counts count every call, including calls that threw.
///
/// ```swift
/// let mock = MockKeychainService()
/// mock.errorToThrow = .interactionNotAllowed
/// #expect(throws: KeychainError.interactionNotAllowed) { try manager.retrieveToken() }
/// ```
public final class MockKeychainService: Sendable {
    private struct Counters {
        var errorToThrow: KeychainError?
        var save = 0, read = 0, update = 0, delete = 0, deleteAll = 0
    }

    /// The in-memory keychain holding the values: lock it, script prompts, inject failures, read its call log.
    public let keychain: InMemoryKeychain
    /// The typed keychain the double calls.
    public let typed: Keychain
    /// The service every key is stored under.
    public let service: String
    private let state = Locked(Counters())

    /// Creates an empty double storing keys as accounts of `service`.
    ///
    /// - Precondition: `service` is not empty.
    public init(service: String = "MockKeychainService", keychain: InMemoryKeychain = InMemoryKeychain(),
                options: ItemOptions = ItemOptions()) {
        precondition(!service.isEmpty, "MockKeychainService needs a non-empty service")
        self.service = service
        self.keychain = keychain
        self.typed = Keychain(store: keychain, options: options)
    }

    /// When set, every call throws it before touching the keychain.
    public var errorToThrow: KeychainError? {
        get { state.current.errorToThrow }
        set { state.withLock { $0.errorToThrow = newValue } }
    }

    /// How many times ``save(_:forKey:)`` was called.
    public var saveCallCount: Int { state.current.save }
    /// How many times ``read(forKey:)`` was called.
    public var readCallCount: Int { state.current.read }
    /// How many times ``update(_:forKey:)`` was called.
    public var updateCallCount: Int { state.current.update }
    /// How many times ``delete(forKey:)`` was called.
    public var deleteCallCount: Int { state.current.delete }
    /// How many times ``deleteAll()`` was called.
    public var deleteAllCallCount: Int { state.current.deleteAll }

    /// Resets the call counts (not the values or ``errorToThrow``).
    public func resetCallCounts() {
        state.withLock { $0.save = 0; $0.read = 0; $0.update = 0; $0.delete = 0; $0.deleteAll = 0 }
    }

    private func count(_ body: (inout Counters) -> Void) throws {
        let error: KeychainError? = state.withLock { counters in
            body(&counters)
            return counters.errorToThrow
        }
        if let error { throw error }
    }

    private func item(_ key: String) -> GenericPassword {
        // The service is validated in init, so this cannot fail.
        try! GenericPassword(service: service, account: key)
    }

    /// Saves `data` under `key`: adds, or updates an existing value.
    ///
    /// - Throws: ``errorToThrow``, or `KeychainError` with the keychain's status (`errSecInteractionNotAllowed` when locked…).
    public func save(_ data: Data, forKey key: String) throws {
        try count { $0.save += 1 }
        try typed.save(data, for: item(key))
    }

    /// The value under `key`, or nil when there is none.
    ///
    /// - Throws: ``errorToThrow``, or `KeychainError` (`errSecInteractionNotAllowed` when locked; nil only means absent).
    public func read(forKey key: String) throws -> Data? {
        try count { $0.read += 1 }
        return try typed.data(for: item(key))
    }

    /// Replaces the value under an existing `key`.
    ///
    /// - Throws: ``errorToThrow``; `KeychainError.itemNotFound` when there is no value under `key`.
    public func update(_ data: Data, forKey key: String) throws {
        try count { $0.update += 1 }
        try typed.update(data, for: item(key))
    }

    /// Deletes the value under `key`; a missing key is not an error.
    ///
    /// - Throws: ``errorToThrow``, or `KeychainError` (`errSecInteractionNotAllowed` when locked).
    public func delete(forKey key: String) throws {
        try count { $0.delete += 1 }
        try typed.delete(item(key))
    }

    /// Deletes every value of this double's service (and nothing else).
    ///
    /// - Throws: ``errorToThrow``, or `KeychainError` (`errSecInteractionNotAllowed` when locked).
    public func deleteAll() throws {
        try count { $0.deleteAll += 1 }
        try typed.deleteAll(service: service)
    }

    /// The stored values by key, read directly from the keychain (ignores ``errorToThrow`` and counts;
    /// values that cannot be read now, e.g. while locked, are left out).
    public var storage: [String: Data] {
        var values: [String: Data] = [:]
        let accounts = (try? typed.accounts(service: service)) ?? []
        for account in accounts {
            if let data = try? typed.data(for: item(account.account)) { values[account.account] = data }
        }
        return values
    }
}
