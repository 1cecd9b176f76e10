#if NIO && !canImport(Darwin)
import Foundation
import KeychainEngine
import KeychainServices

extension KeychainBackend {
    /// Keychains kept in an etcd cluster: with it installed, `KEYSTONE_KEYCHAIN=etcd://host:port,host:port/NAME`
    /// (`etcds://` for TLS) selects one (it must exist: `keystone create-keychain etcd://…`).
    ///
    /// Install it at start-up: `KeychainServicesDefaults.bootstrap(.etcd)`.
    public static var etcd: KeychainBackend {
        KeychainBackend(name: "etcd", product: "KeychainEtcd", storage: { argument, environment in
            guard argument.hasPrefix("etcd://") || argument.hasPrefix("etcds://") else { return nil }
            return try EtcdKeychain.open(EtcdConfiguration(url: argument, environment: environment))
        })
    }
}

extension KeychainServicesDefaults {
    /// Uses the keychain kept in an etcd cluster from now on (the same items on every machine of a fleet), and
    /// returns its engine. Connects now: a cluster that does not answer, or a keychain that does not exist, is
    /// reported here rather than by the first SecItem call.
    ///
    /// - Parameters:
    ///   - etcd: the cluster and the keychain's name (`EtcdConfiguration.init(url:environment:)` parses
    ///     `etcd://host:port,host:port/NAME`).
    ///   - password: unlocks the keychain on this machine; nil: it stays as the unlock cache has it (locked unless
    ///     `keystone unlock-keychain` ran on this machine).
    ///   - configuration: the engine's configuration; nil: `standardConfiguration()`.
    /// - Throws: `EngineError`: `errSecNoSuchKeychain` (create it with `keystone create-keychain etcd://…`),
    ///   `errSecAuthFailed` (a wrong password), `errSecNotAvailable` (no member with a quorum answered in time).
    /// - Important: Pass the password from a secret store or a file readable only by the service, never from a
    ///   command-line argument.
    @discardableResult
    public static func useEtcd(_ etcd: EtcdConfiguration, password: String? = nil, configuration: EngineConfiguration? = nil) throws -> KeychainEngine {
        let storage = try EtcdKeychain.open(etcd)
        if let password { try storage.unlock(password: password) }
        return KeychainServicesDefaults.use(storage, configuration: configuration)
    }
}
#endif
