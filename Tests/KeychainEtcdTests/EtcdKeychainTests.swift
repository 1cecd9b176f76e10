#if NIO && !canImport(Darwin)
import Foundation
import Testing
import EtcdCluster
import KeychainEngine
import KeychainEtcd

/// Why the etcd tests cannot run here (nil: they can).
let etcdMissing: String? = EtcdTestCluster.unavailableReason

/// The reason an etcd suite's trait gives when it skips: `.enabled(if: etcdMissing == nil, etcdSkipReason)`.
let etcdSkipReason = Comment(rawValue: etcdMissing ?? "etcd, etcdctl, openssl and curl are installed")

func genp(_ service: String, _ account: String? = nil, _ extra: KeychainQuery = [:]) -> KeychainQuery {
    var query: KeychainQuery = [Key.class: .string("genp"), Key.service: .string(service)]
    if let account { query[Key.account] = .string(account) }
    return query.merging(extra) { $1 }
}

func status(_ body: () throws -> Void) -> Int32 {
    do { try body(); return 0 } catch let error as EngineError { return error.status } catch { return Int32.min }
}

func error(_ body: () throws -> Void) -> EngineError? {
    do { try body(); return nil } catch let error as EngineError { return error } catch { return EngineError(Status.internalError, "\(error)") }
}

/// Every file under `directory`, as bytes.
func files(under directory: URL) -> [(path: String, bytes: Data)] {
    guard let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey]) else { return [] }
    var all: [(String, Data)] = []
    for case let url as URL in walker {
        if (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true, let bytes = try? Data(contentsOf: url) {
            all.append((url.path, bytes))
        }
    }
    return all
}

/// Runs `body` on `count` threads of their own (blocking calls never run on Swift's cooperative pool), released together.
func onThreads<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
    let results = Locked<[Int: T]>([:])
    let start = DispatchSemaphore(value: 0)
    let done = DispatchGroup()
    for index in 0..<count {
        done.enter()
        Thread.detachNewThread {
            start.wait()
            let value = body(index)
            results.withLock { $0[index] = value }
            done.leave()
        }
    }
    for _ in 0..<count { start.signal() }
    done.wait()
    return (0..<count).map { results.current[$0]! }
}

@Suite("etcd keychain: SecItem rules across machines", .enabled(if: etcdMissing == nil, etcdSkipReason))
struct EtcdKeychainSemanticsTests {
    let cluster: EtcdTestCluster
    let name = "semantics-\(UUID().uuidString)"

    init() throws { cluster = try EtcdTestCluster.shared() }

    /// A "machine": its own client on the endpoints given, its own engine.
    func machine(_ members: [Int], create: Bool = false) throws -> (EtcdKeychain, KeychainEngine) {
        let configuration = try EtcdConfiguration(url: cluster.url(name: name, members: members), environment: [:])
        let keychain = create ? try EtcdKeychain.create(configuration, password: "fleet-password") : try EtcdKeychain.open(configuration)
        if keychain.lockState != .unlocked { try keychain.unlock(password: "fleet-password") }
        return (keychain, KeychainEngine(storage: keychain))
    }

