import Foundation
import Keystone

/// Items written by evgenyneu/keychain-swift (`KeychainSwift`), moved to typed generic passwords.
///
/// keychain-swift writes a generic password with **no service**: `kSecAttrAccount` = `keyPrefix + key`,
/// `kSecValueData` = the value (a String as UTF-8, a Bool as one byte `0x01`/`0x00`, Data as is),
/// `kSecAttrAccessible` = its `accessOption` (default `whenUnlocked`), plus `kSecAttrAccessGroup` and
/// `kSecAttrSynchronizable` when set. A service-less item cannot be a `GenericPassword`, so each becomes
/// `GenericPassword(service: targetService, account: key)` with the prefix stripped, keeping the item's accessibility,
/// access group and synchronizable. The secret bytes are copied as they are (a Bool stays one byte).
///
/// ```swift
/// let source = KeychainSwiftImportSource(store: keychain.store, keyPrefix: "myapp_", targetService: "com.example.app")
/// let report = try keychain.importItems(from: source)   // moves them: the legacy items are deleted after the copy
/// ```
///
/// - Important: With an empty ``keyPrefix`` every service-less generic password of the store is taken as
///   keychain-swift's (KeychainAccess with an empty service writes the same shape): give the prefix your app used.
public struct KeychainSwiftImportSource: ImportSource {
    /// The store keychain-swift wrote into (on Linux: the same keychain, through Keystone's `Security` module).
    public var store: any KeychainStore
    /// `KeychainSwift(keyPrefix:)`'s prefix; only accounts starting with it are imported, without it.
    public var keyPrefix: String
    /// The service the typed items get (keychain-swift has none).
    public var targetService: String
    /// Only items in this access group (`KeychainSwift.accessGroup`), or nil for any.
    public var accessGroup: String?

    /// A keychain-swift source.
    public init(store: any KeychainStore, keyPrefix: String = "", targetService: String, accessGroup: String? = nil) {
        self.store = store
        self.keyPrefix = keyPrefix
        self.targetService = targetService
        self.accessGroup = accessGroup
    }

    public var name: String { "keychain-swift" }

    /// The service-less generic passwords whose account starts with ``keyPrefix``.
    ///
    /// - Throws: `KeychainError.Code.invalidItem` for an empty ``targetService``; keychain statuses
    ///   (`errSecInteractionNotAllowed` when locked).
    public func read() throws -> ImportBatch {
        guard !targetService.isEmpty else {
            throw KeychainError(code: .invalidItem, reason: "keychain-swift items have no service: give the service they should get (targetService, --service)")
        }
        var filter: KeychainQuery = [:]
        if let accessGroup { filter[Key.accessGroup] = .string(accessGroup) }
        var batch = ImportBatch()
        for legacy in try LegacyKeychainItems.list(in: store, itemClass: .genericPassword, filter: filter)
        where (legacy.service ?? "").isEmpty && legacy.account.hasPrefix(keyPrefix) {
            let key = String(legacy.account.dropFirst(keyPrefix.count))
            let origin = "keychain-swift key \(ReportText.quoted(key))"
            LegacyKeychainItems.candidate(legacy, as: LegacyKeychainItems.generic(service: targetService, account: key, accessGroup: legacy.accessGroup, origin: origin),
                                          origin: origin, into: &batch)
        }
        return batch
    }
}
