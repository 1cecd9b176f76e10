#if NIO
import Crypto
import Foundation
import KeychainEngine
import KeychainSealing

/// A keychain kept in an etcd cluster: one keychain shared by every machine of a fleet, end-to-end encrypted.
///
/// etcd (Raft, linearizable transactions) provides what the SecItem rules need from a distributed store, and
/// Keystone adds nothing distributed of its own:
/// - **An item is one etcd key**, named by its class and the HMAC of its primary key (`EtcdKeyspace`). An add is a
///   transaction that succeeds only if that key does not exist: two machines adding the same primary key at once get
///   exactly one `errSecSuccess` and one `errSecDuplicateItem`.
/// - **Every change is a compare-and-swap.** A ``write(_:)`` body runs against one snapshot (one etcd revision);
///   its changes commit in one etcd transaction that also checks that every key it read by primary key and every
///   key it changes still has the revision it saw. When another machine changed one of them first, nothing is
///   written and the body runs again on a fresh snapshot. A ``read(_:)`` sees one revision, so a match-all
///   search is one consistent snapshot; each read starts with a linearizable read, so a write acknowledged by any
///   machine is seen by the next read on every machine (nothing is cached between calls).
/// - **End to end**: rows are sealed as in the keychain file (`SealedItem`: a random key per item, wrapped by a
///   class key derived from the master key; AES-GCM binding the keychain id, class, row id and digests). etcd, its
///   data directory, its backups and anyone watching its traffic see digests and sealed blobs only. The master key
///   is wrapped under the keychain password (scrypt) in the header.
///
/// A machine can also unlock with its TPM instead of the password, once enrolled (``enrollMachine(_:machineID:)``,
/// ``unlock(with:machineID:)``).
///
/// Locking is per machine: ``lock()`` discards this process's keys and the unlock cache this user has on this
/// machine (the kernel keyring, as for a keychain file), which this user's other processes on this machine notice
/// at their next call. Other machines are not locked: a fleet's replicas each unlock for themselves.
///
/// Failure: each call has a deadline (``EtcdConfiguration/timeout``) across every endpoint; when no member with a
/// quorum answers in time the call fails with `errSecNotAvailable` and a message naming the endpoints. A write whose
/// answer was lost is checked by reading back, so it is reported as done only when it was applied.
///
/// - Important: Whoever knows the keychain password and can read the cluster can read every item; etcd user
///   authentication and TLS limit who can read the cluster, and who can delete from it (an attacker with write access
///   to etcd cannot read or forge items, but can delete them). Limits that follow from etcd's defaults: a value of at
///   most 1.5 MiB (`--max-request-bytes`) and at most 127 items changed by one call (`--max-txn-ops`, 128 compares with the header's); beyond them
///   calls fail with `errSecDataTooLarge` or `errSecQuotaExceeded` and change nothing.
/// - Important: Every call blocks its thread until etcd answers (at most ``EtcdConfiguration/timeout`` per etcd
///   request round). Call it from a thread you own, or through Keystone's async API, which runs it on threads of its
///   own; not directly from an async function (it would hold a thread of Swift's cooperative pool while it waits).
///   A call on a SwiftNIO event-loop thread is refused with `errSecParam` before anything is sent (on the client's
///   own loop it would deadlock).
public final class EtcdKeychain: KeychainStorage {
    // Sendable (checked): what changes is in `state`, the package's one lock type, held only for memory and the
    // kernel keyring's calls; etcd calls are made outside it, so transactions of several threads proceed at once.

    public let configuration: EtcdConfiguration
    let client: EtcdClient
    let keyspace: EtcdKeyspace
    private let state: Locked<State>
    /// How many rows this keychain's transactions have decrypted (its own lock: counting never waits on `state`).
    let decryptions = Locked(0)
    /// How many rows this keychain has decrypted so far: the storage contract's laziness clause checks that a
    /// limit-one search decrypts only the first match.
    package var decryptionCount: Int { decryptions.current }
    /// The time: the auto-lock timeout, deleted items' dates and retention (issue 30). Tests set it.
    package var clock: @Sendable () -> Date {
        get { clockSource.current }
        set { clockSource.withLock { $0 = newValue } }
    }
    private let clockSource = Locked<@Sendable () -> Date>({ Date() })
    /// This machine's rollback marks, by keychain id (EtcdRollback.swift).
    private let highWaters = Locked<[Data: EtcdHighWater]>([:])
    /// The HEAD record as this process last wrote it (value, mod revision): a first attempt guesses it.
    let headHint = Locked<(value: Data, modRevision: Int64)?>(nil)
    /// The rows last read under item identities' prefixes: a write's first attempt guesses them (EtcdPrefixCache.swift).
    let prefixCache = Locked(EtcdPrefixCache())
    /// When a write last read the tombstone index, and its oldest deletion: guesses wait for the purge.
    let purgeWatch = Locked<EtcdPurgeWatch?>(nil)

