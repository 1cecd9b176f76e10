// Keychain code as iOS apps write it: only Foundation and Security are imported, and nothing in this file knows
// about Keystone. On Linux it builds against Keystone's `Security` product; Tests/AppleSDKStandIn/check.sh also
// compiles it against a stand-in of Apple's SDK, so it keeps to idioms that compile on iOS.
import Foundation
import Security

/// A failed keychain call, with Apple's message for the status.
public enum KeychainHelperError: Error, Equatable {
    /// The keychain returned `status`.
    case unhandled(status: OSStatus, message: String)
    /// The keychain returned something other than what was asked for.
    case unexpectedResult
    /// `SecAccessControlCreateWithFlags` refused the protection or flags.
    case accessControl(String)

    init(status: OSStatus) {
        self = .unhandled(status: status, message: KeychainHelper.message(for: status))
    }
}

/// A generic-password store for one service: add-or-update, read, list and delete.
public struct KeychainHelper: Sendable {
    /// What a save did.
    public enum SaveOutcome: Equatable, Sendable {
        case added
        case updated
    }

    /// The `kSecAttrService` of every item.
    public let service: String

    public init(service: String) {
        self.service = service
    }

    /// The message Security gives for `status`.
    public static func message(for status: OSStatus) -> String {
        SecCopyErrorMessageString(status, nil) as String? ?? "OSStatus \(status)"
    }

    private func baseQuery(account: String) -> [String: Any] {
        [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: account,
        ]
    }

    /// Adds the item; when it exists (`errSecDuplicateItem`), updates its data instead. Never deletes first.
    @discardableResult
    public func save(_ data: Data, account: String) throws -> SaveOutcome {
        var attributes = baseQuery(account: account)
        attributes[kSecValueData as String] = data
        attributes[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlock
        let status = SecItemAdd(attributes as CFDictionary, nil)
        switch status {
        case errSecSuccess:
            return .added
        case errSecDuplicateItem:
            let changes: [String: Any] = [kSecValueData as String: data]
            let updateStatus = SecItemUpdate(baseQuery(account: account) as CFDictionary, changes as CFDictionary)
            guard updateStatus == errSecSuccess else { throw KeychainHelperError(status: updateStatus) }
            return .updated
        default:
            throw KeychainHelperError(status: status)
        }
    }

    /// Saves a string as UTF-8.
    @discardableResult
    public func save(_ string: String, account: String) throws -> SaveOutcome {
        try save(Data(string.utf8), account: account)
    }

    /// The item's data, or nil when there is no such item.
    public func read(account: String) throws -> Data? {
        var query = baseQuery(account: account)
        query[kSecReturnData as String] = kCFBooleanTrue
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var item: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &item)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess else { throw KeychainHelperError(status: status) }
        guard let data = item as? Data else { throw KeychainHelperError.unexpectedResult }
        return data
    }

    /// The item's data as a UTF-8 string.
    public func readString(account: String) throws -> String? {
        guard let data = try read(account: account) else { return nil }
        return String(data: data, encoding: .utf8)
    }

    /// The item's attributes and data in one dictionary, keyed by Apple's attribute names.
    public func readAttributes(account: String) throws -> [String: Any]? {
        var query = baseQuery(account: account)
        query[kSecReturnAttributes as String] = true
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var item: AnyObject?
        let status = withUnsafeMutablePointer(to: &item) { SecItemCopyMatching(query as CFDictionary, $0) }
        switch status {
        case errSecSuccess:
            guard let attributes = item as? [String: Any] else { throw KeychainHelperError.unexpectedResult }
            return attributes
        case errSecItemNotFound:
            return nil
        default:
            throw KeychainHelperError(status: status)
        }
    }

    /// Every account of the service, sorted; reads attributes only, never a secret.
    public func allAccounts() throws -> [String] {
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecReturnAttributes as String: kCFBooleanTrue!,
            kSecMatchLimit as String: kSecMatchLimitAll,
        ]
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return [] }
        guard status == errSecSuccess else { throw KeychainHelperError(status: status) }
        guard let items = result as? [[String: Any]] else { throw KeychainHelperError.unexpectedResult }
        return items.compactMap { $0[kSecAttrAccount as String] as? String }.sorted()
    }

    /// Deletes the item; deleting a missing item is not an error.
    public func delete(account: String) throws {
        let status = SecItemDelete(baseQuery(account: account) as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw KeychainHelperError(status: status) }
    }

    /// Deletes every item of the service; returns the status as SecItemDelete gave it.
    @discardableResult
    public func deleteAll() -> OSStatus {
        let query: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrService: service]
        return SecItemDelete(query as CFDictionary)
    }
}
