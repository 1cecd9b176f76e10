import Crypto
import Foundation
import KeychainEngine
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a keychain file locks itself.
public struct KeychainSettings: Sendable, Hashable, Codable {
    /// Seconds after an unlock when the keychain locks again (to `lockedAfterFirstUnlock`); nil: never.
    public var lockAfterTimeout: TimeInterval?
    /// Recorded for `security` compatibility (`set-keychain-settings -l`); Linux gives no sleep signal to act on.
    public var lockOnSleep: Bool

    public init(lockAfterTimeout: TimeInterval? = nil, lockOnSleep: Bool = false) {
        self.lockAfterTimeout = lockAfterTimeout
        self.lockOnSleep = lockOnSleep
    }
}

/// An encrypted keychain file: Linux's default keychain storage.
///
/// One SQLite file (WAL, `synchronous=FULL`) per keychain, modelled on Apple's data-protection keychain:
///
/// - A random 256-bit master key, wrapped (AES-GCM) by a key derived from the keychain password with scrypt.
///   The scrypt parameters live in the file's header and are raised on unlock when today's are stronger.
/// - Three class keys derived from the master key (HKDF): A for `whenUnlocked*`, C for `afterFirstUnlock*`,
///   D for `always*`. Every row has its own random key, wrapped by its class key; the row's attributes,
///   secret and access control are sealed together with that row key.
/// - The primary-key columns hold HMAC-SHA256 digests under a key derived from the master key, so lookups
///   are indexed while the file shows no service, account, server or label. The AES-GCM associated data
///   binds each row to its class, protection class and primary-key digest: an edited or swapped row fails
///   authentication and reads as `errSecDecode`, alone.
///
/// Lock states: ``lock()`` discards every key (``LockState/locked``: reads and writes fail with
/// `errSecInteractionNotAllowed`, nothing is touched). The auto-lock timeout keeps the C and D keys
/// (``LockState/lockedAfterFirstUnlock``), as a device that locks after a first unlock.
///
/// Across processes, unlocked keys are cached in the Linux kernel user keyring (expiring with the timeout),
/// so one `unlock-keychain` serves later commands; ``lock()`` revokes them and bumps a lock epoch stored in
/// the file, which every other open instance notices at its next operation. Where the keyring is not
/// available (some containers forbid `keyctl`), each process must unlock on its own.
///
/// - Important: The file protects secrets at rest against whoever can read the file but does not know the
///   password. It does not protect against code running as the same user while the keychain is unlocked
///   (it can read the kernel keyring cache and this process's memory), nor against a weak password: with an
///   empty password the file is protected only by its permissions (0600 in a 0700 directory).
public final class KeychainFile: KeychainStorage, @unchecked Sendable {
    // @unchecked Sendable: every mutable property is reached only while `mutex` is held.

    /// The file's path.
    public let path: String

    private let mutex = NSRecursiveLock()
    private let db: SQLiteConnection
    private var keys: KeySet?
    private var unlockedAt: Date?
    private var epoch: Int64 = 0
    private var dataVersion: Int64 = -1
    private var header: Header
    private var inTransaction = false
    /// Whether the current read transaction has started in SQLite (reads served from the cache never start one).
    private var began = false
    /// Decrypted search results while nothing has changed: cleared on every write here, on any commit by another
    /// connection (PRAGMA data_version) and on every change of the keys. Holds no more than unlocked keys could decrypt.
    private var cache: [CacheKey: [Candidate]] = [:]

    private var cachingEnabled = true

    /// Whether search results are kept decrypted in memory between reads while nothing changes (default true).
    ///
    /// - Important: The cache holds only what the keys in this process could decrypt anyway; it is emptied on
    ///   every write, every change by another process and every lock. Turn it off to keep decrypted items in
    ///   memory only for the duration of one operation, at the cost of a decryption per read.
    public var cachesDecryptedItems: Bool {
        get { withMutex { cachingEnabled } }
        set { withMutex { cachingEnabled = newValue; if !newValue { cache.removeAll() } } }
    }

