import Foundation
import Testing

/// The tool's own settings and diagnostics: the settings files that choose the keychain, the keychain
/// `KEYSTONE_KEYCHAIN` names, and URLs holding a password in what the tool prints.
@Suite("keystone CLI: settings files private whatever the umask, credentials never shown, KEYSTONE_KEYCHAIN never created by mistake")
struct SettingsSafetyCLITests {
    /// Runs keystone under `umask 000` (through /bin/sh, which sets it and execs the tool).
    private func runUnderOpenUmask(_ box: Sandbox, _ arguments: [String], environment: [String: String]? = nil) throws -> Run {
        let binary = try #require(Sandbox.binary, "the keystone binary is built by `swift build`")
        return try Run.launch("/bin/sh", ["-c", "umask 000; exec \"$0\" \"$@\"", binary] + arguments,
                              environment: environment ?? box.environment)
    }

    private func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    private var configDirectory: (Sandbox) -> String { { $0.root.appendingPathComponent("config/keystone").path } }

    @Test("under umask 000, default-keychain -s and list-keychains -s write 0600 files in a 0700 directory")
    func settingsModesUnderOpenUmask() throws {
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let set = try runUnderOpenUmask(box, ["default-keychain", "-s", "work"])
        #expect(set.status == 0, "\(set.stderr)")
        let directory = configDirectory(box)
        #expect(try mode(directory) == 0o700, "the settings directory is created 0700")
        #expect(try mode(directory + "/default-keychain") == 0o600)
        let list = try runUnderOpenUmask(box, ["list-keychains", "-s", "work", "other"])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(try mode(directory + "/search-list") == 0o600)
        // Rewritten over an old loose file (as the earlier version left it under umask 000): 0600 again.
        try FileManager.default.setAttributes([.posixPermissions: 0o666], ofItemAtPath: directory + "/default-keychain")
        #expect(try runUnderOpenUmask(box, ["default-keychain", "-s", "again"]).status == 0)
        #expect(try mode(directory + "/default-keychain") == 0o600)
        #expect(try box.run("default-keychain").stdout.contains("again.keychain-db"))
        // No temporary file is left behind.
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix(".") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    @Test("a settings directory others can write is refused: nothing is written there, and what it holds is ignored with a warning")
    func looseDirectoryRefused() throws {
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let directory = configDirectory(box)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory)
        // What another user could have put there: the default keychain redirected to a keychain of theirs.
        let planted = box.root.appendingPathComponent("attacker.keychain-db").path
        try Data((planted + "\n").utf8).write(to: URL(fileURLWithPath: directory + "/default-keychain"))

        let shown = try box.run("default-keychain")
        #expect(shown.status == 0)
        #expect(!shown.stdout.contains("attacker"), "the planted setting is not used: \(shown.stdout)")
        #expect(shown.stdout.contains("login.keychain-db"))
        #expect(shown.stderr.contains("ignoring") && shown.stderr.contains("chmod 700"), "\(shown.stderr)")
        let add = try box.run("add-generic-password", "-s", "svc", "-a", "a", "-w", "not-for-the-attacker")
        #expect(add.status == 0, "\(add.stderr)")
        #expect(!FileManager.default.fileExists(atPath: planted), "the secret did not go to the planted keychain")

        let set = try box.run("default-keychain", "-s", "mine")
        #expect(set.status != 0, "writing into a directory others can write is refused")
        #expect(set.stderr.contains("chmod 700"), "\(set.stderr)")
        #expect(try String(contentsOfFile: directory + "/default-keychain", encoding: .utf8) == planted + "\n", "nothing was written")
        #expect(try box.run("list-keychains", "-s", "mine").status != 0)

        // doctor says so, with the fix.
        let doctor = try box.run("doctor")
        #expect(doctor.stdout.contains("settings: \(directory)") && doctor.stdout.contains("warning  directory:"), "\(doctor.stdout)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(try box.run("doctor", "--json").stdout.utf8)) as? [String: Any])
        #expect(((json["settings"] as? [String: Any])?["problem"] as? String)?.contains("0777") == true)
    }

