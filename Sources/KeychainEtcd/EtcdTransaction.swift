#if NIO
import Crypto
import Foundation
import KeychainEngine
import KeychainSealing

/// One storage transaction on an etcd keychain: reads at one revision, changes buffered, committed as one etcd
/// transaction guarded by compare-and-swap.
///
/// - Reads: the first read is linearizable and fixes the snapshot's revision; every later read asks for that
///   revision, so the whole body sees one consistent state of the keychain. The body sees its own changes.
/// - Commit: one etcd `Txn` whose compares require, for every key the body read by primary key (found or absent)
///   and every key it changes, the mod revision seen in the snapshot, and the header's revision; its success branch
///   puts and deletes. If anything changed meanwhile, nothing is written and ``EtcdKeychain/write(_:)`` runs the body
///   again on a fresh snapshot: the outcome is as if the transactions had run one after the other.
/// - Rows keyed by primary key need no lock and no index of their own: the UNIQUE constraint is "that key was absent
///   at the snapshot, and still is at commit".
final class EtcdTransaction: StorageWriter {
    /// The snapshot's revision was compacted away while the body ran: the body runs again.
    struct SnapshotCompacted: Error {}
    /// The first read found the keychain's header changed since this process read it: it is read again, and the
    /// body runs again.
    struct HeaderChanged: Error {}

    enum Outcome {
        /// Applied at this revision.
        case committed(revision: Int64)
        /// Another writer changed a key this transaction depends on (or a guess was wrong): what those keys hold now,
        /// read by the commit itself, to start the next attempt from when known.
        case conflict(Snapshot?)
        /// The keychain's header changed (a new password, or the keychain deleted or made again).
        case headerChanged
    }

    /// Values read at one revision.
    struct Snapshot {
        let revision: Int64
        let values: [Data: (value: Data?, modRevision: Int64)]
    }

    /// How a transaction starts.
    enum Start {
        /// Reads everything it needs.
        case fresh
        /// A first attempt that assumes, without reading, that an item it looks up by primary key does not exist
        /// and that the row-id sequence is where this process last left it (when it knows). Every assumption is
        /// compared at commit like a read, so a wrong one only costs another attempt; an add then takes one round
        /// trip instead of two.
        case guessing(sequence: (value: Int64, modRevision: Int64)?)
        /// Starts from values a failed commit read.
        case snapshot(Snapshot)
    }

    struct RowRef: Hashable {
        let itemClass: ItemClass
        let rowID: Int64
    }

    /// Rows fetched per request when a search reads a whole class.
    static let pageSize = 256

    let keychain: EtcdKeychain
    let keys: KeySet?
    let keychainID: Data
    /// The header's revision when this transaction started.
    let headerRevision: Int64
    /// Whether this is a write transaction.
    let writing: Bool
    var client: EtcdClient { keychain.client }
    var keyspace: EtcdKeyspace { keychain.keyspace }

    /// The snapshot's revision, once a first read fixed it.
    private(set) var revision: Int64?
    /// Keys read, with the value seen (nil: absent) and its mod revision (0: absent).
    private var seen: [Data: (value: Data?, modRevision: Int64)] = [:]
    /// Keys a decision rested on (an absence that allowed an add, the row-id sequence): compared at commit.
    private var pinned: Set<Data> = []
    /// Changes not yet committed: the new value, nil for a delete; `order` keeps them deterministic.
    private var changes: [Data: Data?] = [:]
    private var order: [Data] = []
    /// The primary-key digest of every row this transaction met, by class and row id.
    private var located: [RowRef: Data] = [:]
    /// The next row id to give, once the sequence was read.
    private var nextRowID: Int64?
    /// Whether this attempt guesses (``Start/guessing(sequence:)``), with its guess of the sequence.
    private let guessing: Bool
    private let sequenceGuess: (value: Int64, modRevision: Int64)?
    /// Whether the body was given a guess rather than a value read.
    private(set) var guessed = false

    init(keychain: EtcdKeychain, keys: KeySet?, keychainID: Data, headerRevision: Int64, writing: Bool, start: Start = .fresh) {
        self.keychain = keychain
        self.keys = keys
        self.keychainID = keychainID
        self.headerRevision = headerRevision
        self.writing = writing
        switch start {
        case .fresh:
            guessing = false
            sequenceGuess = nil
        case .guessing(let sequence):
            guessing = true
            sequenceGuess = sequence
        case .snapshot(let snapshot):
            guessing = false
            sequenceGuess = nil
            revision = snapshot.revision
            seen = snapshot.values
        }
    }

