#if NIO
import Foundation

/// The rows this process last read under an item identity's prefix (an item's service and account, every access
/// group), so that a write's first attempt can take them as a guess instead of reading them: an update then costs
/// one round trip, the commit, instead of two.
///
/// A guess is verified by the commit itself, never trusted: every cached row's mod revision is compared, and no key
/// of the prefix may have been created after the revision the rows were read at (an etcd compare over the prefix:
/// `CREATE < revision + 1`). A wrong guess fails the commit and the write runs again on values read; nothing is
/// written from a stale row. Reads never use it: every SecItem read asks etcd (linearizable).
///
/// Decision: the rows are kept as etcd holds them (sealed), at most ``capacity`` prefixes, dropped when the keychain
/// locks; a prefix whose last write created a key there is dropped (the created key's revision is past the bound).
struct EtcdPrefixCache: Sendable {
    struct Entry: Sendable {
        /// The revision the rows were read at: no key of the prefix may have been created after it.
        var revision: Int64
        /// The prefix's keys: value and mod revision.
        var rows: [Data: Row]
    }

    struct Row: Sendable {
        var value: Data
        var modRevision: Int64
    }

    /// Prefixes kept at most (about 0.5 MB of sealed rows for small items).
    static let capacity = 1024

    private var entries: [Data: Entry] = [:]

    func entry(_ prefix: Data) -> Entry? { entries[prefix] }

    /// Records what a complete read of `prefix` at `revision` found.
    mutating func store(_ prefix: Data, revision: Int64, rows: [Data: Row]) {
        if entries[prefix] == nil, entries.count >= Self.capacity, let victim = entries.keys.randomElement() {
            entries[victim] = nil
        }
        entries[prefix] = Entry(revision: revision, rows: rows)
    }

    /// Applies a committed transaction's changes (nil: deleted) at `revision` to the prefixes they fall under.
    mutating func apply(_ changes: [(key: Data, value: Data?)], at revision: Int64, prefixOf: (Data) -> Data?) {
        for (key, value) in changes {
            guard let prefix = prefixOf(key), var entry = entries[prefix] else { continue }
            if let value {
                guard entry.rows[key] != nil else {
                    // A key created after the entry's revision: the entry's creation bound no longer holds.
                    entries[prefix] = nil
                    continue
                }
                entry.rows[key] = Row(value: value, modRevision: revision)
            } else {
                entry.rows[key] = nil
            }
            entries[prefix] = entry
        }
    }

    mutating func removeAll() { entries = [:] }
}

/// What this process last learnt of the tombstone index (a write's first read reads its oldest entry): a write may
/// take a cached guess, and skip that read, only while no tombstone can be past the keychain's retention. Tombstones
/// past it are purged by the writes that read the index (bounded work riding on writes), so guessing must not starve
/// the purge.
///
/// A tombstone made since the read is at least as recent as the read (up to the machines' clock skew), so the first
/// moment one can be due is the retention after the older of the read and the oldest deletion it found.
struct EtcdPurgeWatch: Sendable {
    /// When the index was read (the keychain's clock), and the oldest deletion it held (nil: none).
    var readAt: TimeInterval
    var oldestDeletion: TimeInterval?

    func allowsGuess(now: TimeInterval, retention: TimeInterval) -> Bool {
        now < min(oldestDeletion ?? readAt, readAt) + retention
    }
}
#endif
