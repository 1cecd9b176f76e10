#if NIO && !canImport(Darwin)
import Foundation
import Testing
import EtcdCluster
import KeychainEngine
@testable import KeychainEtcd

/// etcd's keys under a prefix, read with `etcdctl` (binary keys and values come back base64 in its JSON).
func etcdKeys(_ cluster: EtcdTestCluster, prefix: String) throws -> [(key: Data, value: Data)] {
    let output = try cluster.etcdctl(["get", "--prefix", prefix, "-w", "json"])
    let object = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]
    let kvs = object?["kvs"] as? [[String: Any]] ?? []
    return kvs.compactMap { kv in
        guard let key = (kv["key"] as? String).flatMap({ Data(base64Encoded: $0) }) else { return nil }
        return (key, (kv["value"] as? String).flatMap { Data(base64Encoded: $0) } ?? Data())
    }
}

/// Puts `value` at `key` with `etcdctl txn` (Go-quoted strings carry any byte, as a digest in a key needs), as
/// someone with write access to etcd would.
func etcdPut(_ cluster: EtcdTestCluster, _ key: Data, _ value: Data) throws {
    func quoted(_ bytes: Data) -> String { "\"" + bytes.map { String(format: "\\x%02x", $0) }.joined() + "\"" }
    let output = try cluster.etcdctl(["txn"], input: Data("\nput \(quoted(key)) \(quoted(value))\n\n\n".utf8))
    guard output.contains("SUCCESS") else { throw EngineError(Status.internalError, "etcdctl txn: \(output)") }
}

func genericSecret(_ engine: KeychainEngine, _ service: String, _ account: String) throws -> Data? {
    try engine.copyMatching(genp(service, account, [Key.returnData: .bool(true)]))?.data
}

@Suite("etcd keychain: item versions, soft delete, undelete, destroy, check-and-set (3-member cluster)",
       .enabled(if: etcdMissing == nil, etcdSkipReason))
struct EtcdHistoryTests {
    let cluster: EtcdTestCluster
    let name = "history-\(UUID().uuidString.prefix(8))"

    init() throws { cluster = try EtcdTestCluster.shared() }

    func machine(create: Bool = false, members: [Int]? = nil) throws -> (EtcdKeychain, KeychainEngine) {
        let configuration = try EtcdConfiguration(url: cluster.url(name: name, members: members), environment: [:])
        let keychain = create ? try EtcdKeychain.create(configuration, password: "pw") : try EtcdKeychain.open(configuration)
        if keychain.lockState != .unlocked { try keychain.unlock(password: "pw") }
        return (keychain, KeychainEngine(storage: keychain))
    }

    let item: [String: AttributeValue] = [Key.service: .string("svc"), Key.account: .string("acct")]

    func set(_ engine: KeychainEngine, _ secret: String) throws {
        try engine.update(genp("svc", "acct"), with: [Key.valueData: .data(Data(secret.utf8))])
    }

    @Test("each item keeps its last N versions (N from the header); older ones are purged by the writes; version k reads back as it was")
    func versionsKeptAndPurged() throws {
        let (keychain, engine) = try machine(create: true)
        #expect(keychain.maxVersions == 10)
        try keychain.setHistoryPolicy(maxVersions: 3)
        try engine.add(genp("svc", "acct", [Key.valueData: .data(Data("v1".utf8))]))
        for n in 2...6 { try set(engine, "v\(n)") }
        let versions = try keychain.versions(of: .genericPassword, matching: item)
        #expect(versions.map(\.version) == [4, 5, 6])
        #expect(versions.map(\.isCurrent) == [false, false, true])
        #expect(versions.allSatisfy { $0.deletedAt == nil })
        #expect(versions.map(\.counter) == versions.map(\.counter).sorted())
        #expect(try keychain.item(version: 4, of: .genericPassword, matching: item).secret == Data("v4".utf8))
        #expect(try keychain.item(version: 6, of: .genericPassword, matching: item).secret == Data("v6".utf8))
        #expect(status { _ = try keychain.item(version: 3, of: .genericPassword, matching: item) } == Status.itemNotFound)
        // In etcd: two history rows (versions 4 and 5) and the current one, nothing older.
        #expect(try etcdKeys(cluster, prefix: "keystone/v1/\(name)/h/").count == 2)
        #expect(try genericSecret(engine, "svc", "acct") == Data("v6".utf8))
        #expect(try keychain.currentVersion(of: .genericPassword, matching: item) == 6)
    }

