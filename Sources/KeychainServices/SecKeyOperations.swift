#if !canImport(Darwin)
import Foundation
import Crypto
import CryptoExtras
import KeychainEngine

// SecKey.h: signing, verification, encryption, decryption and key exchange with Apple's algorithms, performed by
// swift-crypto. The formats and rules are those of Apple's Security (SecKeyAdaptors.m, SecKey.c, SecECKey.c):
// - ECDSA "X962" signatures are DER `ECDSA-Sig-Value`; "RFC4754" signatures are r ‖ s. A digest form's input must
//   be exactly the hash's size (errSecParam otherwise).
// - RSA PSS uses MGF1 with the same hash and a salt as long as the hash.
// - ECIES ("…X963SHA256AESGCM"): an ephemeral key pair on the recipient's curve; the X9.63 KDF with the algorithm's
//   hash over the ECDH shared secret, with the ephemeral public key (04 ‖ X ‖ Y) as shared info, gives an AES key of
//   16 bytes (curves up to 256 bits) or 32 bytes (larger curves), followed, for the "VariableIV" algorithms, by a
//   16-byte GCM IV (the others use 16 zero bytes); AES-GCM without associated data, 16-byte tag. The output is
//   ephemeral public key ‖ ciphertext ‖ tag. Standard and cofactor ECDH agree on these curves (cofactor 1).
// - ECDH: the raw shared secret is the x-coordinate; the X9.63 KDF algorithms need
//   `SecKeyKeyExchangeParameter.requestedSize` and take an optional `.sharedInfo`.
// - An algorithm the key cannot perform fails with errSecParam, "<algorithm>: algorithm not supported by the key
//   <key>"; a signature that does not verify with errSecVerifyFailed.
// - A Secure Enclave key (`kSecAttrTokenIDSecureEnclave`, SecKeyToken.swift) performs every EC private-key algorithm
//   a software P-256 key does: the token signs the digest and computes the raw ECDH secret; hashing, DER encoding,
//   the X9.63 KDF and ECIES's AES-GCM are the same code as for software keys (swift-crypto's). Each use first passes
//   the key's access control (`AuthenticationGate`).
//
// Not performed (SecKeyIsAlgorithmSupported answers false): SHA-224 wherever the input must be hashed or the RSA
// DigestInfo needs it (swift-crypto has no SHA-224), MD5, raw RSA, the RSA OAEP+AES-GCM hybrids, OAEP with
// SHA-224/384/512, and the RSA signature algorithms without a hash (`…DigestPKCS1v15Raw`, `…SignatureRaw`).

// MARK: - Algorithms Keystone performs

/// The hash functions of Apple's algorithm names.
enum SecKeyHash: String, Sendable {
    case sha1 = "SHA1", sha224 = "SHA224", sha256 = "SHA256", sha384 = "SHA384", sha512 = "SHA512"

    var byteCount: Int {
        switch self {
        case .sha1: 20
        case .sha224: 28
        case .sha256: 32
        case .sha384: 48
        case .sha512: 64
        }
    }

    /// The digest of `message` (nil for SHA-224, which swift-crypto lacks).
    func hash(_ message: Data) -> (any Digest)? {
        switch self {
        case .sha1: Insecure.SHA1.hash(data: message)
        case .sha224: nil
        case .sha256: SHA256.hash(data: message)
        case .sha384: SHA384.hash(data: message)
        case .sha512: SHA512.hash(data: message)
        }
    }

    /// A digest already computed by the caller, as swift-crypto's digest type of this hash (RSA needs the type to
    /// choose its DigestInfo).
    func digest(_ bytes: Data) -> (any Digest)? {
        switch self {
        case .sha1: loadDigest(Insecure.SHA1Digest.self, bytes)
        case .sha224: nil
        case .sha256: loadDigest(SHA256Digest.self, bytes)
        case .sha384: loadDigest(SHA384Digest.self, bytes)
        case .sha512: loadDigest(SHA512Digest.self, bytes)
        }
    }

