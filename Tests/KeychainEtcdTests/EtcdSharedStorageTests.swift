#if NIO && !canImport(Darwin)
import Foundation
import Testing
import EtcdCluster
import KeychainEngine
import KeychainEtcd

/// What per-machine features (Keystone's fresh-install wipe) read to know the keychain is the fleet's.
@Suite("etcd keychain: reports itself shared by several machines", .enabled(if: etcdMissing == nil, etcdSkipReason))
struct EtcdSharedStorageTests {
    @Test("an etcd keychain on a real cluster reports isSharedAcrossMachines, through an engine too; memory storage does not")
    func reportsShared() throws {
        let cluster = try EtcdTestCluster.shared()
        let configuration = try EtcdConfiguration(url: cluster.url(name: "shared-\(UUID().uuidString)"), environment: [:])
        let keychain = try EtcdKeychain.create(configuration, password: "pw")
        #expect(keychain.isSharedAcrossMachines)
        let engine = KeychainEngine(storage: keychain)
        #expect(engine.storage.isSharedAcrossMachines)
        #expect(!MemoryStorage().isSharedAcrossMachines)
    }
}
#endif
