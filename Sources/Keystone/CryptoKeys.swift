import Crypto
import Foundation

// CryptoKit keys as keychain items. `import Crypto` is swift-crypto, which re-exports CryptoKit on Apple
// platforms: the same key types, and the same bytes stored, everywhere.
//
// Storage rules (as in Apple's sample "Storing CryptoKit Keys in the Keychain"):
//
// | key | stored as | what identifies it | stored bytes |
// |---|---|---|---|
// | P256 / P384 / P521, signing and key agreement | key item (`kSecClassKey`): `kSecAttrKeyType` ECSECPrimeRandom ("73"), `kSecAttrKeyClass` private ("1"), `kSecAttrKeySizeInBits` 256/384/521 | `kSecAttrApplicationTag` (the tag's UTF-8 bytes) | `x963Representation` (04 ‖ X ‖ Y ‖ K) |
// | SymmetricKey, Curve25519, ML-KEM-768, ML-DSA-65 | generic password (`kSecClassGenericPassword`) | service + account | the raw bytes, the seed with a public-key hash for ML-KEM/ML-DSA |
//
// Markers: a NIST key item sets `kSecAttrCanSign` (signing keys) or `kSecAttrCanDerive` (key-agreement keys) true
// and the other false; a generic password sets `kSecAttrGeneric` to the UTF-8 bytes of the key type's
// ``KeychainStorableGenericPasswordKey/keychainMarker`` ("keystone.curve25519.signing" …). Reads check the marker
// before decoding, saves update only an item with the same marker, deletes remove only such an item.

/// A CryptoKit key that ``Keychain`` can save and load: `save(_:for:)`, `key(for:)`, `delete(_:)` with a
/// ``CryptoKeyItem``.
///
/// Refined by ``KeychainStorableNISTKey`` (stored as a key item) and ``KeychainStorableGenericPasswordKey``
/// (stored as a generic password); conform to one of those, not to this protocol alone. Keystone conforms
/// `SymmetricKey`, the private keys of `P256`, `P384`, `P521` and `Curve25519` (signing and key agreement),
/// and `MLKEM768.PrivateKey` and `MLDSA65.PrivateKey` (on Apple platforms from macOS, iOS, tvOS, watchOS
/// and visionOS 26).
///
/// - Important: A key stored this way is a software key: anyone who can read the item (the app, its access
///   group, a backup restored under the item's accessibility) gets the private key bytes. Where a Secure
///   Enclave is present, prefer `SecureEnclave.P256` keys, which never leave it (store their
///   `dataRepresentation`, an encrypted blob only that device can use).
public protocol KeychainStorableKey: Sendable {
    /// The bytes stored as the item's data (`kSecValueData`).
    var keychainRepresentation: Data { get }

    /// Recreates the key from the bytes ``keychainRepresentation`` returned.
    ///
    /// - Throws: any error when the bytes are not a valid key of this type (wrong length, not on the curve,
    ///   integrity check failed). ``Keychain`` reports it as ``KeychainError/decodingFailed``.
    init(keychainRepresentation: Data) throws
}

/// The purpose a NIST private key is stored for: marked with `kSecAttrCanSign` or `kSecAttrCanDerive`.
public enum KeychainKeyPurpose: String, Sendable, Hashable, CaseIterable {
    /// A signing key (`P256.Signing.PrivateKey` …): `kSecAttrCanSign` true, `kSecAttrCanDerive` false.
    case signing
    /// A key-agreement key (`P256.KeyAgreement.PrivateKey` …): `kSecAttrCanDerive` true, `kSecAttrCanSign` false.
    case keyAgreement
}

