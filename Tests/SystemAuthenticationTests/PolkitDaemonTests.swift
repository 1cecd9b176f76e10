#if canImport(Glibc) && !canImport(Darwin)
import Foundation
import Glibc
import KeychainEngine
import SystemAuthentication
import Testing

/// The REAL polkitd and its text agent `pkttyagent`, without systemd: a private system-type bus; polkitd in a mount
/// namespace of its own (`unshare -m`) where Keystone's action file is bind-mounted over `/usr/share/polkit-1/actions`
/// (nothing of the system's is written); `pkttyagent --process` registered for the requesting process, on a
/// pseudo-terminal the test reads and types into, in a mount namespace where `/run/dbus/system_bus_socket` is the
/// private bus (polkit-agent-helper-1 clears its environment and reports to the default system bus). The requesting
/// process is `keystone authenticate --policy password` run as the PAM test user with no terminal and `DISPLAY`
/// set: the default configuration's desktop path.
enum PolkitDaemon {
    static let polkitd = "/usr/lib/polkit-1/polkitd"

    /// Why the real polkitd cannot run here, or nil.
    static let unavailableReason: String? = {
        if let reason = FprintdFixture.unavailableReason { return reason }
        let fm = FileManager.default
        guard geteuid() == 0 else { return "needs root (unshare -m, a test user)" }
        for (tool, package) in [(polkitd, "polkitd"), ("/usr/bin/pkttyagent", "pkexec or polkitd"),
                                ("/usr/lib/polkit-1/polkit-agent-helper-1", "polkitd"), ("/usr/bin/unshare", "util-linux")]
            where !fm.isExecutableFile(atPath: tool) {
            return "\(tool) not installed (apt-get install \(package))"
        }
        guard PAMFixture.canCreateUsers else { return "needs useradd to create a test user" }
        guard keystone != nil else { return "the keystone executable is not built next to the tests" }
        guard PAMFixture.run(["/usr/bin/unshare", "-m", "--", "/bin/true"]) == 0 else {
            return "unshare -m is not permitted here (a container without CAP_SYS_ADMIN)"
        }
        return nil
    }()

    /// The `keystone` executable next to the test bundle.
    static let keystone: String? = {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("keystone").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }()

    /// The helper: `subject UID GID COMMAND...` prints the pid that will run COMMAND, stops itself until SIGCONT,
    /// then runs it as UID in a new session without a terminal; `agent COMMAND...` runs COMMAND with the standard
    /// input (a pseudo-terminal) as its controlling terminal. Either way the child dies with the helper
    /// (PR_SET_PDEATHSIG), so the fixture's SIGKILL of the helper ends it.
    static let helper = #"""
    import ctypes, fcntl, os, signal, sys, termios