    /// The rollback marks of the keychain with id `id` on this machine.
    func highWater(_ id: Data) -> EtcdHighWater {
        highWaters.withLock { all in
            if let known = all[id] { return known }
            let made = EtcdHighWater(keychainID: id)
            all[id] = made
            return made
        }
    }

    /// What changes while the keychain is open (reached only inside `state.withLock`).
    fileprivate struct State: Sendable {
        let configuration: EtcdConfiguration
        var header: EtcdKeychainHeader {
            didSet { if header.keychainID != oldValue.keychainID { cache = EtcdKeychain.cache(of: header, configuration) } }
        }
        /// This keychain's unlock cache on this machine (named by the header's keychain id: made once, not per call).
        var cache: KeyringCache
        /// The header's mod revision in etcd: every commit checks it, so a keychain deleted (or made again) elsewhere
        /// is never written with old keys.
        var headerRevision: Int64
        var keys: KeySet?
        var unlockedAt: Date?
        /// The row-id sequence as this process last wrote it (value, mod revision): a first attempt of a write
        /// guesses it is still there (``EtcdTransaction/Start/guessing(sequence:)``).
        var sequenceHint: (value: Int64, modRevision: Int64)?
        /// Set when a commit found the keychain deleted (or deleted and made again): every call then fails with it,
        /// without touching the cluster, until an unlock opens whatever keychain of that name exists then.
        var gone: EngineError?
    }

    /// How many times a transaction runs again after losing a compare-and-swap before giving up.
    static let maximumAttempts = 64
    /// How many times it runs again after losing only on the HEAD record (other writes of other items).
    static let maximumHeadAttempts = 1_024

    private init(configuration: EtcdConfiguration, client: EtcdClient, header: EtcdKeychainHeader, revision: Int64) {
        self.configuration = configuration
        self.client = client
        self.keyspace = EtcdKeyspace(name: configuration.name)
        self.state = Locked(State(configuration: configuration, header: header, cache: Self.cache(of: header, configuration),
                                  headerRevision: revision))
    }

    private static func cache(of header: EtcdKeychainHeader, _ configuration: EtcdConfiguration) -> KeyringCache {
        KeyringCache(identity: header.cacheIdentity(name: configuration.name))
    }

    deinit { client.shutdown() }

    // MARK: - Creating, opening, deleting

    /// Creates the keychain `configuration.name` on the cluster, protected by `password`, and leaves it unlocked in
    /// this process (and, through the unlock cache, for this user on this machine).
    ///
    /// - Parameters:
    ///   - configuration: the cluster's endpoints, the keychain's name, TLS and authentication.
    ///   - password: the keychain password every machine unlocks it with.
    ///   - lockAfterTimeout: seconds after an unlock when a machine's keys drop to after-first-unlock; nil: never.
    /// - Throws: `EngineError`: `errSecDuplicateKeychain` when a keychain of that name exists (nothing is changed);
    ///   `errSecParam` for a timeout out of range; `errSecNotAvailable` when the cluster does not answer;
    ///   `errSecAuthFailed` / `errSecWrPerm` when etcd refuses the credentials or the permission.
    /// - Important: An empty password leaves the items readable by anyone who can read the cluster. Blocks until the
    ///   cluster answers: call it from a thread you own, not from an async function directly (see ``EtcdKeychain``).
    public static func create(_ configuration: EtcdConfiguration, password: String, lockAfterTimeout: TimeInterval? = nil) throws -> EtcdKeychain {
        if let timeout = lockAfterTimeout, !(timeout.isFinite && timeout >= 0 && timeout <= TimeInterval(UInt32.max)) {
            throw EngineError.param("the lock timeout must be between 0 and \(UInt32.max) seconds")
        }
        let client = try EtcdClient(configuration: configuration)
        do {
            let keyspace = EtcdKeyspace(name: configuration.name)
            let (header, master) = try EtcdKeychainHeader.make(password: password, lockAfterTimeout: lockAfterTimeout)
            let result = try etcd {
                try client.txn(compare: [.createRevision(keyspace.meta, equals: 0)],
                               success: [.put(keyspace.meta, header.encoded), .put(keyspace.sequence, Data(bigEndian: 0))])
            }
            guard result.succeeded else {
                throw EngineError(Status.duplicateKeychain, "a keychain named \(configuration.name) already exists on \(configuration.endpointList)")
            }
            let keychain = EtcdKeychain(configuration: configuration, client: client, header: header, revision: result.revision)
            let now = keychain.clock()
            keychain.state.withLock { try? $0.install(KeySet(master: master), at: now, now: now) }
            return keychain
        } catch {
            client.shutdown()
            throw error
        }
    }

