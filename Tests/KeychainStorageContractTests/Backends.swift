import Foundation
import KeychainEngine
import KeychainFile
import KeychainStorageTesting
#if !canImport(Darwin)
import KeychainSecretService
import SecretServiceDaemon
#endif
#if NIO && !canImport(Darwin)
import EtcdCluster
// @testable: the damage hook writes raw values with the keychain's own client, as a tampering writer on the cluster.
@testable import KeychainEtcd
#endif

/// Every storage Keystone ships, as factories of the storage contract (`KeychainStorageTesting`). Each runs every
/// clause its capabilities allow; a backend whose component is missing is skipped with the reason (`unavailableReason`).
enum Backends {
    static let memory = StorageFactory(
        makeStorage: { MemoryStorage() },
        makeSecondKeychain: { _ in MemoryStorage() },
        setLockState: { storage, state in
            guard let memory = storage as? MemoryStorage else { throw EngineError(Status.param, "not a memory storage") }
            memory.lockState = state
        },
        // Rows in the clear, no key to withhold: the engine applies the lock-state rule to what it reads.
        withholdsUnavailableRows: false,
        reasonsForMissingCapabilities: [
            .damageRow: "the memory storage keeps rows only in memory: nothing stored to damage",
            .decryptionCount: "the memory storage decrypts nothing",
        ])

    static let keychainFile = StorageFactory(
        makeStorage: { try KeychainFile.create(at: freshDirectory().appendingPathComponent("test.keychain-db").path, password: "pw") },
        makeSecondKeychain: { first in
            // Another keychain file beside the first one, in the same directory.
            guard let file = first as? KeychainFile else { throw EngineError(Status.param, "not a keychain file") }
            let directory = URL(fileURLWithPath: file.path).deletingLastPathComponent()
            return try KeychainFile.create(at: directory.appendingPathComponent("second-\(UUID().uuidString).keychain-db").path, password: "pw")
        },
        damageRow: sqlite3Path == nil ? nil : damageFileRow,
        setLockState: { storage, state in
            guard let file = storage as? KeychainFile else { throw EngineError(Status.param, "not a keychain file") }
            switch state {
            case .locked: file.lock()
            case .lockedAfterFirstUnlock: file.lockAfterFirstUnlock()
            case .unlocked: try file.unlock(password: "pw")
            }
        },
        decryptionCount: { ($0 as? KeychainFile)?.decryptionCount ?? 0 },
        reasonsForMissingCapabilities: [
            .damageRow: "sqlite3 is not installed (apt-get install sqlite3): it damages the rows",
        ])

    /// A tampering writer with the sqlite3 tool: the row gets another row's sealed contents when there is one (a swap
    /// the file must detect), else its payload is zeroed.
    static let damageFileRow: @Sendable (any KeychainStorage, ItemClass, Int64) throws -> Void = { storage, itemClass, rowID in
        guard let file = storage as? KeychainFile else { throw EngineError(Status.param, "not a keychain file") }
        let table = itemClass.rawValue
        try sqlite3(file.path, """
            UPDATE \(table) SET
              payload = coalesce((SELECT payload FROM \(table) WHERE rowid <> \(rowID) LIMIT 1), zeroblob(length(payload))),
              wrapped = coalesce((SELECT wrapped FROM \(table) WHERE rowid <> \(rowID) LIMIT 1), wrapped)
            WHERE rowid = \(rowID);
            """)
    }

    /// The sqlite3 tool, which damages keychain-file rows; nil when it is not installed.
    static let sqlite3Path: String? = ["/usr/bin/sqlite3", "/usr/local/bin/sqlite3"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Runs one statement with the sqlite3 tool.
    static func sqlite3(_ path: String, _ sql: String) throws {
        guard let tool = sqlite3Path else { throw EngineError(Status.unimplemented, "sqlite3 is not installed") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = [path, sql]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw EngineError(Status.param, "sqlite3 failed on \(path): status \(process.terminationStatus)") }
    }

    static func freshDirectory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("keystone-contract-\(UUID().uuidString)")
    }

