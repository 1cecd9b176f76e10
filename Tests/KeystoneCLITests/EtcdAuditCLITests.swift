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
}
