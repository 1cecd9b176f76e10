#if !canImport(Darwin)
import Foundation
import KeychainEngine
import KeychainFile
#if canImport(KeychainSecretService)
import KeychainSecretService
#endif
#if canImport(SystemAuthentication)
import SystemAuthentication
#endif
#if canImport(KeychainTPM)
import KeychainTPM
#endif
#if canImport(KeychainEtcd)
import KeychainEtcd
#endif

/// The keychain the global `SecItem*` functions act on in this process.
///
/// The first SecItem call opens the default keychain (`environmentEngine()`): the keychain `$KEYSTONE_KEYCHAIN`
/// names (a file that must exist, unless `KEYSTONE_KEYCHAIN_CREATE=1`; or an etcd keychain), else
/// `~/.local/share/keystone/login.keychain-db` (created with an empty password on first use), or the storage
/// `KEYSTONE_BACKEND` names (`secret-service[:COLLECTION]`:
/// the desktop's Secret Service; `memory`). If it cannot be opened, SecItem calls return its error
/// (`errSecInvalidKeychain`, `errSecWrongSecVersion`, `errSecNotAvailable`…) rather than silently using another
/// keychain. A program chooses another keychain at startup — the Secret Service (``useSecretService(_:configuration:)``),
/// a memory keychain, a test's engine — with ``setEngine(_:)`` or ``makeDefaultEngine``.
///
/// - Important: Apple platforms have one keychain per device and no such switch; code that must run on both
///   should call these only in `#if !canImport(Darwin)` blocks.
public enum KeychainServicesDefaults {
    /// Held while the default engine is made, so two first calls do not open the keychain twice.
    private static let creation = Locked<Void>(())
    private static let state = Locked<(engine: KeychainEngine?, make: @Sendable () throws -> KeychainEngine)>((nil, { try environmentEngine() }))

    /// How the default engine is made on first use (default: `environmentEngine()`).
    public static var makeDefaultEngine: @Sendable () throws -> KeychainEngine {
        get { state.current.make }
        set { state.withLock { $0.make = newValue } }
    }

    /// The engine behind the SecItem functions, made on first use.
    ///
    /// Concurrent first calls make one engine: creation is serialized, and the value is published under the lock.
    ///
    /// - Throws: `EngineError` when the default keychain cannot be opened or created (`errSecInvalidKeychain`,
    ///   `errSecWrongSecVersion`, `errSecIO`…).
    public static func currentEngine() throws -> KeychainEngine {
        if let engine = state.current.engine { return engine }
        return try creation.withLock { _ in
            if let engine = state.current.engine { return engine }
            let made = try state.current.make()
            return state.withLock { s in
                if let existing = s.engine { return existing }  // set with setEngine(_:) meanwhile
                s.engine = made
                return made
            }
        }
    }

    /// Replaces the engine; nil makes the next SecItem call make a new one with ``makeDefaultEngine``.
    public static func setEngine(_ engine: KeychainEngine?) { state.withLock { $0.engine = engine } }

    /// Who authenticates the person for engines this type makes and for `LAContext`: by default, on Linux with the
    /// `SystemAuthentication` trait, a `SystemAuthenticator` (the login password through PAM service `keystone`,
    /// fingerprints through fprintd, on the controlling terminal); without the trait, nobody (`notAvailable`).
    ///
    /// Setting it changes the authenticator of engines made afterwards, not of the current engine: see
    /// ``useAuthenticator(_:)``.
    public static var authenticator: any Authenticator {
        get { authentication.current }
        set { authentication.withLock { $0 = newValue } }
    }

    private static let authentication = Locked<any Authenticator>(standardAuthenticator())

    private static func standardAuthenticator() -> any Authenticator {
        #if canImport(SystemAuthentication)
        return SystemAuthenticator()
        #else
        return FixedAuthenticator(.notAvailable)
        #endif
    }

    /// Uses `authenticator` from now on: for the current engine (if one was made) and for engines made later.
    public static func useAuthenticator(_ authenticator: any Authenticator) {
        self.authenticator = authenticator
        state.current.engine?.authenticator = authenticator
    }

    #if canImport(SystemAuthentication)
    /// Uses the system (PAM, fprintd) with `configuration` to authenticate the person from now on: another PAM
    /// service or user, another prompter (a GUI's), no fingerprint reader.
    public static func useSystemAuthentication(_ configuration: SystemAuthenticationConfiguration) {
        useAuthenticator(SystemAuthenticator(configuration: configuration))
    }
    #endif

    /// The authenticator `LAContext` asks: the current engine's when one was made or set (so a test's engine with a
    /// scripted authenticator drives `LAContext` too), else ``authenticator``. Never opens a keychain.
    public static func currentAuthenticator() -> any Authenticator {
        state.current.engine?.authenticator ?? authenticator
    }

