#if !canImport(Darwin)
import Foundation
import Crypto
import CryptoExtras
import KeychainEngine

// SecKey.h: asymmetric keys (elliptic curve P-256/P-384/P-521 and RSA) as objects: creation, attributes and
// Apple's external representations. Every cryptographic operation is swift-crypto's (`Crypto`, `CryptoExtras`).
//
// Apple's formats (SecECKey.c, SecRSAKey.c, SecKey.c in apple-oss-distributions/Security):
// - EC public key: the ANSI X9.63 uncompressed point 04 ‖ X ‖ Y; EC private key: 04 ‖ X ‖ Y ‖ K.
// - RSA public key: PKCS#1 `RSAPublicKey` DER; RSA private key: PKCS#1 `RSAPrivateKey` DER.
// - kSecAttrApplicationLabel (`klbl`): SHA-1 of the public key's bytes (`SecKeyCopyPublicKeyHash`): the X9.63
//   point for EC, the PKCS#1 `RSAPublicKey` DER for RSA (the same bytes a certificate's public key hash covers).
// - SecKeyGetBlockSize: the byte length of a field element for EC (32, 48, 66), of the modulus for RSA.

/// An asymmetric key: a private key, or a public key (`SecKeyRef`).
///
/// Immutable after creation, so it is `Sendable` and may be shared between threads, as Apple's SecKey objects are.
public final class SecKey: NSObject, Sendable {
    let material: SecKeyMaterial
    /// `kSecAttrApplicationTag` given at creation, if any.
    let applicationTag: Data?
    /// `kSecAttrLabel` given at creation, if any.
    let label: String?
    /// `kSecAttrIsPermanent` given at creation.
    let isPermanent: Bool

    init(material: SecKeyMaterial, applicationTag: Data? = nil, label: String? = nil, isPermanent: Bool = false) {
        self.material = material
        self.applicationTag = applicationTag
        self.label = label
        self.isPermanent = isPermanent
    }

    var isPrivate: Bool {
        switch material {
        case .ecPrivate, .rsaPrivate, .token: true
        case .ecPublic, .rsaPublic: false
        }
    }

    var isEC: Bool {
        switch material {
        case .ecPrivate, .ecPublic, .token: true
        case .rsaPrivate, .rsaPublic: false
        }
    }

    /// The token key behind this SecKey, when it is a `kSecAttrTokenIDSecureEnclave` private key (SecKeyToken.swift).
    var tokenKey: SecKeyTokenKey? {
        if case .token(let key) = material { return key }
        return nil
    }

    /// `kSecAttrKeyType`'s value: ``kSecAttrKeyTypeECSECPrimeRandom`` or ``kSecAttrKeyTypeRSA``.
    var keyType: CFString { isEC ? kSecAttrKeyTypeECSECPrimeRandom : kSecAttrKeyTypeRSA }

    /// `kSecAttrKeyClass`'s value.
    var keyClass: CFString { isPrivate ? kSecAttrKeyClassPrivate : kSecAttrKeyClassPublic }

    /// The key size in bits: 256, 384 or 521 for EC, the modulus length for RSA.
    var keySizeInBits: Int {
        switch material {
        case .ecPrivate(let key): key.curve.bits
        case .ecPublic(let key): key.curve.bits
        case .rsaPrivate(let key): key.signing.keySizeInBits
        case .rsaPublic(let key): key.signing.keySizeInBits
        case .token(let key): key.publicKey.curve.bits
        }
    }

    /// ``SecKeyGetBlockSize(_:)``'s answer.
    var blockSize: Int {
        switch material {
        case .ecPrivate(let key): key.curve.coordinateByteCount
        case .ecPublic(let key): key.curve.coordinateByteCount
        case .rsaPrivate, .rsaPublic: (keySizeInBits + 7) / 8
        case .token(let key): key.publicKey.curve.coordinateByteCount
        }
    }

    /// The public half (itself for a public key).
    var publicMaterial: SecKeyMaterial {
        switch material {
        case .ecPrivate(let key): .ecPublic(key.publicKey)
        case .rsaPrivate(let key): .rsaPublic(RSAPublicKey(signing: key.signing.publicKey))
        case .token(let key): .ecPublic(key.publicKey)
        case .ecPublic, .rsaPublic: material
        }
    }

