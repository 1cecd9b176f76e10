import Foundation
import KeychainEngine
import KeychainSealing

// Reads that scale with threads.
//
// A read takes the instance's mutex only to bring the instance up to date with the file (another process's lock,
// the auto-lock timeout, a replaced file) and copy what it reads with (a `ReadSnapshot`: the keys, the format
// version). It then reads and decrypts on a connection of its own from the pool, with no lock of the instance held:
// SQLite's WAL lets every connection read the last commit while a writer appends to the log, so readers wait neither
// for each other nor for a writer's flush. The caches of decrypted rows and digests have a lock of their own
// (`RowCaches`), held for a dictionary lookup.
//
// Decision: a read that took its snapshot before another thread's `lock()` may still return what it read once
// `lock()` has returned, as a read that ran just before it would have; reads that start after `lock()` see the
// keychain locked. Rows it decrypted with the old keys are not cached (the caches' generation moved on).

/// What a pooled read reads with, copied under the mutex.
struct ReadSnapshot {
    let keys: KeySet?
    let version: Int64
    let generation: UInt64
    let caching: Bool
    let device: UInt64
    let inode: UInt64
    let busyTimeout: TimeInterval
}

/// One transaction's view of the rows: the connection it reads through, the keys and format version it reads with.
final class RowSource {
    let db: SQLiteConnection
    let keys: KeySet?
    let version: Int64
    /// ``RowCaches/generation`` of `keys`.
    let generation: UInt64
    let caching: Bool
    /// Whether the SQLite transaction has started.
    var began = false

    init(db: SQLiteConnection, keys: KeySet?, version: Int64, generation: UInt64, caching: Bool) {
        self.db = db
        self.keys = keys
        self.version = version
        self.generation = generation
        self.caching = caching
    }
}

/// Idle read connections to one keychain file, each used by one thread at a time.
final class ReaderPool: @unchecked Sendable {
    // @unchecked Sendable: `idle` is reached only while `lock` is held; a connection taken out belongs to one thread.
    private let lock = NSLock()
    private var idle: [(db: SQLiteConnection, device: UInt64, inode: UInt64)] = []
    /// Idle connections kept (more are opened when more threads read at once, and closed when given back).
    static let capacity = 16

    /// A connection to the file `device`/`inode` at `path`: an idle one, else a new one opened through the same
    /// checks as the instance's own (no lock held). Nil when the file at `path` is no longer that file, or cannot be
    /// opened: the caller then reads under the mutex.
    func take(path: String, device: UInt64, inode: UInt64) -> SQLiteConnection? {
        lock.lock()
        while let last = idle.popLast() {
            if last.device == device && last.inode == inode {
                lock.unlock()
                return last.db
            }
        }
        lock.unlock()
        guard let (db, _, dev, ino) = try? KeychainFile.openChecked(path, waiting: 0), dev == device, ino == inode else { return nil }
        return db
    }

    /// Gives a connection back after its transaction ended.
    func give(_ db: SQLiteConnection, device: UInt64, inode: UInt64) {
        lock.lock()
        defer { lock.unlock() }
        if idle.count < Self.capacity { idle.append((db, device, inode)) }
    }

    /// Closes every idle connection.
    func removeAll() {
        lock.lock()
        let closing = idle
        idle.removeAll()
        lock.unlock()
        _ = closing
    }
}
