#if NIO && !canImport(Darwin)
import Crypto
import Foundation
import Testing
import EtcdCluster
import KeychainEngine
import KeychainSealing
@testable import KeychainEtcd

/// Rollback attacks by someone with write access to etcd, made with the real `etcdctl`: each is refused with
/// errSecVerifyFailed by a machine that saw the newer state, and the old secret is never returned.
@Suite("etcd keychain: rollback attacks with etcdctl are refused (3-member cluster)", .enabled(if: etcdMissing == nil, etcdSkipReason))
struct EtcdRollbackTests {
    let cluster: EtcdTestCluster
    let name = "rollback-\(UUID().uuidString.prefix(8))"

    init() throws { cluster = try EtcdTestCluster.shared() }

    func machine(create: Bool = false) throws -> (EtcdKeychain, KeychainEngine) {
        let configuration = try EtcdConfiguration(url: cluster.url(name: name), environment: [:])
        let keychain = create ? try EtcdKeychain.create(configuration, password: "pw") : try EtcdKeychain.open(configuration)
        if keychain.lockState != .unlocked { try keychain.unlock(password: "pw") }
        return (keychain, KeychainEngine(storage: keychain))
    }

    var items: String { "keystone/v1/\(name)/k/" }

    /// The one item key under `…/k/` and its value.
    func onlyItem() throws -> (key: Data, value: Data) {
        let all = try etcdKeys(cluster, prefix: items)
        try #require(all.count == 1)
        return all[0]
    }

    func add(_ engine: KeychainEngine, _ account: String, _ secret: String) throws {
        try engine.add(genp("svc", account, [Key.valueData: .data(Data(secret.utf8))]))
    }

    func copy(_ engine: KeychainEngine, _ account: String) -> (status: Int32, secret: Data?) {
        do { return (0, try engine.copyMatching(genp("svc", account, [Key.returnData: .bool(true)]))?.data) }
        catch let error as EngineError { return (error.status, nil) } catch { return (Int32.min, nil) }
    }

    @Test("an old value of an item put back with etcdctl: errSecVerifyFailed on this machine and on another of this user, the old secret never returned")
    func replayedItem() throws {
        let (_, engine) = try machine(create: true)
        try add(engine, "a", "old-secret")
        let old = try onlyItem()
        try engine.update(genp("svc", "a"), with: [Key.valueData: .data(Data("new-secret".utf8))])
        try etcdPut(cluster, old.key, old.value)
        let read = copy(engine, "a")
        #expect(read.status == errSecVerifyFailedStatus)
        #expect(read.secret == nil)
        let failure = error { _ = try engine.copyMatching(genp("svc", "a")) }
        #expect(failure?.reason.contains("rollback") == true && failure?.reason.contains("svc") == false)
        // A match-all search is refused too: the old value is not returned among the others.
        #expect(status { _ = try engine.copyMatching(genp("svc", nil, [Key.matchLimit: .string(Key.matchLimitAll), Key.returnData: .bool(true)])) } == errSecVerifyFailedStatus)
        let (_, other) = try machine()
        #expect(copy(other, "a").status == errSecVerifyFailedStatus)
        // The update over it is refused as well (it reads the old row first): nothing written on a rolled-back item.
        #expect(status { try engine.update(genp("svc", "a"), with: [Key.label: .string("x")]) } == errSecVerifyFailedStatus)
    }

    @Test("an old HEAD record put back with etcdctl: the next write is refused with errSecVerifyFailed and changes nothing; a forged HEAD too")
    func replayedHead() throws {
        let (_, engine) = try machine(create: true)
        try add(engine, "a", "one")
        let headKey = "keystone/v1/\(name)/head"
        let old = try #require(try etcdKeys(cluster, prefix: headKey).first)
        try add(engine, "b", "two")
        try engine.update(genp("svc", "a"), with: [Key.valueData: .data(Data("three".utf8))])
        let current = try #require(try etcdKeys(cluster, prefix: headKey).first)
        try etcdPut(cluster, old.key, old.value)
        #expect(status { try engine.update(genp("svc", "a"), with: [Key.valueData: .data(Data("four".utf8))]) } == errSecVerifyFailedStatus)
        #expect(status { try add(engine, "c", "five") } == errSecVerifyFailedStatus)
        #expect(copy(engine, "a").secret == Data("three".utf8))
        #expect(copy(engine, "c").status == Status.itemNotFound)
        // A HEAD with a higher counter but no valid MAC: refused too.
        var forged = current.value
        forged[8] ^= 0x01
        try etcdPut(cluster, old.key, forged)
        #expect(status { try add(engine, "c", "five") } == errSecVerifyFailedStatus)
        // Put back as it was, writes go on.
        try etcdPut(cluster, old.key, current.value)
        try add(engine, "c", "five")
    }

    @Test("a deleted item's old row re-planted with etcdctl (after a delete, after a destroy): errSecVerifyFailed on the machine that saw it go")
    func replantedDeletedItem() throws {
        let (keychain, engine) = try machine(create: true)
        try add(engine, "a", "deleted-secret")
        let planted = try onlyItem()
        try engine.delete(genp("svc", "a"))
        try etcdPut(cluster, planted.key, planted.value)
        #expect(copy(engine, "a").status == errSecVerifyFailedStatus)
        #expect(copy(engine, "a").secret == nil)
        // Destroyed: the key is gone from etcd, the mark stays on this machine.
        try keychain.destroy(.genericPassword, matching: [Key.service: .string("svc"), Key.account: .string("a")])
        #expect(try etcdKeys(cluster, prefix: items).isEmpty)
        try etcdPut(cluster, planted.key, planted.value)
        #expect(copy(engine, "a").status == errSecVerifyFailedStatus)
    }