    #if NIO && !canImport(Darwin)
    /// Nil when an etcd cluster can be started; else why not.
    static var etcdUnavailableReason: String? { EtcdTestCluster.unavailableReason }
    /// An etcd keychain (a fresh name per test) on a 3-member cluster shared by the test process; the second keychain
    /// is another name on the same cluster.
    static let etcd = StorageFactory(
        makeStorage: { try makeEtcdKeychain() },
        makeSecondKeychain: { _ in try makeEtcdKeychain() },
        damageRow: damageEtcdRow,
        setLockState: { storage, state in
            guard let keychain = storage as? EtcdKeychain else { throw EngineError(Status.param, "not an etcd keychain") }
            switch state {
            case .locked: keychain.lock()
            case .lockedAfterFirstUnlock: keychain.lockAfterFirstUnlock()
            case .unlocked: try keychain.unlock(password: "pw")
            }
        },
        decryptionCount: { ($0 as? EtcdKeychain)?.decryptionCount ?? 0 })

    /// A tampering writer on the cluster: the row keeps its key, row id and digests but gets another row's sealed
    /// item (wrapped key and payload) when there is one (a swap the keychain must detect), else its payload is zeroed.
    ///
    /// Decision: only the sealed part is swapped, as the keychain file's hook swaps only its sealed columns; a whole
    /// value copied to another key carries the other row's id, and is then reported unreadable under that id.
    static let damageEtcdRow: @Sendable (any KeychainStorage, ItemClass, Int64) throws -> Void = { storage, itemClass, rowID in
        guard let keychain = storage as? EtcdKeychain else { throw EngineError(Status.param, "not an etcd keychain") }
        let stored = try keychain.client.range(prefix: keychain.keyspace.items(itemClass)).kvs
            .compactMap { kv in EtcdRow(decoding: kv.value).map { (key: kv.key, row: $0) } }
        guard var target = stored.first(where: { $0.row.rowID == rowID }) else {
            throw EngineError(Status.itemNotFound, "no etcd row \(rowID) of class \(itemClass.rawValue) to damage")
        }
        if let other = stored.first(where: { $0.row.rowID != rowID }) {
            target.row.sealed.wrappedKey = other.row.sealed.wrappedKey
            target.row.sealed.payload = other.row.sealed.payload
        } else {
            target.row.sealed.payload = Data(count: target.row.sealed.payload.count)
        }
        _ = try keychain.client.put(target.key, target.row.encoded)
    }

    static func makeEtcdKeychain() throws -> any KeychainStorage {
        let cluster = try EtcdTestCluster.shared()
        return try EtcdKeychain.create(EtcdConfiguration(url: cluster.url(name: "contract-\(UUID().uuidString)"), environment: [:]), password: "pw")
    }
    #else
    static var etcdUnavailableReason: String? { "etcd keychains need the NIO trait on Linux" }
    static let etcd = StorageFactory(makeStorage: { throw EngineError(Status.unimplemented, "no etcd storage in this build") })
    #endif

    #if !canImport(Darwin)
    /// Nil when a private Secret Service can be started; else why not.
    static var secretServiceUnavailableReason: String? { SecretServiceDaemon.unavailableReason }
    /// The Secret Service storage over a private gnome-keyring started for each test. Its lock states are the
    /// collection's: locked (`SecretServiceStorage.lock()`) or unlocked (the keyring daemon started again with the
    /// password, as a login unlocks it; no prompter runs on the private bus).
    static let secretService = StorageFactory(
        makeStorage: {
            let daemon = try SecretServiceDaemon.start()
            var options = SecretServiceStorage.Options(busAddress: daemon.busAddress)
            // The contract stores access-controlled rows; this storage refuses them unless the app opts in.
            options.allowsUnenforcedAccessControl = true
            options.unlockPrompt = .never
            return try DaemonStorage(daemon: daemon, storage: SecretServiceStorage(options: options))
        },
        setLockState: { storage, state in
            guard let wrapped = storage as? DaemonStorage else { throw EngineError(Status.param, "not a Secret Service storage") }
            switch state {
            case .locked: try wrapped.storage.lock()
            case .unlocked:
                try wrapped.daemon.restartKeyringDaemon(unlock: true)
                _ = try wrapped.storage.isLocked()   // the storage learns the collection's state
            case .lockedAfterFirstUnlock:
                throw EngineError(Status.unimplemented, "a Secret Service collection is locked or unlocked, nothing in between")
            }
        },
        reachableLockStates: [.locked, .unlocked],
        reasonsForMissingCapabilities: [
            .secondKeychain: "a second gnome-keyring collection needs a password prompt to create or unlock, and the private bus has no prompter",
            .damageRow: "the storage fails this clause by design, pending a decision: its seal does not cover the secret (Seal.swift), so an item given another item's secret (damageSecretServiceItem) is returned with that secret; an item whose seal fails is ignored, not reported unreadable",
            .lockState(.lockedAfterFirstUnlock): "a Secret Service collection is locked or unlocked, nothing in between",
            .decryptionCount: "SecretServiceStorage does not count the secrets it fetches",
        ])

