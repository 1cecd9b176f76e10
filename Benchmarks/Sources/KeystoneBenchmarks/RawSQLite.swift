import CBaselineSQLite
import Foundation

/// The baseline for the keychain file: raw SQLite with the same pragmas (WAL, synchronous=FULL),
/// one table of (key BLOB PRIMARY KEY, value BLOB), prepared statements, no encryption.
final class RawSQLite {
    private var db: OpaquePointer?
    private var upsert: OpaquePointer?
    private var select: OpaquePointer?
    private var begin: OpaquePointer?
    private var commit: OpaquePointer?

    init(path: String) {
        precondition(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nil) == SQLITE_OK)
        exec("PRAGMA journal_mode=WAL")
        exec("PRAGMA synchronous=FULL")
        exec("PRAGMA busy_timeout=5000")
        exec("CREATE TABLE IF NOT EXISTS items (key BLOB PRIMARY KEY, value BLOB NOT NULL)")
        upsert = prepare("INSERT INTO items (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
        select = prepare("SELECT value FROM items WHERE key = ?1")
        begin = prepare("BEGIN IMMEDIATE")
        commit = prepare("COMMIT")
    }

    deinit {
        for statement in [upsert, select, begin, commit] { sqlite3_finalize(statement) }
        sqlite3_close_v2(db)
    }

    private func exec(_ sql: String) {
        precondition(sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK, String(cString: sqlite3_errmsg(db)))
    }

    private func prepare(_ sql: String) -> OpaquePointer? {
        var statement: OpaquePointer?
        precondition(sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK)
        return statement
    }

    private func step(_ statement: OpaquePointer?) -> Int32 {
        let rc = sqlite3_step(statement)
        sqlite3_reset(statement)
        return rc
    }

    /// One durable single-row transaction: BEGIN IMMEDIATE, upsert, COMMIT.
    func save(key: Data, value: Data) {
        _ = step(begin)
        key.withUnsafeBytes { k in
            value.withUnsafeBytes { v in
                sqlite3_bind_blob(upsert, 1, k.baseAddress, Int32(k.count), nil)
                sqlite3_bind_blob(upsert, 2, v.baseAddress, Int32(v.count), nil)
                _ = sqlite3_step(upsert)
                sqlite3_reset(upsert)
            }
        }
        _ = step(commit)
    }

    /// Bulk load inside one transaction (setup only, not measured).
    func load(_ rows: [(Data, Data)]) {
        exec("BEGIN")
        for (k, v) in rows {
            k.withUnsafeBytes { kb in
                v.withUnsafeBytes { vb in
                    sqlite3_bind_blob(upsert, 1, kb.baseAddress, Int32(kb.count), nil)
                    sqlite3_bind_blob(upsert, 2, vb.baseAddress, Int32(vb.count), nil)
                    _ = sqlite3_step(upsert)
                    sqlite3_reset(upsert)
                }
            }
        }
        exec("COMMIT")
    }

    /// A point read by key.
    func read(key: Data) -> Data? {
        var result: Data?
        key.withUnsafeBytes { k in
            sqlite3_bind_blob(select, 1, k.baseAddress, Int32(k.count), nil)
            if sqlite3_step(select) == SQLITE_ROW, let bytes = sqlite3_column_blob(select, 0) {
                result = Data(bytes: bytes, count: Int(sqlite3_column_bytes(select, 0)))
            }
            sqlite3_reset(select)
        }
        return result
    }
}
