import Foundation
import Testing

/// A sandbox whose commands run with the kernel keyring refused (no-keyring-exec), with an agent socket of its own in
/// a private directory, so that tests never share an agent.
struct NoKeyringSandbox {
    let box = Sandbox()
    /// The agent's directory (made 0700 by the agent, or planted by a test).
    var agentDirectory: String { box.root.appendingPathComponent("agent").path }
    var socket: String { agentDirectory + "/agent.sock" }
    var extraEnvironment: [String: String] = [:]

    init() throws {
        try FileManager.default.createDirectory(at: box.root, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
    }

    var environment: [String: String] {
        var env = box.environment
        env["KEYSTONE_AGENT_SOCKET"] = socket
        env["KEYSTONE_AGENT"] = nil
        for (key, value) in extraEnvironment { env[key] = value }
        return env
    }

    /// Runs `keystone arguments` under no-keyring-exec.
    @discardableResult
    func run(_ arguments: String..., input: String? = nil) throws -> Run {
        let helper = try #require(NoKeyringExec.binary, "no-keyring-exec is built by `swift build --build-tests`")
        let keystone = try #require(Sandbox.binary, "the keystone binary is built by `swift build`")
        return try Run.launch(helper, [keystone] + arguments, environment: environment, input: input.map { Data($0.utf8) })
    }

    /// The pids of agents serving this sandbox's socket (from /proc: the agent's command line names its socket).
    var agentPIDs: [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            let words = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            return words.contains("agent") && words.contains(socket)
        }
    }

    /// Waits until no agent serves this sandbox any more; false when one still does after `limit` seconds (a guard
    /// against a hang, not a measure: the agent exits as its last entry goes).
    func waitForNoAgent(limit: TimeInterval = 60) -> Bool {
        let deadline = Date().addingTimeInterval(limit)
        while Date() < deadline {
            if agentPIDs.isEmpty { return true }
            usleep(20_000)
        }
        return agentPIDs.isEmpty
    }

    /// Ends every agent of this sandbox (SIGCONT first: a stopped one must be able to die cleanly).
    func stopAgents() {
        for pid in agentPIDs {
            kill(pid, SIGCONT)
            kill(pid, SIGKILL)
        }
    }
}

/// Runs `executable` with a watchdog: when it has not exited after `limit` seconds it is killed and the result says so.
func launchGuarded(_ executable: String, _ arguments: [String], environment: [String: String], limit: TimeInterval) throws -> (run: Run, killedByWatchdog: Bool) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.environment = environment
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let finished = DispatchSemaphore(value: 0)
    let watchdog = Thread {
        if finished.wait(timeout: .now() + limit) == .timedOut { process.terminate(); kill(process.processIdentifier, SIGKILL) }
    }
    watchdog.start()
    let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
    let stderrData = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let killed = process.terminationReason == .uncaughtSignal
    finished.signal()
    return (Run(status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
                stderr: String(decoding: stderrData, as: UTF8.self), signaled: killed), killed)
}

/// A Python client of the agent's protocol (Sources/KeychainSealing/UnlockAgentProtocol.swift), for what the keystone
/// client never does: another user's connection, a known payload.
enum AgentWire {
    /// `python3 -c script SOCKET OP [NAME [PAYLOAD]]`: prints the answer's status byte and payload as hex.
    static let script = """
        import socket, struct, sys
        path, op = sys.argv[1], sys.argv[2]
        body = op.encode()
        if op != "I":
            name = sys.argv[3].encode()
            body += struct.pack(">H", len(name)) + name
            if op == "P":
                body += struct.pack(">I", 600) + sys.argv[4].encode()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(path)
        try:
            s.sendall(struct.pack(">I", len(body)) + body)
        except OSError:
            pass  # an agent refusing this user answers at once and closes, before reading the request
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
            if len(data) >= 4 and len(data) >= 4 + struct.unpack(">I", data[:4])[0]:
                break
        if len(data) < 5:
            print("closed")
        else:
            print(data[4], data[5:].hex())
        """
}

