import Foundation
import KeychainEngine

/// A keychain kept in the freedesktop Secret Service (GNOME Keyring, KWallet, KeePassXC): one Secret Service item
/// per keychain item, in one collection, shared with the desktop's other programs.
///
/// The engine decides uniqueness (it searches by primary key, then creates: the service's own "replace", which
/// matches every attribute, is never used). Writes of a transaction are held until it ends and then applied: new
/// items and new versions first, deletions last. Transactions of Keystone processes on one bus and collection are
/// serialized by a lock file in `$XDG_RUNTIME_DIR`.
///
/// - Important: The Secret Service protects secrets from other users, not from other programs of the same user:
///   any program on the session bus can read an unlocked collection. A locked collection answers
///   `errSecInteractionNotAllowed`, and nothing is ever deleted because an item could not be read.
///
/// ## Threat model
///
/// The Secret Service has no per-application isolation: every program of the user's session can list, read,
/// create, edit and delete every item of an unlocked collection, Keystone's included. Within that:
///
/// **Protected.**
/// - *Copies, edits and twins are never taken for Keystone's own.* Each item is sealed (`Seal`): an HMAC-SHA-256
///   over its own object path and its attributes, under a seal key kept in the collection. An item copied (another
///   path, a higher `keystone:generation`, another `keystone:rowid`), a same-length edit of `keystone:attributes`
///   (another account, forged access-control flags) or of a lookup attribute, fails its seal and is ignored: never
///   returned, never counted as a duplicate (a twin never makes the owner's update fail with
///   `errSecDuplicateItem`), never changed or deleted, and logged once with its object path.
/// - *Reads by name.* Keystone searches by the plain lookup attributes the service indexes and cross-checks them
///   against `keystone:attributes` (`errSecDecode` on a mismatch), so an item is returned only under the primary key
///   it was written with.
/// - *Access controls are not silently unenforced.* An item whose `kSecAttrAccessControl` needs a person
///   (`.userPresence`, biometry, the passcode, an application password) is refused with `errSecUnimplemented`, unless
///   the app opts in with ``Options/allowsUnenforcedAccessControl``.
/// - *Size.* A secret over ``maximumSecretSize`` (16 MiB) fails with `errSecDataTooLarge` before anything is sent;
///   one the bus drops anyway gives `errSecDataTooLarge`, not "no Secret Service"; reads never ask for a reply larger
///   than the bus carries (which would disconnect the daemon).
///
/// **Not protected.**
/// - Any program of the session reads every secret (`secret-tool lookup service S account A`), with no prompt.
/// - A program that reads the seal key (an item like any other) can forge sealed items; one that can write can
///   delete items, the seal key (after which Keystone's sealed items are ignored until ``resealItems()``), or change a
///   secret in place (`SetSecret`: the seal does not cover the secret, so a password changed in Seahorse is read).
/// - An item deleted and then recreated from a saved copy by such a program; a crash between creating an item and
///   sealing it leaves an unsealed item that readers ignore.
/// - With the opt-in, an access-controlled secret: Keystone asks for the person before returning it, but the
///   Secret Service hands it to any program that asks.
/// - Important: A transaction that changes several items is applied item by item; if the service fails or the
///   process dies midway, some of its changes may have landed. Each item is always whole (its old version or its new).
public final class SecretServiceStorage: KeychainStorage, Sendable {
    /// Which collection holds the keychain.
    public enum Collection: Sendable, Hashable, CustomStringConvertible {
        /// The collection the `default` alias names (normally `login`).
        case `default`
        /// A collection by alias, label, or D-Bus object path (`/org/freedesktop/secrets/collection/...`).
        case named(String)

        public var description: String {
            switch self {
            case .default: "the default collection"
            case .named(let name): "the collection '\(name)'"
            }
        }
    }

    /// When the storage may show the Secret Service's unlock prompt.
    public enum UnlockPrompt: Sendable, Hashable {
        /// Never: a locked collection answers `errSecInteractionNotAllowed`.
        case never
        /// When the operation's query allows user interface (`kSecUseAuthenticationUI` absent or Allow).
        case whenQueryAllows

        /// `whenQueryAllows` when a display is there to show the prompt (`DISPLAY` or `WAYLAND_DISPLAY`), else `never`.
        public static var automatic: UnlockPrompt {
            let environment = ProcessInfo.processInfo.environment
            return (environment["DISPLAY"] ?? environment["WAYLAND_DISPLAY"]).map { $0.isEmpty ? .never : .whenQueryAllows } ?? .never
        }
    }