    /// The external representation in Apple's format (see the top of this file); nil for a token's private key,
    /// whose bytes never leave the token.
    var externalRepresentation: Data? {
        switch material {
        case .ecPrivate(let key): key.x963Representation
        case .ecPublic(let key): key.x963Representation
        case .rsaPrivate(let key): key.signing.derRepresentation
        case .rsaPublic(let key): key.signing.pkcs1DERRepresentation
        case .token: nil
        }
    }

    /// The public key's bytes in Apple's format.
    var publicKeyBytes: Data {
        switch publicMaterial {
        case .ecPublic(let key): key.x963Representation
        case .rsaPublic(let key): key.signing.pkcs1DERRepresentation
        case .ecPrivate, .rsaPrivate, .token: Data()  // never: publicMaterial is public
        }
    }

    /// `kSecAttrApplicationLabel` (`klbl`): the SHA-1 of the public key's bytes, as Apple's `SecKeyCopyPublicKeyHash`.
    var applicationLabel: Data { Data(Insecure.SHA1.hash(data: publicKeyBytes)) }

    /// The usage flags Apple gives a private or a public key (`SecKeyGeneratePrivateAttributeDictionary` and
    /// `SecKeyGeneratePublicAttributeDictionary`).
    var usage: [(CFString, Bool)] {
        if isPrivate {
            [(kSecAttrCanEncrypt, false), (kSecAttrCanDecrypt, true), (kSecAttrCanDerive, true), (kSecAttrCanSign, true),
             (kSecAttrCanVerify, false), (kSecAttrCanWrap, false), (kSecAttrCanUnwrap, true)]
        } else {
            [(kSecAttrCanEncrypt, true), (kSecAttrCanDecrypt, false), (kSecAttrCanDerive, true), (kSecAttrCanSign, false),
             (kSecAttrCanVerify, true), (kSecAttrCanWrap, true), (kSecAttrCanUnwrap, false)]
        }
    }

    // MARK: Keystone's own: what a keychain stores of a key item.

    /// Keystone's own, for storing a key as a `kSecClassKey` item: the key-class attributes Apple stores with a key
    /// (`kcls`, `klbl`, `type`, `bsiz`, `esiz`, the usage flags, `perm`, `atag` / `labl` when given, and `tkid` =
    /// ``kSecAttrTokenIDSecureEnclave`` for a Secure Enclave key), as Swift values (String, Data, Int, Bool). The
    /// item's data is ``keyData``.
    public var keychainAttributes: [String: Any] {
        var attributes: [String: Any] = [
            kSecAttrKeyClass: keyClass,
            kSecAttrApplicationLabel: applicationLabel,
            kSecAttrKeyType: keyType,
            kSecAttrKeySizeInBits: keySizeInBits,
            kSecAttrEffectiveKeySize: keySizeInBits,
            kSecAttrIsPermanent: isPermanent,
        ]
        for (name, value) in usage { attributes[name] = value }
        if let applicationTag { attributes[kSecAttrApplicationTag] = applicationTag }
        if let label { attributes[kSecAttrLabel] = label }
        if tokenKey != nil { attributes[kSecAttrTokenID] = kSecAttrTokenIDSecureEnclave }
        return attributes
    }

    /// Keystone's own: what a keychain stores as the key item's data: the key's bytes in Apple's external
    /// representation, or for a Secure Enclave key the token's opaque wrapped blob (never private key bytes: the
    /// token has none to give).
    public var keyData: Data { externalRepresentation ?? tokenKey?.key.dataRepresentation ?? Data() }

