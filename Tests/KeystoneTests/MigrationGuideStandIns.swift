#if !canImport(Darwin)
import Foundation
import KeychainServices

// Stand-ins of KeychainAccess, Valet and keychain-swift: the calls the migration article ("Moving from KeychainAccess,
// Valet or keychain-swift", Sources/Keystone/Keystone.docc/MovingFromOtherLibraries.md) shows, with each library's
// names and signatures, implemented over KeychainServices' SecItem functions with the dictionaries each library passes
// on iOS (read from their sources: kishikawakatsumi/KeychainAccess Lib/KeychainAccess/Keychain.swift, `Options.query()`
// and `attributes(key:value:)`; square/Valet Sources/Valet/Internal/Service.swift `generateBaseQuery()` and
// Internal/Keychain.swift; evgenyneu/keychain-swift Sources/KeychainSwift.swift). The "before" regions between
// `// article: NAME` and `// article: end` are the article's code blocks, verbatim (MigrationGuideTests compares them).

/// Runs one SecItem call's dictionary through `SecItemCopyMatching` and returns the data, nil when absent.
private func copyData(_ query: [String: Any]) -> (OSStatus, Data?) {
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    return (status, result as? Data)
}

// MARK: - KeychainAccess

/// KeychainAccess's generic-password API: `Keychain(service:)` is `kSecAttrService` = service, each key is
/// `kSecAttrAccount`; items are added with `kSecAttrAccessible` (`afterFirstUnlock` by default) and
/// `kSecAttrSynchronizable` as a Boolean, and found with `kSecAttrSynchronizableAny`.
enum KeychainAccessStandIn {
    enum Accessibility {
        case whenUnlocked, afterFirstUnlock, whenUnlockedThisDeviceOnly, afterFirstUnlockThisDeviceOnly

        var rawValue: String {
            switch self {
            case .whenUnlocked: kSecAttrAccessibleWhenUnlocked
            case .afterFirstUnlock: kSecAttrAccessibleAfterFirstUnlock
            case .whenUnlockedThisDeviceOnly: kSecAttrAccessibleWhenUnlockedThisDeviceOnly
            case .afterFirstUnlockThisDeviceOnly: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            }
        }
    }

    /// KeychainAccess's `Status`: the OSStatus of a failed call.
    struct Status: Error, Equatable {
        let rawValue: OSStatus
    }

    final class Keychain {
        let service: String
        let accessGroup: String?
        let accessibilityValue: Accessibility
        let synchronizableValue: Bool

        private init(service: String, accessGroup: String?, accessibility: Accessibility, synchronizable: Bool) {
            self.service = service
            self.accessGroup = accessGroup
            self.accessibilityValue = accessibility
            self.synchronizableValue = synchronizable
        }

        convenience init(service: String) {
            self.init(service: service, accessGroup: nil, accessibility: .afterFirstUnlock, synchronizable: false)
        }

        convenience init(service: String, accessGroup: String) {
            self.init(service: service, accessGroup: accessGroup, accessibility: .afterFirstUnlock, synchronizable: false)
        }

        func accessibility(_ accessibility: Accessibility) -> Keychain {
            Keychain(service: service, accessGroup: accessGroup, accessibility: accessibility, synchronizable: synchronizableValue)
        }

        func synchronizable(_ synchronizable: Bool) -> Keychain {
            Keychain(service: service, accessGroup: accessGroup, accessibility: accessibilityValue, synchronizable: synchronizable)
        }

        /// `Options.query()`: class, access group, synchronizable Any, service.
        private func query() -> [String: Any] {
            var query: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrSynchronizable: kSecAttrSynchronizableAny,
                                        kSecAttrService: service]
            if let accessGroup { query[kSecAttrAccessGroup] = accessGroup }
            return query
        }

        /// `Options.attributes(key:value:)`: the query and account when adding, the data, accessibility, synchronizable.
        private func attributes(key: String?, value: Data) -> [String: Any] {
            var attributes: [String: Any] = [:]
            if let key {
                attributes = query()
                attributes[kSecAttrAccount] = key
            }
            attributes[kSecValueData] = value
            attributes[kSecAttrAccessible] = accessibilityValue.rawValue
            attributes[kSecAttrSynchronizable] = synchronizableValue
            return attributes
        }

