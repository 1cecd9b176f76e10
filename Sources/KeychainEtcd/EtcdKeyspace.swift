#if NIO
import Crypto
import Foundation
import KeychainEngine
import KeychainSealing

/// Where an etcd keychain keeps its data: every key of keychain `NAME` starts with `keystone/v1/NAME/`.
///
/// | Key | Value |
/// |---|---|
/// | `…/meta` | the header (``EtcdKeychainHeader``, JSON): keychain id, the wrapped master key, the key check, the lock timeout |
/// | `…/seq` | the last row id given out (8 bytes, big-endian): row ids are unique in the keychain, and ordered as inserts were |
/// | `…/k/CLSS/IDENTITY/GROUP` | one item (``EtcdRow``): `CLSS` its class tag; `IDENTITY` the 32-byte HMAC of its primary key without the access group and `sync` (for a generic password: service and account); `GROUP` the HMAC of those two |
///
/// The item's key *is* its primary key: etcd's own uniqueness of keys is the UNIQUE constraint, and an add is a
/// transaction that succeeds only if that key does not exist. A search naming the whole primary key reads one key;
/// one naming all of it but the access group or `sync` (the usual `SecItemCopyMatching` of a service and an
/// account) reads the keys under `…/k/CLSS/IDENTITY/`; any other search reads the class. Nothing in any key or value
/// names a service, account, server or label: keys hold digests under the keychain's index key, values hold sealed
/// items and the digests of their primary-key attributes.
struct EtcdKeyspace: Sendable {
    let prefix: Data

    init(name: String) {
        prefix = Data("keystone/v1/\(name)/".utf8)
    }

    var meta: Data { prefix + Data("meta".utf8) }
    var sequence: Data { prefix + Data("seq".utf8) }

    /// The prefix of every item of every class.
    var allItems: Data { prefix + Data("k/".utf8) }

    /// The prefix of every item of `cls`.
    func items(_ cls: ItemClass) -> Data { prefix + Data("k/\(cls.rawValue)/".utf8) }

    /// The prefix of the items of `cls` whose primary key, but for the group attributes, has `identity`'s digest.
    func items(_ cls: ItemClass, identity: Data) -> Data { items(cls) + identity }

    /// The key of the item of `cls` whose primary key has the digest `digest` (``Self/primaryKey(_:_:mac:)``).
    func item(_ cls: ItemClass, _ digest: Data) -> Data { items(cls) + digest }

    /// The primary-key digest a key of `cls` ends with, nil when `key` is not an item key of that class.
    func digest(in key: Data, of cls: ItemClass) -> Data? {
        let start = items(cls)
        guard key.count == start.count + 64, key.starts(with: start) else { return nil }
        return key.suffix(64)
    }

    /// The primary-key attributes that are not part of an item's identity in its key: a search often leaves them out.
    static let groupAttributes = [Key.accessGroup, Key.synchronizable]

    /// The attributes of `cls`'s primary key that make the identity part of an item's key.
    static func identityAttributes(_ cls: ItemClass) -> [String] {
        ClassSchema.of(cls).primaryKey.filter { !groupAttributes.contains($0) }
    }

    /// The digest of a primary key as an item's key holds it: the identity part's digest, then the group part's
    /// (64 bytes). Absent attributes count as their type's empty value.
    static func primaryKey(_ cls: ItemClass, _ attributes: [String: AttributeValue], mac: HMAC<SHA256>) -> Data {
        part("identity", identityAttributes(cls), cls, attributes, mac) + part("group", groupAttributes, cls, attributes, mac)
    }

    /// The identity part's digest alone.
    static func identity(_ cls: ItemClass, _ attributes: [String: AttributeValue], mac: HMAC<SHA256>) -> Data {
        part("identity", identityAttributes(cls), cls, attributes, mac)
    }

    private static func part(_ label: String, _ keys: [String], _ cls: ItemClass, _ attributes: [String: AttributeValue], _ mac: HMAC<SHA256>) -> Data {
        RowDigest.digest(cls, label: label, of: keys, attributes, mac: mac)
    }
}