    /// The X9.63 KDF (ANSI X9.63 §3.6.1) over a shared secret, by swift-crypto.
    func x963(_ secret: SharedSecret, sharedInfo: Data, count: Int) -> Data? {
        let key: SymmetricKey
        switch self {
        case .sha1: key = secret.x963DerivedSymmetricKey(using: Insecure.SHA1.self, sharedInfo: sharedInfo, outputByteCount: count)
        case .sha224: return nil
        case .sha256: key = secret.x963DerivedSymmetricKey(using: SHA256.self, sharedInfo: sharedInfo, outputByteCount: count)
        case .sha384: key = secret.x963DerivedSymmetricKey(using: SHA384.self, sharedInfo: sharedInfo, outputByteCount: count)
        case .sha512: key = secret.x963DerivedSymmetricKey(using: SHA512.self, sharedInfo: sharedInfo, outputByteCount: count)
        }
        return key.withUnsafeBytes { Data($0) }
    }
}

/// swift-crypto's digest types have no public initializer from bytes: a caller's digest is loaded into the type's
/// storage, which holds the digest's bytes in order (checked: the loaded digest must iterate as exactly `bytes`;
/// only plain-data types are loaded). Nil when the layout is not so, and the digest form is then not performed.
func loadDigest<D: Digest>(_ type: D.Type, _ bytes: Data) -> D? {
    guard _isPOD(D.self), bytes.count == D.byteCount, MemoryLayout<D>.size >= D.byteCount else { return nil }
    var storage = [UInt8](repeating: 0, count: MemoryLayout<D>.size)
    storage.replaceSubrange(0..<bytes.count, with: bytes)
    let digest = storage.withUnsafeBytes { $0.loadUnaligned(as: D.self) }
    return digest.elementsEqual(bytes) ? digest : nil
}

/// A caller's digest of any length, for ECDSA (which uses the bytes only, never the digest's type).
struct RawDigest: Digest {
    let bytes: [UInt8]
    static var byteCount: Int { 64 }
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try bytes.withUnsafeBytes(body) }
    func makeIterator() -> IndexingIterator<[UInt8]> { bytes.makeIterator() }
    var description: String { "RawDigest(\(bytes.count) bytes)" }
}

/// What an algorithm identifier asks for.
enum SecKeyPlan: Sendable {
    /// ECDSA; `hash` nil for `ecdsaSignatureDigestX962` / `ecdsaSignatureRFC4754` (a digest of any size).
    case ecdsa(hash: SecKeyHash?, message: Bool, rfc4754: Bool)
    case rsaSignature(hash: SecKeyHash, message: Bool, pss: Bool)
    case rsaEncryptionPKCS1
    case rsaEncryptionOAEP(SecKeyHash)
    case ecies(SecKeyHash, variableIV: Bool)
    case ecdh(kdf: SecKeyHash?)

    /// The plans of Apple's algorithms, parsed once (an operation looks its algorithm up instead of parsing it).
    private static let known: [CFString: SecKeyPlan] = {
        var plans: [CFString: SecKeyPlan] = [:]
        for algorithm in SecKeyAlgorithm.allKnown { plans[algorithm.rawValue] = SecKeyPlan(parsing: algorithm) }
        return plans
    }()

    /// The plan of Apple's algorithm identifier; nil for an algorithm Keystone does not know.
    init?(_ algorithm: SecKeyAlgorithm) {
        guard let plan = SecKeyPlan.known[algorithm.rawValue] ?? SecKeyPlan(parsing: algorithm) else { return nil }
        self = plan
    }