/// A NIST elliptic-curve private key (P-256, P-384, P-521), stored as a key item (`kSecClassKey`).
///
/// The item has `kSecAttrKeyType` `kSecAttrKeyTypeECSECPrimeRandom`, `kSecAttrKeyClass`
/// `kSecAttrKeyClassPrivate`, `kSecAttrKeySizeInBits` ``keySizeInBits``, the ``CryptoKeyItem``'s tag as
/// `kSecAttrApplicationTag`, and the key's ANSI X9.63 representation (04 ‖ X ‖ Y ‖ K) as its data: the form
/// `SecKeyCreateWithData` takes for an EC private key, so Security-framework code can use the item too.
public protocol KeychainStorableNISTKey: KeychainStorableKey {
    /// The curve's size: 256, 384 or 521 (`kSecAttrKeySizeInBits`).
    static var keySizeInBits: Int { get }
    /// Signing or key agreement: the item's `kSecAttrCanSign` / `kSecAttrCanDerive`.
    static var keyPurpose: KeychainKeyPurpose { get }
}

/// A key with no keychain key type (symmetric keys, Curve25519, ML-KEM, ML-DSA), stored as a generic
/// password (`kSecClassGenericPassword`) under a service and an account.
///
/// The item's data is ``KeychainStorableKey/keychainRepresentation``; its `kSecAttrGeneric` holds the UTF-8
/// bytes of ``keychainMarker``, which says what the bytes are.
public protocol KeychainStorableGenericPasswordKey: KeychainStorableKey {
    /// The key type's marker, stored in `kSecAttrGeneric`: `"keystone.<family>.<purpose>"`, such as
    /// `"keystone.curve25519.signing"`. Two key types never share a marker.
    static var keychainMarker: String { get }
}

// MARK: - NIST curves: X9.63 in a key item

extension P256.Signing.PrivateKey: KeychainStorableNISTKey {
    /// 256.
    public static var keySizeInBits: Int { 256 }
    /// ``KeychainKeyPurpose/signing``.
    public static var keyPurpose: KeychainKeyPurpose { .signing }
    /// The key's `x963Representation` (97 bytes).
    public var keychainRepresentation: Data { x963Representation }
    /// `init(x963Representation:)`.
    public init(keychainRepresentation data: Data) throws { try self.init(x963Representation: data) }
}

extension P256.KeyAgreement.PrivateKey: KeychainStorableNISTKey {
    /// 256.
    public static var keySizeInBits: Int { 256 }
    /// ``KeychainKeyPurpose/keyAgreement``.
    public static var keyPurpose: KeychainKeyPurpose { .keyAgreement }
    /// The key's `x963Representation` (97 bytes).
    public var keychainRepresentation: Data { x963Representation }
    /// `init(x963Representation:)`.
    public init(keychainRepresentation data: Data) throws { try self.init(x963Representation: data) }
}

extension P384.Signing.PrivateKey: KeychainStorableNISTKey {
    /// 384.
    public static var keySizeInBits: Int { 384 }
    /// ``KeychainKeyPurpose/signing``.
    public static var keyPurpose: KeychainKeyPurpose { .signing }
    /// The key's `x963Representation` (145 bytes).
    public var keychainRepresentation: Data { x963Representation }
    /// `init(x963Representation:)`.
    public init(keychainRepresentation data: Data) throws { try self.init(x963Representation: data) }
}

extension P384.KeyAgreement.PrivateKey: KeychainStorableNISTKey {
    /// 384.
    public static var keySizeInBits: Int { 384 }
    /// ``KeychainKeyPurpose/keyAgreement``.
    public static var keyPurpose: KeychainKeyPurpose { .keyAgreement }
    /// The key's `x963Representation` (145 bytes).
    public var keychainRepresentation: Data { x963Representation }
    /// `init(x963Representation:)`.
    public init(keychainRepresentation data: Data) throws { try self.init(x963Representation: data) }
}

extension P521.Signing.PrivateKey: KeychainStorableNISTKey {
    /// 521.
    public static var keySizeInBits: Int { 521 }
    /// ``KeychainKeyPurpose/signing``.
    public static var keyPurpose: KeychainKeyPurpose { .signing }
    /// The key's `x963Representation` (199 bytes).
    public var keychainRepresentation: Data { x963Representation }
    /// `init(x963Representation:)`.
    public init(keychainRepresentation data: Data) throws { try self.init(x963Representation: data) }
}