    @Test("SecItemDelete leaves a tombstone SecItem calls do not see; undelete brings the item back; destroy erases every version")
    func softDeleteUndeleteDestroy() throws {
        let (keychain, engine) = try machine(create: true)
        try engine.add(genp("svc", "acct", [Key.valueData: .data(Data("v1".utf8))]))
        try set(engine, "v2")
        try engine.delete(genp("svc", "acct"))
        #expect(status { _ = try engine.copyMatching(genp("svc", "acct")) } == Status.itemNotFound)
        #expect(status { _ = try engine.copyMatching(genp("svc", nil, [Key.matchLimit: .string(Key.matchLimitAll)])) } == Status.itemNotFound)
        #expect(status { try engine.update(genp("svc", "acct"), with: [Key.label: .string("x")]) } == Status.itemNotFound)
        #expect(status { try engine.delete(genp("svc", "acct")) } == Status.itemNotFound)
        let deleted = try keychain.versions(of: .genericPassword, matching: item)
        #expect(deleted.map(\.version) == [1, 2])
        #expect(deleted.last?.deletedAt != nil && deleted.last?.isCurrent == true)
        #expect(status { _ = try keychain.currentVersion(of: .genericPassword, matching: item) } == Status.itemNotFound)
        // Undelete: the item as it was deleted, as a new version.
        #expect(try keychain.undelete(.genericPassword, matching: item) == 3)
        #expect(try genericSecret(engine, "svc", "acct") == Data("v2".utf8))
        #expect(status { try keychain.undelete(.genericPassword, matching: item) } == Status.duplicateItem)
        // A second machine sees the same.
        let (_, other) = try machine()
        #expect(try genericSecret(other, "svc", "acct") == Data("v2".utf8))
        // Destroy: the item and every version, gone from etcd.
        try keychain.destroy(.genericPassword, matching: item)
        #expect(status { _ = try engine.copyMatching(genp("svc", "acct")) } == Status.itemNotFound)
        #expect(status { _ = try keychain.versions(of: .genericPassword, matching: item) } == Status.itemNotFound)
        #expect(try etcdKeys(cluster, prefix: "keystone/v1/\(name)/h/").isEmpty)
        #expect(try etcdKeys(cluster, prefix: "keystone/v1/\(name)/k/").isEmpty)
        // And an add of that primary key starts again.
        try engine.add(genp("svc", "acct", [Key.valueData: .data(Data("new".utf8))]))
        #expect(try genericSecret(engine, "svc", "acct") == Data("new".utf8))
    }

    @Test("an add of a deleted item's primary key succeeds (Apple's semantics) and continues its versions; the old ones stay readable")
    func addAfterDelete() throws {
        let (keychain, engine) = try machine(create: true)
        try engine.add(genp("svc", "acct", [Key.valueData: .data(Data("first".utf8))]))
        try engine.delete(genp("svc", "acct"))
        try engine.add(genp("svc", "acct", [Key.valueData: .data(Data("second".utf8))]))
        #expect(try genericSecret(engine, "svc", "acct") == Data("second".utf8))
        #expect(status { try engine.add(genp("svc", "acct")) } == Status.duplicateItem)
        #expect(status { try keychain.undelete(.genericPassword, matching: item) } == Status.duplicateItem)
        let versions = try keychain.versions(of: .genericPassword, matching: item)
        #expect(versions.map(\.version) == [1, 2])
        #expect(try keychain.item(version: 1, of: .genericPassword, matching: item).secret == Data("first".utf8))
    }

