import Crypto
import Foundation
import KeychainEngine

// A sealed row, as the encrypted storages (the keychain file, etcd) keep it: digests of the primary-key values that
// searches compare without decrypting, and the item sealed under a key of its own, wrapped by its class key.

/// HMAC-SHA256 digests of primary-key values under a keychain's index key: what an encrypted storage indexes and
/// searches by, so that it shows no service, account, server or label.
package enum RowDigest {
    /// The digest of one primary-key attribute's value.
    ///
    /// `byBytes`: a blob attribute holding valid UTF-8 Data is digested as the String it spells (Apple compares blob
    /// attributes by their bytes), so `"alice"` and `Data("alice".utf8)` have one digest. False only for keychain
    /// files of formats 1 and 2, which digested every value with its own type.
    package static func attribute(_ cls: ItemClass, _ attribute: String, _ value: AttributeValue, mac: HMAC<SHA256>, byBytes: Bool = true) -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        bytes.append(contentsOf: cls.rawValue.utf8)
        bytes.append(0)
        bytes.append(contentsOf: attribute.utf8)
        bytes.append(0)
        writeMatchForm(value, of: attribute, in: cls, byBytes: byBytes, to: &bytes)
        return Sealing.digest(bytes, mac: mac)
    }

    /// The digest of a whole primary key (absent attributes count as their type's empty value).
    package static func primaryKey(_ cls: ItemClass, _ attributes: [String: AttributeValue], mac: HMAC<SHA256>, byBytes: Bool = true) -> Data {
        digest(cls, label: "pk", of: ClassSchema.of(cls).primaryKey, attributes, mac: mac, byBytes: byBytes)
    }

    /// The digest of the values of `keys` (in that order) under `label`: absent attributes count as their type's
    /// empty value. ``primaryKey(_:_:mac:byBytes:)`` is this over the whole primary key; a storage can digest parts
    /// of it under labels of its own.
    package static func digest(_ cls: ItemClass, label: String, of keys: [String], _ attributes: [String: AttributeValue],
                               mac: HMAC<SHA256>, byBytes: Bool = true) -> Data {
        Sealing.digest(digestInput(cls, label: label, of: keys, attributes, byBytes: byBytes), mac: mac)
    }

    /// The bytes ``digest(_:label:of:_:mac:byBytes:)`` authenticates: they determine the digest under a given key, so a
    /// storage may keep digests by them.
    package static func digestInput(_ cls: ItemClass, label: String, of keys: [String], _ attributes: [String: AttributeValue],
                                    byBytes: Bool = true) -> [UInt8] {
        let schema = ClassSchema.of(cls)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        bytes.append(contentsOf: cls.rawValue.utf8)
        bytes.append(0)
        bytes.append(contentsOf: label.utf8)
        for key in keys {
            bytes.append(0)
            bytes.append(contentsOf: key.utf8)
            writeMatchForm(schema.primaryKeyValue(key, of: attributes), of: key, in: cls, byBytes: byBytes, to: &bytes)
        }
        return bytes
    }

    /// The digests of every primary-key attribute, in schema order.
    package static func columns(_ cls: ItemClass, _ attributes: [String: AttributeValue], mac: HMAC<SHA256>) -> [Data] {
        let schema = ClassSchema.of(cls)
        return schema.primaryKey.map { key in
            attribute(cls, key, schema.primaryKeyValue(key, of: attributes), mac: mac)
        }
    }

    /// Appends what a row's associated data binds after its header: the row id (8 bytes, big-endian), then the
    /// primary-key digest and each digest column, each after its length (4 bytes, big-endian). The keychain file
    /// (format 2 and later) and etcd bind a row to its place this way.
    package static func appendBinding(rowID: Int64, primaryKey: Data, digests: [Data], to bytes: inout [UInt8]) {
        withUnsafeBytes(of: rowID.bigEndian) { bytes.append(contentsOf: $0) }
        func append(_ part: Data) {
            withUnsafeBytes(of: UInt32(part.count).bigEndian) { bytes.append(contentsOf: $0) }
            bytes.append(contentsOf: part)
        }
        append(primaryKey)
        for part in digests { append(part) }
    }

    /// Writes the form of `value` that digests compare (see ``attribute(_:_:_:mac:byBytes:)``).
    package static func writeMatchForm(_ value: AttributeValue, of attribute: String, in cls: ItemClass, byBytes: Bool, to bytes: inout [UInt8]) {
        if byBytes, case .data(let d) = value, ClassSchema.of(cls).attributes[attribute]?.type == .blob,
           let text = String(data: d, encoding: .utf8) {
            RowCodec.write(.string(text), to: &bytes)
        } else {
            RowCodec.write(value, to: &bytes)
        }
    }
}