    /// The clock `LAContext` records successes with: the current engine's, else the system's.
    public static func currentClock() -> @Sendable () -> Date {
        if let engine = state.current.engine { return engine.configuration.now }
        return { Date() }
    }

    /// The Secure Enclave of this process: the token that makes and uses `kSecAttrTokenIDSecureEnclave` keys and
    /// CryptoKit's `SecureEnclave` keys. By default, on Linux with the `TPM` trait, the TPM 2.0 that
    /// `KEYSTONE_TPM_TCTI` (or tpm2-tools' `TPM2TOOLS_TCTI` / `TCTI`) names, else `/dev/tpmrm0`; nil (no Secure
    /// Enclave, as on a simulator) without the trait or when `KEYSTONE_SECURE_ENCLAVE=none`. Nothing is opened
    /// until a key is made or used.
    public static var secureEnclave: (any SecureEnclaveToken)? {
        get { enclave.current }
        set { enclave.withLock { $0 = newValue } }
    }

    /// Uses `token` as the Secure Enclave from now on (nil: none). Keys made by another token stay unusable
    /// (`errSecDecode`) until it is used again.
    ///
    /// The engines this type made (``environmentEngine(_:)``, `fileEngine(at:)`, ``useMemoryKeychain(configuration:)``
    /// and ``useSecretService(_:configuration:)`` without a configuration) follow: they accept Secure Enclave key
    /// items (`EngineConfiguration.secureEnclaveCheck`) while a token is configured.
    public static func useSecureEnclave(_ token: (any SecureEnclaveToken)?) {
        secureEnclave = token
    }

    /// The configuration of the engines this type makes: the default one, whose `secureEnclaveCheck` asks whether a
    /// Secure Enclave token is configured when a Secure Enclave key item is added.
    ///
    /// Decision: whether the device has a Secure Enclave is whether ``secureEnclave`` is set, not whether the TPM
    /// answers: opening a keychain never opens the TPM (that would block, and fail on machines without one, for
    /// keychains that hold no such key). Making a key asks the token itself (errSecUnimplemented /
    /// errSecNotAvailable when it cannot), and a key of a token that is gone fails when it is used.
    public static func standardConfiguration() -> EngineConfiguration {
        var configuration = EngineConfiguration()
        configuration.secureEnclaveCheck = { secureEnclave != nil }
        return configuration
    }

    /// An engine made with ``standardConfiguration()``.
    private static func followingEngine(_ storage: any KeychainStorage) -> KeychainEngine {
        KeychainEngine(storage: storage, configuration: standardConfiguration(), authenticator: authenticator)
    }

    private static let enclave = Locked<(any SecureEnclaveToken)?>(standardSecureEnclave())

    /// The token ``secureEnclave`` starts as, for `environment`.
    public static func standardSecureEnclave(environment: [String: String] = ProcessInfo.processInfo.environment) -> (any SecureEnclaveToken)? {
        if environment["KEYSTONE_SECURE_ENCLAVE"] == "none" { return nil }
        #if canImport(KeychainTPM)
        return TPMSecureEnclaveToken(tcti: TPMDevice.defaultTCTI(environment: environment))
        #else
        return nil
        #endif
    }

    /// Uses a fresh keychain in memory from now on (tests, short-lived tools), and returns its engine.
    ///
    /// - Parameter configuration: The engine's configuration; nil (the default): ``standardConfiguration()``, which
    ///   follows ``useSecureEnclave(_:)``.
    @discardableResult
    public static func useMemoryKeychain(configuration: EngineConfiguration? = nil) -> KeychainEngine {
        let engine = configuration.map { KeychainEngine(storage: MemoryStorage(), configuration: $0, authenticator: authenticator) }
            ?? followingEngine(MemoryStorage())
        setEngine(engine)
        return engine
    }