    /// Keystone's own: the key a stored `kSecClassKey` item holds, from its attributes (``keychainAttributes``'s
    /// `kcls` and `type` at least) and data (``keyData``). An item with `tkid` = ``kSecAttrTokenIDSecureEnclave``
    /// is bound to ``KeychainServicesDefaults/secureEnclave``, with the item's access control (`kSecAttrAccessControl`
    /// in `attributes`, if any).
    ///
    /// - Throws: An `NSError` in `NSOSStatusErrorDomain` (errSecParam) when the attributes or the data are not a key;
    ///   for a Secure Enclave key, `errSecUnimplemented` when no Secure Enclave is configured and `errSecDecode`
    ///   when the data is not a key of the configured one's kind.
    public static func make(attributes: CFDictionary, data: Data) throws -> SecKey {
        if SecKeyParameters.value(attributes, kSecAttrTokenID) as? String == kSecAttrTokenIDSecureEnclave {
            do {
                return try SecKeyTokenKey.storedKey(attributes: attributes, data: data, use: SecKeyTokenUse())
            } catch let failure as SecKeyFailure {
                throw failure.error
            }
        }
        let key = try SecKeyParameters.key(fromData: data, attributes: attributes)
        return SecKey(material: key.material,
                      applicationTag: SecKeyParameters.data(attributes[AnyHashable(kSecAttrApplicationTag)]),
                      label: attributes[AnyHashable(kSecAttrLabel)] as? String,
                      isPermanent: SecKeyParameters.bool(attributes[AnyHashable(kSecAttrIsPermanent)]) ?? false)
    }

    // MARK: NSObject

    /// Equal when both are the same kind of key with the same bytes (for Secure Enclave keys: the same token blob).
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? SecKey else { return false }
        return other === self || (other.isPrivate == isPrivate && (other.tokenKey == nil) == (tokenKey == nil)
                                  && other.keyData == keyData)
    }

    /// A hash of the public key.
    public override var hash: Int { applicationLabel.hashValue }

    /// The key's type, class and size (never its bytes); Apple's `<SecKeyRef:('com.apple.setoken') 0x…>` for a
    /// Secure Enclave key.
    public override var description: String {
        if tokenKey != nil {
            return "<SecKeyRef:('\(kSecAttrTokenIDSecureEnclave)') 0x\(String(UInt(bitPattern: ObjectIdentifier(self)), radix: 16))>"
        }
        let kind = isEC ? "EC" : "RSA"
        return "<SecKeyRef algorithm: \(kind), key type: \(kind)\(isPrivate ? "Private" : "Public")Key, block size: \(keySizeInBits) bits>"
    }
}

// MARK: - Key material

/// The swift-crypto keys behind a SecKey, or the token that holds its private key.
enum SecKeyMaterial: Sendable {
    case ecPrivate(ECPrivateKey)
    case ecPublic(ECPublicKey)
    case rsaPrivate(RSAPrivateKey)
    case rsaPublic(RSAPublicKey)
    /// A P-256 private key inside a Secure Enclave token (`kSecAttrTokenIDSecureEnclave`): SecKeyToken.swift.
    case token(SecKeyTokenKey)
}

/// The NIST prime curves Apple's `kSecAttrKeyTypeECSECPrimeRandom` keys use.
enum ECCurve: Sendable, CaseIterable {
    case p256, p384, p521

    var bits: Int {
        switch self {
        case .p256: 256
        case .p384: 384
        case .p521: 521
        }
    }

    var coordinateByteCount: Int { (bits + 7) / 8 }

    /// The length of an uncompressed point 04 ‖ X ‖ Y.
    var publicKeyByteCount: Int { 1 + 2 * coordinateByteCount }

    init?(bits: Int) {
        guard let curve = ECCurve.allCases.first(where: { $0.bits == bits }) else { return nil }
        self = curve
    }
}

/// An EC private key, as swift-crypto's signing and key-agreement keys (the same scalar).
enum ECPrivateKey: Sendable {
    case p256(P256.Signing.PrivateKey, P256.KeyAgreement.PrivateKey)
    case p384(P384.Signing.PrivateKey, P384.KeyAgreement.PrivateKey)
    case p521(P521.Signing.PrivateKey, P521.KeyAgreement.PrivateKey)

    static func generate(_ curve: ECCurve) -> ECPrivateKey {
        switch curve {
        case .p256:
            let key = P256.KeyAgreement.PrivateKey()
            return .p256(try! P256.Signing.PrivateKey(rawRepresentation: key.rawRepresentation), key)
        case .p384:
            let key = P384.KeyAgreement.PrivateKey()
            return .p384(try! P384.Signing.PrivateKey(rawRepresentation: key.rawRepresentation), key)
        case .p521:
            let key = P521.KeyAgreement.PrivateKey()
            return .p521(try! P521.Signing.PrivateKey(rawRepresentation: key.rawRepresentation), key)
        }
    }

