#if NIO
import Foundation
import KeychainEngine
import KeychainSealing

/// A keychain's history settings (its header): versions kept per item, how long a deleted item can be undeleted,
/// and whether every update must state the version it read.
struct EtcdHistoryPolicy: Sendable, Hashable {
    var maxVersions: Int
    var tombstoneRetention: TimeInterval
    var requireCheckAndSet: Bool

    init(_ header: EtcdKeychainHeader) {
        maxVersions = header.maxVersions ?? EtcdKeychainHeader.defaultMaxVersions
        tombstoneRetention = header.tombstoneRetention ?? EtcdKeychainHeader.defaultRetention
        requireCheckAndSet = header.requireCheckAndSet ?? false
    }
}

/// The version an update states it read (check-and-set), bound for the calls made inside
/// ``EtcdKeychain/withCheckAndSet(expectedVersion:_:)-type.method``.
final class EtcdCheckAndSet: Sendable {
    let version: UInt64
    private let found = Locked<UInt64?>(nil)

    init(version: UInt64) { self.version = version }

    @TaskLocal static var current: EtcdCheckAndSet?

    /// The version the item was found at when the check failed.
    func record(current: UInt64) { found.withLock { $0 = current } }
    var conflict: UInt64? { found.current }
}

/// A check-and-set update found the item changed since the version it stated.
///
/// Decision: its `OSStatus` is `errSecInvalidItemRef` (-25304, "the specified item is no longer valid"): the version
/// the caller read is no longer the item's, which is that error's meaning; `errSecVerifyFailed` is kept for
/// rollbacks, `errSecDuplicateItem` for the UNIQUE constraint. SecItemUpdate inside
/// ``EtcdKeychain/withCheckAndSet(expectedVersion:_:)-type.method`` fails with that status; the typed call throws this error.
public struct EtcdVersionConflict: Error, Sendable, Hashable, CustomStringConvertible {
    /// The version the update stated.
    public let expected: UInt64
    /// The item's version when the update was tried.
    public let current: UInt64
    /// `errSecInvalidItemRef` (-25304).
    public var status: Int32 { Status.invalidItemRef }

    /// What happened and what to do; never a secret.
    public var description: String {
        "errSecInvalidItemRef (-25304): check-and-set failed: the item is at version \(current), not version \(expected) as stated; another writer changed it since it was read. Nothing was changed: read it again and retry with its current version"
    }
}

/// One version of an item, as ``EtcdKeychain/versions(of:matching:)`` lists them.
public struct EtcdItemVersion: Sendable, Hashable {
    /// The item version: 1 for a new item, +1 per update, delete and undelete (0: a row written before versions).
    public let version: UInt64
    /// The keychain's HEAD counter of the write that made it (orders versions across items).
    public let counter: UInt64
    /// The item's modification date (`mdat`) in this version.
    public let modified: Date?
    /// When this version is a deletion (the current row of a deleted item): the deletion date.
    public let deletedAt: Date?
    /// Whether this is the item's current row (live, or its tombstone).
    public let isCurrent: Bool
}

extension EtcdKeychain {
    /// This keychain's history settings, as its header held them when last read.
    var historyPolicy: EtcdHistoryPolicy { EtcdHistoryPolicy(headerSnapshot) }

    /// Versions kept per item, the current one included (default 10).
    public var maxVersions: Int { historyPolicy.maxVersions }
    /// Seconds a deleted item can be undeleted before a later write purges it (default 30 days).
    public var tombstoneRetention: TimeInterval { historyPolicy.tombstoneRetention }
    /// Whether every update must state the version it read.
    public var requiresCheckAndSet: Bool { historyPolicy.requireCheckAndSet }

    /// Changes the history settings for every machine (compare-and-swap on the header); nil leaves one as it is.
    ///
    /// Lowering `maxVersions` applies as items are written: each write lets go of the version falling out of the
    /// last N (versions beyond it already kept stay until the item is destroyed).
    ///
    /// - Throws: `errSecParam` for a value out of range (versions 1...100, retention 0...100 years);
    ///   `errSecNotAvailable` when the cluster does not answer or the header changed meanwhile.
    public func setHistoryPolicy(maxVersions: Int? = nil, tombstoneRetention: TimeInterval? = nil, requireCheckAndSet: Bool? = nil) throws {
        if let maxVersions, !(1...EtcdKeychainHeader.maxVersionsLimit).contains(maxVersions) {
            throw EngineError.param("versions kept per item must be between 1 and \(EtcdKeychainHeader.maxVersionsLimit)")
        }
        if let tombstoneRetention, !(tombstoneRetention.isFinite && tombstoneRetention >= 0 && tombstoneRetention <= 100 * 366 * 24 * 3600) {
            throw EngineError.param("the retention of deleted items must be between 0 seconds and 100 years")
        }
        try changeHeader { header in
            if let maxVersions { header.maxVersions = maxVersions }
            if let tombstoneRetention { header.tombstoneRetention = tombstoneRetention }
            if let requireCheckAndSet { header.requireCheckAndSet = requireCheckAndSet }
        }
    }

    /// Whether every read of this keychain writes an audit entry (``setAuditsReads(_:)``).
    public var auditsReads: Bool { headerSnapshot.auditReads ?? false }

