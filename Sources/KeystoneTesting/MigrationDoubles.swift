import Foundation
import Keystone
import KeystoneMigrations
import KeychainEngine

/// `UserDefaults` in memory, as Linux's swift-corelibs-foundation keeps it: changes live in memory until
/// ``synchronize()`` persists them, and ``simulateCrash()`` loses what was not synchronized. For tests of
/// `DefaultsMigration` and other code that must survive a crash between two writes, or inside one:
/// corelibs rewrites the plist in place (truncate, then write), so a process killed inside `synchronize()` leaves
/// an empty file (``crashInsideSynchronize``).
///
/// ```swift
/// let defaults = InMemoryDefaults(["auth_token": "s3cret"])
/// struct Crash: Error {}
/// _ = try? keychain.migrate(plan, from: defaults) { if $0.phase == .removedFromDefaults { throw Crash() } }
/// defaults.simulateCrash()          // the removal was not synchronized: the token is back
/// try keychain.migrate(plan, from: defaults)
/// ```
///
/// Not `Sendable`: its values are `Any`; use it from one thread.
public final class InMemoryDefaults: LegacyDefaultsStore {
    /// What a process reading the defaults now sees (synchronized or not).
    public private(set) var values: [String: Any]
    /// What is on "disk": the values as of the last successful ``synchronize()``.
    public private(set) var persisted: [String: Any]
    /// Makes ``synchronize()`` fail (return false, persisting nothing) while true.
    public var synchronizeFails = false
    /// How many times ``synchronize()`` was called.
    public private(set) var synchronizeCount = 0
    /// When set to N, the N-th call of ``synchronize()`` (counting from 1, as ``synchronizeCount``) is killed inside
    /// the write: the file is truncated and nothing is written, so what is persisted is empty (every key, not only
    /// the changed ones), and it returns false. Call ``simulateCrash()`` next: the process is dead.
    public var crashInsideSynchronize: Int?

    /// Defaults holding `values`, all persisted.
    public init(_ values: [String: Any] = [:]) {
        self.values = values
        self.persisted = values
    }

    /// The value under `key` (synchronized or not).
    public func object(forKey key: String) -> Any? { values[key] }
    /// Removes the value under `key` (in memory until ``synchronize()``).
    public func removeObject(forKey key: String) { values[key] = nil }
    /// Records `value` under `key`, nil removing it (in memory until ``synchronize()``).
    public func set(_ value: Any?, forKey key: String) { values[key] = value }

    /// Persists the values; false (persisting nothing) while ``synchronizeFails``.
    @discardableResult
    public func synchronize() -> Bool {
        synchronizeCount += 1
        if synchronizeCount == crashInsideSynchronize {
            persisted = [:]
            return false
        }
        guard !synchronizeFails else { return false }
        persisted = values
        return true
    }

    /// The process died: what was not synchronized is lost (the values are the persisted ones again).
    public func simulateCrash() { values = persisted }
}

/// An `InstallMarkerStore` in memory, with the failures tests need: a marker that cannot be read (before the
/// first unlock), one that cannot be written, and one whose write fails only after its check passed.
///
/// ```swift
/// let marker = InMemoryInstallMarker()
/// marker.readFailure = KeychainError(status: -36, reason: "not readable before the first unlock")
/// #expect(try keychain.wipeIfFreshInstall(scope, marker: marker) is deferred)
/// ```
///
/// Thread safety: every property is behind a lock; the type is `Sendable`.
public final class InMemoryInstallMarker: InstallMarkerStore {
    private struct State {
        var exists: Bool
        var readFailure: KeychainError?
        var writeFailure: KeychainError?
        var writeFailureAfterCheck: KeychainError?
        var reads = 0
        var writes = 0
        var checks = 0
    }

    private let state: Locked<State>

    /// A marker store; `exists` says whether the marker is there already (an install that ran before).
    public init(exists: Bool = false) { state = Locked(State(exists: exists)) }

    /// Whether the marker is there.
    public var exists: Bool {
        get { state.current.exists }
        set { state.withLock { $0.exists = newValue } }
    }
    /// When set, ``markerExists()`` throws it (the marker cannot be read now).
    public var readFailure: KeychainError? {
        get { state.current.readFailure }
        set { state.withLock { $0.readFailure = newValue } }
    }
    /// When set, the marker cannot be written: ``checkWritable()`` and ``writeMarker()`` throw it, nothing is
    /// written.
    public var writeFailure: KeychainError? {
        get { state.current.writeFailure }
        set { state.withLock { $0.writeFailure = newValue } }
    }
    /// When set, ``checkWritable()`` passes but ``writeMarker()`` throws it and writes nothing: a write that fails
    /// after the check did not (a disk that filled up in between).
    public var writeFailureAfterCheck: KeychainError? {
        get { state.current.writeFailureAfterCheck }
        set { state.withLock { $0.writeFailureAfterCheck = newValue } }
    }
    /// How many times the marker was read.
    public var readCount: Int { state.current.reads }
    /// How many times the marker was written.
    public var writeCount: Int { state.current.writes }
    /// How many times ``checkWritable()`` was called.
    public var checkCount: Int { state.current.checks }

    /// Whether the marker is there.
    ///
    /// - Throws: ``readFailure`` when set.
    public func markerExists() throws(KeychainError) -> Bool {
        let snapshot = state.withLock { state -> State in state.reads += 1; return state }
        if let failure = snapshot.readFailure { throw failure }
        return snapshot.exists
    }

    /// Whether the marker could be written now.
    ///
    /// - Throws: ``writeFailure`` when set.
    public func checkWritable() throws(KeychainError) {
        let failure = state.withLock { state -> KeychainError? in
            state.checks += 1
            return state.writeFailure
        }
        if let failure { throw failure }
    }

    /// Records the marker.
    ///
    /// - Throws: ``writeFailure`` or ``writeFailureAfterCheck`` when set (nothing written).
    public func writeMarker() throws(KeychainError) {
        let failure = state.withLock { state -> KeychainError? in
            if let failure = state.writeFailure ?? state.writeFailureAfterCheck { return failure }
            state.writes += 1
            state.exists = true
            return nil
        }
        if let failure { throw failure }
    }
}