    /// Parses Apple's algorithm identifier; nil for an algorithm Keystone does not know.
    private init?(parsing algorithm: SecKeyAlgorithm) {
        let parts = algorithm.rawValue.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 3, parts[0] == "algid" else { return nil }
        let hash = { (index: Int) in parts.count > index ? SecKeyHash(rawValue: parts[index]) : nil }
        switch (parts[1], parts[2]) {
        case ("sign", "ECDSA"):
            switch (parts.count, parts.count > 3 ? parts[3] : "") {
            case (4, "RFC4754"): self = .ecdsa(hash: nil, message: false, rfc4754: true)
            case (4, "digest-X962"): self = .ecdsa(hash: nil, message: false, rfc4754: false)
            case (5, "digest-X962"): guard let h = hash(4) else { return nil }; self = .ecdsa(hash: h, message: false, rfc4754: false)
            case (5, "message-X962"): guard let h = hash(4) else { return nil }; self = .ecdsa(hash: h, message: true, rfc4754: false)
            default: return nil
            }
        case ("sign", "RSA"):
            guard parts.count >= 5, let h = hash(4) else { return nil }
            switch (parts.count, parts[3]) {
            case (5, "digest-PKCS1v15"): self = .rsaSignature(hash: h, message: false, pss: false)
            case (5, "message-PKCS1v15"): self = .rsaSignature(hash: h, message: true, pss: false)
            case (7, "digest-PSS"), (7, "message-PSS"):
                guard hash(5) == h, parts[6] == String(h.byteCount) else { return nil }
                self = .rsaSignature(hash: h, message: parts[3] == "message-PSS", pss: true)
            default: return nil
            }
        case ("encrypt", "RSA"):
            if parts.count == 4, parts[3] == "PKCS1" { self = .rsaEncryptionPKCS1 }
            else if parts.count == 5, parts[3] == "OAEP", let h = hash(4) { self = .rsaEncryptionOAEP(h) }
            else { return nil }
        case ("encrypt", "ECIES"):
            guard parts.count == 7, parts[3] == "ECDH" || parts[3] == "ECDHC", parts[4] == "KDFX963", let h = hash(5),
                  parts[6] == "AESGCM" || parts[6] == "AESGCM-KDFIV" else { return nil }
            self = .ecies(h, variableIV: parts[6] == "AESGCM-KDFIV")
        case ("keyexchange", "ECDH"), ("keyexchange", "ECDHC"):
            if parts.count == 3 { self = .ecdh(kdf: nil) }
            else if parts.count == 5, parts[3] == "KDFX963", let h = hash(4) { self = .ecdh(kdf: h) }
            else { return nil }
        default:
            return nil
        }
    }

    /// Whether `key` can perform this algorithm for `operation`.
    func isSupported(by key: SecKey, for operation: SecKeyOperationType) -> Bool {
        switch self {
        case .ecdsa(let hash, let message, _):
            guard key.isEC, operation == .sign ? key.isPrivate : operation == .verify && !key.isPrivate else { return false }
            return !(message && hash == .sha224)
        case .rsaSignature(let hash, _, _):
            guard !key.isEC, operation == .sign ? key.isPrivate : operation == .verify && !key.isPrivate else { return false }
            return hash != .sha224
        case .rsaEncryptionPKCS1:
            guard !key.isEC, operation == .encrypt ? !key.isPrivate : operation == .decrypt && key.isPrivate else { return false }
            return key.blockSize >= 11
        case .rsaEncryptionOAEP(let hash):
            guard !key.isEC, operation == .encrypt ? !key.isPrivate : operation == .decrypt && key.isPrivate else { return false }
            return (hash == .sha1 || hash == .sha256) && key.blockSize >= 2 * hash.byteCount + 2
        case .ecies(let hash, _):
            guard key.isEC, operation == .encrypt ? !key.isPrivate : operation == .decrypt && key.isPrivate else { return false }
            return hash != .sha224
        case .ecdh(let kdf):
            return key.isEC && key.isPrivate && operation == .keyExchange && kdf != .sha224
        }
    }
}

/// The plan for `algorithm` when `key` can perform it for `operation`; otherwise Apple's errSecParam failure.
private func plan(_ key: SecKey, _ operation: SecKeyOperationType, _ algorithm: SecKeyAlgorithm) throws -> SecKeyPlan {
    guard let plan = SecKeyPlan(algorithm), plan.isSupported(by: key, for: operation) else {
        throw SecKeyFailure.unsupported(algorithm, key)
    }
    return plan
}

// MARK: - The operations

/// The input of a signature algorithm as the digest to sign or verify.
private func signatureDigest(_ plan: SecKeyPlan, _ input: Data, _ algorithm: SecKeyAlgorithm) throws -> any Digest {
    switch plan {
    case .ecdsa(let hash, let message, _):
        if message, let hash, let digest = hash.hash(input) { return digest }
        if let hash, input.count != hash.byteCount {
            throw SecKeyFailure(errSecParam, "bad digest size for signing with algorithm \(algorithm.rawValue)")
        }
        return RawDigest(bytes: Array(input))
    case .rsaSignature(let hash, let message, _):
        if message, let digest = hash.hash(input) { return digest }
        guard input.count == hash.byteCount, let digest = hash.digest(input) else {
            throw SecKeyFailure(errSecParam, "bad digest size for signing with algorithm \(algorithm.rawValue)")
        }
        return digest
    default:
        throw SecKeyFailure(errSecParam, "\(algorithm.rawValue) is not a signature algorithm")
    }
}

