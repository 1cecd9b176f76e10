#if os(Linux)
import Foundation
import Glibc
import ProcessWatchdog

/// A REAL tpm2-abrmd (the TPM2 access broker and resource manager) in front of a ``SwtpmFixture``, on a private
/// D-Bus session bus of its own (`dbus-daemon --session`), for tests whose TPM clients run in CHILD processes.
///
/// The tabrmd TCTI finds the broker through `DBUS_SESSION_BUS_ADDRESS` and nothing else (its configuration takes a
/// bus type and a name, not an address), and a test process shared by every suite must not `setenv`: clients get
/// ``clientEnvironment`` instead (the bus address, `KEYSTONE_TPM_TCTI` and tpm2-tools' `TPM2TOOLS_TCTI` naming
/// ``tcti``).
///
/// Ready means answering a TPM command: `tpm2_getcap` through the broker, in a bounded loop that gives up at once
/// when the broker exits (its log is in the error). ``stop()`` (or `deinit`) ends the broker and the bus; a watchdog
/// shell (``ProcessWatchdog``) kills both when the test process dies first. Stop the broker before its swtpm (whose
/// directory holds the logs).
public final class TPMBrokerFixture: @unchecked Sendable {
    // @unchecked Sendable: `stopped` is reached only while `lock` is held.
    public static let abrmdPath = "/usr/sbin/tpm2-abrmd"
    public static let dbusDaemonPath = "/usr/bin/dbus-daemon"

    /// The tabrmd TCTI library (libtss2-tcti-tabrmd0), where tctildr looks for it, or nil.
    public static let tctiLibrary: String? = {
        let name = "libtss2-tcti-tabrmd.so.0"
        let multiarch = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib")) ?? [])
            .filter { $0.hasSuffix("-linux-gnu") }.map { "/usr/lib/\($0)" }
        return (multiarch + ["/usr/lib64", "/usr/lib"]).map { "\($0)/\(name)" }
            .first { FileManager.default.fileExists(atPath: $0) }
    }()

    /// Why the fixture cannot run here, or nil. Tests skip with it.
    public static let unavailableReason: String? = {
        if let reason = SwtpmFixture.unavailableReason { return reason }
        if !FileManager.default.isExecutableFile(atPath: abrmdPath) { return "tpm2-abrmd not installed (apt-get install tpm2-abrmd)" }
        if tctiLibrary == nil { return "the tabrmd TCTI is not installed (apt-get install libtss2-tcti-tabrmd0)" }
        if !FileManager.default.isExecutableFile(atPath: dbusDaemonPath) { return "dbus-daemon not installed (apt-get install dbus-daemon)" }
        return nil
    }()

    /// The TCTI configuration of the broker, for its clients (with ``clientEnvironment``).
    public let tcti = "tabrmd:bus_type=session"
    /// The private session bus's address.
    public let busAddress: String
    /// The broker's log (standard output and error).
    public let logPath: String
    private let bus: Process
    private let broker: Process
    private let watchdog: ProcessWatchdog
    private let lock = NSLock()
    private var stopped = false

    private init(busAddress: String, logPath: String, bus: Process, broker: Process, watchdog: ProcessWatchdog) {
        self.busAddress = busAddress
        self.logPath = logPath
        self.bus = bus
        self.broker = broker
        self.watchdog = watchdog
    }

    deinit { stop() }

    /// What a client process of the broker needs in its environment: `base` with the bus address and the TCTI
    /// (`KEYSTONE_TPM_TCTI`, `TPM2TOOLS_TCTI`) set.
    public func clientEnvironment(base: [String: String] = ProcessInfo.processInfo.environment) -> [String: String] {
        var environment = base
        environment["DBUS_SESSION_BUS_ADDRESS"] = busAddress
        environment["KEYSTONE_TPM_TCTI"] = tcti
        environment["TPM2TOOLS_TCTI"] = tcti
        environment["TCTI"] = nil
        return environment
    }

    /// Whether the broker still runs.
    public var isRunning: Bool { broker.isRunning }

