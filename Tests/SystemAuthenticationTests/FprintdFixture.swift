#if canImport(Glibc)
import Foundation
import ProcessWatchdog
import Glibc
import Testing

/// The REAL fprintd on a private bus, for tests: its own `dbus-daemon` (a system-type bus that allows everything,
/// listening on a socket in a fresh temporary directory), polkit mocked by python3-dbusmock's `polkitd` template
/// (granting fprintd's verify, enroll and setusername actions), and `/usr/libexec/fprintd -t` with libfprint's
/// virtual reader (`FP_VIRTUAL_DEVICE`, driven through a socket in the temporary directory) and its print storage in
/// the temporary directory (`STATE_DIRECTORY`). Nothing of the system's state is read or written.
///
/// Readiness comes from the daemons, never from a fixed wait: `dbus-daemon --print-address` prints the address once
/// it listens, and `gdbus wait --timeout 30` returns once polkit's and fprintd's bus names are owned.
/// ``stop()`` (or `deinit`) ends every process it started and removes the directory.
final class FprintdFixture: @unchecked Sendable {
    // @unchecked Sendable: the variables (processes, stopped) are reached only while `lock` is held.
    /// Why the fixture cannot run here, or nil. Tests skip with it.
    static let unavailableReason: String? = {
        let fm = FileManager.default
        if !fm.isExecutableFile(atPath: fprintdPath) { return "fprintd not installed (apt-get install fprintd)" }
        for (tool, package) in [("/usr/bin/dbus-daemon", "dbus-daemon"), ("/usr/bin/gdbus", "libglib2.0-bin"),
                                ("/usr/bin/python3", "python3")] where !fm.isExecutableFile(atPath: tool) {
            return "\(tool) not installed (apt-get install \(package))"
        }
        let dbusmock = ["/usr/lib/python3/dist-packages/dbusmock/templates/polkitd.py",
                        "/usr/local/lib/python3/dist-packages/dbusmock/templates/polkitd.py"]
        if !dbusmock.contains(where: { fm.fileExists(atPath: $0) }) {
            return "python3-dbusmock (with its polkitd template) not installed (apt-get install python3-dbusmock)"
        }
        return nil
    }()