/// An item sealed for storage: its protection class, its own random key wrapped by the class key, and its
/// attributes, secret and access control sealed under that key. Both seals authenticate the same associated data,
/// which the storage makes of everything its index shows (class, row id, digests): a sealed row moved to another
/// place in the index does not open.
package struct SealedItem: Sendable, Hashable {
    package var protection: ProtectionClass
    package var wrappedKey: Data
    package var payload: Data

    package init(protection: ProtectionClass, wrappedKey: Data, payload: Data) {
        self.protection = protection
        self.wrappedKey = wrappedKey
        self.payload = payload
    }

    /// Seals `item` (its row id is not sealed: the associated data binds it) under its protection class's key.
    ///
    /// `aad` is called with the item's protection class: the storages bind it too.
    /// - Throws: `errSecInteractionNotAllowed` when that class's key is not held (the keychain is locked).
    package init(sealing item: StoredItem, keys: KeySet, aad: (ProtectionClass) -> Data) throws(EngineError) {
        var encoded = Data()
        try self.init(sealing: item, keys: keys, aad: aad, encoded: &encoded)
    }

    /// Seals `item` as ``init(sealing:keys:aad:)`` does, and gives the plaintext sealed (the item encoded by
    /// `RowCodec`, row id 0): what opening the payload gives back, for a storage that caches the item as a read would
    /// decode it without encoding it a second time.
    ///
    /// - Important: `encoded` holds the item's secret: keep it no longer than the item itself.
    package init(sealing item: StoredItem, keys: KeySet, aad: (ProtectionClass) -> Data, encoded: inout Data) throws(EngineError) {
        let protection = ProtectionClass(item.accessibility)
        guard let classKey = keys.classKeys[protection] else {
            throw EngineError.interactionNotAllowed("the item's protection class is locked")
        }
        let associated = aad(protection)
        // The row key and both nonces from one read of the system's CSPRNG (swift-crypto's own generation makes a
        // system call per 8 bytes: eight per row), then the buffer is zeroed.
        var random = SystemRandom.bytes(32 + 12 + 12)
        defer { SystemRandom.zero(&random) }
        let itemKey = SymmetricKey(data: random[0..<32])
        let wrapNonce = try Self.nonce(random[32..<44]), sealNonce = try Self.nonce(random[44..<56])
        var stored = item
        stored.rowID = 0
        self.protection = protection
        wrappedKey = try Sealing.seal(random[0..<32], key: classKey, nonce: wrapNonce, aad: associated)
        encoded = RowCodec.encode(stored)
        payload = try Sealing.seal(encoded, key: itemKey, nonce: sealNonce, aad: associated)
    }

    private static func nonce(_ bytes: ArraySlice<UInt8>) throws(EngineError) -> AES.GCM.Nonce {
        do { return try AES.GCM.Nonce(data: bytes) } catch {
            throw EngineError(.internalComponent, "AES-GCM refused a nonce (\(type(of: error)))")
        }
    }

    /// What opening a sealed item gave.
    package enum Opened {
        case item(StoredItem)
        /// The class key is not held: the keychain is locked (for this class).
        case locked
        /// The item failed a check: the reason, never contents.
        case damaged(String)
    }

    /// Opens the item and checks its accessibility belongs to its protection class.
    package func open(itemClass: ItemClass, rowID: Int64, keys: KeySet, aad: Data) -> Opened {
        guard let classKey = keys.classKeys[protection] else { return .locked }
        let item: StoredItem
        do {
            let itemKey = SymmetricKey(data: try Sealing.open(wrappedKey, key: classKey, aad: aad))
            item = try RowCodec.decode(try Sealing.open(payload, key: itemKey, aad: aad), itemClass: itemClass, rowID: rowID)
        } catch {
            return .damaged("authentication")
        }
        guard ProtectionClass(item.accessibility) == protection else { return .damaged("accessibility") }
        return .item(item)
    }
}