    @Test("two machines adding the same primary key at once: exactly one errSecSuccess, the other errSecDuplicateItem")
    func racingAdds() throws {
        let (_, a) = try machine([0], create: true)
        let (_, b) = try machine([2])
        let engines = [a, b]
        for round in 0..<12 {
            let outcomes = onThreads(2) { index in
                status { try engines[index].add(genp("race", "account-\(round)", [Key.valueData: .data(Data("from-\(index)".utf8))])) }
            }
            #expect(outcomes.sorted() == [Status.duplicateItem, Status.success].sorted(), "round \(round): \(outcomes)")
            // The item holds the winner's secret, on both machines.
            let winner = outcomes.firstIndex(of: Status.success) ?? -1
            for engine in engines {
                let data = try engine.copyMatching(genp("race", "account-\(round)", [Key.returnData: .bool(true)]))?.data
                #expect(data == Data("from-\(winner)".utf8))
            }
        }
        let all = try a.copyMatching(genp("race", nil, [Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true)]))?.array
        #expect(all?.count == 12)
    }

    @Test("machines adding different items at once: every add lands, once, with a row id of its own")
    func concurrentDistinctAdds() throws {
        let (ka, a) = try machine([0], create: true)
        let (_, b) = try machine([1])
        let (_, c) = try machine([2])
        let engines = [a, b, c, a]
        let failures = onThreads(4) { index -> [Int32] in
            (0..<15).compactMap { n in
                let code = status { try engines[index].add(genp("distinct", "m\(index)-\(n)", [Key.valueData: .data(Data("\(index)-\(n)".utf8))])) }
                return code == Status.success ? nil : code
            }
        }
        #expect(failures.allSatisfy { $0.isEmpty }, "\(failures)")
        let rows = try ka.read { try $0.candidates(in: .genericPassword, matching: [:]) }
        let ids = rows.compactMap { if case .item(let item) = $0 { item.rowID } else { nil } }
        #expect(ids.count == 60)
        #expect(Set(ids).count == 60)
        #expect(ids == ids.sorted())
    }

    @Test("a write acknowledged on one machine is seen by the next read on another (no stale cache)")
    func readYourFleetsWrites() throws {
        let (_, a) = try machine([0], create: true)
        let (_, b) = try machine([1])
        #expect(status { _ = try b.copyMatching(genp("fresh", "x")) } == Status.itemNotFound)
        try a.add(genp("fresh", "x", [Key.valueData: .data(Data("v1".utf8))]))
        #expect(try b.copyMatching(genp("fresh", "x", [Key.returnData: .bool(true)]))?.data == Data("v1".utf8))
        for version in 2...6 {
            try a.update(genp("fresh", "x"), with: [Key.valueData: .data(Data("v\(version)".utf8))])
            #expect(try b.copyMatching(genp("fresh", "x", [Key.returnData: .bool(true)]))?.data == Data("v\(version)".utf8))
        }
        try b.delete(genp("fresh", "x"))
        #expect(status { _ = try a.copyMatching(genp("fresh", "x")) } == Status.itemNotFound)
    }

    @Test("update and delete are compare-and-swap: concurrent increments from two machines lose none")
    func noLostUpdates() throws {
        let (ka, _) = try machine([0], create: true)
        let (kb, _) = try machine([1])
        let id = try ka.write { try $0.insert(StoredItem(itemClass: .genericPassword, attributes: [
            Key.service: .string("counter"), Key.account: .string("n"), Key.accessGroup: .string("g"),
            Key.synchronizable: .bool(false), Key.accessible: .string("ak"),
        ], secret: Data("0".utf8))) }
        let keychains = [ka, kb, ka, kb]
        _ = onThreads(4) { index in
            for _ in 0..<10 {
                try? keychains[index].write { tx in
                    guard case .item(var item)? = try tx.candidate(in: .genericPassword, rowID: id) else { throw EngineError.itemNotFound }
                    item.secret = Data(String((Int(String(decoding: item.secret ?? Data(), as: UTF8.self)) ?? -1000) + 1).utf8)
                    try tx.replace(item)
                }
            }
            return 0
        }
        guard case .item(let item)? = try kb.read({ try $0.candidate(in: .genericPassword, rowID: id) }) else {
            Issue.record("the counter is gone"); return
        }
        #expect(item.secret == Data("40".utf8))
    }

    @Test("a match-all search is one snapshot: an item moved between accounts is seen exactly once")
    func snapshotSearch() throws {
        let (_, writer) = try machine([0], create: true)
        let (_, reader) = try machine([1])
        try writer.add(genp("snap", "left", [Key.valueData: .data(Data("s".utf8))]))
        try writer.add(genp("snap", "fixed"))
        let seen = onThreads(2) { index -> [Int] in
            var counts: [Int] = []
            for step in 0..<30 {
                if index == 0 {
                    let (from, to) = step % 2 == 0 ? ("left", "right") : ("right", "left")
                    try? writer.update(genp("snap", from), with: [Key.account: .string(to)])
                } else {
                    let all = try? reader.copyMatching(genp("snap", nil, [Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true)]))
                    counts.append(all?.array?.count ?? -1)
                }
            }
            return counts
        }
        #expect(seen[1].allSatisfy { $0 == 2 }, "\(seen[1])")
    }

    @Test("a persistent reference finds its item on another machine, and a deleted one finds nothing")
    func persistentReference() throws {
        let (_, a) = try machine([0], create: true)
        let (_, b) = try machine([2])
        for account in ["p", "q", "r"] { try a.add(genp("refs", account, [Key.valueData: .data(Data(account.utf8))])) }
        let ref = try #require(try a.copyMatching(genp("refs", "q", [Key.returnPersistentRef: .bool(true)]))?.data)
        #expect(try b.copyMatching([Key.valuePersistentRef: .data(ref), Key.returnData: .bool(true)])?.data == Data("q".utf8))
        try a.delete(genp("refs", "q"))
        #expect(status { _ = try b.copyMatching([Key.valuePersistentRef: .data(ref), Key.returnData: .bool(true)]) } == Status.itemNotFound)
    }
}