    @Test("doctor never prints the password of an etcd URL, given as the argument or in KEYSTONE_KEYCHAIN, in text or JSON")
    func doctorRedactsURLPasswords() throws {
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let password = "Pa55-w0rd-in-url"
        for url in ["etcd://alice:\(password)@127.0.0.1:1/keychain", "etcds://127.0.0.1:1/keychain?user=alice&password=\(password)",
                    "etcd://alice:\(password)/with@127.0.0.1:1/keychain"] {
            var runs = [try box.run("doctor", url), try box.run("doctor", "--json", url)]
            var environment = box.environment
            environment["KEYSTONE_KEYCHAIN"] = url
            let binary = try #require(Sandbox.binary)
            runs.append(try Run.launch(binary, ["doctor"], environment: environment))
            runs.append(try Run.launch(binary, ["doctor", "--json"], environment: environment))
            runs.append(try Run.launch(binary, ["find-generic-password", "-s", "svc"], environment: environment))
            runs.append(try Run.launch(binary, ["add-generic-password", "-s", "svc", "-w", "x"], environment: environment))
            runs.append(try box.run("find-generic-password", "-s", "svc", url))
            runs.append(try box.run("create-keychain", "-p", "x", url))
            for run in runs {
                #expect(!run.signaled)
                #expect(!run.stdout.contains(password) && !run.stderr.contains(password),
                        "the password is shown: \(run.stdout.prefix(300)) \(run.stderr.prefix(300))")
            }
            #expect(runs[0].stdout.contains("***"), "the URL is shown masked: \(runs[0].stdout.prefix(300))")
        }
    }

    @Test("a URL holding a password is never written to a settings file, and the refusal does not show it")
    func settingsRefuseURLPasswords() throws {
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let password = "Pa55-w0rd-in-url"
        for verb in [["default-keychain", "-s"], ["list-keychains", "-s"]] {
            let run = try box.run(verb + ["etcd://alice:\(password)@127.0.0.1:2379/keychain"])
            #expect(run.status == 2, "\(run.stderr)")
            #expect(!run.stderr.contains(password) && !run.stdout.contains(password))
            #expect(run.stderr.contains("etcd://alice:***@127.0.0.1:2379/keychain"), "\(run.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: configDirectory(box) + "/default-keychain"))
        #expect(!FileManager.default.fileExists(atPath: configDirectory(box) + "/search-list"))
    }

    @Test("KEYSTONE_KEYCHAIN naming a file that does not exist is refused (errSecNoSuchKeychain, 50) and nothing is created; KEYSTONE_KEYCHAIN_CREATE=1 creates it")
    func missingKeychainVariable() throws {
        let box = Sandbox()
        defer { try? FileManager.default.removeItem(at: box.root) }
        let typo = box.root.appendingPathComponent("wrok.keychain-db").path
        var environment = box.environment
        environment["KEYSTONE_KEYCHAIN"] = typo
        let binary = try #require(Sandbox.binary)
        let add = try Run.launch(binary, ["add-generic-password", "-s", "svc", "-a", "a", "-w", "kept"], environment: environment)
        #expect(add.status == 50, "\(add.stderr)")
        #expect(add.stderr.contains("create-keychain") && add.stderr.contains("KEYSTONE_KEYCHAIN_CREATE=1"), "\(add.stderr)")
        let find = try Run.launch(binary, ["find-generic-password", "-s", "svc"], environment: environment)
        #expect(find.status == 50, "\(find.stderr)")
        #expect(!FileManager.default.fileExists(atPath: typo), "no keychain was created at the mistyped path")
        #expect(!FileManager.default.fileExists(atPath: box.loginPath), "nor anywhere else")

        environment["KEYSTONE_KEYCHAIN_CREATE"] = "1"
        let created = try Run.launch(binary, ["add-generic-password", "-s", "svc", "-a", "a", "-w", "kept"], environment: environment)
        #expect(created.status == 0, "\(created.stderr)")
        #expect(FileManager.default.fileExists(atPath: typo))
        environment["KEYSTONE_KEYCHAIN_CREATE"] = nil
        let again = try Run.launch(binary, ["find-generic-password", "-s", "svc", "-w"], environment: environment)
        #expect(again.stdout == "kept\n", "an existing keychain opens without the variable: \(again.stderr)")
    }
}
