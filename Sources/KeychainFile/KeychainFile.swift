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

/// How a keychain file locks itself.
public struct KeychainSettings: Sendable, Hashable, Codable {
    /// The longest auto-lock timeout a keychain accepts (about 136 years): larger values are `errSecParam`.
    public static let maximumTimeout = TimeInterval(UInt32.max)

    /// Seconds after an unlock when the keychain locks again (to `lockedAfterFirstUnlock`); nil: never.
    public var lockAfterTimeout: TimeInterval?
    /// Recorded for `security` compatibility (`set-keychain-settings -l`); Linux gives no sleep signal to act on.
    public var lockOnSleep: Bool

    /// Settings; the defaults never lock on their own.
    public init(lockAfterTimeout: TimeInterval? = nil, lockOnSleep: Bool = false) {
        self.lockAfterTimeout = lockAfterTimeout
        self.lockOnSleep = lockOnSleep
    }

    /// Checks the timeout is a finite number of seconds in 0…``maximumTimeout``.
    ///
    /// - Throws: `EngineError` with `errSecParam` otherwise.
    public func validate() throws {
        if let timeout = lockAfterTimeout, !(timeout.isFinite && timeout >= 0 && timeout <= Self.maximumTimeout) {
            throw EngineError.param("the lock timeout must be between 0 and \(Int(Self.maximumTimeout)) seconds")
        }
    }
}

/// An encrypted keychain file: Linux's default keychain storage.
///
/// One SQLite file (WAL, `synchronous=FULL`) per keychain, modelled on Apple's data-protection keychain
/// (the format: `FileFormat`; creation and opening: `FileLifecycle.swift`; rows: `Rows.swift`):
///
/// - A random 256-bit master key, wrapped (AES-GCM) by a key derived from the keychain password with scrypt.
///   The scrypt parameters live in the file's header, are validated when read, and are raised on unlock when
///   today's are stronger. Or sealed to a Secure Enclave token, on Linux the TPM 2.0
///   (``create(at:sealedTo:recoveryPassword:settings:)``): the file then opens unlocked on this machine without a
///   password and cannot be opened on any other, optionally with a recovery password as well.
/// - Three class keys derived from the master key (HKDF): A for `whenUnlocked*`, C for `afterFirstUnlock*`,
///   D for `always*`. Every row has its own random key, wrapped by its class key; the row's attributes,
///   secret and access control are sealed together with that row key.
/// - The primary-key columns hold HMAC-SHA256 digests under a key derived from the master key, so lookups
///   are indexed while the file shows no service, account, server or label. The sealed data is bound to the
///   row's class, protection class, row id and primary-key digest, and every digest column is checked against
///   the decrypted attributes: a row edited, swapped or copied in any column reads as `errSecDecode`, alone,
///   and never as another item.
///
/// Lock states: ``lock()`` discards every key (`LockState.locked`: reads and writes fail with
/// `errSecInteractionNotAllowed`, nothing is touched). The auto-lock timeout keeps the C and D keys
/// (`LockState.lockedAfterFirstUnlock`), as a device that locks after a first unlock.
///
/// Across processes, unlocked keys are cached in the Linux kernel user keyring under the file's identity
/// (device, inode and a random id in the header), checked against the header before use and expiring with the
/// timeout or after 12 hours; ``lock()`` removes them and bumps a lock epoch stored in the file, which every
/// other open instance notices at its next operation, as it notices a later unlock. Where the keyring is refused
/// (Docker's default seccomp profile forbids `keyctl`), the same entries go to this user's unlock agent
/// (`keystone agent`) when one answers, and are read from it; ``unlockSharing`` says where an unlock's keys were
/// kept. With neither, each process must unlock on its own.
///
/// Threads and other processes: an instance can be shared between threads, and nothing slow runs under its lock.
/// Key derivation (scrypt, the TPM) runs with no lock held (`Unlocking.swift`); ``lockState`` runs no SQL under it
/// (`LockStateProbe.swift`); an operation meeting another process's lock on the file waits outside it, up to
/// ``busyTimeout`` (`KEYSTONE_BUSY_TIMEOUT`, default 10 s), then fails with `errSecNotAvailable` (`BusyWait.swift`).
///
/// - Important: The file protects secrets at rest against whoever can read the file but does not know the
///   password. It does not protect against code running as the same user while the keychain is unlocked
///   (it can read the kernel keyring cache, ask the unlock agent, and read this process's memory), nor against a
///   weak password: with an
///   empty password the file is protected only by its permissions (0600 in a 0700 directory), which is why a
///   file owned by another user or open to group or others is refused (`errSecWrPerm`). A file sealed to the TPM
///   is protected against whoever takes it off the machine; on the machine, code running as a user who may use the
///   TPM can open it.
public final class KeychainFile: KeychainStorage, @unchecked Sendable {
    // @unchecked Sendable: every mutable property is reached only while `mutex` is held.