extension ECPrivateKey {
    func ecdsaSignature(_ digest: some Digest, rfc4754: Bool) throws -> Data {
        switch self {
        case .p256(let key, _):
            let signature = try key.signature(for: digest)
            return rfc4754 ? signature.rawRepresentation : signature.derRepresentation
        case .p384(let key, _):
            let signature = try key.signature(for: digest)
            return rfc4754 ? signature.rawRepresentation : signature.derRepresentation
        case .p521(let key, _):
            let signature = try key.signature(for: digest)
            return rfc4754 ? signature.rawRepresentation : signature.derRepresentation
        }
    }

    func sharedSecret(with publicKey: ECPublicKey) throws -> SharedSecret {
        switch (self, publicKey) {
        case (.p256(_, let mine), .p256(_, let theirs)): return try mine.sharedSecretFromKeyAgreement(with: theirs)
        case (.p384(_, let mine), .p384(_, let theirs)): return try mine.sharedSecretFromKeyAgreement(with: theirs)
        case (.p521(_, let mine), .p521(_, let theirs)): return try mine.sharedSecretFromKeyAgreement(with: theirs)
        default: throw SecKeyFailure(errSecParam, "ECDH: the public key is on another curve than the private key")
        }
    }
}

extension ECPublicKey {
    func isValidECDSASignature(_ signature: Data, _ digest: some Digest, rfc4754: Bool) -> Bool {
        switch self {
        case .p256(let key, _):
            guard let parsed = rfc4754 ? try? P256.Signing.ECDSASignature(rawRepresentation: signature)
                                       : try? P256.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return key.isValidSignature(parsed, for: digest)
        case .p384(let key, _):
            guard let parsed = rfc4754 ? try? P384.Signing.ECDSASignature(rawRepresentation: signature)
                                       : try? P384.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return key.isValidSignature(parsed, for: digest)
        case .p521(let key, _):
            guard let parsed = rfc4754 ? try? P521.Signing.ECDSASignature(rawRepresentation: signature)
                                       : try? P521.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return key.isValidSignature(parsed, for: digest)
        }
    }

    /// A fresh ephemeral key on this key's curve: its public key (04 ‖ X ‖ Y) and the ECDH secret with this key.
    func ephemeralAgreement() throws -> (publicKey: Data, secret: SharedSecret) {
        switch self {
        case .p256(_, let theirs):
            let mine = P256.KeyAgreement.PrivateKey()
            return (mine.publicKey.x963Representation, try mine.sharedSecretFromKeyAgreement(with: theirs))
        case .p384(_, let theirs):
            let mine = P384.KeyAgreement.PrivateKey()
            return (mine.publicKey.x963Representation, try mine.sharedSecretFromKeyAgreement(with: theirs))
        case .p521(_, let theirs):
            let mine = P521.KeyAgreement.PrivateKey()
            return (mine.publicKey.x963Representation, try mine.sharedSecretFromKeyAgreement(with: theirs))
        }
    }
}

/// ECIES's AES-GCM key and IV from the shared secret and the ephemeral public key (see the top of this file).
private func eciesKeyAndIV(_ secret: SharedSecret, _ hash: SecKeyHash, variableIV: Bool, curve: ECCurve,
                           ephemeralPublicKey: Data) throws -> (SymmetricKey, AES.GCM.Nonce) {
    let keyByteCount = curve.coordinateByteCount * 8 > 256 ? 32 : 16
    guard let derived = hash.x963(secret, sharedInfo: ephemeralPublicKey, count: keyByteCount + (variableIV ? 16 : 0)) else {
        throw SecKeyFailure(errSecParam, "ECIES: unsupported KDF hash")
    }
    let iv = variableIV ? derived.suffix(16) : Data(count: 16)
    return (SymmetricKey(data: derived.prefix(keyByteCount)), try AES.GCM.Nonce(data: iv))
}

