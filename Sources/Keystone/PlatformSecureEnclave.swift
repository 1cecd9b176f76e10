import Foundation
import KeychainEngine
// `canImport(Darwin)`, not `canImport(CryptoKit)`: on Linux a `CryptoKit` module exists (this package's, which
// Keystone does not depend on), and whether it is found would depend on the build order.
#if canImport(Darwin)
import CryptoKit
#else
import KeychainServices
#endif

/// The platform's Secure Enclave, the default of ``KeychainStore/secureEnclave``.
enum PlatformSecureEnclave {
    /// On Apple platforms CryptoKit's `SecureEnclave` (nil where `SecureEnclave.isAvailable` is false: simulators,
    /// Macs without a T2 or Apple silicon); on Linux the process's token (`KeychainServicesDefaults.secureEnclave`).
    static var current: (any SecureEnclaveToken)? {
        #if canImport(Darwin)
        return SecureEnclave.isAvailable ? CryptoKitSecureEnclaveToken() : nil
        #else
        return KeychainServicesDefaults.secureEnclave
        #endif
    }
}

#if canImport(Darwin)
/// CryptoKit's `SecureEnclave` as a `SecureEnclaveToken`, so that Keystone's hardware keys are the same code on
/// every platform.
///
/// A data representation is `"KSSE"`, the usage (1 signing, 2 key agreement) and CryptoKit's own
/// `dataRepresentation`: CryptoKit's blob does not say which kind of key it is. Decision: general keys (signing
/// and key agreement with one key, what a `kSecAttrTokenIDSecureEnclave` SecKey is) are not made here, as CryptoKit
/// has no such key type: `createKey(.general)` fails with `errSecParam`; use `SecKeyCreateRandomKey` for one.
///
/// Status codes: a blob CryptoKit refuses (damaged) → `errSecDecode`; an `OSStatus` error keeps its code; a
/// LocalAuthentication error → `errSecUserCanceled` (cancelled) or `errSecAuthFailed`; any other failure of a
/// signature or key agreement → `errSecDecode`, of a creation → `errSecNotAvailable`. Reasons name the error's
/// domain and code, never bytes.
///
/// Decision (Apple's behaviour, as reported on the developer forums, thread 119315): another device's
/// `dataRepresentation` loads with `init(dataRepresentation:)` and only its use fails, with an error that is neither an
/// `OSStatus` nor documented. These keys carry no access control, so a refusal at use means the Secure Enclave does not
/// accept the key (another device's, or the enclave was reset): `errSecDecode`, as the token contract asks.
struct CryptoKitSecureEnclaveToken: SecureEnclaveToken {
    var name: String { "Secure Enclave (CryptoKit)" }

    func availability() -> EngineError? {
        SecureEnclave.isAvailable ? nil : EngineError(Status.unimplemented, "this device has no Secure Enclave")
    }

    func createKey(_ usage: SecureEnclaveKeyUsage) throws(EngineError) -> SecureEnclaveKey {
        if let unavailable = availability() { throw unavailable }
        switch usage {
        case .signing:
            let key = try Self.run(otherwise: Status.notAvailable, "create a signing key") {
                try SecureEnclave.P256.Signing.PrivateKey()
            }
            return SecureEnclaveKey(usage: .signing, dataRepresentation: Self.envelope(.signing, key.dataRepresentation),
                                    publicKeyX963: key.publicKey.x963Representation)
        case .keyAgreement:
            let key = try Self.run(otherwise: Status.notAvailable, "create a key-agreement key") {
                try SecureEnclave.P256.KeyAgreement.PrivateKey()
            }
            return SecureEnclaveKey(usage: .keyAgreement, dataRepresentation: Self.envelope(.keyAgreement, key.dataRepresentation),
                                    publicKeyX963: key.publicKey.x963Representation)
        case .general:
            throw EngineError.param("CryptoKit's SecureEnclave has no general keys; make one with SecKeyCreateRandomKey and kSecAttrTokenIDSecureEnclave")
        }
    }

