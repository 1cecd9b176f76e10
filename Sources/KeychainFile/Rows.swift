import Crypto
import Foundation
import KeychainEngine
import KeychainSealing
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The rows of a keychain file: transactions, sealing, and the checks that make a tampered row unreadable.
//
// What is authenticated (an attacker with the file but not the password can change none of it unnoticed):
// - `payload` and `wrapped` are AES-GCM sealed; their associated data (format 2) is the class, the protection
//   class, the row id, the `pk` digest and every `d_` digest column, so any column moved, copied or edited makes
//   the row fail to open. (Format 1 rows bound class, protection class and `pk`; their digest columns are
//   recomputed from the decrypted attributes and compared.)
// - The decrypted accessibility must belong to the row's protection class.
// A row failing any check is `Candidate.unreadable` with `errSecDecode`: it is never returned as an item, so no
// query can be answered with another item's secret by moving columns between rows. The engine re-checks every
// decrypted item against the whole query besides.

extension KeychainFile {
    // MARK: - Transactions

    /// Takes the write lock. Never waits: `SQLITE_BUSY` is thrown as it is, for ``withMutexWaitingOutside(_:)`` to
    /// wait with the mutex released and run the whole operation again.
    func beginImmediate() throws {
        try db.statement("BEGIN IMMEDIATE").run()
    }

