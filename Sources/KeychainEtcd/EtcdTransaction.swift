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
    /// A row taken from ``EtcdPrefixCache`` is older than this machine has seen (another process of the machine
    /// wrote since): a wrong guess, not a rollback; the body runs again on values read.
    struct StaleGuess: Error {}

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
        /// The tombstone index entry the failed attempt meant to purge from (the next attempt resolves it).
        var tombstones: [EtcdKeyValue] = []
    }

    /// How a transaction starts.
    enum Start {
        /// Reads everything it needs.
        case fresh
        /// A first attempt that assumes, without reading, that an item it looks up by primary key does not exist
        /// and that the row-id sequence is where this process last left it (when it knows). Every assumption is
        /// compared at commit like a read, so a wrong one only costs another attempt; an add then takes one round
        /// trip instead of two. The HEAD record is guessed the same way.
        case guessing(sequence: (value: Int64, modRevision: Int64)?, head: (value: Data, modRevision: Int64)?)
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
    private let headGuess: (value: Data, modRevision: Int64)?
    /// The HEAD record read (or guessed) and verified, once a write needed it.
    private var head: EtcdHead?
    /// Keys written without a compare (history rows, the tombstone index, purges): the item's key and HEAD, which
    /// are compared, order every change to them.
    private var blind: Set<Data> = []
    /// Operations set() cannot express (deleting a history prefix).
    private var extraOperations: [EtcdOperation] = []
    /// What the transaction changes, for the audit log.
    private var events: [EtcdAuditEvent] = []
    /// In a read transaction, the items it opened (an audited read's entry: ``EtcdKeychain/read(_:)``).
    private(set) var readEvents: [EtcdAuditEvent] = []
    /// The item rows written (class, digest, version) and the items erased, for this machine's rollback marks.
    private var written: [(ItemClass, Data, UInt64)] = []
    private var erased: [(ItemClass, Data)] = []
    /// The oldest entry of the tombstone index, read with a write transaction's first read.
    private var oldestTombstones: [EtcdKeyValue] = []
    /// The items this transaction turns into tombstones, and when.
    private var tombstoned: [(ItemClass, Data)] = []
    private lazy var deletionTime = UInt64(max(0, keychain.clock().timeIntervalSince1970))
    /// Marks of newer rows read, raised together when the transaction ends (``flushMarks()``).
    private var seenMarks: [(Data, EtcdHighWater.Mark)] = []
    /// Keys whose value is a guess, not read.
    private var guessedKeys: Set<Data> = []
    /// Identity prefixes whose rows were taken from ``EtcdPrefixCache`` (a guess), with the revision no key there may
    /// have been created after: compared at commit.
    private var prefixGuards: [(prefix: Data, revision: Int64)] = []
    /// The keys whose rows came from ``EtcdPrefixCache``.
    private var cachedKeys: Set<Data> = []
    /// Whether this transaction purges tombstones past the retention (the index's next entry is then unknown).
    private var purging = false
    /// The keychain's history policy when this transaction started.
    let policy: EtcdHistoryPolicy
    /// This machine's rollback marks, and their state before this transaction's first read (what reads are checked against).
    let highWater: EtcdHighWater
    let marks: EtcdHighWater.Snapshot
    /// Whether the body was given a guess rather than a value read.
    private(set) var guessed = false
    /// Whether the last commit lost only on the HEAD record (every other key it compared was unchanged).
    private(set) var headOnlyConflict = false

    init(keychain: EtcdKeychain, keys: KeySet?, keychainID: Data, headerRevision: Int64, writing: Bool, start: Start = .fresh,
         marks: EtcdHighWater.Snapshot? = nil) {
        self.keychain = keychain
        self.keys = keys
        self.keychainID = keychainID
        self.headerRevision = headerRevision
        self.writing = writing
        policy = keychain.historyPolicy
        highWater = keychain.highWater(keychainID)
        self.marks = marks ?? highWater.snapshot()
        switch start {
        case .fresh:
            guessing = false
            sequenceGuess = nil
            headGuess = nil
        case .guessing(let sequence, let head):
            guessing = true
            sequenceGuess = sequence
            headGuess = head
        case .snapshot(let snapshot):
            guessing = false
            sequenceGuess = nil
            headGuess = nil
            revision = snapshot.revision
            seen = snapshot.values
            oldestTombstones = snapshot.tombstones
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
            if key == keyspace.sequence || key == keyspace.head || key.starts(with: keyspace.allItems) { pinned.insert(key) }
            if key == keyspace.head, let guess = headGuess {
                seen[key] = (guess.value, guess.modRevision)
                guessed = true
                guessedKeys.insert(key)
                return guess.value
            }
            if key == keyspace.sequence, let guess = sequenceGuess {
                seen[key] = (Data(bigEndian: guess.value), guess.modRevision)
                guessed = true
                return seen[key]?.value ?? nil
            }
            if key.starts(with: keyspace.allItems) {
                // An item by its whole primary key: the row this process last read under its identity, else absent.
                let row = guessesAllowed ? keychain.prefixCache.withLock { $0.entry(Self.identityPrefix(of: key))?.rows[key] } : nil
                seen[key] = row.map { ($0.value, $0.modRevision) } ?? (nil, 0)
                if row != nil { cachedKeys.insert(key) }
                guessed = true
                return row?.value
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
        // A write's first read also reads the row-id sequence, the HEAD record and the oldest entries of the
        // tombstone index (for the purge past retention), in the same request.
        var extra = [keyspace.meta, keyspace.head]
        if operation != .range(keyspace.sequence) { extra.append(keyspace.sequence) }
        let result = try client.txn(compare: [], success: [operation] + extra.map { .range($0) } + [.rangePrefix(keyspace.tombstones, limit: 1)])
        let answers = result.responses.compactMap { if case .range(let found) = $0 { found } else { nil } }
        guard answers.count == 2 + extra.count, answers[1].kvs.first?.modRevision == headerRevision else { throw HeaderChanged() }
        revision = result.revision
        for (key, answer) in zip(extra.dropFirst(), answers.dropFirst(2)) {
            if let kv = answer.kvs.first { record(kv) } else if seen[key] == nil { seen[key] = (nil, 0) }
        }
        oldestTombstones = answers.last?.kvs ?? []
        let oldest = oldestTombstones.first.flatMap { Self.deletionStamp(of: $0, keyspace: keyspace) }
        keychain.purgeWatch.withLock { $0 = EtcdPurgeWatch(readAt: keychain.clock().timeIntervalSince1970, oldestDeletion: oldest) }
        for kv in oldestTombstones { record(kv) }
        return answers[0]
    }

    /// Every row whose key starts with `prefix` at the snapshot, then this transaction's own changes: (key, value) pairs.
    ///
    /// `cacheable` (an identity's prefix): a complete read is kept in ``EtcdPrefixCache``, and a write's first attempt
    /// takes the rows kept there instead of reading, every one of them and the prefix's creations compared at commit.
    private func scan(_ prefix: Data, cacheable: Bool = false) throws -> [(key: Data, value: Data)] {
        var rows: [Data: Data] = [:]
        if cacheable, guessing, revision == nil, guessesAllowed, let entry = keychain.prefixCache.withLock({ $0.entry(prefix) }) {
            for (key, row) in entry.rows {
                if seen[key] == nil {
                    seen[key] = (row.value, row.modRevision)
                    cachedKeys.insert(key)
                }
                // Compared at commit even when unchanged: a row left out (a tombstone, another group's digest) may
                // have become a match since.
                pinned.insert(key)
                if let value = seen[key]?.value { rows[key] = value }
            }
            prefixGuards.append((prefix, entry.revision))
            guessed = true
            for key in order where key.starts(with: prefix) { rows[key] = changes[key] ?? nil }
            return rows.map { ($0.key, $0.value) }
        }
        var read: [Data: EtcdPrefixCache.Row] = [:]
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
                    if cacheable { read[kv.key] = EtcdPrefixCache.Row(value: kv.value, modRevision: kv.modRevision) }
                }
                after = page.more ? page.kvs.last?.key : nil
            } while after != nil
        }
        if cacheable, let revision { keychain.prefixCache.withLock { $0.store(prefix, revision: revision, rows: read) } }
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
    ///
    /// - Throws: `errSecVerifyFailed` when the row is authentic but older than a row of that item this machine has
    ///   seen (a rollback: never returned).
    private func candidate(_ cls: ItemClass, key: Data, row: EtcdRow?) throws -> Candidate {
        guard let row, let primaryKey = keyspace.digest(in: key, of: cls) else { return damaged(cls, 0, "layout") }
        if !row.isTombstone { located[RowRef(itemClass: cls, rowID: row.rowID)] = primaryKey }
        let opened = open(cls, primaryKey: primaryKey, row: row)
        // Only rows read from etcd are checked (and raise the marks): not this transaction's own, uncommitted changes.
        if case .item = opened, changes[key] == nil {
            if cachedKeys.contains(key), (row.counter ?? 0) < marks.mark(cls, primaryKey)?.counter ?? 0 { throw StaleGuess() }
            var pending: [(Data, EtcdHighWater.Mark)]? = []
            try highWater.check(cls, primaryKey, counter: row.counter ?? 0, version: row.version ?? 0, against: marks,
                                keychain: keychain.configuration.name, pending: &pending)
            if let pending, !pending.isEmpty { seenMarks += pending }
            if !writing { readEvents.append(EtcdAuditEvent(kind: .read, itemClass: cls, digest: primaryKey, version: row.version ?? 0)) }
        }
        return opened
    }

    /// A row opened and authenticated (no rollback check: history rows are old by design).
    private func open(_ cls: ItemClass, primaryKey: Data, row: EtcdRow) -> Candidate {
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
            let row = EtcdRow(decoding: value)
            if let row, try hidden(itemClass, key: key, row: row, authenticate: true) { return }
            _ = try body(candidate(itemClass, key: key, row: row))
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
                ? try scan(keyspace.items(itemClass, identity: EtcdKeyspace.identity(itemClass, constraints, mac: keys.indexMAC)), cacheable: true)
                : try scan(keyspace.items(itemClass))
        } else {
            stored = try scan(keyspace.items(itemClass))
        }
        var rows: [(key: Data, row: EtcdRow?, damage: String?)] = []
        for (key, value) in stored {
            let row = EtcdRow(decoding: value)
            var damage: String?
            if let parsed = row {
                if let keys, keychain.isInvisible(parsed, to: keys) { continue }  // another access group's item (E3)
                if parsed.isTombstone {
                    // A deleted item: not part of any search; one older than this machine has seen is a rollback.
                    if try hidden(itemClass, key: key, row: parsed, authenticate: false) { continue }
                    damage = "tombstone"
                }
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
            let found = try damage.map { damaged(itemClass, row?.rowID ?? 0, $0) } ?? candidate(itemClass, key: key, row: row)
            guard try body(found) else { return }
        }
    }

    func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? {
        guard let key = try locate(itemClass, rowID) else { return nil }
        guard let value = try value(of: key) else { return nil }
        let row = EtcdRow(decoding: value)
        if let row, row.isTombstone { return nil }
        return try candidate(itemClass, key: key, row: row)
    }

    /// Whether a row stays out of SecItem's sight: a tombstone (a deleted item), or another group's item.
    ///
    /// A tombstone whose (claimed) counter is older than this machine's mark of the item is opened: authentic, it is
    /// a rollback (`errSecVerifyFailed`); not authentic, it is reported damaged (false). With `authenticate` (a read
    /// by the whole primary key), a tombstone newer than the mark is also opened, once, to raise the mark: a
    /// re-planted row of the item from before the delete is then refused here.
    private func hidden(_ cls: ItemClass, key: Data, row: EtcdRow, authenticate: Bool) throws -> Bool {
        if let keys, keychain.isInvisible(row, to: keys) { return true }
        guard row.isTombstone, let digest = keyspace.digest(in: key, of: cls) else { return false }
        let mark = marks.mark(cls, digest)?.counter ?? 0
        let claimed = row.counter ?? 0
        if claimed < mark || (authenticate && claimed > mark) {
            if case .unreadable(_, _, let error) = try candidate(cls, key: key, row: row), error.status == Status.decode { return false }
        }
        return true
    }

    /// The key of row `rowID`: known from this transaction, else found by reading the class (row ids are not indexed:
    /// a persistent reference is the one lookup by row id, and it reads the class's sealed rows without decrypting them).
    private func locate(_ cls: ItemClass, _ rowID: Int64) throws -> Data? {
        if let digest = located[RowRef(itemClass: cls, rowID: rowID)] { return keyspace.item(cls, digest) }
        for (key, value) in try scan(keyspace.items(cls)) {
            if let row = EtcdRow(decoding: value), row.rowID == rowID, !row.isTombstone, let digest = keyspace.digest(in: key, of: cls) {
                located[RowRef(itemClass: cls, rowID: rowID)] = digest
                return key
            }
        }
        return nil
    }

    // MARK: - Writing

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

    // MARK: - Versions (issue 30)

    /// The HEAD record, read (or guessed) and verified once.
    ///
    /// - Throws: `errSecVerifyFailed` when it fails its MAC or is older than this machine has seen.
    private func currentHead() throws -> EtcdHead {
        if let head { return head }
        let keys = try writableKeys()
        pinned.insert(keyspace.head)
        let parsed = try EtcdHead.decode(try value(of: keyspace.head), keychainID: keychainID, key: keychain.headKey(keys))
        // A guess is this process's own last HEAD: checked by the commit's compare, not against the marks.
        if !guessedKeys.contains(keyspace.head) {
            try highWater.checkHead(parsed.counter, against: marks, keychain: keychain.configuration.name)
        }
        head = parsed
        return parsed
    }

    /// The HEAD counter this transaction commits at (every row it writes carries it).
    private func nextCounter() throws -> UInt64 { try currentHead().counter + 1 }

    private func extensions(version: UInt64, counter: UInt64, deletedAt: UInt64? = nil) -> [UInt8: Data] {
        var out = [EtcdRow.Tag.version: Data(bigEndianUnsigned: version), EtcdRow.Tag.counter: Data(bigEndianUnsigned: counter)]
        if let deletedAt { out[EtcdRow.Tag.deletedAt] = Data(bigEndianUnsigned: deletedAt) }
        return out
    }

    /// A change of no decision's concern: written without a compare.
    private func setBlind(_ key: Data, _ value: Data?) {
        blind.insert(key)
        set(key, value)
    }

    /// Keeps the row an item had (version `old`) as history, and lets go of the version that falls out of the last N.
    private func keepHistory(_ cls: ItemClass, _ digest: Data, old: UInt64, value: Data, new: UInt64) {
        let kept = UInt64(policy.maxVersions)
        if kept >= 2 { setBlind(keyspace.history(cls, digest, version: old), value) }
        if new >= kept { setBlind(keyspace.history(cls, digest, version: new - kept), nil) }
    }

    /// The item an existing row at `key` is, when an add may take its place: a tombstone (authentic and not rolled
    /// back). Returns the tombstone's version; throws `errSecDuplicateItem` for any other row.
    private func replaceableTombstone(_ cls: ItemClass, key: Data, digest: Data, value: Data) throws -> UInt64 {
        guard let row = EtcdRow(decoding: value), row.isTombstone, case .item = try candidate(cls, key: key, row: row) else {
            throw EngineError.duplicateItem("an item with the same primary key exists")
        }
        return row.version ?? 0
    }

    /// Turns the live row at `key` into a tombstone: the item sealed again with its version, a new counter and its
    /// deletion date, undeletable until the retention ends.
    private func entomb(_ cls: ItemClass, key: Data, digest: Data, value: Data, row: EtcdRow) throws {
        let keys = try writableKeys()
        guard case .item(let item) = try candidate(cls, key: key, row: row) else {
            throw EngineError.interactionNotAllowed("the item cannot be read here, so it cannot be kept for undelete; nothing was deleted")
        }
        // Decision: the tombstone keeps the version it deletes (its contents are that version's, marked deleted), so a
        // delete costs one put and no history row; the undelete or an add after it is the next version.
        let version = row.version ?? 0
        let counter = try nextCounter()
        set(key, try sealedRow(item, rowID: row.rowID, primaryKey: digest, keys: keys,
                               extensions: extensions(version: version, counter: counter, deletedAt: deletionTime)))
        tombstoned.append((cls, digest))
        written.append((cls, digest, version))
        events.append(EtcdAuditEvent(kind: .delete, itemClass: cls, digest: digest, version: version))
    }

    /// The version an update must state, checked against the row it replaces.
    ///
    /// - Throws: `errSecInvalidItemRef` when the stated version is not the current one (another writer changed the
    ///   item since it was read); `errSecDataNotModifiable` when the keychain requires check-and-set and none was stated.
    private func checkAndSet(_ cls: ItemClass, _ digest: Data, current: UInt64) throws {
        if let expectation = EtcdCheckAndSet.current {
            guard expectation.version == current else {
                expectation.record(current: current)
                throw EngineError(Status.invalidItemRef, "check-and-set: the item (\(EtcdHighWater.prefix(digest))…) is at version \(current), not version \(expectation.version) as stated: another writer changed it since it was read; nothing was changed. Read it again and retry with its current version")
            }
        } else if policy.requireCheckAndSet {
            throw EngineError(Status.dataNotModifiable, "this etcd keychain requires check-and-set for every update: state the version you read (keystone add-generic-password -U --if-version N, EtcdKeychain.withCheckAndSet(expectedVersion:)); nothing was changed")
        }
    }

    // MARK: - StorageWriter

    func insert(_ item: StoredItem) throws -> Int64 {
        let keys = try writableKeys()
        let cls = item.itemClass
        let digest = EtcdKeyspace.primaryKey(cls, item.attributes, mac: keys.indexMAC)
        let key = keyspace.item(cls, digest)
        pinned.insert(key)
        var version: UInt64 = 1
        // Decision (Apple's semantics): a deleted item is not there, so an add of its primary key succeeds; its
        // tombstone goes, and the versions continue from it.
        if let existing = try value(of: key) {
            let old = try replaceableTombstone(cls, key: key, digest: digest, value: existing)
            version = old + 1
            keepHistory(cls, digest, old: old, value: existing, new: version)
        }
        let counter = try nextCounter()
        let rowID = try allocateRowID()
        set(key, try sealedRow(item, rowID: rowID, primaryKey: digest, keys: keys, extensions: extensions(version: version, counter: counter)))
        located[RowRef(itemClass: cls, rowID: rowID)] = digest
        written.append((cls, digest, version))
        events.append(EtcdAuditEvent(kind: .add, itemClass: cls, digest: digest, version: version))
        return rowID
    }

    func replace(_ item: StoredItem) throws {
        let keys = try writableKeys()
        let cls = item.itemClass
        guard let oldKey = try locate(cls, item.rowID), let oldValue = try value(of: oldKey),
              let oldRow = EtcdRow(decoding: oldValue), !oldRow.isTombstone,
              let oldDigest = keyspace.digest(in: oldKey, of: cls) else { throw EngineError.itemNotFound }
        let old = oldRow.version ?? 0
        try checkAndSet(cls, oldDigest, current: old)
        let counter = try nextCounter()
        let digest = EtcdKeyspace.primaryKey(cls, item.attributes, mac: keys.indexMAC)
        let key = keyspace.item(cls, digest)
        var version = old + 1
        if key != oldKey {
            // A new primary key: the item under the old one is deleted (a tombstone there, undeletable), and the
            // new key's versions continue from a tombstone it may hold.
            pinned.insert(key)
            version = 1
            if let existing = try value(of: key) {
                let old = try replaceableTombstone(cls, key: key, digest: digest, value: existing)
                version = old + 1
                keepHistory(cls, digest, old: old, value: existing, new: version)
            }
            try entomb(cls, key: oldKey, digest: oldDigest, value: oldValue, row: oldRow)
        } else {
            keepHistory(cls, digest, old: old, value: oldValue, new: version)
        }
        set(key, try sealedRow(item, rowID: item.rowID, primaryKey: digest, keys: keys, extensions: extensions(version: version, counter: counter)))
        located[RowRef(itemClass: cls, rowID: item.rowID)] = digest
        written.append((cls, digest, version))
        events.append(EtcdAuditEvent(kind: .update, itemClass: cls, digest: digest, version: version))
    }

    /// Deletes as `SecItemDelete` does: the item leaves every search at once, but stays as a tombstone, undeletable
    /// (``undelete(_:digest:)``) until the keychain's retention ends.
    func delete(in itemClass: ItemClass, rowID: Int64) throws {
        guard let key = try locate(itemClass, rowID), let value = try value(of: key),
              let row = EtcdRow(decoding: value), !row.isTombstone, let digest = keyspace.digest(in: key, of: itemClass) else { return }
        try entomb(itemClass, key: key, digest: digest, value: value, row: row)
    }

    // MARK: - History (issue 30)

    /// One item found by its attributes: its key's digest, the row there (live or a tombstone) and its value.
    struct Located {
        let itemClass: ItemClass
        let digest: Data
        let key: Data
        let value: Data
        let row: EtcdRow
    }

    /// The one item (live or deleted) of `cls` whose primary key has `attributes`: the whole primary key, or all of
    /// it but the access group or sync (then exactly one item may match). Absent identity attributes count as their
    /// empty value, as in an add.
    ///
    /// - Throws: `errSecItemNotFound`; `errSecParam` when the attributes do not name the item's identity or name
    ///   several items (give the access group); `errSecInteractionNotAllowed` when locked.
    func locateItem(_ cls: ItemClass, _ attributes: [String: AttributeValue]) throws -> Located {
        let keys = try writableKeys()
        var found: [(Data, Data)] = []
        if ClassSchema.of(cls).primaryKey.allSatisfy({ attributes[$0] != nil }) {
            let key = keyspace.item(cls, EtcdKeyspace.primaryKey(cls, attributes, mac: keys.indexMAC))
            pinned.insert(key)
            if let value = try value(of: key) { found.append((key, value)) }
        } else {
            let wanted = ClassSchema.of(cls).primaryKey.enumerated().compactMap { index, name in
                attributes[name].map { (index, RowDigest.attribute(cls, name, $0, mac: keys.indexMAC)) }
            }
            for (key, value) in try scan(keyspace.items(cls, identity: EtcdKeyspace.identity(cls, attributes, mac: keys.indexMAC))) {
                guard let row = EtcdRow(decoding: value) else { continue }
                if wanted.allSatisfy({ $0.0 < row.digests.count && row.digests[$0.0] == $0.1 }) { found.append((key, value)) }
            }
        }
        guard let (key, value) = found.first else { throw EngineError.itemNotFound }
        guard found.count == 1 else { throw EngineError.param("\(found.count) items match (in different access groups): name the access group") }
        guard let row = EtcdRow(decoding: value), let digest = keyspace.digest(in: key, of: cls) else {
            throw EngineError(Status.decode, "the item failed its integrity check (layout)")
        }
        pinned.insert(key)
        return Located(itemClass: cls, digest: digest, key: key, value: value, row: row)
    }

    /// The versions kept of an item: its history rows and its current row (or tombstone), each opened (authenticated).
    func versions(of item: Located) throws -> [(version: UInt64, row: EtcdRow, item: StoredItem?)] {
        var out: [(version: UInt64, row: EtcdRow, item: StoredItem?)] = []
        for (key, value) in try scan(keyspace.history(item.itemClass, item.digest)) {
            guard let version = keyspace.version(inHistoryKey: key), let row = EtcdRow(decoding: value) else { continue }
            out.append((version, row, try historyItem(item, version: version, row: row)))
        }
        guard case .item(let current) = try candidate(item.itemClass, key: item.key, row: item.row) else {
            throw EngineError(Status.decode, "the item's current row failed its integrity check")
        }
        out.append((item.row.version ?? 0, item.row, current))
        return out.sorted { $0.version < $1.version }
    }

    /// A history row opened: it must carry the version its key names (a row moved between versions is refused).
    private func historyItem(_ item: Located, version: UInt64, row: EtcdRow) throws -> StoredItem {
        guard (row.version ?? 0) == version else {
            throw EngineError(errSecVerifyFailedStatus, "version \(version) of item \(EtcdHighWater.prefix(item.digest))… holds the row of version \(row.version ?? 0) (moved in etcd); it is not returned")
        }
        switch open(item.itemClass, primaryKey: item.digest, row: row) {
        case .item(let opened): return opened
        case .unreadable(_, _, let error): throw error
        }
    }

    /// Version `version` of an item (the current row when it is that version).
    func item(_ item: Located, version: UInt64) throws -> (row: EtcdRow, item: StoredItem) {
        if (item.row.version ?? 0) == version {
            switch try candidate(item.itemClass, key: item.key, row: item.row) {
            case .item(let opened): return (item.row, opened)
            case .unreadable(_, _, let error): throw error
            }
        }
        guard let value = try value(of: keyspace.history(item.itemClass, item.digest, version: version)), let row = EtcdRow(decoding: value) else {
            throw EngineError(Status.itemNotFound, "the item has no version \(version) (kept: the last \(policy.maxVersions))")
        }
        return (row, try historyItem(item, version: version, row: row))
    }

    /// Brings a deleted item back as a new version, under its row id.
    ///
    /// - Returns: the new version.
    /// - Throws: `errSecDuplicateItem` when the item is not deleted.
    func undelete(_ item: Located) throws -> UInt64 {
        let keys = try writableKeys()
        guard item.row.isTombstone else { throw EngineError.duplicateItem("the item is not deleted") }
        guard case .item(let stored) = try candidate(item.itemClass, key: item.key, row: item.row) else {
            throw EngineError(Status.decode, "the deleted item failed its integrity check; it cannot be undeleted")
        }
        let old = item.row.version ?? 0
        let version = old + 1
        let counter = try nextCounter()
        keepHistory(item.itemClass, item.digest, old: old, value: item.value, new: version)
        set(item.key, try sealedRow(stored, rowID: item.row.rowID, primaryKey: item.digest, keys: keys,
                                    extensions: extensions(version: version, counter: counter)))
        written.append((item.itemClass, item.digest, version))
        events.append(EtcdAuditEvent(kind: .undelete, itemClass: item.itemClass, digest: item.digest, version: version))
        return version
    }

    /// Erases an item, live or deleted, and every version kept of it.
    func destroy(_ item: Located) throws {
        _ = try nextCounter()
        set(item.key, nil)
        extraOperations.append(.deletePrefix(keyspace.history(item.itemClass, item.digest)))
        erased.append((item.itemClass, item.digest))
        events.append(EtcdAuditEvent(kind: .destroy, itemClass: item.itemClass, digest: item.digest, version: 0))
    }

    /// Items purged per transaction at most.
    static let purgeLimit = 8

    /// Purges at most ``purgeLimit`` items of the oldest tombstone index entry when it is past the keychain's
    /// retention: each item key (compared: still the tombstone that entry wrote, same mod revision) and its history;
    /// the entry is rewritten with what is left, or deleted. Bounded work riding on a write that happens anyway.
    /// An item added or undeleted since is left alone (its compare fails once; the next attempt, knowing its value,
    /// drops it from the entry).
    private func purgeExpired() {
        guard let entry = oldestTombstones.first, entry.key.starts(with: keyspace.tombstones), changes[entry.key] == nil,
              let stamp = entry.key.dropFirst(keyspace.tombstones.count).prefix(16).asciiHex,
              TimeInterval(stamp) + policy.tombstoneRetention <= keychain.clock().timeIntervalSince1970 else { return }
        purging = true
        var listed: [(ItemClass, Data)] = []
        var at = entry.value.startIndex
        while entry.value.endIndex - at >= 68 {
            if let tag = String(data: entry.value[at..<(at + 4)], encoding: .ascii), let cls = ItemClass(rawValue: tag) {
                listed.append((cls, Data(entry.value[(at + 4)..<(at + 68)])))
            }
            at += 68
        }
        var left: [(ItemClass, Data)] = []
        for (index, (cls, digest)) in listed.enumerated() {
            let key = keyspace.item(cls, digest)
            if index >= Self.purgeLimit { left.append((cls, digest)); continue }
            if changes[key] != nil { continue }
            if let known = seen[key], known.modRevision != entry.modRevision {
                // Changed since the entry: still a tombstone of that deletion (sealed again by a key rotation) is
                // purged at its own revision; anything else (added, undeleted, destroyed) is not this entry's.
                guard let value = known.value, let row = EtcdRow(decoding: value), row.isTombstone,
                      row.extensions[EtcdRow.Tag.deletedAt]?.bigEndianUInt64 == stamp else { continue }
            }
            if seen[key] == nil { seen[key] = (nil, entry.modRevision) }  // compared at the entry's revision
            pinned.insert(key)
            set(key, nil)
            extraOperations.append(.deletePrefix(keyspace.history(cls, digest)))
            erased.append((cls, digest))
            events.append(EtcdAuditEvent(kind: .purge, itemClass: cls, digest: digest, version: 0))
        }
        set(entry.key, left.isEmpty ? nil : Self.tombstoneList(left))
    }

    /// The deletion time (seconds since 1970) a tombstone index entry's key names.
    static func deletionStamp(of entry: EtcdKeyValue, keyspace: EtcdKeyspace) -> TimeInterval? {
        guard entry.key.starts(with: keyspace.tombstones) else { return nil }
        return entry.key.dropFirst(keyspace.tombstones.count).prefix(16).asciiHex.map { TimeInterval($0) }
    }

    static func tombstoneList(_ items: [(ItemClass, Data)]) -> Data {
        var out = Data()
        for (cls, digest) in items { out.append(Data(cls.rawValue.utf8)); out.append(digest) }
        return out
    }

    // MARK: - Commit

    /// Commits the changes in one etcd transaction, with the HEAD record's new counter and the audit entry.
    ///
    /// - Throws: `errSecNotAvailable` when the cluster does not answer (and, when the answer to a sent commit was
    ///   lost and could not be checked, says the change may have been applied); `errSecQuotaExceeded` beyond etcd's
    ///   request limits; `errSecVerifyFailed` when the HEAD record is older than this machine has seen or forged.
    func commit() throws -> Outcome {
        // Nothing to write: done, unless what the body concluded rested on a guess no commit will check.
        guard hasChanges else { return guessed ? .conflict(nil) : .committed(revision: revision ?? 0) }
        let keys = try writableKeys()
        let current = try currentHead()
        let counter = current.counter + 1
        purgeExpired()
        if !tombstoned.isEmpty {
            setBlind(keyspace.tombstone(deletedAt: deletionTime, counter: counter), Self.tombstoneList(tombstoned))
        }
        var operations: [EtcdOperation] = order.map { key in
            if let value = changes[key] ?? nil { return .put(key, value) }
            return .delete(key)
        }
        operations += extraOperations
        let chain = try EtcdAudit.append(to: &operations, keychain: keychain, counter: counter, previousHash: current.chainHash,
                                         events: events, key: keychain.auditKey(keys))
        let headValue = EtcdHead(counter: counter, chainHash: chain).encoded(keychainID: keychainID, key: keychain.headKey(keys))
        operations.append(.put(keyspace.head, headValue))
        pinned.insert(keyspace.head)
        let watched = order.filter { !blind.contains($0) }
            + pinned.subtracting(order).sorted(by: { $0.lexicographicallyPrecedes($1) })
        var compares: [EtcdCompare] = [.modRevision(keyspace.meta, equals: headerRevision)]
        for key in watched {
            compares.append(.modRevision(key, equals: seen[key]?.modRevision ?? 0))
        }
        for prefixGuard in prefixGuards { compares.append(.noKeyCreated(prefix: prefixGuard.prefix, after: prefixGuard.revision)) }
        let result: EtcdTxnResult
        do {
            // When a compare fails, the failure branch reads the header and every watched key, at one revision: the
            // next attempt starts from there without reading them again.
            result = try client.txn(compare: compares, success: operations, failure: ([keyspace.meta] + watched).map { .range($0) })
        } catch EtcdError.indeterminate(let reason) {
            let outcome = try resolveIndeterminate(operations, fencing: seen[keyspace.head] ?? (nil, 0),
                                                   emptyHead: EtcdHead.empty.encoded(keychainID: keychainID, key: keychain.headKey(keys)),
                                                   reason: reason)
            if case .committed(let revision) = outcome {
                committed(counter: counter, head: nil)
                cacheChanges(at: revision)
            }
            return outcome
        } catch let error as EtcdError {
            throw error.engineError
        }
        if result.succeeded {
            committed(counter: counter, head: (headValue, result.revision))
            cacheChanges(at: result.revision)
            return .committed(revision: result.revision)
        }
        guard case .range(let meta)? = result.responses.first, meta.kvs.first?.modRevision == headerRevision else { return .headerChanged }
        var values: [Data: (value: Data?, modRevision: Int64)] = [:]
        for (key, response) in zip(watched, result.responses.dropFirst()) {
            guard case .range(let found) = response else { return .conflict(nil) }
            values[key] = found.kvs.first.map { ($0.value, $0.modRevision) } ?? (nil, 0)
        }
        headOnlyConflict = !guessed && values.count == watched.count
            && values.allSatisfy { key, found in key == keyspace.head || found.modRevision == (seen[key]?.modRevision ?? 0) }
        return .conflict(values.count == watched.count ? Snapshot(revision: result.revision, values: values, tombstones: oldestTombstones) : nil)
    }

    /// Whether this attempt may take rows from ``EtcdPrefixCache``: while no tombstone can be past the retention
    /// (``EtcdPurgeWatch``), so that the writes that read the tombstone index keep purging.
    private var guessesAllowed: Bool {
        keychain.purgeWatch.withLock { $0?.allowsGuess(now: keychain.clock().timeIntervalSince1970, retention: policy.tombstoneRetention) ?? false }
    }

    /// The identity prefix an item key falls under: the key without its group part's 32-byte digest.
    static func identityPrefix(of itemKey: Data) -> Data { Data(itemKey.dropLast(32)) }

    /// After a commit at `revision`: the prefix cache follows this transaction's changes of items.
    private func cacheChanges(at revision: Int64) {
        if purging { keychain.purgeWatch.withLock { $0 = nil } }
        let items = keyspace.allItems
        let changed = order.filter { $0.starts(with: items) }.map { (key: $0, value: changes[$0] ?? nil) }
        guard !changed.isEmpty else { return }
        keychain.prefixCache.withLock { cache in
            // An item key is its identity's prefix and the 32-byte digest of its group part.
            cache.apply(changed, at: revision) { $0.count > items.count + 32 ? Self.identityPrefix(of: $0) : nil }
        }
    }

    /// Raises this machine's marks to the newer rows this transaction read (one append for all of them).
    func flushMarks() {
        guard !seenMarks.isEmpty else { return }
        highWater.raise(seenMarks, head: seenMarks.map(\.1.counter).max() ?? 0)
        seenMarks = []
    }

    /// After a commit: this machine's marks rise to what it wrote, and the next write guesses this HEAD.
    private func committed(counter: UInt64, head: (value: Data, modRevision: Int64)?) {
        keychain.headHint.withLock { $0 = head }
        let marks = written.map { (EtcdHighWater.itemKey($0.0, $0.1), EtcdHighWater.Mark(counter: counter, version: $0.2)) }
            + erased.map { (EtcdHighWater.itemKey($0.0, $0.1), EtcdHighWater.Mark(counter: counter, version: 0)) }
        highWater.raise(seenMarks + marks, head: counter)
        seenMarks = []
    }

    /// Attempts of the fence before the outcome is reported unknown.
    static let fenceAttempts = 3

    /// A commit was sent and its answer lost: decides, for good, whether it was applied.
    ///
    /// Reading back is not enough: the lost request may still be in etcd's log (a member paused with it, a leader
    /// election under way) and be applied after the read found nothing, while this writer tries again: an add would
    /// then report a duplicate of itself, a check-and-set a conflict with itself, an update apply twice. So the
    /// resolution is a fence, one etcd transaction: if HEAD still has the mod revision the commit compared, HEAD is
    /// put again with the value it holds (only its mod revision moves; its counter and chain are unchanged), so the
    /// lost commit, whose compares include that mod revision, can never apply afterwards: it was not applied. Else
    /// HEAD moved on, and the lost commit can no longer apply either; the fence's failure branch reads, at that
    /// revision, the audit entry of the commit's counter and the item it put: found with this commit's bytes (unique:
    /// a random commit id in the entry, fresh nonces in the row), it was applied; otherwise another commit went first.
    /// A fence whose own answer is lost, or that no member answered, is sent again: it changes nothing once HEAD moved.
    ///
    /// - Parameters:
    ///   - fencing: HEAD as the commit compared it (value, nil when absent; mod revision, 0 when absent).
    ///   - emptyHead: the HEAD record of counter 0, put when HEAD was absent.
    /// - Throws: `errSecNotAvailable` when the cluster did not answer the fence: the outcome is unknown.
    private func resolveIndeterminate(_ operations: [EtcdOperation], fencing head: (value: Data?, modRevision: Int64),
                                      emptyHead: Data, reason: String) throws -> Outcome {
        let auditPrefix = keyspace.prefix + Data("audit/".utf8)
        var witnesses: [(key: Data, value: Data)] = []
        for case .put(let key, let value) in operations where key.starts(with: auditPrefix) { witnesses.append((key, value)) }
        if case .put(let key, let value)? = operations.first(where: { if case .put(let key, _) = $0 { return key.starts(with: keyspace.allItems) }; return false }) {
            witnesses.append((key, value))
        }
        var lastError = reason
        for _ in 0..<Self.fenceAttempts {
            let result: EtcdTxnResult
            do {
                result = try client.txn(compare: [.modRevision(keyspace.head, equals: head.modRevision)],
                                        success: [.put(keyspace.head, head.value ?? emptyHead)],
                                        failure: witnesses.map { .range($0.key) })
            } catch EtcdError.indeterminate(let fenceReason) {
                lastError = fenceReason
                continue
            } catch EtcdError.unavailable(let fenceReason) {
                lastError = fenceReason  // no member answered within the deadline (a leader election): ask again
                continue
            } catch let error as EtcdError {
                lastError = error.engineError.reason
                break
            }
            // HEAD had not moved: the commit was not applied, and now never will be.
            if result.succeeded { return .conflict(nil) }
            for (witness, response) in zip(witnesses, result.responses) {
                if case .range(let found) = response, let kv = found.kvs.first, kv.value == witness.value {
                    return .committed(revision: kv.modRevision)
                }
            }
            return .conflict(nil)
        }
        KeystoneLog.logger.error("an etcd commit's outcome is unknown", metadata: ["keychain": "\(keychain.configuration.name)"])
        throw EngineError(Status.notAvailable, "the change was sent to etcd at \(keychain.configuration.endpointList) but its answer was lost (\(reason)), and the cluster could not be asked whether it was applied (\(lastError)): it may or may not have been applied. Check with a search once the cluster answers")
    }
}
#endif
