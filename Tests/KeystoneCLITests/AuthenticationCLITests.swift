import Foundation
import Testing

/// `keystone install-pam`, `keystone authenticate` and doctor's authentication report.
@Suite("keystone CLI: the PAM service and authentication")
struct AuthenticationCLITests {
    let box = Sandbox()

    /// A PAM directory of the test's own, with the distribution files the command looks for.
    func pamDirectory(_ files: [String: String]) throws -> String {
        let dir = box.root.appendingPathComponent("pam.d-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for (name, contents) in files { try contents.write(to: dir.appendingPathComponent(name), atomically: true, encoding: .utf8) }
        return dir.path
    }

    @Test("install-pam writes a keystone service including common-auth on Debian, mode 0644, and is idempotent")
    func installsOnDebian() throws {
        let dir = try pamDirectory(["common-auth": "auth required pam_unix.so\n", "other": "auth required pam_deny.so\n"])
        let first = try box.run("install-pam", "--pam-dir", dir)
        #expect(first.status == 0, "\(first.stderr)")
        let path = dir + "/keystone"
        let contents = try String(contentsOfFile: path, encoding: .utf8)
        #expect(contents.split(separator: "\n").contains("@include common-auth"))
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o644)
        let again = try box.run("install-pam", "--pam-dir", dir)
        #expect(again.status == 0)
        #expect(again.stdout.contains("already installed"))
        // No temporary file is left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["common-auth", "keystone", "other"])
    }

    @Test("install-pam includes system-auth on Fedora-style systems")
    func installsOnFedora() throws {
        let dir = try pamDirectory(["system-auth": "auth required pam_unix.so\n"])
        #expect(try box.run("install-pam", "--pam-dir", dir).status == 0)
        let contents = try String(contentsOfFile: dir + "/keystone", encoding: .utf8)
        #expect(contents.contains("system-auth"))
        #expect(!contents.contains("common-auth"))
    }

    @Test("install-pam leaves a different existing service alone unless --force")
    func keepsExistingService() throws {
        let dir = try pamDirectory(["common-auth": "auth required pam_unix.so\n", "keystone": "auth required pam_permit.so\n"])
        let refused = try box.run("install-pam", "--pam-dir", dir)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("--force"))
        #expect(try String(contentsOfFile: dir + "/keystone", encoding: .utf8) == "auth required pam_permit.so\n")
        let forced = try box.run("install-pam", "--pam-dir", dir, "--force")
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(try String(contentsOfFile: dir + "/keystone", encoding: .utf8).contains("@include common-auth"))
    }

    @Test("install-pam --print writes nothing; a directory with neither stack is refused with a clear message")
    func printsAndRefuses() throws {
        let dir = try pamDirectory(["common-auth": "auth required pam_unix.so\n"])
        let printed = try box.run("install-pam", "--pam-dir", dir, "--print")
        #expect(printed.status == 0)
        #expect(printed.stdout.contains("@include common-auth"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/keystone"))
        let empty = try pamDirectory([:])
        let refused = try box.run("install-pam", "--pam-dir", empty)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("common-auth") && refused.stderr.contains("system-auth"))
    }

    @Test("authenticate without a terminal ends with notInteractive and never waits",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/setsid"), "needs setsid (util-linux) to start a session without a terminal"))
    func authenticateWithoutTerminal() throws {
        // setsid: a new session with no controlling terminal, so /dev/tty cannot be opened: nobody to ask.
        let run = try Run.launch("/usr/bin/setsid", ["--wait", try #require(Sandbox.binary), "authenticate", "--policy", "password"],
                                 environment: box.environment, input: Data("not-read\n".utf8))
        #expect(run.status == 1)
        #expect(run.stderr.contains("notInteractive"))
        #expect(!run.stdout.contains("authenticated"))
        #expect(!run.stderr.contains("not-read"))
    }

    @Test("doctor reports the PAM service, the terminal and the fingerprint reader, and never fails on them")
    func doctorReportsAuthentication() throws {
        let run = try box.run("doctor", "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        let authentication = try #require(object["authentication"] as? [String: Any])
        let findings = try #require(authentication["findings"] as? [[String: Any]])
        let checks = Set(findings.compactMap { $0["check"] as? String })
        #expect(checks.isSuperset(of: ["PAM", "terminal", "fingerprint"]))
        #expect(findings.allSatisfy { ($0["severity"] as? String) != "problem" })
        let fingerprint = try #require(authentication["fingerprint"] as? [String: Any])
        #expect(["ready", "not-enrolled", "no-device", "no-daemon"].contains(fingerprint["state"] as? String ?? ""))
        #expect(run.status == 0, "\(run.stderr)")
    }
}
