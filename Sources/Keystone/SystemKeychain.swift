import Foundation
import KeychainServices
// On Apple platforms KeychainServices re-exports these; imported here too so the file reads as Apple code does.
// `canImport(Darwin)`, not `canImport(Security)`: on Linux a `Security` module exists (this package's, which
// Keystone does not depend on), and whether it is found would depend on the build order.
#if canImport(Darwin)
import Security
#endif

// SystemKeychain (this file and its +Queries and +Results extensions) is the only part of Keystone that calls Keychain
// Services (SecItem*, SecAccessControl, LAContext); app-side biometric prompts (LAContext.evaluatePolicy) are
// BiometricAuthenticator.swift's. On Apple platforms these are Security's and LocalAuthentication's; elsewhere
// KeychainServices provides the same names over Keystone's keychain file.

/// The platform keychain as a ``KeychainStore``: Apple's `SecItemAdd`, `SecItemCopyMatching`,
/// `SecItemUpdate` and `SecItemDelete`.
///
/// On Apple platforms these are the Security framework's functions (the data protection keychain:
/// ``Keychain`` sets `kSecUseDataProtectionKeychain` on macOS). On Linux they are KeychainServices'
/// implementation over the process-wide default keychain file.
///
/// Typed queries are turned into `[String: Any]` dictionaries: strings, data, numbers, Booleans and
/// dates as themselves; an `AccessControl` into a `SecAccessControl`
/// (`SecAccessControlCreateWithFlags`); an `AuthenticationContext` into an `LAContext` kept for as
/// long as the context lives, so its successful authentication is reused.
///
/// - Important: SecItem calls block, and a read of an access-controlled item waits for the user.
///   Call the `async` forms of ``Keychain`` from the main actor.
public struct SystemKeychain: KeychainStore {
    /// The platform keychain.
    public init() {}

    /// `SecItemAdd`.
    ///
    /// - Throws: ``KeychainError`` with the `OSStatus` Keychain Services returned.
    public func add(_ attributes: KeychainQuery) throws -> ItemResult? {
        let dictionary = try Self.dictionary(attributes)
        var result: CFTypeRef?
        let status = SecItemAdd(dictionary as CFDictionary, &result)
        guard status == errSecSuccess else { throw Self.failure(status, "SecItemAdd") }
        return try Self.itemResult(result, itemClass: Self.itemClass(of: attributes))
    }

    /// `SecItemCopyMatching`.
    ///
    /// - Throws: ``KeychainError`` with the `OSStatus` Keychain Services returned.
    public func copyMatching(_ query: KeychainQuery) throws -> ItemResult? {
        let dictionary = try Self.dictionary(query)
        var result: CFTypeRef?
        let status = SecItemCopyMatching(dictionary as CFDictionary, &result)
        guard status == errSecSuccess else { throw Self.failure(status, "SecItemCopyMatching") }
        return try Self.itemResult(result, itemClass: Self.itemClass(of: query))
    }

    /// `SecItemUpdate`.
    ///
    /// - Throws: ``KeychainError`` with the `OSStatus` Keychain Services returned.
    public func update(_ query: KeychainQuery, with attributesToUpdate: KeychainQuery) throws {
        let dictionary = try Self.dictionary(query)
        let changes = try Self.dictionary(attributesToUpdate)
        let status = SecItemUpdate(dictionary as CFDictionary, changes as CFDictionary)
        guard status == errSecSuccess else { throw Self.failure(status, "SecItemUpdate") }
    }

    /// `SecItemDelete`.
    ///
    /// - Throws: ``KeychainError`` with the `OSStatus` Keychain Services returned.
    public func delete(_ query: KeychainQuery) throws {
        let dictionary = try Self.dictionary(query)
        let status = SecItemDelete(dictionary as CFDictionary)
        guard status == errSecSuccess else { throw Self.failure(status, "SecItemDelete") }
    }
}

extension SystemKeychain {
    /// The error of a failed SecItem call: its `OSStatus`, and on Linux the engine's reason (what went wrong and
    /// what fixes it); Apple's functions give only the status.
    static func failure(_ status: OSStatus, _ function: String) -> KeychainError {
        #if canImport(Darwin)
        return KeychainError(status: status, reason: "\(function) failed")
        #else
        let reason = SecItemBridge.lastFailureReason.map { "\(function) failed: \($0)" } ?? "\(function) failed"
        return KeychainError(status: status, reason: reason)
        #endif
    }
}