        func get(_ key: String) throws -> String? {
            guard let data = try getData(key) else { return nil }
            guard let string = String(data: data, encoding: .utf8) else { throw Status(rawValue: errSecDecode) }
            return string
        }

        func getData(_ key: String) throws -> Data? {
            var query = self.query()
            query[kSecMatchLimit] = kSecMatchLimitOne
            query[kSecReturnData] = true
            query[kSecAttrAccount] = key
            let (status, data) = copyData(query)
            switch status {
            case errSecSuccess: return data
            case errSecItemNotFound: return nil
            default: throw Status(rawValue: status)
            }
        }

        func set(_ value: String, key: String) throws {
            try set(Data(value.utf8), key: key)
        }

        /// Finds the item first; updates it when found (or locked), adds it when absent.
        func set(_ value: Data, key: String) throws {
            var query = self.query()
            query[kSecAttrAccount] = key
            query[kSecUseAuthenticationUI] = kSecUseAuthenticationUIFail
            var status = SecItemCopyMatching(query as CFDictionary, nil)
            switch status {
            case errSecSuccess, errSecInteractionNotAllowed:
                var match = self.query()
                match[kSecAttrAccount] = key
                status = SecItemUpdate(match as CFDictionary, attributes(key: nil, value: value) as CFDictionary)
            case errSecItemNotFound:
                status = SecItemAdd(attributes(key: key, value: value) as CFDictionary, nil)
            default:
                break
            }
            guard status == errSecSuccess else { throw Status(rawValue: status) }
        }

        subscript(key: String) -> String? {
            get { try? get(key) }
            set {
                if let newValue { try? set(newValue, key: key) } else { try? remove(key) }
            }
        }

        func remove(_ key: String) throws {
            var query = self.query()
            query[kSecAttrAccount] = key
            let status = SecItemDelete(query as CFDictionary)
            guard status == errSecSuccess || status == errSecItemNotFound else { throw Status(rawValue: status) }
        }

        /// As on iOS: the query without a match limit.
        func removeAll() throws {
            let status = SecItemDelete(query() as CFDictionary)
            guard status == errSecSuccess || status == errSecItemNotFound else { throw Status(rawValue: status) }
        }
    }

    /// The article's "before" code: what an app wrote with KeychainAccess.
    static func before() throws -> (token: String?, blob: Data?) {
        // article: keychainaccess-before
        let keychain = Keychain(service: "com.example.app")
        keychain["token"] = "s3cret"                                   // a string; or try keychain.set("s3cret", key: "token")
        try keychain.set(Data([0x01, 0x02]), key: "blob")              // data
        let token = try keychain.get("token")                          // nil when absent
        let blob = try keychain.getData("blob")
        try keychain.remove("old")                                     // absent counts as removed

        let shared = Keychain(service: "com.example.app", accessGroup: "TEAMID.com.example.shared")
            .accessibility(.afterFirstUnlock)
            .synchronizable(true)
        try shared.set("s3cret", key: "sync-token")
        // article: end
        return (token, blob)
    }

    /// The article's "remove everything" line, before.
    static func removeAllBefore() throws {
        let keychain = Keychain(service: "com.example.app")
        // article: keychainaccess-removeall-before
        try keychain.removeAll()                  // every item of the service, any access group, synced or not
        // article: end
    }
}

// MARK: - Valet

/// Valet's API: a Valet's items are generic passwords whose `kSecAttrService` is
/// `VAL_<configuration>_initWithIdentifier:accessibility:_<identifier>_<accessibility>` (shared groups:
/// `…initWithSharedAccessGroupIdentifier:accessibility:_<group>_…` with `kSecAttrAccessGroup` = `<prefix>.<group>`),
/// each key is `kSecAttrAccount`; the base query holds `kSecAttrAccessible`, `kSecUseDataProtectionKeychain` and, for
/// iCloud Valets, `kSecAttrSynchronizable` = true.
enum ValetStandIn {
    struct Identifier: CustomStringConvertible {
        let description: String
        init?(nonEmpty string: String?) {
            guard let string, !string.isEmpty else { return nil }
            description = string
        }
    }

