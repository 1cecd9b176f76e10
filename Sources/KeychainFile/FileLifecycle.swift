import Crypto
import Foundation
import KeychainEngine
import KeychainSealing
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Creating, opening and deleting keychain files.
//
// Creation is atomic: the file is built complete (tables, header, wrapped master key) under a temporary name in
// the same directory, then linked into place with link(2), which fails if a file already exists there. A process
// killed at any moment of a creation leaves no file at the keychain's path (only a temporary file, removed by the
// next creation); two first uses racing each other both succeed, on the one file that won.

extension KeychainFile {
    /// Creates a keychain file at `path` protected by `password`, and leaves it unlocked in this process.
    ///
    /// The directory is created 0700 and the file 0600; the file appears at `path` only once complete.
    /// - Throws: `EngineError` with `errSecDuplicateKeychain` when a file exists at `path`, `errSecWrPerm` when
    ///   it cannot be created or the directory is not safe (owned by another user, or writable by others
    ///   without the sticky bit), `errSecParam` for invalid settings.
    public static func create(at path: String, password: String, settings: KeychainSettings = .init()) throws -> KeychainFile {
        try engineErrors {
            try create(at: path, settings: settings, secureEnclave: nil) { master, _ in
                (FileFormat.version, try PasswordProtector(sealing: master, password: password), nil)
            }
        }
    }

    /// Creates a keychain file at `path` whose master key is sealed to `token` (on Linux the TPM 2.0), and leaves
    /// it unlocked in this process. The file opens unlocked, without a password, wherever `token`'s hardware is
    /// (``open(at:secureEnclave:)`` with a token on the same TPM), and on no other machine.
    ///
    /// The token makes the key first: when it cannot, nothing is created. Blocks while the token works.
    /// - Parameters:
    ///   - path: where the keychain file is created.
    ///   - token: the Secure Enclave to seal to (`KeychainServicesDefaults.secureEnclave`, `TPMSecureEnclaveToken()`).
    ///   - recoveryPassword: nil for none; else a non-empty password that also opens the file, on any machine
    ///     (``unlock(password:)``): the way back when the TPM is lost.
    ///   - settings: the lock settings (auto-lock timeout, lock on sleep).
    /// - Throws: `EngineError`: the token's `errSecUnimplemented` (no TPM) or `errSecNotAvailable` (unreachable);
    ///   `errSecParam` for an empty recovery password or invalid settings; and the errors of
    ///   ``create(at:password:settings:)``.
    /// - Important: Without a recovery password, losing the TPM loses the keychain and everything in it: clearing
    ///   the TPM (a firmware reset, "Clear TPM" in the firmware setup), replacing the machine or its main board,
    ///   or moving the file (or a backup of it) to another machine. There is no recovery. On this machine, any code
    ///   running as a user allowed to use the TPM can open the file: sealing protects it off the machine, not from
    ///   programs on it. A recovery password is as strong as the password: offline guessing attacks it as they
    ///   attack any keychain password.
    public static func create(at path: String, sealedTo token: any SecureEnclaveToken, recoveryPassword: String? = nil,
                              settings: KeychainSettings = .init()) throws -> KeychainFile {
        try engineErrors {
            if let recoveryPassword, recoveryPassword.isEmpty {
                throw EngineError.param("a recovery password cannot be empty: it would let the keychain be opened on any machine without one; give none, or a real one")
            }
            return try create(at: path, settings: settings, secureEnclave: token) { master, fileID in
                let sealed = try SealedProtector(sealing: master, to: token, fileID: fileID)
                let password = try recoveryPassword.map { try PasswordProtector(sealing: master, password: $0) }
                return (FileFormat.sealedVersion, password, sealed)
            }
        }
    }

