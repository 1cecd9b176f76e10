import Crypto
import Foundation

/// A P-256 signing key in software: the fallback where there is no Secure Enclave (a simulator, a machine without
/// a TPM), kept in the keychain by ``SigningKeyFactory``.
///
/// - Important: The private key is in the process's memory and in the keychain item: whoever can read the item
///   (the app, its access group, a backup of a non-`ThisDeviceOnly` item) can copy it. Prefer a
///   ``SecureEnclaveSigningKey`` where the device has one. The private key is not exposed by this type; it is by
///   the keychain item (`Keychain.key(for:)` with the factory's ``SigningKeyFactory/softwareItem``).
public struct SoftwareSigningKey: SigningKeyProvider, CustomStringConvertible, CustomReflectable {
    private let privateKey: P256.Signing.PrivateKey

    /// Wraps `privateKey`.
    public init(_ privateKey: P256.Signing.PrivateKey) {
        self.privateKey = privateKey
    }

    /// The public key.
    public var publicKey: P256.Signing.PublicKey { privateKey.publicKey }

    /// ``SigningKeyKind/software``.
    public var kind: SigningKeyKind { .software }

    /// Signs a SHA-256 digest.
    ///
    /// - Throws: ``KeychainError`` with `errSecInternalComponent` if swift-crypto fails (it does not for a valid key).
    public func signature(for digest: SHA256Digest) throws(KeychainError) -> P256.Signing.ECDSASignature {
        do {
            return try privateKey.signature(for: digest)
        } catch {
            throw KeychainError(status: Status.internalComponent, reason: "P-256 signing failed (\(type(of: error)))")
        }
    }

    /// The kind and the public key's fingerprint only: `dump()` and debuggers do not reach the private key.
    public var customMirror: Mirror {
        Mirror(self, children: ["kind": kind, "publicKey": publicKey.keystoneFingerprint], displayStyle: .struct)
    }

    /// `SoftwareSigningKey(software P-256, public key <fingerprint>)`: no key bytes.
    public var description: String {
        "SoftwareSigningKey(software P-256, public key \(publicKey.keystoneFingerprint))"
    }
}
