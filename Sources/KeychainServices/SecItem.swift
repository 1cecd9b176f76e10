#if !canImport(Darwin)
import Foundation
import KeychainEngine

// SecItemAdd, SecItemCopyMatching, SecItemUpdate, SecItemDelete and SecCopyErrorMessageString over the
// process-wide default keychain (`KeychainServicesDefaults.currentEngine()`), with Apple's semantics (the engine's).

/// Adds an item. With return keys, `result` receives what `SecItemCopyMatching` would return for it.
///
/// - Returns: `errSecSuccess`, or `errSecDuplicateItem`, `errSecParam`, `errSecNoSuchAttr`,
///   `errSecInteractionNotAllowed`, `errSecMissingEntitlement`…
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    SecItemCompiledPath.add(attributes, result) ?? SecItemGeneralPath.add(attributes, result)
}

/// Finds items; `result` receives nil, the bare data, a dictionary or an array as the return keys ask.
///
/// - Returns: `errSecSuccess`, or `errSecItemNotFound`, `errSecParam` (also for return keys with a nil
///   `result`), `errSecInteractionNotAllowed`, `errSecUserCanceled`, `errSecAuthFailed`, `errSecDecode`…
///
/// A `kSecReturnRef` of a Secure Enclave key (`tkid` = ``kSecAttrTokenIDSecureEnclave``) never prompts: the key's
/// object keeps the query's `kSecUseAuthenticationContext`, `kSecUseOperationPrompt` and `kSecUseAuthenticationUI`,
/// and authenticates each use with them, as on Apple platforms. It is bound to
/// ``KeychainServicesDefaults/secureEnclave`` (`errSecUnimplemented` when there is none).
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    SecItemCompiledPath.copyMatching(query, result) ?? SecItemGeneralPath.copyMatching(query, result)
}

/// Changes every item that matches `query`.
///
/// - Returns: `errSecSuccess`, or `errSecItemNotFound`, `errSecDuplicateItem`, `errSecParam`…
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    SecItemCompiledPath.update(query, attributesToUpdate) ?? SecItemGeneralPath.update(query, attributesToUpdate)
}

/// Deletes every item that matches `query`.
///
/// - Returns: `errSecSuccess`, or `errSecItemNotFound`, `errSecParam`, `errSecInteractionNotAllowed`…
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    SecItemCompiledPath.delete(query) ?? SecItemGeneralPath.delete(query)
}

/// The SecItem functions' general path: every dictionary, every rule (references, identities, `LAContext`s). The
/// compiled path (``SecItemCompiledPath``) serves the common shapes first and hands the rest here; the differential
/// tests call these directly as the reference the compiled path must match.
enum SecItemGeneralPath {
    static func add(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
        SecItemBridge.run(result, laContext: SecItemReferences.laContext(in: attributes)) {
            if let identity = attributes.first(where: { ($0.key.base as? String) == Key.valueRef })?.value as? SecIdentity {
                return (try SecItemReferences.addIdentity(identity, attributes), try SecItemBridge.query(attributes.filter { ($0.key.base as? String) != Key.valueRef }))
            }
            let typed = try SecItemBridge.query(SecItemReferences.expanding(attributes, forAdd: true))
            return (try KeychainServicesDefaults.currentEngine().add(typed), typed)
        }
    }

    static func copyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
        SecItemBridge.run(result, laContext: SecItemReferences.laContext(in: query)) {
            let typed = try SecItemBridge.query(SecItemReferences.expanding(query, forAdd: false))
            if result == nil, SecItemBridge.returnKeys.contains(where: { typed[$0]?.boolValue == true }) {
                throw EngineError.param("return keys need a result pointer (errSecReturnMissingPointer)")
            }
            return (try KeychainServicesDefaults.currentEngine().copyMatching(typed), typed)
        }
    }

    static func update(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
        SecItemBridge.run(nil) {
            let typed = try SecItemBridge.query(SecItemReferences.expanding(query, forAdd: false))
            let changes = try SecItemBridge.query(attributesToUpdate)
            try KeychainServicesDefaults.currentEngine().update(typed, with: changes)
            return (nil, typed)
        }
    }

    static func delete(_ query: CFDictionary) -> OSStatus {
        SecItemBridge.run(nil) {
            let typed = try SecItemBridge.query(SecItemReferences.expanding(query, forAdd: false))
            // A Secure Enclave key's TPM authorization secret goes with the key (SecureEnclaveKeySecrets.swift).
            try SecureEnclaveKeySecrets.delete(typed, engine: KeychainServicesDefaults.currentEngine())
            return (nil, typed)
        }
    }
}

/// Apple's message for a status code; `OSStatus <code>` for codes it has none for.
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    Status.message(for: status)
}

#endif

