// Website credentials as iOS apps store them: internet passwords keyed by server and protocol, with the
// `String(kSecAttr…)` and `[CFString: Any]` spellings some code bases prefer.
import Foundation
import Security

/// A user name and password for a website.
public struct Credentials: Equatable, Sendable {
    public var username: String
    public var password: String

    public init(username: String, password: String) {
        self.username = username
        self.password = password
    }
}

/// Internet passwords for HTTPS servers.
public enum WebCredentialStore {
    /// Stores the credentials for `server`; replaces the password when the account exists.
    public static func save(_ credentials: Credentials, server: String, port: Int = 443) -> OSStatus {
        let password = Data(credentials.password.utf8)
        let attributes: [CFString: Any] = [
            kSecClass: kSecClassInternetPassword,
            kSecAttrServer: server,
            kSecAttrProtocol: kSecAttrProtocolHTTPS,
            kSecAttrPort: port,
            kSecAttrAccount: credentials.username,
            kSecValueData: password,
        ]
        let status = SecItemAdd(attributes as CFDictionary, nil)
        guard status == errSecDuplicateItem else { return status }
        var query: [String: Any] = [:]
        query[String(kSecClass)] = kSecClassInternetPassword
        query[String(kSecAttrServer)] = server
        query[String(kSecAttrProtocol)] = kSecAttrProtocolHTTPS
        query[String(kSecAttrPort)] = port
        query[String(kSecAttrAccount)] = credentials.username
        return SecItemUpdate(query as CFDictionary, [String(kSecValueData): password] as CFDictionary)
    }

    /// The first credentials stored for `server`, or nil.
    public static func credentials(for server: String) throws -> Credentials? {
        var query: [String: Any] = [:]
        query[String(kSecClass)] = kSecClassInternetPassword
        query[String(kSecAttrServer)] = server
        query[String(kSecAttrProtocol)] = kSecAttrProtocolHTTPS
        query[String(kSecMatchLimit)] = kSecMatchLimitOne
        query[String(kSecReturnAttributes)] = true
        query[String(kSecReturnData)] = true
        var item: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &item)
        guard status != errSecItemNotFound else { return nil }
        guard status == errSecSuccess else { throw KeychainHelperError(status: status) }
        guard let existing = item as? [String: Any],
              let passwordData = existing[String(kSecValueData)] as? Data,
              let password = String(data: passwordData, encoding: .utf8),
              let account = existing[String(kSecAttrAccount)] as? String
        else { throw KeychainHelperError.unexpectedResult }
        return Credentials(username: account, password: password)
    }

    /// The protocol attribute stored with the credentials for `server`, as Security returns it.
    public static func storedProtocol(for server: String) -> String? {
        let query: [String: Any] = [
            kSecClass as String: kSecClassInternetPassword,
            kSecAttrServer as String: server,
            kSecReturnAttributes as String: true,
        ]
        var item: CFTypeRef?
        guard SecItemCopyMatching(query as CFDictionary, &item) == errSecSuccess,
              let attributes = item as? [String: Any] else { return nil }
        return attributes[kSecAttrProtocol as String] as? String
    }

    /// Deletes every internet password for `server`.
    public static func deleteCredentials(for server: String) -> OSStatus {
        let query: [String: Any] = [kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: server]
        return SecItemDelete(query as CFDictionary)
    }
}
