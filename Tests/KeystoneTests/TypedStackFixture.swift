import Foundation
import KeychainEngine
import Keystone
import KeystoneTesting
import Testing
#if !canImport(Darwin)
import KeychainFile
import KeychainSecretService
import KeychainServices
import SecretServiceDaemon
#endif
#if NIO && !canImport(Darwin)
import EtcdCluster
import KeychainEtcd
#endif

/// The stacks the typed API runs on, with the same expectations.
///
/// The three production stacks are what an app gets from `Keychain()`: `SystemKeychain` → `SecItem*` → the process's
/// default keychain, installed as an app installs it (`setEngine` with a file engine, `useSecretService`, `useEtcd`).
/// A suite that uses them replaces the process's default keychain, so it carries `.serialized, .ownsDefaultKeychain`.
///
/// Parameterized tests take ``available``: a stack whose component is missing (no gnome-keyring, no etcd, no NIO
/// trait, an Apple platform) drops out of their arguments, and the stack's own test in `ProductionStackTypedAPITests`
/// (`.enabled(if: stack.unavailableReason == nil, …)`) is the visible skip with the reason.
enum TypedStack: String, CaseIterable, CustomTestStringConvertible, Sendable {
    /// `InMemoryKeychain` (the test double; the engine over `MemoryStorage`, compiled save path).
    case inMemoryKeychain
    /// The bare engine over `MemoryStorage` (compiled save path).
    case engine
    /// `Keychain()` → `SystemKeychain` → `SecItem*` → a keychain file in a temporary folder (never the user's),
    /// installed with `setEngine`.
    case keychainFileThroughSecItem
    /// `Keychain()` → `SystemKeychain` → `SecItem*` → the Secret Service: the login collection of a private
    /// gnome-keyring on a private D-Bus, installed with `KeychainServicesDefaults.useSecretService`.
    case secretServiceThroughSecItem
    /// `Keychain()` → `SystemKeychain` → `SecItem*` → an etcd keychain on a 3-member cluster, installed with
    /// `KeychainServicesDefaults.useEtcd`.
    case etcdThroughSecItem

    var testDescription: String { rawValue }

    /// Why the stack cannot run here, or nil.
    var unavailableReason: String? {
        switch self {
        case .inMemoryKeychain, .engine:
            return nil
        case .keychainFileThroughSecItem:
            #if canImport(Darwin)
            return "on Apple platforms Keychain() is the system keychain, not a Keystone keychain file"
            #else
            return nil
            #endif
        case .secretServiceThroughSecItem:
            #if canImport(Darwin)
            return "the Secret Service storage is Linux only"
            #else
            return SecretServiceDaemon.unavailableReason
            #endif
        case .etcdThroughSecItem:
            #if NIO && !canImport(Darwin)
            return EtcdTestCluster.unavailableReason
            #elseif canImport(Darwin)
            return "the etcd storage is Linux only"
            #else
            return "etcd keychains need the NIO trait (swift test --traits NIO)"
            #endif
        }
    }

    /// The stacks whose components are installed: what parameterized tests run on.
    static var available: [TypedStack] { allCases.filter { $0.unavailableReason == nil } }

    /// Whether `Keychain()` (`SystemKeychain`, the SecItem functions) is the stack's keychain.
    var isThroughSecItem: Bool { self != .inMemoryKeychain && self != .engine }

    /// Whether the storage has an after-first-unlock state (per-class keys). The Secret Service has not: a collection
    /// is locked (every secret hidden) or unlocked.
    var hasAfterFirstUnlockState: Bool { self != .secretServiceThroughSecItem }
}

/// One stack, empty and unlocked: the keychain the typed API uses and the engine underneath (for its clock).
struct TypedStackFixture {
    /// The keychain as an app has it: `Keychain()` on the production stacks, `Keychain(store:)` on the others.
    let keychain: Keychain
    let engine: KeychainEngine
    /// Answers the engine's prompts (success by default, counted).
    let authenticator: ScriptedAuthenticator
    let clock = TestClock()
    /// Records every call to the stack's store made through ``recordedKeychain(options:)``.
    let recorder: RecordingStore
    private let lockStorage: (LockState) throws -> Void
    private let cleanUp: () -> Void