    /// Opens the keychain `configuration.name`: locked, unless this user unlocked it on this machine recently (the
    /// unlock cache).
    ///
    /// - Throws: `EngineError`: `errSecNoSuchKeychain` when the cluster has no keychain of that name;
    ///   `errSecInvalidKeychain` / `errSecWrongSecVersion` for a damaged or newer header; `errSecNotAvailable` when the
    ///   cluster does not answer; `errSecAuthFailed` / `errSecWrPerm` when etcd refuses; `errSecParam` on a SwiftNIO
    ///   event-loop thread.
    /// - Important: Blocks until the cluster answers: call it from a thread you own, not from an async function
    ///   directly (see ``EtcdKeychain``).
    public static func open(_ configuration: EtcdConfiguration) throws -> EtcdKeychain {
        let client = try EtcdClient(configuration: configuration)
        do {
            let (header, revision) = try readHeader(client, EtcdKeyspace(name: configuration.name), configuration)
            let keychain = EtcdKeychain(configuration: configuration, client: client, header: header, revision: revision)
            keychain.state.withLock { $0.loadSharedKeys() }
            return keychain
        } catch {
            client.shutdown()
            throw error
        }
    }

    /// Deletes the keychain `configuration.name` and every item in it, on the whole cluster, in one transaction.
    ///
    /// - Throws: `errSecNoSuchKeychain` when there is none; the cluster's errors.
    /// - Important: This deletes the items for every machine of the fleet. It does not ask for the password (as
    ///   `security delete-keychain` does not): whoever may write to the cluster's keys can delete them.
    public static func delete(_ configuration: EtcdConfiguration) throws {
        let client = try EtcdClient(configuration: configuration)
        defer { client.shutdown() }
        let keyspace = EtcdKeyspace(name: configuration.name)
        let (header, _) = try readHeader(client, keyspace, configuration)
        _ = try etcd { try client.txn(compare: [], success: [.deletePrefix(keyspace.prefix)]) }
        cache(of: header, configuration).remove()
    }

    private static func readHeader(_ client: EtcdClient, _ keyspace: EtcdKeyspace, _ configuration: EtcdConfiguration) throws -> (EtcdKeychainHeader, Int64) {
        let found = try etcd { try client.range(keyspace.meta) }
        guard let kv = found.kvs.first else {
            throw EngineError(Status.noSuchKeychain, "there is no keychain named \(configuration.name) on \(configuration.endpointList); create it with keystone create-keychain")
        }
        return (try EtcdKeychainHeader.decode(kv.value), kv.modRevision)
    }

    /// True: every machine of the fleet reads and writes these rows (what is per machine, such as an install
    /// marker, does not describe them). Keystone's fresh-install wipe is therefore refused on an etcd keychain
    /// unless the app asks for it explicitly: each new machine would otherwise wipe the fleet's items.
    public var isSharedAcrossMachines: Bool { true }

    // MARK: - Lock state

    public var lockState: LockState {
        let now = clock()
        return state.withLock { state in
            state.refresh(now: now)
            return state.keys?.lockState ?? .locked
        }
    }

    /// Whether the password is empty (the items are then readable by whoever can read the cluster).
    public var isEmptyPassword: Bool { state.withLock { $0.header.emptyPassword } }

    /// Seconds after an unlock when this machine's keys drop to after-first-unlock; nil: never.
    public var lockAfterTimeout: TimeInterval? { state.withLock { $0.header.lockAfterTimeout } }

    /// Unlocks with `password` on this machine: this process, and this user's other processes through the unlock
    /// cache. Reads the header afresh, so a password changed on another machine is the one that works.
    ///
    /// - Throws: `errSecAuthFailed` for a wrong password (nothing is written); `errSecNoSuchKeychain` when the
    ///   keychain was deleted; `errSecNotAvailable` when the cluster does not answer; `errSecQuotaExceeded` when
    ///   the keys could not be cached for other processes (this process is unlocked all the same).
    public func unlock(password: String) throws {
        let (fresh, revision) = try readCurrentHeader()
        let master = try fresh.protector.unwrap(password)
        guard KeySet(master: master).check(fileID: fresh.keychainID) == fresh.keyCheck else {
            throw EngineError(Status.invalidKeychain, "the etcd keychain's header does not match its key check (damaged or edited)")
        }
        try installUnlocked(master, header: fresh, revision: revision)
    }

