#if NIO
import Crypto
import Foundation
import KeychainEngine
import KeychainSealing

/// One entry of an etcd keychain's audit log, as ``EtcdKeychain/auditLog(verify:)`` reads it: who changed which items
/// (by digest), when, from which machine. Never a name of an item, never a secret.
public struct EtcdAuditEntry: Sendable, Hashable {
    /// One item a transaction touched.
    public struct Event: Sendable, Hashable {
        /// add, update, delete, undelete, destroy, purge, read or rotate (`op<N>` for a code this Keystone does not know).
        public var operation: String
        /// The item's class tag (`genp`, `inet`, `cert`, `keys`, `idnt`).
        public var itemClass: String
        /// The first 12 bytes of the item's primary-key digest (HMAC under the keychain's index key), in hex: the same
        /// item always has the same digest, which names nothing without the keychain's keys.
        public var item: String
        /// The item's version after the change (0: erased, or unknown).
        public var version: UInt64
    }

    /// The keychain-wide counter of the transaction (the HEAD's), the entry's place in the chain.
    public var counter: UInt64
    /// The writer's clock when it committed (not checked by anyone: a machine with a wrong clock writes a wrong time).
    public var time: Date
    /// The writing machine: the first 8 bytes, in hex, of SHA-256("keystone-etcd-machine\0" + its /etc/machine-id),
    /// the digest its enrollment key in the cluster ends with.
    public var machine: String
    /// The writing process's uid.
    public var uid: UInt32
    /// The writing process's login name ("" when its account has none).
    public var user: String
    /// The items the transaction touched (none for an entry that records no item).
    public var events: [Event]
    /// etcd's revision of the entry (the cluster's order; 0 when unknown).
    public var revision: Int64
}

/// What ``EtcdKeychain/auditLog(verify:)`` found wrong with the log: each names the entries concerned.
public struct EtcdAuditProblem: Sendable, Hashable, CustomStringConvertible {
    /// What kind of tampering was found.
    public enum Kind: String, Sendable, Hashable {
        /// Entries missing inside the log (``first``...``last``).
        case removed
        /// An entry's key holds another counter's entry (swapped, moved or replayed): ``first`` the key's counter,
        /// ``last`` the counter inside.
        case reordered
        /// An entry whose MAC does not verify, or that does not parse: edited.
        case edited
        /// An entry whose previous-hash does not follow the entry before it (an entry before it was replaced).
        case chainBroken
        /// Entries missing at the end: the HEAD says the log goes to ``last``, it stops before ``first``.
        case truncated
        /// The HEAD is older than the log or than what this machine saw (replayed), or was written outside Keystone.
        case headRolledBack
        /// The HEAD is missing, does not parse, its MAC fails, or its chain hash is not the last entry's.
        case headInvalid
        /// The checkpoint of a trimmed log does not verify.
        case checkpointInvalid
        /// An entry was written again after it was first written (its etcd version is above 1).
        case rewritten
        /// A key under the log's prefix that is no entry key.
        case unexpectedKey
    }

    /// What was found.
    public var kind: Kind
    /// The first counter concerned (0: none).
    public var first: UInt64
    /// The last counter concerned (0: none).
    public var last: UInt64
    /// What was found, in words.
    public var detail: String

    /// ``detail``.
    public var description: String { detail }
}

/// The audit log as read at one etcd revision, and what verifying it found.
public struct EtcdAuditReport: Sendable {
    /// The entries, in counter order (those kept since the last trim).
    public var entries: [EtcdAuditEntry]
    /// Empty when the log verifies (or was not verified).
    public var problems: [EtcdAuditProblem]
    /// Whether the MACs and the HEAD were checked (false: the keychain is locked here, entries only listed).
    public var verified: Bool
    /// The HEAD's counter (nil: no HEAD, or it did not parse).
    public var headCounter: UInt64?
    /// The counter of the last entry removed by a trim (nil: never trimmed).
    public var checkpointCounter: UInt64?
    /// The etcd revision read.
    public var revision: Int64

    /// Verified, and nothing wrong.
    public var isIntact: Bool { verified && problems.isEmpty }
}

/// The HEAD record's fields the audit checks, however E1's format encodes them.
struct EtcdAuditHeadView: Sendable {
    var counter: UInt64
    var chainHash: Data
    /// Whether its MAC verified (nil: not checked, no key).
    var authentic: Bool?
    /// etcd's version of the HEAD key (how many times it was put since it was created).
    var etcdVersion: Int64
}