@Suite("keystone unlock agent: an unlock that persists where the kernel keyring is refused", .serialized)
struct UnlockAgentCLITests {
    @Test("the CI recipe works with the kernel keyring refused: create, unlock, add, find, lock, then find is refused with 36")
    func ciRecipe() throws {
        let box = try NoKeyringSandbox()
        defer { box.stopAgents() }
        #expect(try box.run("create-keychain", "-p", "ci-pass", "ci.keychain-db").status == 0)
        let unlock = try box.run("unlock-keychain", "-p", "ci-pass", "ci.keychain-db")
        #expect(unlock.status == 0, "\(unlock.stderr)")
        #expect(box.agentPIDs.count == 1)
        #expect(try box.run("add-generic-password", "-a", "ci", "-s", "deploy", "-w", "token-1234", "ci.keychain-db").status == 0)
        let find = try box.run("find-generic-password", "-a", "ci", "-s", "deploy", "-w", "ci.keychain-db")
        #expect(find.status == 0, "\(find.stderr)")
        #expect(find.stdout == "token-1234\n")
        #expect(try box.run("lock-keychain", "ci.keychain-db").status == 0)
        let refused = try box.run("find-generic-password", "-a", "ci", "-s", "deploy", "-w", "ci.keychain-db")
        #expect(refused.status == 36)
        #expect(!refused.stdout.contains("token-1234") && !refused.stderr.contains("token-1234"))
    }

    @Test("doctor names the unlock agent where the kernel keyring is refused: to be started, then running with its pid, never 'each process must unlock'")
    func doctorReportsTheAgent() throws {
        let box = try NoKeyringSandbox()
        defer { box.stopAgents() }
        #expect(try box.run("create-keychain", "-p", "ci-pass", "ci.keychain-db").status == 0)
        #expect(try box.run("lock-keychain", "ci.keychain-db").status == 0)
        #expect(box.waitForNoAgent())
        let before = try box.run("doctor", "ci.keychain-db")
        #expect(before.stdout.contains("starts the unlock agent (\(box.socket))"), "\(before.stdout)")
        #expect(try box.run("unlock-keychain", "-p", "ci-pass", "ci.keychain-db").status == 0)
        let pid = try #require(box.agentPIDs.first)
        let after = try box.run("doctor", "ci.keychain-db")
        #expect(after.stdout.contains("the unlock agent (pid \(pid), \(box.socket))"), "\(after.stdout)")
        #expect(after.stdout.contains("the keys are cached in the unlock agent (\(box.socket))"), "\(after.stdout)")
        #expect(!after.stdout.contains("must unlock the keychain itself"))

        var off = box
        off.extraEnvironment["KEYSTONE_AGENT"] = "0"
        let disabled = try off.run("doctor", "ci.keychain-db")
        #expect(disabled.stdout.contains("unlock agent is turned off (KEYSTONE_AGENT=0)"), "\(disabled.stdout)")
    }

    @Test("lock-keychain removes the agent's entries: the agent, holding none, exits and removes its socket")
    func lockRemoves() throws {
        let box = try NoKeyringSandbox()
        defer { box.stopAgents() }
        #expect(try box.run("create-keychain", "-p", "pw", "k.keychain-db").status == 0)
        #expect(try box.run("unlock-keychain", "-p", "pw", "k.keychain-db").status == 0)
        #expect(!box.agentPIDs.isEmpty)
        #expect(try box.run("add-generic-password", "-s", "svc", "-w", "v", "k.keychain-db").status == 0)
        #expect(try box.run("lock-keychain", "k.keychain-db").status == 0)
        #expect(box.waitForNoAgent(), "the agent still runs after lock-keychain removed its entries")
        #expect(!FileManager.default.fileExists(atPath: box.socket))
        #expect(try box.run("find-generic-password", "-s", "svc", "-w", "k.keychain-db").status == 36)
    }