    /// The file's path.
    public let path: String

    let mutex = NSRecursiveLock()
    /// Moves on at every hold of `mutex` (every change of the instance's state happens under it): a pooled read uses
    /// its copy of the state only while this has not moved since the copy (`ReaderPool.swift`).
    let stateGeneration = Atomic<UInt64>(0)
    /// How many times the thread holding `mutex` holds it (it is recursive).
    var mutexDepth = 0
    /// ``busyTimeout``.
    var busyTimeoutSetting = KeychainFile.defaultBusyTimeout
    /// Test hooks (see ``TestHooks``); nil in production.
    var testHooks = TestHooks()
    /// A second connection to the file, for ``lockState`` (see `LockStateProbe.swift`), with its own lock.
    let probe = LockStateProbe()
    var db: SQLiteConnection
    var header: Header
    /// Device and inode of the file `db` has open.
    var device: UInt64
    var inode: UInt64
    var unlockedAt: Date?
    var epoch: Int64
    var dataVersion: Int64 = -1
    var inTransaction = false
    /// The header fields ``refresh()`` last decoded, with what they decoded to.
    var lastHeaderFields: ([String: Data], Header)?
    /// Whether writes share log flushes (``groupCommitEnabled``, `GroupCommit.swift`).
    var groupCommit = true
    /// The transaction this instance's connection runs now (a write, or a read under the mutex); mutex held.
    var currentSource: RowSource?
    /// Connections for reads that run with no lock of the instance held (`ReaderPool.swift`).
    let readers = ReaderPool()
    /// Whether reads use ``readers`` (default true; false: every read runs under the mutex, for measurements).
    var pooledReads = true
    /// Decrypted rows by (class, row id), each with the raw columns it was decrypted from (used only when every
    /// column still has the same bytes, so an edited row is decrypted and checked again), digests of attribute values
    /// under the current index key (see `digest` in RowDigests.swift), and the count of rows decrypted: behind a lock
    /// of their own, for reads on pooled connections (`ReaderPool.swift`).
    let caches = RowCaches()
    var cachingEnabled = true
    /// The keys, as they change: every cache derived from them is emptied.
    var keys: KeySet? {
        didSet { caches.clear() }
    }
    /// The time, for the auto-lock timeout (tests move it instead of sleeping).
    var clock: @Sendable () -> Date = { Date() }
    /// Whether ``ensureLogCapacity()`` ran on this connection.
    var logSized = false
    /// Set when the file at `path` was deleted while open: every operation then fails with it.
    var gone: EngineError?
    /// Whether the keys held now are shared through the kernel keyring.
    ///
    /// Decision: keys a Secure Enclave unsealed are never cached there. Every process unseals a sealed file itself
    /// (one ECDH in the TPM, milliseconds), so keys never outlive the TPM in the keyring: a TPM cleared or gone
    /// means the keychain does not open, at once. Keys unlocked with a sealed file's recovery password are cached
    /// as any password's are, so that one `unlock-keychain -p` serves later commands where the TPM cannot.
    var sharesKeys = true
    /// Where this instance's last unlock or creation kept its keys for later processes (``unlockSharing``).
    var sharing: SharedUnlock?
    /// The token that opens a file sealed to a Secure Enclave (nil: none; such a file then stays locked).
    let secureEnclave: (any SecureEnclaveToken)?

    /// How many rows this file has decrypted so far (a row served from the row cache is not counted): the storage
    /// contract's laziness clause checks that a limit-one search decrypts only the first match.
    package var decryptionCount: Int { caches.decryptions }

    /// Whether decrypted rows are kept in memory between reads (default true).
    ///
    /// - Important: The cache holds only what the keys in this process could decrypt anyway, and a cached row is
    ///   used only while its stored bytes are unchanged; it is emptied on every lock and key change. Turn it off
    ///   to keep decrypted items in memory only for the duration of one operation, at the cost of a decryption
    ///   per read.
    public var cachesDecryptedItems: Bool {
        get { withMutex { cachingEnabled } }
        set { withMutex { cachingEnabled = newValue; if !newValue { caches.clearRows() } } }
    }

    struct DigestKey: Hashable {
        let itemClass: ItemClass
        let attribute: String
        let value: AttributeValue
    }

    struct RowKey: Hashable {
        let itemClass: ItemClass
        let rowID: Int64
    }

    /// A row's stored columns, as read.
    struct RowColumns: Equatable {
        var pk: Data
        var pclass: String
        var wrapped: Data
        var payload: Data
        var digests: [Data]
    }

    struct CachedRow {
        let columns: RowColumns
        let candidate: Candidate
    }