    static let fprintdPath = "/usr/libexec/fprintd"
    /// Every wait of the fixture ends within this, so a broken daemon fails a test instead of hanging it.
    static let deadline: TimeInterval = 30

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The temporary directory: `bus.socket`, `device.socket` (the virtual reader, present while fprintd has the
    /// device open, that is while it is claimed), `state` (fprintd's prints), the logs.
    let root: String
    /// The private bus's address.
    let busAddress: String
    /// The virtual reader's command socket.
    var deviceSocket: String { "\(root)/device.socket" }

    private let lock = NSLock()
    private var processes: [Child] = []
    private var stopped = false
    /// Kills every process of the fixture and removes ``root`` when the test process dies without ``stop()``: it
    /// collects their pids on its standard input and acts on end of file, which the kernel delivers when the test
    /// process exits, however it exits.
    private let watchdog: ProcessWatchdog

    private init(root: String, busAddress: String, watchdog: ProcessWatchdog) {
        self.root = root
        self.busAddress = busAddress
        self.watchdog = watchdog
    }

    /// The fixture's watchdog: collects the pids of its processes, and on end of file kills them and removes the
    /// directory.
    enum Watchdog {
        static func start(root: String) throws -> ProcessWatchdog {
            try ProcessWatchdog.start(
                script: "pids=; while read -r pid; do pids=\"$pids $pid\"; done; "
                    + "[ -n \"$pids\" ] && kill -KILL $pids 2>/dev/null; rm -rf -- \"$1\"",
                name: "fprintd-watchdog", arguments: [root])
        }
    }

    deinit { stop() }

    /// Starts the bus and, when `daemon` is true, polkit's mock and fprintd on it.
    static func start(daemon: Bool = true) throws -> FprintdFixture {
        if let reason = unavailableReason { throw Failure(description: reason) }
        var template = Array("/tmp/keystone-fprintd-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw Failure(description: "mkdtemp failed: errno \(errno)") }
        let root = String(cString: made)
        try FileManager.default.createDirectory(atPath: "\(root)/state", withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: "\(root)/run", withIntermediateDirectories: false)
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>unix:path=\(root)/bus.socket</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_type="method_call"/>
                <allow send_type="signal"/>
                <allow send_type="method_return"/>
                <allow send_type="error"/>
                <allow receive_type="method_call"/>
                <allow receive_type="signal"/>
                <allow receive_type="method_return"/>
                <allow receive_type="error"/>
                <allow eavesdrop="true"/>
              </policy>
            </busconfig>

            """
        let watchdog: ProcessWatchdog
        do { watchdog = try Watchdog.start(root: root) } catch {
            try? FileManager.default.removeItem(atPath: root)
            throw error
        }
        try config.write(toFile: "\(root)/bus.conf", atomically: false, encoding: .utf8)
        try helperScript.write(toFile: "\(root)/helper.py", atomically: false, encoding: .utf8)

        // The bus: its address on standard output once it listens.
        let bus = Process()
        bus.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        bus.arguments = ["--config-file=\(root)/bus.conf", "--nofork", "--print-address=1"]
        let addressPipe = Pipe()
        bus.standardOutput = addressPipe
        bus.standardError = try logFile("\(root)/dbus-daemon.log")
        let busChild = Child(bus)
        do { try bus.run() } catch {
            watchdog.end()
            try? FileManager.default.removeItem(atPath: root)
            throw error
        }
        watchdog.send("\(bus.processIdentifier)")
        closeLogs(of: bus)
        let address: String
        do {
            address = try readLine(addressPipe.fileHandleForReading.fileDescriptor,
                                   within: deadline, what: "dbus-daemon's address")
        } catch {
            watchdog.end()
            busChild.end()
            try? FileManager.default.removeItem(atPath: root)
            throw error
        }
        let fixture = FprintdFixture(root: root, busAddress: address, watchdog: watchdog)
        fixture.processes.append(busChild)
        guard daemon else { return fixture }
        do {
            try fixture.startDaemons()
        } catch {
            fixture.stop()
            throw error
        }
        return fixture
    }

    /// The environment of every child process: the private bus as the system bus.
    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for key in environment.keys where key.hasPrefix("DBUS_") || key.hasPrefix("FP_") { environment[key] = nil }
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = busAddress
        return environment
    }

    private func startDaemons() throws {
        // polkit: dbusmock's polkitd template, then fprintd's actions allowed.
        let polkit = Process()
        polkit.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        polkit.arguments = ["-m", "dbusmock", "--system", "--template", "polkitd"]
        polkit.environment = environment
        polkit.standardOutput = try Self.logFile("\(root)/polkitd.log")
        polkit.standardError = polkit.standardOutput
        try launch(polkit)
        try waitForName("org.freedesktop.PolicyKit1")
        let allowed = "['net.reactivated.fprint.device.verify', 'net.reactivated.fprint.device.enroll', "
            + "'net.reactivated.fprint.device.setusername']"
        try gdbus(["call", "--address", busAddress, "--dest", "org.freedesktop.PolicyKit1",
                   "--object-path", "/org/freedesktop/PolicyKit1/Authority",
                   "--method", "org.freedesktop.DBus.Mock.SetAllowed", allowed])

        // fprintd: test mode (-t: no idle exit), the virtual reader only, its state in the temporary directory.
        let fprintd = Process()
        fprintd.executableURL = URL(fileURLWithPath: Self.fprintdPath)
        fprintd.arguments = ["-t"]
        var environment = environment
        environment["FP_VIRTUAL_DEVICE"] = deviceSocket
        environment["FP_DRIVERS_WHITELIST"] = "virtual_device"
        environment["FP_DRIVERS_ALLOWLIST"] = "virtual_device"
        environment["STATE_DIRECTORY"] = "\(root)/state"
        environment["RUNTIME_DIRECTORY"] = "\(root)/run"
        environment["G_DEBUG"] = "fatal-criticals"
        environment["G_MESSAGES_DEBUG"] = "all"
        fprintd.environment = environment
        fprintd.standardOutput = try Self.logFile("\(root)/fprintd.log")
        fprintd.standardError = fprintd.standardOutput
        try launch(fprintd)
        try waitForName("net.reactivated.Fprint")
    }

    /// Starts python3-dbusmock's polkitd template on the bus (nothing allowed) and waits for its name: for a bus
    /// started with `daemon: false`.
    func startPolkitMock() throws {
        let polkit = Process()
        polkit.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        polkit.arguments = ["-m", "dbusmock", "--system", "--template", "polkitd"]
        polkit.environment = environment
        polkit.standardOutput = try Self.logFile("\(root)/polkitd.log")
        polkit.standardError = polkit.standardOutput
        try launch(polkit)
        try waitForName("org.freedesktop.PolicyKit1")
    }

    /// Calls a method of the polkit mock's control interface (`org.freedesktop.DBus.Mock`): `SetAllowed`,
    /// `SimulateHang`, `GetMethodCalls`, ...; returns gdbus's text of the reply.
    @discardableResult
    func polkitMock(_ method: String, _ arguments: String...) throws -> String {
        try gdbus(["call", "--address", busAddress, "--dest", "org.freedesktop.PolicyKit1",
                   "--object-path", "/org/freedesktop/PolicyKit1/Authority",
                   "--method", "org.freedesktop.DBus.Mock.\(method)"] + arguments)
    }

    /// Watches the polkit mock's `MethodCalled` signals (dbusmock emits one as each call arrives).
    func polkitMonitor() throws -> Monitor {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/gdbus")
        process.arguments = ["monitor", "--address", busAddress, "--dest", "org.freedesktop.PolicyKit1"]
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let child = try launch(process)
        let monitor = Monitor(child: child, fd: output.fileHandleForReading.fileDescriptor, pipe: output)
        _ = try monitor.waitFor("is owned by")
        return monitor
    }

    /// Makes the watchdog kill `pid` too if the test process dies (a process the test started itself).
    func adopt(_ pid: pid_t) {
        watchdog.send("\(pid)")
    }

    /// Starts `executable` as one of the fixture's processes (``stop()`` ends it), its output in `log` under ``root``.
    @discardableResult
    func start(_ executable: String, _ arguments: [String], log: String, environment extra: [String: String] = [:],
               standardInput: FileHandle? = nil, standardOutput: Pipe? = nil) throws -> Child {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment.merging(extra) { $1 }
        let logHandle = try Self.logFile("\(root)/\(log)")
        process.standardOutput = standardOutput ?? logHandle
        process.standardError = logHandle
        if let standardInput { process.standardInput = standardInput }
        return try launch(process)
    }

    /// Ends every process (SIGTERM, then SIGKILL after the deadline) and removes the directory. Idempotent.
    func stop() {
        let processes: [Child] = lock.withLock {
            if stopped { return [] }
            stopped = true
            defer { self.processes = [] }
            return self.processes
        }
        if !processes.isEmpty { watchdog.end() }
        for child in processes.reversed() { child.end() }
        if !processes.isEmpty { try? FileManager.default.removeItem(atPath: root) }
    }

    /// Stops fprintd only (the bus stays): a daemon that goes away.
    func stopFprintd() {
        let daemon: Child? = lock.withLock { processes.first { $0.process.executableURL?.path == Self.fprintdPath } }
        daemon?.end()
    }

    // MARK: - Driving the daemon

    /// Sends one command to the virtual reader (`SCAN <id>`, `SLEEP <ms>`, …) and returns once the reader took it
    /// (it closes the connection after queueing the command). The socket exists only while the device is claimed.
    func send(_ command: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array(deviceSocket.utf8CString)
        guard path.count <= MemoryLayout.size(ofValue: address.sun_path) else {
            throw Failure(description: "socket path too long: \(deviceSocket)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            path.withUnsafeBytes { raw.copyMemory(from: $0) }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else { throw Failure(description: "connect \(deviceSocket): errno \(errno)") }
        let bytes = Array(command.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw Failure(description: "write to the virtual reader: errno \(errno)") }
            sent += n
        }
        // Until the reader closes the connection: then the command is queued (or done).
        let end = Date().addingTimeInterval(Self.deadline)
        var buffer = [UInt8](repeating: 0, count: 256)
        while true {
            try Self.waitReadable(fd, until: end, what: "the virtual reader to take \"\(command)\"")
            let n = read(fd, &buffer, buffer.count)
            if n == 0 { return }
            if n < 0 && errno != EINTR { throw Failure(description: "read from the virtual reader: errno \(errno)") }
        }
    }

    /// Enrolls `finger` for the calling user (`""`: root here) through the real daemon's D-Bus Enroll API: a Python
    /// client claims the device, queues one `SCAN <scanID>` per enroll stage on the virtual reader, runs
    /// EnrollStart until `enroll-completed`, and releases the device.
    func enroll(finger: String, scanID: String, user: String = "") throws {
        let output = try run("/usr/bin/python3", ["\(root)/helper.py", "enroll", busAddress, user, finger, scanID,
                                                  deviceSocket])
        guard output.status == 0 else {
            throw Failure(description: "enrolling \(finger) failed (\(output.status)): \(output.text)\n\(log("fprintd.log"))")
        }
    }

    /// Another process (a Python D-Bus client) claims the device until ``ClaimHolder/release()``.
    func holdClaim(user: String = "") throws -> ClaimHolder {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["\(root)/helper.py", "hold", busAddress, user]
        process.environment = environment
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = try Self.logFile("\(root)/holder.log")
        let child = try launch(process)
        let line = try Self.readLine(output.fileHandleForReading.fileDescriptor, within: Self.deadline,
                                     what: "the other client's claim")
        guard line == "claimed" else { throw Failure(description: "the other client said \(line)") }
        return ClaimHolder(child: child, input: input)
    }

    /// A process holding the device.
    struct ClaimHolder {
        let child: Child
        let input: Pipe

        /// Releases the claim (the holder reads end of file on its standard input) and waits for the process.
        func release() {
            try? input.fileHandleForWriting.close()
            _ = child.wait(within: FprintdFixture.deadline)
            child.end()
        }
    }

    /// Watches fprintd's signals (`gdbus monitor`): ``waitFor(_:)`` returns once a line containing a text arrived.
    func monitor() throws -> Monitor {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/gdbus")
        process.arguments = ["monitor", "--address", busAddress, "--dest", "net.reactivated.Fprint"]
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let child = try launch(process)
        let monitor = Monitor(child: child, fd: output.fileHandleForReading.fileDescriptor, pipe: output)
        // gdbus monitor says who owns the name once its match rules are in place.
        _ = try monitor.waitFor("is owned by")
        return monitor
    }

    /// Watches the method calls made to fprintd's devices (`dbus-monitor`, the bus allows monitoring): ``Monitor/waitFor(_:)``
    /// returns once a line containing a text (`member=VerifyStop`) arrived.
    func methodMonitor(interface: String = "net.reactivated.Fprint.Device") throws -> Monitor {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-monitor")
        process.arguments = ["--address", busAddress, "type='method_call',interface='\(interface)'"]
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let child = try launch(process)
        let monitor = Monitor(child: child, fd: output.fileHandleForReading.fileDescriptor, pipe: output)
        // dbus-monitor becomes a monitor (BecomeMonitor): the bus takes its name away, which it prints.
        _ = try monitor.waitFor("member=NameLost")
        return monitor
    }

    final class Monitor: @unchecked Sendable {
        // @unchecked Sendable: its properties are constants (`pipe`, not Sendable, is only held to keep `fd` open).
        let child: Child
        let fd: Int32
        let pipe: Pipe

        init(child: Child, fd: Int32, pipe: Pipe) {
            self.child = child
            self.fd = fd
            self.pipe = pipe
        }

        func waitFor(_ text: String) throws -> String {
            let end = Date().addingTimeInterval(FprintdFixture.deadline)
            while true {
                let line = try FprintdFixture.readLine(fd, within: end.timeIntervalSinceNow, what: "\"\(text)\" from gdbus monitor")
                if line.contains(text) { return line }
            }
        }

        func stop() { child.end() }
    }

    /// The end of a log in ``root``, for failure messages.
    func log(_ name: String) -> String {
        let text = (try? String(contentsOfFile: "\(root)/\(name)", encoding: .utf8)) ?? ""
        return String(text.suffix(4000))
    }

    // MARK: - Processes

    /// Starts `process` as one of the fixture's (``stop()`` ends it).
    @discardableResult
    private func launch(_ process: Process) throws -> Child {
        let child = Child(process)
        return try lock.withLock {
            if stopped { throw Failure(description: "the fixture is stopped") }
            try process.run()
            Self.closeLogs(of: process)
            processes.append(child)
            watchdog.send("\(process.processIdentifier)")
            return child
        }
    }

    /// Closes the parent's descriptors of a started process's log files (the child has its own copies), so a test
    /// process running many fixtures does not keep one descriptor per log.
    static func closeLogs(of process: Process) {
        for stream in [process.standardOutput, process.standardError] {
            if let handle = stream as? FileHandle, !(stream is Pipe) { try? handle.close() }
        }
    }

    /// A started process, and whether it exited (told by Foundation's termination handler).
    ///
    /// Children inherit the test process's signal mask, in which SIGTERM is blocked (Foundation's Process does not
    /// reset it): ``end()`` therefore kills with SIGKILL. Nothing of theirs outlives the temporary directory.
    final class Child: @unchecked Sendable {
        // @unchecked Sendable: `exited` is reached only while `condition` is locked; `process` is a constant.
        let process: Process
        private let condition = NSCondition()
        private var exited = false

        init(_ process: Process) {
            self.process = process
            process.terminationHandler = { [weak self, condition] _ in
                condition.lock()
                self?.exited = true
                condition.broadcast()
                condition.unlock()
            }
        }

        /// Waits for the process to exit on its own, within `seconds`; false if it did not.
        func wait(within seconds: TimeInterval) -> Bool {
            let end = Date().addingTimeInterval(seconds)
            condition.lock()
            defer { condition.unlock() }
            while !exited {
                if !condition.wait(until: end) { return exited }
            }
            return true
        }

        /// Kills the process (SIGKILL) unless it exited, and waits for it. Idempotent.
        func end() {
            condition.lock()
            let running = !exited
            if running { kill(process.processIdentifier, SIGKILL) }
            condition.unlock()
            if running && !wait(within: FprintdFixture.deadline) {
                Issue.record("pid \(process.processIdentifier) did not end after SIGKILL")
            }
        }
    }

    func waitForName(_ name: String) throws {
        do {
            try gdbus(["wait", "--address", busAddress, "--timeout", "\(Int(Self.deadline))", name])
        } catch {
            throw Failure(description: "\(name) did not appear: \(error)\nfprintd.log: \(log("fprintd.log"))\n"
                + "polkitd.log: \(log("polkitd.log"))")
        }
    }

    @discardableResult
    func gdbus(_ arguments: [String]) throws -> String {
        let output = try run("/usr/bin/gdbus", arguments)
        guard output.status == 0 else {
            throw Failure(description: "gdbus \(arguments.joined(separator: " ")) failed: \(output.text)")
        }
        return output.text
    }

    /// Runs a process to its end (killed after the deadline) with the fixture's environment: status and output.
    func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, text: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        let outputPath = "\(root)/run-\(UUID().uuidString).log"
        let output = try Self.logFile(outputPath)
        process.standardOutput = output
        process.standardError = output
        let child = try launch(process)
        if !child.wait(within: Self.deadline) {
            child.end()
            try? output.close()
            throw Failure(description: "\(executable) \(arguments.joined(separator: " ")) did not end within \(Self.deadline) s")
        }
        try? output.close()
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(atPath: outputPath)
        return (process.terminationStatus, text)
    }

    private static func logFile(_ path: String) throws -> FileHandle {
        guard FileManager.default.createFile(atPath: path, contents: nil),
              let handle = FileHandle(forWritingAtPath: path) else {
            throw Failure(description: "cannot create \(path)")
        }
        return handle
    }

    private static func waitReadable(_ fd: Int32, until end: Date, what: String) throws {
        while true {
            let remaining = end.timeIntervalSinceNow
            guard remaining > 0 else { throw Failure(description: "timed out waiting for \(what)") }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, Int32(min(remaining * 1000, 60_000)) + 1)
            if ready > 0 { return }
            if ready < 0 && errno != EINTR { throw Failure(description: "poll: errno \(errno)") }
        }
    }

    /// One line from `fd` (byte by byte: nothing after it is consumed), within `seconds`.
    static func readLine(_ fd: Int32, within seconds: TimeInterval, what: String) throws -> String {
        let end = Date().addingTimeInterval(seconds)
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            try waitReadable(fd, until: end, what: what)
            let n = read(fd, &byte, 1)
            if n == 0 { throw Failure(description: "end of output while waiting for \(what)") }
            if n < 0 { if errno == EINTR { continue }; throw Failure(description: "read: errno \(errno)") }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
    }
}

/// The Python D-Bus client the fixture uses as "another process": `enroll` and `hold`.
private let helperScript = #"""
import socket
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib


def send(path, command):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(path)
    s.sendall(command.encode())
    while s.recv(64):
        pass
    s.close()


def main():
    mode, address = sys.argv[1], sys.argv[2]
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(address)
    manager = dbus.Interface(bus.get_object('net.reactivated.Fprint', '/net/reactivated/Fprint/Manager'),
                             'net.reactivated.Fprint.Manager')
    path = manager.GetDefaultDevice(timeout=30)
    obj = bus.get_object('net.reactivated.Fprint', path)
    device = dbus.Interface(obj, 'net.reactivated.Fprint.Device')
    if mode == 'hold':
        device.Claim(sys.argv[3], timeout=30)
        print('claimed', flush=True)
        sys.stdin.read()
        device.Release(timeout=30)
        return 0
    if mode == 'enroll':
        user, finger, scan_id, socket_path = sys.argv[3:7]
        device.Claim(user, timeout=30)
        stages = int(dbus.Interface(obj, 'org.freedesktop.DBus.Properties').Get(
            'net.reactivated.Fprint.Device', 'num-enroll-stages', timeout=30))
        # Queued before EnrollStart: the reader consumes one per stage.
        for _ in range(stages):
            send(socket_path, 'SCAN ' + scan_id)
        loop = GLib.MainLoop()
        result = {}

        def status(value, done):
            print('EnrollStatus', value, bool(done), flush=True)
            if done:
                result['value'] = str(value)
                loop.quit()

        device.connect_to_signal('EnrollStatus', status)
        device.EnrollStart(finger, timeout=30)
        GLib.timeout_add_seconds(30, loop.quit)
        loop.run()
        device.Release(timeout=30)
        return 0 if result.get('value') == 'enroll-completed' else 1
    return 2


sys.exit(main())
"""#
#endif
