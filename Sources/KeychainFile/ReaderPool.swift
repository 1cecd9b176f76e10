import Foundation
import KeychainEngine
import KeychainSealing
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Reads that scale with threads.
//
// A read runs on a connection of its own from the pool, with no lock of the instance held: SQLite's WAL lets every
// connection read the last commit while a writer appends to the log, so readers wait neither for each other nor for a
// writer's flush. What it reads with (a `ReadSnapshot`: the keys, the format version, the header's lock fields) is
// copied under the instance's mutex only when something may have changed since the connection last copied it:
//
// - the instance changed: every hold of the mutex moves `stateGeneration` on (an atomic counter; every mutable
//   property of the instance changes only under the mutex), except a copy's own hold when its refresh changed nothing
//   a copy holds, and a connection's copy is used only while the counter still has the value it was copied at;
// - another process committed: the read's own transaction reads `PRAGMA data_version` (no new transaction: it is the
//   read's snapshot), and when it moved, the header's version, lock epoch and settings, in that same snapshot, must
//   still be those the copy was made with (another process's lock bumps the epoch: the read then goes through the
//   mutex, which drops the keys, and sees the keychain locked);
// - the file was replaced or deleted (`stat` of the path, no lock), the auto-lock timeout passed (the copy's
//   deadline), or the keys are not all there (a locked keychain looks for another process's unlock on every read,
//   under the mutex, as before).
//
// Decision: a read that passed these checks before another thread's `lock()` may still return what it read once
// `lock()` has returned, as a read that ran just before it would have; reads that start after `lock()` see the
// keychain locked. Rows it decrypted with the old keys are not cached (the caches' generation moved on). A read
// never uses keys older than the header it reads rows with: the epoch is checked in the read's own transaction.

/// What a pooled read reads with, copied under the mutex.
struct ReadSnapshot {
    let keys: KeySet?
    let version: Int64
    let generation: UInt64
    let caching: Bool
    let device: UInt64
    let inode: UInt64
    let busyTimeout: TimeInterval
    /// The header's lock epoch and settings the copy was made with.
    let epoch: Int64
    let settings: KeychainSettings
    /// When the auto-lock timeout takes the full keys away (nil: never, or not fully unlocked).
    let lockDeadline: Date?
    let clock: @Sendable () -> Date

    /// Whether a read may use this copy without the mutex: all keys held (a keychain that is not fully unlocked looks
    /// for another process's unlock at every read), and the auto-lock timeout not passed.
    var servesWithoutMutex: Bool {
        guard keys?.lockState == .unlocked else { return false }
        if let lockDeadline, clock() >= lockDeadline { return false }
        return true
    }
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

/// A read connection of the pool, with what it last read with: used by one thread at a time.
final class PooledReader {
    let db: SQLiteConnection
    let device: UInt64
    let inode: UInt64
    /// The copy of the instance's state reads on this connection use, and the ``KeychainFile/stateGeneration`` it
    /// was made at.
    var snapshot: ReadSnapshot?
    var stateGeneration: UInt64 = 0
    /// `PRAGMA data_version` of this connection when the header was last found to agree with `snapshot`.
    var checkedDataVersion: Int64 = -1
    /// The stored bytes of the header's version, epoch and settings found to agree with `snapshot`.
    var checkedFields: [Data?]?
    var busyTimeout: TimeInterval = -1

    init(db: SQLiteConnection, device: UInt64, inode: UInt64) {
        self.db = db
        self.device = device
        self.inode = inode
    }

    /// Forgets the copy: the next read makes a new one under the mutex.
    func invalidate() {
        snapshot = nil
        checkedDataVersion = -1
        checkedFields = nil
    }
}

/// Idle read connections to one keychain file, each used by one thread at a time.
///
/// Striped: a thread takes from and gives back to the stripe of its thread id, so readers on different threads
/// rarely meet on a stripe's lock (held only to pop or push one connection).
final class ReaderPool: @unchecked Sendable {
    // @unchecked Sendable: each stripe's `idle` is reached only while its lock is held; a reader taken out belongs to
    // one thread.
    private final class Stripe {
        let lock = NSLock()
        var idle: [PooledReader] = []
    }

    private let stripes: [Stripe] = (0..<ReaderPool.stripeCount).map { _ in Stripe() }
    static let stripeCount = 8
    /// Idle connections kept per stripe (more are opened when more threads read at once, and closed when given back).
    static let capacity = 4