    private struct CacheKey: Hashable {
        let itemClass: ItemClass
        let constraints: [String: AttributeValue]
    }

    static let formatVersion: Int64 = 1
    static let magic = "keystone-keychain"

    struct Header {
        var version: Int64
        var kdf: KDFParameters
        var wrappedMaster: Data
        var settings: KeychainSettings
        var emptyPassword: Bool
        var epoch: Int64
    }

    // MARK: - Locations

    /// The keychain directory: `$XDG_DATA_HOME/keystone`, else `~/.local/share/keystone`.
    public static var keychainDirectory: String {
        let env = ProcessInfo.processInfo.environment
        if let xdg = env["XDG_DATA_HOME"], !xdg.isEmpty { return xdg + "/keystone" }
        let home = env["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return home + "/.local/share/keystone"
    }

    /// The default (login) keychain: `$KEYSTONE_KEYCHAIN`, else `<keychainDirectory>/login.keychain-db`.
    public static var defaultPath: String {
        if let path = ProcessInfo.processInfo.environment["KEYSTONE_KEYCHAIN"], !path.isEmpty { return path }
        return keychainDirectory + "/login.keychain-db"
    }

    // MARK: - Creating, opening, deleting

    private init(path: String, db: SQLiteConnection, header: Header) {
        self.path = path
        self.db = db
        self.header = header
        self.epoch = header.epoch
    }

    /// Creates a keychain file at `path` protected by `password`, and leaves it unlocked in this process.
    ///
    /// The directory is created 0700 and the file 0600 before any byte is written.
    /// - Throws: `EngineError` with `errSecDuplicateKeychain` when a file exists at `path`, `errSecWrPerm` when
    ///   it cannot be created.
    public static func create(at path: String, password: String, settings: KeychainSettings = .init()) throws -> KeychainFile {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty { try makeDirectory(directory) }
        let fd = createExclusively(path)
        guard fd >= 0 else {
            if errno == EEXIST { throw EngineError(Status.duplicateKeychain, "a keychain already exists at \(path)") }
            throw EngineError(Status.wrPerm, "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        fchmod(fd, 0o600)
        close(fd)
        do {
            let db = try SQLiteConnection(path: path, create: false)
            try db.exec("PRAGMA journal_mode=WAL")
            try configure(db)
            let master = SymmetricKey(size: .bits256)
            let kdf = KDFParameters.current()
            let wrapped = try Sealing.seal(master.withUnsafeBytes { Data($0) }, key: try kdf.deriveKey(password), aad: Data("keystone-master-v1".utf8))
            let header = Header(version: formatVersion, kdf: kdf, wrappedMaster: wrapped, settings: settings, emptyPassword: password.isEmpty, epoch: 0)
            try db.exec("BEGIN IMMEDIATE")
            try db.exec("CREATE TABLE keystone_header (name TEXT PRIMARY KEY, value BLOB NOT NULL)")
            for cls in ItemClass.allCases { try db.exec(tableSQL(cls)) }
            try writeHeader(header, to: db, magic: true)
            try db.exec("COMMIT")
            let file = KeychainFile(path: path, db: db, header: header)
            file.install(KeySet(master: master), at: Date())
            return file
        } catch let error as SQLiteError {
            unlink(path)
            throw error.engineError
        } catch {
            unlink(path)
            throw error
        }
    }

    /// Opens an existing keychain file. Never writes to a file it cannot recognise.
    ///
    /// The keychain comes back unlocked when its keys are cached in the kernel keyring or its password is empty;
    /// otherwise locked.
    /// - Throws: `EngineError` with `errSecNoSuchKeychain` (missing), `errSecInvalidKeychain` (not a keychain,
    ///   truncated), `errSecWrongSecVersion` (a newer format).
    public static func open(at path: String) throws -> KeychainFile {
        var info = stat()
        guard stat(path, &info) == 0 else { throw EngineError(Status.noSuchKeychain, "no keychain at \(path)") }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw EngineError(Status.invalidKeychain, "\(path) is not a file") }
        let db: SQLiteConnection
        let header: Header
        do {
            db = try SQLiteConnection(path: path, create: false)
            header = try readHeader(db)
        } catch let error as SQLiteError {
            throw EngineError(Status.invalidKeychain, "\(path) is not a keychain (\(error.code))")
        }
        do {
            try configure(db)
        } catch let error as SQLiteError { throw error.engineError }
        let file = KeychainFile(path: path, db: db, header: header)
        file.loadCachedKeys()
        if file.keys == nil && header.emptyPassword { try? file.unlock(password: "") }
        return file
    }

    /// Opens the default keychain, creating it with an empty password when it does not exist.
    public static func openDefault() throws -> (keychain: KeychainFile, created: Bool) {
        let path = defaultPath
        if FileManager.default.fileExists(atPath: path) { return (try open(at: path), false) }
        do {
            return (try create(at: path, password: ""), true)
        } catch let error as EngineError where error.status == Status.duplicateKeychain {
            return (try open(at: path), false)  // another process created it first
        }
    }

    /// Deletes the keychain file (with its WAL and shared-memory files) and its cached keys.
    ///
    /// - Throws: `EngineError` with `errSecNoSuchKeychain` when there is no file.
    public static func delete(at path: String) throws {
        guard FileManager.default.fileExists(atPath: path) else { throw EngineError(Status.noSuchKeychain, "no keychain at \(path)") }
        KeyringCache(path: path).remove()
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
    }

    /// Per-connection settings: durable commits (synchronous=FULL, set after opening), a 16 MiB page cache and
    /// memory-mapped reads, so lookups in a large keychain do not pay a read(2) per page.
    private static func configure(_ db: SQLiteConnection) throws {
        try db.exec("PRAGMA synchronous=FULL")
        try db.exec("PRAGMA cache_size=-16384")
        try db.exec("PRAGMA mmap_size=268435456")
    }

    private static func makeDirectory(_ directory: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) { return }
        let parent = (directory as NSString).deletingLastPathComponent
        if !parent.isEmpty && parent != directory { try makeDirectory(parent) }
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw EngineError(Status.wrPerm, "cannot create \(directory): \(String(cString: strerror(errno)))")
        }
    }