    /// The row-id sequence's value this transaction writes, if it does.
    var writtenSequence: Int64? { (changes[keyspace.sequence] ?? nil)?.bigEndianInt64 }

    var hasChanges: Bool { !order.isEmpty }

    // MARK: - Reading etcd at the snapshot

    private func compactionChecked<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch EtcdError.compacted { throw SnapshotCompacted() }
    }

    private func record(_ kv: EtcdKeyValue) {
        if seen[kv.key] == nil { seen[kv.key] = (kv.value, kv.modRevision) }
    }

    /// The value of `key` as this transaction sees it: its own change, else the snapshot's value.
    private func value(of key: Data) throws -> Data? {
        if let change = changes[key] { return change }
        if let known = seen[key] { return known.value }
        if guessing {
            // A guess is checked at commit like a value read: the key is compared.
            if key == keyspace.sequence || key.starts(with: keyspace.allItems) { pinned.insert(key) }
            if key == keyspace.sequence, let guess = sequenceGuess {
                seen[key] = (Data(bigEndian: guess.value), guess.modRevision)
                guessed = true
                return seen[key]?.value ?? nil
            }
            if key.starts(with: keyspace.allItems) {
                seen[key] = (nil, 0)
                guessed = true
                return nil
            }
        }
        try fetch([key])
        return seen[key]?.value ?? nil
    }

    /// Reads `keys` at the snapshot (the first read: ``first(_:)``).
    private func fetch(_ wanted: [Data]) throws {
        try compactionChecked {
            for key in wanted {
                let result = try revision.map { try client.range(key, revision: $0) } ?? first(.range(key))
                if let kv = result.kvs.first { record(kv) } else { seen[key] = (nil, 0) }
            }
        }
    }

    /// The transaction's first read, whose revision becomes the snapshot's: `operation` alone in a read transaction;
    /// in a write transaction, with the header and the row-id sequence in the same request.
    ///
    /// Decision: reads do not check the header. A read is one etcd range, as cheap as a raw read; keys are not
    /// changed by a password change, and rows of a keychain deleted and made again elsewhere do not open with the old
    /// keys (their seals bind the keychain id), so such a machine finds nothing (or damaged rows) until it unlocks the
    /// new keychain. A write notices at once (``HeaderChanged``) and fails with `errSecNoSuchKeychain`.
    ///
    /// - Throws: ``HeaderChanged`` when a write transaction finds the header is not the one this process knows.
    private func first(_ operation: EtcdOperation) throws -> EtcdRangeResult {
        if !writing {
            let result: EtcdRangeResult
            switch operation {
            case .rangePrefix(let prefix, let limit): result = try client.range(prefix: prefix, limit: limit)
            case .range(let key): result = try client.range(key)
            case .put, .delete, .deletePrefix: preconditionFailure("a first read is a range")
            }
            revision = result.revision
            return result
        }
        var extra = [keyspace.meta]
        if writing, operation != .range(keyspace.sequence) { extra.append(keyspace.sequence) }
        let result = try client.txn(compare: [], success: [operation] + extra.map { .range($0) })
        let answers = result.responses.compactMap { if case .range(let found) = $0 { found } else { nil } }
        guard answers.count == 1 + extra.count, answers[1].kvs.first?.modRevision == headerRevision else { throw HeaderChanged() }
        revision = result.revision
        if writing, extra.count == 2 {
            if let kv = answers[2].kvs.first { record(kv) } else { seen[keyspace.sequence] = (nil, 0) }
        }
        return answers[0]
    }

    /// Every row whose key starts with `prefix` at the snapshot, then this transaction's own changes: (key, value) pairs.
    private func scan(_ prefix: Data) throws -> [(key: Data, value: Data)] {
        var rows: [Data: Data] = [:]
        try compactionChecked {
            var after: Data?
            repeat {
                let page: EtcdRangeResult
                if revision == nil {
                    // The first read: the first page, the header (and in a write, the sequence) in one request.
                    page = try first(.rangePrefix(prefix, limit: Self.pageSize))
                } else {
                    page = try client.range(prefix: prefix, revision: revision, limit: Self.pageSize, startingAfter: after)
                }
                for kv in page.kvs {
                    record(kv)
                    rows[kv.key] = kv.value
                }
                after = page.more ? page.kvs.last?.key : nil
            } while after != nil
        }
        for key in order where key.starts(with: prefix) {
            rows[key] = changes[key] ?? nil
        }
        return rows.map { ($0.key, $0.value) }
    }

    // MARK: - Rows

    private func unavailable(_ cls: ItemClass, _ rowID: Int64) -> Candidate {
        .unreadable(itemClass: cls, rowID: rowID, error: EngineError.interactionNotAllowed("the keychain is locked"))
    }

    private func damaged(_ cls: ItemClass, _ rowID: Int64, _ reason: String) -> Candidate {
        KeystoneLog.logger.warning("damaged etcd keychain item", metadata: ["class": "\(cls.rawValue)", "row": "\(rowID)", "reason": "\(reason)"])
        return .unreadable(itemClass: cls, rowID: rowID, error: EngineError(Status.decode, "the item failed its integrity check (\(reason))"))
    }

    /// The candidate a stored (key, value) is: decrypted and checked, or unreadable.
    private func candidate(_ cls: ItemClass, key: Data, row: EtcdRow?) -> Candidate {
        guard let row, let primaryKey = keyspace.digest(in: key, of: cls) else { return damaged(cls, 0, "layout") }
        located[RowRef(itemClass: cls, rowID: row.rowID)] = primaryKey
        guard let keys else { return unavailable(cls, row.rowID) }
        keychain.decryptions.withLock { $0 += 1 }
        let aad = EtcdRow.aad(keychainID: keychainID, itemClass: cls, protection: row.sealed.protection, rowID: row.rowID,
                              primaryKey: primaryKey, digests: row.digests, format: row.format, extensions: row.extensions)
        guard let opening = keychain.openingKeys(for: row, from: keys) else { return unavailable(cls, row.rowID) }
        switch row.sealed.open(itemClass: cls, rowID: row.rowID, keys: opening, aad: aad) {
        case .item(let item): return .item(item)
        case .locked: return unavailable(cls, row.rowID)
        case .damaged(let reason): return damaged(cls, row.rowID, reason)
        }
    }

    /// `item` sealed as a format-2 row with `extensions` (and the key selection's own).
    private func sealedRow(_ item: StoredItem, rowID: Int64, primaryKey: Data, keys: KeySet, extensions: [UInt8: Data] = [:]) throws -> Data {
        let digests = RowDigest.columns(item.itemClass, item.attributes, mac: keys.indexMAC)
        let sealing = try keychain.sealingKeys(for: item, from: keys)
        let all = extensions.merging(sealing.extensions) { mine, _ in mine }
        let sealed = try SealedItem(sealing: item, keys: sealing.keys) { protection in
            EtcdRow.aad(keychainID: keychainID, itemClass: item.itemClass, protection: protection, rowID: rowID,
                        primaryKey: primaryKey, digests: digests, extensions: all)
        }
        return EtcdRow(rowID: rowID, digests: digests, extensions: all, sealed: sealed).encoded
    }

    private func set(_ key: Data, _ value: Data?) {
        if changes[key] == nil { order.append(key) }
        changes[key] = .some(value)
    }

    // MARK: - StorageReader

    func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate] {
        var all: [Candidate] = []
        try forEachCandidate(in: itemClass, matching: constraints) { all.append($0); return true }
        return all
    }

    func forEachCandidate(in itemClass: ItemClass, matching constraints: [String: AttributeValue],
                          _ body: (Candidate) throws -> Bool) throws {
        let schema = ClassSchema.of(itemClass)
        if let keys, constraints.count == schema.primaryKey.count {
            // The whole primary key: one key, read by name.
            let key = keyspace.item(itemClass, EtcdKeyspace.primaryKey(itemClass, constraints, mac: keys.indexMAC))
            pinned.insert(key)
            guard let value = try value(of: key) else { return }
            _ = try body(candidate(itemClass, key: key, row: EtcdRow(decoding: value)))
            return
        }
        // Part of the primary key: the rows under the identity's prefix when the search names it all (it leaves out
        // the access group or sync), else the whole class; filtered on the digests before anything is decrypted.
        // Locked (no index key), every row of the class may match and is returned unreadable.
        var wanted: [(index: Int, digest: Data, identity: Bool)] = []
        var stored: [(key: Data, value: Data)]
        var byIdentity = false
        if let keys {
            let identity = EtcdKeyspace.identityAttributes(itemClass)
            byIdentity = identity.allSatisfy { constraints[$0] != nil }
            for (attribute, value) in constraints {
                guard let index = schema.primaryKey.firstIndex(of: attribute) else { continue }
                wanted.append((index, RowDigest.attribute(itemClass, attribute, value, mac: keys.indexMAC), identity.contains(attribute)))
            }
            stored = byIdentity
                ? try scan(keyspace.items(itemClass, identity: EtcdKeyspace.identity(itemClass, constraints, mac: keys.indexMAC)))
                : try scan(keyspace.items(itemClass))
        } else {
            stored = try scan(keyspace.items(itemClass))
        }
        var rows: [(key: Data, row: EtcdRow?, damage: String?)] = []
        for (key, value) in stored {
            let row = EtcdRow(decoding: value)
            var damage: String?
            if let parsed = row {
                let failing = wanted.filter { !($0.index < parsed.digests.count && parsed.digests[$0.index] == $0.digest) }
                // Under the identity's prefix, the key itself says the identity attributes match: a value whose
                // digests disagree was moved or edited, and is reported damaged (opening it would fail) rather than
                // silently left out.
                if byIdentity, failing.contains(where: \.identity) {
                    damage = "index digests"
                } else if !failing.isEmpty {
                    continue
                }
            }
            rows.append((key, row, damage))
        }
        // In row-id order, as inserted; each row decrypted only when visited.
        rows.sort { lhs, rhs in
            let (a, b) = (lhs.row?.rowID ?? 0, rhs.row?.rowID ?? 0)
            return a != b ? a < b : lhs.key.lexicographicallyPrecedes(rhs.key)
        }
        for (key, row, damage) in rows {
            let found = damage.map { damaged(itemClass, row?.rowID ?? 0, $0) } ?? candidate(itemClass, key: key, row: row)
            guard try body(found) else { return }
        }
    }

    func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? {
        guard let key = try locate(itemClass, rowID) else { return nil }
        guard let value = try value(of: key) else { return nil }
        return candidate(itemClass, key: key, row: EtcdRow(decoding: value))
    }

    /// The key of row `rowID`: known from this transaction, else found by reading the class (row ids are not indexed:
    /// a persistent reference is the one lookup by row id, and it reads the class's sealed rows without decrypting them).
    private func locate(_ cls: ItemClass, _ rowID: Int64) throws -> Data? {
        if let digest = located[RowRef(itemClass: cls, rowID: rowID)] { return keyspace.item(cls, digest) }
        for (key, value) in try scan(keyspace.items(cls)) {
            if let row = EtcdRow(decoding: value), row.rowID == rowID, let digest = keyspace.digest(in: key, of: cls) {
                located[RowRef(itemClass: cls, rowID: rowID)] = digest
                return key
            }
        }
        return nil
    }

    // MARK: - StorageWriter

    private func writableKeys() throws -> KeySet {
        guard let keys else { throw EngineError.interactionNotAllowed("the keychain is locked") }
        return keys
    }

    /// A new row id: one more than the keychain's sequence, which the commit advances (compare-and-swap).
    private func allocateRowID() throws -> Int64 {
        if nextRowID == nil {
            let key = keyspace.sequence
            pinned.insert(key)
            guard let stored = try value(of: key) else {
                throw EngineError(Status.noSuchKeychain, "the keychain \(keychain.configuration.name) was deleted on \(keychain.configuration.endpointList)")
            }
            guard let last = stored.bigEndianInt64, last >= 0 else {
                throw EngineError(Status.invalidKeychain, "the etcd keychain's row-id sequence is damaged")
            }
            nextRowID = last + 1
        }
        guard let id = nextRowID, id < Int64.max else { throw EngineError(Status.diskFull, "the keychain has used every row id") }
        nextRowID = id + 1
        set(keyspace.sequence, Data(bigEndian: id))
        return id
    }

    func insert(_ item: StoredItem) throws -> Int64 {
        let keys = try writableKeys()
        let cls = item.itemClass
        let digest = EtcdKeyspace.primaryKey(cls, item.attributes, mac: keys.indexMAC)
        let key = keyspace.item(cls, digest)
        pinned.insert(key)
        if try value(of: key) != nil { throw EngineError.duplicateItem("an item with the same primary key exists") }
        let rowID = try allocateRowID()
        set(key, try sealedRow(item, rowID: rowID, primaryKey: digest, keys: keys))
        located[RowRef(itemClass: cls, rowID: rowID)] = digest
        return rowID
    }

    func replace(_ item: StoredItem) throws {
        let keys = try writableKeys()
        let cls = item.itemClass
        guard let oldKey = try locate(cls, item.rowID), try value(of: oldKey) != nil else { throw EngineError.itemNotFound }
        let digest = EtcdKeyspace.primaryKey(cls, item.attributes, mac: keys.indexMAC)
        let key = keyspace.item(cls, digest)
        if key != oldKey {
            pinned.insert(key)
            if try value(of: key) != nil { throw EngineError.duplicateItem("an item with the same primary key exists") }
            set(oldKey, nil)
        }
        set(key, try sealedRow(item, rowID: item.rowID, primaryKey: digest, keys: keys))
        located[RowRef(itemClass: cls, rowID: item.rowID)] = digest
    }

    func delete(in itemClass: ItemClass, rowID: Int64) throws {
        guard let key = try locate(itemClass, rowID), try value(of: key) != nil else { return }
        set(key, nil)
    }

    // MARK: - Commit

    /// Commits the changes in one etcd transaction.
    ///
    /// - Throws: `errSecNotAvailable` when the cluster does not answer (and, when the answer to a sent commit was
    ///   lost and could not be checked, says the change may have been applied); `errSecQuotaExceeded` beyond etcd's
    ///   request limits.
    func commit() throws -> Outcome {
        // Nothing to write: done, unless what the body concluded rested on a guess no commit will check.
        guard hasChanges else { return guessed ? .conflict(nil) : .committed(revision: revision ?? 0) }
        let watched = order + pinned.subtracting(order).sorted(by: { $0.lexicographicallyPrecedes($1) })
        var compares: [EtcdCompare] = [.modRevision(keyspace.meta, equals: headerRevision)]
        for key in watched {
            compares.append(.modRevision(key, equals: seen[key]?.modRevision ?? 0))
        }
        let operations: [EtcdOperation] = order.map { key in
            if let value = changes[key] ?? nil { return .put(key, value) }
            return .delete(key)
        }
        let result: EtcdTxnResult
        do {
            // When a compare fails, the failure branch reads the header and every watched key, at one revision: the
            // next attempt starts from there without reading them again.
            result = try client.txn(compare: compares, success: operations, failure: ([keyspace.meta] + watched).map { .range($0) })
        } catch EtcdError.indeterminate(let reason) {
            return try resolveIndeterminate(operations, reason: reason)
        } catch let error as EtcdError {
            throw error.engineError
        }
        if result.succeeded { return .committed(revision: result.revision) }
        guard case .range(let meta)? = result.responses.first, meta.kvs.first?.modRevision == headerRevision else { return .headerChanged }
        var values: [Data: (value: Data?, modRevision: Int64)] = [:]
        for (key, response) in zip(watched, result.responses.dropFirst()) {
            guard case .range(let found) = response else { return .conflict(nil) }
            values[key] = found.kvs.first.map { ($0.value, $0.modRevision) } ?? (nil, 0)
        }
        return .conflict(values.count == watched.count ? Snapshot(revision: result.revision, values: values) : nil)
    }

    /// A commit was sent and its answer lost: reads back whether it was applied. Every put of an item carries a
    /// value no one else can have written (a fresh random item key and nonces), so finding it proves the commit;
    /// a commit that only deleted counts as applied when every key it deleted is gone.
    private func resolveIndeterminate(_ operations: [EtcdOperation], reason: String) throws -> Outcome {
        do {
            let itemPut = operations.first { if case .put(let key, _) = $0 { return key != keyspace.sequence }; return false }
            if case .put(let key, let value)? = itemPut {
                let found = try client.range(key).kvs.first
                return found?.value == value ? .committed(revision: found?.modRevision ?? 0) : .conflict(nil)
            }
            var revision: Int64 = 0
            for case .delete(let key) in operations {
                let found = try client.range(key)
                if !found.kvs.isEmpty { return .conflict(nil) }
                revision = found.revision
            }
            return .committed(revision: revision)
        } catch let error as EtcdError {
            KeystoneLog.logger.error("an etcd commit's outcome is unknown", metadata: ["keychain": "\(keychain.configuration.name)"])
            throw EngineError(Status.notAvailable, "the change was sent to etcd at \(keychain.configuration.endpointList) but its answer was lost (\(reason)), and the cluster could not be asked whether it was applied (\(error.engineError.reason)): it may or may not have been applied. Check with a search once the cluster answers")
        }
    }
}
#endif
