import CSQLite
import Foundation
import KeychainEngine
import KeychainSealing

// The only file that touches SQLite's C API.

/// A SQLite failure, with SQLite's result code.
struct SQLiteError: Error, CustomStringConvertible {
    let code: Int32
    let message: String
    var description: String { "SQLite error \(code): \(message)" }

    /// Whether another connection holds a lock this one needs (`SQLITE_BUSY` and its extended codes): the
    /// keychain file waits and retries these outside its mutex (``KeychainFile/withMutexWaitingOutside(_:)``).
    var isBusy: Bool { code & 0xFF == SQLITE_BUSY }

    /// The keychain status a storage failure surfaces as.
    var engineError: EngineError {
        switch code & 0xFF {
        case SQLITE_BUSY, SQLITE_LOCKED: return EngineError(Status.notAvailable, "the keychain file stayed busy: another connection holds its lock")
        case SQLITE_FULL: return EngineError(Status.diskFull, "the disk is full")
        case SQLITE_READONLY, SQLITE_PERM, SQLITE_CANTOPEN: return EngineError(Status.wrPerm, "the keychain file cannot be written")
        case SQLITE_NOTADB, SQLITE_CORRUPT: return EngineError(Status.invalidKeychain, "the file is not a valid keychain")
        case SQLITE_CONSTRAINT: return EngineError(Status.duplicateItem, "an item with the same primary key exists")
        default: return EngineError(Status.io, "keychain file I/O failed (SQLite \(code))")
        }
    }
}

/// One connection to a SQLite database. Not thread-safe: its owner serialises access.
final class SQLiteConnection {
    private var db: OpaquePointer?
    private var cache: [String: SQLiteStatement] = [:]
    /// The group-commit flusher of this connection's log, once set up (`GroupCommit.swift`); its owner's mutex held.
    var logFlusher: LogFlusher?
    /// Whether setting up group commit was tried on this connection (once).
    var groupCommitAttempted = false

    /// Opens `path`. `busyTimeout` is how long SQLite itself waits for another connection's lock (its busy
    /// handler, sleeping in the calling thread): the keychain file's own connection uses 0 and waits outside its
    /// mutex instead; connections used with no lock held (opening, `isKeychain`, deletion) wait up to the
    /// configured ``KeychainFile/busyTimeout``.
    init(path: String, create: Bool, busyTimeout: TimeInterval = KeychainFile.defaultBusyTimeout) throws {
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0)
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close_v2(db)
            db = nil
            throw SQLiteError(code: rc, message: message)
        }
        setBusyTimeout(busyTimeout)
        sqlite3_extended_result_codes(db, 1)
    }

    /// Sets how long SQLite's busy handler waits, in this thread, for another connection's lock (0: it reports
    /// `SQLITE_BUSY` at once).
    func setBusyTimeout(_ seconds: TimeInterval) {
        let milliseconds = seconds.isFinite ? Int32(clamping: Int64(max(0, seconds) * 1000)) : Int32.max
        sqlite3_busy_timeout(db, milliseconds)
    }

    deinit {
        cache.removeAll()
        sqlite3_close_v2(db)
    }

    var lastError: SQLiteError { SQLiteError(code: sqlite3_errcode(db), message: String(cString: sqlite3_errmsg(db))) }

    /// Runs SQL without results.
    func exec(_ sql: String) throws {
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw SQLiteError(code: rc, message: String(cString: sqlite3_errmsg(db))) }
    }

    /// A prepared statement, cached by its SQL.
    func statement(_ sql: String) throws -> SQLiteStatement {
        if let cached = cache[sql] { cached.reset(); return cached }
        var raw: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &raw, nil)
        guard rc == SQLITE_OK, let raw else { throw SQLiteError(code: rc, message: String(cString: sqlite3_errmsg(db))) }
        let statement = SQLiteStatement(raw, connection: self)
        cache[sql] = statement
        return statement
    }

    /// A prepared statement for a loop that may still be stepping when another query runs: the cached one
    /// when it is idle, else a new one of its own. The caller resets it when done.
    func freshStatement(_ sql: String) throws -> SQLiteStatement {
        if let cached = cache[sql], !cached.isBusy { cached.reset(); return cached }
        if cache[sql] == nil { return try statement(sql) }
        var raw: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, 0, &raw, nil)
        guard rc == SQLITE_OK, let raw else { throw SQLiteError(code: rc, message: String(cString: sqlite3_errmsg(db))) }
        return SQLiteStatement(raw, connection: self)
    }

    /// Keeps the WAL file when this connection closes. Used on a connection to a file that was deleted or
    /// replaced: its WAL's name may by now belong to the new file, which closing must not delete.
    func keepWALOnClose() {
        var on: Int32 = 1
        sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &on)
    }

    /// A duplicate of the descriptor SQLite writes this connection's write-ahead log with (close-on-exec), when it is
    /// certainly that log: SQLite's unix VFS, and the descriptor's file is the one at `expectedPath`. Nil otherwise
    /// (another VFS, no log open yet, or the name now names another file): the caller then lets SQLite flush.
    ///
    /// SQLite has no call that returns a file's descriptor; its unix VFS keeps it right after three pointers at the
    /// start of its file object (`unixFile`: methods, VFS, inode info, descriptor), unchanged since 3.7. The device
    /// and inode check makes a different layout harmless: a wrong number fails it and group commit stays off.
    func duplicateLogDescriptor(expectedPath: String) -> Int32? {
        var vfsName: UnsafeMutablePointer<CChar>?
        guard sqlite3_file_control(db, "main", SQLITE_FCNTL_VFSNAME, &vfsName) == SQLITE_OK, let vfsName else { return nil }
        let name = String(cString: vfsName)
        sqlite3_free(vfsName)
        guard name == "unix" || name.hasPrefix("unix-") else { return nil }
        var file: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &file) == SQLITE_OK,
              let file, file.pointee.pMethods != nil else { return nil }
        let descriptor = UnsafeRawPointer(file).load(fromByteOffset: 3 * MemoryLayout<UnsafeRawPointer>.stride, as: Int32.self)
        guard descriptor > 2 else { return nil }
        var viaDescriptor = stat()
        var viaPath = stat()
        guard fstat(descriptor, &viaDescriptor) == 0, lstat(expectedPath, &viaPath) == 0,
              (viaDescriptor.st_mode & S_IFMT) == S_IFREG,
              viaDescriptor.st_dev == viaPath.st_dev, viaDescriptor.st_ino == viaPath.st_ino else { return nil }
        let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 3)
        return duplicate >= 0 ? duplicate : nil
    }

    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(db) }
    var changes: Int { Int(sqlite3_changes(db)) }
}