    func key(dataRepresentation: Data) throws(EngineError) -> SecureEnclaveKey {
        let (usage, inner) = try Self.open(dataRepresentation)
        switch usage {
        case .signing:
            let key = try Self.load { try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: inner) }
            return SecureEnclaveKey(usage: usage, dataRepresentation: dataRepresentation, publicKeyX963: key.publicKey.x963Representation)
        case .keyAgreement, .general:
            let key = try Self.load { try SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation: inner) }
            return SecureEnclaveKey(usage: usage, dataRepresentation: dataRepresentation, publicKeyX963: key.publicKey.x963Representation)
        }
    }

    func signature(digest: Data, with dataRepresentation: Data) throws(EngineError) -> Data {
        guard digest.count == 32 else { throw EngineError.param("a SHA-256 digest has 32 bytes, not \(digest.count)") }
        let (usage, inner) = try Self.open(dataRepresentation)
        guard usage == .signing else { throw EngineError.param("the key is for key agreement only; it cannot sign") }
        let key = try Self.load { try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: inner) }
        let signature = try Self.run(otherwise: Status.decode, "sign with the key (another device's, or the Secure Enclave was reset)") {
            try key.signature(for: CallerDigest(bytes: Array(digest)))
        }
        return signature.rawRepresentation
    }

    func sharedSecret(peerX963: Data, with dataRepresentation: Data) throws(EngineError) -> Data {
        let (usage, inner) = try Self.open(dataRepresentation)
        guard usage == .keyAgreement else { throw EngineError.param("the key is for signing only; it cannot agree keys") }
        guard peerX963.count == 65, peerX963.first == 0x04,
              let peer = try? P256.KeyAgreement.PublicKey(x963Representation: peerX963) else {
            throw EngineError.param("the peer key is not an uncompressed P-256 point (ANSI X9.63, 65 bytes)")
        }
        let key = try Self.load { try SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation: inner) }
        let secret = try Self.run(otherwise: Status.decode, "agree a key with the key (another device's, or the Secure Enclave was reset)") {
            try key.sharedSecretFromKeyAgreement(with: peer)
        }
        return secret.withUnsafeBytes { Data($0) }
    }

    // MARK: -

    private static let magic = Data("KSSE".utf8)

    private static func envelope(_ usage: SecureEnclaveKeyUsage, _ inner: Data) -> Data {
        magic + Data([usage == .signing ? 1 : 2]) + inner
    }

    private static func open(_ blob: Data) throws(EngineError) -> (SecureEnclaveKeyUsage, Data) {
        let bytes = Data(blob)
        guard bytes.count > 5, bytes.prefix(4) == magic, bytes[4] == 1 || bytes[4] == 2 else {
            throw EngineError(Status.decode, "not a Keystone Secure Enclave key (\(bytes.count) bytes)")
        }
        return (bytes[4] == 1 ? .signing : .keyAgreement, Data(bytes.dropFirst(5)))
    }

    /// Loads a CryptoKit key: any refusal is `errSecDecode` (another device's key, or damaged).
    private static func load<Key>(_ body: () throws -> Key) throws(EngineError) -> Key {
        do {
            return try body()
        } catch {
            throw EngineError(Status.decode, "the Secure Enclave refused the key (\(type(of: error))): it was made on another device, or is damaged")
        }
    }

    /// Runs a CryptoKit operation: an `OSStatus` error keeps its code, anything else becomes `status`.
    private static func run<Value>(otherwise status: Int32, _ what: String, _ body: () throws -> Value) throws(EngineError) -> Value {
        do {
            return try body()
        } catch {
            let error = error as NSError
            if error.domain == "NSOSStatusErrorDomain" {
                throw EngineError(Int32(truncatingIfNeeded: error.code), "the Secure Enclave could not \(what)")
            }
            if error.domain == "com.apple.LocalAuthentication" {
                // LAError.userCancel, .appCancel, .systemCancel (-2, -9, -4): the person or the system cancelled.
                let canceled = [-2, -4, -9].contains(error.code)
                throw EngineError(canceled ? Status.userCanceled : Status.authFailed, "the Secure Enclave could not \(what) (LocalAuthentication \(error.code))")
            }
            throw EngineError(status, "the Secure Enclave could not \(what) (\(error.domain) \(error.code))")
        }
    }
}

/// A caller's 32-byte digest as CryptoKit's `Digest` (its digest types have no public initializer from bytes).
/// ECDSA reads only the bytes.
private struct CallerDigest: Digest {
    let bytes: [UInt8]
    static var byteCount: Int { 32 }
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try bytes.withUnsafeBytes(body) }
    func makeIterator() -> IndexingIterator<[UInt8]> { bytes.makeIterator() }
    var description: String { "CallerDigest(32 bytes)" }
}
#endif
