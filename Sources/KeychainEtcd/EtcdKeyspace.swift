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
    /// The HEAD record (``EtcdHead``): the keychain-wide counter every write transaction advances.
    var head: Data { prefix + Data("head".utf8) }

    /// The prefix of every history row of every item.
    var allHistory: Data { prefix + Data("h/".utf8) }
    /// The prefix of the history rows of the item of `cls` whose key ends with `digest`.
    func history(_ cls: ItemClass, _ digest: Data) -> Data { prefix + Data("h/\(cls.rawValue)/".utf8) + digest + Data("/".utf8) }
    /// The history row of version `version` (16 hex digits, so keys sort as versions do).
    func history(_ cls: ItemClass, _ digest: Data, version: UInt64) -> Data {
        history(cls, digest) + Data(Self.hex16(version).utf8)
    }
    /// The version a history key ends with.
    func version(inHistoryKey key: Data) -> UInt64? {
        guard key.count >= 16, let text = String(data: key.suffix(16), encoding: .ascii) else { return nil }
        return UInt64(text, radix: 16)
    }

    /// The prefix of the tombstone index: `…/t/<deleted at, 16 hex digits>/<HEAD counter, 16 hex digits>`, one key
    /// per transaction that deleted items, listing them (class tag and digest, 68 bytes each), oldest first: a write
    /// finds the deletions past retention without reading every item.
    var tombstones: Data { prefix + Data("t/".utf8) }
    func tombstone(deletedAt: UInt64, counter: UInt64) -> Data {
        tombstones + Data("\(Self.hex16(deletedAt))/\(Self.hex16(counter))".utf8)
    }

    /// The audit entry of the write transaction that made HEAD's counter `counter`.
    func audit(_ counter: UInt64) -> Data { prefix + Data("audit/\(Self.hex16(counter))".utf8) }

    static func hex16(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: max(0, 16 - digits.count)) + digits
    }

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
/// order), the extensions (format 2) and the sealed item.
///
/// Format 1 layout: `01` (format), the protection class (one ASCII letter), the row id (8 bytes, big-endian), the
/// number of digests (2 bytes) and each digest (32 bytes), the wrapped item key's length (4 bytes) and bytes, then
/// the sealed payload.
///
/// Format 2 (issue 30) adds, after the digests, the *extension list*: its length in entries (1 byte), then each entry
/// as tag (1 byte), length (2 bytes, big-endian) and bytes, sorted by tag, each tag at most once. Tags:
/// ``Tag/version`` (0x01, UInt64 BE: 1 for a new item, +1 per change), ``Tag/counter`` (0x02, UInt64 BE: the
/// keychain's HEAD counter of the transaction that wrote the row), ``Tag/deletedAt`` (0x03, UInt64 BE seconds since
/// 1970: the row is a tombstone), 0x10...0x1F reserved for the key selection (groups, rotation).
///
/// The associated data of both seals (``aad(keychainID:itemClass:protection:rowID:primaryKey:digests:extensions:)``)
/// binds the keychain, the class, the protection class, the row id, the key's primary-key digest, every digest and,
/// in format 2, every byte of the extension list: a value copied to another key, another keychain or edited in any
/// byte does not open. Format 1 rows stay readable (they carry no version: see `EtcdRollback`).
struct EtcdRow: Sendable, Hashable {
    static let format: UInt8 = 2

    /// The extension tags this file knows (E3 owns 0x10...0x1F).
    enum Tag {
        static let version: UInt8 = 0x01
        static let counter: UInt8 = 0x02
        static let deletedAt: UInt8 = 0x03
    }

    /// The row's format: 1 (written before issue 30) or 2.
    var format: UInt8
    var rowID: Int64
    var digests: [Data]
    /// Format 2's extensions by tag (empty in format 1).
    var extensions: [UInt8: Data]
    var sealed: SealedItem

    init(rowID: Int64, digests: [Data], extensions: [UInt8: Data] = [:], sealed: SealedItem, format: UInt8 = EtcdRow.format) {
        self.format = format
        self.rowID = rowID
        self.digests = digests
        self.extensions = extensions
        self.sealed = sealed
    }

