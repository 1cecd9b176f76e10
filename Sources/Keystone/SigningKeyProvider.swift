import Crypto
import Foundation

/// Where a signing key's private key lives.
public enum SigningKeyKind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// In a Secure Enclave (on Linux a TPM 2.0): the private key never leaves the hardware.
    case hardware
    /// In the keychain, as software: whoever can read the item can read the private key.
    case software

    /// `hardware` or `software`.
    public var description: String { rawValue }
}

/// A P-256 signing key, in hardware or in software: what code that signs depends on, so that the same code runs
/// with a Secure Enclave (or a TPM), without one, and in tests.
///
/// Keystone's conformers are ``SecureEnclaveSigningKey`` (hardware) and ``SoftwareSigningKey`` (a key kept in the
/// keychain); ``SigningKeyFactory`` returns the right one for the device and tells why it fell back to software.
///
/// ```swift
/// let signer = try SigningKeyFactory(keychain: keychain, tag: "com.example.device-key").signingKey().key
/// let signature = try signer.signature(for: payload)
/// #expect(signer.publicKey.isValidSignature(signature, for: payload))
/// ```
///
/// Signatures are ECDSA over SHA-256 (`P256.Signing.ECDSASignature`, verifiable with ``publicKey`` by
/// swift-crypto, CryptoKit, `openssl dgst -sha256 -verify` with its DER form, or `SecKeyVerifySignature`).
///
/// - Important: A hardware key's signature blocks the thread until the hardware answers (a TPM takes
///   milliseconds to a second): call it off the main thread and off Swift's cooperative pool.
public protocol SigningKeyProvider: Sendable {
    /// The public key: give it to whoever verifies the signatures.
    var publicKey: P256.Signing.PublicKey { get }

    /// Whether the private key is in hardware or in software.
    var kind: SigningKeyKind { get }

    /// Signs a SHA-256 digest.
    ///
    /// - Throws: ``KeychainError`` keeping the `OSStatus`: `errSecNotAvailable` (-25291, the Secure Enclave or TPM
    ///   went away: transient), `errSecDecode` (-26275, a hardware key that is not this device's: it will never
    ///   work here), `errSecParam` (-50, the key cannot sign).
    func signature(for digest: SHA256Digest) throws(KeychainError) -> P256.Signing.ECDSASignature
}

extension SigningKeyProvider {
    /// Signs `data`: ECDSA over its SHA-256 digest.
    ///
    /// - Throws: as the digest form, `signature(for: SHA256Digest)`.
    public func signature<D: DataProtocol>(for data: D) throws(KeychainError) -> P256.Signing.ECDSASignature {
        try signature(for: SHA256.hash(data: data))
    }
}

extension P256.Signing.PublicKey {
    /// The first 8 bytes of the SHA-256 of the X9.63 public key, in hex: a name for logs. Not secret.
    var keystoneFingerprint: String {
        SHA256.hash(data: x963Representation).prefix(8).map { String(format: "%02x", $0) }.joined()
    }
}
