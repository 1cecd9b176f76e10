import Foundation

/// Where a CryptoKit key of type `Key` lives in the keychain: a tag for NIST keys, a service and an account
/// for the others.
///
/// The initializers available depend on `Key`, so an item is always the right kind for its key:
///
/// ```swift
/// let signing = try CryptoKeyItem<P256.Signing.PrivateKey>(tag: "com.example.signing")
/// let sealing = try CryptoKeyItem<SymmetricKey>(service: "com.example.sync", account: "alice")
/// ```
///
/// A P-256 item has no service and a symmetric-key item has no tag or key size: neither can be written.
/// Pass the item to ``Keychain``'s `save(_:for:options:)`, `key(for:)` and `delete(_:)`.
///
/// - Important: The key is stored in software (see ``KeychainStorableKey``): whoever can read the item can
///   read the private key. Prefer the Secure Enclave where it is present.
public struct CryptoKeyItem<Key: KeychainStorableKey>: Sendable, Hashable, CustomStringConvertible {
    /// What identifies the item, with the key type's storage rule captured at creation.
    enum Location: Sendable, Hashable {
        /// A key item: application tag, curve size and purpose.
        case keyClass(tag: String, keySizeInBits: Int, purpose: KeychainKeyPurpose)
        /// A generic password with the key type's marker in `kSecAttrGeneric`.
        case genericPassword(service: String, account: String, marker: String)
    }

    let location: Location

    /// The access group (`kSecAttrAccessGroup`), or nil for the keychain's default group.
    public let accessGroup: String?

    init(location: Location, accessGroup: String?) throws(KeychainError) {
        if let accessGroup, accessGroup.isEmpty {
            throw KeychainError(code: .invalidItem, reason: "the access group must not be empty; pass nil for the default group")
        }
        self.location = location
        self.accessGroup = accessGroup
    }

    /// `keys tag="…" bits=256 purpose=signing`, or `genp service="…" account="…" marker="…"`: names only, no key bytes.
    public var description: String {
        let base: String
        switch location {
        case .keyClass(let tag, let bits, let purpose):
            base = "keys tag=\"\(tag)\" bits=\(bits) purpose=\(purpose.rawValue)"
        case .genericPassword(let service, let account, let marker):
            base = "genp service=\"\(service)\" account=\"\(account)\" marker=\"\(marker)\""
        }
        return base + (accessGroup.map { " group=\"\($0)\"" } ?? "")
    }
}

extension CryptoKeyItem where Key: KeychainStorableNISTKey {
    /// Describes the key item holding a NIST private key under `tag`.
    ///
    /// The item is `kSecClassKey` with `kSecAttrApplicationTag` = the UTF-8 bytes of `tag`, `kSecAttrKeyType`
    /// ECSECPrimeRandom, `kSecAttrKeyClass` private and `kSecAttrKeySizeInBits` of `Key`'s curve. A P-256 and
    /// a P-384 key under the same tag are two items; a P-256 signing and a P-256 key-agreement key are one item
    /// (the keychain does not tell purposes apart), so saving one where the other is fails with
    /// ``KeychainError/keyTypeMismatch``.
    ///
    /// - Parameters:
    ///   - tag: the application tag, usually a reverse-DNS name (`"com.example.keys.signing"`); not empty.
    ///   - accessGroup: an access group the app is entitled to, or nil for its default group.
    /// - Throws: ``KeychainError/invalidItem`` when `tag` is empty or `accessGroup` is an empty string.
    public init(tag: String, accessGroup: String? = nil) throws(KeychainError) {
        guard !tag.isEmpty else { throw KeychainError(code: .invalidItem, reason: "a key item needs a non-empty tag") }
        try self.init(location: .keyClass(tag: tag, keySizeInBits: Key.keySizeInBits, purpose: Key.keyPurpose), accessGroup: accessGroup)
    }

    /// The application tag (`kSecAttrApplicationTag`, stored as its UTF-8 bytes).
    public var tag: String {
        guard case .keyClass(let tag, _, _) = location else { preconditionFailure("a NIST key item is a key-class item") }
        return tag
    }
}

extension CryptoKeyItem where Key: KeychainStorableGenericPasswordKey {
    /// Describes the generic password holding a key under `service` and `account`.
    ///
    /// The item is `kSecClassGenericPassword` with this service and account and `kSecAttrGeneric` =
    /// `Key.keychainMarker`; its data is the key's bytes.
    ///
    /// - Parameters:
    ///   - service: the service, usually a reverse-DNS name; not empty.
    ///   - account: the account (the key's name, a user); may be empty.
    ///   - accessGroup: an access group the app is entitled to, or nil for its default group.
    /// - Throws: ``KeychainError/invalidItem`` when `service` is empty or `accessGroup` is an empty string.
    public init(service: String, account: String, accessGroup: String? = nil) throws(KeychainError) {
        guard !service.isEmpty else { throw KeychainError(code: .invalidItem, reason: "a key stored as a generic password needs a non-empty service") }
        try self.init(location: .genericPassword(service: service, account: account, marker: Key.keychainMarker), accessGroup: accessGroup)
    }

    /// The service (`kSecAttrService`).
    public var service: String {
        guard case .genericPassword(let service, _, _) = location else { preconditionFailure("a generic-password key item has a service") }
        return service
    }

    /// The account (`kSecAttrAccount`).
    public var account: String {
        guard case .genericPassword(_, let account, _) = location else { preconditionFailure("a generic-password key item has an account") }
        return account
    }
}
