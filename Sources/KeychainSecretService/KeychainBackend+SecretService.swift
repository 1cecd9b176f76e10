#if !canImport(Darwin)
import Foundation
import KeychainEngine
import KeychainServices

extension KeychainBackend {
    /// The desktop's Secret Service (GNOME Keyring, KWallet, KeePassXC) as a keychain storage: with it installed,
    /// `KEYSTONE_BACKEND=secret-service` (or `secret-service:COLLECTION`) selects it, with
    /// `KEYSTONE_SECRET_SERVICE_COMPATIBILITY` and `KEYSTONE_SECRET_SERVICE_TIMEOUT`.
    ///
    /// Install it at start-up: `KeychainServicesDefaults.bootstrap(.secretService)`.
    public static var secretService: KeychainBackend {
        KeychainBackend(name: "secret-service", product: "KeychainSecretService", storage: { argument, environment in
            guard let options = SecretServiceStorage.Options(argument: argument, environment: environment) else { return nil }
            return try SecretServiceStorage(options: options)
        })
    }
}

extension KeychainServicesDefaults {
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
    ///   - configuration: The engine's configuration; nil (the default): `standardConfiguration()`, which
    ///     follows `useSecureEnclave(_:)`.
    @discardableResult
    public static func useSecretService(_ options: SecretServiceStorage.Options = SecretServiceStorage.Options(environment: ProcessInfo.processInfo.environment),
                                        configuration: EngineConfiguration? = nil) throws -> KeychainEngine {
        let storage = try SecretServiceStorage(options: options)
        return KeychainServicesDefaults.use(storage, configuration: configuration)
    }
}
#endif