/// Signs data with a private key.
///
/// - Parameters:
///   - key: An EC private key (ECDSA algorithms) or an RSA private key (PKCS#1 v1.5 and PSS algorithms).
///   - algorithm: A signature algorithm, e.g. `.ecdsaSignatureMessageX962SHA256`; a `…Digest…` algorithm signs a
///     digest the caller computed (exactly the hash's size), a `…Message…` algorithm hashes the data first.
///   - dataToSign: The message or the digest.
///   - error: Set to a CFError (errSecParam) when the key cannot perform the algorithm or the input is not valid.
/// - Returns: The signature (DER `ECDSA-Sig-Value` for X9.62 ECDSA, r ‖ s for RFC 4754, the RSA signature block).
///
/// A Secure Enclave key signs in its token, after the authentication its access control asks.
///
/// - Throws: (through `error`) for a Secure Enclave key also the authentication's status (errSecUserCanceled,
///   errSecAuthFailed — also for an access control without `.privateKeyUsage` —, errSecInteractionNotAllowed),
///   errSecDecode when the key was made by another token than the configured one, errSecNotAvailable when the
///   token cannot be reached.
/// - Important: With a Secure Enclave key the call blocks while the TPM works or the person is asked: call it off
///   Swift's cooperative pool.
public func SecKeyCreateSignature(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ dataToSign: CFData,
                                  _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    withSecKeyError(error) {
        let plan = try plan(key, .sign, algorithm)
        let digest = try signatureDigest(plan, Data(referencing: dataToSign), algorithm)
        let signature: Data
        switch (key.material, plan) {
        case (.ecPrivate(let ec), .ecdsa(_, _, let rfc4754)):
            signature = try ec.ecdsaSignature(digest, rfc4754: rfc4754)
        case (.rsaPrivate(let rsa), .rsaSignature(_, _, let pss)):
            signature = try rsa.signing.signature(for: digest, padding: pss ? .PSS : .insecurePKCS1v1_5).rawRepresentation
        case (.token(let token), .ecdsa(_, _, let rfc4754)):
            signature = try token.ecdsaSignature(digest, rfc4754: rfc4754)
        default:
            throw SecKeyFailure.unsupported(algorithm, key)
        }
        return NSData(data: signature)
    }
}

/// Verifies a signature with a public key.
///
/// - Returns: true when `signature` is a valid signature of `signedData`; false with `error` set to errSecVerifyFailed
///   when it is not, or to errSecParam when the key cannot perform the algorithm.
public func SecKeyVerifySignature(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ signedData: CFData, _ signature: CFData,
                                  _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> Bool {
    withSecKeyError(error) {
        let plan = try plan(key, .verify, algorithm)
        let digest = try signatureDigest(plan, Data(referencing: signedData), algorithm)
        let signatureBytes = Data(referencing: signature)
        switch (key.material, plan) {
        case (.ecPublic(let ec), .ecdsa(_, _, let rfc4754)):
            guard ec.isValidECDSASignature(signatureBytes, digest, rfc4754: rfc4754) else {
                throw SecKeyFailure(errSecVerifyFailed, "EC signature verification failed, no match")
            }
        case (.rsaPublic(let rsa), .rsaSignature(_, _, let pss)):
            guard rsa.signing.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signatureBytes), for: digest,
                                               padding: pss ? .PSS : .insecurePKCS1v1_5) else {
                throw SecKeyFailure(errSecVerifyFailed, "RSA signature verification failed, no match")
            }
        default:
            throw SecKeyFailure.unsupported(algorithm, key)
        }
        return true
    } ?? false
}