    /// Starts a bus and a broker in front of `swtpm`, whose device must be closed (swtpm serves one connection at a
    /// time and the broker keeps its own). Blocks (at most about 20 seconds); call it off Swift's cooperative pool.
    public static func start(swtpm: SwtpmFixture) throws -> TPMBrokerFixture {
        if let reason = unavailableReason { throw SwtpmFixture.Failure(description: reason) }
        let watchdog: ProcessWatchdog
        do {
            // Reads pids (one a line) until end of file, then kills them.
            watchdog = try ProcessWatchdog.start(
                script: "pids=; while read -r pid; do pids=\"$pids $pid\"; done; [ -n \"$pids\" ] && kill -KILL $pids 2>/dev/null; exit 0",
                name: "tpm2-abrmd-watchdog", arguments: [])
        } catch {
            throw SwtpmFixture.Failure(description: "\(error)")
        }
        let bus = Process()
        bus.executableURL = URL(fileURLWithPath: dbusDaemonPath)
        bus.arguments = ["--session", "--nofork", "--nopidfile", "--print-address=1"]
        let addressPipe = Pipe()
        bus.standardInput = FileHandle.nullDevice
        bus.standardOutput = addressPipe
        bus.standardError = FileHandle.nullDevice
        do { try bus.run() } catch {
            watchdog.end()
            throw SwtpmFixture.Failure(description: "cannot run dbus-daemon: \(error)")
        }
        watchdog.send(String(bus.processIdentifier))
        // dbus-daemon prints its address once it listens; end of file (it exited) ends the wait.
        var printed = Data()
        while !printed.contains(UInt8(ascii: "\n")) {
            let chunk = addressPipe.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            printed.append(chunk)
        }
        let address = String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        func abandon(_ processes: [Process], _ message: String) -> SwtpmFixture.Failure {
            watchdog.signal()
            for process in processes where process.isRunning { kill(process.processIdentifier, SIGKILL) }
            watchdog.end()
            for process in processes { process.waitUntilExit() }
            return SwtpmFixture.Failure(description: message)
        }
        guard !address.isEmpty else { throw abandon([bus], "dbus-daemon --session printed no address") }

        let logPath = "\(swtpm.directory)/tpm2-abrmd-\(UUID().uuidString).log"
        guard FileManager.default.createFile(atPath: logPath, contents: nil), let log = FileHandle(forWritingAtPath: logPath) else {
            throw abandon([bus], "cannot create \(logPath)")
        }
        defer { try? log.close() }
        let broker = Process()
        broker.executableURL = URL(fileURLWithPath: abrmdPath)
        // --flush-all: swtpm starts empty, but a broker must not count on it. --allow-root: CI runs tests as root.
        broker.arguments = ["--session", "--tcti=\(swtpm.tcti)", "--allow-root", "--flush-all"]
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = address
        broker.environment = environment
        broker.standardInput = FileHandle.nullDevice
        broker.standardOutput = log
        broker.standardError = log
        do { try broker.run() } catch {
            throw abandon([bus], "cannot run tpm2-abrmd: \(error)")
        }
        watchdog.send(String(broker.processIdentifier))
        let fixture = TPMBrokerFixture(busAddress: address, logPath: logPath, bus: bus, broker: broker, watchdog: watchdog)
        // Ready: a TPM command answered through the broker (the name on the bus alone is not enough).
        let deadline = Date().addingTimeInterval(20)
        var last = ""
        while Date() < deadline && broker.isRunning {
            let probe = try swtpm.run("/usr/bin/tpm2_getcap", ["properties-fixed"], within: 10,
                                      environment: fixture.clientEnvironment())
            if probe.status == 0 { return fixture }
            last = probe.output
            _ = poll(nil, 0, 50)
        }
        fixture.stop()
        let brokerLog = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        throw SwtpmFixture.Failure(description: "tpm2-abrmd did not answer through the tabrmd TCTI (\(broker.isRunning ? "running" : "exited \(broker.terminationStatus)")); "
            + "last tpm2_getcap: \(last.suffix(500)); tpm2-abrmd's log: \(brokerLog.suffix(1000))")
    }

    /// Ends the broker and the bus (SIGKILL, then waits) and the watchdog.
    ///
    /// SIGKILL, not SIGTERM: children of Foundation's `Process` inherit the signal mask of the thread that started
    /// them, and the test runner's threads block SIGTERM (seen: tpm2-abrmd and dbus-daemon ignored it and `stop()`
    /// waited forever). Nothing of theirs outlives them: swtpm's state is thrown away with its fixture.
    public func stop() {
        lock.lock()
        defer { lock.unlock() }
        if stopped { return }
        stopped = true
        // Signalled before anything is waited for (a test process killed in between leaves nothing behind); the
        // watchdog first, so that it never acts on pids that exited and were reused.
        watchdog.signal()
        for process in [broker, bus] where process.isRunning { kill(process.processIdentifier, SIGKILL) }
        watchdog.end()
        for process in [broker, bus] { process.waitUntilExit() }
    }
}
#endif