    @Test("the agent makes its directory 0700 and its socket 0600, owned by the user")
    func socketModes() throws {
        let box = try NoKeyringSandbox()
        defer { box.stopAgents() }
        #expect(try box.run("create-keychain", "-p", "pw", "k.keychain-db").status == 0)
        #expect(try box.run("unlock-keychain", "-p", "pw", "k.keychain-db").status == 0)
        var info = stat()
        #expect(lstat(box.agentDirectory, &info) == 0)
        #expect(info.st_mode & S_IFMT == S_IFDIR && info.st_mode & 0o777 == 0o700 && info.st_uid == geteuid())
        #expect(lstat(box.socket, &info) == 0)
        #expect(info.st_mode & S_IFMT == S_IFSOCK && info.st_mode & 0o777 == 0o600 && info.st_uid == geteuid())
    }

    @Test("unlock exits non-zero with the fix when nothing can keep the keys (KEYSTONE_AGENT=0), and later commands agree")
    func nothingPersists() throws {
        var box = try NoKeyringSandbox()
        box.extraEnvironment["KEYSTONE_AGENT"] = "0"
        #expect(try box.run("create-keychain", "-p", "pw", "k.keychain-db").status == 0)
        let unlock = try box.run("unlock-keychain", "-p", "pw", "k.keychain-db")
        #expect(unlock.status != 0)
        #expect(unlock.stderr.contains("later commands will find it locked"))
        #expect(unlock.stderr.contains("KEYSTONE_AGENT"))
        #expect(unlock.stderr.contains("seccomp"))
        #expect(!unlock.stderr.contains("pw\n"))
        #expect(box.agentPIDs.isEmpty)
        // The next command finds it locked, as the unlock said.
        #expect(try box.run("add-generic-password", "-s", "svc", "-w", "v", "k.keychain-db").status == 36)
    }

    @Test("a wrong password is reported as such (51), not as an unlock cache problem")
    func wrongPassword() throws {
        let box = try NoKeyringSandbox()
        defer { box.stopAgents() }
        #expect(try box.run("create-keychain", "-p", "right", "k.keychain-db").status == 0)
        let wrong = try box.run("unlock-keychain", "-p", "wrong", "k.keychain-db")
        #expect(wrong.status == 51)
        #expect(!wrong.stderr.contains("later commands"))
    }

    @Test("a planted agent directory is refused, naming the path and the fix: open to others, a symbolic link, another user's")
    func plantedDirectory() throws {
        // Open to others.
        let open = try NoKeyringSandbox()
        defer { open.stopAgents() }
        #expect(mkdir(open.agentDirectory, 0o777) == 0 && chmod(open.agentDirectory, 0o777) == 0)
        #expect(try open.run("create-keychain", "-p", "pw", "k.keychain-db").status == 0)
        let refusedOpen = try open.run("unlock-keychain", "-p", "pw", "k.keychain-db")
        #expect(refusedOpen.status != 0)
        #expect(refusedOpen.stderr.contains(open.agentDirectory) && refusedOpen.stderr.contains("open to group or others"))
        #expect(refusedOpen.stderr.contains("KEYSTONE_AGENT_SOCKET"))
        #expect(open.agentPIDs.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: open.socket))

        // A symbolic link to a private directory.
        let link = try NoKeyringSandbox()
        defer { link.stopAgents() }
        let target = link.box.root.appendingPathComponent("elsewhere").path
        #expect(mkdir(target, 0o700) == 0)
        #expect(symlink(target, link.agentDirectory) == 0)
        #expect(try link.run("create-keychain", "-p", "pw", "k.keychain-db").status == 0)
        let refusedLink = try link.run("unlock-keychain", "-p", "pw", "k.keychain-db")
        #expect(refusedLink.status != 0)
        #expect(refusedLink.stderr.contains("symbolic link"))
        #expect(link.agentPIDs.isEmpty)

        // Another user's (as root only: chown).
        guard geteuid() == 0 else {
            print("skipped the other user's directory: chown needs root")
            return
        }
        let foreign = try NoKeyringSandbox()
        defer { foreign.stopAgents() }
        #expect(mkdir(foreign.agentDirectory, 0o700) == 0 && chown(foreign.agentDirectory, 65534, 65534) == 0)
        #expect(try foreign.run("create-keychain", "-p", "pw", "k.keychain-db").status == 0)
        let refusedForeign = try foreign.run("unlock-keychain", "-p", "pw", "k.keychain-db")
        #expect(refusedForeign.status != 0)
        #expect(refusedForeign.stderr.contains("belongs to uid 65534"))
        #expect(foreign.agentPIDs.isEmpty)
    }

