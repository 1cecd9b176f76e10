import Crypto
import Foundation

/// A P-256 signing key in a Secure Enclave — Apple's, a TPM 2.0 on Linux, or an emulated one in tests: the private
/// key is made inside the hardware and never leaves it.
///
/// What leaves is ``dataRepresentation``: the key wrapped by the hardware, usable only with the token that made it
/// (another device's, another TPM's or another emulated enclave's token refuses it with `errSecDecode`). Keep it to
/// use the key again after a restart; ``SigningKeyFactory`` keeps it in the keychain.
///
/// ```swift
/// let key = try SecureEnclaveSigningKey()                 // the platform's Secure Enclave
/// let signature = try key.signature(for: payload)
/// let again = try SecureEnclaveSigningKey(dataRepresentation: key.dataRepresentation)
/// ```
///
/// - Important: Each signature asks the hardware and blocks until it answers: call it off the main thread and off
///   Swift's cooperative pool. There is no access control on the key's use here (no prompt before signing):
///   protect the stored ``dataRepresentation`` with the keychain item's access control when the key must be
///   unusable without the user (a TPM key has no authorization value: whoever holds the blob and can open the TPM
///   can sign).
public struct SecureEnclaveSigningKey: SigningKeyProvider, CustomStringConvertible {
    /// The token the key lives in.
    public let token: any SecureEnclaveToken
    /// The key wrapped by the token: useless without it. Not the private key.
    public let dataRepresentation: Data
    /// The public key.
    public let publicKey: P256.Signing.PublicKey

    /// ``SigningKeyKind/hardware``.
    public var kind: SigningKeyKind { .hardware }

    /// Makes a new signing key in `token`.
    ///
    /// - Parameter token: the Secure Enclave; by default the platform's (CryptoKit's `SecureEnclave` on Apple
    ///   platforms, `KeychainServicesDefaults.secureEnclave` on Linux).
    /// - Throws: ``KeychainError`` with `errSecUnimplemented` (-4: no Secure Enclave on this device or build),
    ///   `errSecNotAvailable` (-25291: there is one, but it cannot be reached now).
    public init(token: (any SecureEnclaveToken)? = nil) throws(KeychainError) {
        let token = try Self.resolve(token)
        let key: SecureEnclaveKey
        do {
            key = try token.createKey(.signing)
        } catch {
            throw KeychainError(error)
        }
        try self.init(key, token: token)
    }

    /// A key made before by the same token, from its ``dataRepresentation``. Nothing is signed: Apple's Secure
    /// Enclave and a TPM both read another device's key here, and refuse it (`errSecDecode`) at its first signature.
    ///
    /// - Parameters:
    ///   - dataRepresentation: what ``dataRepresentation`` was.
    ///   - token: the token that made it; by default the platform's.
    /// - Throws: ``KeychainError`` with `errSecDecode` (-26275: not a key of this token — another device's, or
    ///   damaged), ``KeychainError/keyTypeMismatch`` (a key-agreement-only key), `errSecUnimplemented` (no token).
    public init(dataRepresentation: Data, token: (any SecureEnclaveToken)? = nil) throws(KeychainError) {
        let token = try Self.resolve(token)
        let key: SecureEnclaveKey
        do {
            key = try token.key(dataRepresentation: dataRepresentation)
        } catch {
            throw KeychainError(error)
        }
        try self.init(key, token: token)
    }

    private init(_ key: SecureEnclaveKey, token: any SecureEnclaveToken) throws(KeychainError) {
        guard key.usage != .keyAgreement else {
            throw KeychainError(code: .keyTypeMismatch, reason: "the Secure Enclave key is a key-agreement key; it cannot sign")
        }
        do {
            publicKey = try P256.Signing.PublicKey(x963Representation: key.publicKeyX963)
        } catch {
            throw KeychainError(status: Status.decode, reason: "the Secure Enclave key's public key is not a P-256 point")
        }
        self.token = token
        dataRepresentation = key.dataRepresentation
    }

    private static func resolve(_ token: (any SecureEnclaveToken)?) throws(KeychainError) -> any SecureEnclaveToken {
        guard let token = token ?? PlatformSecureEnclave.current else {
            throw KeychainError(status: Status.unimplemented, reason: "this device (or build) has no Secure Enclave")
        }
        return token
    }

    /// Signs a SHA-256 digest in the hardware.
    ///
    /// - Throws: ``KeychainError`` with `errSecNotAvailable` (-25291: the hardware went away; transient),
    ///   `errSecDecode` (-26275: the key is not this token's; permanent), `errSecParam` (-50).
    public func signature(for digest: SHA256Digest) throws(KeychainError) -> P256.Signing.ECDSASignature {
        let raw: Data
        do {
            raw = try token.signature(digest: Data(digest), with: dataRepresentation)
        } catch {
            throw KeychainError(error)
        }
        do {
            return try P256.Signing.ECDSASignature(rawRepresentation: raw)
        } catch {
            throw KeychainError(status: Status.internalComponent, reason: "\(token.name) returned \(raw.count) bytes, not a raw P-256 signature")
        }
    }

    /// Proves the token can use the key now: signs a fixed digest and verifies the signature with ``publicKey``.
    ///
    /// Apple's Secure Enclave and a TPM read another device's key without complaint and refuse it only when it is
    /// used: call this after ``init(dataRepresentation:token:)`` to learn it at once. ``SigningKeyFactory`` does.
    /// It costs one signature in the hardware.
    ///
    /// - Throws: ``KeychainError`` with `errSecDecode` (-26275: the key is not this token's, or its blob's public key
    ///   is not the private key's: it will never work here), `errSecNotAvailable` (-25291: the hardware cannot be
    ///   reached now; transient).
    public func checkUsable() throws(KeychainError) {
        let digest = SHA256.hash(data: Data("Keystone: is this Secure Enclave key usable here?".utf8))
        let signature = try signature(for: digest)
        guard publicKey.isValidSignature(signature, for: digest) else {
            throw KeychainError(status: Status.decode, reason: "\(token.name) signs with a private key that is not this key's public key's")
        }
    }

    /// `SecureEnclaveSigningKey(hardware P-256 in "<token>", public key <fingerprint>)`: no key bytes.
    public var description: String {
        "SecureEnclaveSigningKey(hardware P-256 in \"\(token.name)\", public key \(publicKey.keystoneFingerprint))"
    }
}