/// One item as stored in etcd: the row id, the protection class, the digests of its primary-key attributes (schema
/// order) and the sealed item.
///
/// Layout: `01` (format), the protection class (one ASCII letter), the row id (8 bytes, big-endian), the number of
/// digests (2 bytes) and each digest (32 bytes), the wrapped item key's length (4 bytes) and bytes, then the sealed
/// payload. The associated data of both seals (``aad(keychainID:itemClass:primaryKey:)``) binds the keychain, the
/// class, the protection class, the row id, the key's primary-key digest and every digest here: a value copied to
/// another key, another keychain or edited in any byte does not open.
struct EtcdRow: Sendable, Hashable {
    static let format: UInt8 = 1

    var rowID: Int64
    var digests: [Data]
    var sealed: SealedItem

    init(rowID: Int64, digests: [Data], sealed: SealedItem) {
        self.rowID = rowID
        self.digests = digests
        self.sealed = sealed
    }

    var encoded: Data {
        var out = Data([Self.format, UInt8(ascii: sealed.protection.rawValue.unicodeScalars.first!)])
        withUnsafeBytes(of: rowID.bigEndian) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt16(digests.count).bigEndian) { out.append(contentsOf: $0) }
        for digest in digests { out.append(digest) }
        withUnsafeBytes(of: UInt32(sealed.wrappedKey.count).bigEndian) { out.append(contentsOf: $0) }
        out.append(sealed.wrappedKey)
        out.append(sealed.payload)
        return out
    }

    /// Parses a stored value; nil when it is not one (never trusted further than its layout: opening checks the rest).
    init?(decoding data: Data) {
        let bytes = [UInt8](data)
        var at = 0
        func take(_ n: Int) -> ArraySlice<UInt8>? {
            guard n >= 0, bytes.count - at >= n else { return nil }
            defer { at += n }
            return bytes[at..<(at + n)]
        }
        func integer(_ n: Int) -> UInt64? { take(n).map { $0.reduce(0) { ($0 << 8) | UInt64($1) } } }
        guard take(1)?.first == Self.format,
              let letter = take(1)?.first, let protection = ProtectionClass(rawValue: String(UnicodeScalar(letter))),
              let id = integer(8), id > 0, id <= UInt64(Int64.max),
              let count = integer(2), count <= 64 else { return nil }
        var digests: [Data] = []
        for _ in 0..<count {
            guard let digest = take(32) else { return nil }
            digests.append(Data(digest))
        }
        guard let keyLength = integer(4), keyLength <= 256, let key = take(Int(keyLength)) else { return nil }
        rowID = Int64(id)
        self.digests = digests
        sealed = SealedItem(protection: protection, wrappedKey: Data(key), payload: Data(bytes[at...]))
    }

    /// The associated data of the item's seals.
    static func aad(keychainID: Data, itemClass: ItemClass, protection: ProtectionClass, rowID: Int64, primaryKey: Data, digests: [Data]) -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(96 + 36 * digests.count)
        bytes.append(contentsOf: "keystone-etcd-row-v1\u{0}".utf8)
        bytes.append(contentsOf: keychainID)
        bytes.append(contentsOf: "\u{0}\(itemClass.rawValue)\u{0}\(protection.rawValue)\u{0}".utf8)
        RowDigest.appendBinding(rowID: rowID, primaryKey: primaryKey, digests: digests, to: &bytes)
        return Data(bytes)
    }
}

extension Data {
    /// This sequence of bytes as a big-endian integer (the row-id sequence's value); nil unless 8 bytes.
    var bigEndianInt64: Int64? {
        guard count == 8 else { return nil }
        return Int64(bitPattern: reduce(0) { ($0 << 8) | UInt64($1) })
    }

    init(bigEndian value: Int64) {
        self = Swift.withUnsafeBytes(of: value.bigEndian) { Data($0) }
    }
}
#endif