    init(path: String, db: SQLiteConnection, header: Header, device: UInt64, inode: UInt64,
         secureEnclave: (any SecureEnclaveToken)? = nil) {
        self.path = path
        self.secureEnclave = secureEnclave
        self.db = db
        self.header = header
        self.device = device
        self.inode = inode
        self.epoch = header.epoch
    }

    // Locations (the keychain directory, the default keychain): Locations.swift.

    /// Runs `body` holding the mutex. Nothing slow runs under it: no scrypt, no TPM call, no sleep, no waiting for
    /// another connection's lock (the connection's busy timeout is 0; see ``withMutexWaitingOutside(_:)``).
    func withMutex<T>(_ body: () throws -> T) rethrows -> T {
        mutex.lock()
        stateGeneration.add(1, ordering: .releasing)
        mutexDepth += 1
        defer { mutexDepth -= 1; mutex.unlock() }
        return try body()
    }

    // MARK: - Lock state

    /// Whether the password is empty: the file is then protected only by its permissions. False for a file
    /// sealed to a Secure Enclave without a password.
    public var isEmptyPassword: Bool { withMutex { header.emptyPassword } }

    /// Whether the file has a password (for a file sealed to a Secure Enclave: a recovery password).
    public var hasPassword: Bool { withMutex { header.password != nil } }

    /// Whether the master key is sealed to a Secure Enclave token (`create-keychain --tpm`): the file opens only
    /// on the machine whose TPM sealed it (or with its recovery password, when it has one).
    public var isSealedToSecureEnclave: Bool { withMutex { header.sealed != nil } }

    /// The lock settings.
    public var settings: KeychainSettings { withMutex { header.settings } }

    /// Where this instance's last unlock (or the creation of the file) kept the keys for this user's later
    /// processes: the kernel keyring, the unlock agent, or nowhere (with the reason); nil before any.
    public var unlockSharing: SharedUnlock? { withMutex { sharing } }

    /// The unlock cache of this file, when it has an identity (format 2, or a version 1 file once unlocked).
    var keyring: KeyringCache? {
        header.fileID.map { KeyringCache(file: FileIdentity(device: device, inode: inode, fileID: $0)) }
    }

    /// Changes the lock settings; the cached keys' expiry follows.
    ///
    /// - Throws: `EngineError` with `errSecParam` for a timeout out of range, `errSecQuotaExceeded` when the
    ///   cached keys cannot be rewritten.
    public func setSettings(_ settings: KeychainSettings) throws {
        try settings.validate()
        try engineErrors {
            try withMutexWaitingOutside {
                try updateHeader { $0.settings = settings }
                if let keys, sharesKeys { sharing = try share(keys, at: unlockedAt ?? clock()) }
            }
        }
    }

    func updateHeader(_ change: (inout Header) -> Void) throws {
        do {
            try beginImmediate()
            do {
                var fresh = try Header.read(from: db)
                change(&fresh)
                try fresh.write(to: db)
                try db.exec("COMMIT")
                header = fresh
                dataVersion = -1
                try makeCommitDurable()
            } catch {
                try? db.exec("ROLLBACK")
                throw error
            }
        } catch let error as SQLiteError where !error.isBusy { throw error.engineError }
    }

    /// Makes `keys` this process's keys and, when `shared`, shares them through the unlock cache (the kernel keyring,
    /// else the unlock agent).
    ///
    /// Where the keys were kept for later processes is recorded in `sharing` (``SharedUnlock/notShared`` when not
    /// `shared`).
    /// - Throws: `errSecQuotaExceeded` when they could not be shared (they are installed here all the same).
    func install(_ keys: KeySet, at date: Date, share shared: Bool = true) throws {
        caches.clearRows()
        self.keys = keys
        self.unlockedAt = date
        sharesKeys = shared
        sharing = .notShared
        if shared { sharing = try share(keys, at: date) }
    }

    /// Stores `keys` in the unlock cache; the result is the weaker of the full and after-first-unlock entries'.
    @discardableResult
    func share(_ keys: KeySet, at date: Date) throws -> SharedUnlock {
        guard let keyring else { return .thisProcessOnly(reason: "the keychain has no identity to share its keys under (unlock it once to upgrade it)") }
        var full: UnlockPersistence?
        if keys.lockState == .unlocked {
            let remaining = header.settings.lockAfterTimeout.map { max(1, $0 - clock().timeIntervalSince(date)) }
            full = try keyring.store(keys, unlockedAt: date, timeout: remaining, full: true)
        }
        let afterFirstUnlock = try keyring.store(keys.afterFirstUnlock, unlockedAt: date, timeout: nil, full: false)
        let weaker = (full?.persists == false) ? full! : afterFirstUnlock
        return SharedUnlock(weaker)
    }