    /// The header as the cluster has it now, with its revision.
    func readCurrentHeader() throws -> (EtcdKeychainHeader, Int64) {
        try Self.readHeader(client, keyspace, configuration)
    }

    /// Makes `master` (checked against `header`) this machine's keys, with `header` as the current header.
    func installUnlocked(_ master: SymmetricKey, header fresh: EtcdKeychainHeader, revision: Int64) throws {
        let now = clock()
        try state.withLock { state in
            state.header = fresh
            state.headerRevision = revision
            state.gone = nil
            try state.install(KeySet(master: master), at: now, now: now)
        }
    }

    /// Makes `keys` (a machine enrolled for access groups: no master key) this machine's keys, with `header` as the
    /// current header (EtcdGroups.swift).
    func installUnlocked(keys: KeySet, header fresh: EtcdKeychainHeader, revision: Int64) throws {
        let now = clock()
        try state.withLock { state in
            state.header = fresh
            state.headerRevision = revision
            state.gone = nil
            try state.install(keys, at: now, now: now)
        }
    }

    /// The master key held now and the keychain id.
    ///
    /// - Throws: `errSecInteractionNotAllowed` when it is not held (locked, or unlocked only after first unlock).
    func heldMasterKey() throws -> (SymmetricKey, Data) {
        let now = clock()
        return try state.withLock { state in
            state.refresh(now: now)
            guard let master = state.keys?.master else {
                throw EngineError.interactionNotAllowed("the keychain's master key is not held here: unlock it with its password first")
            }
            return (master, state.header.keychainID)
        }
    }

    /// Unlocks a keychain whose password is empty.
    ///
    /// - Throws: `errSecAuthFailed` when it has a password; the errors of ``unlock(password:)``.
    public func unlock() throws {
        guard isEmptyPassword else {
            throw EngineError(Status.authFailed, "the keychain is protected by a password: unlock it with its password")
        }
        try unlock(password: "")
    }

    /// Locks on this machine: discards this process's keys and this user's unlock cache for the keychain, and
    /// records the lock there, so this user's other processes on this machine drop their keys at their next call.
    public func lock() {
        let now = clock()
        prefixCache.withLock { $0.removeAll() }
        state.withLock { state in
            state.keys = nil
            state.unlockedAt = nil
            state.cache.remove()
            state.cache.recordLock(at: now)
        }
    }

    /// Locks as a device does after its first unlock: `afterFirstUnlock` and `always` items stay available.
    public func lockAfterFirstUnlock() {
        state.withLock { state in
            guard let current = state.keys else { return }
            state.keys = current.afterFirstUnlock
            state.cache.removeFull()
        }
    }

    /// Changes the password for every machine, by re-wrapping the master key (no item is re-encrypted): a
    /// compare-and-swap on the header, so two machines changing it at once cannot both win.
    ///
    /// - Throws: `errSecAuthFailed` when `old` is wrong; `errSecNotAvailable` when the cluster does not answer or the
    ///   header changed while this ran (try again).
    public func changePassword(old: String, new: String) throws {
        var master: SymmetricKey?
        let (changed, revision) = try updateHeader { header in
            let key = try header.protector.unwrap(old)
            let protector = try PasswordProtector(sealing: key, password: new)
            header.kdf = protector.kdf
            header.wrappedMaster = protector.wrappedMaster
            header.emptyPassword = new.isEmpty
            master = key
        }
        if let master { try installUnlocked(master, header: changed, revision: revision) }
    }

    /// Changes the auto-lock timeout for every machine (compare-and-swap on the header).
    ///
    /// - Throws: `errSecParam` for a timeout out of range; `errSecNotAvailable` as ``changePassword(old:new:)``.
    public func setLockAfterTimeout(_ timeout: TimeInterval?) throws {
        if let timeout, !(timeout.isFinite && timeout >= 0 && timeout <= TimeInterval(UInt32.max)) {
            throw EngineError.param("the lock timeout must be between 0 and \(UInt32.max) seconds")
        }
        let (changed, revision) = try updateHeader { $0.lockAfterTimeout = timeout }
        state.withLock { state in
            state.header = changed
            state.headerRevision = revision
        }
    }

