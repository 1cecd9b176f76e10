import Foundation
import KeychainEngine
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A readers-writer lock (`pthread_rwlock_t`): lookups share it, stores take it alone.
final class ReadWriteLock: @unchecked Sendable {
    // @unchecked Sendable: the pthread lock is the synchronisation itself, at a fixed address.
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        pthread_rwlock_init(lock, nil)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    func reading<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    func writing<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}

/// The caches of a keychain file's decrypted rows and attribute digests, behind locks of their own: reads running on
/// pooled connections outside the instance's mutex (`ReaderPool.swift`) use them too.
///
/// Sharded: each key belongs to one of 16 shards with its own readers-writer lock, held for one dictionary lookup
/// (shared: readers of the same key, such as the digest of a service every read names, do not wait for each other)
/// or store (alone). A single exclusive lock was the last one every point read took.
///
/// Every change of keys empties them and moves `generation` on; a reader that decrypted a row with keys of an older
/// generation does not store it, so nothing decrypted before a lock survives it.
final class RowCaches: @unchecked Sendable {
    // @unchecked Sendable: each shard's dictionaries are reached only while its lock is held; the counters are atomic.
    private final class Shard {
        let lock = ReadWriteLock()
        var rows: [KeychainFile.RowKey: KeychainFile.CachedRow] = [:]
        var digests: [KeychainFile.DigestKey: Data] = [:]
    }

    private static let shardCount = 16
    /// Rows and digests kept per shard (a full shard is emptied).
    private static let rowsPerShard = 16_384 / shardCount
    private static let digestsPerShard = 4_096 / shardCount

    private let shards: [Shard] = (0..<RowCaches.shardCount).map { _ in Shard() }
    private let currentGeneration = Atomic<UInt64>(0)
    private let decrypted = Atomic<Int>(0)

    private func shard<K: Hashable>(_ key: K) -> Shard {
        shards[Int(UInt(bitPattern: key.hashValue) % UInt(Self.shardCount))]
    }

    /// Moves on with every key change (``clear()``).
    var generation: UInt64 { currentGeneration.load(ordering: .acquiring) }

    /// How many rows were decrypted (cache hits not counted).
    var decryptions: Int { decrypted.load(ordering: .relaxed) }

    /// Counts one decryption (an atomic counter: readers in parallel do not meet on the lock for it).
    func countDecryption() { decrypted.add(1, ordering: .relaxed) }

    /// Empties both caches (a key change): rows decrypted under older keys are not stored after this.
    ///
    /// The generation moves before the shards are emptied: a store that checked the old generation holds its shard's
    /// lock (alone), so its entry is in the shard before the shard is emptied, and is emptied with it.
    func clear() {
        currentGeneration.add(1, ordering: .acquiringAndReleasing)
        for shard in shards {
            shard.lock.writing {
                shard.rows.removeAll()
                shard.digests.removeAll()
            }
        }
    }

    /// Empties the row cache only (a rolled-back write, caching turned off, another instance's change).
    func clearRows() {
        for shard in shards { shard.lock.writing { shard.rows.removeAll() } }
    }

    /// The cached candidate of `key` when its stored columns are still `columns`.
    func row(_ key: KeychainFile.RowKey, columns: KeychainFile.RowColumns) -> Candidate? {
        let shard = self.shard(key)
        return shard.lock.reading {
            guard let hit = shard.rows[key], hit.columns == columns else { return nil }
            return hit.candidate
        }
    }

    func hasRow(_ key: KeychainFile.RowKey) -> Bool {
        let shard = self.shard(key)
        return shard.lock.reading { shard.rows[key] != nil }
    }

    /// Stores a row decrypted with keys of `generation` (ignored when the keys changed since).
    func store(_ key: KeychainFile.RowKey, _ row: KeychainFile.CachedRow?, generation: UInt64) {
        let shard = self.shard(key)
        shard.lock.writing {
            guard generation == self.generation else { return }
            if shard.rows.count >= Self.rowsPerShard { shard.rows.removeAll() }
            shard.rows[key] = row
        }
    }

    func removeRow(_ key: KeychainFile.RowKey) {
        let shard = self.shard(key)
        shard.lock.writing { shard.rows[key] = nil }
    }

    func digest(_ key: KeychainFile.DigestKey, generation: UInt64) -> Data? {
        let shard = self.shard(key)
        return shard.lock.reading { generation == self.generation ? shard.digests[key] : nil }
    }

    func storeDigest(_ key: KeychainFile.DigestKey, _ digest: Data, generation: UInt64) {
        let shard = self.shard(key)
        shard.lock.writing {
            guard generation == self.generation else { return }
            if shard.digests.count >= Self.digestsPerShard { shard.digests.removeAll(keepingCapacity: true) }
            shard.digests[key] = digest
        }
    }
}
