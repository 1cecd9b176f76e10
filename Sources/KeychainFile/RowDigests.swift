import Crypto
import Foundation
import KeychainEngine
import KeychainSealing

// The digest columns of a keychain file's rows (`pk` and `d_…`: HMAC-SHA256 under the file's index key, what
// searches bind) and the associated data that binds a row's sealed columns to them.

extension KeychainFile {
    struct Digests {
        var pk: Data
        var columns: [Data]
    }

    /// Whether digests of this file compare blob attributes by their bytes (format 3 and later).
    static func matchesBlobsByBytes(version: Int64) -> Bool { version >= 3 }

    /// The digest of one primary-key attribute's value: what a `d_` column holds and a search binds.
    ///
    /// `generation` is the ``RowCaches/generation`` of the keys `index` comes from (nil: the keys held now, mutex held).
    func digest(_ cls: ItemClass, _ attribute: String, _ value: AttributeValue, _ index: HMAC<SHA256>, version: Int64,
                generation: UInt64? = nil) -> Data {
        guard Self.matchesBlobsByBytes(version: version) else { return makeDigest(cls, attribute, value, index, byBytes: false) }
        // The same values are digested again and again (a service, an access group, sync = false): keep them.
        // Emptied whenever the keys change; bounded. (Keys use the engine's equality, which is the one the
        // digests of format 3 follow: a String and Data with the same bytes are one key and one digest.)
        let key = DigestKey(itemClass: cls, attribute: attribute, value: value)
        let generation = generation ?? caches.generation
        if let known = caches.digest(key, generation: generation) { return known }
        let made = makeDigest(cls, attribute, value, index, byBytes: true)
        caches.storeDigest(key, made, generation: generation)
        return made
    }

    private func makeDigest(_ cls: ItemClass, _ attribute: String, _ value: AttributeValue, _ index: HMAC<SHA256>, byBytes: Bool) -> Data {
        RowDigest.attribute(cls, attribute, value, mac: index, byBytes: byBytes)
    }

    /// The label a `pk` digest is kept under in the digest cache (no attribute is named so).
    static let primaryKeyCacheLabel = "\u{0}pk"
    /// The label a row's digests (`pk` and every column, ``digests(of:_:_:version:generation:)``) are kept under.
    static let rowDigestsCacheLabel = "\u{0}row"

    /// The `pk` digest of `attributes`, kept in the digest cache by the exact bytes the HMAC authenticates (class,
    /// every primary-key value in its match form): an update of an item's data, or the search that finds it, makes the
    /// digest the item was written with, and takes it from the cache instead of computing the HMAC again. The cache
    /// is emptied with every key change, and a digest made with keys of an older `generation` is not stored.
    private func compositeDigest(_ cls: ItemClass, _ attributes: [String: AttributeValue], _ index: HMAC<SHA256>, version: Int64,
                                 generation: UInt64?) -> Data {
        let input = RowDigest.digestInput(cls, label: "pk", of: ClassSchema.of(cls).primaryKey, attributes,
                                          byBytes: Self.matchesBlobsByBytes(version: version))
        let key = DigestKey(itemClass: cls, attribute: Self.primaryKeyCacheLabel, value: .data(Data(input)))
        let generation = generation ?? caches.generation
        if let known = caches.digest(key, generation: generation) { return known }
        let made = Sealing.digest(input, mac: index)
        caches.storeDigest(key, made, generation: generation)
        return made
    }

    /// The `pk` digest of a search naming the whole primary key.
    ///
    /// `generation`: as ``digest(_:_:_:_:version:generation:)``'s.
    func primaryKeyDigest(_ cls: ItemClass, _ constraints: [String: AttributeValue], _ index: HMAC<SHA256>, version: Int64,
                          generation: UInt64? = nil) -> Data {
        compositeDigest(cls, constraints, index, version: version, generation: generation)
    }

    /// The `pk` digest and the `d_` digests in schema primary-key order, as a file of format `version` has them.
    ///
    /// Format 3 and later: all of them are kept in the digest cache as one entry (`pk` then each column, 32 bytes each)
    /// by the bytes the `pk` HMAC authenticates, which hold every primary-key value in the match form its column digests
    /// too: an update that leaves the primary key as it was (a new secret, label, comment) takes them in one lookup.
    func digests(of cls: ItemClass, _ attributes: [String: AttributeValue], _ index: HMAC<SHA256>, version: Int64,
                 generation: UInt64? = nil) -> Digests {
        let schema = ClassSchema.of(cls)
        if Self.matchesBlobsByBytes(version: version) {
            let input = RowDigest.digestInput(cls, label: "pk", of: schema.primaryKey, attributes, byBytes: true)
            let key = DigestKey(itemClass: cls, attribute: Self.rowDigestsCacheLabel, value: .data(Data(input)))
            let generation = generation ?? caches.generation
            let width = 32, count = schema.primaryKey.count
            if let known = caches.digest(key, generation: generation), known.count == width * (count + 1) {
                let start = known.startIndex
                return Digests(pk: known[start..<start + width],
                               columns: (1...count).map { known[(start + $0 * width)..<(start + ($0 + 1) * width)] })
            }
            let made = Digests(
                pk: Sealing.digest(input, mac: index),
                columns: schema.primaryKey.map { key in
                    digest(cls, key, schema.primaryKeyValue(key, of: attributes), index, version: version, generation: generation)
                })
            var joined = Data(capacity: width * (count + 1))
            joined.append(made.pk)
            for column in made.columns { joined.append(column) }
            if joined.count == width * (count + 1) { caches.storeDigest(key, joined, generation: generation) }
            return made
        }
        return Digests(
            pk: compositeDigest(cls, attributes, index, version: version, generation: generation),
            columns: schema.primaryKey.map { key in
                digest(cls, key, schema.primaryKeyValue(key, of: attributes), index, version: version, generation: generation)
            })
    }

    /// The associated data of a row's sealed key and payload.
    ///
    /// Format 2 binds the class, the protection class, the row id, the `pk` digest and every `d_` digest column:
    /// a row with any column moved, copied or edited fails to open. Format 1 bound class, protection class and
    /// `pk` only; its digest columns are checked against the decrypted attributes instead.
    func aad(_ cls: ItemClass, _ pclass: String, _ pk: Data, digests: [Data], rowID: Int64, version: Int64) -> Data {
        guard version >= 2 else {
            var aad = Data("keystone-row-v1\u{0}\(cls.rawValue)\u{0}\(pclass)\u{0}".utf8)
            aad.append(pk)
            return aad
        }
        // "keystone-row-v2\0<class>\0<pclass>\0", appended part by part (no string is built for it).
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64 + 36 * (digests.count + 1))
        bytes.append(contentsOf: "keystone-row-v2".utf8)
        bytes.append(0)
        bytes.append(contentsOf: cls.rawValue.utf8)
        bytes.append(0)
        bytes.append(contentsOf: pclass.utf8)
        bytes.append(0)
        RowDigest.appendBinding(rowID: rowID, primaryKey: pk, digests: digests, to: &bytes)
        return Data(bytes)
    }
}