    /// Reads the header, applies `change`, and writes it back if no other machine wrote it meanwhile.
    ///
    /// - Returns: the header written and its revision.
    /// - Throws: what `change` throws (nothing is written); `errSecNotAvailable` when the header changed meanwhile.
    private func updateHeader(_ change: (inout EtcdKeychainHeader) throws -> Void) throws -> (EtcdKeychainHeader, Int64) {
        let (fresh, revision) = try readCurrentHeader()
        var changed = fresh
        try change(&changed)
        let result = try Self.etcd {
            try client.txn(compare: [.modRevision(keyspace.meta, equals: revision)], success: [.put(keyspace.meta, changed.encoded)])
        }
        guard result.succeeded else {
            throw EngineError(Status.notAvailable, "the keychain's header changed on another machine meanwhile; nothing was changed: try again")
        }
        return (changed, result.revision)
    }

    /// The header as this process last read it.
    var headerSnapshot: EtcdKeychainHeader { state.withLock { $0.header } }

    /// Changes the header for every machine (compare-and-swap) and makes the result this process's header.
    func changeHeader(_ change: (inout EtcdKeychainHeader) throws -> Void) throws {
        let (changed, revision) = try updateHeader(change)
        state.withLock { state in
            state.header = changed
            state.headerRevision = revision
        }
    }

    // MARK: - Keys (state held)

    /// The keys, header id and header revision a transaction starts with.
    ///
    /// - Throws: `errSecNoSuchKeychain` once the keychain was found deleted.
    func snapshotKeys() throws -> (KeySet?, Data, Int64) {
        let now = clock()
        return try state.withLock { state in
            if let gone = state.gone { throw gone }
            state.refresh(now: now)
            return (state.keys, state.header.keychainID, state.headerRevision)
        }
    }

    /// After a commit found the header changed: reads it again. A keychain deleted or made again elsewhere drops
    /// the keys here (its rows are no longer the ones they open).
    ///
    /// - Throws: `errSecNoSuchKeychain` when the keychain is gone or was made again; the cluster's errors.
    func reloadHeader() throws {
        let found = try Self.etcd { try client.range(keyspace.meta) }
        let configuration = configuration
        try state.withLock { state in
            guard let kv = found.kvs.first, let fresh = try? EtcdKeychainHeader.decode(kv.value), fresh.keychainID == state.header.keychainID else {
                // The keys stay (the lock state the engine checks first is unchanged), and every call fails with this.
                let gone = EngineError(Status.noSuchKeychain, "the keychain \(configuration.name) was deleted (or deleted and created again) on \(configuration.endpointList) while it was open here; nothing was changed. Unlock it again to use the keychain of that name that exists now")
                state.gone = gone
                throw gone
            }
            state.header = fresh
            state.headerRevision = kv.modRevision
        }
    }

    // MARK: - Transactions

