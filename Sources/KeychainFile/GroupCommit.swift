import Foundation
import KeychainEngine
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Group commit: concurrent writers share one flush of the write-ahead log.
//
// With `synchronous=FULL`, SQLite flushes the log inside COMMIT, under the file's write lock and this instance's
// mutex: every durable write waits for its own flush, one after another, and eight writers get one writer's
// throughput. Instead, once a connection has written its log once, it commits with `synchronous=NORMAL` (SQLite
// writes the transaction's frames to the log, and still flushes the log before every checkpoint and the database
// after it) and the keychain file flushes the log itself, with no lock held, before the call returns:
//
// 1. A writer commits under the mutex (frames written, not yet flushed) and takes a ticket: the number of commits
//    this connection has written to its log, its own included.
// 2. With the mutex released it waits until a flush that started after its commit has finished. When no flush is
//    running it becomes the leader: it flushes the log (`fdatasync`) for every commit written so far, then wakes
//    the writers it covered. Writers that commit meanwhile queue for the next flush, which one of them leads.
//
// Each writer's transaction is its own (its result and its failure, `errSecDuplicateItem` included, are its own and
// roll back only itself); what writers share is the flush. A call still returns only when its write is on disk: the
// log is append-only between checkpoints and checkpoints flush it first, so a flush covers every commit written
// before it started. Other processes commit and flush the same way, each with no SQLite lock held while it flushes:
// a writer there waits for the write lock only while another writes its frames (microseconds), not for a flush.
//
// Decision: a write is visible to other connections from its commit, before the flush that makes it durable ends
// (as SQLite's own `synchronous=NORMAL`, PostgreSQL's `synchronous_commit=off` readers, and any system whose readers
// do not wait for the disk). Only a power loss or a kernel crash in that window (about one flush) can then take back
// a write another reader saw; the writer itself has not been told it succeeded. A killed process loses nothing: its
// frames are in the kernel's page cache, which the log's next reader recovers from.
//
// Decision: a failed flush (`fdatasync` reporting EIO, ENOSPC…) fails every write waiting on it with `errSecIO`, and
// every later write of that connection too: after a failed flush Linux may drop the failed pages' error state, so a
// later flush that succeeds proves nothing about them. Reopening the keychain starts again from what is on disk.

/// The log flusher of one SQLite connection (see the comment at the top of `GroupCommit.swift`).
final class LogFlusher: @unchecked Sendable {
    // @unchecked Sendable: every mutable property is reached only while `condition` is held.

    /// A descriptor of the connection's write-ahead log (a duplicate of SQLite's own), closed with the flusher.
    private let descriptor: Int32
    /// The file shared with other processes writing the keychain, to share flushes with them (`SharedCommit.swift`);
    /// nil: this connection flushes its own commits.
    let shared: SharedCommit?
    private let condition = NSCondition()
    /// Commits written to the log; the ticket of the latest.
    private var written: UInt64 = 0
    /// Commits known to be on disk.
    private var durable: UInt64 = 0
    private var flushing = false
    /// The errno of a failed flush: every later wait fails.
    private var failure: Int32?
    /// Flushes done (for tests and benchmarks).
    private var flushes = 0

    init(descriptor: Int32, shared: SharedCommit?) {
        self.descriptor = descriptor
        self.shared = shared
    }

    deinit { close(descriptor) }

    /// Records a commit just written to the log (call it right after COMMIT, with the file's mutex held, so that
    /// tickets follow the log's order). Returns the commit's ticket for ``waitUntilDurable(_:beforeFlush:)``.
    func noteCommit() -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        written += 1
        return written
    }

    /// How many commits were written to this connection's log (with group commit on).
    var commitCount: UInt64 {
        condition.lock()
        defer { condition.unlock() }
        return written
    }

    /// How many flushes this connection's log has had.
    var flushCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return flushes
    }

    /// Returns once the commit `ticket` is on disk: leads a flush when none is running, else waits for the running one
    /// and, when it started before this commit, for the next. Call it with no lock held.
    ///
    /// - Parameter beforeFlush: a test hook, called by a leader with no lock held just before it flushes.
    /// - Throws: `EngineError` with `errSecIO` when the flush failed (the write may or may not be on disk).
    func waitUntilDurable(_ ticket: UInt64, beforeFlush: (@Sendable () -> Void)? = nil) throws {
        condition.lock()
        defer { condition.unlock() }
        while durable < ticket {
            if let failure { throw Self.error(failure) }
            if flushing {
                condition.wait()
                continue
            }
            flushing = true
            let target = written
            condition.unlock()
            beforeFlush?()
            let failed: Int32? = shared.map { $0.makeDurable(logDescriptor: descriptor) }
                ?? (fdatasync(descriptor) == 0 ? nil : errno)
            condition.lock()
            flushing = false
            flushes += 1
            if let failed {
                failure = failed
            } else {
                durable = max(durable, target)
            }
            condition.broadcast()
        }
    }

    private static func error(_ code: Int32) -> EngineError {
        EngineError(Status.io, "the disk failed to flush the keychain's log (\(String(cString: strerror(code)))): "
            + "the last writes may not be on disk; reopen the keychain and check them")
    }

    /// Flushes the directory holding the log once, so that a log file created by this connection survives a power
    /// loss with its entry (SQLite does this at its first flush of a new log, which this connection no longer makes).
    static func flushDirectory(of path: String) {
        let directory = (path as NSString).deletingLastPathComponent
        let fd = openFile(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 { fsync(fd); close(fd) }
    }
}