    public struct Options: Sendable {
        /// The collection (default: the `default` alias).
        public var collection: Collection = .default
        /// The D-Bus address of the session bus; nil: `$DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`.
        public var busAddress: String?
        /// The deadline of each call to the service.
        public var callTimeout: Duration = .seconds(10)
        /// How long an unlock prompt may stay open before the operation gives up (`errSecInteractionNotAllowed`).
        public var promptTimeout: Duration = .seconds(120)
        /// When the unlock prompt may be shown.
        public var unlockPrompt: UnlockPrompt = .automatic
        /// Read and write the conventions of other Secret Service clients for generic passwords (opt-in): see
        /// ``Compatibility``.
        public var compatibility: Compatibility?
        /// Store items whose access control needs a person (`.userPresence`, `.biometryAny`, `.biometryCurrentSet`,
        /// `.devicePasscode`, `.applicationPassword`…) although this storage cannot enforce it (opt-in; default
        /// false: such an add or update fails with `errSecUnimplemented`). Environment:
        /// `KEYSTONE_SECRET_SERVICE_UNENFORCED_ACCESS_CONTROL=1`.
        ///
        /// - Important: Keystone still asks for the person before it returns such a secret, but the Secret Service
        ///   gives it to any program of the session that asks (`secret-tool lookup …`), with no prompt.
        public var allowsUnenforcedAccessControl = false

        public init(collection: Collection = .default, busAddress: String? = nil, compatibility: Compatibility? = nil) {
            self.collection = collection
            self.busAddress = busAddress
            self.compatibility = compatibility
        }
    }

    /// The largest secret this storage stores: 16 MiB (16,777,216 bytes).
    ///
    /// Decision: a secret travels in one D-Bus message, which the bus drops, disconnecting the sender, beyond its
    /// limits: the protocol's 64 MiB per array and 128 MiB per message, and dbus-daemon's `max_message_size`, 32 MiB
    /// when the bus's configuration sets none (a desktop's `session.conf` sets 1,000,000,000). A reply that the bus
    /// drops disconnects the Secret Service itself, so reads ask for several secrets at once only up to
    /// `secretsPerReplyBudget`. 16 MiB leaves room under 32 MiB for the encryption's padding and the rest of the
    /// message. A larger secret fails with `errSecDataTooLarge` before anything is sent.
    public static let maximumSecretSize = 16 << 20

    /// How many bytes of secrets one `GetSecrets` reply may carry (24 MiB, under dbus-daemon's default 32 MiB).
    static let secretsPerReplyBudget = 24 << 20

    public let options: Options
    /// The collection's D-Bus object path.
    public let collectionPath: String
    /// The bus address in use.
    public let busAddress: String
    /// The connection in use; dropped when the service stops answering, so the next transaction connects again
    /// (to a restarted daemon, with a new session).
    private let connection: Locked<SecretServiceClient?>
    /// Held across every call on the connection (transactions, lock, unlock): one thread at a time uses it.
    private let mutex = NSLock()
    private let fileLock: TransactionLock
    private let observedLock = Locked<Bool>(false)
    /// The collection's seal keys by item path: read once, kept while their items exist.
    let sealKeyCache = Locked<[String: Seal.Key]>([:])
    /// Paths of items already logged as ignored (one log line per item and storage).
    private let reportedItems = Locked<Set<String>>([])

    /// Connects to the Secret Service and finds the collection.
    ///
    /// - Throws: `errSecNotAvailable` (-25291) when there is no session bus, no Secret Service on it, or no such
    ///   collection (no `default` alias), with what to start or create.
    public init(options: Options = Options()) throws {
        self.options = options
        busAddress = try Self.resolveBusAddress(options.busAddress)
        let client = try SecretServiceClient.connect(address: busAddress, callTimeout: options.callTimeout)
        connection = Locked(client)
        collectionPath = try Self.resolveCollection(options.collection, client: client)
        fileLock = try TransactionLock(busAddress: busAddress, collection: collectionPath)
        observedLock.withLock { $0 = (try? client.isLocked(collectionPath)) ?? false }
    }

    /// The bus address: given, else `$DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus` when that socket exists.
    ///
    /// - Throws: `errSecNotAvailable` when none is there. Keystone never starts a bus (no autolaunch).
    public static func resolveBusAddress(_ given: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String {
        if let given, !given.isEmpty { return given }
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty { return address }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            var info = stat()
            if stat(runtime + "/bus", &info) == 0, (info.st_mode & S_IFMT) == S_IFSOCK { return "unix:path=\(runtime)/bus" }
        }
        throw EngineError(Status.notAvailable, "no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is not set and $XDG_RUNTIME_DIR/bus does not exist. Log in to a desktop session, or run the program under `dbus-run-session`.")
    }

    static func resolveCollection(_ collection: Collection, client: SecretServiceClient) throws -> String {
        switch collection {
        case .default:
            guard let path = try client.readAlias("default") else {
                throw EngineError(Status.notAvailable, "the Secret Service has no default collection. Create one (Seahorse: File > New > Password Keyring, then set it as default), or name a collection: secret-service:login")
            }
            return path
        case .named(let name):
            if name.hasPrefix("/") {
                guard try client.collections().contains(name) else {
                    throw EngineError(Status.notAvailable, "the Secret Service has no collection at \(name)")
                }
                return name
            }
            if let path = try client.readAlias(name) { return path }
            for path in try client.collections() where try client.collectionInfo(path).label == name { return path }
            if name == "default" {
                throw EngineError(Status.notAvailable, "the Secret Service has no default collection. Create one in Seahorse or name a collection: secret-service:login")
            }
            throw EngineError(Status.notAvailable, "the Secret Service has no collection named '\(name)' (as alias or label). List them with `keystone doctor`.")
        }
    }