extension P521.KeyAgreement.PrivateKey: KeychainStorableNISTKey {
    /// 521.
    public static var keySizeInBits: Int { 521 }
    /// ``KeychainKeyPurpose/keyAgreement``.
    public static var keyPurpose: KeychainKeyPurpose { .keyAgreement }
    /// The key's `x963Representation` (199 bytes).
    public var keychainRepresentation: Data { x963Representation }
    /// `init(x963Representation:)`.
    public init(keychainRepresentation data: Data) throws { try self.init(x963Representation: data) }
}

// MARK: - Everything else: raw bytes in a generic password

/// A stored key that is not valid for its type.
struct InvalidStoredKey: Error {}

extension SymmetricKey: KeychainStorableGenericPasswordKey {
    /// `"keystone.symmetric"`.
    public static var keychainMarker: String { "keystone.symmetric" }
    /// The key's bytes.
    public var keychainRepresentation: Data { withUnsafeBytes { Data($0) } }
    /// `init(data:)`; empty bytes are refused.
    ///
    /// - Important: Any non-empty length is a valid symmetric key, so a truncated value cannot be told from a
    ///   shorter key. Check `bitCount` when the size matters.
    public init(keychainRepresentation data: Data) throws {
        guard !data.isEmpty else { throw InvalidStoredKey() }
        self.init(data: data)
    }
}

extension Curve25519.Signing.PrivateKey: KeychainStorableGenericPasswordKey {
    /// `"keystone.curve25519.signing"`.
    public static var keychainMarker: String { "keystone.curve25519.signing" }
    /// The key's `rawRepresentation` (32 bytes).
    public var keychainRepresentation: Data { rawRepresentation }
    /// `init(rawRepresentation:)`.
    public init(keychainRepresentation data: Data) throws { try self.init(rawRepresentation: data) }
}

extension Curve25519.KeyAgreement.PrivateKey: KeychainStorableGenericPasswordKey {
    /// `"keystone.curve25519.keyagreement"`.
    public static var keychainMarker: String { "keystone.curve25519.keyagreement" }
    /// The key's `rawRepresentation` (32 bytes).
    public var keychainRepresentation: Data { rawRepresentation }
    /// `init(rawRepresentation:)`.
    public init(keychainRepresentation data: Data) throws { try self.init(rawRepresentation: data) }
}

// ML-KEM and ML-DSA: in CryptoKit from the 26 releases, which ship with Swift 6.2 (Xcode 26). swift-crypto has
// them on every other platform.
#if !canImport(Darwin) || compiler(>=6.2)
@available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)
extension MLKEM768.PrivateKey: KeychainStorableGenericPasswordKey {
    /// `"keystone.mlkem768"`.
    public static var keychainMarker: String { "keystone.mlkem768" }
    /// The key's `integrityCheckedRepresentation`: the 64-byte seed and a 32-byte hash of the public key, so a
    /// damaged value is refused rather than loaded as another key.
    public var keychainRepresentation: Data { integrityCheckedRepresentation }
    /// `init(integrityCheckedRepresentation:)`.
    public init(keychainRepresentation data: Data) throws { try self.init(integrityCheckedRepresentation: data) }
}

@available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *)
extension MLDSA65.PrivateKey: KeychainStorableGenericPasswordKey {
    /// `"keystone.mldsa65"`.
    public static var keychainMarker: String { "keystone.mldsa65" }
    /// The key's `integrityCheckedRepresentation`: the 32-byte seed and a hash of the public key, so a damaged
    /// value is refused rather than loaded as another key.
    public var keychainRepresentation: Data { integrityCheckedRepresentation }
    /// `init(integrityCheckedRepresentation:)`.
    public init(keychainRepresentation data: Data) throws { try self.init(integrityCheckedRepresentation: data) }
}
#endif