    @Test("the agent answers another user's connection with a refusal (SO_PEERCRED), even with its socket opened up")
    func otherUserRefused() throws {
        guard geteuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), let python = NoKeyringExec.python else {
            print("skipped: needs root, setpriv and python3 (to connect as uid 65534)")
            return
        }
        let box = try NoKeyringSandbox()
        defer { box.stopAgents() }
        #expect(try box.run("create-keychain", "-p", "pw", "k.keychain-db").status == 0)
        #expect(try box.run("unlock-keychain", "-p", "pw", "k.keychain-db").status == 0)
        // The same user is answered.
        let mine = try Run.launch(python, ["-c", AgentWire.script, box.socket, "I"])
        #expect(mine.stdout.hasPrefix("0 "), "\(mine.stderr)")
        // Deliberately weakened so that the kernel lets uid 65534 reach the socket: the agent must still refuse.
        #expect(chmod(box.box.root.path, 0o711) == 0 && chmod(box.agentDirectory, 0o711) == 0 && chmod(box.socket, 0o666) == 0)
        let other = try Run.launch("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", AgentWire.script, box.socket, "I"])
        #expect(other.status == 0, "\(other.stderr) \(other.stdout)")
        #expect(other.stdout == "3 \n")
        let otherGet = try Run.launch("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", AgentWire.script, box.socket, "G", "keystone:anything"])
        #expect(otherGet.stdout == "3 \n")
    }

    @Test("a SIGSTOPped agent does not hang a call: it returns after the socket deadline, with the keychain locked (36)")
    func stoppedAgent() throws {
        let box = try NoKeyringSandbox()
        defer { box.stopAgents() }
        #expect(try box.run("create-keychain", "-p", "pw", "k.keychain-db").status == 0)
        #expect(try box.run("unlock-keychain", "-p", "pw", "k.keychain-db").status == 0)
        #expect(try box.run("add-generic-password", "-s", "svc", "-w", "v", "k.keychain-db").status == 0)
        let pid = try #require(box.agentPIDs.first)
        #expect(kill(pid, SIGSTOP) == 0)
        defer { kill(pid, SIGCONT) }
        let helper = try #require(NoKeyringExec.binary)
        let keystone = try #require(Sandbox.binary)
        let (find, killed) = try launchGuarded(helper, [keystone, "find-generic-password", "-s", "svc", "-w", "k.keychain-db"],
                                               environment: box.environment, limit: 60)
        #expect(!killed, "the call hung on a stopped agent")
        #expect(find.status == 36)
        // Continued, the agent serves again.
        #expect(kill(pid, SIGCONT) == 0)
        #expect(try box.run("find-generic-password", "-s", "svc", "-w", "k.keychain-db").stdout == "v\n")
        // Stopped again, unlock-keychain replaces it (each of the two waits is bounded by the deadline).
        #expect(kill(pid, SIGSTOP) == 0)
        let (unlock, unlockKilled) = try launchGuarded(helper, [keystone, "unlock-keychain", "-p", "pw", "k.keychain-db"],
                                                       environment: box.environment, limit: 60)
        #expect(!unlockKilled && unlock.status == 0, "\(unlock.stderr)")
        #expect(box.agentPIDs.contains { $0 != pid })
        #expect(try box.run("find-generic-password", "-s", "svc", "-w", "k.keychain-db").stdout == "v\n")
    }

    @Test("the agent never prints or logs what it holds, even at trace level; it wipes and removes its socket on SIGTERM")
    func agentNeverPrintsSecrets() throws {
        guard let python = NoKeyringExec.python else {
            print("skipped: python3 is not installed (the test's protocol client)")
            return
        }
        let box = try NoKeyringSandbox()
        let keystone = try #require(Sandbox.binary)
        var environment = box.environment
        environment["KEYSTONE_LOG_LEVEL"] = "trace"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: keystone)
        process.arguments = ["agent", "--socket", box.socket]
        process.environment = environment
        let err = Pipe(), out = Pipe()
        process.standardError = err
        process.standardOutput = out
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        // Its first line on standard error says it listens (a deterministic readiness signal).
        var first = Data()
        while !first.contains(UInt8(ascii: "\n")) {
            let byte = err.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty { break }
            first.append(byte)
        }
        #expect(String(decoding: first, as: UTF8.self).contains("listening at \(box.socket)"))
        let secret = "agent-payload-\(UUID().uuidString)"
        let put = try Run.launch(python, ["-c", AgentWire.script, box.socket, "P", "keystone:test:full", secret])
        #expect(put.stdout == "0 \n", "\(put.stderr)")
        let get = try Run.launch(python, ["-c", AgentWire.script, box.socket, "G", "keystone:test:full"])
        #expect(get.stdout == "0 \(Data(secret.utf8).map { String(format: "%02x", $0) }.joined())\n")
        let missing = try Run.launch(python, ["-c", AgentWire.script, box.socket, "G", "keystone:test:other"])
        #expect(missing.stdout == "1 \n")
        let malformed = try Run.launch(python, ["-c", AgentWire.script, box.socket, "G", "not-keystone"])
        #expect(malformed.stdout == "2 \n")
        kill(process.processIdentifier, SIGTERM)
        let rest = err.fileHandleForReading.readDataToEndOfFile() + out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let output = String(decoding: first + rest, as: UTF8.self)
        #expect(!output.contains(secret))
        #expect(!output.contains(Data(secret.utf8).base64EncodedString()))
        #expect(!output.contains(Data(secret.utf8).map { String(format: "%02x", $0) }.joined()))
        #expect(output.contains("trace") || output.contains("debug") || output.contains("info"), "the agent logged nothing at trace level: the check would be empty")
        #expect(process.terminationReason == .exit)
        #expect(!FileManager.default.fileExists(atPath: box.socket))
    }

    @Test("--password-file gives the password: a file's first line, or one line of standard input with '-'")
    func passwordFile() throws {
        let box = try NoKeyringSandbox()
        defer { box.stopAgents() }
        let file = box.box.root.appendingPathComponent("password").path
        #expect(FileManager.default.createFile(atPath: file, contents: Data("file-pass\n".utf8), attributes: [.posixPermissions: 0o600]))
        #expect(try box.run("create-keychain", "--password-file", file, "k.keychain-db").status == 0)
        #expect(try box.run("unlock-keychain", "--password-file", "-", "k.keychain-db", input: "wrong\n").status == 51)
        let unlock = try box.run("unlock-keychain", "--password-file", "-", "k.keychain-db", input: "file-pass\n")
        #expect(unlock.status == 0, "\(unlock.stderr)")
        #expect(try box.run("add-generic-password", "-s", "svc", "-w", "v", "k.keychain-db").status == 0)
        let both = try box.run("unlock-keychain", "-p", "x", "--password-file", file, "k.keychain-db")
        #expect(both.status == 2)
        #expect(try box.run("lock-keychain", "k.keychain-db").status == 0)
    }
}
