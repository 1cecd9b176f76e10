#if NIO && !canImport(Darwin)
import Foundation
import Testing
import EtcdCluster
import KeychainEngine
@testable import KeychainEtcd

/// A commit whose answer is lost while its request waits, unread, at a paused member: etcd may apply it when the
/// member resumes, after the writer concluded anything. The writer's resolution must make that impossible or see it.
@Suite("etcd keychain: a commit whose answer was lost (a real cluster, one member paused)",
       .enabled(if: etcdMissing == nil, etcdSkipReason), .timeLimit(.minutes(10)))
struct EtcdLostAnswerTests {
    @Test("a check-and-set whose answer was lost at a paused member is fenced before it is tried again: reported done once, applied once, the delayed request never applies")
    func delayedRequestNeverApplies() throws {
        let cluster = try EtcdTestCluster.start(.init(members: 3))
        defer { cluster.stop() }
        let name = "lost-answer"
        // The writer talks to member 0 first (its reads make it the member that answered last); a 4-second deadline.
        let keychain = try EtcdKeychain.create(EtcdConfiguration(url: cluster.url(name: name, members: [0, 1, 2], query: "timeout=4"), environment: [:]),
                                               password: "pw")
        let engine = KeychainEngine(storage: keychain)
        try engine.add(genp("fenced", "item", [Key.valueData: .data(Data("v1".utf8))]))
        let attributes: [String: AttributeValue] = [Key.service: .string("fenced"), Key.account: .string("item")]
        #expect(try keychain.currentVersion(of: .genericPassword, matching: attributes) == 1)
        // An observer on the other members: HEAD's mod revision before the update.
        let observer = try EtcdClient(configuration: EtcdConfiguration(url: cluster.url(name: name, members: [1, 2], query: "timeout=4"), environment: [:]))
        defer { observer.shutdown() }
        let headBefore = try #require(try observer.range(keychain.keyspace.head).kvs.first?.modRevision)

        let runs = Locked(0)
        defer { cluster.resume(member: 0) }
        try EtcdKeychain.withCheckAndSet(expectedVersion: 1) {
            try keychain.write { tx in
                let run = runs.withLock { $0 += 1; return $0 }
                if run == 2 {
                    // The first commit got no answer. Before this attempt reads anything, HEAD moved (the fence): the
                    // request waiting at member 0, which compares HEAD's old mod revision, can no longer apply.
                    let headNow = try observer.range(keychain.keyspace.head).kvs.first?.modRevision
                    #expect(headNow != nil && headNow != headBefore, "HEAD did not move before the second attempt: the lost commit was not fenced")
                    cluster.resume(member: 0)
                }
                guard case .item(var item)? = try tx.candidates(in: .genericPassword, matching: attributes).first else {
                    throw EngineError.itemNotFound
                }
                item.secret = Data("v2".utf8)
                try tx.replace(item)
                // The first attempt's commit is sent to member 0, now paused: its answer never comes.
                if run == 1 { cluster.pause(member: 0) }
            }
        }
        #expect(runs.current == 2, "the lost commit was not resolved as not applied, then done again (\(runs.current) runs)")
        try cluster.waitUntilHealthy()
        // Member 0 read its socket (the delayed request reached etcd's log, or was refused) before the checks.
        if cluster.pendingInput(member: 0) != nil {
            var drained = false
            for _ in 0..<600 where !drained {
                drained = (cluster.pendingInput(member: 0) ?? 0) < EtcdTestCluster.requestFloor
                if !drained { usleep(100_000) }
            }
            #expect(drained, "member 0 never read the request it was sent")
        }
        let history = try keychain.versions(of: .genericPassword, matching: attributes)
        #expect(history.map(\.version) == [1, 2], "the update was applied \(history.count - 1) times")
        #expect(try engine.copyMatching(genp("fenced", "item", [Key.returnData: .bool(true)]))?.data == Data("v2".utf8))
        let log = try keychain.auditLog()
        #expect(log.isIntact, "\(log.problems)")
        #expect(log.entries.flatMap(\.events).map(\.operation) == ["add", "update"])
    }
}
#endif