    /// Installs `stack`. The production stacks replace the process's default keychain: only suites with
    /// `.ownsDefaultKeychain` may make them.
    ///
    /// - Throws: when the stack's component does not start (a stack not in ``TypedStack/available`` always throws).
    init(_ stack: TypedStack) throws {
        if let reason = stack.unavailableReason { throw StackUnavailable(stack: stack, reason: reason) }
        switch stack {
        case .inMemoryKeychain:
            let memory = InMemoryKeychain()
            keychain = Keychain(store: memory)
            engine = memory.engine
            authenticator = memory.authenticator
            lockStorage = { memory.lockState = $0 }
            cleanUp = {}
        case .engine:
            let storage = MemoryStorage()
            authenticator = ScriptedAuthenticator(defaultOutcome: .success)
            engine = KeychainEngine(storage: storage, authenticator: authenticator)
            keychain = Keychain(store: engine)
            lockStorage = { storage.lockState = $0 }
            cleanUp = {}
        case .keychainFileThroughSecItem, .secretServiceThroughSecItem, .etcdThroughSecItem:
            #if canImport(Darwin)
            throw StackUnavailable(stack: stack, reason: stack.unavailableReason ?? "")
            #else
            let installed = try Self.install(stack)
            engine = installed.engine
            lockStorage = installed.lock
            cleanUp = installed.cleanUp
            authenticator = ScriptedAuthenticator(defaultOutcome: .success)
            engine.authenticator = authenticator
            keychain = Keychain()
            #endif
        }
        recorder = RecordingStore(keychain.store)
        let clock = self.clock
        engine.configuration.now = { clock.now }
    }

    /// A stack whose component is missing.
    struct StackUnavailable: Error, CustomStringConvertible {
        let stack: TypedStack
        let reason: String
        var description: String { "the \(stack) stack cannot run here: \(reason)" }
    }

    /// Locks the storage as `state` says: `MemoryStorage`'s lock state, the keychain file's and the etcd keychain's
    /// `lock()` / `lockAfterFirstUnlock()`, the Secret Service collection's `lock()` (`.locked` only).
    ///
    /// - Throws: for a state the storage does not have (after first unlock on the Secret Service).
    func lock(_ state: LockState) throws { try lockStorage(state) }

    /// A keychain on the same store with other default options.
    func keychain(options: ItemOptions) -> Keychain { Keychain(store: keychain.store, options: options) }

    /// A keychain over the stack's store whose calls ``recorder`` records.
    ///
    /// On the production stacks it takes the very path `Keychain()` takes (`SystemKeychain` is not engine-backed and
    /// saves with the default `addOrUpdate`: SecItemAdd, then SecItemUpdate on errSecDuplicateItem); on the engine
    /// stacks it takes the `addOrUpdate` path instead of `compiledSave` (which `SavePathDifferentialTests` proves
    /// equivalent).
    func recordedKeychain(options: ItemOptions = ItemOptions(), authentication: AuthenticationOptions = AuthenticationOptions()) -> Keychain {
        Keychain(store: recorder, options: options, authentication: authentication)
    }

    /// Puts a memory keychain back as the default (when this fixture replaced it) and removes what the stack made.
    func remove() { cleanUp() }

    /// Runs `body` over `stack` (empty, unlocked), then removes it.
    static func with(_ stack: TypedStack, _ body: (TypedStackFixture) throws -> Void) throws {
        let fixture = try TypedStackFixture(stack)
        defer { fixture.remove() }
        try body(fixture)
    }
}

#if !canImport(Darwin)
extension TypedStackFixture {
    /// A production stack installed as the process's default keychain.
    private struct Installed {
        let engine: KeychainEngine
        let lock: (LockState) throws -> Void
        let cleanUp: () -> Void
    }

    // Decision: each production stack keeps one keychain for the test process (a keychain file, the login collection
    // of one private gnome-keyring, one etcd keychain on the shared cluster), unlocked and emptied of every item at
    // the start of each test. A fresh keychain per test would cost a scrypt derivation (N = 2^15, about 0.25 s) on
    // the file and etcd stacks, in suites that run one test at a time (they own the default keychain); emptying costs
    // a few deletes. Every test still starts from an empty, unlocked keychain, as on the memory stacks.

    private static func install(_ stack: TypedStack) throws -> Installed {
        switch stack {
        case .keychainFileThroughSecItem:
            return try SharedKeychainFile.install()
        case .secretServiceThroughSecItem:
            return try SharedSecretService.install()
        case .etcdThroughSecItem:
            #if NIO
            return try SharedEtcd.install()
            #else
            throw StackUnavailable(stack: stack, reason: stack.unavailableReason ?? "")
            #endif
        case .inMemoryKeychain, .engine:
            throw StackUnavailable(stack: stack, reason: "not a production stack")
        }
    }

