#if NIO && !canImport(Darwin)
import Foundation
import Testing
import EtcdCluster
import KeychainEngine
import KeychainSealing
import Crypto
@testable import KeychainEtcd

/// A fresh etcd keychain on the shared cluster, its administrator (unlocked with the password), and a directory for
/// machine keys.
private struct GroupFixture {
    let cluster: EtcdTestCluster
    let configuration: EtcdConfiguration
    let admin: EtcdKeychain
    let directory: URL

    init(_ label: String) throws {
        cluster = try EtcdTestCluster.shared()
        configuration = try EtcdConfiguration(url: cluster.url(name: "\(label)-\(UUID().uuidString.prefix(8))"), environment: [:])
        admin = try EtcdKeychain.create(configuration, password: "fleet-password")
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-groups-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    func machineKey(_ name: String) throws -> EtcdMachineKey {
        try EtcdMachineKey.software(file: directory.appendingPathComponent("\(name).key").path)
    }

    /// Member machines: their own keychain objects unlocked with their machine keys. The administrator's unlock
    /// cache is cleared first (a real member machine has none: here every "machine" shares this user's kernel
    /// keyring, so all members are made under one lock), then the administrator unlocks again.
    func members(_ machines: [(id: String, key: EtcdMachineKey)]) throws -> [EtcdKeychain] {
        admin.lock()
        let made = try machines.map { machine in
            let member = try EtcdKeychain.open(configuration)
            try member.unlock(machineKey: machine.key, machineID: machine.id)
            return member
        }
        try admin.unlock(password: "fleet-password")
        return made
    }

    func member(_ machineID: String, key: EtcdMachineKey) throws -> EtcdKeychain {
        try members([(machineID, key)])[0]
    }

    /// Every (key, value) under `suffix` of the keychain's prefix, as etcdctl prints them (what anyone with etcd read
    /// access gets).
    func etcdctlDump(_ suffix: String) throws -> [(key: Data, value: Data)] {
        let output = try cluster.etcdctl(["get", "--prefix", "keystone/v1/\(configuration.name)/\(suffix)", "-w", "json"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        let kvs = json["kvs"] as? [[String: Any]] ?? []
        return kvs.compactMap { kv in
            guard let key = (kv["key"] as? String).flatMap({ Data(base64Encoded: $0) }),
                  let value = (kv["value"] as? String).flatMap({ Data(base64Encoded: $0) }) else { return nil }
            return (key, value)
        }
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }
}

private func genpIn(_ group: String, _ service: String, _ account: String, secret: String? = nil) -> KeychainQuery {
    var extra: KeychainQuery = [Key.accessGroup: .string(group)]
    if let secret { extra[Key.valueData] = .data(Data(secret.utf8)) }
    return genp(service, account, extra)
}

private func read(_ engine: KeychainEngine, _ service: String, _ account: String) throws -> String? {
    try engine.copyMatching(genp(service, account, [Key.returnData: .bool(true)]))?.data.map { String(decoding: $0, as: UTF8.self) }
}

/// Tries every generation key a view holds, and the view's KeySet, on every sealed row: the rows that open.
private func rowsOpening(_ rows: [(key: Data, value: Data)], keychain: EtcdKeychain, keys: [SymmetricKey], keychainID: Data) -> [StoredItem] {
    var opened: [StoredItem] = []
    for (key, value) in rows {
        guard let row = EtcdRow(decoding: value), let (cls, primaryKey) = keychain.itemKey(key) else { continue }
        let aad = EtcdRow.aad(keychainID: keychainID, itemClass: cls, protection: row.sealed.protection, rowID: row.rowID,
                              primaryKey: primaryKey, digests: row.digests, format: row.format, extensions: row.extensions)
        for candidate in keys {
            let set = EtcdDomainKeys.keySet(candidate, index: candidate, classes: ProtectionClass.allCases)
            if case .item(let item) = row.sealed.open(itemClass: cls, rowID: row.rowID, keys: set, aad: aad) { opened.append(item) }
            // The key as a master key too (class keys derived as from a master key).
            if case .item(let item) = row.sealed.open(itemClass: cls, rowID: row.rowID, keys: KeySet(master: candidate), aad: aad) { opened.append(item) }
        }
    }
    return opened
}

@Suite("etcd keychain: access groups as cryptographic boundaries (a real etcd cluster)", .enabled(if: etcdMissing == nil, etcdSkipReason))
struct EtcdGroupTests {
    @Test("a machine enrolled for group A, with read access to all of etcd, cannot read group B's items through Keystone nor by decrypting what etcdctl gets")
    func isolation() throws {
        let fixture = try GroupFixture("groups")
        defer { fixture.remove() }
        let adminEngine = KeychainEngine(storage: fixture.admin)
        try adminEngine.add(genpIn("A", "svc-a", "alice", secret: "secret-of-a"))
        try adminEngine.add(genpIn("B", "svc-b", "bob", secret: "secret-of-b"))
        let keyA = try fixture.machineKey("a")
        let keyB = try fixture.machineKey("b")
        try fixture.admin.enrollMachine("machine-a", publicKey: keyA.publicKeyX963, groups: ["A"])
        try fixture.admin.enrollMachine("machine-b", publicKey: keyB.publicKeyX963, groups: ["B"])
        // The administrator still reads both (it holds every group key).
        #expect(try read(adminEngine, "svc-a", "alice") == "secret-of-a")
        #expect(try read(adminEngine, "svc-b", "bob") == "secret-of-b")

        let member = try fixture.member("machine-a", key: keyA)
        #expect(member.enrolledGroups == ["A"])
        #expect(member.lockState == .unlocked)
        let engine = KeychainEngine(storage: member, configuration: member.engineConfiguration())
        #expect(try read(engine, "svc-a", "alice") == "secret-of-a")
        // B's item is invisible, as another access group's is on Apple's platforms: not found, not an error.
        #expect(status { _ = try engine.copyMatching(genp("svc-b", nil, [Key.returnAttributes: .bool(true), Key.matchLimit: .string("m_LimitAll")])) } == Status.itemNotFound)
        let plain = KeychainEngine(storage: member)  // an engine not told the machine's groups: the storage still hides B
        #expect(status { _ = try plain.copyMatching(genp("svc-b", "bob", [Key.returnData: .bool(true)])) } == Status.itemNotFound)
        #expect(status { _ = try plain.copyMatching(genpIn("B", "svc-b", "bob")) } == Status.itemNotFound)
        let listed = try plain.copyMatching(genp("svc-a", nil, [Key.returnAttributes: .bool(true), Key.matchLimit: .string("m_LimitAll")]))
        #expect(listed != nil)
        // An add without a group goes to its first group; an add into B is refused (no key to seal it).
        try engine.add(genp("svc-new", "carol", [Key.valueData: .data(Data("new".utf8))]))
        #expect(try adminEngine.copyMatching(genpIn("A", "svc-new", "carol", secret: nil).merging([Key.returnData: .bool(true)]) { $1 })?.data == Data("new".utf8))
        #expect(status { try plain.add(genpIn("B", "svc-evil", "mallory", secret: "x")) } == Status.missingEntitlement)
        // It holds no master key: it cannot enroll machines nor rotate.
        #expect(status { try member.rotateKeys(group: "A") } == Status.interactionNotAllowed)
        #expect(status { try member.enrollMachine("machine-x", publicKey: keyA.publicKeyX963, groups: ["B"]) } == Status.interactionNotAllowed)

        // Everything etcd holds, as etcdctl gets it, tried with every key machine A holds (its bundle, opened with
        // its machine key): A's rows open, B's never do.
        let header = try EtcdKeychainHeader.decode(try #require(fixture.etcdctlDump("meta").first?.value))
        let entry = try EtcdMemberEntry.decode(try #require(fixture.etcdctlDump("member/\(EtcdKeyspace.machineDigest("machine-a"))").first?.value))
        let bundle = try entry.open(with: keyA, keychainID: header.keychainID, machine: EtcdKeyspace.machineDigest("machine-a"))
        #expect(bundle.groups.map(\.name) == ["A"])
        var keys = bundle.groups.flatMap { $0.keys.values.map { SymmetricKey(data: $0) } }
        keys.append(SymmetricKey(data: bundle.index))
        let opened = rowsOpening(try fixture.etcdctlDump("k/"), keychain: member, keys: keys, keychainID: header.keychainID)
        #expect(opened.count == 2)  // alice and carol
        #expect(!opened.contains { $0.secret == Data("secret-of-b".utf8) })
        #expect(opened.contains { $0.secret == Data("secret-of-a".utf8) })
        // Nothing etcd holds names the groups or holds a secret in clear.
        let everything = try fixture.etcdctlDump("")
        for (_, value) in everything {
            #expect(value.range(of: Data("secret-of-b".utf8)) == nil)
            #expect(value.range(of: Data("svc-b".utf8)) == nil)
        }
    }

    @Test("after removal from group A and a rotation, the machine's old keys open no new version of A's items; the remaining member follows")
    func removalAndRotation() throws {
        let fixture = try GroupFixture("groups-remove")
        defer { fixture.remove() }
        let adminEngine = KeychainEngine(storage: fixture.admin)
        try adminEngine.add(genpIn("A", "svc", "acct", secret: "version-1"))
        let keyA = try fixture.machineKey("a")
        let keyC = try fixture.machineKey("c")
        try fixture.admin.enrollMachine("machine-a", publicKey: keyA.publicKeyX963, groups: ["A"])
        try fixture.admin.enrollMachine("machine-c", publicKey: keyC.publicKeyX963, groups: ["A"])
        let both = try fixture.members([("machine-a", keyA), ("machine-c", keyC)])
        let (leaving, staying) = (both[0], both[1])
        let leavingEngine = KeychainEngine(storage: leaving)
        let stayingEngine = KeychainEngine(storage: staying)
        #expect(try read(leavingEngine, "svc", "acct") == "version-1")
        #expect(try read(stayingEngine, "svc", "acct") == "version-1")
        // What the leaving machine holds (it may have copied it): its bundle's keys.
        let header = try EtcdKeychainHeader.decode(try #require(fixture.etcdctlDump("meta").first?.value))
        let entry = try EtcdMemberEntry.decode(try #require(fixture.etcdctlDump("member/\(EtcdKeyspace.machineDigest("machine-a"))").first?.value))
        let kept = try entry.open(with: keyA, keychainID: header.keychainID, machine: EtcdKeyspace.machineDigest("machine-a"))
        let keptKeys = kept.groups.flatMap { $0.keys.values.map { SymmetricKey(data: $0) } } + [SymmetricKey(data: kept.index)]

        try fixture.admin.removeMachine("machine-a", fromGroup: "A")
        #expect(try fixture.admin.groups().first { $0.name == "A" }?.generation == 2)
        #expect(status { try fixture.admin.removeMachine("machine-a", fromGroup: "A") } == Status.itemNotFound)
        try adminEngine.update(genpIn("A", "svc", "acct"), with: [Key.valueData: .data(Data("version-2".utf8))])

        // The remaining member reads the new version without unlocking again (it reads its keys again on meeting
        // generation 2); the removed one cannot, through Keystone nor with the keys it kept.
        #expect(try read(stayingEngine, "svc", "acct") == "version-2")
        var leaked: String?
        do { leaked = try read(leavingEngine, "svc", "acct") } catch {}
        #expect(leaked != "version-2")
        let opened = rowsOpening(try fixture.etcdctlDump("k/"), keychain: leaving, keys: keptKeys, keychainID: header.keychainID)
        #expect(opened.isEmpty)
        #expect(status { try leaving.unlock(machineKey: keyA, machineID: "machine-a") } == Status.authFailed)
    }

    @Test("an old key record or bundle put back with etcdctl is detected by a machine that saw the newer generation (errSecVerifyFailed)")
    func replayedKeyRecord() throws {
        let fixture = try GroupFixture("groups-replay")
        defer { fixture.remove() }
        let adminEngine = KeychainEngine(storage: fixture.admin)
        try adminEngine.add(genpIn("A", "svc", "acct", secret: "s"))
        let keyA = try fixture.machineKey("a")
        try fixture.admin.enrollMachine("machine-a", publicKey: keyA.publicKeyX963, groups: ["A"])
        let member = try fixture.member("machine-a", key: keyA)
        let recordKey = "keystone/v1/\(fixture.configuration.name)/keys/" + EtcdDomainKeys.groupID("A", index: KeySet(master: try fixture.admin.heldMasterKey().0).indexMAC).hexString
        let memberKey = "keystone/v1/\(fixture.configuration.name)/member/\(EtcdKeyspace.machineDigest("machine-a"))"
        let oldRecord = try fixture.cluster.etcdctl(["get", recordKey, "--print-value-only"]).trimmingCharacters(in: .newlines)
        let oldBundle = try fixture.cluster.etcdctl(["get", memberKey, "--print-value-only"]).trimmingCharacters(in: .newlines)
        try fixture.admin.rotateKeys(group: "A")
        #expect(try read(KeychainEngine(storage: member), "svc", "acct") == "s")  // the member follows to generation 2
        _ = try fixture.admin.groups()
        // Replayed: both are detected by the machines that saw generation 2, and nothing is sealed under the old one.
        _ = try fixture.cluster.etcdctl(["put", recordKey, oldRecord])
        _ = try fixture.cluster.etcdctl(["put", memberKey, oldBundle])
        #expect(status { _ = try fixture.admin.groups() } == -67808)
        #expect(status { _ = try member.groups() } == -67808)
        // A write of an A item now either refuses (its writer read the replayed record) or seals under generation 2
        // (it kept the one it saw): never under generation 1, which the replayed record offers.
        let added = status { _ = try adminEngine.add(genpIn("A", "svc2", "acct", secret: "t")) }
        #expect(added == 0 || added == -67808)
        for (_, value) in try fixture.etcdctlDump("k/") {
            let row = try #require(EtcdRow(decoding: value))
            #expect(EtcdKeyName(extensions: row.extensions).generation == 2)
        }
    }
}

@Suite("etcd keychain: the etcd role of a machine enrolled for access groups (a real etcd cluster with authentication)",
       .enabled(if: etcdMissing == nil, etcdSkipReason))
struct EtcdGroupRoleTests {
    @Test("under its etcd role a member machine adds, updates and deletes its group's items; its writes to key records, bundles and the header are refused")
    func memberRole() throws {
        let cluster = try EtcdTestCluster.start(.init(members: 1))
        defer { cluster.stop() }
        let name = "rbac"
        try cluster.enableAuthentication(rootPassword: "root-password")
        let adminConfiguration = try EtcdConfiguration(url: cluster.url(name: name, query: "user=root"), environment: ["KEYSTONE_ETCD_PASSWORD": "root-password"])
        let admin = try EtcdKeychain.create(adminConfiguration, password: "fleet-password")
        try KeychainEngine(storage: admin).add(genpIn("A", "svc", "acct", secret: "s"))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-rbac-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = try EtcdMachineKey.software(file: directory.appendingPathComponent("m.key").path)
        try admin.enrollMachine("m", publicKey: key.publicKeyX963, groups: ["A"])

        // The role, with real etcdctl user and role commands.
        try cluster.etcdctl(["role", "add", "keystone-member"])
        for permission in EtcdKeychain.memberRolePermissions(keychain: name) {
            try cluster.etcdctl(permission.etcdctlArguments(role: "keystone-member"))
        }
        try cluster.etcdctl(["user", "add", "machine-m", "--interactive=false"], input: Data("machine-password\n".utf8))
        try cluster.etcdctl(["user", "grant-role", "machine-m", "keystone-member"])

        admin.lock()
        let memberConfiguration = try EtcdConfiguration(url: cluster.url(name: name, query: "user=machine-m"), environment: ["KEYSTONE_ETCD_PASSWORD": "machine-password"])
        let member = try EtcdKeychain.open(memberConfiguration)
        try member.unlock(machineKey: key, machineID: "m")
        let engine = KeychainEngine(storage: member, configuration: member.engineConfiguration())
        #expect(try read(engine, "svc", "acct") == "s")
        try engine.add(genp("svc2", "acct", [Key.valueData: .data(Data("one".utf8))]))
        try engine.update(genp("svc2", "acct"), with: [Key.valueData: .data(Data("two".utf8))])
        #expect(try read(engine, "svc2", "acct") == "two")
        try engine.delete(genp("svc2", "acct"))
        // What it may not write: the key records, the bundles, the header, the TPM entries.
        let asMember = ["ETCDCTL_USER": "machine-m:machine-password"]
        for suffix in ["keys/master", "member/\(EtcdKeyspace.machineDigest("m"))", "meta", "machine/x"] {
            #expect(throws: EtcdTestCluster.Failure.self) {
                try cluster.etcdctl(["put", "keystone/v1/\(name)/\(suffix)", "x"], environment: asMember)
            }
        }
        // Nor may Keystone on it change them: enrolling needs the master key anyway.
        #expect(status { try member.enrollMachine("m", publicKey: key.publicKeyX963, groups: ["B"]) } == Status.interactionNotAllowed)
    }
}
#endif