    /// Parses 04 ‖ X ‖ Y ‖ K; the point must be the scalar's.
    init(x963 data: Data) throws {
        switch data.count {
        case ECCurve.p256.publicKeyByteCount + 32:
            let key = try P256.KeyAgreement.PrivateKey(x963Representation: data)
            self = .p256(try P256.Signing.PrivateKey(rawRepresentation: key.rawRepresentation), key)
        case ECCurve.p384.publicKeyByteCount + 48:
            let key = try P384.KeyAgreement.PrivateKey(x963Representation: data)
            self = .p384(try P384.Signing.PrivateKey(rawRepresentation: key.rawRepresentation), key)
        case ECCurve.p521.publicKeyByteCount + 66:
            let key = try P521.KeyAgreement.PrivateKey(x963Representation: data)
            self = .p521(try P521.Signing.PrivateKey(rawRepresentation: key.rawRepresentation), key)
        default:
            throw SecKeyFailure(errSecParam, "EC private key creation from data failed")
        }
        // The point stored with the scalar must be the scalar's own point.
        guard self.x963Representation == data else { throw SecKeyFailure(errSecParam, "EC private key creation from data failed") }
    }

    var curve: ECCurve {
        switch self {
        case .p256: .p256
        case .p384: .p384
        case .p521: .p521
        }
    }

    var publicKey: ECPublicKey {
        switch self {
        case .p256(let s, let a): .p256(s.publicKey, a.publicKey)
        case .p384(let s, let a): .p384(s.publicKey, a.publicKey)
        case .p521(let s, let a): .p521(s.publicKey, a.publicKey)
        }
    }

    var x963Representation: Data {
        switch self {
        case .p256(_, let a): a.x963Representation
        case .p384(_, let a): a.x963Representation
        case .p521(_, let a): a.x963Representation
        }
    }
}

/// An EC public key, as swift-crypto's signing and key-agreement keys (the same point).
enum ECPublicKey: Sendable {
    case p256(P256.Signing.PublicKey, P256.KeyAgreement.PublicKey)
    case p384(P384.Signing.PublicKey, P384.KeyAgreement.PublicKey)
    case p521(P521.Signing.PublicKey, P521.KeyAgreement.PublicKey)

    /// Parses 04 ‖ X ‖ Y (a point on the curve; compressed and other forms are not Apple's format).
    init(x963 data: Data) throws {
        guard data.first == 0x04 else { throw SecKeyFailure(errSecParam, "EC public key creation from data failed") }
        do {
            switch data.count {
            case ECCurve.p256.publicKeyByteCount:
                self = .p256(try P256.Signing.PublicKey(x963Representation: data), try P256.KeyAgreement.PublicKey(x963Representation: data))
            case ECCurve.p384.publicKeyByteCount:
                self = .p384(try P384.Signing.PublicKey(x963Representation: data), try P384.KeyAgreement.PublicKey(x963Representation: data))
            case ECCurve.p521.publicKeyByteCount:
                self = .p521(try P521.Signing.PublicKey(x963Representation: data), try P521.KeyAgreement.PublicKey(x963Representation: data))
            default:
                throw SecKeyFailure(errSecParam, "EC public key creation from data failed")
            }
        } catch {
            throw SecKeyFailure(errSecParam, "EC public key creation from data failed")
        }
    }

    var curve: ECCurve {
        switch self {
        case .p256: .p256
        case .p384: .p384
        case .p521: .p521
        }
    }

    var x963Representation: Data {
        switch self {
        case .p256(_, let a): a.x963Representation
        case .p384(_, let a): a.x963Representation
        case .p521(_, let a): a.x963Representation
        }
    }
}

/// An RSA private key (swift-crypto's signing key; its encryption key, which is not `Sendable`, is made for each
/// encryption operation from the same numbers).
struct RSAPrivateKey: Sendable {
    let signing: _RSA.Signing.PrivateKey

    var encryption: _RSA.Encryption.PrivateKey {
        get throws { try _RSA.Encryption.PrivateKey(unsafeDERRepresentation: signing.derRepresentation) }
    }
}