/// A prepared statement.
final class SQLiteStatement {
    private let raw: OpaquePointer
    private unowned let connection: SQLiteConnection

    init(_ raw: OpaquePointer, connection: SQLiteConnection) {
        self.raw = raw
        self.connection = connection
    }

    deinit { sqlite3_finalize(raw) }

    /// Whether the statement has stepped and not yet been reset.
    var isBusy: Bool { sqlite3_stmt_busy(raw) != 0 }

    func reset() {
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
    }

    @discardableResult
    func bind(_ index: Int32, _ data: Data?) -> SQLiteStatement {
        guard let data else { sqlite3_bind_null(raw, index); return self }
        data.withUnsafeBytes { bytes in
            // SQLITE_TRANSIENT: SQLite copies the bytes.
            _ = sqlite3_bind_blob(raw, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count),
                                  unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self))
        }
        return self
    }

    @discardableResult
    func bind(_ index: Int32, _ value: Int64) -> SQLiteStatement {
        sqlite3_bind_int64(raw, index, value)
        return self
    }

    @discardableResult
    func bind(_ index: Int32, _ text: String) -> SQLiteStatement {
        sqlite3_bind_text(raw, index, text, -1, unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self))
        return self
    }

    /// Steps once: true when a row is available.
    func step() throws -> Bool {
        let rc = sqlite3_step(raw)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = SQLiteError(code: rc, message: String(cString: sqlite3_errmsg(sqlite3_db_handle(raw))))
            sqlite3_reset(raw)
            throw error
        }
    }

    /// Runs to completion.
    func run() throws {
        while try step() {}
        sqlite3_reset(raw)
    }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(raw, column) }

    func data(_ column: Int32) -> Data? {
        guard sqlite3_column_type(raw, column) != SQLITE_NULL else { return nil }
        let count = Int(sqlite3_column_bytes(raw, column))
        guard count > 0, let bytes = sqlite3_column_blob(raw, column) else { return Data() }
        return Data(bytes: bytes, count: count)
    }

    func text(_ column: Int32) -> String? {
        guard let c = sqlite3_column_text(raw, column) else { return nil }
        return String(cString: c)
    }
}