    /// Runs `body` in a read transaction (a snapshot of the file).
    ///
    /// Reads run in parallel: the rows are read and decrypted on a pooled connection of the reading thread's own
    /// (`ReaderPool.swift`), with no lock of the instance held, so readers neither wait for each other nor for a
    /// writer's flush (a WAL reader reads the last commit). The instance's mutex is taken only when the instance or
    /// the file's header changed since the connection's last read (to bring the instance up to date and copy the keys).
    /// Inside a write of the same thread, the read uses that write's transaction.
    ///
    /// The snapshot is taken before `body` runs: when another connection holds a lock that keeps readers out, the
    /// read waits with no lock of this instance held (``busyTimeout``), and `body` never runs twice.
    /// - Throws: `EngineError` with `errSecNotAvailable` when the file stayed busy; what `body` throws.
    public func read<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        if case .done(let result) = try readPooled(body) { return result }
        return try withMutexWaitingOutside {
            let nested = inTransaction
            if !nested { try refresh() }
            let source = nested ? currentSource! : RowSource(db: db, keys: keys, version: header.version,
                                                              generation: caches.generation, caching: cachingEnabled)
            if !nested {
                do { try beginRead(source) } catch let error as SQLiteError where !error.isBusy { throw error.engineError }
            }
            inTransaction = true
            let previous = currentSource
            currentSource = source
            defer { if !nested { inTransaction = false }; currentSource = previous }
            do {
                let result = try body(Transaction(file: self, source: source, writing: false))
                if !nested, source.began { try db.statement("COMMIT").run() }
                return result
            } catch {
                if !nested, source.began { try? db.statement("ROLLBACK").run() }
                if let sqlite = error as? SQLiteError { throw sqlite.engineError }
                throw error
            }
        }
    }

    /// Runs `body` in a write transaction, and returns once the transaction is on disk.
    ///
    /// The write lock is taken before `body` runs: while another process holds it, the write waits with no lock of
    /// this instance held (``busyTimeout``), and `body` never runs twice. Concurrent writers share flushes of the log
    /// (group commit, `GroupCommit.swift`): each commits its own transaction, then waits with no lock held for a
    /// flush that covers it.
    /// - Throws: `EngineError` with `errSecNotAvailable` when the file stayed busy, `errSecIO` when the flush failed;
    ///   what `body` throws.
    public func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        let (result, pending) = try withMutexWaitingOutside { () throws -> (T, (LogFlusher, UInt64)?) in
            // The replacement first (it may swap the connection), then the rest of the refresh inside the write
            // transaction: the header checked is the one the write commits on.
            try followReplacement()
            do { try beginImmediate() } catch let error as SQLiteError where !error.isBusy { throw error.engineError }
            do { try refresh(inWriteTransaction: true) } catch {
                try? db.statement("ROLLBACK").run()
                throw error
            }
            ensureLogCapacity()
            let source = RowSource(db: db, keys: keys, version: header.version, generation: caches.generation, caching: cachingEnabled)
            source.began = true
            inTransaction = true
            currentSource = source
            defer { inTransaction = false; currentSource = nil }
            do {
                let result = try body(Transaction(file: self, source: source, writing: true))
                try db.statement("COMMIT").run()
                return (result, committed().map { ($0.0, $0.1) })
            } catch {
                try? db.statement("ROLLBACK").run()
                // Rows decrypted in the rolled-back transaction may describe writes that never happened.
                caches.clearRows()
                if let sqlite = error as? SQLiteError { throw sqlite.engineError }
                throw error
            }
        }
        if let (flusher, ticket) = pending {
            let hook = withMutex { testHooks.beforeLogFlush }
            try flusher.waitUntilDurable(ticket, beforeFlush: hook)
        }
        return result
    }

    /// Gives the write-ahead log its full size ahead of use, once per connection, while this connection holds
    /// the write lock (no other writer can be appending frames).
    ///
    /// The bytes added are zeros past the log's last frame: SQLite reads frames only up to the last valid one
    /// (each frame carries the log's salt and a running checksum), so they are never taken for data. The log is
    /// kept when connections close (`SQLITE_FCNTL_PERSIST_WAL`) and reused from its start after each checkpoint,
    /// so commits overwrite blocks the file already has: one flush per durable write instead of two.
    func ensureLogCapacity() {
        guard !logSized else { return }
        logSized = true
        let wal = path + "-wal"
        let fd = openFile(wal, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, Int(info.st_size) < FileFormat.logCapacity else { return }
        let zeros = [UInt8](repeating: 0, count: 65_536)
        var offset = Int(info.st_size)
        while offset < FileFormat.logCapacity {
            let count = min(zeros.count, FileFormat.logCapacity - offset)
            let written = zeros.withUnsafeBytes { pwrite(fd, $0.baseAddress, count, off_t(offset)) }
            guard written > 0 else { return }  // a full disk: the log grows as it would have
            offset += written
        }
        fdatasync(fd)
    }

    /// Starts the read transaction and takes its snapshot (the first read does), so that a busy file is met before
    /// the caller's body runs. `SQLITE_BUSY` is thrown as it is (nothing was read).
    private func beginRead(_ source: RowSource) throws {
        try source.db.statement("BEGIN").run()
        do {
            try source.db.statement("SELECT 1 FROM keystone_header LIMIT 1").run()
        } catch {
            try? source.db.statement("ROLLBACK").run()
            throw error
        }
        source.began = true
    }

    /// Starts the SQLite read transaction on first use.
    private func ensureBegun(_ source: RowSource) throws {
        if !source.began {
            try source.db.statement("BEGIN").run()
            source.began = true
        }
    }

    private func unavailable(_ cls: ItemClass, _ rowID: Int64) -> Candidate {
        .unreadable(itemClass: cls, rowID: rowID, error: EngineError.interactionNotAllowed("the keychain is locked"))
    }

    private static func damaged(_ cls: ItemClass, _ rowID: Int64, _ reason: String) -> Candidate {
        KeystoneLog.logger.warning("damaged keychain item", metadata: ["class": "\(cls.rawValue)", "row": "\(rowID)", "reason": "\(reason)"])
        return .unreadable(itemClass: cls, rowID: rowID, error: EngineError(Status.decode, "the item failed its integrity check (\(reason))"))
    }

    // MARK: - Reading rows

    /// The columns read for every row: `rowid, pk, pclass, wrapped, payload, d_…` (schema order).
    private func selectColumns(_ cls: ItemClass) -> String { Self.selectSQL[cls]!.all }

    /// Made once per class: every search names its statement without building its SQL.
    private static let selectSQL: [ItemClass: (all: String, byPrimaryKey: String)] = Dictionary(uniqueKeysWithValues: ItemClass.allCases.map { cls in
        let digestColumns = ClassSchema.of(cls).primaryKey.map { "d_\($0)" }.joined(separator: ", ")
        let all = "SELECT rowid, pk, pclass, wrapped, payload, \(digestColumns) FROM \(cls.rawValue)"
        return (cls, (all, all + " WHERE pk = ?1"))
    })

    private struct SearchShape: Hashable {
        let itemClass: ItemClass
        let attributes: [String]
    }

    /// The SQL of searches by digest columns, by class and constrained attributes: made once per shape (a few recur,
    /// as service and account), shared by every connection, bounded.
    private static let searchShapes = Mutex<[SearchShape: String]>([:])

    /// The SQL of a search of `cls` constraining the digest columns of `ordered` (sorted), bound as ?1, ?2, … in order.
    private static func searchSQL(_ cls: ItemClass, _ ordered: [String], _ select: String) -> String {
        let shape = SearchShape(itemClass: cls, attributes: ordered)
        if let known = searchShapes.withLock({ $0[shape] }) { return known }
        let conditions = ordered.enumerated().map { "d_\($0.element) = ?\($0.offset + 1)" }
        let sql = conditions.isEmpty ? "\(select) ORDER BY rowid" : "\(select) WHERE \(conditions.joined(separator: " AND ")) ORDER BY rowid"
        searchShapes.withLock { shapes in
            if shapes.count >= 256 { shapes.removeAll() }
            shapes[shape] = sql
        }
        return sql
    }

    /// Decrypts and checks the row the statement stands on.
    /// Whole-class scans do not use the cache: they would fill it with rows read once.
    private func row(_ source: RowSource, _ cls: ItemClass, _ statement: SQLiteStatement, keys: KeySet, cacheable: Bool) -> Candidate {
        let schema = ClassSchema.of(cls)
        let rowID = statement.int64(0)
        let columns = RowColumns(
            pk: statement.data(1) ?? Data(), pclass: statement.text(2) ?? "", wrapped: statement.data(3) ?? Data(),
            payload: statement.data(4) ?? Data(), digests: (0..<schema.primaryKey.count).map { statement.data(Int32(5 + $0)) ?? Data() })
        let key = RowKey(itemClass: cls, rowID: rowID)
        let caching = source.caching && cacheable
        if caching, let hit = caches.row(key, columns: columns) { return hit }
        let candidate = decrypt(cls, rowID: rowID, columns, keys: keys, version: source.version, generation: source.generation)
        if caching, case .item = candidate {
            caches.store(key, CachedRow(columns: columns, candidate: candidate), generation: source.generation)
        }
        return candidate
    }

    private func decrypt(_ cls: ItemClass, rowID: Int64, _ row: RowColumns, keys: KeySet, version: Int64, generation: UInt64) -> Candidate {
        caches.countDecryption()
        guard let protection = ProtectionClass(rawValue: row.pclass) else { return Self.damaged(cls, rowID, "protection class") }
        let aad = self.aad(cls, row.pclass, row.pk, digests: row.digests, rowID: rowID, version: version)
        let item: StoredItem
        switch SealedItem(protection: protection, wrappedKey: row.wrapped, payload: row.payload).open(itemClass: cls, rowID: rowID, keys: keys, aad: aad) {
        case .locked: return unavailable(cls, rowID)
        case .damaged(let reason): return Self.damaged(cls, rowID, reason)
        case .item(let opened): item = opened
        }
        if version < 2 {
            // Format 1 did not seal the digest columns: check them against the decrypted attributes.
            let expected = digests(of: cls, item.attributes, keys.indexMAC, version: version, generation: generation)
            guard expected.pk == row.pk, expected.columns == row.digests else { return Self.damaged(cls, rowID, "index columns") }
        }
        return .item(item)
    }

    fileprivate func forEachCandidate(_ source: RowSource, _ cls: ItemClass, _ constraints: [String: AttributeValue],
                                      _ body: (Candidate) throws -> Bool) throws {
        try ensureBegun(source)
        let db = source.db
        guard let keys = source.keys else {
            // Locked: without the index key no constraint can be checked; every row may match.
            let statement = try db.freshStatement("SELECT rowid FROM \(cls.rawValue) ORDER BY rowid")
            defer { statement.reset() }
            while try statement.step() {
                guard try body(unavailable(cls, statement.int64(0))) else { return }
            }
            return
        }
        let schema = ClassSchema.of(cls)
        let select = selectColumns(cls)
        let statement: SQLiteStatement
        // Scans of a whole class (no constraint beyond group and sync) bypass the row cache.
        let cacheable = constraints.keys.contains { $0 != Key.synchronizable && $0 != Key.accessGroup }
        if constraints.count == schema.primaryKey.count {
            statement = try db.freshStatement(Self.selectSQL[cls]!.byPrimaryKey)
            statement.bind(1, primaryKeyDigest(cls, constraints, keys.indexMAC, version: source.version, generation: source.generation))
        } else {
            let ordered = constraints.keys.sorted()
            statement = try db.freshStatement(Self.searchSQL(cls, ordered, select))
            for (offset, key) in ordered.enumerated() {
                statement.bind(Int32(offset + 1), digest(cls, key, constraints[key]!, keys.indexMAC, version: source.version, generation: source.generation))
            }
        }
        defer { statement.reset() }
        while try statement.step() {
            guard try body(row(source, cls, statement, keys: keys, cacheable: cacheable)) else { return }
        }
    }

    fileprivate func candidate(_ source: RowSource, _ cls: ItemClass, _ rowID: Int64) throws -> Candidate? {
        try ensureBegun(source)
        let statement = try source.db.freshStatement("\(selectColumns(cls)) WHERE rowid = ?1")
        statement.bind(1, rowID)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        guard let keys = source.keys else { return unavailable(cls, rowID) }
        return row(source, cls, statement, keys: keys, cacheable: true)
    }

    // MARK: - Writing rows

    /// The digests and sealed columns of `item` at `rowID`; `encoded` receives the plaintext sealed (see
    /// `SealedItem.init(sealing:keys:aad:encoded:)`).
    private func sealed(_ item: StoredItem, rowID: Int64, keys: KeySet, version: Int64,
                        encoded: inout Data) throws -> (Digests, String, Data, Data) {
        let digests = digests(of: item.itemClass, item.attributes, keys.indexMAC, version: version)
        let sealed = try SealedItem(sealing: item, keys: keys, aad: { protection in
            self.aad(item.itemClass, protection.rawValue, digests.pk, digests: digests.columns, rowID: rowID, version: version)
        }, encoded: &encoded)
        return (digests, sealed.protection.rawValue, sealed.wrappedKey, sealed.payload)
    }

    /// The write statements' SQL, made once per class (a write names its class's statement without building it).
    private struct WriteSQL {
        let insert: String
        /// Rewrites the sealed columns of a row whose primary key is unchanged.
        let updateSealed: String
        /// Rewrites every column (the primary key changed).
        let updateAll: String

        init(_ cls: ItemClass) {
            let keyColumns = ClassSchema.of(cls).primaryKey
            let columns = keyColumns.map { "d_\($0)" }
            let placeholders = (0..<(columns.count + 5)).map { "?\($0 + 1)" }.joined(separator: ", ")
            insert = "INSERT INTO \(cls.rawValue) (rowid, pk, pclass, wrapped, payload, \(columns.joined(separator: ", "))) VALUES (\(placeholders))"
            updateSealed = "UPDATE \(cls.rawValue) SET pclass = ?3, wrapped = ?4, payload = ?5 WHERE rowid = ?1 AND pk = ?2"
            let assignments = keyColumns.enumerated().map { "d_\($0.element) = ?\($0.offset + 6)" }.joined(separator: ", ")
            updateAll = "UPDATE \(cls.rawValue) SET pk = ?2, pclass = ?3, wrapped = ?4, payload = ?5, \(assignments) WHERE rowid = ?1"
        }

        static let byClass: [ItemClass: WriteSQL] = Dictionary(uniqueKeysWithValues: ItemClass.allCases.map { ($0, WriteSQL($0)) })
    }

    /// The row id the next insert into `cls` gets (AUTOINCREMENT: one more than any id ever used).
    private func nextRowID(_ cls: ItemClass) throws -> Int64 {
        let statement = try db.statement("SELECT max(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = ?1), 0), COALESCE((SELECT max(rowid) FROM \(cls.rawValue)), 0))")
        statement.bind(1, cls.rawValue)
        defer { statement.reset() }
        guard try statement.step() else { return 1 }
        let last = statement.int64(0)
        guard last < Int64.max else { throw EngineError(Status.diskFull, "the keychain has used every row id") }
        return last + 1
    }

    fileprivate func insert(_ item: StoredItem) throws -> Int64 {
        guard let keys else { throw EngineError.interactionNotAllowed("the keychain is locked") }
        let cls = item.itemClass
        let rowID = try nextRowID(cls)
        var encoded = Data()
        let (digests, pclass, wrapped, payload) = try sealed(item, rowID: rowID, keys: keys, version: header.version, encoded: &encoded)
        let statement = try db.statement(WriteSQL.byClass[cls]!.insert)
        statement.bind(1, rowID).bind(2, digests.pk).bind(3, pclass).bind(4, wrapped).bind(5, payload)
        for (offset, column) in digests.columns.enumerated() { statement.bind(Int32(offset + 6), column) }
        do { try statement.run() } catch let error as SQLiteError where (error.code & 0xFF) == 19 /* SQLITE_CONSTRAINT */ {
            throw EngineError.duplicateItem("an item with the same primary key exists")
        }
        return rowID
    }

    fileprivate func replace(_ item: StoredItem) throws {
        guard let keys else { throw EngineError.interactionNotAllowed("the keychain is locked") }
        let (columns, encoded) = try replace(item, keys: keys, version: header.version)
        // A row read (so cached) and rewritten is cached with its new columns, as decrypting them would give it
        // (the plaintext just sealed, decoded: exactly what opening the sealed payload gives): the read that follows an
        // update does not decrypt again. The whole cache is dropped when the transaction rolls back.
        let key = RowKey(itemClass: item.itemClass, rowID: item.rowID)
        if cachingEnabled, caches.hasRow(key) {
            if let decoded = Self.decodedForm(of: item) ?? (try? RowCodec.decode(encoded, itemClass: item.itemClass, rowID: item.rowID)),
               ProtectionClass(decoded.accessibility).rawValue == columns.pclass {
                caches.store(key, CachedRow(columns: columns, candidate: .item(decoded)), generation: caches.generation)
            } else {
                caches.removeRow(key)
            }
        }
    }

    /// `item` itself when it is exactly what decoding its `RowCodec` encoding gives, else nil (decode it then).
    ///
    /// Decision: the codec keeps every field of a `StoredItem` bit for bit (strings as their UTF-8, data, numbers,
    /// booleans, dates by their bits, the secret, the access control's accessibility and flags; the row id is the
    /// row's), so decoding gives back an equal item, with two exceptions checked here: a decoded row has fewer than
    /// 10,000 attributes (more is refused as damaged), and its data values start at index 0 (an item may hold a
    /// slice of a larger Data, which a caller could then index from 0). The cache then holds the item as it is,
    /// without decoding it (a decode was ~6% of an update's CPU); `UpdatePathTests` compares it with a fresh
    /// decryption.
    static func decodedForm(of item: StoredItem) -> StoredItem? {
        guard item.attributes.count < 10_000, item.secret.map({ $0.startIndex == 0 }) ?? true else { return nil }
        for value in item.attributes.values {
            if case .data(let data) = value, data.startIndex != 0 { return nil }
        }
        return item
    }

    /// Rewrites the row `item.rowID` and returns its new columns, with the plaintext sealed in them.
    @discardableResult
    private func replace(_ item: StoredItem, keys: KeySet, version: Int64) throws -> (RowColumns, Data) {
        var encoded = Data()
        let (digests, pclass, wrapped, payload) = try sealed(item, rowID: item.rowID, keys: keys, version: version, encoded: &encoded)
        let sql = WriteSQL.byClass[item.itemClass]!
        let columns = RowColumns(pk: digests.pk, pclass: pclass, wrapped: wrapped, payload: payload, digests: digests.columns)
        // The primary key rarely changes (a new secret, label or accessibility): then only the sealed columns are
        // rewritten, leaving the index entries and their pages alone, so a durable update writes one page.
        let sameKey = try db.statement(sql.updateSealed)
        try sameKey.bind(1, item.rowID).bind(2, digests.pk).bind(3, pclass).bind(4, wrapped).bind(5, payload).run()
        if db.changes == 1 { return (columns, encoded) }
        let statement = try db.statement(sql.updateAll)
        statement.bind(1, item.rowID).bind(2, digests.pk).bind(3, pclass).bind(4, wrapped).bind(5, payload)
        for (offset, column) in digests.columns.enumerated() { statement.bind(Int32(offset + 6), column) }
        do { try statement.run() } catch let error as SQLiteError where (error.code & 0xFF) == 19 {
            throw EngineError.duplicateItem("an item with the same primary key exists")
        }
        guard db.changes == 1 else { throw EngineError.itemNotFound }
        return (columns, encoded)
    }

    fileprivate func delete(_ cls: ItemClass, _ rowID: Int64) throws {
        let statement = try db.statement("DELETE FROM \(cls.rawValue) WHERE rowid = ?1")
        try statement.bind(1, rowID).run()
        caches.removeRow(RowKey(itemClass: cls, rowID: rowID))
    }

    // MARK: - Format upgrade

    /// Upgrades an older file: re-seals every row with its row id bound and its digests in the current form
    /// (format 3 digests blobs by their bytes), gives a version 1 file an id and a key check.
    /// One transaction: a crash leaves the file as it was. Rows that fail their check under version 1 are left
    /// as they are (they stay unreadable, and are never deleted). Mutex held.
    func upgrade(master: SymmetricKey) throws {
        let keys = KeySet(master: master)
        do {
            try beginImmediate()
            do {
                var fresh = try Header.read(from: db)
                guard fresh.version < FileFormat.version else { try db.exec("COMMIT"); header = fresh; return }
                let previous = fresh.version
                var items: [StoredItem] = []
                var left = 0
                for cls in ItemClass.allCases {
                    let statement = try db.freshStatement(selectColumns(cls) + " ORDER BY rowid")
                    defer { statement.reset() }
                    while try statement.step() {
                        let rowID = statement.int64(0)
                        let schema = ClassSchema.of(cls)
                        let pk = statement.data(1) ?? Data()
                        let pclass = statement.text(2) ?? ""
                        guard let protection = ProtectionClass(rawValue: pclass), let classKey = keys.classKeys[protection] else { left += 1; continue }
                        let stored = (0..<schema.primaryKey.count).map { statement.data(Int32(5 + $0)) ?? Data() }
                        let aad = self.aad(cls, pclass, pk, digests: stored, rowID: rowID, version: previous)
                        guard let itemKey = try? Sealing.open(statement.data(3) ?? Data(), key: classKey, aad: aad),
                              let plain = try? Sealing.open(statement.data(4) ?? Data(), key: SymmetricKey(data: itemKey), aad: aad),
                              var item = try? RowCodec.decode(plain, itemClass: cls, rowID: rowID) else { left += 1; continue }
                        let expected = digests(of: cls, item.attributes, keys.indexMAC, version: previous)
                        guard expected.pk == pk, expected.columns == stored else { left += 1; continue }
                        item.rowID = rowID
                        items.append(item)
                    }
                }
                for item in items { try replace(item, keys: keys, version: FileFormat.version) }
                for cls in ItemClass.allCases { try db.exec(FileFormat.indexSQL(cls)) }
                let fileID = fresh.fileID ?? randomBytes(FileFormat.fileIDLength)
                fresh.version = FileFormat.version
                fresh.fileID = fileID
                fresh.keyCheck = keys.check(fileID: fileID)
                try fresh.write(to: db)
                try db.exec("COMMIT")
                header = fresh
                dataVersion = -1
                caches.clearRows()
                try makeCommitDurable()
                KeyringCache.removeLegacyEntries(path: path)
                KeystoneLog.logger.notice("keychain upgraded to format \(FileFormat.version)", metadata: ["path": "\(path)", "rows": "\(items.count)", "left": "\(left)"])
            } catch {
                try? db.exec("ROLLBACK")
                throw error
            }
        } catch let error as SQLiteError where !error.isBusy { throw error.engineError }
    }

    // MARK: - Verification

    /// What ``verify()`` found.
    public struct Verification: Sendable, Hashable {
        /// Rows that decrypted and passed every check.
        public var readable: Int
        /// Rows whose class key is not available in the current lock state.
        public var locked: Int
        /// Rows that failed an integrity check, by class and row id: `errSecDecode` on every read.
        public var damaged: [PersistentReference]
        /// Every row examined.
        public var total: Int { readable + locked + damaged.count }
    }

    /// Reads and checks every row of every class, without changing anything.
    ///
    /// Damaged rows are also logged (class and row id, never contents). `keystone doctor` and
    /// `verify-keychain` report this.
    /// - Throws: `errSecInteractionNotAllowed` when the keychain is locked; storage errors.
    public func verify() throws -> Verification {
        try engineErrors {
            try read { reader in
                guard let transaction = reader as? Transaction, transaction.source.keys != nil else {
                    throw EngineError.interactionNotAllowed("the keychain is locked")
                }
                var report = Verification(readable: 0, locked: 0, damaged: [])
                for cls in ItemClass.allCases {
                    try transaction.forEachCandidate(in: cls, matching: [:]) { candidate in
                        switch candidate {
                        case .item: report.readable += 1
                        case .unreadable(let c, let id, let error):
                            if error.status == Status.decode { report.damaged.append(PersistentReference(itemClass: c, rowID: id)) } else { report.locked += 1 }
                        }
                        return true
                    }
                }
                return report
            }
        }
    }

    final class Transaction: StorageWriter {
        let file: KeychainFile
        let source: RowSource
        let writing: Bool
        init(file: KeychainFile, source: RowSource, writing: Bool) { self.file = file; self.source = source; self.writing = writing }
        func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate] {
            var all: [Candidate] = []
            try file.forEachCandidate(source, itemClass, constraints) { all.append($0); return true }
            return all
        }
        func forEachCandidate(in itemClass: ItemClass, matching constraints: [String: AttributeValue],
                              _ body: (Candidate) throws -> Bool) throws {
            try file.forEachCandidate(source, itemClass, constraints, body)
        }
        func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? { try file.candidate(source, itemClass, rowID) }
        /// The state of the keys this transaction decrypts with (the engine then does not ask the file again).
        var lockState: LockState? { source.keys?.lockState ?? .locked }
        func insert(_ item: StoredItem) throws -> Int64 { try file.insert(item) }
        func replace(_ item: StoredItem) throws { try file.replace(item) }
        func delete(in itemClass: ItemClass, rowID: Int64) throws { try file.delete(itemClass, rowID) }
    }
}
