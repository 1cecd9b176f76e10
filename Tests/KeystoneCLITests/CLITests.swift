import Foundation
import Testing

/// One run of a program: the built `keystone` binary, or a tool the tests compare it with.
struct Run {
    let status: Int32
    let stdout: String
    let stderr: String
    /// True when the program was ended by a signal (a Swift trap is SIGILL or SIGTRAP): ``status`` is then the signal.
    var signaled = false

    /// Runs `executable` with `arguments`, writing `input` to its standard input and closing it.
    ///
    /// Standard error goes to a file, so a program writing much to both streams can never stall on a full pipe.
    static func launch(_ executable: String, _ arguments: [String], in directory: URL? = nil,
                       environment: [String: String]? = nil, input: Data? = nil) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        if let environment { process.environment = environment }
        let errorFile = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errorFile) }
        let out = Pipe(), stdin = Pipe()
        process.standardOutput = out
        process.standardError = try FileHandle(forWritingTo: errorFile)
        process.standardInput = stdin
        try process.run()
        if let input { stdin.fileHandleForWriting.write(input) }
        try stdin.fileHandleForWriting.close()
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let stderrData = (try? Data(contentsOf: errorFile)) ?? Data()
        return Run(status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
                   stderr: String(decoding: stderrData, as: UTF8.self), signaled: process.terminationReason == .uncaughtSignal)
    }
}

/// A sandbox: its own data and config directories, so no test touches a real keychain.
struct Sandbox {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-cli-\(UUID().uuidString)")

    static var binary: String? {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("keystone").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return nil
    }

    var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["XDG_DATA_HOME"] = root.appendingPathComponent("data").path
        env["XDG_CONFIG_HOME"] = root.appendingPathComponent("config").path
        env["KEYSTONE_KEYCHAIN"] = nil
        // KEYSTONE_KEYCHAIN_DIR comes before XDG_DATA_HOME: a CI or user setting must not take the sandbox's keychains.
        env["KEYSTONE_KEYCHAIN_DIR"] = nil
        return env
    }

    var loginPath: String { root.appendingPathComponent("data/keystone/login.keychain-db").path }

    @discardableResult
    func run(_ arguments: String..., input: String? = nil) throws -> Run {
        try run(arguments, input: input)
    }

    func run(_ arguments: [String], input: String? = nil, executable: String? = nil) throws -> Run {
        try Run.launch(try executable ?? #require(Self.binary, "the keystone binary is built by `swift build`"), arguments,
                       environment: environment, input: input.map { Data($0.utf8) })
    }
}

@Suite("keystone CLI: security's verbs, outputs and exit codes")
struct CLITests {
    @Test("add then find -w prints only the secret; the default keychain is created once, with a note")
    func addFind() throws {
        let box = Sandbox()
        let add = try box.run("add-generic-password", "-a", "alice", "-s", "example.com", "-w", "s3cret")
        #expect(add.status == 0)
        #expect(add.stderr.contains("protected only by its file permissions"))
        #expect(!add.stdout.contains("s3cret") && !add.stderr.contains("s3cret"))
        let find = try box.run("find-generic-password", "-a", "alice", "-s", "example.com", "-w")
        #expect(find.status == 0)
        #expect(find.stdout == "s3cret\n")
        #expect(find.stderr.isEmpty)
        #expect(FileManager.default.fileExists(atPath: box.loginPath))
    }

    @Test("-g prints the attributes on stdout and the password on stderr; neither prints no secret")
    func findG() throws {
        let box = Sandbox()
        try box.run("add-generic-password", "-a", "alice", "-s", "svc", "-l", "My Label", "-w", "hunter2")
        let g = try box.run("find-generic-password", "-s", "svc", "-g")
        #expect(g.status == 0)
        #expect(g.stdout.contains("class: \"genp\""))
        #expect(g.stdout.contains("\"acct\"<blob>=\"alice\""))
        #expect(g.stdout.contains("0x00000007 <blob>=\"My Label\""))
        #expect(!g.stdout.contains("hunter2"))
        #expect(g.stderr == "password: \"hunter2\"\n")
        let plain = try box.run("find-generic-password", "-s", "svc")
        #expect(!plain.stdout.contains("hunter2") && !plain.stderr.contains("hunter2"))
    }

    @Test("a binary secret prints as hex with -w")
    func binarySecret() throws {
        let box = Sandbox()
        try box.run("add-generic-password", "-a", "a", "-s", "bin", "-X", "00ff10")
        #expect(try box.run("find-generic-password", "-s", "bin", "-w").stdout == "00ff10\n")
    }

