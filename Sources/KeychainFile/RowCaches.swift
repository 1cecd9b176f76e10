import Foundation
import KeychainEngine
import Synchronization

/// The caches of a keychain file's decrypted rows and attribute digests, behind a lock of their own: reads running on
/// pooled connections outside the instance's mutex (`ReaderPool.swift`) use them too.
///
/// Every change of keys empties them and moves `generation` on; a reader that decrypted a row with keys of an older
/// generation does not store it, so nothing decrypted before a lock survives it.
final class RowCaches: @unchecked Sendable {
    // @unchecked Sendable: every mutable property is reached only while `lock` is held.
    private let lock = NSLock()
    private var rows: [KeychainFile.RowKey: KeychainFile.CachedRow] = [:]
    private var digests: [KeychainFile.DigestKey: Data] = [:]
    private var currentGeneration: UInt64 = 0
    private let decrypted = Atomic<Int>(0)

    /// Moves on with every key change (``clear()``).
    var generation: UInt64 { lock.lock(); defer { lock.unlock() }; return currentGeneration }

    /// How many rows were decrypted (cache hits not counted).
    var decryptions: Int { decrypted.load(ordering: .relaxed) }

    /// Counts one decryption (an atomic counter: readers in parallel do not meet on the lock for it).
    func countDecryption() { decrypted.add(1, ordering: .relaxed) }

    /// Empties both caches (a key change): rows decrypted under older keys are not stored after this.
    func clear() {
        lock.lock()
        rows.removeAll()
        digests.removeAll()
        currentGeneration &+= 1
        lock.unlock()
    }

    /// Empties the row cache only (a rolled-back write, caching turned off, another instance's change).
    func clearRows() { lock.lock(); rows.removeAll(); lock.unlock() }

    /// The cached candidate of `key` when its stored columns are still `columns`.
    func row(_ key: KeychainFile.RowKey, columns: KeychainFile.RowColumns) -> Candidate? {
        lock.lock()
        defer { lock.unlock() }
        guard let hit = rows[key], hit.columns == columns else { return nil }
        return hit.candidate
    }

    func hasRow(_ key: KeychainFile.RowKey) -> Bool { lock.lock(); defer { lock.unlock() }; return rows[key] != nil }

    /// Stores a row decrypted with keys of `generation` (ignored when the keys changed since).
    func store(_ key: KeychainFile.RowKey, _ row: KeychainFile.CachedRow?, generation: UInt64) {
        lock.lock()
        defer { lock.unlock() }
        guard generation == currentGeneration else { return }
        if rows.count >= 16_384 { rows.removeAll() }
        rows[key] = row
    }

    func removeRow(_ key: KeychainFile.RowKey) { lock.lock(); rows[key] = nil; lock.unlock() }

    func digest(_ key: KeychainFile.DigestKey, generation: UInt64) -> Data? {
        lock.lock()
        defer { lock.unlock() }
        return generation == currentGeneration ? digests[key] : nil
    }

    func storeDigest(_ key: KeychainFile.DigestKey, _ digest: Data, generation: UInt64) {
        lock.lock()
        defer { lock.unlock() }
        guard generation == currentGeneration else { return }
        if digests.count >= 4_096 { digests.removeAll(keepingCapacity: true) }
        digests[key] = digest
    }
}