/// Encrypts data with a public key (RSA PKCS#1 / OAEP, or ECIES).
///
/// - Returns: The ciphertext; nil with `error` set (errSecParam) when the key cannot perform the algorithm or the
///   plaintext is too long for it.
public func SecKeyCreateEncryptedData(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ plaintext: CFData,
                                      _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    withSecKeyError(error) {
        let plan = try plan(key, .encrypt, algorithm)
        let input = Data(referencing: plaintext)
        switch (key.material, plan) {
        case (.rsaPublic(let rsa), .rsaEncryptionPKCS1), (.rsaPublic(let rsa), .rsaEncryptionOAEP):
            let padding: _RSA.Encryption.Padding = switch plan {
            case .rsaEncryptionOAEP(.sha1): .PKCS1_OAEP
            case .rsaEncryptionOAEP: .PKCS1_OAEP_SHA256
            default: ._WEAK_AND_INSECURE_PKCS_V1_5
            }
            let encryption = try rsa.encryption
            guard input.count <= encryption.maximumEncryptSize(with: padding),
                  let ciphertext = try? encryption.encrypt(input, padding: padding) else {
                throw SecKeyFailure(errSecParam, "RSAencrypt wrong input size")
            }
            return NSData(data: ciphertext)
        case (.ecPublic(let ec), .ecies(let hash, let variableIV)):
            let (ephemeralPublicKey, secret) = try ec.ephemeralAgreement()
            let (aesKey, iv) = try eciesKeyAndIV(secret, hash, variableIV: variableIV, curve: ec.curve,
                                                 ephemeralPublicKey: ephemeralPublicKey)
            guard let sealed = try? AES.GCM.seal(input, using: aesKey, nonce: iv) else {
                throw SecKeyFailure(errSecParam, "ECIES: Failed to aes-gcm encrypt data")
            }
            var output = ephemeralPublicKey
            output.append(sealed.ciphertext)
            output.append(sealed.tag)
            return NSData(data: output)
        default:
            throw SecKeyFailure.unsupported(algorithm, key)
        }
    }
}

/// Decrypts data with a private key (RSA PKCS#1 / OAEP, or ECIES).
///
/// - Returns: The plaintext; nil with `error` set (errSecParam) when the key cannot perform the algorithm or the
///   ciphertext is not valid for the key (wrong size, wrong padding, failed authentication).
///
/// A Secure Enclave key decrypts ECIES: its token computes the ECDH step (after the authentication its access
/// control asks); the KDF and AES-GCM are the same as for a software key. Its failures are those of
/// ``SecKeyCreateSignature(_:_:_:_:)``.
public func SecKeyCreateDecryptedData(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ ciphertext: CFData,
                                      _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    withSecKeyError(error) {
        let plan = try plan(key, .decrypt, algorithm)
        let input = Data(referencing: ciphertext)
        switch (key.material, plan) {
        case (.rsaPrivate(let rsa), .rsaEncryptionPKCS1), (.rsaPrivate(let rsa), .rsaEncryptionOAEP):
            let padding: _RSA.Encryption.Padding = switch plan {
            case .rsaEncryptionOAEP(.sha1): .PKCS1_OAEP
            case .rsaEncryptionOAEP: .PKCS1_OAEP_SHA256
            default: ._WEAK_AND_INSECURE_PKCS_V1_5
            }
            guard input.count == key.blockSize, let plaintext = try? rsa.encryption.decrypt(input, padding: padding) else {
                throw SecKeyFailure(errSecParam, "RSAdecrypt wrong input")
            }
            return NSData(data: plaintext)
        case (.ecPrivate, .ecies(let hash, let variableIV)), (.token, .ecies(let hash, let variableIV)):
            guard case .ecPublic(let own) = key.publicMaterial else { throw SecKeyFailure.unsupported(algorithm, key) }
            let pointSize = own.curve.publicKeyByteCount
            guard input.count >= pointSize + 16 else {
                throw SecKeyFailure(errSecParam, "ECIES: Input data too short")
            }
            let start = input.startIndex
            let ephemeralPublicKey = Data(input[start..<start + pointSize])
            // The one step that needs the private key: ECDH, in swift-crypto or in the key's token.
            let secret = try key.ecdhSecret(with: ECPublicKey(x963: ephemeralPublicKey), for: .decrypt)
            let (aesKey, iv) = try eciesKeyAndIV(secret, hash, variableIV: variableIV, curve: own.curve,
                                                 ephemeralPublicKey: ephemeralPublicKey)
            guard let box = try? AES.GCM.SealedBox(nonce: iv, ciphertext: input[(start + pointSize)..<(input.endIndex - 16)],
                                                   tag: input[(input.endIndex - 16)...]),
                  let plaintext = try? AES.GCM.open(box, using: aesKey) else {
                throw SecKeyFailure(errSecParam, "ECIES: Failed to aes-gcm decrypt data")
            }
            return NSData(data: plaintext)
        default:
            throw SecKeyFailure.unsupported(algorithm, key)
        }
    }
}

