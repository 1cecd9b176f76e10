#if NIO
import Foundation
import KeychainEngine
import Logging
import ServiceLifecycle
#if !canImport(Darwin)
import KeychainEtcd
import KeychainFile
#endif

/// A swift-service-lifecycle service that opens a Keystone keychain for a server: unlocks it at start from a
/// ``KeychainPasswordSource``, reads the provider's first snapshot, follows the keychain's changes while the server
/// runs, and at graceful shutdown locks the keychain and discards the provider's values.
///
/// ```swift
/// let secrets = KeystoneSecretsService(provider: provider, password: .systemdCredential("keychain-password"))
/// try await secrets.prepare()        // before reading configuration: unlock + first snapshot
/// let group = ServiceGroup(services: [secrets, server], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
///
/// Unlocking by storage: a keychain file and an etcd keychain with the password (or without one for
/// ``KeychainPasswordSource/secureEnclave``); the memory storage is set unlocked; other storages (the Secret
/// Service, whose collection the desktop session unlocks) must already be unlocked
/// (``KeychainPasswordSource/alreadyUnlocked``). A keychain that is unlocked already is not unlocked again and the
/// password is not read.
///
/// - Important: Locking at shutdown is Keystone's lock: on a keychain file or an etcd keychain it also drops the unlock
///   cache of this user on this machine, so other processes of the same user there lock at their next call. Replicas
///   that share a machine and a user pass `lockAtShutdown: false` (their values are still discarded).
public final class KeystoneSecretsService: Service, Sendable {
    /// The provider whose keychain the service opens and whose changes it follows.
    public let provider: KeystoneConfigProvider
    /// Where the password comes from.
    public let password: KeychainPasswordSource
    /// Whether graceful shutdown locks the keychain (the values are discarded either way).
    public let lockAtShutdown: Bool
    private let logger: Logger
    private let environment: [String: String]
    private let standardInput: @Sendable () -> String?
    private let prepared = Locked(false)

    /// A service for `provider`'s keychain (made with ``KeystoneConfigProvider/init(engine:mapping:changes:name:logger:)``).
    ///
    /// - Parameters:
    ///   - provider: the provider; its engine's storage is what is unlocked and locked.
    ///   - password: where the password comes from.
    ///   - lockAtShutdown: lock the keychain at graceful shutdown (default); false only discards the values.
    ///   - logger: start, stop and failures (never a password or a value).
    public convenience init(provider: KeystoneConfigProvider, password: KeychainPasswordSource, lockAtShutdown: Bool = true,
                            logger: Logger? = nil) {
        self.init(provider: provider, password: password, lockAtShutdown: lockAtShutdown, logger: logger,
                  environment: ProcessInfo.processInfo.environment, standardInput: { readLine(strippingNewline: true) })
    }

    /// For tests: the environment and standard input given.
    package init(provider: KeystoneConfigProvider, password: KeychainPasswordSource, lockAtShutdown: Bool = true,
                 logger: Logger? = nil, environment: [String: String], standardInput: @escaping @Sendable () -> String?) {
        self.provider = provider
        self.password = password
        self.lockAtShutdown = lockAtShutdown
        self.logger = logger ?? Logger(label: "keystone.configuration")
        self.environment = environment
        self.standardInput = standardInput
    }

    /// Unlocks the keychain (when it is locked) and reads the provider's first snapshot. Idempotent: ``run()`` calls
    /// it too. Call it before reading configuration, so the first reads see the keychain's values.
    ///
    /// - Throws: ``KeystoneConfigurationError``: `.passwordSourceUnavailable`, `.invalidPassword`, `.locked`
    ///   (``KeychainPasswordSource/alreadyUnlocked`` on a locked keychain, or a storage this service cannot unlock),
    ///   `.unavailable`.
    public func prepare() async throws {
        if prepared.current { return }
        try await OwnThread.run { [self] in try unlock() }
        try await provider.reload()
        prepared.withLock { $0 = true }
        logger.info("KeystoneSecretsService: keychain open", metadata: ["keychain": "\(provider.keychainName)", "provider": "\(provider)"])
    }

    /// Prepares, follows the keychain's changes until graceful shutdown (or cancellation), then locks the keychain
    /// (``lockAtShutdown``) and discards the provider's values.
    public func run() async throws {
        defer { close() }
        try await prepare()
        let provider = self.provider
        try await cancelWhenGracefulShutdown {
            try await provider.run()
        }
    }

    /// Locks (``lockAtShutdown``) and discards the values: what shutdown does.
    public func close() {
        if lockAtShutdown { lockStorage() }
        provider.discard()
        prepared.withLock { $0 = false }
        logger.info("KeystoneSecretsService: keychain closed", metadata: ["keychain": "\(provider.keychainName)", "locked": "\(lockAtShutdown)"])
    }

    // MARK: - The storage

    /// Unlocks the provider's storage from the password source (blocking).
    private func unlock() throws {
        let keychain = provider.keychainName
        guard let storage = provider.engine?.storage else {
            if password == .alreadyUnlocked { return }
            throw KeystoneConfigurationError(.locked, keychain: keychain,
                                             message: "the provider of \(keychain) was made without an engine, so the service cannot unlock it: unlock it yourself and use .alreadyUnlocked")
        }
        if storage.lockState == .unlocked { return }
        if password == .alreadyUnlocked {
            throw KeystoneConfigurationError(.locked, keychain: keychain, status: -25308,
                                             message: "the keychain \(keychain) is locked, and the service was told it is unlocked already (.alreadyUnlocked): unlock it first (`keystone unlock-keychain`), or give the service a password source (a systemd credential, a password file)")
        }
        let secret = try password.password(keychain: keychain, environment: environment, standardInput: standardInput)
        if case .environmentVariable(let name) = password {
            logger.warning("KeystoneSecretsService: the keychain password comes from the environment variable \(name), which other processes of this user can read (/proc/PID/environ): prefer a systemd credential or a password file")
        }
        do {
            switch storage {
            case let memory as MemoryStorage:
                memory.lockState = .unlocked
            #if !canImport(Darwin)
            case let file as KeychainFile:
                if let secret { try file.unlock(password: secret) } else { try file.unlock() }
            case let etcd as EtcdKeychain:
                if let secret { try etcd.unlock(password: secret) } else { try etcd.unlock() }
            #endif
            default:
                throw KeystoneConfigurationError(.locked, keychain: keychain,
                                                 message: "the keychain \(keychain) (\(type(of: storage))) is locked and this service cannot unlock that storage: unlock it where it is managed (a Secret Service collection: the desktop session or `keystone unlock-keychain`) and use .alreadyUnlocked")
            }
        } catch let error as KeystoneConfigurationError {
            throw error
        } catch {
            throw KeystoneConfigurationError.classify(error, keychain: keychain, while: "unlocking it")
        }
    }

    private func lockStorage() {
        guard let storage = provider.engine?.storage else { return }
        switch storage {
        case let memory as MemoryStorage:
            memory.lockState = .locked
        #if !canImport(Darwin)
        case let file as KeychainFile:
            file.lock()
        case let etcd as EtcdKeychain:
            etcd.lock()
        #endif
        default:
            break
        }
    }
}
#endif