    /// Takes keys from the keyring cache when they belong to this file: better ones than those held now.
    func loadSharedKeys() {
        guard let keyring, let fileID = header.fileID, let check = header.keyCheck else { return }
        for full in [true, false] {
            if full == false, keys != nil { return }
            guard let (cached, date) = keyring.load(full: full) else { continue }
            guard cached.check(fileID: fileID) == check else {
                KeystoneLog.logger.warning("cached keychain keys do not match the file; ignoring them", metadata: ["path": "\(path)"])
                keyring.remove()
                return
            }
            if keys?.lockState == .unlocked && cached.lockState != .unlocked { return }
            keys = cached
            unlockedAt = date
            sharesKeys = true
            caches.clearRows()
            return
        }
    }

    /// Brings this instance up to date with the file: a replaced or deleted file, another instance's lock or
    /// unlock, the auto-lock timeout. Mutex held.
    ///
    /// - Throws: `errSecNoSuchKeychain` when the file was deleted; the errors of opening when it was replaced by
    ///   a file that is not a valid keychain.
    ///
    /// `inWriteTransaction`: the caller followed a replacement (``followReplacement()``) and then began its write
    /// transaction: the data version and the header are read in that transaction's snapshot, with no read transaction
    /// of their own (each costs SQLite two file locks).
    func refresh(inWriteTransaction: Bool = false) throws {
        guard !inTransaction else { return }
        if !inWriteTransaction { try followReplacement() }
        if let version = try busyOrNil(currentDataVersion), version != dataVersion {
            // Read before `dataVersion` moves: a busy read is tried again by the caller, not skipped.
            let read = try busyOrNil(inWriteTransaction ? readHeaderFields : readHeaderInTransaction)
            dataVersion = version
            if let fresh = read {
                header = fresh
                if fresh.epoch != epoch {
                    // Another instance locked the keychain.
                    keys = nil
                    unlockedAt = nil
                    caches.clearRows()
                    epoch = fresh.epoch
                }
            }
        }
        if keys?.lockState != .unlocked { loadSharedKeys() }
        applyTimeout()
    }

    /// Notices that the file at `path` is no longer the one open: another process replaced it (a restore, a
    /// delete and create). Writes must land in the file others read, so the new file is opened in its place,
    /// with none of the old file's keys.
    func followReplacement() throws {
        var info = stat()
        guard stat(path, &info) == 0 else {
            gone = EngineError(Status.noSuchKeychain, "the keychain \(path) was deleted")
            throw gone!
        }
        gone = nil
        guard UInt64(info.st_dev) != device || UInt64(info.st_ino) != inode else { return }
        KeystoneLog.logger.notice("the keychain file was replaced; opening the new file", metadata: ["path": "\(path)"])
        let (newDB, newHeader, dev, ino) = try Self.openChecked(path, waiting: 0)
        adopt(newDB, newHeader, device: dev, inode: ino)
    }

    /// Makes the connection to a file that replaced the one open this instance's, with none of the old file's keys.
    /// Mutex held.
    func adopt(_ newDB: SQLiteConnection, _ newHeader: Header, device dev: UInt64, inode ino: UInt64) {
        db = newDB
        logSized = false
        header = newHeader
        device = dev
        inode = ino
        epoch = newHeader.epoch
        keys = nil
        unlockedAt = nil
        dataVersion = -1
        caches.clearRows()
        loadSharedKeys()
    }

    /// `body`'s result; nil when it fails, except with `SQLITE_BUSY`, which is thrown for the caller to wait
    /// outside the mutex (``withMutexWaitingOutside(_:)``).
    private func busyOrNil<T>(_ body: () throws -> T) throws -> T? {
        do { return try body() } catch let error as SQLiteError where error.isBusy { throw error } catch { return nil }
    }

    func applyTimeout() {
        if let timeout = header.settings.lockAfterTimeout, let since = unlockedAt, let current = keys,
           current.lockState == .unlocked, clock().timeIntervalSince(since) >= timeout {
            keys = current.afterFirstUnlock
            caches.clearRows()
        }
    }

    private func currentDataVersion() throws -> Int64 {
        let statement = try db.statement("PRAGMA data_version")
        defer { statement.reset() }
        guard try statement.step() else { return -1 }
        return statement.int64(0)
    }

    /// The header as stored now; decoded again only when its stored fields changed since the last read (another
    /// process's item writes change the file's data version, not its header).
    private func readHeaderInTransaction() throws -> Header {
        try db.statement("BEGIN").run()
        defer { try? db.statement("COMMIT").run() }
        return try readHeaderFields()
    }

    /// The header as stored now, inside the caller's transaction (see ``readHeaderInTransaction()``).
    private func readHeaderFields() throws -> Header {
        let fields = try Header.fields(from: db)
        if let (known, decoded) = lastHeaderFields, known == fields { return decoded }
        let decoded = try Header.decode(fields)
        lastHeaderFields = (fields, decoded)
        return decoded
    }
}