    /// Makes every read of this keychain, on every machine, write an audit entry naming the items it opened (their
    /// digests and versions, never a name or a secret), or stops it (compare-and-swap on the header).
    ///
    /// An audited read fails when its entry cannot be written: its result is not returned (fail-closed). Cost: the
    /// entry is one more etcd write (a Raft commit) per read that opened an item, and it competes with every write of
    /// the keychain for the HEAD: an audited read is as slow as a write. Reads that open nothing (not found, locked)
    /// write no entry. One entry names every item the read opened (about 26 bytes each), so a search that opens more
    /// than about 50,000 items exceeds etcd's request limit and fails with `errSecDataTooLarge`.
    ///
    /// Each machine follows the setting from its next unlock or write (reads do not read the header, so that a point
    /// read stays one etcd request): a replica that only reads audits its reads once it unlocks again.
    ///
    /// - Throws: `errSecNotAvailable` when the cluster does not answer or the header changed meanwhile.
    public func setAuditsReads(_ on: Bool) throws {
        try changeHeader { $0.auditReads = on }
    }

    /// Runs `body` (SecItemUpdate calls, or `SecItemAdd` with an update on duplicate) so that every update it makes
    /// on this keychain first checks that the item is still at `expectedVersion`.
    ///
    /// - Throws: ``EtcdVersionConflict`` when the item changed since (nothing is changed); what `body` throws.
    public func withCheckAndSet<T>(expectedVersion: UInt64, _ body: () throws -> T) throws -> T {
        try Self.withCheckAndSet(expectedVersion: expectedVersion, body)
    }

    /// ``withCheckAndSet(expectedVersion:_:)-method`` for whatever etcd keychain `body` updates (the CLI's add -U).
    public static func withCheckAndSet<T>(expectedVersion: UInt64, _ body: () throws -> T) throws -> T {
        let expectation = EtcdCheckAndSet(version: expectedVersion)
        do {
            return try EtcdCheckAndSet.$current.withValue(expectation) { try body() }
        } catch let error as EngineError where error.status == Status.invalidItemRef {
            if let current = expectation.conflict { throw EtcdVersionConflict(expected: expectedVersion, current: current) }
            throw error
        }
    }

    /// Runs `body` on the one item (live or deleted) named by `attributes` in a read transaction.
    private func reading<T>(_ cls: ItemClass, _ attributes: [String: AttributeValue],
                            _ body: (EtcdTransaction, EtcdTransaction.Located) throws -> T) throws -> T {
        try read { reader in
            let transaction = reader as! EtcdTransaction
            return try body(transaction, try transaction.locateItem(cls, attributes))
        }
    }

    private func writing<T>(_ cls: ItemClass, _ attributes: [String: AttributeValue],
                            _ body: (EtcdTransaction, EtcdTransaction.Located) throws -> T) throws -> T {
        try write { writer in
            let transaction = writer as! EtcdTransaction
            return try body(transaction, try transaction.locateItem(cls, attributes))
        }
    }

    /// The versions kept of an item, oldest first, the current row (live or deleted) last.
    ///
    /// - Parameters:
    ///   - itemClass: the item's class.
    ///   - attributes: its primary key (for a generic password `svce` and `acct`; the access group and `sync` may be
    ///     left out when one item matches).
    /// - Throws: `errSecItemNotFound`; `errSecParam` when several items match; `errSecInteractionNotAllowed` when
    ///   locked; `errSecVerifyFailed` when the current row is older than this machine has seen, or a history row was
    ///   moved; `errSecDecode` for a damaged row.
    public func versions(of itemClass: ItemClass, matching attributes: [String: AttributeValue]) throws -> [EtcdItemVersion] {
        try reading(itemClass, attributes) { transaction, item in
            try transaction.versions(of: item).map { version, row, stored in
                EtcdItemVersion(version: version, counter: row.counter ?? 0, modified: stored?.attributes[Key.modificationDate]?.dateValue,
                                deletedAt: row.deletedAt, isCurrent: row == item.row)
            }
        }
    }

    /// The current version of an item (to state in ``withCheckAndSet(expectedVersion:_:)-method``).
    ///
    /// - Throws: as ``versions(of:matching:)``; `errSecItemNotFound` for a deleted item.
    public func currentVersion(of itemClass: ItemClass, matching attributes: [String: AttributeValue]) throws -> UInt64 {
        try reading(itemClass, attributes) { transaction, item in
            guard !item.row.isTombstone else { throw EngineError.itemNotFound }
            return try transaction.item(item, version: item.row.version ?? 0).row.version ?? 0
        }
    }

    /// Version `version` of an item: its attributes and secret as they were.
    ///
    /// - Throws: `errSecItemNotFound` when that version is not kept; the errors of ``versions(of:matching:)``.
    public func item(version: UInt64, of itemClass: ItemClass, matching attributes: [String: AttributeValue]) throws -> StoredItem {
        try reading(itemClass, attributes) { transaction, item in try transaction.item(item, version: version).item }
    }

    /// Brings a deleted item back (as a new version, with the contents it had when deleted).
    ///
    /// - Returns: its new version.
    /// - Throws: `errSecDuplicateItem` when it is not deleted (or an item of its primary key was added since);
    ///   `errSecItemNotFound`; the errors of ``versions(of:matching:)``.
    @discardableResult
    public func undelete(_ itemClass: ItemClass, matching attributes: [String: AttributeValue]) throws -> UInt64 {
        try writing(itemClass, attributes) { transaction, item in try transaction.undelete(item) }
    }

    /// Erases an item, live or deleted, with every version kept of it. It cannot be undone.
    ///
    /// - Throws: `errSecItemNotFound`; the errors of ``versions(of:matching:)``.
    /// - Important: etcd keeps old revisions until it compacts them: a destroyed item's sealed rows stay in etcd's
    ///   history (and backups) until then, readable only with the keychain's keys.
    public func destroy(_ itemClass: ItemClass, matching attributes: [String: AttributeValue]) throws {
        try writing(itemClass, attributes) { transaction, item in try transaction.destroy(item) }
    }
}
#endif