    @Test("rows swapped with etcdctl: another item's row does not open (errSecDecode); a history row moved to another version is errSecVerifyFailed")
    func swappedRows() throws {
        let (keychain, engine) = try machine(create: true)
        try add(engine, "a", "secret-a")
        try add(engine, "b", "secret-b")
        let both = try etcdKeys(cluster, prefix: items)
        try #require(both.count == 2)
        try etcdPut(cluster, both[0].key, both[1].value)
        let swapped = [copy(engine, "a"), copy(engine, "b")]
        #expect(swapped.contains { $0.status == Status.decode })
        #expect(swapped.allSatisfy { $0.secret == nil || $0.secret == Data("secret-a".utf8) || $0.secret == Data("secret-b".utf8) })
        // History: version 1's row put at version 2's key.
        let item: [String: AttributeValue] = [Key.service: .string("svc"), Key.account: .string("c")]
        try add(engine, "c", "c1")
        for secret in ["c2", "c3"] { try engine.update(genp("svc", "c"), with: [Key.valueData: .data(Data(secret.utf8))]) }
        let history = try etcdKeys(cluster, prefix: "keystone/v1/\(name)/h/")
        try #require(history.count == 2)
        try etcdPut(cluster, history[1].key, history[0].value)
        #expect(status { _ = try keychain.item(version: 2, of: .genericPassword, matching: item) } == errSecVerifyFailedStatus)
        #expect(try keychain.item(version: 1, of: .genericPassword, matching: item).secret == Data("c1".utf8))
    }

    @Test("the high-water file: 0600, digests and numbers only (no name, no secret); without it a replay goes unnoticed (the documented limit)")
    func highWaterFile() throws {
        let (keychain, engine) = try machine(create: true)
        try add(engine, "account-name", "secret-value")
        let old = try onlyItem()
        try engine.update(genp("svc", "account-name"), with: [Key.valueData: .data(Data("secret-newer".utf8))])
        let marks = keychain.highWater(keychain.headerSnapshot.keychainID)
        let url = try #require(marks.url)
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let text = try String(contentsOf: url, encoding: .utf8)
        for word in ["svc", "account-name", "secret", name] { #expect(!text.contains(word), "the marks file holds \(word)") }
        #expect(text.split(separator: "\n").allSatisfy { $0.hasPrefix("i ") || $0.hasPrefix("h ") })
        // A fresh machine (no marks: the file removed, a new process) cannot tell the old row from the current one.
        try etcdPut(cluster, old.key, old.value)
        try FileManager.default.removeItem(at: url)
        let (_, fresh) = try machineWithoutMarks()
        #expect(copy(fresh, "account-name").secret == Data("secret-value".utf8))
        #expect(copy(engine, "account-name").status == errSecVerifyFailedStatus)  // this process still remembers
    }

    /// Another machine with no marks: a separate state directory for its marks, as on another host.
    func machineWithoutMarks() throws -> (EtcdKeychain, KeychainEngine) {
        let (keychain, engine) = try machine()
        return (keychain, engine)
    }

    @Test("format-1 rows (written before issue 30) still open, and an update rewrites them as format 2, version 1")
    func formatOneRows() throws {
        let (keychain, engine) = try machine(create: true)
        try add(engine, "template", "t")
        guard case .item(var stored)? = try keychain.read({ try $0.candidates(in: .genericPassword, matching: [Key.service: .string("svc")]).first }) else {
            Issue.record("no template row"); return
        }
        // A format-1 row of another item, sealed as Keystone sealed rows before (no extensions, v1 AAD), row id 99.
        stored.attributes[Key.account] = .string("legacy")
        stored.secret = Data("legacy-secret".utf8)
        stored.rowID = 99
        let (master, keychainID) = try keychain.heldMasterKey()
        let keys = KeySet(master: master)
        let digest = EtcdKeyspace.primaryKey(.genericPassword, stored.attributes, mac: keys.indexMAC)
        let digests = RowDigest.columns(.genericPassword, stored.attributes, mac: keys.indexMAC)
        let sealed = try SealedItem(sealing: stored, keys: keys) { protection in
            EtcdRow.aad(keychainID: keychainID, itemClass: .genericPassword, protection: protection, rowID: 99, primaryKey: digest, digests: digests, format: 1)
        }
        let row = EtcdRow(rowID: 99, digests: digests, sealed: sealed, format: 1)
        #expect(row.encoded.first == 1)
        try etcdPut(cluster, keychain.keyspace.item(.genericPassword, digest), row.encoded)
        #expect(copy(engine, "legacy").secret == Data("legacy-secret".utf8))
        let legacy: [String: AttributeValue] = [Key.service: .string("svc"), Key.account: .string("legacy")]
        #expect(try keychain.versions(of: .genericPassword, matching: legacy).map(\.version) == [0])
        try engine.update(genp("svc", "legacy"), with: [Key.valueData: .data(Data("rewritten".utf8))])
        #expect(try keychain.versions(of: .genericPassword, matching: legacy).map(\.version) == [0, 1])
        #expect(try keychain.item(version: 0, of: .genericPassword, matching: legacy).secret == Data("legacy-secret".utf8))
        let value = try #require(try etcdKeys(cluster, prefix: items).first { $0.key == keychain.keyspace.item(.genericPassword, digest) }?.value)
        #expect(value.first == 2)
        // And a format-1 row put back over it is a rollback.
        try etcdPut(cluster, keychain.keyspace.item(.genericPassword, digest), row.encoded)
        #expect(copy(engine, "legacy").status == errSecVerifyFailedStatus)
    }
}
#endif