    /// Deletes every item of the keychain (each class, synchronizable or not, every group).
    private static func empty(_ engine: KeychainEngine) throws {
        for itemClass in ["genp", "inet", "cert", "keys"] {
            do {
                try engine.delete([Key.class: .string(itemClass), Key.synchronizable: .string(Key.synchronizableAny)])
            } catch let error as EngineError where error.status == Status.itemNotFound {}
        }
    }

    /// One keychain file (empty password) in a temporary folder, never the user's, for the test process; its engine
    /// is installed with `setEngine`, as `KeychainServicesDefaults` installs a file engine. The folder is removed when
    /// the process exits.
    private enum SharedKeychainFile {
        static let folder = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-typed-\(UUID().uuidString)")
        static let engine = Result<KeychainEngine, any Error> {
            let engine = try KeychainServicesDefaults.fileEngine(at: folder.appendingPathComponent("login.keychain-db").path)
            atexit { try? FileManager.default.removeItem(at: SharedKeychainFile.folder) }
            return engine
        }

        static func install() throws -> Installed {
            let engine = try engine.get()
            let file = try #require(engine.storage as? KeychainFile)
            if file.lockState != .unlocked { try file.unlock(password: "") }
            try empty(engine)
            KeychainServicesDefaults.setEngine(engine)
            return Installed(engine: engine, lock: { state in
                switch state {
                case .locked: file.lock()
                case .lockedAfterFirstUnlock: file.lockAfterFirstUnlock()
                case .unlocked: try file.unlock(password: "")
                }
            }, cleanUp: {
                KeychainServicesDefaults.useMemoryKeychain()
            })
        }
    }

    /// One private gnome-keyring for the test process (started on first use; its watchdog stops it when the process
    /// exits); each test installs a new `SecretServiceStorage` on its login collection with `useSecretService`.
    private enum SharedSecretService {
        static let daemon = Result<SecretServiceDaemon, any Error> { try SecretServiceDaemon.start() }

        static func install() throws -> Installed {
            let daemon = try daemon.get()
            var options = SecretServiceStorage.Options(busAddress: daemon.busAddress)
            options.unlockPrompt = .never
            // Decision: the stack stores access-controlled items as the other stacks do (the typed API's tests save
            // .biometryCurrentSet items): the app opts in, as KEYSTONE_SECRET_SERVICE_UNENFORCED_ACCESS_CONTROL=1
            // does. Keystone still asks the authenticator before returning such a secret.
            options.allowsUnenforcedAccessControl = true
            let engine = try KeychainServicesDefaults.useSecretService(options)
            let storage = try #require(engine.storage as? SecretServiceStorage)
            try empty(engine)
            return Installed(engine: engine, lock: { state in
                switch state {
                case .locked: try storage.lock()
                case .unlocked: try daemon.restartKeyringDaemon(unlock: true)
                case .lockedAfterFirstUnlock:
                    throw EngineError(Status.unimplemented, "the Secret Service has no after-first-unlock state: a collection is locked or unlocked")
                }
            }, cleanUp: {
                KeychainServicesDefaults.useMemoryKeychain()
                // A test that locked the collection: unlock it as a login does (the keyring daemon started again with
                // the password), for the next test.
                if (try? storage.isLocked()) != false { try? daemon.restartKeyringDaemon(unlock: true) }
            })
        }
    }

    #if NIO
    /// One etcd keychain (password "pw") on the process's shared 3-member cluster, created as
    /// `keystone create-keychain etcd://…` does; each test installs it as an app does (`useEtcd`).
    private enum SharedEtcd {
        static let configuration = Result<EtcdConfiguration, any Error> {
            let cluster = try EtcdTestCluster.shared()
            let configuration = try EtcdConfiguration(url: cluster.url(name: "typed-\(UUID().uuidString)"), environment: [:])
            _ = try EtcdKeychain.create(configuration, password: "pw")
            return configuration
        }

        static func install() throws -> Installed {
            let configuration = try configuration.get()
            // Creating it unlocked it for this user on this machine (the unlock cache), so the app opens it unlocked;
            // after a test that locked it, or where the cache is unavailable, the app passes the password.
            let engine = try KeychainServicesDefaults.useEtcd(configuration)
            let keychain = try #require(engine.storage as? EtcdKeychain)
            if keychain.lockState != .unlocked { try keychain.unlock(password: "pw") }
            try empty(engine)
            return Installed(engine: engine, lock: { state in
                switch state {
                case .locked: keychain.lock()
                case .lockedAfterFirstUnlock: keychain.lockAfterFirstUnlock()
                case .unlocked: try keychain.unlock(password: "pw")
                }
            }, cleanUp: {
                KeychainServicesDefaults.useMemoryKeychain()
            })
        }
    }
    #endif
}
#endif
