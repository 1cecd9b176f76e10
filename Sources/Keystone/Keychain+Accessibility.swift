import Foundation

// Moving items to another protection class in place: one `SecItemUpdate`, never delete-then-add. Re-protection
// with a report per item, across access groups, is `KeystoneMigrations`' `reprotect(_:to:)`.

extension Keychain {
    /// Moves `item` to another accessibility in place, with `SecItemUpdate` (`kSecAttrAccessible`).
    ///
    /// The secret, creation date, label and access control flags stay; only the protection class
    /// changes. It never deletes and re-adds the item, so there is no moment where the secret is gone.
    /// `reprotect(_:to:)` does the same for several items (and access groups) and reports each.
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
        try reportsExistence { try store.update(identity(of: item), with: [Key.accessible: .string(accessibility.rawValue)]) }
    }

    /// Moves every generic password of `service` (in the options' access group) to `accessibility`
    /// with one `SecItemUpdate`; nothing is deleted.
    ///
    /// All or nothing: when one item is not available in the current lock state, nothing changes and it throws
    /// `errSecInteractionNotAllowed`. `reprotectAll(service:accessGroup:to:)` moves what it can reach and
    /// reports the rest.
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
}