    // MARK: - KeychainStorage

    /// `unlocked` while the collection is unlocked, `locked` once an operation found it locked (the Secret Service
    /// has no per-accessibility keys: a locked collection hides every secret).
    public var lockState: LockState { observedLock.current ? .locked : .unlocked }

    public func read<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        try mutex.withLock {
            try fileLock.withLock(exclusive: false) {
                try reconnectingAfterFailure {
                    try body(Transaction(storage: self, client: try client()))
                }
            }
        }
    }

    public func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        try mutex.withLock {
            try fileLock.withLock(exclusive: true) {
                try reconnectingAfterFailure {
                    let transaction = Transaction(storage: self, client: try client())
                    let result = try body(transaction)
                    try transaction.commit()
                    return result
                }
            }
        }
    }

    /// The connection, made again if the last one failed or the bus closed it.
    func client() throws -> SecretServiceClient {
        if let client = connection.current, !client.isClosed { return client }
        let client = try SecretServiceClient.connect(address: busAddress, callTimeout: options.callTimeout)
        connection.withLock { $0 = client }
        return client
    }

    /// Runs `body`; when the service stopped answering (`errSecNotAvailable`), drops the connection so the next
    /// transaction connects again (the daemon may have been restarted: its sessions are gone).
    ///
    /// A transaction that finds its session gone (the daemon restarted since the last one) runs once more on a new
    /// connection: nothing was written (secrets travel in the session, so every write would have failed the same way,
    /// and a commit deletes the items it created before failing).
    private func reconnectingAfterFailure<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch is SessionLost {
            connection.withLock { $0 = nil }
            do {
                return try body()
            } catch let lost as SessionLost {
                connection.withLock { $0 = nil }
                throw lost.error
            } catch let error as EngineError where error.status == Status.notAvailable {
                connection.withLock { $0 = nil }
                throw error
            }
        } catch let error as EngineError where error.status == Status.notAvailable {
            connection.withLock { $0 = nil }
            throw error
        }
    }

    // MARK: - Lock and unlock

    /// Whether the collection is locked now (asks the service).
    public func isLocked() throws -> Bool {
        try mutex.withLock { try noteLockState(reconnectingAfterFailure { try client().isLocked(collectionPath) }) }
    }

    /// Locks the collection (no prompt).
    public func lock() throws {
        try mutex.withLock { try reconnectingAfterFailure { try client().lock(collectionPath) } }
        observedLock.withLock { $0 = true }
    }

    /// Unlocks the collection through the Secret Service's prompt.
    ///
    /// - Throws: `errSecUserCanceled` when the prompt is dismissed; `errSecInteractionNotAllowed` when nobody
    ///   answers it within ``Options/promptTimeout``.
    public func unlockWithPrompt() throws {
        try mutex.withLock { try promptForUnlock() }
    }

    /// ``unlockWithPrompt()`` for a caller that holds `mutex` (a transaction that met the locked collection).
    private func promptForUnlock() throws {
        let unlocked: Bool
        do {
            unlocked = try reconnectingAfterFailure { try client().unlock(collectionPath, promptTimeout: options.promptTimeout) }
        } catch let error as EngineError where error.status == Status.notAvailable && error.reason.contains("did not answer") {
            throw EngineError(Status.interactionNotAllowed, "nobody answered the Secret Service's unlock prompt within \(options.promptTimeout)")
        }
        guard unlocked else { throw EngineError(Status.userCanceled, "the Secret Service's unlock prompt was dismissed") }
        observedLock.withLock { $0 = false }
    }

    /// Called when an operation meets the locked collection: unlocks it through the prompt when allowed, and
    /// reports whether it did (the operation then starts over); otherwise records the lock state. Only from a
    /// transaction (which holds `mutex`).
    func handleLockedCollection() throws -> Bool {
        observedLock.withLock { $0 = true }
        guard options.unlockPrompt == .whenQueryAllows, StorageInteraction.userInterfaceAllowed else { return false }
        try promptForUnlock()
        return true
    }

    func noteUnlocked() { observedLock.withLock { $0 = false } }

    /// Logs (once per item) that an item claiming Keystone's schema was left out, and why. Names the object path
    /// only: never an attribute value or a secret.
    func noteIgnored(path: String, reason: String) {
        guard reportedItems.withLock({ $0.insert(path).inserted }) else { return }
        KeystoneLog.logger.warning("Secret Service item ignored: not Keystone's as it stands",
                                   metadata: ["path": "\(path)", "reason": "\(reason)"])
    }

    /// Records the collection's lock state as just read, and returns it.
    func noteLockState(_ locked: Bool) -> Bool {
        observedLock.withLock { $0 = locked }
        return locked
    }
}
