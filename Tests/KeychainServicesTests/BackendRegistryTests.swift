// Linux-only: the backends a program installs at start-up (KeychainServicesDefaults.bootstrap).
#if !canImport(Darwin)
import Foundation
import KeychainEngine
import KeychainServices
import DefaultKeychainLock
import Testing

/// A storage in memory that counts how often the backend opened it. The backend's name is unique per test, so
/// tests running in parallel (which install into the same process-wide registry) never see each other's.
private final class OpenCounter: Sendable {
    let opened = Locked<[String]>([])
}

private func memoryBackend(_ name: String, _ counter: OpenCounter) -> KeychainBackend {
    KeychainBackend(name: name, product: "TestBackend", storage: { argument, _ in
        guard argument == name || argument.hasPrefix(name + ":") else { return nil }
        counter.opened.withLock { $0.append(argument) }
        return MemoryStorage()
    })
}

@Suite("Backends installed at start-up")
struct BackendRegistryTests {
    @Test("an installed backend's storage is what KEYSTONE_BACKEND names; it is asked only for its own arguments")
    func installedStorageIsSelected() throws {
        let name = "test-backend-\(UUID().uuidString)"
        let counter = OpenCounter()
        KeychainServicesDefaults.bootstrap(memoryBackend(name, counter))
        #expect(KeychainServicesDefaults.installedBackends.contains { $0.name == name })

        let engine = try KeychainServicesDefaults.environmentEngine(["KEYSTONE_BACKEND": name + ":vault"])
        #expect(engine.storage is MemoryStorage)
        #expect(counter.opened.current == [name + ":vault"])
        // The file and memory storages are the core's: no backend is asked for them.
        _ = try KeychainServicesDefaults.environmentEngine(["KEYSTONE_BACKEND": "memory"])
        #expect(counter.opened.current == [name + ":vault"])
    }

    @Test("installing a backend again under its name replaces it, and the others stay")
    func reinstallingReplaces() throws {
        let name = "test-backend-\(UUID().uuidString)"
        let first = OpenCounter(), second = OpenCounter()
        KeychainServicesDefaults.bootstrap(memoryBackend(name, first))
        KeychainServicesDefaults.bootstrap(memoryBackend(name, second))
        #expect(KeychainServicesDefaults.installedBackends.filter { $0.name == name }.count == 1)
        _ = try KeychainServicesDefaults.environmentEngine(["KEYSTONE_BACKEND": name])
        #expect(first.opened.current.isEmpty)
        #expect(second.opened.current == [name])
    }

    @Test("a KEYSTONE_BACKEND no installed backend takes is errSecParam naming what this program has")
    func unknownBackendIsParam() throws {
        let name = "test-backend-\(UUID().uuidString)"
        KeychainServicesDefaults.bootstrap(memoryBackend(name, OpenCounter()))
        do {
            _ = try KeychainServicesDefaults.environmentEngine(["KEYSTONE_BACKEND": "no-such-backend"])
            Issue.record("an unknown backend was accepted")
        } catch let error as EngineError {
            #expect(error.status == errSecParam)
            #expect(error.reason.contains("file") && error.reason.contains("memory") && error.reason.contains(name))
        }
    }

    @Test("a known backend that is not installed is named with its product, its trait and the bootstrap call", arguments: [
        ("secret-service", "KeychainSecretService", ".secretService", false),
        ("secret-service:login", "KeychainSecretService", ".secretService", false),
        ("etcd://127.0.0.1:2379/fleet", "KeychainEtcd", ".etcd", true),
        ("etcds://user:pw@host:2379/fleet", "KeychainEtcd", ".etcd", true),
    ])
    func missingBackendIsNamed(argument: String, product: String, call: String, needsNIO: Bool) throws {
        let missing = try #require(KeychainBackend.Missing.forArgument(argument))
        #expect(missing.product == product)
        #expect(missing.message.contains("add the product \(product)"))
        #expect(missing.message.contains("KeychainServicesDefaults.bootstrap(\(call))"))
        #expect(missing.message.contains("\"NIO\"") == needsNIO)
        #expect(KeychainBackend.Missing.forArgument("file") == nil)
        #expect(KeychainBackend.Missing.forArgument("secret-servicex") == nil)
    }

}

/// Installing an authenticator changes the process's defaults: serialized with the other suites that own them.
@Suite("A backend's authenticator", .ownsDefaultKeychain)
struct BackendAuthenticatorTests {
    @Test("an installed backend's authenticator becomes the process's and the current engine's")
    func authenticatorIsUsed() throws {
        let before = KeychainServicesDefaults.authenticator
        let engine = KeychainServicesDefaults.useMemoryKeychain()
        defer {
            KeychainServicesDefaults.useAuthenticator(before)
            KeychainServicesDefaults.setEngine(nil)
        }
        let name = "test-backend-\(UUID().uuidString)"
        KeychainServicesDefaults.bootstrap(KeychainBackend(name: name, product: "TestBackend",
                                                           authenticator: { FixedAuthenticator(.failed) }))
        let authenticator = try #require(KeychainServicesDefaults.authenticator as? FixedAuthenticator)
        #expect(authenticator.outcome == .failed)
        #expect((engine.authenticator as? FixedAuthenticator)?.outcome == .failed)
    }
}
#endif
