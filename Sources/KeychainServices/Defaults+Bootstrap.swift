#if !canImport(Darwin)
import Foundation
import KeychainEngine
import Logging

// The backends a program installs at start-up.
extension KeychainServicesDefaults {
    private static let installed = Locked<[KeychainBackend]>([])
    private static let reported = Locked<Set<String>>([])
    private static let logger = Logger(label: "keystone.backends")

    /// Installs backends: their storages become selectable by `KEYSTONE_BACKEND` / `KEYSTONE_KEYCHAIN`, and their
    /// authenticator and Secure Enclave are used from now on (by the current engine too).
    ///
    /// Call it once at start-up, before the first keychain call, as swift-log's `LoggingSystem.bootstrap`:
    /// ```swift
    /// #if os(Linux)
    /// KeychainServicesDefaults.bootstrap(.secretService, .tpm, .systemAuthentication)
    /// #endif
    /// ```
    /// Decision: unlike `LoggingSystem.bootstrap`, it may be called again (tests, plug-ins): a backend replaces an
    /// installed one of the same name, others stay. The engine already made is not replaced, so a storage chosen by
    /// the environment takes effect for engines made afterwards (``setEngine(_:)`` with nil makes one anew).
    public static func bootstrap(_ backends: KeychainBackend...) {
        bootstrap(backends: backends)
    }

    /// Installs `backends`, a list made at run time: see ``bootstrap(_:)``.
    public static func bootstrap(backends: [KeychainBackend]) {
        installed.withLock { list in
            for backend in backends {
                list.removeAll { $0.name == backend.name }
                list.append(backend)
            }
        }
        let environment = ProcessInfo.processInfo.environment
        for backend in backends {
            if let make = backend.authenticator { useAuthenticator(make()) }
            if let make = backend.secureEnclave { useSecureEnclave(make(environment)) }
        }
    }

    /// The backends installed with ``bootstrap(_:)``, in the order they were installed.
    public static var installedBackends: [KeychainBackend] { installed.current }

    /// The storage the first installed backend that takes `argument` opens; nil when none takes it.
    package static func installedStorage(_ argument: String, _ environment: [String: String]) throws -> (any KeychainStorage)? {
        for backend in installedBackends {
            if let open = backend.storage, let storage = try open(argument, environment) { return storage }
        }
        return nil
    }

    /// The PKCS#12 reader of the installed backends, nil when none has one.
    package static func pkcs12Reader() -> (@Sendable (Data, String) throws -> PKCS12Contents)? {
        installedBackends.lazy.compactMap(\.pkcs12).last
    }

    /// Logs, once per process and backend, that the program asked for a backend it did not install.
    package static func reportMissing(_ missing: KeychainBackend.Missing) {
        let first = reported.withLock { $0.insert(missing.product).inserted }
        if first { logger.error("\(missing.message)") }
    }
}

extension KeychainBackend.Missing {
    /// The backend a `KEYSTONE_BACKEND` value or keychain argument belongs to, when it is a known backend's.
    package static func forArgument(_ argument: String) -> Self? {
        if argument == "secret-service" || argument.hasPrefix("secret-service:") { return .secretService }
        if argument.hasPrefix("etcd://") || argument.hasPrefix("etcds://") { return .etcd }
        return nil
    }
}
#endif