    /// Creates a keychain whose master key `protect` seals (called before any file is made).
    private static func create(at path: String, settings: KeychainSettings, secureEnclave: (any SecureEnclaveToken)?,
                               protect: (SymmetricKey, Data) throws -> (Int64, PasswordProtector?, SealedProtector?)) throws -> KeychainFile {
        try settings.validate()
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty { try makeDirectory(directory) }
        try FileSafety.check(directoryAt: directory)
        var existing = stat()
        if lstat(path, &existing) == 0 { throw EngineError(Status.duplicateKeychain, "a keychain already exists at \(path)") }
        removeAbandonedBuilds(of: path)

        let master = SymmetricKey(size: .bits256)
        let fileID = randomBytes(FileFormat.fileIDLength)
        let (version, password, sealed) = try protect(master, fileID)
        let header = Header(version: version, password: password, sealed: sealed, settings: settings, epoch: 0,
                            fileID: fileID, keyCheck: KeySet(master: master).check(fileID: fileID))
        let temporary = try build(for: path, header: header)
        var released = false
        func release() {
            guard !released else { return }
            released = true
            for suffix in ["", "-wal", "-shm"] { unlink(temporary.path + suffix) }
            close(temporary.fd)  // after unlinking: until then its lock says the build is alive
        }
        defer { release() }
        if link(temporary.path, path) != 0 {
            let code = errno
            if code == EEXIST { throw EngineError(Status.duplicateKeychain, "a keychain already exists at \(path)") }
            throw EngineError(Status.wrPerm, "cannot create \(path): \(String(cString: strerror(code)))")
        }
        syncDirectory(directory)
        // The build's descriptor is closed before SQLite opens the file: it is the same file (a hard link), and
        // closing a descriptor drops every POSIX lock this process holds on the file, SQLite's included. Closed
        // after, it dropped the connection's shared lock, so another process's connection (the sqlite3 tool) closing
        // found itself the last, checkpointed and deleted the log this instance still wrote to.
        release()
        let (db, written, device, inode) = try openChecked(path)
        let file = KeychainFile(path: path, db: db, header: written, device: device, inode: inode, secureEnclave: secureEnclave)
        do {
            try file.withMutex { try file.install(KeySet(master: master), at: file.clock(), share: sealed == nil) }
        } catch let error as EngineError where error.status == Status.quotaExceeded {
            // The keychain exists and is unlocked here; other processes will find it locked.
            KeystoneLog.logger.error("created keychain could not be shared through the kernel keyring", metadata: ["path": "\(path)"])
        }
        return file
    }

    /// Builds a complete keychain in a temporary file next to `path`, and returns it with its descriptor, which
    /// holds a lock (flock) on it until the caller closes it.
    private static func build(for path: String, header: Header) throws -> (path: String, fd: Int32) {
        let temporary = buildPrefix(of: path) + "\(getpid())-" + randomBytes(8).map { String(format: "%02x", $0) }.joined()
        let fd = openFile(temporary, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw EngineError(Status.wrPerm, "cannot create a keychain in \((path as NSString).deletingLastPathComponent): \(String(cString: strerror(errno)))")
        }
        // Held until this process exits or the build is linked: a lock nobody holds marks an abandoned build.
        _ = flock(fd, LOCK_EX)
        fchmod(fd, 0o600)
        do {
            let db = try SQLiteConnection(path: temporary, create: false)
            try db.exec("PRAGMA journal_mode=WAL")
            try configure(db)
            try db.exec("BEGIN IMMEDIATE")
            try db.exec("CREATE TABLE keystone_header (name TEXT PRIMARY KEY, value BLOB NOT NULL)")
            for cls in ItemClass.allCases { try db.exec(FileFormat.tableSQL(cls)) }
            try header.write(to: db, magic: true)
            try db.exec("COMMIT")
            // Closing the last connection checkpoints the WAL into the file (synchronously) and removes it.
        } catch {
            close(fd)
            for suffix in ["", "-wal", "-shm"] { unlink(temporary + suffix) }
            if let sqlite = error as? SQLiteError { throw sqlite.engineError }
            throw error
        }
        fsync(fd)
        return (temporary, fd)
    }

    private static func buildPrefix(of path: String) -> String {
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        return (directory.isEmpty ? "" : directory + "/") + "." + name + ".creating-"
    }