extension EtcdAuditEntry {
    init(_ record: EtcdAuditRecord, revision: Int64) {
        counter = record.counter
        time = record.time
        machine = record.machine.prefix(8).hexString
        uid = record.uid
        user = record.user
        events = record.events.map { event in
            Event(operation: EtcdAuditEvent.Kind(code: event.kind)?.rawValue ?? "op\(event.kind)", itemClass: event.itemClass,
                  item: event.item.hexString, version: event.version)
        }
        self.revision = revision
    }
}

extension EtcdAudit {
    /// Checks a log: `entries` (key, value, etcd version, mod revision) in key order, the checkpoint's value, the HEAD.
    ///
    /// Pure: the tests feed it what `etcdctl` left. `key` nil: nothing is authenticated (entries are parsed only).
    static func verify(keyspace: EtcdKeyspace, entries stored: [EtcdKeyValue], checkpoint: EtcdKeyValue?, head: EtcdAuditHeadView?,
                       headPresent: Bool, highWater: UInt64?, key: SymmetricKey?) -> (entries: [EtcdAuditEntry], problems: [EtcdAuditProblem], checkpoint: UInt64?) {
        var problems: [EtcdAuditProblem] = []
        var entries: [EtcdAuditEntry] = []
        func problem(_ kind: EtcdAuditProblem.Kind, _ first: UInt64, _ last: UInt64, _ detail: String) {
            problems.append(EtcdAuditProblem(kind: kind, first: first, last: last, detail: detail))
        }
        var expected: UInt64 = 1
        var previousHash = Data(count: 32)
        var checkpointCounter: UInt64?
        if let checkpoint {
            if let parsed = EtcdAuditCheckpoint(decoding: checkpoint.value),
               key.map({ EtcdAuditRecord.verify(checkpoint.value, key: $0, etcdKey: keyspace.auditCheckpoint) }) ?? true {
                checkpointCounter = parsed.counter
                expected = parsed.counter + 1
                previousHash = parsed.chainHash
            } else {
                problem(.checkpointInvalid, 0, 0, "the audit log's checkpoint (the start of a trimmed log) is damaged or forged: the entries before the first one kept cannot be vouched for")
            }
        }
        // Whether the entry before was already reported (its successor's broken link is then no news).
        var previousReported = false
        var last: UInt64?
        for kv in stored {
            guard let counter = keyspace.auditCounter(in: kv.key) else {
                problem(.unexpectedKey, 0, 0, "a key under the audit log's prefix is no entry key: \(String(decoding: kv.key.suffix(24), as: UTF8.self).debugDescription)")
                continue
            }
            if counter > expected {
                problem(.removed, expected, counter - 1, counter - 1 == expected
                        ? "entry \(expected) was removed (entry \(counter) follows entry \(expected - 1))"
                        : "entries \(expected) to \(counter - 1) were removed (entry \(counter) follows entry \(expected - 1))")
                previousReported = true
            } else if counter < expected {
                // Before the checkpoint: trimmed entries put back.
                problem(.reordered, counter, counter, "entry \(counter) is older than the checkpoint (entry \(expected - 1)): an entry put back after a trim")
                continue
            }
            var reported = false
            if let record = EtcdAuditRecord(decoding: kv.value) {
                if let key, !EtcdAuditRecord.verify(kv.value, key: key, etcdKey: kv.key) {
                    if record.counter != counter, EtcdAuditRecord.verify(kv.value, key: key, etcdKey: keyspace.auditEntry(record.counter)) {
                        problem(.reordered, counter, record.counter, "entry \(counter) holds entry \(record.counter) (entries reordered, moved or replayed)")
                    } else {
                        problem(.edited, counter, counter, "entry \(counter) was edited (its MAC does not verify)")
                    }
                    reported = true
                } else if record.counter != counter {
                    problem(.reordered, counter, record.counter, "entry \(counter) holds entry \(record.counter) (entries reordered, moved or replayed)")
                    reported = true
                } else if key != nil, record.previousHash != previousHash, !previousReported {
                    problem(.chainBroken, counter, counter, "entry \(counter) does not follow entry \(counter - 1) (its chain hash differs: an entry before it was replaced)")
                    reported = true
                }
                entries.append(EtcdAuditEntry(record, revision: kv.modRevision))
            } else {
                problem(.edited, counter, counter, "entry \(counter) was edited (it is not an audit entry)")
                reported = true
            }
            if kv.version > 1, !reported {
                problem(.rewritten, counter, counter, "entry \(counter) was written \(kv.version) times in etcd (an entry is written once: put back or rewritten outside Keystone)")
                reported = true
            }
            previousHash = chainHash(of: kv.value)
            previousReported = reported
            expected = counter + 1
            last = counter
        }
        let lastCounter = last ?? checkpointCounter ?? 0
        if let head {
            if head.authentic == false {
                problem(.headInvalid, head.counter, head.counter, "the HEAD record's MAC does not verify (edited or forged)")
            } else if head.counter > lastCounter {
                problem(.truncated, lastCounter + 1, head.counter, head.counter == lastCounter + 1
                        ? "the log was truncated: entry \(head.counter) (the last, as the HEAD says) is missing"
                        : "the log was truncated: entries \(lastCounter + 1) to \(head.counter) (the last, as the HEAD says) are missing")
            } else if head.counter < lastCounter {
                problem(.headRolledBack, head.counter, lastCounter, "the HEAD (counter \(head.counter)) is older than the log (entry \(lastCounter)): an old HEAD was put back")
            } else if key != nil, head.chainHash != previousHash, !previousReported, !(head.counter == 0 && head.chainHash == Data(count: 32)) {
                problem(.headInvalid, head.counter, head.counter, "the HEAD's chain hash is not entry \(head.counter)'s: the last entry was replaced")
            }
            if let highWater, head.counter < highWater {
                problem(.headRolledBack, head.counter, highWater, "the HEAD (counter \(head.counter)) is older than what this machine has seen (counter \(highWater)): the keychain was rolled back")
            } else if head.etcdVersion != Int64(head.counter), head.etcdVersion != Int64(head.counter) + 1, head.authentic != false {
                problem(.headRolledBack, head.counter, head.counter, "the HEAD was written outside Keystone (etcd counts \(head.etcdVersion) writes of it for counter \(head.counter)): an old HEAD put back")
            }
        } else if headPresent {
            problem(.headInvalid, 0, 0, "the HEAD record is damaged (it does not parse)")
        } else if lastCounter > 0 {
            problem(.headInvalid, lastCounter, lastCounter, "the HEAD record is missing while the log has entries up to \(lastCounter)")
        }
        return (entries, problems, checkpointCounter)
    }
}