    @Test("not found exits 44, a duplicate exits 45 with security's message, -U updates in place")
    func exitCodes() throws {
        let box = Sandbox()
        let missing = try box.run("find-generic-password", "-a", "nobody", "-s", "svc")
        #expect(missing.status == 44)
        #expect(missing.stderr.contains("keystone: SecKeychainSearchCopyNext: The specified item could not be found in the keychain."))
        try box.run("add-generic-password", "-a", "a", "-s", "svc", "-w", "one")
        let duplicate = try box.run("add-generic-password", "-a", "a", "-s", "svc", "-w", "two")
        #expect(duplicate.status == 45)
        #expect(duplicate.stderr.contains("The specified item already exists in the keychain."))
        #expect(try box.run("add-generic-password", "-U", "-a", "a", "-s", "svc", "-w", "two").status == 0)
        #expect(try box.run("find-generic-password", "-a", "a", "-s", "svc", "-w").stdout == "two\n")
    }

    @Test("add -U without an account updates the item with the empty account, not another account's")
    func updateWithMissingAccount() throws {
        let box = Sandbox()
        try box.run("add-generic-password", "-a", "a", "-s", "svc", "-w", "keep")
        try box.run("add-generic-password", "-s", "svc", "-w", "one")
        #expect(try box.run("add-generic-password", "-U", "-s", "svc", "-w", "two").status == 0)
        #expect(try box.run("find-generic-password", "-a", "a", "-s", "svc", "-w").stdout == "keep\n")
        #expect(try box.run("find-generic-password", "-a", "", "-s", "svc", "-w").stdout == "two\n")
    }