extension KeychainFile {
    /// Whether concurrent writes share flushes of the file's log (group commit); default true.
    ///
    /// On, a write commits its own transaction and then waits, with no lock held, for a flush of the log that covers
    /// it: writers on other threads share that flush. Off, SQLite flushes every commit itself while this instance's
    /// lock is held (`synchronous=FULL`), one writer after another. Either way a write returns only once it is on disk.
    /// - Important: With group commit on, another connection can read a write between its commit and the end of its
    ///   flush (about one flush); a power loss in that window takes back a write someone read, which its writer was
    ///   never told had succeeded.
    public var groupCommitEnabled: Bool {
        get { withMutex { groupCommit } }
        set {
            withMutex {
                groupCommit = newValue
                guard !newValue, !inTransaction else { return }
                // Back to SQLite flushing every commit itself; writers waiting on the flusher keep it until they are done.
                if db.logFlusher != nil, (try? db.exec("PRAGMA synchronous=FULL")) != nil { db.logFlusher = nil }
                db.groupCommitAttempted = false
            }
        }
    }

    /// How many flushes of the log this instance's group commit has made (0 while SQLite flushes every commit itself):
    /// with concurrent writers, fewer than the writes.
    public var logFlushCount: Int { withMutex { db.logFlusher?.flushCount ?? 0 } }

    /// The file this instance shares flushes through with other processes (`SharedCommit.swift`),
    /// once group commit is set up; nil before, or when the file was refused.
    package var sharedCommit: SharedCommit? { withMutex { db.logFlusher?.shared } }

    /// Commits written to this connection's log through group commit (0 while it commits with `synchronous=FULL`).
    package var logCommitsWritten: UInt64 { withMutex { db.logFlusher?.commitCount ?? 0 } }

    /// After a commit on `db` (mutex held): the flusher and ticket the caller waits on with no lock held, or nil when
    /// SQLite flushed the commit itself (`synchronous=FULL`). Sets up group commit after the connection's first
    /// commit (its log is open then): `PRAGMA synchronous` cannot change inside a transaction.
    func committed() -> (LogFlusher, UInt64)? {
        if let flusher = db.logFlusher { return (flusher, flusher.noteCommit()) }
        if groupCommit, !db.groupCommitAttempted {
            db.groupCommitAttempted = true
            let log = path + "-wal"
            if let descriptor = db.duplicateLogDescriptor(expectedPath: log) {
                LogFlusher.flushDirectory(of: log)
                do {
                    try db.exec("PRAGMA synchronous=NORMAL")
                    db.logFlusher = LogFlusher(descriptor: descriptor,
                                               shared: SharedCommit.open(keychainPath: path, logDescriptor: descriptor))
                } catch {
                    close(descriptor)
                    KeystoneLog.logger.notice("group commit is off for this keychain: SQLite refused synchronous=NORMAL", metadata: ["path": "\(path)"])
                }
            } else {
                KeystoneLog.logger.notice("group commit is off for this keychain: its log descriptor could not be checked", metadata: ["path": "\(path)"])
            }
        }
        return nil
    }

    /// Makes the commit just made on `db` durable before returning (mutex held: for the rare commits outside
    /// ``write(_:)``, the header's, which are made durable under the mutex as `synchronous=FULL` would).
    func makeCommitDurable() throws {
        guard let (flusher, ticket) = committed() else { return }
        try flusher.waitUntilDurable(ticket, beforeFlush: nil)
    }
}