    public func read<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        for _ in 0..<Self.maximumAttempts {
            let (keys, id, headerRevision) = try snapshotKeys()
            let transaction = EtcdTransaction(keychain: self, keys: keys, keychainID: id, headerRevision: headerRevision, writing: false)
            defer { transaction.flushMarks() }
            do {
                let result = try Self.etcd { try body(transaction) }
                // An audited read: its entry is written before its result is returned, or the read fails (fail-closed).
                if !transaction.readEvents.isEmpty, state.withLock({ $0.header.auditReads ?? false }) {
                    try appendAuditEntry(transaction.readEvents)
                }
                return result
            } catch is EtcdTransaction.SnapshotCompacted {
                continue  // the snapshot's revision was compacted away while the body ran: take a new one
            }
        }
        throw EngineError(Status.notAvailable, "the cluster kept compacting the revisions this read needed; try again")
    }

    public func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        var backoff: UInt32 = 1_000
        var start = EtcdTransaction.Start.guessing(sequence: state.withLock { $0.sequenceHint }, head: headHint.current)
        var marks: EtcdHighWater.Snapshot?
        // Decision: an attempt that lost only on the HEAD record (another write of the keychain committed first, none
        // of this body's keys changed) counts apart, with a larger budget: every write of a keychain is ordered by
        // HEAD, so many writers of different items collide there without contending for anything this body decided on.
        var attempts = 0, headOnly = 0
        while attempts < Self.maximumAttempts && headOnly < Self.maximumHeadAttempts {
            attempts += 1
            let (keys, id, headerRevision) = try snapshotKeys()
            // The rollback marks are taken before the attempt's first read; an attempt that starts from what a failed
            // commit read keeps the previous attempt's (marks raised meanwhile are newer than that snapshot).
            if case .snapshot = start {} else { marks = nil }
            let transaction = EtcdTransaction(keychain: self, keys: keys, keychainID: id, headerRevision: headerRevision, writing: true, start: start,
                                              marks: marks)
            marks = transaction.marks
            defer { transaction.flushMarks() }
            let result: T
            do {
                result = try Self.etcd { try body(transaction) }
            } catch is EtcdTransaction.SnapshotCompacted {
                start = .fresh
                continue
            } catch is EtcdTransaction.HeaderChanged {
                try reloadHeader()
                start = .fresh
                continue
            } catch where transaction.guessed {
                // The body failed on what may have been a wrong guess: run it again on values read.
                start = .fresh
                continue
            }
            switch try transaction.commit() {
            case .committed(let revision):
                if let sequence = transaction.writtenSequence { state.withLock { $0.sequenceHint = (sequence, revision) } }
                return result
            case .headerChanged:
                try reloadHeader()
                start = .fresh
            case .conflict(let snapshot):
                start = snapshot.map { .snapshot($0) } ?? .fresh
                if transaction.headOnlyConflict {
                    attempts -= 1
                    headOnly += 1
                }
                // A wrong guess is no collision. Otherwise another machine changed what this body read: run it again,
                // after a short, growing, random pause so that racing writers do not keep colliding.
                if transaction.headOnlyConflict {
                    usleep(UInt32.random(in: 0...1_000))  // another write went first: no contention on this body's keys
                } else if !transaction.guessed {
                    usleep(UInt32.random(in: 0...backoff))
                    backoff = min(backoff * 2, 64_000)
                }
            }
        }
        throw EngineError(Status.notAvailable, "the items this change needs kept being changed by other machines (\(attempts + headOnly) attempts); nothing was changed: try again")
    }

    /// Runs `body`, turning the client's errors into engine errors.
    static func etcd<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as EtcdError {
            throw error.engineError
        }
    }
}

extension EtcdKeychain.State {
    /// Makes `keys` this process's keys and shares them through the unlock cache (where the kernel keyring exists).
    ///
    /// - Throws: `errSecQuotaExceeded` when they could not be shared (they are installed here all the same).
    mutating func install(_ keys: KeySet, at date: Date, now: Date) throws {
        self.keys = keys
        unlockedAt = date
        let remaining = header.lockAfterTimeout.map { max(1, $0 - now.timeIntervalSince(date)) }
        try cache.store(keys, unlockedAt: date, timeout: remaining, full: true)
        try cache.store(keys.afterFirstUnlock, unlockedAt: date, timeout: nil, full: false)
    }

    /// Takes keys from the unlock cache when they pass the header's key check.
    mutating func loadSharedKeys() {
        for full in [true, false] {
            if !full, keys != nil { return }
            guard let (cached, date) = cache.load(full: full) else { continue }
            guard cached.check(fileID: header.keychainID) == header.keyCheck else {
                KeystoneLog.logger.warning("cached etcd keychain keys do not match its header; ignoring them", metadata: ["keychain": "\(configuration.name)"])
                cache.remove()
                return
            }
            if keys?.lockState == .unlocked && cached.lockState != .unlocked { return }
            keys = cached
            unlockedAt = date
            return
        }
    }

    /// Follows this machine's lock state: a lock by another process (recorded in the unlock cache after this
    /// process's unlock), an unlock by another process, the auto-lock timeout.
    ///
    /// Decision: keys are dropped on a recorded lock, not when the cached entries expire (after 12 hours, or the
    /// timeout): a service that unlocked at start keeps working for as long as it runs, as with a keychain file.
    mutating func refresh(now: Date) {
        if keys != nil, let since = unlockedAt, let locked = cache.lastLock(), locked >= since {
            keys = nil
            unlockedAt = nil
        }
        if keys?.lockState != .unlocked { loadSharedKeys() }
        if let timeout = header.lockAfterTimeout, let since = unlockedAt, let current = keys,
           current.lockState == .unlocked, now.timeIntervalSince(since) >= timeout {
            keys = current.afterFirstUnlock
        }
    }
}

extension EtcdConfiguration {
    /// The endpoints, for messages: "127.0.0.1:2379, 127.0.0.1:22379".
    var endpointList: String { endpoints.map(\.description).joined(separator: ", ") }
}
#endif
