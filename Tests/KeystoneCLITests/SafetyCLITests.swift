import Foundation
import Testing

@Suite("keystone CLI: refusing what is unsafe, saying why")
struct SafetyCLITests {
    func keychain(_ box: Sandbox, _ name: String = "k.keychain-db") -> String {
        box.root.appendingPathComponent("data/keystone/\(name)").path
    }

    @Test("delete-keychain deletes only a keychain: any other file is refused and left as it is")
    func deleteOnlyKeychains() throws {
        let box = Sandbox()
        try FileManager.default.createDirectory(at: box.root, withIntermediateDirectories: true)
        let notes = box.root.appendingPathComponent("notes.txt").path
        try Data("precious".utf8).write(to: URL(fileURLWithPath: notes))
        let refused = try box.run("delete-keychain", notes)
        #expect(refused.status == Int32(UInt8(truncatingIfNeeded: -25295)))
        #expect(refused.stderr.contains(notes) && refused.stderr.contains("not a Keystone keychain"))
        #expect(FileManager.default.contents(atPath: notes) == Data("precious".utf8))
        #expect(try box.run("delete-keychain", box.root.appendingPathComponent("missing.keychain-db").path).status == 50)  // errSecNoSuchKeychain
    }

    @Test("create-keychain with standard input at its end fails and creates nothing; an empty password only when asked")
    func createAtEndOfInput() throws {
        let box = Sandbox()
        let atEOF = try box.run("create-keychain", "k")
        #expect(atEOF.status == 2)
        #expect(atEOF.stderr.contains("standard input ended") && atEOF.stderr.contains("-p ''"))
        #expect(!FileManager.default.fileExists(atPath: keychain(box)))
        // From standard input: the keychain has that password and starts locked once locked.
        #expect(try box.run("create-keychain", "k", input: "pipe-pw\n").status == 0)
        #expect(try box.run("add-generic-password", "-a", "x", "-s", "y", keychain(box), input: "s\n").status == 0)
        #expect(try box.run("lock-keychain", "k").status == 0)
        #expect(try box.run("find-generic-password", "-a", "x", "-s", "y", keychain(box)).status == 36)  // locked
        #expect(try box.run("unlock-keychain", "k").status == 2)  // end of input again
        #expect(try box.run("unlock-keychain", "k", input: "wrong\n").status == 51)
        #expect(try box.run("unlock-keychain", "k", input: "pipe-pw\n").status == 0)
        // Explicitly empty.
        #expect(try box.run("create-keychain", "-p", "", "empty").status == 0)
        let doctor = try box.run("doctor", "empty")
        #expect(doctor.stdout.contains("empty password"))
    }

    @Test("a keychain open to others is refused, naming the file, its mode and the fix")
    func looseKeychain() throws {
        let box = Sandbox()
        #expect(try box.run("create-keychain", "k", input: "pw\n").status == 0)
        chmod(keychain(box), 0o666)
        let refused = try box.run("find-generic-password", "-a", "x", "-s", "y", keychain(box))
        #expect(refused.status != 0)
        #expect(refused.stderr.contains(keychain(box)) && refused.stderr.contains("0666") && refused.stderr.contains("chmod 600"))
        let doctor = try box.run("doctor", keychain(box))
        #expect(doctor.status == 1)
        #expect(doctor.stdout.contains("PROBLEM") && doctor.stdout.contains("chmod 600"))
        chmod(keychain(box), 0o600)
        #expect(try box.run("doctor", keychain(box)).status == 0)
    }

    @Test("dump-keychain never hides a damaged item silently")
    func dumpWarnsAboutDamage() throws {
        let box = Sandbox()
        #expect(try box.run("create-keychain", "-p", "", "k").status == 0)
        for account in ["a", "b"] {
            #expect(try box.run("add-generic-password", "-a", account, "-s", "svc", keychain(box), input: "secret-\(account)\n").status == 0)
        }
        // Damage row 2's sealed payload, as an attacker or a bad disk could: one byte inverted (setting it to a
        // fixed value would change nothing when the random ciphertext already held that value).
        let sqlite = Process()
        sqlite.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        sqlite.arguments = ["-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); p=bytearray(c.execute('SELECT payload FROM genp WHERE rowid=2').fetchone()[0]); p[20]^=0xFF; c.execute('UPDATE genp SET payload=? WHERE rowid=2',(bytes(p),)); c.commit()", keychain(box)]
        try sqlite.run()
        sqlite.waitUntilExit()
        try #require(sqlite.terminationStatus == 0)
        let dump = try box.run("dump-keychain", keychain(box))
        #expect(dump.stdout.contains("\"acct\"<blob>=\"a\""))
        #expect(!dump.stdout.contains("\"acct\"<blob>=\"b\""))
        #expect(dump.stderr.contains("1 damaged item") && dump.stderr.contains("keystone doctor"))
        let doctor = try box.run("doctor", keychain(box))
        #expect(doctor.status == 1 && doctor.stdout.contains("genp row 2"))
    }

    @Test("out-of-range lock timeouts are refused", arguments: ["-5", "99999999999"])
    func timeoutOutOfRange(value: String) throws {
        let box = Sandbox()
        #expect(try box.run("create-keychain", "k", input: "pw\n").status == 0)
        let set = try box.run("set-keychain-settings", "-t", value, "k")
        // A negative number reads as an option (a usage error, 2); a huge one is errSecParam.
        #expect(set.status == (value.hasPrefix("-") ? 2 : Int32(UInt8(truncatingIfNeeded: -50))))
        #expect(try box.run("show-keychain-info", "k").stdout.contains("no-timeout"))
    }

    @Test("option groups read as getopt reads them: -Uw last prompts, -Ua takes the next argument as its value")
    func optionGroups() throws {
        let box = Sandbox()
        #expect(try box.run("add-generic-password", "-s", "svc", "-Ua", "alice", "-w", input: "first\n").status == 0)
        #expect(try box.run("find-generic-password", "-a", "alice", "-s", "svc", "-w").stdout == "first\n")
        #expect(try box.run("add-generic-password", "-a", "alice", "-s", "svc", "-Uw", input: "second\n").status == 0)
        #expect(try box.run("find-generic-password", "-a", "alice", "-s", "svc", "-w").stdout == "second\n")
    }
}
