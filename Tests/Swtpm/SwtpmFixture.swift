#if os(Linux)
import Foundation
import ProcessWatchdog
import Glibc

/// A REAL software TPM 2.0 for tests: `swtpm socket --tpm2` with its state in a fresh temporary directory, on free
/// 127.0.0.1 ports (the TPM port P and its control port P+1), already started up (`--flags
/// not-need-init,startup-clear`). Each fixture is a different TPM (its own seeds).
///
/// Readiness comes from swtpm itself: the fixture connects to the TPM port in a bounded loop (and gives up at once
/// when swtpm exits, for instance because another process took the port, then retries on other ports). ``stop()``
/// (or `deinit`) kills swtpm (SIGKILL, then waits for it) and removes the directory. A watchdog shell, whose
/// standard input is a close-on-exec pipe only this process writes to, does the same when the test process dies
/// before that: swtpm never outlives the tests.
public final class SwtpmFixture: @unchecked Sendable {
    // @unchecked Sendable: the variables (watchdog, stopped) are reached only while `lock` is held.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public static let swtpmPath = "/usr/bin/swtpm"
    public static let getcapPath = "/usr/bin/tpm2_getcap"
    public static let opensslPath = "/usr/bin/openssl"

    /// Why the fixture cannot run here, or nil. Tests skip with it.
    public static let unavailableReason: String? = {
        let fm = FileManager.default
        if !fm.isExecutableFile(atPath: swtpmPath) { return "swtpm not installed (apt-get install swtpm swtpm-tools)" }
        if !fm.isExecutableFile(atPath: getcapPath) { return "tpm2-tools not installed (apt-get install tpm2-tools)" }
        if !fm.isExecutableFile(atPath: opensslPath) { return "openssl not installed (apt-get install openssl)" }
        return nil
    }()

    public let directory: String
    public let port: UInt16
    private let process: Process
    private var watchdog: Watchdog
    private let lock = NSLock()
    private var stopped = false

