#if NIO && !canImport(Darwin)
import Crypto
import Foundation
import Testing
import EtcdCluster
import KeychainEngine
@testable import KeychainEtcd

/// The audit log on a real cluster, tampered with by `etcdctl` as an attacker with write access to etcd would: each
/// kind of tampering is detected by ``EtcdKeychain/auditLog(verify:)`` and named.
@Suite("etcd keychain: tamper-evident audit log (etcdctl removes, reorders, edits, truncates, replays)",
       .enabled(if: etcdMissing == nil, etcdSkipReason))
struct EtcdAuditTests {
    let cluster: EtcdTestCluster

    init() throws { cluster = try EtcdTestCluster.shared() }

    /// A keychain with five entries: three adds, an update, a delete.
    func keychainWithFiveEntries(_ label: String) throws -> (EtcdKeychain, String) {
        let name = "audit-\(label)-\(UUID().uuidString.prefix(8))"
        let keychain = try EtcdKeychain.create(try EtcdConfiguration(url: cluster.url(name: name), environment: [:]), password: "pw")
        let engine = KeychainEngine(storage: keychain)
        for n in 1...3 { try engine.add(genp("audited-service", "account-\(n)", [Key.valueData: .data(Data("secret-\(n)".utf8))])) }
        try engine.update(genp("audited-service", "account-2"), with: [Key.valueData: .data(Data("secret-2b".utf8))])
        try engine.delete(genp("audited-service", "account-3"))
        return (keychain, name)
    }

    func entryKey(_ name: String, _ counter: UInt64) -> String {
        let hex = String(counter, radix: 16)
        return "keystone/v1/\(name)/audit/" + String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// A key's value as etcdctl reads it.
    func get(_ key: String) throws -> Data? {
        let output = try cluster.etcdctl(["get", key, "-w", "json"])
        let object = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]
        guard let kvs = object?["kvs"] as? [[String: Any]], let value = kvs.first?["value"] as? String else { return nil }
        return Data(base64Encoded: value)
    }

    func put(_ key: String, _ value: Data) throws { try cluster.etcdctl(["put", key], input: value) }
    func delete(_ key: String) throws { try cluster.etcdctl(["del", key]) }