    struct SharedGroupIdentifier: CustomStringConvertible {
        let prefix: String
        let groupIdentifier: String
        init?(appIDPrefix: String, nonEmptyGroup groupIdentifier: String?) {
            guard !appIDPrefix.isEmpty, let groupIdentifier, !groupIdentifier.isEmpty else { return nil }
            prefix = appIDPrefix
            self.groupIdentifier = groupIdentifier
        }
        var description: String { prefix + "." + groupIdentifier }
    }

    enum Accessibility: CustomStringConvertible {
        case whenUnlocked, afterFirstUnlock, whenUnlockedThisDeviceOnly, afterFirstUnlockThisDeviceOnly

        var description: String {
            switch self {
            case .whenUnlocked: "AccessibleWhenUnlocked"
            case .afterFirstUnlock: "AccessibleAfterFirstUnlock"
            case .whenUnlockedThisDeviceOnly: "AccessibleWhenUnlockedThisDeviceOnly"
            case .afterFirstUnlockThisDeviceOnly: "AccessibleAfterFirstUnlockThisDeviceOnly"
            }
        }

        var secAccessibilityAttribute: String {
            switch self {
            case .whenUnlocked: kSecAttrAccessibleWhenUnlocked
            case .afterFirstUnlock: kSecAttrAccessibleAfterFirstUnlock
            case .whenUnlockedThisDeviceOnly: kSecAttrAccessibleWhenUnlockedThisDeviceOnly
            case .afterFirstUnlockThisDeviceOnly: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            }
        }
    }

    enum CloudAccessibility {
        case whenUnlocked, afterFirstUnlock

        var accessibility: Accessibility {
            switch self {
            case .whenUnlocked: .whenUnlocked
            case .afterFirstUnlock: .afterFirstUnlock
            }
        }
    }

    enum KeychainError: Error, Equatable {
        case itemNotFound, emptyKey, emptyValue, couldNotAccessKeychain
    }

    final class Valet {
        let baseKeychainQuery: [String: Any]

        private init(service: String, accessibility: Accessibility, synchronizable: Bool, accessGroup: String?) {
            var query: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrService: service,
                                        kSecUseDataProtectionKeychain: true,
                                        kSecAttrAccessible: accessibility.secAccessibilityAttribute]
            if synchronizable { query[kSecAttrSynchronizable] = true }
            if let accessGroup { query[kSecAttrAccessGroup] = accessGroup }
            baseKeychainQuery = query
        }

        static func valet(with identifier: Identifier, accessibility: Accessibility) -> Valet {
            Valet(service: "VAL_VALValet_initWithIdentifier:accessibility:_\(identifier)_\(accessibility)",
                  accessibility: accessibility, synchronizable: false, accessGroup: nil)
        }

        static func iCloudValet(with identifier: Identifier, accessibility: CloudAccessibility) -> Valet {
            Valet(service: "VAL_VALSynchronizableValet_initWithIdentifier:accessibility:_\(identifier)_\(accessibility.accessibility)",
                  accessibility: accessibility.accessibility, synchronizable: true, accessGroup: nil)
        }

        static func sharedGroupValet(with identifier: SharedGroupIdentifier, accessibility: Accessibility) -> Valet {
            Valet(service: "VAL_VALValet_initWithSharedAccessGroupIdentifier:accessibility:_\(identifier.groupIdentifier)_\(accessibility)",
                  accessibility: accessibility, synchronizable: false, accessGroup: identifier.description)
        }

        private func query(forKey key: String) throws -> [String: Any] {
            guard !key.isEmpty else { throw KeychainError.emptyKey }
            var query = baseKeychainQuery
            query[kSecAttrAccount] = key
            return query
        }

        private static func check(_ status: OSStatus) throws {
            switch status {
            case errSecSuccess: return
            case errSecItemNotFound: throw KeychainError.itemNotFound
            default: throw KeychainError.couldNotAccessKeychain
            }
        }

