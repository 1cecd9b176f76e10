import ArgumentParser
import Foundation
import KeychainEngine
import KeychainSealing
#if os(Linux)
import CKeyring
import Glibc
#endif

/// `keystone agent`: this user's unlock agent, as ssh-agent and gpg-agent are, for where the kernel keyring is refused.
struct Agent: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Keep unlocked keychains' keys for later commands where the kernel keyring is refused (containers).",
        discussion: """
        Where the kernel keyring is refused (Docker's default seccomp profile forbids keyctl), `unlock-keychain` \
        starts this agent itself; run it by hand only to choose when it starts. It keeps the unlock cache's entries \
        (sealed keys, expiring with the keychain's auto-lock timeout, at most 12 hours) in locked memory, in a process \
        that cannot be traced or dumped, and answers only this user (SO_PEERCRED) on a 0600 socket in a 0700 \
        directory: $KEYSTONE_AGENT_SOCKET, else $XDG_RUNTIME_DIR/keystone/agent.sock, else \
        $TMPDIR (or /tmp)/keystone-<uid>/agent.sock. A directory that is a symbolic link, is not yours or is open to \
        others is refused. It exits when it holds no entry any more (`lock-keychain` removes them), or after a \
        minute when it is given none. KEYSTONE_AGENT=0 turns it off. --daemon starts it in the background once it \
        listens and prints the shell lines that name it (eval "$(keystone agent --daemon)").
        """)

    @Flag(name: .customLong("daemon"), help: "Start in the background; return once the agent listens.") var daemon = false
    @Option(name: .customLong("socket"), help: "The socket's path (default: see above).") var socket: String?
    @Option(name: .customLong("ready-fd"), help: .hidden) var readyFD: Int32?
    @Option(name: .customLong("startup-grace"), help: .hidden) var startupGrace: UInt64 = 60

    mutating func run() throws {
        #if os(Linux)
        let location = socket.map { UnlockAgentLocation(socket: URL(fileURLWithPath: $0).standardizedFileURL.path) } ?? .resolve()
        if daemon {
            let pid = try AgentLauncher.start(location)
            let quoted = "'" + location.socket.replacingOccurrences(of: "'", with: "'\\''") + "'"
            writeOut("KEYSTONE_AGENT_SOCKET=\(quoted); export KEYSTONE_AGENT_SOCKET;\nKEYSTONE_AGENT_PID=\(pid); export KEYSTONE_AGENT_PID;\n")
            return
        }
        let server = AgentServer(location: location, startupGraceSeconds: startupGrace)
        let started: AgentServer.Start
        do {
            started = try server.start()
        } catch {
            report("error \(error.reason)")
            throw ToolFailure(function: "keystone agent", status: error.engineError.status, reason: error.reason)
        }
        switch started {
        case .alreadyRunning(let pid):
            report("ready \(pid)")
            if readyFD == nil { writeErr("keystone: an unlock agent (pid \(pid)) already listens at \(location.socket)\n") }
        case .listening:
            report("ready \(getpid())")
            if readyFD == nil { writeErr("keystone: unlock agent (pid \(getpid())) listening at \(location.socket)\n") }
            server.serve()
        }
        #else
        throw ToolFailure(function: "keystone agent", status: Status.unimplemented, reason: "the unlock agent exists on Linux only")
        #endif
    }

    /// Tells the starter (`--ready-fd`) one line: `ready PID` or `error MESSAGE`; then closes the descriptor.
    private func report(_ line: String) {
        #if os(Linux)
        guard let fd = readyFD else { return }
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        #endif
    }
}

/// Starts `keystone agent` in the background and waits until it listens: the agent says so on a pipe (`ready PID`,
/// or `error MESSAGE`, or the pipe closes because it died), so there is no sleep and no polling of the socket.
enum AgentLauncher {
    /// How long the start may take before it is given up (an agent replacing a stopped one waits one socket
    /// deadline for it first).
    static let startLimitMilliseconds: Int32 = 15_000

    /// Starts the agent for `location` (or finds the one already listening there) and returns its pid.
    ///
    /// - Throws: `ToolFailure` with the agent's reason (an unsafe directory: `errSecWrPerm`; else `errSecNotAvailable`).
    static func start(_ location: UnlockAgentLocation) throws -> Int32 {
        #if os(Linux)
        let function = "keystone agent"
        // The directory is checked (and made) here first, so its error is this process's, with its fix.
        do { try location.prepareDirectory() } catch {
            throw ToolFailure(function: function, status: error.engineError.status, reason: error.reason)
        }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var fds: [Int32] = [-1, -1]
        guard ckagent_pipe(&fds, 0) == 0 else {
            throw ToolFailure(function: function, status: Status.notAvailable, reason: "no pipe to start the agent: \(String(cString: strerror(errno)))")
        }
        let arguments = [executable, "agent", "--socket", location.socket, "--ready-fd", "3"]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let pid = ckagent_spawn_detached(executable, &argv, fds[1])
        let spawnError = errno
        close(fds[1])
        defer { close(fds[0]) }
        guard pid > 0 else {
            throw ToolFailure(function: function, status: Status.notAvailable, reason: "the unlock agent could not be started (\(executable)): \(String(cString: strerror(spawnError)))")
        }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while line.count < 4096 {
            var wait = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
            let ready = poll(&wait, 1, startLimitMilliseconds)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else {
                kill(pid, SIGTERM)
                throw ToolFailure(function: function, status: Status.notAvailable, reason: "the unlock agent (pid \(pid)) did not report listening within \(startLimitMilliseconds / 1000) s; it was stopped")
            }
            let got = read(fds[0], &byte, 1)
            if got < 0 && errno == EINTR { continue }
            if got <= 0 || byte == UInt8(ascii: "\n") { break }
            line.append(byte)
        }
        let text = String(decoding: line, as: UTF8.self)
        if text.hasPrefix("ready "), let agent = Int32(text.dropFirst(6)) {
            var status: Int32 = 0
            _ = waitpid(pid, &status, WNOHANG)  // the starter of an agent that was already there has exited
            UnlockAgentClient(location: location).forgetMissedDeadline()
            return agent
        }
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        let reason = text.hasPrefix("error ") ? String(text.dropFirst(6)) : "the unlock agent exited before listening (status \(status))"
        throw ToolFailure(function: function, status: reason.contains("refused") ? Status.wrPerm : Status.notAvailable, reason: reason)
        #else
        throw ToolFailure(function: "keystone agent", status: Status.unimplemented, reason: "the unlock agent exists on Linux only")
        #endif
    }
}