    /// The item version (format 1: nil).
    var version: UInt64? { extensions[Tag.version].flatMap(\.bigEndianUInt64) }
    /// The HEAD counter of the write that made this row (format 1: nil).
    var counter: UInt64? { extensions[Tag.counter].flatMap(\.bigEndianUInt64) }
    /// When the item was deleted, if this row is a tombstone.
    var deletedAt: Date? {
        extensions[Tag.deletedAt].flatMap(\.bigEndianUInt64).map { Date(timeIntervalSince1970: TimeInterval($0)) }
    }
    var isTombstone: Bool { extensions[Tag.deletedAt] != nil }

    /// The extension list as stored (and bound in the AAD): count, then (tag, length, bytes) sorted by tag.
    static func encodedExtensions(_ extensions: [UInt8: Data]) -> Data {
        var out = Data([UInt8(extensions.count)])
        for tag in extensions.keys.sorted() {
            let bytes = extensions[tag]!
            out.append(tag)
            withUnsafeBytes(of: UInt16(bytes.count).bigEndian) { out.append(contentsOf: $0) }
            out.append(bytes)
        }
        return out
    }

    var encoded: Data {
        var out = Data([format, UInt8(ascii: sealed.protection.rawValue.unicodeScalars.first!)])
        withUnsafeBytes(of: rowID.bigEndian) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt16(digests.count).bigEndian) { out.append(contentsOf: $0) }
        for digest in digests { out.append(digest) }
        if format >= 2 { out.append(Self.encodedExtensions(extensions)) }
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
        guard let format = take(1)?.first, format == 1 || format == 2,
              let letter = take(1)?.first, let protection = ProtectionClass(rawValue: String(UnicodeScalar(letter))),
              let id = integer(8), id > 0, id <= UInt64(Int64.max),
              let count = integer(2), count <= 64 else { return nil }
        var digests: [Data] = []
        for _ in 0..<count {
            guard let digest = take(32) else { return nil }
            digests.append(Data(digest))
        }
        var extensions: [UInt8: Data] = [:]
        if format == 2 {
            guard let entries = integer(1) else { return nil }
            var last: Int = -1
            for _ in 0..<entries {
                guard let tag = take(1)?.first, Int(tag) > last, let length = integer(2), let value = take(Int(length)) else { return nil }
                last = Int(tag)
                extensions[tag] = Data(value)
            }
        }
        guard let keyLength = integer(4), keyLength <= 256, let key = take(Int(keyLength)) else { return nil }
        self.format = format
        rowID = Int64(id)
        self.digests = digests
        self.extensions = extensions
        sealed = SealedItem(protection: protection, wrappedKey: Data(key), payload: Data(bytes[at...]))
    }

    /// The associated data of the item's seals: format 1's, or format 2's with the extension list.
    static func aad(keychainID: Data, itemClass: ItemClass, protection: ProtectionClass, rowID: Int64, primaryKey: Data, digests: [Data],
                    format: UInt8 = EtcdRow.format, extensions: [UInt8: Data] = [:]) -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(128 + 36 * digests.count)
        bytes.append(contentsOf: (format >= 2 ? "keystone-etcd-row-v2\u{0}" : "keystone-etcd-row-v1\u{0}").utf8)
        bytes.append(contentsOf: keychainID)
        bytes.append(contentsOf: "\u{0}\(itemClass.rawValue)\u{0}\(protection.rawValue)\u{0}".utf8)
        RowDigest.appendBinding(rowID: rowID, primaryKey: primaryKey, digests: digests, to: &bytes)
        if format >= 2 { bytes.append(contentsOf: encodedExtensions(extensions)) }
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

    /// This sequence of bytes as a big-endian unsigned integer; nil unless 8 bytes.
    var bigEndianUInt64: UInt64? {
        guard count == 8 else { return nil }
        return reduce(0) { ($0 << 8) | UInt64($1) }
    }

    /// These bytes as a hexadecimal number (16 ASCII digits at most); nil otherwise.
    var asciiHex: UInt64? {
        guard !isEmpty, count <= 16, let text = String(data: self, encoding: .ascii) else { return nil }
        return UInt64(text, radix: 16)
    }

    init(bigEndianUnsigned value: UInt64) {
        self = Swift.withUnsafeBytes(of: value.bigEndian) { Data($0) }
    }
}
#endif
