import Crypto
import Foundation
import KeychainEngine

// What protects an encrypted keychain's master key (a keychain file's, an etcd keychain's): a password (scrypt), a Secure Enclave token (on Linux the TPM), or
// both. Each protector holds its own sealed copy of the same master key; either one opens the file.

/// The master key sealed under a key derived from the keychain password (scrypt, ``KDFParameters``).
///
/// Header fields: `kdf` (the scrypt parameters, JSON), `master` (``PasswordProtector/wrappedLength`` bytes:
/// AES-GCM of the master key under the derived key, authenticating ``masterAAD``) and `empty` (whether
/// the password is empty).
package struct PasswordProtector: Equatable, Sendable {
    /// What the wrapped master key authenticates.
    package static let masterAAD = Data("keystone-master-v1".utf8)
    /// The length of a wrapped master key: a 12-byte nonce, the 32-byte key, a 16-byte tag.
    package static let wrappedLength = 60

    package var kdf: KDFParameters
    package var wrappedMaster: Data
    package var isEmpty: Bool

    /// Seals `master` under a key derived from `password` with today's scrypt parameters.
    ///
    /// - Throws: `errSecAllocate` when scrypt fails.
    package init(sealing master: SymmetricKey, password: String) throws(EngineError) {
        let kdf = KDFParameters.current()
        let wrapped = try Sealing.seal(master.withUnsafeBytes { Data($0) }, key: try kdf.deriveKey(password), aad: PasswordProtector.masterAAD)
        self.init(kdf: kdf, wrappedMaster: wrapped, isEmpty: password.isEmpty)
    }

    package init(kdf: KDFParameters, wrappedMaster: Data, isEmpty: Bool) {
        self.kdf = kdf
        self.wrappedMaster = wrappedMaster
        self.isEmpty = isEmpty
    }

    /// The master key, when `password` is the keychain's.
    ///
    /// - Throws: `errSecAuthFailed` for a wrong password; `errSecInvalidKeychain` for scrypt parameters out of range.
    package func unwrap(_ password: String) throws(EngineError) -> SymmetricKey {
        let derived = try kdf.deriveKey(password)
        guard let bytes = try? Sealing.open(wrappedMaster, key: derived, aad: PasswordProtector.masterAAD), bytes.count == 32 else {
            throw EngineError(Status.authFailed, "wrong keychain password")
        }
        return SymmetricKey(data: bytes)
    }
}

