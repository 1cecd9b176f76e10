import EtcdCluster
import Foundation
import KeychainEngine
import Testing

/// `keystone item-history`, `undelete-item`, `destroy-item` and `add-generic-password -U --if-version` on a real
/// etcd keychain (issue 30).
@Suite("keystone CLI: etcd item history, undelete, destroy, check-and-set",
       .enabled(if: EtcdTestCluster.unavailableReason == nil, Comment(rawValue: EtcdTestCluster.unavailableReason ?? "")))
struct EtcdHistoryCLITests {
    /// keystone in `box`, its rollback marks under the sandbox (XDG_STATE_HOME).
    static func run(_ box: Sandbox, _ arguments: [String], input: String? = nil) throws -> Run {
        var environment = box.environment
        for key in environment.keys where key.hasPrefix("KEYSTONE_") { environment[key] = nil }
        environment["XDG_STATE_HOME"] = box.root.appendingPathComponent("state").path
        return try Run.launch(try #require(Sandbox.binary, "the keystone binary is built by `swift build`"), arguments,
                              environment: environment, input: input.map { Data($0.utf8) })
    }

    static func exitCode(_ status: Int32) -> Int32 { Int32(UInt8(truncatingIfNeeded: status)) }

    @Test("versions listed and read back, a stale --if-version refused (errSecInvalidItemRef) and a current one applied, delete then undelete-item, destroy-item erases the item")
    func historyVerbs() throws {
        let cluster = try EtcdTestCluster.shared()
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let url = cluster.url(name: "cli-history-\(UUID().uuidString.prefix(8).lowercased())")
        let created = try Self.run(box, ["create-keychain", url], input: "history-pass\n")
        try #require(created.status == 0, "\(created.stderr)")
        let generic = ["-s", "svc", "-a", "alice"]
        let settings = try Self.run(box, ["history-settings", "--max-versions", "5", "--retention-days", "7", url])
        #expect(settings.status == 0, "\(settings.stderr)")
        #expect(settings.stdout.contains("versions kept per item: 5") && settings.stdout.contains("kept for: 7.0 days") && settings.stdout.contains("required: no"))
        #expect(try Self.run(box, ["history-settings", "--max-versions", "0", url]).status == Self.exitCode(Status.param))
        #expect(try Self.run(box, ["add-generic-password"] + generic + ["-w", "one", url]).status == 0)
        #expect(try Self.run(box, ["add-generic-password", "-U"] + generic + ["-w", "two", url]).status == 0)
        let listed = try Self.run(box, ["item-history"] + generic + [url])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains("version 1  counter") && listed.stdout.contains("version 2  counter"))
        #expect(listed.stdout.contains("(current)") && !listed.stdout.contains("one") && !listed.stdout.contains("two"))
        #expect(try Self.run(box, ["item-history"] + generic + ["--version", "1", "-w", url]).stdout == "one\n")

        let stale = try Self.run(box, ["add-generic-password", "-U", "--if-version", "1"] + generic + ["-w", "three", url])
        #expect(stale.status == Self.exitCode(Status.invalidItemRef), "\(stale.stderr)")
        #expect(stale.stderr.contains("check-and-set") && !stale.stderr.contains("three"))
        #expect(try Self.run(box, ["find-generic-password"] + generic + ["-w", url]).stdout == "two\n")
        #expect(try Self.run(box, ["history-settings", "--require-check-and-set", "on", url]).stdout.contains("required: yes"))
        #expect(try Self.run(box, ["add-generic-password", "-U"] + generic + ["-w", "three", url]).status == Self.exitCode(Status.dataNotModifiable))
        #expect(try Self.run(box, ["add-generic-password", "-U", "--if-version", "2"] + generic + ["-w", "three", url]).status == 0)
        #expect(try Self.run(box, ["find-generic-password"] + generic + ["-w", url]).stdout == "three\n")
        #expect(try Self.run(box, ["history-settings", "--require-check-and-set", "off", url]).stdout.contains("required: no"))

        // Audited reads: the next read appends an entry before it prints the secret.
        let auditedBefore = try Self.run(box, ["audit", "list", url]).stdout
        #expect(try Self.run(box, ["history-settings", "--audit-reads", "on", url]).stdout.contains("reads audited: yes"))
        #expect(try Self.run(box, ["find-generic-password"] + generic + ["-w", url]).stdout == "three\n")
        let auditedAfter = try Self.run(box, ["audit", "list", url]).stdout
        #expect(auditedAfter.components(separatedBy: " read ").count == auditedBefore.components(separatedBy: " read ").count + 1, "\(auditedAfter)")
        #expect(try Self.run(box, ["history-settings", "--audit-reads", "off", url]).stdout.contains("reads audited: no"))
        #expect(try Self.run(box, ["history-settings", "--audit-reads", "maybe", url]).status == 2)

        #expect(try Self.run(box, ["delete-generic-password"] + generic + [url]).status == 0)
        #expect(try Self.run(box, ["find-generic-password"] + generic + [url]).status == 44)
        #expect(try Self.run(box, ["item-history"] + generic + [url]).stdout.contains("deleted"))
        let undeleted = try Self.run(box, ["undelete-item"] + generic + [url])
        #expect(undeleted.status == 0 && undeleted.stdout.contains("version 4"), "\(undeleted.stdout) \(undeleted.stderr)")
        #expect(try Self.run(box, ["find-generic-password"] + generic + ["-w", url]).stdout == "three\n")
        #expect(try Self.run(box, ["undelete-item"] + generic + [url]).status == 45)  // not deleted: errSecDuplicateItem

        #expect(try Self.run(box, ["add-internet-password", "-s", "example.com", "-a", "bob", "-r", "htps", "-w", "pw", url]).status == 0)
        #expect(try Self.run(box, ["internet-item-history", "-s", "example.com", "-a", "bob", "-r", "htps", url]).stdout.contains("version 1"))
        #expect(try Self.run(box, ["destroy-internet-item", "-s", "example.com", "-a", "bob", "-r", "htps", url]).status == 0)

        #expect(try Self.run(box, ["destroy-item"] + generic + [url]).status == 0)
        #expect(try Self.run(box, ["item-history"] + generic + [url]).status == 44)
        #expect(try Self.run(box, ["find-generic-password"] + generic + [url]).status == 44)
        // A keychain file has no history: a clear refusal.
        let file = box.root.appendingPathComponent("plain.keychain-db").path
        #expect(try Self.run(box, ["create-keychain", "-p", "x", file]).status == 0)
        let refused = try Self.run(box, ["item-history"] + generic + [file])
        #expect(refused.status != 0 && refused.stderr.contains("etcd keychains only"))
    }
}