@Suite("etcd keychain: end-to-end encryption and tampering", .enabled(if: etcdMissing == nil, etcdSkipReason))
struct EtcdKeychainSecrecyTests {
    @Test("etcd's data directories hold no secret, service, account or label, in the database or the log")
    func nothingInTheClear() throws {
        let cluster = try EtcdTestCluster.start(.init(members: 3))
        defer { cluster.stop() }
        let keychain = try EtcdKeychain.create(EtcdConfiguration(url: cluster.url(name: "canary"), environment: [:]), password: "canary-password")
        let engine = KeychainEngine(storage: keychain)
        let canaries = ["CanarySecret-7f3a9", "CanaryService-51c2", "CanaryAccount-e8d0", "CanaryLabel-2b6f", "CanaryServer-9a41"]
        try engine.add(genp(canaries[1], canaries[2], [Key.valueData: .data(Data(canaries[0].utf8)), Key.label: .string(canaries[3])]))
        try engine.add([Key.class: .string("inet"), Key.server: .string(canaries[4] + ".example"), Key.account: .string(canaries[2]),
                        Key.valueData: .data(Data(canaries[0].utf8))])
        try engine.update(genp(canaries[1], canaries[2]), with: [Key.valueData: .data(Data((canaries[0] + "-2").utf8))])
        #expect(try engine.copyMatching(genp(canaries[1], canaries[2], [Key.returnData: .bool(true)]))?.data == Data((canaries[0] + "-2").utf8))
        let stored = cluster.dataDirectories.flatMap { files(under: $0) }
        #expect(!stored.isEmpty)
        for canary in canaries + ["canary-password"] {
            let hits = stored.filter { $0.bytes.range(of: Data(canary.utf8)) != nil }.map(\.path)
            #expect(hits.isEmpty, "\(canary) found in \(hits)")
        }
    }

    @Test("a row copied onto another item's key, or edited, reads as errSecDecode and never as the other item")
    func tamperedRows() throws {
        let cluster = try EtcdTestCluster.shared()
        let name = "tamper-\(UUID().uuidString)"
        let configuration = try EtcdConfiguration(url: cluster.url(name: name), environment: [:])
        let keychain = try EtcdKeychain.create(configuration, password: "pw")
        let engine = KeychainEngine(storage: keychain)
        try engine.add(genp("t", "alice", [Key.valueData: .data(Data("alice-secret".utf8))]))
        try engine.add(genp("t", "bob", [Key.valueData: .data(Data("bob-secret".utf8))]))
        try engine.add(genp("t", "carol", [Key.valueData: .data(Data("carol-secret".utf8))]))
        // An attacker with write access to etcd (but not the password) copies one sealed row onto another's key,
        // and flips one byte of a third.
        let attacker = try EtcdClient(configuration: configuration)
        defer { attacker.shutdown() }
        let rows = try attacker.range(prefix: Data("keystone/v1/\(name)/k/genp/".utf8)).kvs
        #expect(rows.count == 3)
        _ = try attacker.put(rows[1].key, rows[0].value)
        var edited = rows[2].value
        edited[edited.count - 5] ^= 0x01
        _ = try attacker.put(rows[2].key, edited)
        var outcomes: [String: Int32] = [:]
        for account in ["alice", "bob", "carol"] {
            do {
                let data = try engine.copyMatching(genp("t", account, [Key.returnData: .bool(true)]))?.data
                #expect(data == Data("\(account)-secret".utf8), "\(account) read another item's secret")
                outcomes[account] = 0
            } catch let error as EngineError {
                outcomes[account] = error.status
            }
        }
        #expect(outcomes.values.filter { $0 == Status.decode }.count == 2, "\(outcomes)")
        #expect(outcomes.values.filter { $0 == 0 }.count == 1, "\(outcomes)")
        // A search over the class returns the intact item and reports the damaged ones as such, never as items.
        let all = try keychain.read { try $0.candidates(in: .genericPassword, matching: [:]) }
        let damaged = all.filter { if case .unreadable(_, _, let e) = $0 { return e.status == Status.decode } else { return false } }
        #expect(damaged.count == 2 && all.count == 3)
    }
}
#endif