    /// Secondary indexes over digest columns: the usual lookups (a service and its accounts, a server, a key's tag)
    /// stay indexed without an index per column, which would cost a WAL page per index on every durable write.
    private static let secondaryIndexes: [ItemClass: [String]] = [
        .genericPassword: [Key.service, Key.account],
        .internetPassword: [Key.server, Key.account],
        .certificate: [Key.issuer, Key.serialNumber],
        .key: [Key.applicationTag, Key.applicationLabel],
        .identity: [Key.issuer, Key.serialNumber],
    ]

    private static func tableSQL(_ cls: ItemClass) -> String {
        let table = cls.rawValue
        let columns = ClassSchema.of(cls).primaryKey.map { "d_\($0) BLOB NOT NULL" }.joined(separator: ", ")
        let indexed = (secondaryIndexes[cls] ?? []).map { "d_\($0)" }.joined(separator: ", ")
        return """
        CREATE TABLE \(table) (rowid INTEGER PRIMARY KEY AUTOINCREMENT, pk BLOB NOT NULL UNIQUE, \
        \(columns), pclass TEXT NOT NULL, wrapped BLOB NOT NULL, payload BLOB NOT NULL);
        CREATE INDEX \(table)_lookup ON \(table)(\(indexed));
        """
    }

    // MARK: - Header