    /// A program of the session damaging an item: `secret-tool store` with the item's own attributes (the service
    /// replaces its secret in place) and another item's secret.
    ///
    /// Not given to ``secretService`` yet: with it the damaged-row clause fails ("returned readable with another row's
    /// contents"), as `Seal.swift` decides the seal does not cover the secret. Wire it in once the seal binds the
    /// secret (or its digest) and a mismatch reads as `errSecDecode`.
    static let damageSecretServiceItem: @Sendable (any KeychainStorage, ItemClass, Int64) throws -> Void = { storage, itemClass, rowID in
        guard let wrapped = storage as? DaemonStorage else { throw EngineError(Status.param, "not a Secret Service storage") }
        func run(_ arguments: [String], input: Data? = nil) throws -> (stdout: Data, stderr: String) {
            let result = try wrapped.daemon.run(arguments, input: input)
            let stderr = String(decoding: result.stderr, as: UTF8.self)
            guard result.status == 0 else {
                throw EngineError(Status.param, "\(arguments.prefix(2).joined(separator: " ")) failed: \(stderr)")
            }
            return (result.stdout, stderr)
        }
        /// The attributes of the items `secret-tool search` finds: it prints them on stderr, "attribute.NAME = VALUE".
        func attributes(_ query: [String]) throws -> [(String, String)] {
            try run(["secret-tool", "search", "--all"] + query).stderr.split(separator: "\n").compactMap { line in
                guard line.hasPrefix("attribute."), let equals = line.range(of: " = ") else { return nil }
                return (String(line[line.index(line.startIndex, offsetBy: 10)..<equals.lowerBound]), String(line[equals.upperBound...]))
            }
        }
        let ours = ["xdg:schema", "dev.keystone.Keychain", "keystone:class", itemClass.rawValue]
        var target = Dictionary(try attributes(ours + ["keystone:rowid", String(rowID)]), uniquingKeysWith: { first, _ in first })
        guard !target.isEmpty else { throw EngineError(Status.itemNotFound, "no Secret Service item of row \(rowID) to damage") }
        target["xdg:schema"] = "dev.keystone.Keychain"
        let otherRow = try attributes(ours).first { $0.0 == "keystone:rowid" && $0.1 != String(rowID) }?.1
        let secret = try otherRow.map { try run(["secret-tool", "lookup", "keystone:rowid", $0] + ours).stdout } ?? Data("damaged".utf8)
        _ = try run(["secret-tool", "store", "--label=damaged"] + target.sorted { $0.key < $1.key }.flatMap { [$0.key, $0.value] }, input: secret)
    }

    /// A storage that owns the daemon behind it: the daemon stops when the test lets the storage go.
    final class DaemonStorage: KeychainStorage, @unchecked Sendable {
        // @unchecked: both properties are immutable; SecretServiceDaemon is a handle the daemon's own type guards.
        let daemon: SecretServiceDaemon
        let storage: SecretServiceStorage
        init(daemon: SecretServiceDaemon, storage: SecretServiceStorage) {
            self.daemon = daemon
            self.storage = storage
        }
        deinit { daemon.stop() }
        var lockState: LockState { storage.lockState }
        func read<T>(_ body: (any StorageReader) throws -> T) throws -> T { try storage.read(body) }
        func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T { try storage.write(body) }
    }
    #else
    static var secretServiceUnavailableReason: String? { "the Secret Service storage is Linux only" }
    static let secretService = StorageFactory(makeStorage: { throw EngineError(Status.unimplemented, "no Secret Service storage in this build") })
    #endif
}