    @Test("usage errors exit 2 with usage text")
    func usage() throws {
        let box = Sandbox()
        let bad = try box.run("find-generic-password", "--no-such-flag")
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("Usage: keystone find-generic-password"))
        #expect(try box.run("no-such-verb").status == 2)
        #expect(try box.run([]).status == 2)
    }

    @Test("a secret comes from standard input when -w is last or absent and stdin is a pipe")
    func pipedSecret() throws {
        let box = Sandbox()
        #expect(try box.run("add-generic-password", "-a", "a", "-s", "svc", "-w", input: "from-stdin\n").status == 0)
        #expect(try box.run("find-generic-password", "-a", "a", "-s", "svc", "-w").stdout == "from-stdin\n")
        #expect(try box.run("add-generic-password", "-a", "b", "-s", "svc", input: "absent-w\n").status == 0)
        #expect(try box.run("find-generic-password", "-a", "b", "-s", "svc", "-w").stdout == "absent-w\n")
    }

    @Test("a secret typed at a terminal prompt is not echoed", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")))
    func terminalPrompt() throws {
        let box = Sandbox()
        let binary = try #require(Sandbox.binary)
        // A pseudo-terminal driven by Python's pty module: the secret is typed once the prompt has appeared
        // (a signal read from the terminal, not a delay), as a person would.
        let driver = """
        import os, pty, sys
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(sys.argv[1], [sys.argv[1], 'add-generic-password', '-a', 'tty', '-s', 'svc', '-w'])
        out = b''
        while b'password data for new item:' not in out:
            chunk = os.read(fd, 1024)
            if not chunk: break
            out += chunk
        os.write(fd, b'typed-secret\\n')
        while True:
            try: chunk = os.read(fd, 1024)
            except OSError: break
            if not chunk: break
            out += chunk
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(out.decode())
        sys.exit(os.WEXITSTATUS(status))
        """
        let typed = try box.run(["-c", driver, binary], executable: "/usr/bin/python3")
        #expect(typed.status == 0)
        #expect(typed.stdout.contains("password data for new item:"))
        #expect(!typed.stdout.contains("typed-secret"))
        #expect(try box.run("find-generic-password", "-a", "tty", "-s", "svc", "-w").stdout == "typed-secret\n")
    }

    @Test("internet passwords: add, find by server and protocol, delete")
    func internet() throws {
        let box = Sandbox()
        #expect(try box.run("add-internet-password", "-a", "bob", "-s", "example.com", "-r", "htps", "-P", "443", "-p", "/login", "-w", "pw").status == 0)
        let found = try box.run("find-internet-password", "-s", "example.com", "-r", "htps", "-g")
        #expect(found.stdout.contains("\"srvr\"<blob>=\"example.com\""))
        #expect(found.stdout.contains("\"ptcl\"<uint32>=\"htps\""))
        #expect(found.stderr == "password: \"pw\"\n")
        #expect(try box.run("find-internet-password", "-s", "example.com", "-P", "80").status == 44)
        #expect(try box.run("delete-internet-password", "-s", "example.com").status == 0)
        #expect(try box.run("find-internet-password", "-s", "example.com").status == 44)
    }

    @Test("delete removes only the first match")
    func deleteFirstOnly() throws {
        let box = Sandbox()
        try box.run("add-generic-password", "-a", "a", "-s", "svc", "-w", "1")
        try box.run("add-generic-password", "-a", "b", "-s", "svc", "-w", "2")
        let deleted = try box.run("delete-generic-password", "-s", "svc")
        #expect(deleted.status == 0)
        #expect(deleted.stdout.contains("password has been deleted."))
        #expect(try box.run("find-generic-password", "-s", "svc").status == 0)
    }

    @Test("--json prints the attributes, and the password only when asked")
    func json() throws {
        let box = Sandbox()
        try box.run("add-generic-password", "-a", "a", "-s", "svc", "-w", "jsecret")
        let plain = try box.run("find-generic-password", "-s", "svc", "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(plain.stdout.utf8)) as? [String: Any])
        #expect((object["attributes"] as? [String: Any])?["acct"] as? String == "a")
        #expect(object["password"] == nil)
        let withSecret = try box.run("find-generic-password", "-s", "svc", "-w", "--json")
        #expect(withSecret.stdout.contains("jsecret"))
        let dump = try box.run("dump-keychain")
        #expect(dump.stdout.contains("\"svce\"<blob>=\"svc\"") && !dump.stdout.contains("jsecret"))
        #expect(try box.run("dump-keychain", "-d").stdout.contains("jsecret"))
    }

    @Test("a Mac CI script runs unchanged but for the program name")
    func macCIScript() throws {
        let box = Sandbox()
        let keychain = box.root.appendingPathComponent("app-signing.keychain-db").path
        #expect(try box.run("create-keychain", "-p", "ci-pass", keychain).status == 0)
        #expect(try box.run("set-keychain-settings", "-lut", "21600", keychain).status == 0)
        #expect(try box.run("show-keychain-info", keychain).stdout == "Keychain \"\(keychain)\" lock-on-sleep timeout=21600s\n")
        #expect(try box.run("unlock-keychain", "-p", "ci-pass", keychain).status == 0)
        #expect(try box.run("list-keychains").stdout.contains(keychain))
        #expect(try box.run("add-generic-password", "-a", "ci", "-s", "deploy-token", "-w", "tok", "-T", "/usr/bin/codesign", keychain).status == 0)
        #expect(try box.run("find-generic-password", "-a", "ci", "-s", "deploy-token", "-w", keychain).stdout == "tok\n")
        #expect(try box.run("delete-generic-password", "-a", "ci", "-s", "deploy-token", keychain).status == 0)
        #expect(try box.run("add-generic-password", "-a", "ci", "-s", "second", "-w", "tok2", keychain).status == 0)
        #expect(try box.run("lock-keychain", keychain).status == 0)
        let locked = try box.run("find-generic-password", "-a", "ci", "-s", "second", "-w", keychain)
        #expect(locked.status == 36)  // errSecInteractionNotAllowed's low byte
        #expect(locked.stderr.contains("User interaction is not allowed."))
        #expect(try box.run("unlock-keychain", "-p", "wrong", keychain).status == 51)  // errSecAuthFailed
        #expect(try box.run("unlock-keychain", keychain, input: "ci-pass\n").status == 0)
        #expect(try box.run("find-generic-password", "-a", "ci", "-s", "second", "-w", keychain).stdout == "tok2\n")
        #expect(try box.run("delete-keychain", keychain).status == 0)
        #expect(!FileManager.default.fileExists(atPath: keychain))
        #expect(try box.run("find-generic-password", "-s", "second", keychain).status == Int32(UInt8(truncatingIfNeeded: Int32(-25294))))
    }

    @Test("set-keychain-password changes the password; the old one stops working")
    func changePassword() throws {
        let box = Sandbox()
        let keychain = box.root.appendingPathComponent("k.keychain-db").path
        try box.run("create-keychain", "-p", "old", keychain)
        try box.run("add-generic-password", "-a", "a", "-s", "s", "-w", "v", keychain)
        #expect(try box.run("set-keychain-password", "-o", "old", "-p", "new", keychain).status == 0)
        try box.run("lock-keychain", keychain)
        #expect(try box.run("unlock-keychain", "-p", "old", keychain).status == 51)
        #expect(try box.run("unlock-keychain", "-p", "new", keychain).status == 0)
        #expect(try box.run("find-generic-password", "-a", "a", "-w", keychain).stdout == "v\n")
    }
}