    private static func readHeader(_ db: SQLiteConnection) throws -> Header {
        var values: [String: Data] = [:]
        let statement = try db.statement("SELECT name, value FROM keystone_header")
        while try statement.step() {
            if let name = statement.text(0), let value = statement.data(1) { values[name] = value }
        }
        guard values["magic"] == Data(magic.utf8) else {
            throw EngineError(Status.invalidKeychain, "the file is not a Keystone keychain")
        }
        guard let versionText = values["version"].flatMap({ String(data: $0, encoding: .utf8) }), let version = Int64(versionText) else {
            throw EngineError(Status.invalidKeychain, "the keychain header has no format version")
        }
        guard version <= formatVersion else {
            throw EngineError(Status.wrongSecVersion, "the keychain has format version \(version); this Keystone reads up to \(formatVersion)")
        }
        let decoder = JSONDecoder()
        guard let kdfData = values["kdf"], let kdf = try? decoder.decode(KDFParameters.self, from: kdfData),
              let wrapped = values["master"], let settingsData = values["settings"],
              let settings = try? decoder.decode(KeychainSettings.self, from: settingsData) else {
            throw EngineError(Status.invalidKeychain, "the keychain header is incomplete")
        }
        let epoch = values["epoch"].flatMap { String(data: $0, encoding: .utf8) }.flatMap { Int64($0) } ?? 0
        return Header(version: version, kdf: kdf, wrappedMaster: wrapped, settings: settings,
                      emptyPassword: values["empty"] == Data("1".utf8), epoch: epoch)
    }

