import Foundation
import KeychainServices

// Keychain code in the styles Apple-platform apps use, compiled against KeychainServices with only the
// import changed: the patterns such apps commonly use, written fresh.

// MARK: - An add-or-update function (update first, add when missing; never delete-then-add)

func storeSecret(service: String, account: String, data: Data) -> OSStatus {
    let query: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword,
        kSecAttrService as String: service,
        kSecAttrAccount as String: account,
    ]
    let changes: [String: Any] = [kSecValueData as String: data]
    var status = SecItemUpdate(query as CFDictionary, changes as CFDictionary)
    if status == errSecItemNotFound {
        var addQuery = query
        addQuery[kSecValueData as String] = data
        status = SecItemAdd(addQuery as CFDictionary, nil)
    }
    return status
}

// MARK: - A SecureStore-like wrapper with "queryables"

enum StoreError: Error, Equatable {
    case encoding
    case decoding
    case unhandled(OSStatus, String?)
}

protocol StoreQueryable {
    var query: [String: Any] { get }
}

struct GenericPasswordQueryable: StoreQueryable {
    let service: String
    var query: [String: Any] {
        var query: [String: Any] = [:]
        query[String(kSecClass)] = kSecClassGenericPassword
        query[String(kSecAttrService)] = service
        return query
    }
}

enum WebProtocol: String { case https, ftp }
enum WebAuthentication: String { case httpBasic, htmlForm }

struct InternetPasswordQueryable: StoreQueryable {
    let server: String
    let port: Int
    let path: String
    let securityDomain: String
    let webProtocol: WebProtocol
    let authentication: WebAuthentication

    var query: [String: Any] {
        var query: [String: Any] = [:]
        query[String(kSecClass)] = kSecClassInternetPassword
        query[String(kSecAttrPort)] = port
        query[String(kSecAttrServer)] = server
        query[String(kSecAttrSecurityDomain)] = securityDomain
        query[String(kSecAttrPath)] = path
        query[String(kSecAttrProtocol)] = webProtocol == .https ? kSecAttrProtocolHTTPS : kSecAttrProtocolFTP
        query[String(kSecAttrAuthenticationType)] = authentication == .httpBasic ? kSecAttrAuthenticationTypeHTTPBasic : kSecAttrAuthenticationTypeHTMLForm
        return query
    }
}

struct SecureStore {
    let queryable: any StoreQueryable

    func error(from status: OSStatus) -> StoreError {
        .unhandled(status, SecCopyErrorMessageString(status, nil) as String?)
    }

    func setValue(_ value: String, for account: String) throws {
        guard let encoded = value.data(using: .utf8) else { throw StoreError.encoding }
        var query = queryable.query
        query[String(kSecAttrAccount)] = account
        var status = SecItemCopyMatching(query as CFDictionary, nil)
        switch status {
        case errSecSuccess:
            var attributesToUpdate: [String: Any] = [:]
            attributesToUpdate[String(kSecValueData)] = encoded
            status = SecItemUpdate(query as CFDictionary, attributesToUpdate as CFDictionary)
            if status != errSecSuccess { throw error(from: status) }
        case errSecItemNotFound:
            query[String(kSecValueData)] = encoded
            status = SecItemAdd(query as CFDictionary, nil)
            if status != errSecSuccess { throw error(from: status) }
        default:
            throw error(from: status)
        }
    }

    func getValue(for account: String) throws -> String? {
        var query = queryable.query
        query[String(kSecMatchLimit)] = kSecMatchLimitOne
        query[String(kSecReturnAttributes)] = kCFBooleanTrue
        query[String(kSecReturnData)] = kCFBooleanTrue
        query[String(kSecAttrAccount)] = account
        var queryResult: AnyObject?
        let status = withUnsafeMutablePointer(to: &queryResult) {
            SecItemCopyMatching(query as CFDictionary, $0)
        }
        switch status {
        case errSecSuccess:
            guard let item = queryResult as? [String: Any],
                  let data = item[String(kSecValueData)] as? Data,
                  let password = String(data: data, encoding: .utf8) else { throw StoreError.decoding }
            return password
        case errSecItemNotFound:
            return nil
        default:
            throw error(from: status)
        }
    }

    func removeValue(for account: String) throws {
        var query = queryable.query
        query[String(kSecAttrAccount)] = account
        let status = SecItemDelete(query as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw error(from: status) }
    }

    func removeAllValues() throws {
        let status = SecItemDelete(queryable.query as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw error(from: status) }
    }
}

// MARK: - A KeychainManager-like facade (with its delete-then-add save, kept to show the hazard)

final class LegacyKeychainManager {
    @discardableResult
    func save(_ value: String, forKey key: String) -> Bool {
        guard let data = value.data(using: .utf8) else { return false }
        delete(forKey: key)
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrAccount as String: key,
            kSecValueData as String: data,
            kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
        ]
        return SecItemAdd(query as CFDictionary, nil) == errSecSuccess
    }

    func get(forKey key: String) -> String? {
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrAccount as String: key,
            kSecReturnData as String: true,
            kSecMatchLimit as String: kSecMatchLimitOne,
        ]
        var result: AnyObject?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        guard status == errSecSuccess, let data = result as? Data, let value = String(data: data, encoding: .utf8) else { return nil }
        return value
    }

    @discardableResult
    func delete(forKey key: String) -> Bool {
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: key]
        let status = SecItemDelete(query as CFDictionary)
        return status == errSecSuccess || status == errSecItemNotFound
    }

    @discardableResult
    func deleteAll() -> Bool {
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword]
        let status = SecItemDelete(query as CFDictionary)
        return status == errSecSuccess || status == errSecItemNotFound
    }
}
