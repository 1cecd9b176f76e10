import Foundation
import Keystone

/// A plain key-value store a secret may have been kept in before the keychain: `UserDefaults`
/// conforms, and ``DictionaryValueSource`` wraps a dictionary.
///
/// Not `Sendable`: its values are `Any`, as `UserDefaults.object(forKey:)` returns; migration runs
/// synchronously on the caller's thread.
public protocol LegacyValueSource {
    /// The value stored under `key`, if any.
    func object(forKey key: String) -> Any?
    /// Removes the value stored under `key`.
    func removeObject(forKey key: String)
}

/// A ``LegacyValueSource`` that can also record a value and persist its changes: what a versioned
/// ``DefaultsMigration`` needs to keep its version. `UserDefaults` conforms.
///
/// - Important: On Linux (swift-corelibs-foundation) `UserDefaults` writes its changes to disk only in
///   ``synchronize()``: a change not synchronized is lost when the process ends. And ``synchronize()`` rewrites the
///   whole plist in place (truncate, write, fsync): a process killed inside it can leave the file empty, every key
///   of the suite lost. The migration therefore synchronizes once per run, after every secret it removes is in the
///   keychain.
public protocol LegacyDefaultsStore: LegacyValueSource {
    /// Records `value` under `key` (nil removes it).
    func set(_ value: Any?, forKey key: String)
    /// Persists the changes made so far; false when they could not be written.
    @discardableResult
    func synchronize() -> Bool
}

extension UserDefaults: LegacyDefaultsStore {}

/// A dictionary as a ``LegacyDefaultsStore`` (for tests and hand-rolled stores).
///
/// Its values live in memory only: ``synchronize()`` does nothing and succeeds. `KeystoneTesting`'s
/// `InMemoryDefaults` also models what a crash loses, between two writes or inside one.
///
/// Not `Sendable`: it holds `Any` values and mutable state without a lock; use it from one thread.
public final class DictionaryValueSource: LegacyDefaultsStore {
    /// The values.
    public private(set) var values: [String: Any]
    /// Wraps `values`.
    public init(_ values: [String: Any]) { self.values = values }
    /// The value under `key`.
    public func object(forKey key: String) -> Any? { values[key] }
    /// Removes the value under `key`.
    public func removeObject(forKey key: String) { values[key] = nil }
    /// Records `value` under `key` (nil removes it).
    public func set(_ value: Any?, forKey key: String) { values[key] = value }
    /// Nothing to persist: returns true.
    @discardableResult
    public func synchronize() -> Bool { true }
}

extension LegacyValueSource {
    /// The secret bytes of the value under `key`: `Data` as is, `String` as UTF-8; nil when there is none.
    ///
    /// Decision: only `Data` and `String` are secrets a migration moves. Any other type (a number, a date, an
    /// array, a dictionary) is not converted (there is no encoding every reader would agree on): it fails with
    /// `KeychainError.encodingFailed` naming the type, never the value, and the value stays where it is.
    func legacySecret(forKey key: String) throws(KeychainError) -> Data? {
        guard let value = object(forKey: key) else { return nil }
        switch value {
        case let data as Data: return data
        case let string as String: return Data(string.utf8)
        default:
            throw KeychainError(code: .encodingFailed,
                                reason: "the value under '\(key)' is a \(type(of: value)), not Data or String: it was left where it is")
        }
    }
}