extension EtcdKeychain {
    /// Reads the audit log at one etcd revision and, when this machine holds the keychain's keys, verifies it: every
    /// entry's MAC, the chain, the counters against the HEAD (and against the highest counter this machine saw),
    /// the checkpoint of a trimmed log.
    ///
    /// - Parameter verify: false lists the entries without checking them (no keys needed).
    /// - Returns: the entries and what is wrong with them (``EtcdAuditReport/isIntact``).
    /// - Throws: `errSecInteractionNotAllowed` when `verify` is true and the keychain is locked here; the cluster's
    ///   errors (`errSecNotAvailable`, `errSecWrPerm`…).
    public func auditLog(verify: Bool = true) throws -> EtcdAuditReport {
        let (keys, keychainID, _) = try snapshotKeys()
        var key: SymmetricKey?
        var headKey: SymmetricKey?
        if verify {
            guard let keys else {
                throw EngineError.interactionNotAllowed("the audit log is verified with a key only a machine that unlocked the keychain holds: unlock it first")
            }
            key = auditKey(keys)
            headKey = self.headKey(keys)
        }
        let (entries, checkpoint, head, revision) = try Self.etcd { try readAuditLog() }
        let headView = head.flatMap { EtcdAudit.headView($0, keychainID: keychainID, key: headKey) }
        let marks = verify ? highWater(keychainID) : nil
        marks?.refresh()
        let checked = EtcdAudit.verify(keyspace: keyspace, entries: entries, checkpoint: checkpoint, head: headView,
                                       headPresent: head != nil, highWater: marks?.headCounter, key: key)
        if let marks, let headView, checked.problems.isEmpty {
            marks.raise([], head: headView.counter)  // a later rollback below this HEAD is then detected here
        }
        return EtcdAuditReport(entries: checked.entries, problems: verify ? checked.problems : [], verified: verify,
                               headCounter: headView?.counter, checkpointCounter: checked.checkpoint, revision: revision)
    }