/// Performs an ECDH key exchange between a private key and another party's public key.
///
/// - Parameters:
///   - privateKey: This party's EC private key.
///   - algorithm: `.ecdhKeyExchangeStandard`, `.ecdhKeyExchangeCofactor`, or one of their X9.63 KDF forms.
///   - publicKey: The other party's EC public key, on the same curve.
///   - parameters: For the X9.63 KDF algorithms, `SecKeyKeyExchangeParameter.requestedSize` (required: the number
///     of bytes) and `.sharedInfo` (optional data); ignored for the raw algorithms.
/// - Returns: The raw shared secret (the x-coordinate, ``SecKeyGetBlockSize(_:)`` bytes), or the KDF's output.
///
/// A Secure Enclave private key computes the shared secret in its token (after the authentication its access
/// control asks); its failures are those of ``SecKeyCreateSignature(_:_:_:_:)``.
public func SecKeyCopyKeyExchangeResult(_ privateKey: SecKey, _ algorithm: SecKeyAlgorithm, _ publicKey: SecKey,
                                        _ parameters: CFDictionary,
                                        _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    withSecKeyError(error) {
        let plan = try plan(privateKey, .keyExchange, algorithm)
        guard case .ecdh(let kdf) = plan, case .ecPublic(let theirs) = publicKey.publicMaterial else {
            throw SecKeyFailure.unsupported(algorithm, privateKey)
        }
        // The parameters are checked before the private key is used (a token key's use may ask the person).
        var size = 0
        var sharedInfo = Data()
        if kdf != nil {
            guard let requested = SecKeyParameters.int(SecKeyParameters.value(parameters, kSecKeyKeyExchangeParameterRequestedSize)),
                  requested > 0 else {
                throw SecKeyFailure(errSecParam, "kSecKeyKeyExchangeParameterRequestedSize is missing")
            }
            size = requested
            switch SecKeyParameters.value(parameters, kSecKeyKeyExchangeParameterSharedInfo) {
            case nil: break
            case let data as Data: sharedInfo = data
            case let data as NSData: sharedInfo = Data(referencing: data)
            default: throw SecKeyFailure(errSecParam, "ECDHKeyExchange wrong sharedInfo type (must be CFData/NSData)")
            }
        }
        let secret = try privateKey.ecdhSecret(with: theirs, for: .keyExchange)
        guard let kdf else { return NSData(data: secret.withUnsafeBytes { Data($0) }) }
        guard let derived = kdf.x963(secret, sharedInfo: sharedInfo, count: size) else {
            throw SecKeyFailure.unsupported(algorithm, privateKey)
        }
        return NSData(data: derived)
    }
}

extension SecKey {
    /// The ECDH step of ECIES decryption and of a key exchange: the shared secret of this private key with `peer`,
    /// computed by swift-crypto for a software key, by the token (after the key's access control) for a Secure
    /// Enclave key.
    ///
    /// - Throws: ``SecKeyFailure``: errSecParam (another curve, not an EC private key), or a token key's failures.
    func ecdhSecret(with peer: ECPublicKey, for operation: SecKeyTokenOperation) throws -> SharedSecret {
        switch material {
        case .ecPrivate(let mine): return try mine.sharedSecret(with: peer)
        case .token(let token): return try token.sharedSecret(with: peer, for: operation)
        case .ecPublic, .rsaPrivate, .rsaPublic: throw SecKeyFailure(errSecParam, "ECDH needs an EC private key, not \(self)")
        }
    }
}

/// Whether `key` can perform `algorithm` for `operation` (sign and key exchange need a private key; verify and
/// encrypt a public key; decrypt a private key).
public func SecKeyIsAlgorithmSupported(_ key: SecKey, _ operation: SecKeyOperationType, _ algorithm: SecKeyAlgorithm) -> Bool {
    SecKeyPlan(algorithm)?.isSupported(by: key, for: operation) ?? false
}
#endif