    @Test("a tombstone past the keychain's retention is purged by a later write (injected clock); before it, it is kept")
    func retentionPurge() throws {
        let (keychain, engine) = try machine(create: true)
        let now = Locked(Date(timeIntervalSince1970: 2_000_000_000))
        keychain.clock = { now.current }
        #expect(keychain.tombstoneRetention == 30 * 24 * 3600)
        try keychain.setHistoryPolicy(tombstoneRetention: 3600)
        try engine.add(genp("svc", "acct", [Key.valueData: .data(Data("v1".utf8))]))
        try set(engine, "v2")
        try engine.delete(genp("svc", "acct"))
        try engine.add(genp("other", "x"))
        // Within the retention, a write (an update reads first, so it sees the tombstone index) keeps the tombstone.
        now.withLock { $0 += 3599 }
        try engine.update(genp("other", "x"), with: [Key.label: .string("one")])
        #expect(try keychain.versions(of: .genericPassword, matching: item).count == 2)
        #expect(try etcdKeys(cluster, prefix: "keystone/v1/\(name)/h/").count == 2)  // svc's version 1, other's version 1
        #expect(try etcdKeys(cluster, prefix: "keystone/v1/\(name)/t/").count == 1)
        // Past it, the next write purges the item, its history and the index entry.
        now.withLock { $0 += 2 }
        try engine.update(genp("other", "x"), with: [Key.label: .string("two")])
        #expect(status { _ = try keychain.versions(of: .genericPassword, matching: item) } == Status.itemNotFound)
        #expect(status { try keychain.undelete(.genericPassword, matching: item) } == Status.itemNotFound)
        // Left in etcd: the other item's two history rows (its two updates), no tombstone index entry.
        #expect(try etcdKeys(cluster, prefix: "keystone/v1/\(name)/h/").count == 2)
        #expect(try etcdKeys(cluster, prefix: "keystone/v1/\(name)/t/").isEmpty)
        #expect(try etcdKeys(cluster, prefix: "keystone/v1/\(name)/k/").count == 1)
        try engine.add(genp("svc", "acct"))
    }

    @Test("check-and-set from two machines: an update stating a version another machine changed since fails with EtcdVersionConflict and changes nothing")
    func checkAndSetConflict() throws {
        let (a, engineA) = try machine(create: true, members: [0])
        let (_, engineB) = try machine(members: [2])
        try engineA.add(genp("svc", "acct", [Key.valueData: .data(Data("v1".utf8))]))
        let read = try a.currentVersion(of: .genericPassword, matching: item)
        #expect(read == 1)
        try set(engineB, "from-b")
        do {
            try a.withCheckAndSet(expectedVersion: read) { try set(engineA, "from-a") }
            Issue.record("the stale check-and-set update succeeded")
        } catch let conflict as EtcdVersionConflict {
            #expect(conflict.expected == 1 && conflict.current == 2)
            #expect(conflict.status == Status.invalidItemRef)
        }
        #expect(try genericSecret(engineA, "svc", "acct") == Data("from-b".utf8))
        // Through the engine's status: errSecInvalidItemRef.
        #expect(status { try EtcdCheckAndSet.$current.withValue(EtcdCheckAndSet(version: 1)) { try set(engineA, "x") } } == Status.invalidItemRef)
        try a.withCheckAndSet(expectedVersion: 2) { try set(engineA, "from-a") }
        #expect(try genericSecret(engineB, "svc", "acct") == Data("from-a".utf8))
        #expect(try a.currentVersion(of: .genericPassword, matching: item) == 3)
    }

    @Test("a keychain requiring check-and-set: SecItemUpdate without a stated version fails with errSecDataNotModifiable on every machine; with one it works")
    func requiredCheckAndSet() throws {
        let (a, engineA) = try machine(create: true, members: [0])
        let (_, engineB) = try machine(members: [1])
        try engineA.add(genp("svc", "acct", [Key.valueData: .data(Data("v1".utf8))]))
        try set(engineB, "v2")  // B read the header before the setting
        try a.setHistoryPolicy(requireCheckAndSet: true)
        #expect(a.requiresCheckAndSet)
        let failure = error { try set(engineA, "nope") }
        #expect(failure?.status == Status.dataNotModifiable)
        #expect(failure?.reason.contains("check-and-set") == true)
        #expect(status { try set(engineB, "nope") } == Status.dataNotModifiable)
        try a.withCheckAndSet(expectedVersion: 2) { try set(engineA, "v3") }
        #expect(try genericSecret(engineB, "svc", "acct") == Data("v3".utf8))
        // Adds and deletes are not updates.
        try engineB.add(genp("svc", "other"))
        try engineB.delete(genp("svc", "other"))
    }
}
#endif