    private var stripe: Stripe {
        #if canImport(Glibc)
        let id = UInt64(pthread_self())
        #else
        let id = UInt64(UInt(bitPattern: pthread_self()))
        #endif
        // Fibonacci hashing: thread ids are addresses a fixed stride apart; the top 3 bits of the product spread them.
        return stripes[Int((id &* 0x9E37_79B9_7F4A_7C15) >> 61)]
    }

    /// A connection to the file `device`/`inode` at `path`: an idle one, else a new one opened through the same
    /// checks as the instance's own (no lock held). Nil when the file at `path` is no longer that file, or cannot be
    /// opened: the caller then reads under the mutex.
    func take(path: String, device: UInt64, inode: UInt64) -> PooledReader? {
        let stripe = self.stripe
        stripe.lock.lock()
        while let last = stripe.idle.popLast() {
            if last.device == device && last.inode == inode {
                stripe.lock.unlock()
                return last
            }
        }
        stripe.lock.unlock()
        guard let (db, _, dev, ino) = try? KeychainFile.openChecked(path, waiting: 0), dev == device, ino == inode else { return nil }
        return PooledReader(db: db, device: dev, inode: ino)
    }

    /// Gives a connection back after its transaction ended.
    func give(_ reader: PooledReader) {
        let stripe = self.stripe
        stripe.lock.lock()
        defer { stripe.lock.unlock() }
        if stripe.idle.count < Self.capacity { stripe.idle.append(reader) }
    }

    /// Closes every idle connection.
    func removeAll() {
        var closing: [PooledReader] = []
        for stripe in stripes {
            stripe.lock.lock()
            closing += stripe.idle
            stripe.idle.removeAll()
            stripe.lock.unlock()
        }
        _ = closing
    }
}

/// How a pooled read ended: with the result, or handing over to a read under the mutex.
enum PooledOutcome<T> {
    case done(T)
    case underMutex
}

extension KeychainFile {
    /// The copy a pooled read reads with. Mutex held, after ``refresh()``; nil when reads must run under the mutex
    /// (inside this thread's write, or pooled reads turned off).
    func readSnapshot() -> ReadSnapshot? {
        guard !inTransaction, pooledReads else { return nil }
        var deadline: Date?
        if keys?.lockState == .unlocked, let timeout = header.settings.lockAfterTimeout, let since = unlockedAt {
            deadline = since.addingTimeInterval(timeout)
        }
        return ReadSnapshot(keys: keys, version: header.version, generation: caches.generation, caching: cachingEnabled,
                            device: device, inode: inode, busyTimeout: busyTimeoutSetting, epoch: epoch, settings: header.settings,
                            lockDeadline: deadline, clock: clock)
    }

    /// What of the instance a pooled read's copy holds or depends on (``refresh()`` may change it). A change of keys
    /// always moves the caches' generation (`keys`' `didSet`).
    private struct CopiedState: Equatable {
        var cachesGeneration: UInt64
        var device: UInt64
        var inode: UInt64
        var epoch: Int64
        var version: Int64
        var settings: KeychainSettings
        var unlockedAt: Date?
        var gone: Bool
    }

    /// Mutex held.
    private var copiedState: CopiedState {
        CopiedState(cachesGeneration: caches.generation, device: device, inode: inode, epoch: epoch, version: header.version,
                    settings: header.settings, unlockedAt: unlockedAt, gone: gone != nil)
    }

    /// Brings the instance up to date with the file and copies what a pooled read reads with, and the
    /// `stateGeneration` the copy is valid at. Nil when reads must run under the mutex (``readSnapshot()``).
    ///
    /// Holds the mutex as ``withMutexWaitingOutside(_:)`` does (a busy file is waited for outside it), but moves
    /// `stateGeneration` on only when the refresh changed what copies hold: readers making their copies at the same
    /// time do not invalidate each other's (each took the mutex again, in turn, at every read).
    private func copyForPooledRead() throws -> (ReadSnapshot, UInt64)? {
        var waiter: BusyWaiter?
        while true {
            var outermost = true
            var timeout: TimeInterval = 0
            var hook: (@Sendable (BusyWait) -> Void)?
            do {
                mutex.lock()
                mutexDepth += 1
                defer { mutexDepth -= 1; mutex.unlock() }
                outermost = mutexDepth == 1
                timeout = busyTimeoutSetting
                hook = testHooks.busyWait
                let before = copiedState
                do { try refresh() } catch {
                    if copiedState != before { stateGeneration.add(1, ordering: .releasing) }
                    throw error
                }
                if copiedState != before { stateGeneration.add(1, ordering: .releasing) }
                return readSnapshot().map { ($0, stateGeneration.load(ordering: .acquiring)) }
            } catch let error as SQLiteError where error.isBusy && outermost {
                if waiter == nil { waiter = BusyWaiter() }
                try waiter!.wait(path: path, timeout: timeout, hook: hook)
            }
        }
    }