/// The master key sealed to a key that lives in a ``SecureEnclaveToken`` (on Linux the TPM 2.0): the keychain opens
/// on the machine whose token holds that key, without a password, and nowhere else.
///
/// No cryptography is written here: the token and swift-crypto do it all.
/// - Sealing (at creation): the token makes a P-256 key-agreement key (``SecureEnclaveKeyUsage/keyAgreement``);
///   swift-crypto makes an ephemeral P-256 key; ECDH(ephemeral, token key) gives a shared secret, HKDF-SHA256
///   turns it into an AES-256-GCM key (salt: the file id; info: ``hkdfLabel``, the token key's public key and the
///   ephemeral public key), which seals the master key (authenticating ``hkdfLabel`` and the file id). The
///   ephemeral private key is dropped: only the token can compute that shared secret again.
/// - Unsealing: the token computes ECDH(token key, ephemeral public key), the same secret; the same HKDF gives the
///   same key, which opens the master key.
///
/// Header fields (format 4): `sealed-scheme` (``scheme``; another value is `errSecWrongSecVersion`),
/// `sealed-key` (the token's data representation of its key: for a TPM, the key wrapped by that TPM's storage
/// key), `sealed-ephemeral` (the ephemeral public key, ANSI X9.63, 65 bytes) and `sealed-master` (the sealed
/// master key, ``PasswordProtector/wrappedLength`` bytes).
///
/// - Important: The token key has no authorization of its own (see `TPMDevice`): whoever can run code as a user
///   allowed to use the TPM, and can read the file, can open a keychain sealed without a password. Sealing binds
///   the keychain to the machine (a copied file, a stolen disk, a backup restored elsewhere cannot be opened); it
///   does not protect it from code running on that machine. Clearing the TPM (or replacing the machine, or a
///   firmware update that resets the TPM) destroys the token key, and with it the keychain, unless the file also
///   has a recovery password.
package struct SealedProtector: Equatable, Sendable {
    /// The only sealing scheme so far: ECDH P-256 in the token, HKDF-SHA256, AES-256-GCM.
    package static let scheme = "p256-ecdh-hkdf-sha256-aes-gcm-v1"
    package static let hkdfLabel = Data("keystone-sealed-master-v1".utf8)
    /// The longest token key representation a header may hold (a TPM's is about 250 bytes).
    package static let maximumKeyLength = 4096

    /// The token's data representation of its key-agreement key.
    package var tokenKey: Data
    /// The ephemeral public key, ANSI X9.63 (65 bytes).
    package var ephemeralPublicKey: Data
    /// The sealed master key: 12-byte nonce, 32-byte key, 16-byte tag.
    package var wrappedMaster: Data

    package init(tokenKey: Data, ephemeralPublicKey: Data, wrappedMaster: Data) {
        self.tokenKey = tokenKey
        self.ephemeralPublicKey = ephemeralPublicKey
        self.wrappedMaster = wrappedMaster
    }

    /// Seals `master` to a new key made in `token`, for the file whose id is `fileID`.
    ///
    /// Blocks while the token works (milliseconds to a second on a hardware TPM).
    /// - Throws: the token's `EngineError`: `errSecUnimplemented` (no such hardware), `errSecNotAvailable`
    ///   (unreachable), `errSecInternalComponent` (it refused).
    package init(sealing master: SymmetricKey, to token: any SecureEnclaveToken, fileID: Data) throws(EngineError) {
        let key = try token.createKey(.keyAgreement)
        let tokenPublic: P256.KeyAgreement.PublicKey
        do {
            tokenPublic = try P256.KeyAgreement.PublicKey(x963Representation: key.publicKeyX963)
        } catch {
            throw EngineError(Status.internalComponent, "the Secure Enclave (\(token.name)) gave a key whose public key is not a P-256 point")
        }
        let ephemeral = P256.KeyAgreement.PrivateKey()
        let shared: SharedSecret
        do {
            shared = try ephemeral.sharedSecretFromKeyAgreement(with: tokenPublic)
        } catch {
            throw EngineError(Status.internalComponent, "the Secure Enclave (\(token.name)) gave a public key no key agreement works with")
        }
        let ephemeralPublic = ephemeral.publicKey.x963Representation
        let sealingKey = Self.sealingKey(sharedX: shared.withUnsafeBytes { Data($0) }, tokenPublicKey: key.publicKeyX963,
                                         ephemeralPublicKey: ephemeralPublic, fileID: fileID)
        let wrapped = try Sealing.seal(master.withUnsafeBytes { Data($0) }, key: sealingKey, aad: Self.hkdfLabel + fileID)
        self.init(tokenKey: key.dataRepresentation, ephemeralPublicKey: ephemeralPublic, wrappedMaster: wrapped)
    }

    /// The master key, unsealed by `token`.
    ///
    /// Blocks while the token works. Reads and writes nothing of the file.
    /// - Throws: `EngineError`: `errSecNotAvailable` (the token cannot be reached; nil `token`: none was given),
    ///   `errSecUnimplemented` (this machine has no such hardware), `errSecDecode` (the key belongs to another
    ///   token — another machine, or a TPM cleared since — or the sealed fields were edited); any other status the
    ///   token failed with (`errSecInternalComponent`: the TPM refused for a reason of its own), with its reason.
    package func unseal(with token: (any SecureEnclaveToken)?, fileID: Data) throws(EngineError) -> SymmetricKey {
        guard let token else {
            throw EngineError(Status.notAvailable, "the keychain is sealed to a TPM (Secure Enclave) and no token was given to open it: pass one (KeychainServicesDefaults.secureEnclave), or check KEYSTONE_SECURE_ENCLAVE is not none")
        }
        let key: SecureEnclaveKey
        let shared: Data
        do throws(EngineError) {
            key = try token.key(dataRepresentation: tokenKey)
            guard key.usage == .keyAgreement else { throw EngineError(Status.decode, "the sealed key is not a key-agreement key") }
            shared = try token.sharedSecret(peerX963: ephemeralPublicKey, with: tokenKey)
        } catch where error.status == Status.notAvailable || error.status == Status.unimplemented {
            throw EngineError(error.status, "the keychain is sealed to a TPM that cannot be reached (\(clause(error.reason))); the file was left as it is")
        } catch where error.status == Status.decode || error.status == Status.param {
            // Not this token's key, or sealed fields that are not what this token made (a wrong usage, an invalid
            // ephemeral key): another machine's keychain, or an edited header.
            throw Self.sealedElsewhere(error.reason)
        } catch {
            // The token refused for a reason of its own (a TPM out of memory, in lockout…): not a verdict on the file.
            throw EngineError(error.status, "the TPM could not unseal the keychain (\(clause(error.reason))); the file was left as it is: try again, and see `keystone doctor`")
        }
        let sealingKey = Self.sealingKey(sharedX: shared, tokenPublicKey: key.publicKeyX963,
                                         ephemeralPublicKey: ephemeralPublicKey, fileID: fileID)
        guard let bytes = try? Sealing.open(wrappedMaster, key: sealingKey, aad: Self.hkdfLabel + fileID), bytes.count == 32 else {
            throw Self.sealedElsewhere("the sealed master key does not open with this TPM's key")
        }
        return SymmetricKey(data: bytes)
    }

    /// The error of a keychain this token cannot unseal.
    package static func sealedElsewhere(_ detail: String) -> EngineError {
        EngineError(Status.decode, "sealed to another TPM; the keychain cannot be opened here (or its header was damaged): \(clause(detail)). The file was left as it is; open it on the machine that created it, or unlock it with its recovery password if it has one")
    }

    /// HKDF-SHA256 of the ECDH x coordinate: salt the file id, info the label and both public keys.
    private static func sealingKey(sharedX: Data, tokenPublicKey: Data, ephemeralPublicKey: Data, fileID: Data) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: sharedX), salt: fileID,
                               info: hkdfLabel + tokenPublicKey + ephemeralPublicKey, outputByteCount: 32)
    }
}

/// A reason without its final full stop, to be embedded in a sentence.
package func clause(_ reason: String) -> String {
    var text = Substring(reason)
    while let last = text.last, last == "." || last == " " { text = text.dropLast() }
    return String(text)
}