    /// Removes temporary files of creations whose process died: its process id (in the name) no longer runs and
    /// its lock is free. Both conditions: a build whose process has opened the file but not yet locked it is alive.
    private static func removeAbandonedBuilds(of path: String) {
        let prefix = buildPrefix(of: path)
        let directory = (prefix as NSString).deletingLastPathComponent
        let namePrefix = (prefix as NSString).lastPathComponent
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.isEmpty ? "." : directory) else { return }
        for name in names where name.hasPrefix(namePrefix) && !name.hasSuffix("-wal") && !name.hasSuffix("-shm") {
            let candidate = (directory.isEmpty ? "" : directory + "/") + name
            let pidText = name.dropFirst(namePrefix.count).prefix { $0 != "-" }
            if let pid = pid_t(pidText), pid > 0, kill(pid, 0) == 0 || errno == EPERM { continue }
            let fd = openFile(candidate, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { continue }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 {
                for suffix in ["", "-wal", "-shm"] { unlink(candidate + suffix) }
            }
            close(fd)
        }
    }

    private static func syncDirectory(_ directory: String) {
        let fd = openFile(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 { fsync(fd); close(fd) }
    }

    /// Opens an existing keychain file. Never writes to a file it cannot recognise.
    ///
    /// The keychain comes back unlocked when its keys are cached in the kernel keyring or its password is empty,
    /// or when it is sealed to a Secure Enclave and `secureEnclave` unseals it; otherwise locked.
    ///
    /// A file sealed to a Secure Enclave blocks while the token works. When the token cannot unseal it, the file is
    /// left exactly as it was (nothing is written, nothing deleted) and: without a recovery password, opening
    /// fails with the token's reason; with one, the keychain opens locked, for ``unlock(password:)`` (decision:
    /// the recovery password is the way in when the TPM is gone, so the file must still open; the reason is
    /// logged, and ``unlock()`` reports it).
    /// - Parameters:
    ///   - path: the keychain file to open.
    ///   - secureEnclave: the token that opens files sealed to a Secure Enclave
    ///     (`KeychainServicesDefaults.secureEnclave`); ignored for other files.
    /// - Throws: `EngineError` with `errSecNoSuchKeychain` (missing), `errSecWrPerm` (owned by another user, or
    ///   open to group or others, in a directory others can write, or with planted `-wal` / `-shm` companions), `errSecInvalidKeychain` (not a keychain, truncated, a header
    ///   value out of range), `errSecWrongSecVersion` (a newer format). For a sealed file without a recovery
    ///   password: `errSecNotAvailable` (the TPM cannot be reached, or no token given), `errSecUnimplemented` (no
    ///   TPM on this machine), `errSecDecode` ("sealed to another TPM; the keychain cannot be opened here", or the
    ///   sealed header fields were edited).
    public static func open(at path: String, secureEnclave: (any SecureEnclaveToken)? = nil) throws -> KeychainFile {
        try engineErrors {
            let (db, header, device, inode) = try openChecked(path)
            let file = KeychainFile(path: path, db: db, header: header, device: device, inode: inode, secureEnclave: secureEnclave)
            let hasKeys = file.withMutex {
                file.loadSharedKeys()
                return file.keys != nil
            }
            // The TPM and scrypt run with no lock held (``unlock()``, ``unlock(password:)``).
            if !hasKeys && header.sealed != nil {
                do {
                    try file.unlock()
                } catch let error as EngineError where header.password != nil {
                    KeystoneLog.logger.warning("the keychain's TPM cannot open it; it stays locked until unlocked with its recovery password",
                                               metadata: ["path": "\(path)", "status": "\(error.status)"])
                }
            } else if !hasKeys && header.emptyPassword {
                try? file.unlock(password: "")
            }
            return file
        }
    }

    /// Checks, opens and reads the header of the keychain file at `path`.
    ///
    /// Waits up to `waiting` seconds for another connection's lock while reading the header (SQLite's busy handler:
    /// call it with no mutex held, or with 0: `SQLITE_BUSY` is then thrown as a `SQLiteError` for the caller to wait
    /// outside its mutex). The connection returned never waits (busy timeout 0).
    static func openChecked(_ path: String, waiting: TimeInterval = defaultBusyTimeout) throws -> (SQLiteConnection, Header, UInt64, UInt64) {
        var before = stat()
        guard stat(path, &before) == 0 else { throw EngineError(Status.noSuchKeychain, "no keychain at \(path)") }
        // Planted companions (a -wal symlink) are refused before SQLite follows them.
        if let planted = FileSafety.companionProblems(URL(fileURLWithPath: path).resolvingSymlinksInPath().path).first {
            throw EngineError(Status.wrPerm, "refusing to use the keychain \(path): \(planted.path): \(planted.reason)")
        }
        let db: SQLiteConnection
        let header: Header
        do {
            db = try SQLiteConnection(path: path, create: false, busyTimeout: waiting)
            try db.exec("BEGIN")
            defer { try? db.exec("COMMIT") }
            header = try Header.read(from: db)
        } catch let error as SQLiteError where error.isBusy {
            if waiting == 0 { throw error }
            let holder = LockHolder.describe(path: path)
            throw EngineError(Status.notAvailable, "the keychain file \(path) stayed busy while being opened: "
                + (holder.map { "\($0) holds its lock" } ?? "another connection holds its lock")
                + "; try again when it is done, or wait longer (\(KeychainFile.busyTimeoutVariable))")
        } catch let error as SQLiteError {
            throw EngineError(Status.invalidKeychain, "\(path) is not a keychain (SQLite \(error.code))")
        }
        // A file that is not a keychain is reported as such first; a keychain is used only when it is safe.
        try FileSafety.check(keychainAt: path)
        do { try configure(db) } catch let error as SQLiteError { throw error.engineError }
        db.setBusyTimeout(0)
        var after = stat()
        guard stat(path, &after) == 0, after.st_dev == before.st_dev, after.st_ino == before.st_ino else {
            throw EngineError(Status.invalidKeychain, "the keychain \(path) was replaced while it was being opened")
        }
        return (db, header, UInt64(after.st_dev), UInt64(after.st_ino))
    }

    /// Whether the file at `path` is a Keystone keychain (its header has Keystone's magic); reads only.
    public static func isKeychain(at path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
              let db = try? SQLiteConnection(path: path, create: false) else { return false }
        guard let statement = try? db.statement("SELECT value FROM keystone_header WHERE name = 'magic'"),
              (try? statement.step()) == true else { return false }
        return statement.data(0) == Data(FileFormat.magic.utf8)
    }

    /// Opens the default keychain, creating it with an empty password when it does not exist.
    ///
    /// Processes racing to the first use all succeed on the same file. A file left by a creation interrupted in
    /// an earlier version of Keystone (a database with no header and no items) is moved aside, never deleted.
    /// - Throws: the errors of ``open(at:secureEnclave:)`` and ``create(at:password:settings:)``; `errSecWrPerm`
    ///   when the keychain directory cannot be made or written (a daemon's user whose home is `/nonexistent`, a
    ///   read-only home), its message naming the fix: `KEYSTONE_KEYCHAIN_DIR` (``keychainDirectoryVariable``).
    /// - Parameter secureEnclave: the token that opens the default keychain when it is sealed to a Secure Enclave
    ///   (``open(at:secureEnclave:)``).
    public static func openDefault(secureEnclave: (any SecureEnclaveToken)? = nil) throws -> (keychain: KeychainFile, created: Bool) {
        try engineErrors {
            try checkLocationEncoding()
            let path = defaultPath
            do {
                return try openDefault(at: path, secureEnclave: secureEnclave)
            } catch let error as EngineError {
                throw addingDirectoryFix(to: error, path: path)
            }
        }
    }

    /// ``openDefault(secureEnclave:)`` for the keychain at `path`.
    static func openDefault(at path: String, secureEnclave: (any SecureEnclaveToken)? = nil) throws -> (keychain: KeychainFile, created: Bool) {
        for _ in 0..<4 {
            var info = stat()
            if stat(path, &info) == 0 {
                do {
                    return (try open(at: path, secureEnclave: secureEnclave), false)
                } catch let error as EngineError where error.status == Status.invalidKeychain && isAbandonedCreation(path) {
                    let aside = path + ".interrupted-" + randomBytes(4).map { String(format: "%02x", $0) }.joined()
                    KeystoneLog.logger.warning("moving aside a keychain file whose creation was interrupted", metadata: ["path": "\(path)", "to": "\(aside)"])
                    if rename(path, aside) != 0 { throw error }
                    continue
                }
            }
            do {
                return (try create(at: path, password: ""), true)
            } catch let error as EngineError where error.status == Status.duplicateKeychain {
                continue  // another process created it first: open theirs
            }
        }
        return (try open(at: path, secureEnclave: secureEnclave), false)
    }

    /// A SQLite database with no Keystone header and no item rows: what an interrupted creation of an earlier
    /// version left behind. Anything else (another program's database, a keychain with items) is not.
    static func isAbandonedCreation(_ path: String) -> Bool {
        guard let db = try? SQLiteConnection(path: path, create: false) else { return false }
        guard let count = try? db.statement("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"),
              (try? count.step()) == true else { return false }
        let tables = count.int64(0)
        count.reset()
        if tables == 0 { return true }
        if let header = try? db.statement("SELECT count(*) FROM keystone_header"), (try? header.step()) == true, header.int64(0) > 0 {
            return false
        }
        for cls in ItemClass.allCases {
            guard let rows = try? db.statement("SELECT count(*) FROM \(cls.rawValue)") else { continue }
            guard (try? rows.step()) == true, rows.int64(0) == 0 else { return false }
        }
        return true
    }

    /// Deletes the keychain file (with its WAL and shared-memory files) and its cached keys.
    ///
    /// Only a Keystone keychain is deleted: any other file is left as it is.
    /// - Throws: `EngineError` with `errSecNoSuchKeychain` when there is no file, `errSecInvalidKeychain` when
    ///   the file is not a keychain, `errSecWrPerm` when it cannot be removed.
    public static func delete(at path: String) throws {
        try engineErrors {
            var info = stat()
            guard stat(path, &info) == 0 else { throw EngineError(Status.noSuchKeychain, "no keychain at \(path)") }
            guard isKeychain(at: path) else {
                throw EngineError(Status.invalidKeychain, "\(path) is not a Keystone keychain; it was not deleted")
            }
            if let db = try? SQLiteConnection(path: path, create: false),
               let header = try? Header.read(from: db), let fileID = header.fileID,
               let identity = FileIdentity(path: path, fileID: fileID) {
                KeyringCache(file: identity).remove()
            }
            guard unlink(path) == 0 else {
                throw EngineError(Status.wrPerm, "cannot delete \(path): \(String(cString: strerror(errno)))")
            }
            for suffix in ["-wal", "-shm", SharedCommit.suffix] { unlink(path + suffix) }
        }
    }

    /// Per-connection settings: durable commits (synchronous=FULL, set after opening), an 8 MiB page cache and
    /// no memory-mapped reads (mapped pages of a 100,000-item file added tens of megabytes to a process for
    /// lookups barely faster: the indexes keep random reads within 1.2× of a 100-item file); a write-ahead log kept
    /// between connections and checkpointed every ``FileFormat/checkpointPages`` pages (see
    /// ``KeychainFile/ensureLogCapacity()``).
    static func configure(_ db: SQLiteConnection) throws {
        try db.exec("PRAGMA synchronous=FULL")
        try db.exec("PRAGMA cache_size=-8192")
        try db.exec("PRAGMA mmap_size=0")
        try db.exec("PRAGMA wal_autocheckpoint=\(FileFormat.checkpointPages)")
        db.keepWALOnClose()
    }

    static func makeDirectory(_ directory: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) { return }
        let parent = (directory as NSString).deletingLastPathComponent
        if !parent.isEmpty && parent != directory { try makeDirectory(parent) }
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw EngineError(Status.wrPerm, "cannot create \(directory): \(String(cString: strerror(errno)))")
        }
    }
}

/// open(2), outside the class (`open` is a method name there).
func openFile(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
    open(path, flags, mode)
}
