import EtcdCluster
import Foundation
import Testing

/// `keystone audit` on an etcd keychain of the shared real cluster: the log printed, verified, tampered with by
/// etcdctl (verify exits 1 naming the entry), trimmed.
@Suite("keystone CLI: etcd audit log (audit, audit verify, audit trim)",
       .enabled(if: EtcdTestCluster.unavailableReason == nil, Comment(rawValue: EtcdTestCluster.unavailableReason ?? "")))
struct EtcdAuditCLITests {
    @Test("audit prints one line per change (no name, no secret); verify says intact; after etcdctl removes entry 2 verify exits 1 naming it, and trim refuses the tampered log")
    func auditVerifyTamper() throws {
        let cluster = try EtcdTestCluster.shared()
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let name = EtcdCLITests.uniqueName("audit")
        let url = cluster.url(name: name)
        try EtcdCLITests.create(box, url)
        #expect(try EtcdCLITests.run(box, ["add-generic-password", "-s", "audit-svc", "-a", "alice", "-w", "audit-secret-1", url]).status == 0)
        #expect(try EtcdCLITests.run(box, ["add-generic-password", "-U", "-s", "audit-svc", "-a", "alice", "-w", "audit-secret-2", url]).status == 0)
        #expect(try EtcdCLITests.run(box, ["add-generic-password", "-s", "audit-svc", "-a", "bob", "-w", "audit-secret-3", url]).status == 0)
        #expect(try EtcdCLITests.run(box, ["delete-generic-password", "-s", "audit-svc", "-a", "bob", url]).status == 0)

        let list = try EtcdCLITests.run(box, ["audit", url])
        #expect(list.status == 0, "\(list.stderr)")
        let lines = list.stdout.split(separator: "\n")
        #expect(lines.count == 4, "\(list.stdout)")
        for (line, operation) in zip(lines, ["add genp", "update genp", "add genp", "delete genp"]) {
            #expect(line.contains(operation), "\(line)")
            #expect(line.contains("uid \(getuid())"))
        }
        for word in ["audit-svc", "alice", "bob", "audit-secret"] {
            #expect(!list.stdout.contains(word) && !list.stderr.contains(word), "\(word) printed")
        }
        let intact = try EtcdCLITests.run(box, ["audit", "verify", url])
        #expect(intact.status == 0, "\(intact.stdout) \(intact.stderr)")
        #expect(intact.stdout.hasPrefix("intact: 4 entries"))

        try cluster.etcdctl(["del", "keystone/v1/\(name)/audit/0000000000000002"])
        let tampered = try EtcdCLITests.run(box, ["audit", "verify", url])
        #expect(tampered.status == 1)
        #expect(tampered.stdout.contains("problem: removed: entry 2 was removed"), "\(tampered.stdout)")
        #expect(tampered.stderr.contains("tampered with"))
        let trim = try EtcdCLITests.run(box, ["audit", "trim", "--keep", "1", url])
        #expect(trim.status != 0)
        #expect(try EtcdCLITests.run(box, ["audit", "verify", "/tmp/not-etcd.keychain-db"]).status == 2)
        #expect(try EtcdCLITests.run(box, ["delete-keychain", url]).status == 0)
    }

    /// `keystone doctor --json URL` with `KEYSTONE_ETCD_QUOTA_BYTES`: the quota finding's severity.
    static func quotaFinding(_ box: Sandbox, _ url: String, quota: String) throws -> (severity: String, detail: String)? {
        var environment = box.environment
        for key in environment.keys where key.hasPrefix("KEYSTONE_") { environment[key] = nil }
        environment["KEYSTONE_ETCD_QUOTA_BYTES"] = quota
        let run = try Run.launch(try #require(Sandbox.binary), ["doctor", "--json", url], environment: environment)
        let object = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
        let etcd = object?["etcd"] as? [String: Any]
        let findings = etcd?["findings"] as? [[String: Any]] ?? []
        guard let quota = findings.first(where: { $0["check"] as? String == "quota" }) else { return nil }
        return (quota["severity"] as? String ?? "", quota["detail"] as? String ?? "")
    }

    @Test("doctor compares the largest member database with KEYSTONE_ETCD_QUOTA_BYTES: a warning from 80%, ok below")
    func doctorQuota() throws {
        let cluster = try EtcdTestCluster.shared()
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let url = cluster.url(name: EtcdCLITests.uniqueName("quota"))
        try EtcdCLITests.create(box, url)
        let near = try #require(try Self.quotaFinding(box, url, quota: "4096"), "doctor --json has a quota finding")
        #expect(near.severity == "warning", "\(near)")
        #expect(near.detail.contains("of the quota 4.0 KiB (KEYSTONE_ETCD_QUOTA_BYTES)"), "\(near.detail)")
        let far = try #require(try Self.quotaFinding(box, url, quota: String(1 << 40)))
        #expect(far.severity == "ok", "\(far)")
        #expect(try EtcdCLITests.run(box, ["delete-keychain", url]).status == 0)
    }
}