    /// The log's entries, checkpoint and HEAD, at one revision (read again when etcd compacts that revision away
    /// between two pages).
    func readAuditLog() throws -> (entries: [EtcdKeyValue], checkpoint: EtcdKeyValue?, head: EtcdKeyValue?, revision: Int64) {
        for _ in 0..<8 {
            do { return try readAuditLogOnce() } catch EtcdError.compacted { continue }
        }
        throw EtcdError.compacted
    }

    private func readAuditLogOnce() throws -> (entries: [EtcdKeyValue], checkpoint: EtcdKeyValue?, head: EtcdKeyValue?, revision: Int64) {
        let page = 512
        let first = try client.txn(compare: [], success: [.range(keyspace.head), .range(keyspace.auditCheckpoint),
                                                           .rangePrefix(keyspace.auditEntries, limit: page)])
        let answers = first.responses.compactMap { if case .range(let found) = $0 { found } else { nil } }
        guard answers.count == 3 else { throw EtcdError.server(code: 0, message: "etcd answered a read of the audit log with \(answers.count) results") }
        var entries = answers[2].kvs
        var more = answers[2].more
        while more, let last = entries.last?.key {
            let next = try client.range(prefix: keyspace.auditEntries, revision: first.revision, limit: page, startingAfter: last)
            entries += next.kvs
            more = next.more
        }
        return (entries, answers[1].kvs.first, answers[0].kvs.first, first.revision)
    }

    /// Appends an audit entry that goes with no change of an item (reads, when a keychain audits them; operations
    /// outside ``write(_:)``), as its own etcd transaction: the HEAD advances by one (compare-and-swap on it and on the
    /// header), so the entry takes its place in the chain between the writes.
    ///
    /// Cost: one etcd write (a Raft commit, fsynced by a quorum) per call, and contention on the HEAD with every
    /// other write of the keychain; for an audited read, this doubles its round trips and makes it as slow as a write.
    ///
    /// - Throws: `errSecInteractionNotAllowed` when the keychain is locked here; `errSecVerifyFailed` when the HEAD
    ///   fails its MAC or is older than this machine has seen; `errSecNotAvailable` when the HEAD kept changing or
    ///   the cluster does not answer (the entry may then be missing: a caller auditing a read fails the read).
    func appendAuditEntry(_ events: [EtcdAuditEvent]) throws {
        var backoff: UInt32 = 1_000
        for _ in 0..<Self.maximumAttempts {
            let (keys, keychainID, headerRevision) = try snapshotKeys()
            guard let keys else { throw EngineError.interactionNotAllowed("an audit entry is MACed with a key only a machine that unlocked the keychain holds: unlock it first") }
            let found = try Self.etcd { try client.range(keyspace.head) }
            let stored = found.kvs.first
            let head = try EtcdHead.decode(stored?.value, keychainID: keychainID, key: headKey(keys))
            let marks = highWater(keychainID)
            marks.refresh()
            guard head.counter >= marks.headCounter else {
                throw EngineError(EtcdAudit.verifyFailed, "rollback detected: the keychain's HEAD counter is \(head.counter) but this machine has seen \(marks.headCounter); no audit entry was written")
            }
            let counter = head.counter + 1
            var operations: [EtcdOperation] = []
            let chain = try EtcdAudit.append(to: &operations, keychain: self, counter: counter, previousHash: head.chainHash, events: events,
                                             key: auditKey(keys))
            let value = EtcdHead(counter: counter, chainHash: chain).encoded(keychainID: keychainID, key: headKey(keys))
            operations.append(.put(keyspace.head, value))
            let result = try Self.etcd {
                try client.txn(compare: [.modRevision(keyspace.meta, equals: headerRevision), .modRevision(keyspace.head, equals: stored?.modRevision ?? 0)],
                               success: operations, failure: [.range(keyspace.meta)])
            }
            if result.succeeded {
                marks.raise([], head: counter)
                headHint.withLock { $0 = (value, result.revision) }
                return
            }
            if case .range(let meta)? = result.responses.first, meta.kvs.first?.modRevision != headerRevision { try reloadHeader() }
            usleep(UInt32.random(in: 0...backoff))
            backoff = min(backoff * 2, 64_000)
        }
        throw EngineError(Status.notAvailable, "the keychain's HEAD kept being changed by other machines (\(Self.maximumAttempts) attempts); no audit entry was written: try again")
    }