/// An RSA public key (swift-crypto's signing key; the encryption key is made for each operation).
struct RSAPublicKey: Sendable {
    let signing: _RSA.Signing.PublicKey

    var encryption: _RSA.Encryption.PublicKey {
        get throws { try _RSA.Encryption.PublicKey(unsafeDERRepresentation: signing.pkcs1DERRepresentation) }
    }
}

/// The RSA key sizes Keystone creates and loads: 1024 to 8192 bits (swift-crypto's and BoringSSL's range).
let rsaKeySizes = 1024...8192

// MARK: - Errors

/// A SecKey failure: an `OSStatus` and Apple's kind of message, reported as a CFError in `NSOSStatusErrorDomain`.
struct SecKeyFailure: Error {
    let status: OSStatus
    let message: String

    init(_ status: OSStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    /// The CFError Apple's functions hand back: the message under `NSDescription` (Apple's key) and
    /// `NSLocalizedDescription` (so `localizedDescription` shows it on this platform).
    var error: NSError {
        NSError(domain: NSOSStatusErrorDomain, code: Int(status),
                userInfo: ["NSDescription": message, NSLocalizedDescriptionKey: message])
    }

    /// Stores the error in an Apple-style out-parameter.
    func report(to pointer: UnsafeMutablePointer<Unmanaged<CFError>?>?) {
        pointer?.pointee = Unmanaged.passRetained(error)
    }

    static func unsupported(_ algorithm: SecKeyAlgorithm, _ key: SecKey) -> SecKeyFailure {
        SecKeyFailure(errSecParam, "\(algorithm.rawValue): algorithm not supported by the key \(key)")
    }
}

/// `errSecVerifyFailed` (-67808): a signature did not verify (SecBase.h; what SecKeyVerifySignature reports).
public let errSecVerifyFailed: OSStatus = -67808

/// Runs `body`, reporting a thrown failure through `error` and returning nil.
func withSecKeyError<T>(_ error: UnsafeMutablePointer<Unmanaged<CFError>?>?, _ body: () throws -> T) -> T? {
    do {
        return try body()
    } catch let failure as SecKeyFailure {
        failure.report(to: error)
    } catch let failure as EngineError {
        SecKeyFailure(failure.status, failure.reason).report(to: error)
    } catch let other {
        SecKeyFailure(errSecParam, "\(other)").report(to: error)
    }
    return nil
}

// MARK: - Parameters

/// Reading SecKey parameter dictionaries, whose keys are strings and whose values are Swift or Foundation objects.
enum SecKeyParameters {
    static func value(_ dictionary: CFDictionary, _ key: CFString) -> Any? {
        if let value = dictionary[AnyHashable(key)] { return value }
        for (name, value) in dictionary where (name.base as? String) == key { return value }
        return nil
    }

    static func int(_ value: Any?) -> Int? {
        switch value {
        case let number as Int: number
        case let number as NSNumber: number.intValue
        case let string as String: Int(string)
        default: nil
        }
    }

    static func bool(_ value: Any?) -> Bool? {
        switch value {
        case let flag as Bool: flag
        case let number as NSNumber: number.boolValue
        default: nil
        }
    }

    static func data(_ value: Any?) -> Data? {
        switch value {
        case let data as Data: data
        case let data as NSData: Data(referencing: data)
        case let string as String: Data(string.utf8)  // Apple accepts a string tag too
        default: nil
        }
    }

    static func dictionary(_ value: Any?) -> CFDictionary? {
        switch value {
        case let dictionary as [AnyHashable: Any]: dictionary
        case let dictionary as NSDictionary:
            Dictionary(uniqueKeysWithValues: dictionary.map { (AnyHashable($0.key as! NSObject), $0.value) })
        default: nil
        }
    }

    /// `kSecAttrKeyType`: the string `"73"` / `"42"` or the number 73 / 42.
    static func keyType(_ dictionary: CFDictionary) -> CFString? {
        switch int(value(dictionary, kSecAttrKeyType)) {
        case 73: kSecAttrKeyTypeECSECPrimeRandom
        case 42: kSecAttrKeyTypeRSA
        default: nil
        }
    }

