import Foundation
import KeychainEngine
import KeychainFile
#if !canImport(Darwin)
import KeychainSecretService
#endif
#if NIO && !canImport(Darwin)
import EtcdCluster
import KeychainEtcd
#endif

/// A storage under test, made fresh for each test.
struct Backend: Sendable, CustomTestStringConvertible {
    let name: String
    let make: @Sendable () throws -> any KeychainStorage
    var testDescription: String { name }

    /// Every storage Keystone ships. Each runs the whole contract suite.
    static let all: [Backend] = [
        Backend(name: "memory") { MemoryStorage() },
        Backend(name: "keychain file") {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-contract-\(UUID().uuidString)")
            return try KeychainFile.create(at: directory.appendingPathComponent("test.keychain-db").path, password: "pw")
        },
    ] + secretService + etcd

    #if NIO && !canImport(Darwin)
    /// An etcd keychain (its own name, a fresh one per test) on a 3-member cluster shared by the test process
    /// (skipped, with the reason printed, where etcd is missing).
    static let etcd: [Backend] = {
        if let reason = EtcdTestCluster.unavailableReason {
            print("note: the etcd backend is left out of the storage contract: \(reason)")
            return []
        }
        return [Backend(name: "etcd cluster") {
            let cluster = try EtcdTestCluster.shared()
            return try EtcdKeychain.create(EtcdConfiguration(url: cluster.url(name: "contract-\(UUID().uuidString)"), environment: [:]), password: "pw")
        }]
    }()
    #else
    static let etcd: [Backend] = []
    #endif

    #if !canImport(Darwin)
    /// The Secret Service storage over a private gnome-keyring started for each test (skipped, with the reason
    /// printed, where dbus-daemon or gnome-keyring is missing).
    static let secretService: [Backend] = {
        if let reason = SecretServiceDaemon.unavailableReason {
            print("note: the Secret Service backend is left out of the storage contract: \(reason)")
            return []
        }
        return [Backend(name: "secret service") {
            let daemon = try SecretServiceDaemon.start()
            var options = SecretServiceStorage.Options(busAddress: daemon.busAddress)
            // The contract stores access-controlled rows; this storage refuses them unless the app opts in.
            options.allowsUnenforcedAccessControl = true
            return try DaemonStorage(daemon: daemon, storage: SecretServiceStorage(options: options))
        }]
    }()
    #else
    static let secretService: [Backend] = []
    #endif
}

import Testing
#if !canImport(Darwin)
import SecretServiceDaemon

/// A storage that owns the daemon behind it: the daemon stops when the test lets the storage go.
final class DaemonStorage: KeychainStorage, @unchecked Sendable {
    let daemon: SecretServiceDaemon
    let storage: any KeychainStorage
    init(daemon: SecretServiceDaemon, storage: any KeychainStorage) {
        self.daemon = daemon
        self.storage = storage
    }
    deinit { daemon.stop() }
    var lockState: LockState { storage.lockState }
    func read<T>(_ body: (any StorageReader) throws -> T) throws -> T { try storage.read(body) }
    func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T { try storage.write(body) }
}
#endif
