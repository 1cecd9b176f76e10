#if NIO && !canImport(Darwin)
import Foundation
import Testing
import EtcdCluster
import KeychainEngine
@testable import KeychainEtcd

/// A write's first attempt takes the rows this process last read under the item's identity as a guess
/// (EtcdPrefixCache): an update after a read is one round trip. A guess is only ever verified, never trusted.
@Suite("etcd keychain: an update after a read is one round trip, and a stale guess never writes (a real cluster)",
       .enabled(if: etcdMissing == nil, etcdSkipReason))
struct EtcdPrefixCacheTests {
    let cluster: EtcdTestCluster
    let name: String

    init() throws {
        cluster = try EtcdTestCluster.shared()
        name = "prefix-cache-\(UUID().uuidString.prefix(8))"
    }

    /// Machines of the keychain (their own clients and caches); the first creates it.
    func machines(_ count: Int = 2) throws -> [(keychain: EtcdKeychain, engine: KeychainEngine)] {
        var out: [(EtcdKeychain, KeychainEngine)] = []
        for index in 0..<count {
            let configuration = try EtcdConfiguration(url: cluster.url(name: name, members: [index % 3]), environment: [:])
            let keychain = index == 0 ? try EtcdKeychain.create(configuration, password: "pw") : try EtcdKeychain.open(configuration)
            if keychain.lockState != .unlocked { try keychain.unlock(password: "pw") }
            out.append((keychain, KeychainEngine(storage: keychain)))
        }
        return out
    }

    func secret(_ engine: KeychainEngine, _ account: String, group: String? = nil) throws -> String? {
        var query = genp("svc", account, [Key.returnData: .bool(true)])
        if let group { query[Key.accessGroup] = .string(group) }
        return try engine.copyMatching(query)?.data.map { String(decoding: $0, as: UTF8.self) }
    }

    /// The requests `body` sent to etcd.
    func requests(_ keychain: EtcdKeychain, _ body: () throws -> Void) rethrows -> Int {
        let before = keychain.client.requestsSent
        try body()
        return keychain.client.requestsSent - before
    }

    @Test("after a read, an update (by service and account, or naming the access group too) and a check-and-set each send one request, the commit; with nothing read before, two")
    func oneRoundTrip() throws {
        let (keychain, engine) = try machines()[0]
        try engine.add(genp("svc", "a", [Key.valueData: .data(Data("v1".utf8))]))
        try engine.add(genp("svc", "b", [Key.valueData: .data(Data("w1".utf8))]))
        keychain.lock()   // drops what was read
        try keychain.unlock(password: "pw")
        #expect(try requests(keychain) { try engine.update(genp("svc", "a"), with: [Key.valueData: .data(Data("v2".utf8))]) } == 2)
        #expect(try requests(keychain) { try engine.update(genp("svc", "a"), with: [Key.valueData: .data(Data("v3".utf8))]) } == 1)
        _ = try secret(engine, "b")
        let attributes: [String: AttributeValue] = [Key.service: .string("svc"), Key.account: .string("b")]
        let version = try keychain.currentVersion(of: .genericPassword, matching: attributes)
        #expect(try requests(keychain) {
            try keychain.withCheckAndSet(expectedVersion: version) { try engine.update(genp("svc", "b"), with: [Key.valueData: .data(Data("w2".utf8))]) }
        } == 1)
        #expect(try secret(engine, "a") == "v3" && secret(engine, "b") == "w2")
        #expect(try keychain.versions(of: .genericPassword, matching: attributes).map(\.version) == [1, 2])

        // Naming the access group too (the whole primary key: one key looked up), after a read of the identity.
        try engine.add(genp("svc", "c", [Key.valueData: .data(Data("x1".utf8)), Key.accessGroup: .string("g")]))
        _ = try secret(engine, "c")
        #expect(try requests(keychain) {
            try engine.update(genp("svc", "c", [Key.accessGroup: .string("g")]), with: [Key.valueData: .data(Data("x2".utf8))])
        } == 1)
        #expect(try secret(engine, "c", group: "g") == "x2")
    }

    // In the two tests below machine A has written nothing before its update, so it has no HEAD of its own to guess:
    // it reads the current HEAD, and only the guess's own compares can tell that its rows are stale.

    @Test("another machine updated the item after this one read it: a check-and-set from the version read fails with errSecInvalidItemRef and changes nothing; a plain update applies on top")
    func staleGuessNeverWrites() throws {
        let both = try machines()
        let (a, b) = (both[0], both[1])
        try b.engine.add(genp("svc", "item", [Key.valueData: .data(Data("b1".utf8))]))
        #expect(try secret(a.engine, "item") == "b1")
        let attributes: [String: AttributeValue] = [Key.service: .string("svc"), Key.account: .string("item")]
        let versionRead = try a.keychain.currentVersion(of: .genericPassword, matching: attributes)
        try b.engine.update(genp("svc", "item"), with: [Key.valueData: .data(Data("b2".utf8))])

        #expect(throws: EtcdVersionConflict.self) {
            try a.keychain.withCheckAndSet(expectedVersion: versionRead) {
                try a.engine.update(genp("svc", "item"), with: [Key.valueData: .data(Data("a-stale".utf8))])
            }
        }
        #expect(try secret(b.engine, "item") == "b2")
        try a.engine.update(genp("svc", "item"), with: [Key.valueData: .data(Data("a3".utf8))])
        #expect(try secret(b.engine, "item") == "a3")
        #expect(try b.keychain.versions(of: .genericPassword, matching: attributes).map(\.version) == [1, 2, 3])
        // Deleted elsewhere after this machine read it: the update finds nothing, and nothing comes back.
        _ = try secret(a.engine, "item")
        try b.engine.delete(genp("svc", "item"))
        #expect(status { try a.engine.update(genp("svc", "item"), with: [Key.valueData: .data(Data("a4".utf8))]) } == Status.itemNotFound)
        #expect(status { _ = try secret(b.engine, "item") } == Status.itemNotFound)
    }

    @Test("an item of the same service and account added in another access group after the read is updated too: the guess covers the identity's creations")
    func creationsAreSeen() throws {
        let all = try machines(3)
        let (a, b, c) = (all[0], all[1], all[2])
        try b.engine.add(genp("svc", "shared", [Key.valueData: .data(Data("one".utf8)), Key.accessGroup: .string("group-1")]))
        #expect(try secret(a.engine, "shared") == "one")
        try b.engine.add(genp("svc", "shared", [Key.valueData: .data(Data("two".utf8)), Key.accessGroup: .string("group-2")]))
        try a.engine.update(genp("svc", "shared"), with: [Key.valueData: .data(Data("both".utf8))])
        #expect(try secret(b.engine, "shared", group: "group-1") == "both")
        #expect(try secret(b.engine, "shared", group: "group-2") == "both")

        // Deleted before the read (a tombstone row, the same key), added again after it: updated too (by machine C,
        // which, like A before, has written nothing).
        try b.engine.delete(genp("svc", "shared", [Key.accessGroup: .string("group-2")]))
        #expect(try secret(c.engine, "shared") == "both")
        try b.engine.add(genp("svc", "shared", [Key.valueData: .data(Data("three".utf8)), Key.accessGroup: .string("group-2")]))
        try c.engine.update(genp("svc", "shared"), with: [Key.valueData: .data(Data("all".utf8))])
        #expect(try secret(b.engine, "shared", group: "group-1") == "all")
        #expect(try secret(b.engine, "shared", group: "group-2") == "all")
    }
}
#endif
