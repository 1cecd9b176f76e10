// Code written for Apple platforms: the iOS app's real keychain service, behind the protocol the rest of the app
// uses. Unlike the other files here it is not copied: the app's tests need it and only its contract was given, so it
// is written here as an iOS app writes it, to that contract, with Apple's API only (Foundation and Security imported,
// nothing Keystone-specific), so that it builds unchanged on Apple platforms too:
// - `save` updates first and adds when there is nothing to update (no errSecDuplicateItem on a second save);
// - `delete` and `deleteAll` treat errSecItemNotFound as success;
// - every other status becomes a `KeychainError` (`KeychainError(status:)`);
// - `@unchecked Sendable` with immutable stored properties only.
import Foundation
import Security

final class KeychainService: KeychainServiceProtocol, @unchecked Sendable {
    private let service: String

    init(service: String) {
        self.service = service
    }

    private func query(forKey key: String) -> [String: Any] {
        [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: key,
        ]
    }

    func save(_ data: Data, forKey key: String) throws {
        do {
            try update(data, forKey: key)
        } catch KeychainError.itemNotFound {
            var attributes = query(forKey: key)
            attributes[kSecValueData as String] = data
            attributes[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            let status = SecItemAdd(attributes as CFDictionary, nil)
            guard status == errSecSuccess else { throw KeychainError(status: status) }
        }
    }

    func read(forKey key: String) throws -> Data? {
        var search = query(forKey: key)
        search[kSecReturnData as String] = true
        search[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: AnyObject?
        let status = SecItemCopyMatching(search as CFDictionary, &result)
        switch status {
        case errSecSuccess:
            guard let data = result as? Data else { throw KeychainError.unexpectedData }
            return data
        case errSecItemNotFound:
            return nil
        default:
            throw KeychainError(status: status)
        }
    }

    func update(_ data: Data, forKey key: String) throws {
        let changes = [kSecValueData as String: data]
        let status = SecItemUpdate(query(forKey: key) as CFDictionary, changes as CFDictionary)
        guard status == errSecSuccess else { throw KeychainError(status: status) }
    }

    func delete(forKey key: String) throws {
        let status = SecItemDelete(query(forKey: key) as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw KeychainError(status: status) }
    }

    func deleteAll() throws {
        let all: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
        ]
        let status = SecItemDelete(all as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw KeychainError(status: status) }
    }
}
