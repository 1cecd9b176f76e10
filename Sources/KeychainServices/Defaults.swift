#if !canImport(Darwin)
import Foundation
import KeychainEngine
import KeychainFile

/// The keychain the global `SecItem*` functions act on in this process.
///
/// The first SecItem call opens the default keychain (`environmentEngine()`): the keychain `$KEYSTONE_KEYCHAIN`
/// names (a file that must exist, unless `KEYSTONE_KEYCHAIN_CREATE=1`; or an etcd keychain), else
/// `~/.local/share/keystone/login.keychain-db` (created with an empty password on first use), or the storage
/// `KEYSTONE_BACKEND` names (`memory`, or a backend the program installed with ``bootstrap(_:)``:
/// `secret-service[:COLLECTION]` for the desktop's Secret Service). If it cannot be opened, SecItem calls return its
/// error (`errSecInvalidKeychain`, `errSecWrongSecVersion`, `errSecNotAvailable`…) rather than silently using another
/// keychain. A program chooses another keychain at startup — a memory keychain, a test's engine, a backend's
/// (`useSecretService`, `useEtcd` in those products) — with ``setEngine(_:)`` or ``makeDefaultEngine``.
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

    /// Who authenticates the person for engines this type makes and for `LAContext`: nobody (`notAvailable`) until a
    /// backend provides one: `bootstrap(.systemAuthentication)` (product `SystemAuthentication`) installs a
    /// `SystemAuthenticator` (the login password through PAM service `keystone`, fingerprints through fprintd, on the
    /// controlling terminal).
    ///
    /// Setting it changes the authenticator of engines made afterwards, not of the current engine: see
    /// ``useAuthenticator(_:)``.
    public static var authenticator: any Authenticator {
        get { authentication.current }
        set { authentication.withLock { $0 = newValue } }
    }

    private static let authentication = Locked<any Authenticator>(FixedAuthenticator(.notAvailable))

    /// Uses `authenticator` from now on: for the current engine (if one was made) and for engines made later.
    public static func useAuthenticator(_ authenticator: any Authenticator) {
        self.authenticator = authenticator
        state.current.engine?.authenticator = authenticator
    }

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
    /// CryptoKit's `SecureEnclave` keys. nil (no Secure Enclave, as on a simulator) until a backend provides one:
    /// `bootstrap(.tpm)` (product `KeychainTPM`) installs the TPM 2.0 that `KEYSTONE_TPM_TCTI` (or tpm2-tools'
    /// `TPM2TOOLS_TCTI` / `TCTI`) names, else `/dev/tpmrm0`, unless `KEYSTONE_SECURE_ENCLAVE=none`. Nothing is
    /// opened until a key is made or used.
    public static var secureEnclave: (any SecureEnclaveToken)? {
        get { enclave.current }
        set { enclave.withLock { $0 = newValue } }
    }

    /// Uses `token` as the Secure Enclave from now on (nil: none). Keys made by another token stay unusable
    /// (`errSecDecode`) until it is used again.
    ///
    /// The engines this type made (``environmentEngine(_:)``, `fileEngine(at:)`, ``useMemoryKeychain(configuration:)``
    /// and a backend's `use…` functions without a configuration) follow: they accept Secure Enclave key
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

    /// An engine made with ``standardConfiguration()``, with the current ``authenticator``.
    package static func followingEngine(_ storage: any KeychainStorage) -> KeychainEngine {
        KeychainEngine(storage: storage, configuration: standardConfiguration(), authenticator: authenticator)
    }

    private static let enclave = Locked<(any SecureEnclaveToken)?>(nil)

    /// Uses a fresh keychain in memory from now on (tests, short-lived tools), and returns its engine.
    ///
    /// - Parameter configuration: The engine's configuration; nil (the default): ``standardConfiguration()``, which
    ///   follows ``useSecureEnclave(_:)``.
    @discardableResult
    public static func useMemoryKeychain(configuration: EngineConfiguration? = nil) -> KeychainEngine {
        use(MemoryStorage(), configuration: configuration)
    }

    /// Uses `storage` from now on, and returns its engine: with `configuration` and the current ``authenticator``, or
    /// nil: ``standardConfiguration()`` (the engine then follows ``useSecureEnclave(_:)``). A backend's `use…`
    /// functions end here.
    @discardableResult
    package static func use(_ storage: any KeychainStorage, configuration: EngineConfiguration?) -> KeychainEngine {
        let engine = configuration.map { KeychainEngine(storage: storage, configuration: $0, authenticator: authenticator) }
            ?? followingEngine(storage)
        setEngine(engine)
        return engine
    }
}
#endif