    mode = sys.argv[1]
    pid = os.fork()
    if pid == 0:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)
        if mode == 'subject':
            uid, gid, command = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
            os.setsid()
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            print(os.getpid(), flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)
        else:
            command = sys.argv[2:]
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        os.execvp(command[0], command)
    # The parent keeps no copy of the child's standard output (pkttyagent's --notify-fd 1 closes it to say "ready").
    null = os.open('/dev/null', os.O_WRONLY)
    os.dup2(null, 1)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
    """#
}

@Suite("polkit: the real polkitd and pkttyagent (private system bus, unshare -m)", .serialized,
       .enabled(if: PolkitDaemon.unavailableReason == nil,
                Comment(rawValue: PolkitDaemon.unavailableReason ?? "polkitd, pkttyagent and unshare are usable")))
struct PolkitDaemonTests {
    /// Starts polkitd with Keystone's action (naming `owners`), runs `keystone authenticate` as the test user with no
    /// terminal in a "desktop session", types `typed` at pkttyagent's password prompt, and returns what the agent
    /// showed and how keystone ended.
    static func authenticate(owners: [String], typed: String) throws -> (shown: String, status: Int32, output: String) {
        let user = try PAMFixture.user()
        guard let entry = getpwnam(user.name) else { throw FprintdFixture.Failure(description: "no passwd entry for \(user.name)") }
        let (uid, gid) = (entry.pointee.pw_uid, entry.pointee.pw_gid)
        let fixture = try FprintdFixture.start(daemon: false)
        defer { fixture.stop() }
        let actions = "\(fixture.root)/actions"
        try FileManager.default.createDirectory(atPath: actions, withIntermediateDirectories: false)
        try PolkitAuthentication.actionFileContents(owners: owners)
            .write(toFile: "\(actions)/\(PolkitConfiguration.defaultActionID).policy", atomically: false, encoding: .utf8)
        try PolkitDaemon.helper.write(toFile: "\(fixture.root)/helper-pk.py", atomically: false, encoding: .utf8)
        // The test user reaches the helper's directory only to run keystone; the bus socket must be reachable.
        chmod(fixture.root, 0o755)

        try fixture.start("/usr/bin/unshare", ["-m", "--", "/bin/sh", "-c",
                                               "mount --bind \"$0\" /usr/share/polkit-1/actions && exec \"$1\" --no-debug",
                                               actions, PolkitDaemon.polkitd], log: "polkitd.log")
        try fixture.waitForName("org.freedesktop.PolicyKit1")

        // The requesting program, stopped until the agent is registered for it.
        let subjectOutput = Pipe()
        let subject = try fixture.start("/usr/bin/python3", ["\(fixture.root)/helper-pk.py", "subject", "\(uid)", "\(gid)",
                                                            PolkitDaemon.keystone!, "authenticate", "--policy", "password",
                                                            "--reason", "Open the vault"],
                                        log: "subject.log",
                                        environment: ["DISPLAY": ":99", "HOME": fixture.root, "XDG_DATA_HOME": "\(fixture.root)/data",
                                                      "XDG_CONFIG_HOME": "\(fixture.root)/config", "KEYSTONE_KEYCHAIN": "",
                                                      "KEYSTONE_KEYCHAIN_DIR": ""],
                                        standardInput: FileHandle.nullDevice, standardOutput: subjectOutput)
        let subjectFD = subjectOutput.fileHandleForReading.fileDescriptor
        guard let pid = pid_t(try FprintdFixture.readLine(subjectFD, within: FprintdFixture.deadline, what: "the subject's pid")) else {
            throw FprintdFixture.Failure(description: "the subject printed no pid")
        }
        fixture.adopt(pid)

        // The agent, on a pseudo-terminal, ready once it closes its standard output.
        let terminal = try PseudoTerminal()
        let socket = fixture.busAddress.split(separator: ",").first.map { String($0.dropFirst("unix:path=".count)) } ?? ""
        let ready = Pipe()
        try fixture.start("/usr/bin/unshare", ["-m", "--", "/bin/sh", "-c",
                                               "mount -t tmpfs tmpfs /run/dbus && ln -s \"$0\" /run/dbus/system_bus_socket && "
                                                + "exec /usr/bin/python3 \"$1\" agent /usr/bin/pkttyagent --process \"$2\" --notify-fd 1",
                                               socket, "\(fixture.root)/helper-pk.py", "\(pid)"],
                          log: "agent.log", standardInput: FileHandle(fileDescriptor: terminal.slave, closeOnDealloc: false),
                          standardOutput: ready)
        try? ready.fileHandleForWriting.close()
        let readyFD = ready.fileHandleForReading.fileDescriptor
        do {
            _ = try FprintdFixture.readLine(readyFD, within: FprintdFixture.deadline, what: "pkttyagent's registration")
            throw FprintdFixture.Failure(description: "pkttyagent wrote to its notify descriptor")
        } catch let failure as FprintdFixture.Failure where failure.description.contains("end of output") {}

        kill(pid, SIGCONT)
        guard let shown = terminal.read(until: "assword:") else {
            throw FprintdFixture.Failure(description: "pkttyagent never asked: \(fixture.log("agent.log")) \(fixture.log("polkitd.log"))")
        }
        // pkttyagent prints its prompt, then switches echo off with TCSAFLUSH, discarding anything typed before.
        guard terminal.waitUntilSilent(within: FprintdFixture.deadline) else {
            throw FprintdFixture.Failure(description: "pkttyagent asked but never switched echo off: \(fixture.log("agent.log"))")
        }
        terminal.type(typed)
        var output = ""
        while let line = try? FprintdFixture.readLine(subjectFD, within: FprintdFixture.deadline, what: "keystone's answer") {
            output += line + "\n"
        }
        guard subject.wait(within: FprintdFixture.deadline) else {
            throw FprintdFixture.Failure(description: "keystone did not end after the agent's answer: \(output) "
                                         + "\(terminal.drain()) \(fixture.log("agent.log")) \(fixture.log("polkitd.log"))")
        }
        return (shown, subject.process.terminationStatus, output + fixture.log("subject.log"))
    }

    @Test("keystone without a terminal asks through polkit's agent; as an action owner the dialog names the program and the reason, and the right password authenticates")
    func ownerRightPassword() async throws {
        let user = try PAMFixture.user()
        let (shown, status, output) = try await blocking { try Self.authenticate(owners: [user.name], typed: user.password + "\n") }
        #expect(shown.contains("AUTHENTICATING FOR \(PolkitConfiguration.defaultActionID)"), "\(shown)")
        #expect(shown.contains("Authentication requested by keystone: Open the vault"), "\(shown)")
        #expect(status == 0, "\(output)")
        #expect(output.contains("authenticated"), "\(output)")
    }

    @Test("a caller polkit does not trust with details gets the action's own message; a wrong password is authenticationFailed")
    func untrustedWrongPassword() async throws {
        let (shown, status, output) = try await blocking { try Self.authenticate(owners: [], typed: PAMFixture.wrongPassword() + "\n") }
        #expect(shown.contains("A program asks you to authenticate to use a protected keychain item"), "\(shown)")
        #expect(!shown.contains("Open the vault"), "\(shown)")
        #expect(status == 1, "\(output)")
        #expect(output.contains("failed"), "\(output)")
    }
}
#endif