        /// iOS: updates the item when a copy finds it, else adds it.
        func setObject(_ object: Data, forKey key: String) throws {
            guard !object.isEmpty else { throw KeychainError.emptyValue }
            var query = try self.query(forKey: key)
            if SecItemCopyMatching(query as CFDictionary, nil) == errSecSuccess {
                try Self.check(SecItemUpdate(query as CFDictionary, [kSecValueData: object] as CFDictionary))
            } else {
                query[kSecValueData] = object
                try Self.check(SecItemAdd(query as CFDictionary, nil))
            }
        }

        func setString(_ string: String, forKey key: String) throws {
            try setObject(Data(string.utf8), forKey: key)
        }

        func object(forKey key: String) throws -> Data {
            var query = try self.query(forKey: key)
            query[kSecMatchLimit] = kSecMatchLimitOne
            query[kSecReturnData] = true
            let (status, data) = copyData(query)
            try Self.check(status)
            guard let data else { throw KeychainError.couldNotAccessKeychain }
            return data
        }

        /// Throws `itemNotFound` when absent, as Valet does.
        func string(forKey key: String) throws -> String {
            guard let string = String(data: try object(forKey: key), encoding: .utf8) else { throw KeychainError.itemNotFound }
            return string
        }

        func removeObject(forKey key: String) throws {
            let status = SecItemDelete(try query(forKey: key) as CFDictionary)
            guard status == errSecSuccess || status == errSecItemNotFound else { throw KeychainError.couldNotAccessKeychain }
        }

        func removeAllObjects() throws {
            let status = SecItemDelete(baseKeychainQuery as CFDictionary)
            guard status == errSecSuccess || status == errSecItemNotFound else { throw KeychainError.couldNotAccessKeychain }
        }
    }

    /// The article's "before" code: what an app wrote with Valet.
    static func before() throws -> (token: String, blob: Data) {
        // article: valet-before
        let valet = Valet.valet(with: Identifier(nonEmpty: "Druidia")!, accessibility: .whenUnlocked)
        try valet.setString("s3cret", forKey: "token")
        try valet.setObject(Data([0x01, 0x02]), forKey: "blob")
        let token = try valet.string(forKey: "token")                  // throws KeychainError.itemNotFound when absent
        let blob = try valet.object(forKey: "blob")
        try valet.removeObject(forKey: "old")

        let synced = Valet.iCloudValet(with: Identifier(nonEmpty: "Druidia")!, accessibility: .afterFirstUnlock)
        try synced.setString("s3cret", forKey: "sync-token")
        let group = SharedGroupIdentifier(appIDPrefix: "TEAMID", nonEmptyGroup: "com.example.shared")!
        let shared = Valet.sharedGroupValet(with: group, accessibility: .whenUnlocked)
        try shared.setString("s3cret", forKey: "shared-token")
        // article: end
        return (token, blob)
    }

    /// The article's "remove everything" line, before.
    static func removeAllBefore() throws {
        let valet = Valet.valet(with: Identifier(nonEmpty: "Druidia")!, accessibility: .whenUnlocked)
        // article: valet-removeall-before
        try valet.removeAllObjects()              // every item of this Valet (its service string)
        // article: end
    }

    /// What the Valet of the article reads now (nil when absent).
    static func read(_ key: String) throws -> String? {
        do {
            return try Valet.valet(with: Identifier(nonEmpty: "Druidia")!, accessibility: .whenUnlocked).string(forKey: key)
        } catch KeychainError.itemNotFound {
            return nil
        }
    }
}

// MARK: - keychain-swift

/// keychain-swift's API: a generic password with no service, `kSecAttrAccount` = key prefix + key,
/// `kSecAttrAccessible` (`whenUnlocked` by default), `kSecAttrAccessGroup` when set, `kSecAttrSynchronizable` = true
/// when adding a synchronizable item (Any when reading or deleting). `set` deletes the item before adding it.
enum KeychainSwiftStandIn {
    enum KeychainSwiftAccessOptions {
        case accessibleWhenUnlocked, accessibleWhenUnlockedThisDeviceOnly, accessibleAfterFirstUnlock
        case accessibleAfterFirstUnlockThisDeviceOnly

        var value: String {
            switch self {
            case .accessibleWhenUnlocked: kSecAttrAccessibleWhenUnlocked
            case .accessibleWhenUnlockedThisDeviceOnly: kSecAttrAccessibleWhenUnlockedThisDeviceOnly
            case .accessibleAfterFirstUnlock: kSecAttrAccessibleAfterFirstUnlock
            case .accessibleAfterFirstUnlockThisDeviceOnly: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            }
        }
    }

