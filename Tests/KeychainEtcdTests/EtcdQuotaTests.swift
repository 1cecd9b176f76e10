#if NIO && !canImport(Darwin)
import Foundation
import Testing
import EtcdCluster
import KeychainEngine
import KeychainEtcd

/// etcd's backend quota on a real 3-member cluster started with a small `--quota-backend-bytes`: the keychain fills
/// it, etcd raises NOSPACE, Keystone refuses with `errSecQuotaExceeded` and the fix, loses nothing, `doctor`'s
/// diagnosis sees it coming (80%) and sees the alarm, and the operator's recovery (raise the quota by restarting the
/// members, compact, defragment, disarm the alarm with etcdctl) makes writes work again.
@Suite("etcd keychain: NOSPACE (a real cluster with a small quota fills, refuses, loses nothing, recovers)",
       .enabled(if: etcdMissing == nil, etcdSkipReason))
struct EtcdQuotaTests {
    static let quota = 4 * 1024 * 1024

    @Test("a full cluster refuses with errSecQuotaExceeded naming the fix; every acknowledged item reads; doctor warns at 80% and reports NOSPACE; raise quota + compact + defrag + alarm disarm, and writes succeed again")
    func fillsRefusesRecovers() throws {
        let cluster = try EtcdTestCluster.start(.init(members: 3, quotaBackendBytes: Self.quota))
        defer { cluster.stop() }
        let configuration = try EtcdConfiguration(url: cluster.url(name: "quota"), environment: [:])
        let keychain = try EtcdKeychain.create(configuration, password: "pw")
        let engine = KeychainEngine(storage: keychain)

        // Before: far below the quota, doctor's diagnosis is quiet; told the quota is just above the size, it warns.
        let early = EtcdDiagnosis.diagnose(configuration, quotaBytes: Int64(Self.quota))
        let size = try #require(early.largestDBSize)
        #expect(!early.quotaWarning && !early.noSpaceAlarm, "\(size) bytes of \(Self.quota)")
        #expect(EtcdDiagnosis.diagnose(configuration, quotaBytes: Int64(Double(size) / 0.85)).quotaWarning)
        #expect(!EtcdDiagnosis.diagnose(configuration, quotaBytes: Int64(Double(size) / 0.75)).quotaWarning)

        // Fill: 200 KB secrets until etcd refuses.
        var acknowledged: [String: Data] = [:]
        var refusal: EngineError?
        for n in 0..<200 {
            // Sealed before it is sent: etcd stores ciphertext, whatever the bytes.
            let secret = Data(repeating: UInt8(truncatingIfNeeded: n), count: 200_000)
            let account = "fill-\(n)"
            if let failure = error({ try engine.add(genp("quota", account, [Key.valueData: .data(secret)])) }) {
                refusal = failure
                break
            }
            acknowledged[account] = secret
        }
        let refused = try #require(refusal, "the cluster never filled (\(acknowledged.count) items)")
        #expect(refused.status == Status.quotaExceeded, "\(refused.status): \(refused.reason)")
        for fix in ["--quota-backend-bytes", "etcdctl compact", "etcdctl defrag", "etcdctl alarm disarm"] {
            #expect(refused.reason.contains(fix), "the message names \(fix): \(refused.reason)")
        }
        #expect(acknowledged.count > 3)
        // Still refused: the alarm holds every write, small ones too.
        #expect(status { try engine.add(genp("quota", "small", [Key.valueData: .data(Data("x".utf8))])) } == Status.quotaExceeded)

        // Nothing lost: every acknowledged item reads, with its secret.
        for (account, secret) in acknowledged {
            #expect(try engine.copyMatching(genp("quota", account, [Key.returnData: .bool(true)]))?.data == secret, "\(account)")
        }
        #expect(status { _ = try engine.copyMatching(genp("quota", "small")) } == Status.itemNotFound)

        // doctor: the NOSPACE alarm, and the size past 80% of the quota.
        let full = EtcdDiagnosis.diagnose(configuration, quotaBytes: Int64(Self.quota))
        #expect(full.noSpaceAlarm)
        #expect(full.quotaWarning)

        // Recovery, as an operator: compact the history and defragment (both allowed under NOSPACE), disarm the
        // alarm (etcd's /health says false while an alarm is raised), then a larger quota, each member restarted.
        let status = try cluster.etcdctl(["endpoint", "status", "-w", "json"])
        let revision = try #require(status.range(of: #""revision":(\d+)"#, options: .regularExpression)
            .flatMap { Int(status[$0].split(separator: ":")[1]) })
        try cluster.etcdctl(["compact", String(revision)])
        try cluster.etcdctl(["defrag", "--cluster"])
        try cluster.etcdctl(["alarm", "disarm"])
        cluster.setQuotaBackendBytes(64 * 1024 * 1024)
        for member in 0..<3 {
            cluster.kill(member: member)
            try cluster.restart(member: member)
        }
        try cluster.waitUntilHealthy()
        #expect(!EtcdDiagnosis.diagnose(configuration, quotaBytes: 64 * 1024 * 1024).noSpaceAlarm)

        try engine.add(genp("quota", "after-recovery", [Key.valueData: .data(Data("works".utf8))]))
        #expect(try engine.copyMatching(genp("quota", "after-recovery", [Key.returnData: .bool(true)]))?.data == Data("works".utf8))
        for (account, secret) in acknowledged {
            #expect(try engine.copyMatching(genp("quota", account, [Key.returnData: .bool(true)]))?.data == secret, "\(account)")
        }
    }
}
#endif
#if NIO && !canImport(Darwin)
/// etcd's request limit (`--max-request-bytes`, 1.5 MiB by default) with the audit entry and the item's previous
/// version in the same request: what is refused is refused whole, with `errSecDataTooLarge`, and leaves no entry.
@Suite("etcd keychain: items larger than one request are refused with errSecDataTooLarge (versions and audit entry count)",
       .enabled(if: etcdMissing == nil, etcdSkipReason))
struct EtcdRequestSizeTests {
    @Test("a 1.6 MiB item is refused; a 1 MiB item is added, but updating it (the old version goes to history in the same request) is refused; nothing half-written, the audit log has the one add")
    func requestLimit() throws {
        let cluster = try EtcdTestCluster.shared()
        let configuration = try EtcdConfiguration(url: cluster.url(name: "size-\(UUID().uuidString.prefix(8))"), environment: [:])
        let keychain = try EtcdKeychain.create(configuration, password: "pw")
        let engine = KeychainEngine(storage: keychain)
        let huge = Data(repeating: 1, count: 1_600_000)
        #expect(status { try engine.add(genp("size", "huge", [Key.valueData: .data(huge)])) } == Status.dataTooLarge)
        #expect(status { _ = try engine.copyMatching(genp("size", "huge")) } == Status.itemNotFound)

        let first = Data(repeating: 2, count: 1_000_000)
        try engine.add(genp("size", "big", [Key.valueData: .data(first)]))
        let refused = error { try engine.update(genp("size", "big"), with: [Key.valueData: .data(Data(repeating: 3, count: 1_000_000))]) }
        #expect(refused?.status == Status.dataTooLarge, "\(String(describing: refused))")
        #expect(refused?.reason.contains("--max-request-bytes") == true)
        #expect(try engine.copyMatching(genp("size", "big", [Key.returnData: .bool(true)]))?.data == first)

        let log = try keychain.auditLog()
        #expect(log.isIntact, "\(log.problems)")
        #expect(log.entries.map { $0.events.map(\.operation) } == [["add"]])
    }
}
#endif