    /// The tctildr configuration of this TPM.
    public var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }

    private init(directory: String, port: UInt16, process: Process, watchdog: Watchdog) {
        self.directory = directory
        self.port = port
        self.process = process
        self.watchdog = watchdog
    }

    deinit { stop() }

    /// Starts a fresh swtpm. Blocks (at most about 30 seconds); call it off Swift's cooperative pool.
    public static func start() throws -> SwtpmFixture {
        if let reason = unavailableReason { throw Failure(description: reason) }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("keystone-swtpm-\(getpid())-\(UUID().uuidString)").path
        var lastError = "no attempt"
        for _ in 0..<8 {
            guard let port = freePortPair() else { lastError = "no free port pair"; continue }
            // The watchdog first, then swtpm, then swtpm's pid to the watchdog: there is no moment at which swtpm
            // runs unwatched (but the one write).
            let watchdog: Watchdog
            do {
                watchdog = try Watchdog.start(directory: directory)
                // Created once the watchdog runs: it removes the directory if this process dies from here on.
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                try? FileManager.default.removeItem(atPath: directory)
                throw error
            }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: swtpmPath)
            process.arguments = ["socket", "--tpm2", "--tpmstate", "dir=\(directory)",
                                 "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1",
                                 "--ctrl", "type=tcp,port=\(port + 1),bindaddr=127.0.0.1",
                                 "--flags", "not-need-init,startup-clear",
                                 "--log", "file=\(directory)/swtpm.log,level=1"]
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            do { try process.run() } catch {
                watchdog.end()
                try? FileManager.default.removeItem(atPath: directory)
                throw Failure(description: "cannot run swtpm: \(error)")
            }
            watchdog.watch(process.processIdentifier)
            let fixture = SwtpmFixture(directory: directory, port: port, process: process, watchdog: watchdog)
            if fixture.waitListening(within: 60) { return fixture }
            lastError = "swtpm did not listen on 127.0.0.1:\(port) (exit status \(process.isRunning ? "running" : "\(process.terminationStatus)")): "
                + ((try? String(contentsOfFile: "\(directory)/swtpm.log", encoding: .utf8)) ?? "")
            fixture.discard()
        }
        try? FileManager.default.removeItem(atPath: directory)
        throw Failure(description: "swtpm could not start: \(lastError)")
    }

    /// Kills swtpm (SIGKILL) and waits for it, keeping the directory: the TPM disappears as a pulled device would.
    /// A new watchdog, with no pid to kill (swtpm's may be reused from now on), keeps removing the directory.
    public func killTPM() throws {
        lock.lock()
        defer { lock.unlock() }
        let next = try Watchdog.start(directory: directory)
        next.watch(nil)
        killProcesses()
        watchdog = next
    }

    /// Stops swtpm (SIGSTOP) without closing anything: its connections stay open, the kernel even accepts new
    /// ones, but nothing is answered, as a wedged TPM behaves. ``resume()`` lets it go on; ``stop()`` and
    /// ``killTPM()`` end it either way (SIGKILL ends a stopped process).
    public func suspend() {
        lock.lock()
        defer { lock.unlock() }
        if !stopped && process.isRunning { kill(process.processIdentifier, SIGSTOP) }
    }

    /// Growth of ``pendingInput()`` below this is no command (at most a few closed connections).
    public static let requestFloor = PendingInput.requestFloor

    /// The bytes sent to the TPM port and the control port that swtpm has not read (``PendingInput``): while it is
    /// suspended, this grows exactly when a client sends it a command (a TCTI may speak to the control port first).
    /// Nil when the kernel's tables cannot be read.
    public func pendingInput() -> Int? {
        guard let tpm = PendingInput.bytes(port: port), let control = PendingInput.bytes(port: port + 1) else { return nil }
        return tpm + control
    }

    /// Lets a ``suspend()``ed swtpm go on (SIGCONT): it answers what it was sent meanwhile.
    public func resume() {
        lock.lock()
        defer { lock.unlock() }
        if !stopped && process.isRunning { kill(process.processIdentifier, SIGCONT) }
    }

    public func stop() {
        lock.lock()
        defer { lock.unlock() }
        if stopped { return }
        stopped = true
        // The watchdog does the work (kills swtpm, removes the directory), so that this process dying at any
        // moment of stop() leaves nothing behind; swtpm is not reaped before, so its pid cannot have been reused.
        watchdog.finish()
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Kills the processes of a failed start, keeping the directory for the next attempt.
    private func discard() {
        lock.lock()
        defer { lock.unlock() }
        stopped = true
        killProcesses()
    }

    /// Ends the watchdog first (so it never acts on a pid that exited and was reused), then swtpm.
    /// Both are signalled before either is waited for (Foundation's waitUntilExit polls, slowly): a test process
    /// killed in between leaves nothing behind. swtpm's pid cannot be reused before the watchdog is dead, as the
    /// watchdog is signalled first.
    private func killProcesses() {
        watchdog.signal()
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        watchdog.end()
        process.waitUntilExit()
    }

    /// Connects to the TPM port until it accepts, swtpm exits, or the deadline passes.
    private func waitListening(within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if !process.isRunning { return false }
            // Ours, not another listener that took the same free port a moment earlier (another swtpm, an etcd
            // member, a TLS server of a test running beside this one): then our swtpm cannot bind and exits, and
            // start() tries another port instead of handing out a TPM that another test may kill.
            if Self.canConnect(port: port), Self.listens(pid: process.processIdentifier, on: port) { return true }
            _ = poll(nil, 0, 10)  // 10 ms between attempts: a refused connect fails at once.
        }
        return false
    }

    /// Whether process `pid` owns the socket listening on 127.0.0.1:`port` (from /proc/net/tcp and /proc/PID/fd).
    private static func listens(pid: Int32, on port: UInt16) -> Bool {
        guard let table = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8) else { return true }
        let local = String(format: ":%04X", port)
        // Lines: "sl local_address rem_address st ... uid timeout inode"; LISTEN is state 0A.
        let inodes = Set(table.split(separator: "\n").dropFirst().compactMap { line -> String? in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 9, fields[1].hasSuffix(local), fields[3] == "0A" else { return nil }
            return String(fields[9])
        })
        guard !inodes.isEmpty else { return false }
        let fdDirectory = "/proc/\(pid)/fd"
        guard let fds = try? FileManager.default.contentsOfDirectory(atPath: fdDirectory) else { return false }
        return fds.contains { fd in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(fdDirectory)/\(fd)"),
                  target.hasPrefix("socket:[") else { return false }
            return inodes.contains(String(target.dropFirst("socket:[".count).dropLast()))
        }
    }

    private static func canConnect(port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// A port P such that P and P+1 were both free a moment ago (the kernel picks P: bind to port 0).
    public static func freePortPair() -> UInt16? {
        for _ in 0..<20 {
            guard let port = bindProbe(0), port < UInt16.max else { continue }
            if bindProbe(port + 1) != nil { return port }
        }
        return nil
    }

    private static func bindProbe(_ port: UInt16) -> UInt16? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { return nil }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { return nil }
        return UInt16(bigEndian: address.sin_port)
    }

    /// The fixture's watchdog: reads swtpm's pid, and on end of file kills it and removes the directory. kill returns
    /// before swtpm is gone, and a dying swtpm may still create a file in the directory: rm -rf is retried (at most
    /// 50 times, 0.1 s apart) until the directory is gone.
    struct Watchdog {
        let shell: ProcessWatchdog

        static func start(directory: String) throws -> Watchdog {
            do {
                return Watchdog(shell: try ProcessWatchdog.start(
                    script: "read -r pid; read -r _; [ -n \"$pid\" ] && kill -KILL \"$pid\" 2>/dev/null; "
                        + "n=0; while [ -e \"$1\" ] && [ $n -lt 50 ]; do rm -rf -- \"$1\"; [ -e \"$1\" ] && sleep 0.1; "
                        + "n=$((n+1)); done", name: "swtpm-watchdog", arguments: [directory]))
            } catch {
                throw Failure(description: "\(error)")
            }
        }

        /// Gives the watchdog the pid to kill (nil: none, it will only remove the directory).
        func watch(_ pid: Int32?) { shell.send(pid.map(String.init) ?? "") }

        /// Closes the watchdog's input: it kills swtpm and removes the directory. Waits for it (at most about 5 s).
        func finish() {
            try? shell.input.close()
            let deadline = Date().addingTimeInterval(5)
            while shell.process.isRunning && Date() < deadline { _ = poll(nil, 0, 5) }
            shell.end()
        }

        /// Sends SIGKILL to the watchdog (it never acts after this).
        func signal() { shell.signal() }

        /// Kills the watchdog without letting it act, and waits for it.
        func end() { shell.end() }
    }

    /// Runs a tool with a deadline (`timeout`), its output in a file. Returns its status and output.
    public func run(_ executable: String, _ arguments: [String], within seconds: Int = 120,
             environment: [String: String]? = nil) throws -> (status: Int32, output: String) {
        // In the fixture's directory, which the watchdog removes even if this process dies.
        let outputPath = "\(directory)/tool-\(UUID().uuidString).out"
        guard FileManager.default.createFile(atPath: outputPath, contents: nil),
              let output = FileHandle(forWritingAtPath: outputPath) else {
            throw Failure(description: "cannot create \(outputPath)")
        }
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        process.arguments = ["-s", "KILL", "\(seconds)", executable] + arguments
        if let environment { process.environment = environment }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = output
        try process.run()
        process.waitUntilExit()
        try? output.close()
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        return (process.terminationStatus, text)
    }
}

/// Runs `body` on a thread of its own (never on Swift's cooperative pool: TPM calls block), in the calling task, so
/// an `#expect` in `body` is recorded against the running test.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await onDedicatedThread(stackSize: 1 << 20, body)
}

/// Starts a fresh swtpm for `body` (on a thread of its own) and stops it after.
public func withSwtpm<T: Sendable>(_ body: @escaping @Sendable (SwtpmFixture) throws -> T) async throws -> T {
    try await onThread {
        let fixture = try SwtpmFixture.start()
        defer { fixture.stop() }
        return try body(fixture)
    }
}
#endif