    /// The engine the environment selects:
    /// - `KEYSTONE_KEYCHAIN` set: that keychain (an explicit keychain wins): a file path (a file that does not exist
    ///   is refused with `errSecNoSuchKeychain`, never created, unless `KEYSTONE_KEYCHAIN_CREATE=1`:
    ///   ``createKeychainVariable``), or an etcd keychain
    ///   (`etcd://host:port,host:port/NAME`, `etcds://…` for TLS: ``useEtcd(_:password:configuration:)``'s storage, opened, not
    ///   created; it must have been made with `keystone create-keychain` and is unlocked by the unlock cache or by
    ///   ``useEtcd(_:password:configuration:)``);
    /// - else `KEYSTONE_BACKEND`: `file` or unset, the default keychain file; `secret-service` or
    ///   `secret-service:COLLECTION`, the Secret Service (``useSecretService(_:configuration:)``'s storage, with
    ///   `KEYSTONE_SECRET_SERVICE_COMPATIBILITY` and `KEYSTONE_SECRET_SERVICE_TIMEOUT`); `memory`, a keychain in memory.
    ///
    /// - Throws: `EngineError`: `errSecParam` for an unknown `KEYSTONE_BACKEND`; `errSecNoSuchKeychain` when
    ///   `KEYSTONE_KEYCHAIN` names a file that does not exist (and `KEYSTONE_KEYCHAIN_CREATE` is not `1`); the storage's
    ///   own error when it cannot be opened (`errSecNotAvailable` when the Secret Service cannot be reached, with what to start).
    public static func environmentEngine(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> KeychainEngine {
        if let path = environment["KEYSTONE_KEYCHAIN"], !path.isEmpty {
            return try keychainVariableEngine(path, environment)
        }
        let backend = environment["KEYSTONE_BACKEND"] ?? ""
        switch backend {
        case "", "file": return try fileEngine()
        case "memory": return followingEngine(MemoryStorage())
        default:
            if let engine = try etcdEngine(backend, environment) { return engine }
            #if canImport(KeychainSecretService)
            if let options = SecretServiceStorage.Options(argument: backend, environment: environment) {
                return followingEngine(try SecretServiceStorage(options: options))
            }
            throw EngineError(Status.param, "KEYSTONE_BACKEND=\(redacted(backend)) names no storage: use file, secret-service, secret-service:COLLECTION, etcd://HOST:PORT,…/NAME or memory")
            #else
            throw EngineError(Status.param, "KEYSTONE_BACKEND=\(redacted(backend)) names no storage this build has: use file or memory (the Secret Service needs the SecretService trait)")
            #endif
        }
    }

    #if canImport(KeychainSecretService)
    /// Uses the desktop's Secret Service (GNOME Keyring, KWallet, KeePassXC) from now on, and returns its engine.
    ///
    /// Connects now, so a missing bus, daemon or collection is reported here rather than by the first SecItem call.
    ///
    /// - Throws: `EngineError` with `errSecNotAvailable` (-25291) when there is no session bus, no Secret Service on
    ///   it, or no such collection; the message says what to start or create.
    /// - Important: Any program of the same user on the session bus can read an unlocked Secret Service collection.
    ///
    /// - Parameters:
    ///   - options: The bus, collection, timeouts and policies (read from the environment by default).
    ///   - configuration: The engine's configuration; nil (the default): ``standardConfiguration()``, which
    ///     follows ``useSecureEnclave(_:)``.
    @discardableResult
    public static func useSecretService(_ options: SecretServiceStorage.Options = SecretServiceStorage.Options(environment: ProcessInfo.processInfo.environment),
                                        configuration: EngineConfiguration? = nil) throws -> KeychainEngine {
        let storage = try SecretServiceStorage(options: options)
        let engine = configuration.map { KeychainEngine(storage: storage, configuration: $0, authenticator: authenticator) }
            ?? followingEngine(storage)
        setEngine(engine)
        return engine
    }
    #endif

    /// The environment variable that lets `KEYSTONE_KEYCHAIN` name a keychain file that does not exist yet: set to
    /// `1`, the file is created (with an empty password) on first use; otherwise a missing file is refused.
    public static let createKeychainVariable = "KEYSTONE_KEYCHAIN_CREATE"

    /// The engine of the keychain `KEYSTONE_KEYCHAIN` (`argument`) names: an etcd keychain, or a keychain file that
    /// must exist unless `environment[createKeychainVariable]` is `1`.
    ///
    /// Decision: a keychain named by the environment is never created silently. A typo in `KEYSTONE_KEYCHAIN` used
    /// to create a new keychain with an empty password, and the program then kept its secrets there, protected only
    /// by the file's permissions, while the keychain meant stayed unused; the `keystone` tool refuses it the same way.
    /// `KEYSTONE_KEYCHAIN_CREATE=1` (or ``fileEngine(at:createIfMissing:)`` in code) asks for the creation explicitly.
    private static func keychainVariableEngine(_ argument: String, _ environment: [String: String]) throws -> KeychainEngine {
        if let engine = try etcdEngine(argument, environment) { return engine }
        let create = environment[createKeychainVariable] == "1"
        guard create || FileManager.default.fileExists(atPath: argument) else {
            throw EngineError(Status.noSuchKeychain, "KEYSTONE_KEYCHAIN names \(redacted(argument)), which does not exist: create it with `keystone create-keychain \(redacted(argument))` (with a password), correct KEYSTONE_KEYCHAIN, or set \(createKeychainVariable)=1 to have it created with an empty password")
        }
        return try fileEngine(at: argument, createIfMissing: create)
    }

    /// `text` with the password of any `scheme://user:PASSWORD@` masked, for error messages.
    private static func redacted(_ text: String) -> String {
        guard let scheme = text.range(of: "://") else { return text }
        let rest = text[scheme.upperBound...]
        let end = rest.firstIndex { $0 == "?" || $0 == "#" } ?? rest.endIndex
        guard let at = rest[..<end].lastIndex(of: "@"), let colon = rest[..<at].firstIndex(of: ":") else { return text }
        return String(text[..<rest.index(after: colon)]) + "***" + String(rest[at...])
    }

    /// The engine of the etcd keychain `argument` names, nil when it is not an `etcd://` or `etcds://` URL.
    private static func etcdEngine(_ argument: String, _ environment: [String: String]) throws -> KeychainEngine? {
        guard argument.hasPrefix("etcd://") || argument.hasPrefix("etcds://") else { return nil }
        #if canImport(KeychainEtcd)
        return followingEngine(try EtcdKeychain.open(EtcdConfiguration(url: argument, environment: environment)))
        #else
        throw EngineError(Status.param, "\(argument.prefix { $0 != "/" })… names an etcd keychain, which this build does not have (the Etcd trait)")
        #endif
    }

    #if canImport(KeychainEtcd)
    /// Uses the keychain kept in an etcd cluster from now on (the same items on every machine of a fleet), and
    /// returns its engine. Connects now: a cluster that does not answer, or a keychain that does not exist, is
    /// reported here rather than by the first SecItem call.
    ///
    /// - Parameters:
    ///   - etcd: the cluster and the keychain's name (`EtcdConfiguration.init(url:environment:)` parses
    ///     `etcd://host:port,host:port/NAME`).
    ///   - password: unlocks the keychain on this machine; nil: it stays as the unlock cache has it (locked unless
    ///     `keystone unlock-keychain` ran on this machine).
    ///   - configuration: the engine's configuration; nil: ``standardConfiguration()``.
    /// - Throws: `EngineError`: `errSecNoSuchKeychain` (create it with `keystone create-keychain etcd://…`),
    ///   `errSecAuthFailed` (a wrong password), `errSecNotAvailable` (no member with a quorum answered in time).
    /// - Important: Pass the password from a secret store or a file readable only by the service, never from a
    ///   command-line argument.
    @discardableResult
    public static func useEtcd(_ etcd: EtcdConfiguration, password: String? = nil, configuration: EngineConfiguration? = nil) throws -> KeychainEngine {
        let storage = try EtcdKeychain.open(etcd)
        if let password { try storage.unlock(password: password) }
        let engine = configuration.map { KeychainEngine(storage: storage, configuration: $0, authenticator: authenticator) }
            ?? followingEngine(storage)
        setEngine(engine)
        return engine
    }
    #endif

    /// An engine over a keychain file: by default the login keychain file (`login.keychain-db` in the keychain
    /// directory), created with an empty password on first use. A file sealed to the TPM
    /// (`keystone create-keychain --tpm`) is opened with ``secureEnclave``.
    ///
    /// With no `path` and `KEYSTONE_KEYCHAIN` set in the process's environment, that keychain is used as
    /// ``environmentEngine(_:)`` uses it: a missing file is refused unless `KEYSTONE_KEYCHAIN_CREATE=1`.
    ///
    /// - Parameters:
    ///   - path: the keychain file; nil: the default one.
    ///   - createIfMissing: whether a `path` that does not exist is created, with an empty password (the default:
    ///     the program named the file in its code).
    /// - Throws: `EngineError` when the file cannot be opened or created: `errSecNoSuchKeychain` for a missing file
    ///   not to be created; for a sealed file `errSecNotAvailable` when the TPM cannot be reached, `errSecDecode`
    ///   when it was sealed to another TPM.
    /// - Important: A keychain created here has an empty password: it is protected only by its file's permissions.
    public static func fileEngine(at path: String? = nil, createIfMissing: Bool = true) throws -> KeychainEngine {
        let token = secureEnclave
        guard let path else {
            let environment = ProcessInfo.processInfo.environment
            if let variable = environment["KEYSTONE_KEYCHAIN"], !variable.isEmpty {
                return try keychainVariableEngine(variable, environment)
            }
            return followingEngine(try KeychainFile.openDefault(secureEnclave: token).keychain)
        }
        if FileManager.default.fileExists(atPath: path) {
            return followingEngine(try KeychainFile.open(at: path, secureEnclave: token))
        }
        guard createIfMissing else {
            throw EngineError(Status.noSuchKeychain, "the keychain file \(path) does not exist")
        }
        do {
            return followingEngine(try KeychainFile.create(at: path, password: ""))
        } catch let error as EngineError where error.status == Status.duplicateKeychain {
            // another process created it first
            return followingEngine(try KeychainFile.open(at: path, secureEnclave: token))
        }
    }

}
#endif
