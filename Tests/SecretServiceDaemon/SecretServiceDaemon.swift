import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real, private freedesktop Secret Service for tests and benchmarks: its own `dbus-daemon` (a session bus that
/// nothing else uses) and a `gnome-keyring-daemon` on it, with `HOME` and the XDG directories in a fresh temporary
/// directory. Nothing is D-Bus-activated on that bus, so no password prompt can ever appear: a call that would need
/// one fails at once.
///
/// ```swift
/// let daemon = try SecretServiceDaemon.start()
/// defer { daemon.stop() }
/// _ = try daemon.run(["secret-tool", "store", "--label=x", "service", "S", "account", "A"], input: Data("pw".utf8))
/// let lookup = try daemon.run(["secret-tool", "lookup", "service", "S", "account", "A"])   // stdout "pw"
/// ```
///
/// Both daemons share one process group, which ``stop()`` (or `deinit`) kills and reaps. A watchdog process removes
/// them and the directory if the test process dies without stopping them. Linux only: elsewhere
/// ``unavailableReason`` says so and ``start(password:)`` throws.
public final class SecretServiceDaemon: @unchecked Sendable {
    // @unchecked Sendable: the variables (pids, the watchdog pipe, stopped) are reached only while `lock` is held.
    /// Why the daemon cannot start here, or nil when `dbus-daemon`, `gnome-keyring-daemon` and `gdbus` are installed.
    /// Tests skip with this reason: `.enabled(if: SecretServiceDaemon.unavailableReason == nil)`.
    public static var unavailableReason: String? {
        #if canImport(Glibc)
        for (tool, package) in [("dbus-daemon", "dbus"), ("gnome-keyring-daemon", "gnome-keyring"),
                                ("gdbus", "libglib2.0-bin")] where executablePath(tool) == nil {
            return "\(tool) not installed (apt-get install \(package))"
        }
        return nil
        #else
        return "SecretServiceDaemon runs on Linux only"
        #endif
    }

    /// The private bus's address (`unix:path=…,guid=…`), for `gdbus call --address` or `DBUS_SESSION_BUS_ADDRESS`.
    public let busAddress: String
    /// The temporary directory: `home`, `data` (the keyrings are in `data/keyrings`), `runtime`, `config`, `cache`,
    /// the bus's configuration and the daemons' logs (`dbus-daemon.log`, `gnome-keyring-daemon.log`).
    public let root: String
    /// The keyring's password, for ``restartKeyringDaemon(unlock:)``.
    private let password: String
    /// The environment the daemons and ``run(_:input:)`` start from.
    private let baseEnvironment: [String: String]

    /// Guards everything below.
    private let lock = NSLock()
    /// The dbus-daemon's pid, also the process group of both daemons. 0 once stopped.
    private var busPID: pid_t
    /// The gnome-keyring-daemon's pid, 0 while it is not running.
    private var keyringPID: pid_t = 0
    /// The watchdog's pid and the write end of its standard input (-1 when none).
    private var watchdogPID: pid_t = 0
    private var watchdogPipe: Int32 = -1
    private var stopped = false

    /// The environment for child processes (`secret-tool`, `/usr/bin/python3 -m keyring`, `gdbus`): the current
    /// environment with `DBUS_SESSION_BUS_ADDRESS` set to ``busAddress``; `HOME`, `XDG_DATA_HOME`, `XDG_RUNTIME_DIR`,
    /// `XDG_CONFIG_HOME` and `XDG_CACHE_HOME` inside ``root``; `PYTHON_KEYRING_BACKEND` set to
    /// `keyring.backends.SecretService.Keyring`; and `DISPLAY`, `WAYLAND_DISPLAY`, `XDG_SESSION_ID`, the other
    /// `DBUS_*` variables and the `GNOME_KEYRING_*` ones removed.
    public var environment: [String: String] {
        var environment = baseEnvironment
        environment["PYTHON_KEYRING_BACKEND"] = "keyring.backends.SecretService.Keyring"
        return environment
    }

    private init(busAddress: String, root: String, password: String, baseEnvironment: [String: String], busPID: pid_t) {
        self.busAddress = busAddress
        self.root = root
        self.password = password
        self.baseEnvironment = baseEnvironment
        self.busPID = busPID
    }

    deinit { stop() }

    /// An error with what went wrong, and the end of the daemon's log where there is one.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    #if canImport(Glibc)

    /// Starts a private `dbus-daemon` and a `gnome-keyring-daemon` on it, and returns once the Secret Service is
    /// ready: `org.freedesktop.secrets` is owned on the bus and the default collection (alias `default`,
    /// `/org/freedesktop/secrets/collection/login`) exists and is unlocked.
    ///
    /// The bus has its own configuration: a session bus listening on a socket in ``root``, EXTERNAL authentication,
    /// everything allowed, and no service directory, so nothing is ever D-Bus-activated (no prompter: operations that
    /// would prompt fail). The keyring daemon runs as `gnome-keyring-daemon --foreground --components=secrets --unlock`
    /// with `password` on its standard input, which creates (or unlocks) the login keyring.
    ///
    /// Readiness comes from the daemons themselves, never from a fixed wait: `dbus-daemon --print-address=3` writes
    /// the address to a pipe once it listens, and `gnome-keyring-daemon --foreground` closes its standard output once
    /// its initialization is complete (after unlocking the login keyring and claiming its bus names; daemon/gkd-main.c).
    /// Both are then checked over D-Bus. Throws ``Failure`` if that does not happen within 30 seconds.
    ///
    /// - Parameter maxMessageSize: the bus's `max_message_size` (and its `max_incoming_bytes` and
    ///   `max_outgoing_bytes`): by default 1,000,000,000, what a desktop's `/usr/share/dbus-1/session.conf` sets, so
    ///   the bus drops what a desktop's bus drops; nil leaves dbus-daemon's built-in limits (32 MiB messages, as on
    ///   a bus started with a configuration of its own); a small value makes the bus drop large messages.
    public static func start(password: String = "keystone-test", maxMessageSize: Int? = 1_000_000_000) throws -> SecretServiceDaemon {
        if let reason = unavailableReason { throw Failure(description: "SecretServiceDaemon: \(reason)") }
        let deadline = ContinuousClock.now + .seconds(30)
        let root = try makeRoot()
        var busPID: pid_t = 0
        let daemon: SecretServiceDaemon
        do {
            for directory in ["home", "data", "runtime", "config", "cache"] {
                try FileManager.default.createDirectory(atPath: "\(root)/\(directory)", withIntermediateDirectories: false,
                                                        attributes: [.posixPermissions: 0o700])
            }
            let limits = maxMessageSize.map { size in
                ["max_message_size", "max_incoming_bytes", "max_outgoing_bytes"]
                    .map { "  <limit name=\"\($0)\">\(size)</limit>\n" }.joined()
            } ?? ""
            let config = """
                <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
                 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
                <busconfig>
                  <type>session</type>
                  <listen>unix:tmpdir=\(root)/runtime</listen>
                  <auth>EXTERNAL</auth>
                  <policy context="default">
                    <allow send_destination="*" eavesdrop="true"/>
                    <allow eavesdrop="true"/>
                    <allow own="*"/>
                  </policy>
                \(limits)</busconfig>

                """
            try config.write(toFile: "\(root)/dbus.conf", atomically: false, encoding: .utf8)

            var environment = ProcessInfo.processInfo.environment
            for key in environment.keys where key.hasPrefix("DBUS_") || key.hasPrefix("GNOME_KEYRING_")
                || ["DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_ID", "PYTHON_KEYRING_BACKEND"].contains(key) {
                environment[key] = nil
            }
            environment["HOME"] = "\(root)/home"
            environment["XDG_DATA_HOME"] = "\(root)/data"
            environment["KEYSTONE_KEYCHAIN_DIR"] = nil  // it comes before XDG_DATA_HOME
            environment["XDG_RUNTIME_DIR"] = "\(root)/runtime"
            environment["XDG_CONFIG_HOME"] = "\(root)/config"
            environment["XDG_CACHE_HOME"] = "\(root)/cache"

            // dbus-daemon: its own process group, which the keyring daemon joins; the address arrives on fd 3.
            let address = try Pipe2()
            let log = try openFile("\(root)/dbus-daemon.log", O_WRONLY | O_CREAT | O_APPEND)
            defer { close(log) }
            do {
                defer { close(address.write) }
                busPID = try spawn([executablePath("dbus-daemon")!, "--config-file=\(root)/dbus.conf", "--nofork",
                                    "--nopidfile", "--nosyslog", "--print-address=3"],
                                   environment: environment, stdin: nil, stdout: log, stderr: log, fd3: address.write)
            }
            defer { close(address.read) }
            let printed = try readPipe(address.read, until: deadline, stopAtNewline: true)
            let busAddress = String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !busAddress.isEmpty else {
                throw Failure(description: "dbus-daemon exited without printing its address\(logTail("\(root)/dbus-daemon.log"))")
            }
            environment["DBUS_SESSION_BUS_ADDRESS"] = busAddress
            daemon = SecretServiceDaemon(busAddress: busAddress, root: root, password: password,
                                         baseEnvironment: environment, busPID: busPID)
        } catch {
            if busPID > 0 {
                kill(-busPID, SIGKILL)
                reap(busPID)
            }
            try? FileManager.default.removeItem(atPath: root)
            throw error
        }
        // From here on the object owns the processes and the directory.
        do {
            try daemon.startWatchdog()
            try daemon.startKeyringDaemon(unlock: true, deadline: deadline)
            return daemon
        } catch {
            daemon.stop()
            throw error
        }
    }

    /// Runs a tool with ``environment``, its standard input `input` (or empty), and returns its exit status
    /// (128 + the signal's number if a signal ended it), standard output and standard error.
    ///
    /// `arguments[0]` is looked up on `PATH` unless it contains a `/` (use `/usr/bin/python3` for the system Python,
    /// which has `keyring`). The tool runs in a process group of its own, which is killed when the tool exits, and
    /// for at most 60 seconds: a tool that is still running then is killed and ``Failure`` is thrown.
    public func run(_ arguments: [String], input: Data? = nil) throws -> (status: Int32, stdout: Data, stderr: Data) {
        try Self.run(arguments, environment: environment, scratch: root, input: input)
    }

    /// Locks the default collection (the login keyring) with `org.freedesktop.Secret.Service.Lock`, which needs no
    /// prompt, and checks that its `Locked` property is then true.
    public func lockDefaultCollection() throws {
        let collection = try defaultCollection()
        let reply = try call("/org/freedesktop/secrets", "org.freedesktop.Secret.Service.Lock", "[objectpath '\(collection)']")
        guard reply.hasSuffix("objectpath '/')") else {
            throw Failure(description: "Lock of \(collection) asked for a prompt: \(reply)")
        }
        guard try isLocked(collection) else { throw Failure(description: "\(collection) is still unlocked after Lock") }
    }

    /// Kills `gnome-keyring-daemon` with SIGKILL (nothing is saved on the way out), reaps it, and returns once
    /// `org.freedesktop.secrets` has no owner on the bus. Does nothing if it is not running.
    public func killKeyringDaemon() throws {
        lock.lock()
        defer { lock.unlock() }
        try killKeyringDaemonLocked()
    }

    /// Starts `gnome-keyring-daemon` again on the same bus, with the same `HOME` and data directory (killing the
    /// running one first), and returns when it is ready as ``start(password:)`` does.
    ///
    /// - Parameter unlock: true (the default) to unlock the existing login keyring with the password, so the items
    ///   stored before are readable again; false to leave it locked, as a keyring is after a login without the
    ///   password. Gnome-keyring then shows each item's attributes only as `gkr:compat:hashed:NAME` hashes, though
    ///   `SearchItems` by the plain values still finds them.
    public func restartKeyringDaemon(unlock: Bool = true) throws {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { throw Failure(description: "SecretServiceDaemon was stopped") }
        try killKeyringDaemonLocked()
        try startKeyringDaemon(unlock: unlock, deadline: ContinuousClock.now + .seconds(30))
    }

    /// Kills both daemons (their whole process group, with SIGKILL), reaps them, and removes ``root``. Idempotent;
    /// `deinit` calls it too.
    public func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return }
        stopped = true
        // The watchdog first, so that it can never act on a process group number that has been reused.
        if watchdogPID > 0 {
            kill(watchdogPID, SIGKILL)
            Self.reap(watchdogPID)
            watchdogPID = 0
        }
        if watchdogPipe >= 0 {
            close(watchdogPipe)
            watchdogPipe = -1
        }
        if busPID > 0 {
            kill(-busPID, SIGKILL)
            if keyringPID > 0 { kill(keyringPID, SIGKILL) }   // in the group too; in case it could not join it
            Self.reap(busPID)
            if keyringPID > 0 { Self.reap(keyringPID) }
            busPID = 0
            keyringPID = 0
        }
        try? FileManager.default.removeItem(atPath: root)
    }

    // MARK: - The keyring daemon

    /// Starts gnome-keyring-daemon in the bus's process group and waits until it is ready. Called with `lock` held
    /// (or before the object is shared).
    private func startKeyringDaemon(unlock: Bool, deadline: ContinuousClock.Instant) throws {
        let logPath = "\(root)/gnome-keyring-daemon.log"
        let log = try Self.openFile(logPath, O_WRONLY | O_CREAT | O_APPEND)
        defer { close(log) }
        let ready = try Pipe2()
        defer { close(ready.read) }
        var arguments = [Self.executablePath("gnome-keyring-daemon")!, "--foreground", "--components=secrets"]
        var passwordPipe: Pipe2?
        if unlock {
            arguments.append("--unlock")
            // All of standard input is the password, a newline too. Written before the daemon starts, while this
            // process holds the read end (so no SIGPIPE); gnome-keyring reads at most 8 KiB, well within a pipe.
            let bytes = Array(password.utf8)
            guard bytes.count <= 8192 else { throw Failure(description: "the password is longer than 8 KiB") }
            let pipe = try Pipe2()
            passwordPipe = pipe
            let written = bytes.withUnsafeBytes { write(pipe.write, $0.baseAddress, $0.count) }
            close(pipe.write)
            guard written == bytes.count else {
                close(pipe.read)
                throw Failure(description: "could not pass the password: errno \(errno)")
            }
        }
        do {
            defer {
                close(ready.write)
                if let passwordPipe { close(passwordPipe.read) }
            }
            var environment = baseEnvironment
            // No system bus: gnome-keyring watches logind there to quit when a real session closes.
            environment["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=\(root)/runtime/no-system-bus"
            keyringPID = try Self.spawn(arguments, environment: environment, stdin: passwordPipe?.read,
                                        stdout: ready.write, stderr: log, group: busPID)
        }
        // Standard output reaches end of file when the daemon has finished initializing (it then points it at its
        // standard error) or when it dies.
        _ = try Self.readPipe(ready.read, until: deadline, stopAtNewline: false)
        if Self.hasExited(keyringPID) {
            Self.reap(keyringPID)
            keyringPID = 0
            throw Failure(description: "gnome-keyring-daemon exited while starting\(Self.logTail(logPath))")
        }
        // Normally owned already; `gdbus wait` returns at once then, and waits on NameOwnerChanged otherwise.
        let seconds = max(1, Int((deadline - .now).components.seconds))
        let wait = try run(["gdbus", "wait", "--address", busAddress, "--timeout", "\(seconds)", "org.freedesktop.secrets"])
        guard wait.status == 0 else {
            throw Failure(description: "org.freedesktop.secrets did not appear on the bus: "
                + String(decoding: wait.stderr, as: UTF8.self) + Self.logTail(logPath))
        }
        let collection = try defaultCollection()
        if unlock, try isLocked(collection) {
            throw Failure(description: "\(collection) is locked after starting with the password (wrong password?)"
                + Self.logTail(logPath))
        }
    }

    private func killKeyringDaemonLocked() throws {
        guard keyringPID > 0 else { return }
        kill(keyringPID, SIGKILL)
        Self.reap(keyringPID)
        keyringPID = 0
        // The bus drops the name when it notices the closed connection: ask until it has (each ask is a process
        // start, which paces the loop).
        let deadline = ContinuousClock.now + .seconds(10)
        while try call("/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner", "org.freedesktop.secrets",
                       destination: "org.freedesktop.DBus") == "(true,)" {
            guard ContinuousClock.now < deadline else {
                throw Failure(description: "org.freedesktop.secrets still has an owner after killing gnome-keyring-daemon")
            }
        }
    }

    /// The default collection's object path, from `ReadAlias("default")`.
    private func defaultCollection() throws -> String {
        let reply = try call("/org/freedesktop/secrets", "org.freedesktop.Secret.Service.ReadAlias", "default")
        guard let path = reply.split(separator: "'").dropFirst().first, path != "/" else {
            throw Failure(description: "no default collection: ReadAlias(\"default\") returned \(reply)")
        }
        return String(path)
    }

    private func isLocked(_ collection: String) throws -> Bool {
        try call(collection, "org.freedesktop.DBus.Properties.Get", "org.freedesktop.Secret.Collection", "Locked")
            == "(<true>,)"
    }

    /// `gdbus call` on the private bus; its reply, trimmed.
    private func call(_ object: String, _ method: String, _ arguments: String...,
                      destination: String = "org.freedesktop.secrets") throws -> String {
        let result = try run(["gdbus", "call", "--address", busAddress, "--timeout", "10", "--dest", destination,
                              "--object-path", object, "--method", method] + arguments)
        guard result.status == 0 else {
            throw Failure(description: "\(method) on \(object) failed: "
                + String(decoding: result.stderr, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return String(decoding: result.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A `sh` that waits for end of file on its standard input, whose write end only this process holds (close on
    /// exec), then kills the daemons' process group and removes the directory: what happens if this process dies
    /// without ``stop()``. It has a process group of its own, so a Ctrl-C to the test run does not reach it.
    private func startWatchdog() throws {
        let pipe = try Pipe2()
        defer { close(pipe.read) }
        let devNull = try Self.openFile("/dev/null", O_WRONLY)
        defer { close(devNull) }
        watchdogPID = try Self.spawn(["/bin/sh", "-c", "read -r line; kill -KILL \"-$1\"; rm -rf -- \"$2\"",
                                      "secret-service-watchdog", "\(busPID)", root],
                                     environment: ["PATH": "/usr/bin:/bin"], stdin: pipe.read, stdout: devNull, stderr: devNull)
        watchdogPipe = pipe.write
    }

    // MARK: - Processes

    /// A pipe whose two ends are closed on exec (pipe2 with O_CLOEXEC, so no other spawn can inherit them).
    private struct Pipe2 {
        let read: Int32
        let write: Int32

        init() throws {
            typealias Function = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
            // Glibc's Swift module hides pipe2 (a _GNU_SOURCE function).
            guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "pipe2") else { throw Failure(description: "no pipe2 in libc") }
            var fds: [Int32] = [-1, -1]
            guard unsafeBitCast(symbol, to: Function.self)(&fds, O_CLOEXEC) == 0 else {
                throw Failure(description: "pipe2 failed: errno \(errno)")
            }
            (read, write) = (fds[0], fds[1])
        }
    }

    private static func openFile(_ path: String, _ flags: Int32) throws -> Int32 {
        let fd = open(path, flags | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure(description: "cannot open \(path): errno \(errno)") }
        return fd
    }

    /// posix_spawn: `arguments[0]` resolved on `PATH`; standard input from `stdin` (or /dev/null), output to
    /// `stdout` and `stderr`, `fd3` as descriptor 3, every other descriptor closed; default signal dispositions and
    /// an empty signal mask; a process group of its own (`group` 0) or `group`.
    private static func spawn(_ arguments: [String], environment: [String: String], stdin: Int32?, stdout: Int32,
                              stderr: Int32, fd3: Int32? = nil, group: pid_t = 0) throws -> pid_t {
        guard let path = executablePath(arguments[0]) else { throw Failure(description: "\(arguments[0]) not found") }
        var sources: [Int32] = []
        defer { sources.forEach { close($0) } }
        // Every source above the targets (0...3), so that no dup2 overwrites a later one's source.
        func high(_ fd: Int32) throws -> Int32 {
            let copy = fcntl(fd, F_DUPFD_CLOEXEC, 10)
            guard copy >= 0 else { throw Failure(description: "fcntl(F_DUPFD_CLOEXEC) failed: errno \(errno)") }
            sources.append(copy)
            return copy
        }
        let input: Int32
        if let stdin {
            input = try high(stdin)
        } else {
            let devNull = try openFile("/dev/null", O_RDONLY)
            defer { close(devNull) }
            input = try high(devNull)
        }
        var mapping: [(source: Int32, target: Int32)] = try [(input, 0), (high(stdout), 1), (high(stderr), 2)]
        if let fd3 { mapping.append((try high(fd3), 3)) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (source, target) in mapping { posix_spawn_file_actions_adddup2(&actions, source, target) }
        try closeOthers(&actions, from: Int32(mapping.count))

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        posix_spawnattr_setpgroup(&attributes, group)
        var all = sigset_t(), none = sigset_t()
        sigfillset(&all)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)

        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard status == 0 else {
            throw Failure(description: "cannot start \(path): \(String(cString: strerror(status)))")
        }
        return pid
    }

    /// Closes every descriptor from `first` on in the child: glibc's posix_spawn_file_actions_addclosefrom_np
    /// (2.34+, hidden from Swift like pipe2), else each descriptor open now.
    private static func closeOthers(_ actions: inout posix_spawn_file_actions_t, from first: Int32) throws {
        typealias Function = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") {
            guard unsafeBitCast(symbol, to: Function.self)(&actions, first) == 0 else {
                throw Failure(description: "posix_spawn_file_actions_addclosefrom_np failed")
            }
            return
        }
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
            if let fd = Int32(name), fd >= first { posix_spawn_file_actions_addclose(&actions, fd) }
        }
    }

    /// Reads a pipe until end of file (or, with `stopAtNewline`, a newline), waiting with poll(2) until `deadline`.
    private static func readPipe(_ fd: Int32, until deadline: ContinuousClock.Instant, stopAtNewline: Bool) throws -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let remaining = deadline - .now
            let milliseconds = remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000
            guard milliseconds > 0 else { throw Failure(description: "timed out waiting for a daemon to start") }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(min(milliseconds, Int64(Int32.max))))
            if ready < 0 {
                if errno == EINTR { continue }
                throw Failure(description: "poll failed: errno \(errno)")
            }
            if ready == 0 { continue }   // the deadline check above throws
            let count = read(fd, &buffer, buffer.count)
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw Failure(description: "read failed: errno \(errno)")
            }
            if count == 0 { return data }
            data.append(contentsOf: buffer[0..<count])
            if stopAtNewline, data.contains(UInt8(ascii: "\n")) { return data }
        }
    }

    /// Whether the child has exited (it stays unreaped: WNOWAIT).
    private static func hasExited(_ pid: pid_t) -> Bool {
        var info = siginfo_t()
        let result = waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT)
        return result == 0 ? info.si_signo != 0 : true
    }

    /// Waits for the child and reaps it; its wait status.
    @discardableResult
    private static func reap(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return -1 }
        }
        return status
    }

    /// Waits for the child without reaping it (so its pid, and its process group, stay reserved).
    private static func waitForExit(_ pid: pid_t) {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 {
            if errno != EINTR { return }
        }
    }

    /// A flag shared between a tool's waiter and its timeout.
    private final class Finished: @unchecked Sendable {
        // @unchecked Sendable: the variables are reached only while `lock` is held.
        private let lock = NSLock()
        private var finished = false
        private(set) var timedOut = false

        /// Kills the tool's process group unless it has finished.
        func timeOut(group: pid_t) {
            lock.withLock {
                guard !finished else { return }
                timedOut = true
                kill(-group, SIGKILL)
            }
        }

        func finish() { lock.withLock { finished = true } }
    }

    private static func run(_ arguments: [String], environment: [String: String], scratch: String,
                            input: Data?) throws -> (status: Int32, stdout: Data, stderr: Data) {
        let name = "\(scratch)/run-\(UUID().uuidString)"
        defer { for suffix in ["in", "out", "err"] { unlink("\(name).\(suffix)") } }
        var stdin: Int32?
        if let input {
            try input.write(to: URL(fileURLWithPath: "\(name).in"))
            stdin = try openFile("\(name).in", O_RDONLY)
        }
        defer { if let stdin { close(stdin) } }
        // Files, not pipes: a tool writing much to both can never stall.
        let stdout = try openFile("\(name).out", O_WRONLY | O_CREAT | O_TRUNC)
        defer { close(stdout) }
        let stderr = try openFile("\(name).err", O_WRONLY | O_CREAT | O_TRUNC)
        defer { close(stderr) }
        let pid = try spawn(arguments, environment: environment, stdin: stdin, stdout: stdout, stderr: stderr)

        let finished = Finished()
        let timeout = DispatchWorkItem { finished.timeOut(group: pid) }
        DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: timeout)
        waitForExit(pid)
        finished.finish()
        timeout.cancel()
        kill(-pid, SIGKILL)   // whatever it left in its process group; the zombie still holds the group's number
        let status = reap(pid)

        let output = (try? Data(contentsOf: URL(fileURLWithPath: "\(name).out"))) ?? Data()
        let errors = (try? Data(contentsOf: URL(fileURLWithPath: "\(name).err"))) ?? Data()
        if finished.timedOut {
            throw Failure(description: "\(arguments.joined(separator: " ")) did not finish within 60 seconds: "
                + String(decoding: errors, as: UTF8.self))
        }
        let signal = status & 0x7f
        return (signal == 0 ? (status >> 8) & 0xff : 128 + signal, output, errors)
    }

    // MARK: - Files

    /// A new directory under TMPDIR (or /tmp when that path is long: the bus socket's path must fit in 108 bytes).
    private static func makeRoot() throws -> String {
        var base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        if base.utf8.count > 60 || base.isEmpty { base = "/tmp" }
        var template = Array("\(base.hasSuffix("/") ? String(base.dropLast()) : base)/secret-service.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw Failure(description: "mkdtemp failed: errno \(errno)") }
        return String(cString: made)
    }

    /// The last lines of a log, to append to an error message.
    private static func logTail(_ path: String) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8), !text.isEmpty else { return "" }
        return "\n--- \(path) (end):\n" + text.split(separator: "\n").suffix(20).joined(separator: "\n")
    }

    #else

    /// Not available on this platform: throws ``Failure``.
    public static func start(password: String = "keystone-test", maxMessageSize: Int? = 1_000_000_000) throws -> SecretServiceDaemon {
        throw Failure(description: "SecretServiceDaemon runs on Linux only")
    }

    /// Not available on this platform: throws ``Failure``.
    public func run(_ arguments: [String], input: Data? = nil) throws -> (status: Int32, stdout: Data, stderr: Data) {
        throw Failure(description: "SecretServiceDaemon runs on Linux only")
    }

    /// Not available on this platform: throws ``Failure``.
    public func lockDefaultCollection() throws { throw Failure(description: "SecretServiceDaemon runs on Linux only") }

    /// Not available on this platform: throws ``Failure``.
    public func killKeyringDaemon() throws { throw Failure(description: "SecretServiceDaemon runs on Linux only") }

    /// Not available on this platform: throws ``Failure``.
    public func restartKeyringDaemon(unlock: Bool = true) throws {
        throw Failure(description: "SecretServiceDaemon runs on Linux only")
    }

    /// Does nothing on this platform.
    public func stop() {}

    #endif

    /// The path of an executable: `name` itself if it contains a `/`, else the first match on `PATH`.
    static func executablePath(_ name: String) -> String? {
        if name.contains("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(directory)/\(name)") {
            return "\(directory)/\(name)"
        }
        return nil
    }
}