    /// How many entries one trim transaction removes (with the checkpoint's put and the compares, well under
    /// etcd's default `--max-txn-ops`, 128).
    static let auditTrimBatch = 60

    /// Removes all but the newest `keeping` entries of the audit log, behind a signed checkpoint.
    ///
    /// Retention: entries are etcd keys, so etcd's compaction never removes them; they stay until trimmed. The log is
    /// verified first, then the oldest entries are removed in transactions of at most 60 (`auditTrimBatch`), each also
    /// writing the checkpoint (counter and chain hash of the last entry it removes, MACed under the audit key) and
    /// comparing every key it touches, so an interrupted trim leaves a log that verifies, and the first entry kept
    /// must follow the checkpoint.
    ///
    /// - Parameter keeping: how many of the newest entries stay (at least 1).
    /// - Returns: how many entries were removed.
    /// - Throws: `errSecParam` when `keeping` is below 1; `errSecInteractionNotAllowed` when the keychain is locked
    ///   here; `errSecVerifyFailed` (-67808) when the log does not verify (nothing is removed: a tampered log is
    ///   never vouched for by a checkpoint); `errSecNotAvailable` when the log changed meanwhile (try again); the
    ///   cluster's errors.
    /// - Important: The entries removed are gone: keep them elsewhere first (`keystone audit --json`) when the
    ///   history matters.
    public func trimAuditLog(keeping: Int) throws -> Int {
        guard keeping >= 1 else { throw EngineError.param("keep at least one audit entry") }
        let (keys, keychainID, _) = try snapshotKeys()
        guard let keys else {
            throw EngineError.interactionNotAllowed("trimming the audit log writes a checkpoint with a key only a machine that unlocked the keychain holds: unlock it first")
        }
        let key = auditKey(keys)
        let (entries, checkpoint, head, _) = try Self.etcd { try readAuditLog() }
        let checked = EtcdAudit.verify(keyspace: keyspace, entries: entries, checkpoint: checkpoint,
                                       head: head.flatMap { EtcdAudit.headView($0, keychainID: keychainID, key: headKey(keys)) },
                                       headPresent: head != nil, highWater: highWater(keychainID).headCounter, key: key)
        guard checked.problems.isEmpty else {
            throw EngineError(EtcdAudit.verifyFailed, "the audit log does not verify, so it is not trimmed (nothing was removed): " + checked.problems.map(\.detail).joined(separator: "; "))
        }
        let removable = entries.dropLast(keeping)
        var checkpointRevision = checkpoint?.modRevision ?? 0
        var removed = 0
        var start = removable.startIndex
        while start < removable.endIndex {
            let batch = removable[start..<min(start + Self.auditTrimBatch, removable.endIndex)]
            guard let last = batch.last, let counter = keyspace.auditCounter(in: last.key) else { break }
            let point = EtcdAuditCheckpoint(counter: counter, chainHash: EtcdAudit.chainHash(of: last.value), time: Date())
            var compares: [EtcdCompare] = [.modRevision(keyspace.auditCheckpoint, equals: checkpointRevision)]
            compares += batch.map { .modRevision($0.key, equals: $0.modRevision) }
            let operations: [EtcdOperation] = batch.map { .delete($0.key) }
                + [.put(keyspace.auditCheckpoint, point.sealed(key: key, etcdKey: keyspace.auditCheckpoint))]
            let result = try Self.etcd { try client.txn(compare: compares, success: operations) }
            guard result.succeeded else {
                throw EngineError(Status.notAvailable, "the audit log changed while it was trimmed (another trim?); \(removed) entries were removed, the log verifies: try again")
            }
            checkpointRevision = result.revision
            removed += batch.count
            start = batch.endIndex
        }
        return removed
    }
}

extension EtcdAudit {
    /// The HEAD record's counter and chain hash, and whether its MAC verifies under `key` (nil: not checked).
    static func headView(_ kv: EtcdKeyValue, keychainID: Data, key: SymmetricKey?) -> EtcdAuditHeadView? {
        var reader = ByteReader(kv.value)
        guard reader.byte() == EtcdHead.format, let counter = reader.integer(8), let hash = reader.bytes(32) else { return nil }
        let authentic = key.map { (try? EtcdHead.decode(kv.value, keychainID: keychainID, key: $0)) != nil }
        return EtcdAuditHeadView(counter: counter, chainHash: hash, authentic: authentic, etcdVersion: kv.version)
    }
}
#endif