    private static func writeHeader(_ header: Header, to db: SQLiteConnection, magic: Bool = false) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var values: [(String, Data)] = [
            ("version", Data(String(header.version).utf8)),
            ("kdf", try encoder.encode(header.kdf)),
            ("master", header.wrappedMaster),
            ("settings", try encoder.encode(header.settings)),
            ("empty", Data((header.emptyPassword ? "1" : "0").utf8)),
            ("epoch", Data(String(header.epoch).utf8)),
        ]
        if magic { values.append(("magic", Data(Self.magic.utf8))) }
        let statement = try db.statement("INSERT OR REPLACE INTO keystone_header (name, value) VALUES (?1, ?2)")
        for (name, value) in values {
            statement.reset()
            try statement.bind(1, name).bind(2, value).run()
        }
    }

    // MARK: - Lock state

    private func withMutex<T>(_ body: () throws -> T) rethrows -> T {
        mutex.lock()
        defer { mutex.unlock() }
        return try body()
    }

    public var lockState: LockState {
        withMutex {
            refresh()
            return keys?.lockState ?? .locked
        }
    }

    /// Whether the password is empty: the file is then protected only by its permissions.
    public var isEmptyPassword: Bool { withMutex { header.emptyPassword } }

    /// The lock settings.
    public var settings: KeychainSettings { withMutex { header.settings } }

    /// Changes the lock settings; the cached keys' expiry follows.
    public func setSettings(_ settings: KeychainSettings) throws {
        try withMutex {
            try updateHeader { $0.settings = settings }
            if let keys { cache(keys, at: unlockedAt ?? Date()) }
        }
    }

    /// Unlocks with `password`.
    ///
    /// - Throws: `EngineError` with `errSecAuthFailed` when the password is wrong (nothing is written).
    public func unlock(password: String) throws {
        try withMutex {
            let fresh = try? Self.readHeaderInTransaction(db)
            if let fresh { header = fresh; epoch = fresh.epoch }
            let master = try unwrapMaster(password)
            install(KeySet(master: master), at: Date())
            if header.kdf.isOutdated { try? rewrap(master, password: password) }
        }
    }

    /// Locks: discards every key here, removes the keyring cache and tells other open instances.
    public func lock() {
        withMutex {
            keys = nil
            unlockedAt = nil
            cache.removeAll()
            KeyringCache(path: path).remove()
            try? updateHeader { $0.epoch += 1 }
            epoch = header.epoch
        }
    }

    /// Locks as a device does after its first unlock: `afterFirstUnlock` and `always` items stay available.
    public func lockAfterFirstUnlock() {
        withMutex {
            guard let current = keys else { return }
            keys = current.afterFirstUnlock
            cache.removeAll()
            KeyringCache(path: path).cache(current.afterFirstUnlock, unlockedAt: unlockedAt ?? Date(), timeout: nil, full: false)
            KeyringCache(path: path).removeFull()
        }
    }

    /// Changes the password by re-wrapping the master key; no item is re-encrypted.
    ///
    /// - Throws: `EngineError` with `errSecAuthFailed` when `old` is wrong.
    public func changePassword(old: String, new: String) throws {
        try withMutex {
            let master = try unwrapMaster(old)
            try rewrap(master, password: new)
            install(KeySet(master: master), at: Date())
        }
    }

    private func unwrapMaster(_ password: String) throws -> SymmetricKey {
        let derived = try header.kdf.deriveKey(password)
        guard let bytes = try? Sealing.open(header.wrappedMaster, key: derived, aad: Data("keystone-master-v1".utf8)) else {
            throw EngineError(Status.authFailed, "wrong keychain password")
        }
        return SymmetricKey(data: bytes)
    }

    private func rewrap(_ master: SymmetricKey, password: String) throws {
        let kdf = KDFParameters.current()
        let wrapped = try Sealing.seal(master.withUnsafeBytes { Data($0) }, key: try kdf.deriveKey(password), aad: Data("keystone-master-v1".utf8))
        try updateHeader {
            $0.kdf = kdf
            $0.wrappedMaster = wrapped
            $0.emptyPassword = password.isEmpty
        }
    }

    private static func readHeaderInTransaction(_ db: SQLiteConnection) throws -> Header {
        try db.exec("BEGIN")
        defer { try? db.exec("COMMIT") }
        return try readHeader(db)
    }

    private func updateHeader(_ change: (inout Header) -> Void) throws {
        do {
            try beginImmediate()
            do {
                var fresh = try Self.readHeader(db)
                change(&fresh)
                try Self.writeHeader(fresh, to: db)
                try db.exec("COMMIT")
                header = fresh
                dataVersion = -1
            } catch {
                try? db.exec("ROLLBACK")
                throw error
            }
        } catch let error as SQLiteError { throw error.engineError }
    }

    private func install(_ keys: KeySet, at date: Date) {
        cache.removeAll()
        self.keys = keys
        self.unlockedAt = date
        cache(keys, at: date)
    }

    private func cache(_ keys: KeySet, at date: Date) {
        let cache = KeyringCache(path: path)
        if keys.lockState == .unlocked {
            let remaining = header.settings.lockAfterTimeout.map { max(1, $0 - Date().timeIntervalSince(date)) }
            cache.cache(keys, unlockedAt: date, timeout: remaining, full: true)
        }
        cache.cache(keys.afterFirstUnlock, unlockedAt: date, timeout: nil, full: false)
    }

    private func loadCachedKeys() {
        let cache = KeyringCache(path: path)
        if let (keys, date) = cache.load(full: true) {
            self.keys = keys
            self.unlockedAt = date
        } else if let (keys, date) = cache.load(full: false) {
            self.keys = keys
            self.unlockedAt = date
        }
        applyTimeout()
    }

    /// Applies the auto-lock timeout and other instances' locks. Mutex held.
    private func refresh() {
        applyTimeout()
        guard !inTransaction else { return }
        // Another instance's lock() bumps the epoch; PRAGMA data_version tells cheaply whether anything changed.
        if let version = try? currentDataVersion(), version != dataVersion {
            dataVersion = version
            cache.removeAll()
            if keys != nil, let fresh = try? Self.readHeaderInTransaction(db) {
                header = fresh
                if fresh.epoch != epoch { keys = nil; unlockedAt = nil; epoch = fresh.epoch }
            }
        }
    }

    private func applyTimeout() {
        if let timeout = header.settings.lockAfterTimeout, let since = unlockedAt, let current = keys,
           current.lockState == .unlocked, Date().timeIntervalSince(since) >= timeout {
            keys = current.afterFirstUnlock
            cache.removeAll()
        }
    }

    private func currentDataVersion() throws -> Int64 {
        let statement = try db.statement("PRAGMA data_version")
        defer { statement.reset() }
        guard try statement.step() else { return -1 }
        return statement.int64(0)
    }

    // MARK: - Transactions

    private func beginImmediate() throws {
        var attempts = 0
        while true {
            do {
                try db.statement("BEGIN IMMEDIATE").run()
                return
            } catch let error as SQLiteError where (error.code & 0xFF) == 5 /* SQLITE_BUSY */ && attempts < 50 {
                attempts += 1
                usleep(UInt32(1_000 * attempts))
            }
        }
    }

    public func read<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        try withMutex {
            refresh()
            inTransaction = true
            began = false
            defer { inTransaction = false; began = false }
            do {
                let result = try body(Transaction(file: self, writing: false))
                if began { try db.statement("COMMIT").run() }
                return result
            } catch {
                if began { try? db.statement("ROLLBACK").run() }
                if let sqlite = error as? SQLiteError { throw sqlite.engineError }
                throw error
            }
        }
    }

    public func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        try withMutex {
            refresh()
            cache.removeAll()
            do { try beginImmediate() } catch let error as SQLiteError { throw error.engineError }
            inTransaction = true
            began = true
            defer { inTransaction = false; began = false; cache.removeAll() }
            do {
                let result = try body(Transaction(file: self, writing: true))
                try db.statement("COMMIT").run()
                return result
            } catch {
                try? db.statement("ROLLBACK").run()
                if let sqlite = error as? SQLiteError { throw sqlite.engineError }
                throw error
            }
        }
    }

    /// Starts the SQLite read transaction on first use.
    private func ensureBegun() throws {
        if !began {
            try db.statement("BEGIN").run()
            began = true
        }
    }

    private func cached(_ key: CacheKey, writing: Bool, _ load: () throws -> [Candidate]) throws -> [Candidate] {
        guard !writing, cachingEnabled, keys != nil else { try ensureBegun(); return try load() }
        if let hit = cache[key] { return hit }
        try ensureBegun()
        let rows = try load()
        if cache.count >= 4_096 { cache.removeAll() }
        cache[key] = rows
        return rows
    }

    // MARK: - Rows (mutex held, inside a transaction)

    private struct Digests {
        var pk: Data
        var columns: [(String, Data)]
    }

    private func digest(_ cls: ItemClass, _ attribute: String, _ value: AttributeValue, _ index: HMAC<SHA256>) -> Data {
        var bytes = Data("\(cls.rawValue)\u{0}\(attribute)\u{0}".utf8)
        RowCodec.write(value, to: &bytes)
        return Sealing.digest(bytes, mac: index)
    }

    private func compositeDigest(_ cls: ItemClass, _ attributes: [String: AttributeValue], _ index: HMAC<SHA256>) -> Data {
        let schema = ClassSchema.of(cls)
        var bytes = Data("\(cls.rawValue)\u{0}pk".utf8)
        for key in schema.primaryKey {
            bytes.append(0)
            bytes.append(contentsOf: key.utf8)
            RowCodec.write(attributes[key] ?? schema.attributes[key]!.type.emptyValue, to: &bytes)
        }
        return Sealing.digest(bytes, mac: index)
    }

    private func digests(of item: StoredItem, _ index: HMAC<SHA256>) -> Digests {
        let schema = ClassSchema.of(item.itemClass)
        return Digests(
            pk: compositeDigest(item.itemClass, item.attributes, index),
            columns: schema.primaryKey.map { key in
                (key, digest(item.itemClass, key, item.attributes[key] ?? schema.attributes[key]!.type.emptyValue, index))
            })
    }

    private static func aad(_ cls: ItemClass, _ pclass: String, _ pk: Data) -> Data {
        var aad = Data("keystone-row-v1\u{0}\(cls.rawValue)\u{0}\(pclass)\u{0}".utf8)
        aad.append(pk)
        return aad
    }

    private func unavailable(_ cls: ItemClass, _ rowID: Int64) -> Candidate {
        .unreadable(itemClass: cls, rowID: rowID, error: EngineError.interactionNotAllowed("the keychain is locked"))
    }

    fileprivate func candidates(_ cls: ItemClass, _ constraints: [String: AttributeValue]) throws -> [Candidate] {
        let table = cls.rawValue
        let select = "SELECT rowid, pk, pclass, wrapped, payload FROM \(table)"
        guard let keys else {
            // Locked: without the index key no constraint can be checked; every row may match.
            let statement = try db.statement("SELECT rowid FROM \(table) ORDER BY rowid")
            var rows: [Candidate] = []
            while try statement.step() { rows.append(unavailable(cls, statement.int64(0))) }
            return rows
        }
        let schema = ClassSchema.of(cls)
        let statement: SQLiteStatement
        if constraints.count == schema.primaryKey.count {
            statement = try db.statement("\(select) WHERE pk = ?1")
            statement.bind(1, compositeDigest(cls, constraints, keys.indexMAC))
        } else {
            let ordered = constraints.keys.sorted()
            let conditions = ordered.enumerated().map { "d_\($0.element) = ?\($0.offset + 1)" }
            let sql = conditions.isEmpty ? "\(select) ORDER BY rowid" : "\(select) WHERE \(conditions.joined(separator: " AND ")) ORDER BY rowid"
            statement = try db.statement(sql)
            for (offset, key) in ordered.enumerated() {
                statement.bind(Int32(offset + 1), digest(cls, key, constraints[key]!, keys.indexMAC))
            }
        }
        var rows: [Candidate] = []
        while try statement.step() {
            rows.append(decrypt(cls, rowID: statement.int64(0), pk: statement.data(1) ?? Data(), pclass: statement.text(2) ?? "",
                                wrapped: statement.data(3) ?? Data(), payload: statement.data(4) ?? Data(), keys: keys))
        }
        return rows
    }

    fileprivate func candidate(_ cls: ItemClass, _ rowID: Int64) throws -> Candidate? {
        let statement = try db.statement("SELECT rowid, pk, pclass, wrapped, payload FROM \(cls.rawValue) WHERE rowid = ?1")
        statement.bind(1, rowID)
        guard try statement.step() else { return nil }
        guard let keys else { statement.reset(); return unavailable(cls, rowID) }
        let row = decrypt(cls, rowID: rowID, pk: statement.data(1) ?? Data(), pclass: statement.text(2) ?? "",
                          wrapped: statement.data(3) ?? Data(), payload: statement.data(4) ?? Data(), keys: keys)
        statement.reset()
        return row
    }

    private func decrypt(_ cls: ItemClass, rowID: Int64, pk: Data, pclass: String, wrapped: Data, payload: Data, keys: KeySet) -> Candidate {
        guard let protection = ProtectionClass(rawValue: pclass) else {
            return .unreadable(itemClass: cls, rowID: rowID, error: EngineError(Status.decode, "the row's protection class is damaged"))
        }
        guard let classKey = keys.classKeys[protection] else { return unavailable(cls, rowID) }
        let aad = Self.aad(cls, pclass, pk)
        do {
            let itemKey = SymmetricKey(data: try Sealing.open(wrapped, key: classKey, aad: aad))
            var item = try RowCodec.decode(try Sealing.open(payload, key: itemKey, aad: aad), itemClass: cls, rowID: rowID)
            item.rowID = rowID
            return .item(item)
        } catch {
            return .unreadable(itemClass: cls, rowID: rowID, error: EngineError(Status.decode, "the item failed its integrity check"))
        }
    }

    private func sealed(_ item: StoredItem) throws -> (Digests, String, Data, Data) {
        guard let keys else { throw EngineError.interactionNotAllowed("the keychain is locked") }
        let protection = ProtectionClass(item.accessibility)
        guard let classKey = keys.classKeys[protection] else {
            throw EngineError.interactionNotAllowed("the item's protection class is locked")
        }
        let digests = digests(of: item, keys.indexMAC)
        let aad = Self.aad(item.itemClass, protection.rawValue, digests.pk)
        let itemKey = SymmetricKey(size: .bits256)
        let wrapped = try Sealing.seal(itemKey.withUnsafeBytes { Data($0) }, key: classKey, aad: aad)
        var stored = item
        stored.rowID = 0
        let payload = try Sealing.seal(RowCodec.encode(stored), key: itemKey, aad: aad)
        return (digests, protection.rawValue, wrapped, payload)
    }

    fileprivate func insert(_ item: StoredItem) throws -> Int64 {
        let (digests, pclass, wrapped, payload) = try sealed(item)
        let table = item.itemClass.rawValue
        let columns = digests.columns.map { "d_\($0.0)" }
        let placeholders = (0..<(columns.count + 4)).map { "?\($0 + 1)" }.joined(separator: ", ")
        let statement = try db.statement("INSERT INTO \(table) (pk, pclass, wrapped, payload, \(columns.joined(separator: ", "))) VALUES (\(placeholders))")
        statement.bind(1, digests.pk).bind(2, pclass).bind(3, wrapped).bind(4, payload)
        for (offset, column) in digests.columns.enumerated() { statement.bind(Int32(offset + 5), column.1) }
        do { try statement.run() } catch let error as SQLiteError where (error.code & 0xFF) == 19 /* SQLITE_CONSTRAINT */ {
            throw EngineError.duplicateItem("an item with the same primary key exists")
        }
        return db.lastInsertRowID
    }

    fileprivate func replace(_ item: StoredItem) throws {
        let (digests, pclass, wrapped, payload) = try sealed(item)
        let table = item.itemClass.rawValue
        let assignments = digests.columns.enumerated().map { "d_\($0.element.0) = ?\($0.offset + 6)" }.joined(separator: ", ")
        let statement = try db.statement("UPDATE \(table) SET pk = ?2, pclass = ?3, wrapped = ?4, payload = ?5, \(assignments) WHERE rowid = ?1")
        statement.bind(1, item.rowID).bind(2, digests.pk).bind(3, pclass).bind(4, wrapped).bind(5, payload)
        for (offset, column) in digests.columns.enumerated() { statement.bind(Int32(offset + 6), column.1) }
        do { try statement.run() } catch let error as SQLiteError where (error.code & 0xFF) == 19 {
            throw EngineError.duplicateItem("an item with the same primary key exists")
        }
        guard db.changes == 1 else { throw EngineError.itemNotFound }
    }

    fileprivate func delete(_ cls: ItemClass, _ rowID: Int64) throws {
        let statement = try db.statement("DELETE FROM \(cls.rawValue) WHERE rowid = ?1")
        try statement.bind(1, rowID).run()
    }

    private final class Transaction: StorageWriter {
        let file: KeychainFile
        let writing: Bool
        init(file: KeychainFile, writing: Bool) { self.file = file; self.writing = writing }
        func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate] {
            try file.cached(CacheKey(itemClass: itemClass, constraints: constraints), writing: writing) {
                try file.candidates(itemClass, constraints)
            }
        }
        func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? {
            try file.cached(CacheKey(itemClass: itemClass, constraints: ["#rowid": .number(rowID)]), writing: writing) {
                try file.candidate(itemClass, rowID).map { [$0] } ?? []
            }.first
        }
        func insert(_ item: StoredItem) throws -> Int64 { try file.insert(item) }
        func replace(_ item: StoredItem) throws { try file.replace(item) }
        func delete(in itemClass: ItemClass, rowID: Int64) throws { try file.delete(itemClass, rowID) }
    }
}

/// Creates `path` with mode 0600, failing when it exists (outside the class: `open` is a method name there).
private func createExclusively(_ path: String) -> Int32 {
    open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
}