    /// Runs `body` in a read transaction on a pooled connection, with no lock of the instance held (see the top of
    /// this file); `.underMutex` when the read must run under the mutex instead (nothing ran).
    func readPooled<T>(_ body: (any StorageReader) throws -> T) throws -> PooledOutcome<T> {
        var info = stat()
        // Deleted: the read under the mutex reports it.
        guard stat(path, &info) == 0 else { return .underMutex }
        let device = UInt64(info.st_dev), inode = UInt64(info.st_ino)
        guard let reader = readers.take(path: path, device: device, inode: inode) else { return .underMutex }
        defer { readers.give(reader) }
        // Twice at most: a header that moved between the copy and the read's transaction (another process's lock
        // right then) makes one more copy; then the read runs under the mutex.
        for _ in 0..<2 {
            let generation = stateGeneration.load(ordering: .acquiring)
            if reader.snapshot == nil || reader.stateGeneration != generation || !(reader.snapshot!.servesWithoutMutex) {
                reader.invalidate()
                let copy = try copyForPooledRead()
                guard let (snapshot, at) = copy, snapshot.device == device, snapshot.inode == inode else { return .underMutex }
                reader.snapshot = snapshot
                reader.stateGeneration = at
            }
            let snapshot = reader.snapshot!
            if reader.busyTimeout != snapshot.busyTimeout {
                // SQLite's busy handler waits in this thread: no lock of the instance is held.
                reader.db.setBusyTimeout(snapshot.busyTimeout)
                reader.busyTimeout = snapshot.busyTimeout
            }
            let source = RowSource(db: reader.db, keys: snapshot.keys, version: snapshot.version,
                                   generation: snapshot.generation, caching: snapshot.caching)
            do {
                try reader.db.statement("BEGIN").run()
                source.began = true
                guard try headerAgrees(reader, snapshot) else {
                    try? reader.db.statement("ROLLBACK").run()
                    reader.invalidate()
                    continue
                }
            } catch let error as SQLiteError {
                if source.began { try? reader.db.statement("ROLLBACK").run() }
                reader.invalidate()
                if error.isBusy {
                    throw EngineError(Status.notAvailable, "the keychain file \(path) stayed busy: another connection holds its lock")
                }
                throw error.engineError
            }
            do {
                let result = try body(Transaction(file: self, source: source, writing: false))
                try reader.db.statement("COMMIT").run()
                return .done(result)
            } catch {
                try? reader.db.statement("ROLLBACK").run()
                if let sqlite = error as? SQLiteError { throw sqlite.engineError }
                throw error
            }
        }
        return .underMutex
    }

    /// Whether the header in the read transaction just begun on `reader` has the format version, lock epoch and
    /// settings `snapshot` was made with. Starts the transaction's snapshot (`PRAGMA data_version` reads the file):
    /// `SQLITE_BUSY` is thrown as it is, before anything was read.
    private func headerAgrees(_ reader: PooledReader, _ snapshot: ReadSnapshot) throws -> Bool {
        let versionStatement = try reader.db.statement("PRAGMA data_version")
        guard try versionStatement.step() else { versionStatement.reset(); return false }
        let dataVersion = versionStatement.int64(0)
        versionStatement.reset()
        if dataVersion == reader.checkedDataVersion { return true }
        let statement = try reader.db.statement("SELECT name, value FROM keystone_header WHERE name IN ('version', 'epoch', 'settings')")
        var values: [String: Data] = [:]
        while try statement.step() {
            if let name = statement.text(0) { values[name] = statement.data(1) }
        }
        statement.reset()
        let fields = [values["version"], values["epoch"], values["settings"]]
        if fields != reader.checkedFields {
            func integer(_ data: Data?) -> Int64? { data.flatMap { String(data: $0, encoding: .utf8) }.flatMap { Int64($0) } }
            guard integer(fields[0]) == snapshot.version, (fields[1] == nil ? 0 : integer(fields[1])) == snapshot.epoch,
                  let data = fields[2], let settings = try? JSONDecoder().decode(KeychainSettings.self, from: data),
                  settings == snapshot.settings else { return false }
            reader.checkedFields = fields
        }
        reader.checkedDataVersion = dataVersion
        return true
    }
}