    /// `kSecAttrKeyClass`: `"0"`, `"1"` or the numbers 0 / 1.
    static func keyClass(_ dictionary: CFDictionary) -> CFString? {
        switch int(value(dictionary, kSecAttrKeyClass)) {
        case 0: kSecAttrKeyClassPublic
        case 1: kSecAttrKeyClassPrivate
        case 2: kSecAttrKeyClassSymmetric
        default: nil
        }
    }

    /// The key of SecKeyCreateWithData: Apple's format for the type and class the attributes name.
    static func key(fromData data: Data, attributes: CFDictionary) throws -> SecKey {
        guard let type = keyType(attributes) else { throw SecKeyFailure(errSecParam, "Unsupported key type") }
        guard let keyClass = keyClass(attributes), keyClass != kSecAttrKeyClassSymmetric else {
            throw SecKeyFailure(errSecParam, "Unsupported key class")
        }
        let isPrivate = keyClass == kSecAttrKeyClassPrivate
        let material: SecKeyMaterial
        if type == kSecAttrKeyTypeRSA {
            if isPrivate {
                guard let key = try? _RSA.Signing.PrivateKey(unsafeDERRepresentation: data),
                      rsaKeySizes.contains(key.keySizeInBits), (try? RSAPrivateKey(signing: key).encryption) != nil else {
                    throw SecKeyFailure(errSecParam, "RSA private key creation from data failed")
                }
                material = .rsaPrivate(RSAPrivateKey(signing: key))
            } else {
                guard let signing = try? _RSA.Signing.PublicKey(unsafeDERRepresentation: data),
                      rsaKeySizes.contains(signing.keySizeInBits),
                      (try? RSAPublicKey(signing: signing).encryption) != nil else {
                    throw SecKeyFailure(errSecParam, "RSA public key creation from data failed")
                }
                material = .rsaPublic(RSAPublicKey(signing: signing))
            }
        } else {
            material = isPrivate ? .ecPrivate(try ECPrivateKey(x963: data)) : .ecPublic(try ECPublicKey(x963: data))
        }
        if let bits = int(value(attributes, kSecAttrKeySizeInBits)), bits != 0 {
            let key = SecKey(material: material)
            guard key.keySizeInBits == bits else {
                throw SecKeyFailure(errSecParam, "key size \(key.keySizeInBits) does not match kSecAttrKeySizeInBits \(bits)")
            }
        }
        return SecKey(material: material)
    }
}

// MARK: - SecKey.h functions: creation, attributes, representation

/// `kSecPrivateKeyAttrs`: `"private"`, the attributes of the private key in ``SecKeyCreateRandomKey(_:_:)``'s parameters.
public let kSecPrivateKeyAttrs: CFString = "private"
/// `kSecPublicKeyAttrs`: `"public"`, the attributes of the public key in ``SecKeyCreateRandomKey(_:_:)``'s parameters.
public let kSecPublicKeyAttrs: CFString = "public"

/// Creates a new private key.
///
/// - Parameters:
///   - parameters: ``kSecAttrKeyType`` (``kSecAttrKeyTypeECSECPrimeRandom`` / ``kSecAttrKeyTypeEC`` or
///     ``kSecAttrKeyTypeRSA``, as the string or the number), ``kSecAttrKeySizeInBits`` (EC: 256, 384, 521; RSA:
///     1024 to 8192 in steps of 128); optionally ``kSecAttrApplicationTag``, ``kSecAttrLabel``,
///     ``kSecAttrIsPermanent``, at the top level or in ``kSecPrivateKeyAttrs`` / ``kSecPublicKeyAttrs``.
///   - error: Set to a CFError (errSecParam) when the parameters name no key Keystone can create.
/// - Returns: The private key; ``SecKeyCopyPublicKey(_:)`` gives its public key.
///
/// A permanent key (`kSecAttrIsPermanent` true, at the top level or in ``kSecPrivateKeyAttrs``) is added to the
/// default keychain as a private-key item, with the accessibility, access control and access group given; if
/// that fails, the function returns nil and the error carries the keychain's status (`errSecDuplicateItem`…).
///
/// With ``kSecAttrTokenID`` = ``kSecAttrTokenIDSecureEnclave`` (top level only, as Apple's), the key is made inside
/// ``KeychainServicesDefaults/secureEnclave`` (on Linux a TPM 2.0): a 256-bit EC private key that signs (ECDSA),
/// agrees keys (ECDH) and decrypts (ECIES), and whose private bytes never leave the token. Its keychain item has
/// `tkid` set and the token's opaque blob as data. An access control made with `.privateKeyUsage` and an
/// authentication flag (`.userPresence`, `.biometryAny`, `.biometryCurrentSet`, `.devicePasscode`) makes each
/// signature, key exchange and decryption authenticate first, reusing the `LAContext` given as
/// ``kSecUseAuthenticationContext`` within its reuse window; ``kSecUseOperationPrompt`` is the prompt.
///
/// - Throws: (through `error`) errSecParam for another key type or size with the Secure Enclave, or another token
///   id; errSecUnimplemented (-4) when there is no Secure Enclave (nothing is stored) or the keychain plays a device
///   without one; the token's status when it cannot make the key (errSecNotAvailable when the TPM does not answer).
/// - Important: For a Secure Enclave key the TPM enforces that the private key stays inside it (and that its blob
///   works on no other TPM); the access control is enforced by this library, not by the TPM. The call blocks while
///   the TPM works: call it off Swift's cooperative pool.
public func SecKeyCreateRandomKey(_ parameters: CFDictionary, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> SecKey? {
    withSecKeyError(error) {
        guard let type = SecKeyParameters.keyType(parameters) else {
            throw SecKeyFailure(errSecParam, "Unsupported key type: \(SecKeyParameters.value(parameters, kSecAttrKeyType) ?? "none")")
        }
        let bits = SecKeyParameters.int(SecKeyParameters.value(parameters, kSecAttrKeySizeInBits))
        let privateAttributes = SecKeyParameters.dictionary(SecKeyParameters.value(parameters, kSecPrivateKeyAttrs)) ?? [:]
        let attribute = { (key: CFString) in SecKeyParameters.value(privateAttributes, key) ?? SecKeyParameters.value(parameters, key) }
        if let tokenID = SecKeyParameters.value(parameters, kSecAttrTokenID) {
            return try SecKeyTokenKey.createRandomKey(tokenID: tokenID, type: type, bits: bits, attribute: attribute)
        }
        let material: SecKeyMaterial
        if type == kSecAttrKeyTypeRSA {
            let size = bits ?? 2048
            guard rsaKeySizes.contains(size), size % 128 == 0 else {
                throw SecKeyFailure(errSecParam, "Unsupported RSA key size: \(size) (1024 to 8192 bits, in steps of 128)")
            }
            guard let key = try? RSAPrivateKey(signing: _RSA.Signing.PrivateKey(unsafeKeySize: .init(bitCount: size))) else {
                throw SecKeyFailure(errSecInternalComponent, "RSA key generation failed")
            }
            material = .rsaPrivate(key)
        } else {
            guard let curve = ECCurve(bits: bits ?? 256) else {
                throw SecKeyFailure(errSecParam, "Unsupported EC key size: \(bits ?? 0) (256, 384 or 521 bits)")
            }
            material = .ecPrivate(ECPrivateKey.generate(curve))
        }
        let key = SecKey(material: material,
                         applicationTag: SecKeyParameters.data(attribute(kSecAttrApplicationTag)),
                         label: attribute(kSecAttrLabel) as? String,
                         isPermanent: SecKeyParameters.bool(attribute(kSecAttrIsPermanent)) ?? false)
        if key.isPermanent { try storePermanentKey(key, attribute: attribute) }
        return key
    }
}

/// Adds a permanent key to the keychain as a private-key item, with the access control or accessibility and access
/// group the parameters give (Apple stores it the same way).
///
/// - Throws: ``SecKeyFailure`` with the keychain's status (`errSecDuplicateItem`…).
func storePermanentKey(_ key: SecKey, attribute: (CFString) -> Any?) throws {
    var item: [String: Any] = [kSecValueRef: key]
    for name in [kSecAttrAccessible, kSecAttrAccessControl, kSecAttrAccessGroup, kSecAttrSynchronizable,
                 kSecUseAuthenticationContext] {
        if let value = attribute(name) { item[name] = value }
    }
    let status = SecItemAdd(item, nil)
    guard status == errSecSuccess else {
        throw SecKeyFailure(status, "Storing the permanent key in the keychain failed: \(SecCopyErrorMessageString(status, nil) ?? "")")
    }
}

/// The public key of a private key, or the key itself when it is public.
///
/// The public key of a Secure Enclave key is an ordinary public key (its external representation is the 65-byte
/// X9.63 point), as Apple's is.
public func SecKeyCopyPublicKey(_ key: SecKey) -> SecKey? {
    key.isPrivate ? SecKey(material: key.publicMaterial) : key
}

/// The key's attributes: `kcls`, `type`, `bsiz`, `esiz`, `klbl`, the usage flags, `perm`, `atag` and `labl` when
/// given, `class` (``kSecClassKey``) and `v_Data` (the external representation), as Foundation objects.
///
/// A Secure Enclave key has no `v_Data` (Apple's token keys export none); it has `tkid`
/// (``kSecAttrTokenIDSecureEnclave``), `toid` (the token's opaque wrapped blob, which CryptoKit's
/// `SecureEnclave.P256…PrivateKey(dataRepresentation:)` takes, as on Apple platforms), `extr` false and `sens` true.
public func SecKeyCopyAttributes(_ key: SecKey) -> CFDictionary? {
    var attributes: CFDictionary = [
        kSecClass: kSecClassKey,
        kSecAttrKeyClass: key.keyClass,
        kSecAttrKeyType: key.keyType,
        kSecAttrKeySizeInBits: NSNumber(value: key.keySizeInBits),
        kSecAttrEffectiveKeySize: NSNumber(value: key.keySizeInBits),
        kSecAttrApplicationLabel: NSData(data: key.applicationLabel),
        kSecAttrIsPermanent: NSNumber(value: key.isPermanent),
    ]
    if let external = key.externalRepresentation { attributes[kSecValueData] = NSData(data: external) }
    if let token = key.tokenKey {
        attributes[kSecAttrTokenID] = kSecAttrTokenIDSecureEnclave
        attributes[SecKeyTokenKey.tokenObjectIDAttribute] = NSData(data: token.key.dataRepresentation)
        attributes[kSecAttrIsExtractable] = NSNumber(value: false)
        attributes[kSecAttrIsSensitive] = NSNumber(value: true)
    }
    for (name, value) in key.usage { attributes[name] = NSNumber(value: value) }
    if let tag = key.applicationTag { attributes[kSecAttrApplicationTag] = NSData(data: tag) }
    if let label = key.label { attributes[kSecAttrLabel] = label }
    return attributes
}

/// The key's bytes in Apple's format: EC 04 ‖ X ‖ Y (public) or 04 ‖ X ‖ Y ‖ K (private); RSA PKCS#1 DER.
///
/// - Returns: nil for a Secure Enclave private key, with `error` set to `errSecUnimplemented` (-4), "export not
///   implemented for key <SecKeyRef:('com.apple.setoken') 0x…>", as Apple's (SecKey.c: token keys have no export).
public func SecKeyCopyExternalRepresentation(_ key: SecKey, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    guard let external = key.externalRepresentation else {
        SecKeyFailure(errSecUnimplemented, "export not implemented for key \(key)").report(to: error)
        return nil
    }
    return NSData(data: external)
}

/// A key from its external representation (the format of ``SecKeyCopyExternalRepresentation(_:_:)``).
///
/// - Parameters:
///   - keyData: The key's bytes.
///   - attributes: ``kSecAttrKeyType`` and ``kSecAttrKeyClass`` (required); ``kSecAttrKeySizeInBits`` (optional: when
///     given it must match the key).
///   - error: Set to a CFError (errSecParam) when the bytes are not such a key.
public func SecKeyCreateWithData(_ keyData: CFData, _ attributes: CFDictionary,
                                 _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> SecKey? {
    withSecKeyError(error) { try SecKeyParameters.key(fromData: Data(referencing: keyData), attributes: attributes) }
}

/// The key's block size in bytes: the field element size for EC (32, 48, 66), the modulus size for RSA.
public func SecKeyGetBlockSize(_ key: SecKey) -> Int {
    key.blockSize
}
#endif