    @Test("every change appends one entry in its own transaction: operation, item digest, machine, user; chained, MACed, verified intact; no name or secret in it")
    func entriesRecordChanges() throws {
        let (keychain, name) = try keychainWithFiveEntries("record")
        let report = try keychain.auditLog()
        #expect(report.isIntact, "\(report.problems)")
        #expect(report.entries.map(\.counter) == [1, 2, 3, 4, 5])
        #expect(report.headCounter == 5)
        #expect(report.entries.map { $0.events.map(\.operation) } == [["add"], ["add"], ["add"], ["update"], ["delete"]])
        #expect(report.entries.allSatisfy { $0.events.allSatisfy { $0.itemClass == "genp" && $0.item.count == 24 } })
        // The same item has the same digest: the update and the second add name one item.
        #expect(report.entries[1].events[0].item == report.entries[3].events[0].item)
        #expect(report.entries[0].events[0].item != report.entries[1].events[0].item)
        let machine = SHA256.hash(data: Data("keystone-etcd-machine\u{0}\(EtcdKeychain.machineID)".utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()
        #expect(report.entries.allSatisfy { $0.machine == machine && $0.uid == getuid() })
        for counter in UInt64(1)...5 {
            let value = try #require(try get(entryKey(name, counter)))
            for word in ["audited-service", "account-", "secret-"] {
                #expect(value.range(of: Data(word.utf8)) == nil, "entry \(counter) holds \(word)")
            }
        }
    }

    @Test("etcdctl removes entry 3: verify names it removed")
    func removed() throws {
        let (keychain, name) = try keychainWithFiveEntries("removed")
        try delete(entryKey(name, 3))
        let problems = try keychain.auditLog().problems
        #expect(problems.map(\.kind) == [.removed], "\(problems)")
        #expect(problems.first?.first == 3 && problems.first?.last == 3)
    }

    @Test("etcdctl swaps entries 2 and 4: verify names both reordered")
    func reordered() throws {
        let (keychain, name) = try keychainWithFiveEntries("reorder")
        let two = try #require(try get(entryKey(name, 2)))
        let four = try #require(try get(entryKey(name, 4)))
        try put(entryKey(name, 2), four)
        try put(entryKey(name, 4), two)
        let problems = try keychain.auditLog().problems
        #expect(problems.filter { $0.kind == .reordered }.map { [$0.first, $0.last] } == [[2, 4], [4, 2]], "\(problems)")
    }

    @Test("etcdctl edits one byte of entry 3 (its time): verify names it edited")
    func edited() throws {
        let (keychain, name) = try keychainWithFiveEntries("edit")
        var value = try #require(try get(entryKey(name, 3)))
        value[value.startIndex + 12] ^= 0x01
        try put(entryKey(name, 3), value)
        let problems = try keychain.auditLog().problems
        #expect(problems.map(\.kind) == [.edited], "\(problems)")
        #expect(problems.first?.first == 3)
    }

    @Test("etcdctl truncates the tail (entries 4 and 5): verify names them truncated against the HEAD")
    func truncated() throws {
        let (keychain, name) = try keychainWithFiveEntries("truncate")
        try delete(entryKey(name, 4))
        try delete(entryKey(name, 5))
        let problems = try keychain.auditLog().problems
        #expect(problems.map(\.kind) == [.truncated], "\(problems)")
        #expect(problems.first?.first == 4 && problems.first?.last == 5)
    }

    @Test("etcdctl replays an old HEAD and removes the entries after it: verify names the HEAD rolled back")
    func replayedHead() throws {
        let (keychain, name) = try keychainWithFiveEntries("replay-head")
        let head = "keystone/v1/\(name)/head"
        // An old HEAD: the attacker saw it after entry 5; two changes later, they put it back and drop entries 6, 7.
        let old = try #require(try get(head))
        let engine = KeychainEngine(storage: keychain)
        try engine.add(genp("audited-service", "account-6"))
        try engine.add(genp("audited-service", "account-7"))
        try put(head, old)
        try delete(entryKey(name, 6))
        try delete(entryKey(name, 7))
        let problems = try keychain.auditLog().problems
        #expect(problems.contains { $0.kind == .headRolledBack }, "\(problems)")
    }

    @Test("etcdctl replays an old entry in place of a newer one: verify names the entry that holds another")
    func replayedEntry() throws {
        let (keychain, name) = try keychainWithFiveEntries("replay-entry")
        try put(entryKey(name, 5), try #require(try get(entryKey(name, 2))))
        let problems = try keychain.auditLog().problems
        #expect(problems.contains { $0.kind == .reordered && $0.first == 5 && $0.last == 2 }, "\(problems)")
    }

    @Test("etcdctl puts back an entry's own value: verify names it rewritten (an entry is written once)")
    func rewritten() throws {
        let (keychain, name) = try keychainWithFiveEntries("rewrite")
        try put(entryKey(name, 3), try #require(try get(entryKey(name, 3))))
        let problems = try keychain.auditLog().problems
        #expect(problems.map(\.kind) == [.rewritten], "\(problems)")
    }

    @Test("trim keeps the last 2 entries behind a signed checkpoint: verify stays intact; a removed or edited checkpoint is detected")
    func trim() throws {
        let (keychain, name) = try keychainWithFiveEntries("trim")
        #expect(try keychain.trimAuditLog(keeping: 2) == 3)
        let report = try keychain.auditLog()
        #expect(report.isIntact, "\(report.problems)")
        #expect(report.entries.map(\.counter) == [4, 5])
        #expect(report.checkpointCounter == 3)
        let checkpoint = "keystone/v1/\(name)/audit-checkpoint"
        var value = try #require(try get(checkpoint))
        value[value.startIndex + 3] ^= 0x01
        try put(checkpoint, value)
        #expect(try keychain.auditLog().problems.contains { $0.kind == .checkpointInvalid })
        try delete(checkpoint)
        let problems = try keychain.auditLog().problems
        #expect(problems.contains { $0.kind == .removed && $0.first == 1 && $0.last == 3 }, "\(problems)")
        // A log that does not verify is not trimmed.
        #expect(status { _ = try keychain.trimAuditLog(keeping: 1) } == -67808)
    }

    @Test("verify needs the keychain's keys: locked, it is refused with errSecInteractionNotAllowed; listing works")
    func lockedVerify() throws {
        let (keychain, _) = try keychainWithFiveEntries("locked")
        keychain.lock()
        #expect(status { _ = try keychain.auditLog(verify: true) } == Status.interactionNotAllowed)
        #expect(try keychain.auditLog(verify: false).entries.count == 5)
    }

    @Test("the same change from one machine and user, at the same HEAD in the same millisecond, writes two different entries (a random commit id each); an entry of format 1, without one, still reads and verifies")
    func entriesAreUnique() throws {
        let name = "audit-unique-\(UUID().uuidString.prefix(8))"
        let keychain = try EtcdKeychain.create(try EtcdConfiguration(url: cluster.url(name: name), environment: [:]), password: "pw")
        let instant = Date(timeIntervalSince1970: 1_800_000_000.123)
        keychain.clock = { instant }
        let (keys, _, _) = try keychain.snapshotKeys()
        let key = keychain.auditKey(try #require(keys))
        let event = EtcdAuditEvent(kind: .update, itemClass: .genericPassword, digest: Data(repeating: 7, count: 64), version: 2)
        var first: [EtcdOperation] = [], second: [EtcdOperation] = []
        let chainOne = try EtcdAudit.append(to: &first, keychain: keychain, counter: 9, previousHash: EtcdHead.zeroHash, events: [event], key: key)
        let chainTwo = try EtcdAudit.append(to: &second, keychain: keychain, counter: 9, previousHash: EtcdHead.zeroHash, events: [event], key: key)
        guard case .put(let etcdKey, let one)? = first.first, case .put(_, let two)? = second.first else {
            Issue.record("no entry appended"); return
        }
        #expect(one != two)
        #expect(chainOne != chainTwo)
        for value in [one, two] {
            #expect(EtcdAuditRecord.verify(value, key: key, etcdKey: etcdKey))
            let record = try #require(EtcdAuditRecord(decoding: value))
            #expect(record.counter == 9 && record.time == instant && record.events.count == 1 && record.commitID?.count == 16)
        }
        #expect(EtcdAuditRecord(decoding: one)?.commitID != EtcdAuditRecord(decoding: two)?.commitID)

        // Format 1 (written before commit ids): read, verified, and one byte of it edited is refused.
        var old = try #require(EtcdAuditRecord(decoding: one))
        old.commitID = nil
        let stored = old.sealed(key: key, etcdKey: etcdKey)
        #expect(stored.first == 1)
        #expect(EtcdAuditRecord.verify(stored, key: key, etcdKey: etcdKey))
        let decoded = try #require(EtcdAuditRecord(decoding: stored))
        #expect(decoded.commitID == nil && decoded.events == old.events && decoded.previousHash == old.previousHash)
        var edited = stored
        edited[10] ^= 1
        #expect(!EtcdAuditRecord.verify(edited, key: key, etcdKey: etcdKey))
    }
}

/// Fail-closed: the change and its audit entry are one etcd transaction, so etcd refusing the entry refuses the change.
@Suite("etcd keychain: a change whose audit entry cannot be written is not applied (etcd RBAC denies the audit prefix)",
       .enabled(if: etcdMissing == nil, etcdSkipReason))
struct EtcdAuditFailClosedTests {
    /// A one-member cluster with authentication on, and an etcd user `user` (password `USER-pw`) whose role may read
    /// and write everything of keychain `name` but its audit prefix.
    static func clusterDenyingAudit(name: String, user: String) throws -> EtcdTestCluster {
        let cluster = try EtcdTestCluster.start(.init(members: 1))
        do {
            try cluster.enableAuthentication(rootPassword: "root-pw")
            let prefix = "keystone/v1/\(name)/"
            try cluster.etcdctl(["user", "add", user, "--interactive=false"], input: Data("\(user)-pw\n".utf8))
            try cluster.etcdctl(["role", "add", "keychain-but-audit"])
            // Everything under the keychain's prefix but `audit/`: [prefix, prefix+"audit/") and [prefix+"audit0", end).
            try cluster.etcdctl(["role", "grant-permission", "keychain-but-audit", "readwrite", prefix, prefix + "audit/"])
            try cluster.etcdctl(["role", "grant-permission", "keychain-but-audit", "readwrite", prefix + "audit0", "keystone/v1/\(name)0"])
            try cluster.etcdctl(["user", "grant-role", user, "keychain-but-audit"])
            return cluster
        } catch {
            cluster.stop()
            throw error
        }
    }

    @Test("a user whose etcd role may write the keychain but not its audit prefix: the add fails with errSecWrPerm, the item does not exist, the HEAD is unchanged")
    func rbacDeniesAudit() throws {
        let name = "failclosed"
        let prefix = "keystone/v1/\(name)/"
        let cluster = try Self.clusterDenyingAudit(name: name, user: "writer")
        defer { cluster.stop() }

        let root = try EtcdConfiguration(url: cluster.url(name: name, query: "user=root"), environment: ["KEYSTONE_ETCD_PASSWORD": "root-pw"])
        let owner = KeychainEngine(storage: try EtcdKeychain.create(root, password: "pw"))
        try owner.add(genp("svc", "by-root"))
        let headBefore = try cluster.etcdctl(["get", prefix + "head", "-w", "json"])

        let writer = try EtcdConfiguration(url: cluster.url(name: name, query: "user=writer"), environment: ["KEYSTONE_ETCD_PASSWORD": "writer-pw"])
        let keychain = try EtcdKeychain.open(writer)
        try keychain.unlock(password: "pw")
        let engine = KeychainEngine(storage: keychain)
        #expect(status { _ = try engine.copyMatching(genp("svc", "by-root")) } == Status.success, "the writer reads the keychain")
        #expect(status { try engine.add(genp("svc", "by-writer", [Key.valueData: .data(Data("s".utf8))])) } == Status.wrPerm)
        #expect(status { _ = try owner.copyMatching(genp("svc", "by-writer")) } == Status.itemNotFound)
        let headAfter = try cluster.etcdctl(["get", prefix + "head", "-w", "json"])
        let valueOf = { (json: String) in json.range(of: #""value":"[^"]*""#, options: .regularExpression).map { String(json[$0]) } }
        #expect(valueOf(headBefore) != nil && valueOf(headBefore) == valueOf(headAfter), "the HEAD did not move")
        let rootKeychain = try EtcdKeychain.open(root)
        #expect(try rootKeychain.auditLog(verify: false).entries.count == 1)
    }
}
#endif
#if NIO && !canImport(Darwin)
extension EtcdAuditTests {
    @Test("an entry with no change (an audited read) takes its place in the chain between writes, on another machine too; the log verifies")
    func standaloneEntry() throws {
        let (keychain, name) = try keychainWithFiveEntries("standalone")
        let digest = Data(repeating: 0xab, count: 64)
        try keychain.appendAuditEntry([EtcdAuditEvent(kind: .read, itemClass: .genericPassword, digest: digest, version: 2)])
        let other = try EtcdKeychain.open(try EtcdConfiguration(url: cluster.url(name: name, members: [2]), environment: [:]))
        if other.lockState != .unlocked { try other.unlock(password: "pw") }
        try KeychainEngine(storage: other).add(genp("audited-service", "account-9"))
        try other.appendAuditEntry([EtcdAuditEvent(kind: .read, itemClass: .genericPassword, digest: digest, version: 1)])
        let report = try keychain.auditLog()
        #expect(report.isIntact, "\(report.problems)")
        #expect(report.entries.map { $0.events.map(\.operation) }.suffix(3) == [["read"], ["add"], ["read"]])
        #expect(report.entries.last?.events.first?.item == "abababababababababababab")
        #expect(report.headCounter == 8)
    }
}
#endif
#if NIO && !canImport(Darwin)
extension EtcdAuditTests {
    @Test("a keychain that audits reads: a read that opens an item appends a read entry (its digest and version) before returning; a read that finds nothing appends none; turned off, reads append nothing")
    func auditedReads() throws {
        let (keychain, name) = try keychainWithFiveEntries("reads")
        #expect(!keychain.auditsReads)
        let engine = KeychainEngine(storage: keychain)
        _ = try engine.copyMatching(genp("audited-service", "account-1"))
        #expect(try keychain.auditLog().headCounter == 5, "reads are not audited by default")

        try keychain.setAuditsReads(true)
        #expect(keychain.auditsReads)
        _ = try engine.copyMatching(genp("audited-service", "account-2"))
        var report = try keychain.auditLog()
        #expect(report.isIntact, "\(report.problems)")
        #expect(report.headCounter == 6)
        let read = try #require(report.entries.last?.events.first)
        #expect(read.operation == "read")
        #expect(read.version == 2, "account-2 was added, then updated")
        #expect(read.item == report.entries[3].events[0].item, "the read names the item the update named")
        #expect(status { _ = try engine.copyMatching(genp("audited-service", "no-such-account")) } == Status.itemNotFound)
        #expect(try keychain.auditLog().headCounter == 6, "a read that opened nothing writes no entry")

        // Another machine follows the setting from its unlock.
        let other = try EtcdKeychain.open(try EtcdConfiguration(url: cluster.url(name: name, members: [1]), environment: [:]))
        try other.unlock(password: "pw")
        _ = try KeychainEngine(storage: other).copyMatching(genp("audited-service", "account-1"))
        report = try keychain.auditLog()
        #expect(report.headCounter == 7 && report.entries.last?.events.first?.operation == "read")

        try keychain.setAuditsReads(false)
        _ = try engine.copyMatching(genp("audited-service", "account-1"))
        #expect(try keychain.auditLog().headCounter == 7)
    }
}

extension EtcdAuditFailClosedTests {
    @Test("an audited read whose entry etcd refuses (a role without the audit prefix) fails with errSecWrPerm and returns nothing")
    func auditedReadFailsClosed() throws {
        let name = "failclosed-reads"
        let cluster = try Self.clusterDenyingAudit(name: name, user: "reader")
        defer { cluster.stop() }

        let root = try EtcdConfiguration(url: cluster.url(name: name, query: "user=root"), environment: ["KEYSTONE_ETCD_PASSWORD": "root-pw"])
        let ownerKeychain = try EtcdKeychain.create(root, password: "pw")
        let owner = KeychainEngine(storage: ownerKeychain)
        try owner.add(genp("svc", "token", [Key.valueData: .data(Data("s3cret".utf8))]))

        let reader = try EtcdKeychain.open(try EtcdConfiguration(url: cluster.url(name: name, query: "user=reader"), environment: ["KEYSTONE_ETCD_PASSWORD": "reader-pw"]))
        try reader.unlock(password: "pw")
        let engine = KeychainEngine(storage: reader)
        #expect(status { _ = try engine.copyMatching(genp("svc", "token")) } == Status.success, "reads are not audited yet")
        try ownerKeychain.setAuditsReads(true)
        try reader.unlock(password: "pw")
        var result: ItemResult?
        #expect(status { result = try engine.copyMatching(genp("svc", "token")) } == Status.wrPerm)
        #expect(result == nil)
    }
}
#endif