    final class KeychainSwift {
        var lastResultCode: OSStatus = errSecSuccess
        var accessGroup: String?
        var synchronizable = false
        let keyPrefix: String

        init(keyPrefix: String) { self.keyPrefix = keyPrefix }

        private func adding(_ query: [String: Any], forAdd: Bool) -> [String: Any] {
            var query = query
            if let accessGroup { query[kSecAttrAccessGroup] = accessGroup }
            if synchronizable { query[kSecAttrSynchronizable] = forAdd ? true : kSecAttrSynchronizableAny }
            return query
        }

        @discardableResult
        func set(_ value: String, forKey key: String, withAccess access: KeychainSwiftAccessOptions? = nil) -> Bool {
            set(Data(value.utf8), forKey: key, withAccess: access)
        }

        @discardableResult
        func set(_ value: Data, forKey key: String, withAccess access: KeychainSwiftAccessOptions? = nil) -> Bool {
            delete(key)
            let query = adding([kSecClass: kSecClassGenericPassword, kSecAttrAccount: keyPrefix + key, kSecValueData: value,
                                kSecAttrAccessible: (access ?? .accessibleWhenUnlocked).value], forAdd: true)
            lastResultCode = SecItemAdd(query as CFDictionary, nil)
            return lastResultCode == errSecSuccess
        }

        func get(_ key: String) -> String? {
            getData(key).flatMap { String(data: $0, encoding: .utf8) }
        }

        func getData(_ key: String) -> Data? {
            let query = adding([kSecClass: kSecClassGenericPassword, kSecAttrAccount: keyPrefix + key,
                                kSecMatchLimit: kSecMatchLimitOne, kSecReturnData: true], forAdd: false)
            let (status, data) = copyData(query)
            lastResultCode = status
            return status == errSecSuccess ? data : nil
        }

        @discardableResult
        func delete(_ key: String) -> Bool {
            let query = adding([kSecClass: kSecClassGenericPassword, kSecAttrAccount: keyPrefix + key], forAdd: false)
            lastResultCode = SecItemDelete(query as CFDictionary)
            return lastResultCode == errSecSuccess
        }

        /// Every generic password the app can reach, whatever the prefix.
        @discardableResult
        func clear() -> Bool {
            let query = adding([kSecClass: kSecClassGenericPassword], forAdd: false)
            lastResultCode = SecItemDelete(query as CFDictionary)
            return lastResultCode == errSecSuccess
        }
    }

    /// The article's "before" code: what an app wrote with keychain-swift.
    static func before() -> (token: String?, blob: Data?) {
        // article: keychainswift-before
        let keychain = KeychainSwift(keyPrefix: "myapp_")
        keychain.set("s3cret", forKey: "token")                        // false on failure: see keychain.lastResultCode
        keychain.set(Data([0x01, 0x02]), forKey: "blob", withAccess: .accessibleAfterFirstUnlock)
        let token = keychain.get("token")                              // nil when absent, and on any error
        let blob = keychain.getData("blob")
        keychain.delete("old")

        let shared = KeychainSwift(keyPrefix: "myapp_")
        shared.accessGroup = "TEAMID.com.example.shared"
        shared.synchronizable = true
        shared.set("s3cret", forKey: "sync-token")
        // article: end
        return (token, blob)
    }

    /// The article's "remove everything" line, before.
    static func removeAllBefore() {
        let keychain = KeychainSwift(keyPrefix: "myapp_")
        // article: keychainswift-removeall-before
        keychain.clear()                          // every generic password the app can reach, whatever the prefix
        // article: end
    }

    /// What keychain-swift reads now for `key` (nil when absent).
    static func read(_ key: String) -> String? {
        KeychainSwift(keyPrefix: "myapp_").get(key)
    }
}

extension KeychainAccessStandIn {
    /// What KeychainAccess reads now for `key` in the article's service (nil when absent).
    static func read(_ key: String) throws -> String? {
        try Keychain(service: "com.example.app").get(key)
    }
}
#endif
