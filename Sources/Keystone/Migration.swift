import Foundation

extension Keychain {
    /// Moves `item` to another accessibility in place, with `SecItemUpdate` (`kSecAttrAccessible`).
    ///
    /// The secret, creation date, label and access control flags stay; only the protection class
    /// changes. It never deletes and re-adds the item, so there is no moment where the secret is gone.
    ///
    /// ```swift
    /// // Background refresh needs the token while the device is locked:
    /// try keychain.migrate(item, to: .afterFirstUnlockThisDeviceOnly)
    /// ```
    ///
    /// - Returns: whether the item existed (a missing item is not an error).
    /// - Throws: ``KeychainError`` with `errSecInteractionNotAllowed` (locked: try again after the
    ///   unlock). A synchronizable item moved to a `ThisDeviceOnly` accessibility stays synchronizable in
    ///   name but never leaves the device, as on Apple's keychain.
    @discardableResult
    public func migrate(_ item: some KeychainItem, to accessibility: Accessibility) throws -> Bool {
        try reportsExistence { try store.update(identity(of: item, options), with: [Key.accessible: .string(accessibility.rawValue)]) }
    }

    /// Moves every generic password of `service` (in the options' access group) to `accessibility`
    /// with one `SecItemUpdate`; nothing is deleted.
    ///
    /// - Returns: whether the service had items.
    /// - Throws: ``KeychainError/invalidItem`` for an empty service; as `migrate(_:to:)`.
    @discardableResult
    public func migrateAll(service: String, to accessibility: Accessibility) throws -> Bool {
        var query = try serviceQuery(service, accessGroup: nil)
        // Only local items: a synchronizable item given a ThisDeviceOnly accessibility would quietly stop
        // synchronizing (Apple's keychain accepts it and it never leaves the device), so those are left alone.
        if accessibility.isThisDeviceOnly { query[Key.synchronizable] = .bool(false) }
        return try reportsExistence { try store.update(query, with: [Key.accessible: .string(accessibility.rawValue)]) }
    }

    /// Moves a secret kept in a plain key-value store (`UserDefaults`, a dictionary) into the keychain.
    ///
    /// Saves the value (add, or update when the item exists), reads it back, and only when it reads
    /// back equal removes it from `source`. A `String` value is stored as UTF-8, `Data` as is.
    ///
    /// - Returns: whether a value was moved (false when `source` had nothing under `key`).
    /// - Throws: ``KeychainError`` from the save or the read-back (the source is left untouched then);
    ///   ``KeychainError/encodingFailed`` when the value is neither `Data` nor `String`.
    @discardableResult
    public func migrateValue(forKey key: String, from source: some LegacyValueSource, to item: some KeychainItem) throws -> Bool {
        guard let value = source.object(forKey: key) else { return false }
        let data: Data
        switch value {
        case let d as Data: data = d
        case let s as String: data = Data(s.utf8)
        default: throw KeychainError(code: .encodingFailed, reason: "the legacy value is neither Data nor String")
        }
        try save(data, for: item)
        guard try self.data(for: item) == data else {
            throw KeychainError(code: .unexpectedResult, reason: "the migrated value did not read back equal; the source was kept")
        }
        source.removeObject(forKey: key)
        return true
    }
}

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

extension UserDefaults: LegacyValueSource {}

/// A dictionary as a ``LegacyValueSource`` (for tests and hand-rolled stores).
///
/// Not `Sendable`: it holds `Any` values and mutable state without a lock; use it from one thread.
public final class DictionaryValueSource: LegacyValueSource {
    /// The values.
    public private(set) var values: [String: Any]
    /// Wraps `values`.
    public init(_ values: [String: Any]) { self.values = values }
    /// The value under `key`.
    public func object(forKey key: String) -> Any? { values[key] }
    /// Removes the value under `key`.
    public func removeObject(forKey key: String) { values[key] = nil }
}
