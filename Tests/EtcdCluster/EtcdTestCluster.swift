#if os(Linux)
import Foundation
import Glibc
import ProcessWatchdog

/// A REAL etcd cluster for tests and benchmarks: Debian's `etcd` (3.4) members on free 127.0.0.1 ports, their data,
/// logs and certificates under a fresh temporary directory.
///
/// Each member listens on two ports of its own (clients, peers), found by binding to port 0. Another cluster starting
/// at the same moment (tests run in parallel in one process) may take a port between the probe and etcd's bind: the
/// member then exits with "address already in use" and the whole cluster starts again on new ports (at most 5 times).
///
/// Timings are short so that tests are quick (`--heartbeat-interval 50 --election-timeout 500`, milliseconds); the
/// limits a storage must live with keep etcd's defaults: a request is at most 1.5 MiB (`--max-request-bytes`
/// 1572864) and a transaction has at most 128 operations (`--max-txn-ops`).
///
/// Members can be killed (SIGKILL) and restarted on the same ports and data directory, or paused (SIGSTOP: a member
/// that hangs, a partition as its clients see it) and resumed. With ``Options/tls`` clients must use https and present
/// a client certificate (`--client-cert-auth`); peers keep plain http. ``enableAuthentication(rootPassword:)`` turns
/// on etcd's user authentication.
///
/// ``stop()`` (or `deinit`) kills every member and removes the directory. A watchdog shell, whose standard input is a
/// close-on-exec pipe only this process writes to, does the same when the test process dies before that: etcd never
/// outlives the tests. The watchdog kills only a pid whose command line still names this cluster's directory, so a
/// pid that exited and was reused is never touched.
///
/// Every method blocks (processes are started and waited for): call them off Swift's cooperative pool.
public final class EtcdTestCluster: @unchecked Sendable {
    // @unchecked Sendable: the variables (members, stopped, rootPassword) are reached only while `lock` is held.
    /// Why the cluster could not start or a command failed.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The members' configuration.
    public struct Options: Sendable {
        /// How many members (default 3).
        public var members: Int
        /// When true, clients must use https with a client certificate signed by the cluster's CA (etcd
        /// `--client-cert-auth`); peers stay plain http. Default false: plain http.
        public var tls: Bool
        /// etcd's `--max-txn-ops` (operations in one transaction); nil: etcd's default, 128.
        public var maxTxnOps: Int?
        /// etcd's `--quota-backend-bytes` (the database's quota, after which etcd raises NOSPACE); nil: etcd's default,
        /// 2 GiB. ``setQuotaBackendBytes(_:)`` changes it for members started or restarted later.
        public var quotaBackendBytes: Int?

        /// - Parameters:
        ///   - members: How many members (at least 1).
        ///   - tls: Whether clients must use https with a client certificate.
        ///   - maxTxnOps: etcd's `--max-txn-ops`; nil keeps etcd's default (128).
        ///   - quotaBackendBytes: etcd's `--quota-backend-bytes`; nil keeps etcd's default (2 GiB).
        public init(members: Int = 3, tls: Bool = false, maxTxnOps: Int? = nil, quotaBackendBytes: Int? = nil) {
            self.members = members
            self.tls = tls
            self.maxTxnOps = maxTxnOps
            self.quotaBackendBytes = quotaBackendBytes
        }
    }

    /// The PEM files a client of a TLS cluster needs, under `directory/tls`.
    ///
    /// The client certificate's subject is `CN=root`. Note that once authentication is enabled, etcd takes the common
    /// name of a client certificate as the user name of a request that carries no token: a holder of this
    /// certificate is then root without a password.
    public struct TLSFiles: Sendable {
        /// The CA that signed the server and client certificates (trust it to verify the members).
        public let caFile: String
        /// The client certificate (`CN=root`, extended key usage clientAuth).
        public let clientCertificateFile: String
        /// The client certificate's private key (P-256, unencrypted).
        public let clientKeyFile: String
    }

    public static let etcdPath = "/usr/bin/etcd"
    public static let etcdctlPath = "/usr/bin/etcdctl"
    public static let opensslPath = "/usr/bin/openssl"
    public static let curlPath = "/usr/bin/curl"

    private static let computedUnavailableReason: String? = {
        let fm = FileManager.default
        if !fm.isExecutableFile(atPath: etcdPath) { return "etcd not installed (apt-get install etcd-server)" }
        if !fm.isExecutableFile(atPath: etcdctlPath) { return "etcdctl not installed (apt-get install etcd-client)" }
        if !fm.isExecutableFile(atPath: opensslPath) { return "openssl not installed (apt-get install openssl)" }
        if !fm.isExecutableFile(atPath: curlPath) { return "curl not installed (apt-get install curl)" }
        return nil
    }()

    /// nil when etcd and etcdctl (and openssl and curl, which the cluster uses for certificates and health checks) can
    /// be run; else why not (printed by skipped tests).
    public static var unavailableReason: String? { computedUnavailableReason }

    /// The temporary directory: the members' data directories (`m0`, `m1`…), their logs (`m0.log`…), the
    /// certificates (`tls`).
    public let directory: URL

    private struct Member {
        let name: String
        let clientPort: UInt16
        let peerPort: UInt16
        var process: Process?
        var killed = false
        var paused = false
    }

    private let options: Options
    /// `--quota-backend-bytes` for members started from now on (``setQuotaBackendBytes(_:)``); reached under `lock`.
    private lazy var quotaBackendBytes: Int? = options.quotaBackendBytes
    private let memberCount: Int
    private let token: String
    private var members: [Member]
    private let watchdog: Watchdog
    private let lock = NSLock()
    private var stopped = false
    /// The root password once ``enableAuthentication(rootPassword:)`` ran (the throwaway test cluster's only secret).
    private var rootPassword: String?

    private init(directory: URL, options: Options, token: String, members: [Member], watchdog: Watchdog) {
        self.directory = directory
        self.options = options
        self.memberCount = members.count
        self.token = token
        self.members = members
        self.watchdog = watchdog
    }

    deinit { stop() }

    /// "127.0.0.1:PORT", the client address of each member, in member order.
    public var clientEndpoints: [String] {
        lock.lock()
        defer { lock.unlock() }
        return members.map { "127.0.0.1:\($0.clientPort)" }
    }

    /// Each member's data directory (`directory/mN`), in member order.
    public var dataDirectories: [URL] {
        (0..<memberCount).map { directory.appendingPathComponent("m\($0)", isDirectory: true) }
    }

    /// The CA and client certificate files of a TLS cluster, nil without TLS.
    public var tlsFiles: TLSFiles? {
        guard options.tls else { return nil }
        let tls = directory.appendingPathComponent("tls").path
        return TLSFiles(caFile: "\(tls)/ca.crt", clientCertificateFile: "\(tls)/client.crt",
                        clientKeyFile: "\(tls)/client.key")
    }

    private var scheme: String { options.tls ? "https" : "http" }

    // MARK: - Starting

    /// Starts the members on free 127.0.0.1 ports, their data directories under a fresh temporary directory, and
    /// returns once every member answers `/health` and there is a leader. Blocks (a second or two; at most about
    /// a minute per attempt).
    ///
    /// - Throws: ``Failure`` when etcd is missing, the certificates cannot be made, or the cluster does not become
    ///   healthy (with the tail of the members' logs).
    public static func start(_ options: Options = Options()) throws -> EtcdTestCluster {
        if let reason = unavailableReason { throw Failure(description: "EtcdTestCluster: \(reason)") }
        guard options.members >= 1 else { throw Failure(description: "EtcdTestCluster: at least one member") }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("keystone-etcd-\(getpid())-\(UUID().uuidString)", isDirectory: true)
        // The watchdog first, then the directory: it removes the directory if this process dies from here on.
        let watchdog = try Watchdog.start(directory: directory.path)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            watchdog.end()
            throw Failure(description: "EtcdTestCluster: cannot create \(directory.path): \(error)")
        }
        let token = "keystone-\(UUID().uuidString)"
        var lastError = "no attempt"
        var madeCertificates = false
        for _ in 0..<5 {
            let ports: [UInt16]
            do { ports = try freePorts(2 * options.members) } catch {
                lastError = "\(error)"
                continue
            }
            let members = (0..<options.members).map {
                Member(name: "m\($0)", clientPort: ports[2 * $0], peerPort: ports[2 * $0 + 1])
            }
            let cluster = EtcdTestCluster(directory: directory, options: options, token: token, members: members,
                                          watchdog: watchdog)
            do {
                if options.tls && !madeCertificates {
                    try cluster.makeCertificates()
                    madeCertificates = true
                }
                if try cluster.startMembers() { return cluster }
                lastError = "a port was taken by another process\(cluster.logTail())"
                cluster.discard()
            } catch {
                // Not a port conflict: give up at once.
                cluster.stop()
                throw error
            }
        }
        let failed = EtcdTestCluster(directory: directory, options: options, token: token, members: [],
                                     watchdog: watchdog)
        failed.stop()
        throw Failure(description: "EtcdTestCluster: the cluster did not start after 5 attempts: \(lastError)")
    }

    /// Starts every member and waits for a healthy cluster. Returns false when a member exited because its port was
    /// taken (the caller starts again on other ports).
    private func startMembers() throws -> Bool {
        lock.lock()
        do {
            for index in 0..<memberCount { try launch(index, state: "new") }
        } catch {
            lock.unlock()
            throw error
        }
        let processes = members.map(\.process)
        lock.unlock()
        let deadline = Date().addingTimeInterval(60)
        while true {
            for (index, process) in processes.enumerated() where !(process?.isRunning ?? false) {
                let log = (try? String(contentsOfFile: logPath(index), encoding: .utf8)) ?? ""
                if log.contains("address already in use") { return false }
                throw Failure(description: "EtcdTestCluster: m\(index) exited while starting\(logTail())")
            }
            // Every member healthy, and still running: a member whose port another etcd took exits within
            // milliseconds, long before an election; the second look makes sure the answers were not that etcd's.
            if (0..<memberCount).allSatisfy({ isHealthy($0) }),
               processes.allSatisfy({ $0?.isRunning ?? false }) { return true }
            if Date() >= deadline {
                throw Failure(description: "EtcdTestCluster: the cluster was not healthy within 60 s\(logTail())")
            }
            _ = poll(nil, 0, 20)
        }
    }

    /// Starts member `index` (its log appended to `directory/mN.log`) and gives its pid to the watchdog. Holds the lock.
    private func launch(_ index: Int, state: String) throws {
        let member = members[index]
        let initialCluster = members.map { "\($0.name)=http://127.0.0.1:\($0.peerPort)" }.joined(separator: ",")
        let clientURL = "\(scheme)://127.0.0.1:\(member.clientPort)"
        let peerURL = "http://127.0.0.1:\(member.peerPort)"
        var arguments = [
            "--name", member.name,
            "--data-dir", dataDirectories[index].path,
            "--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
            "--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
            "--initial-cluster", initialCluster,
            "--initial-cluster-token", token,
            "--initial-cluster-state", state,
            "--logger", "zap", "--log-outputs", "stderr",
            "--heartbeat-interval", "50", "--election-timeout", "500",
        ]
        if let maxTxnOps = options.maxTxnOps { arguments += ["--max-txn-ops", String(maxTxnOps)] }
        if let quota = quotaBackendBytes { arguments += ["--quota-backend-bytes", String(quota)] }
        if let tls = tlsFiles {
            let dir = directory.appendingPathComponent("tls").path
            arguments += ["--cert-file", "\(dir)/server.crt", "--key-file", "\(dir)/server.key",
                          "--trusted-ca-file", tls.caFile, "--client-cert-auth"]
        }
        // Appended to, so that a restarted member's log follows its earlier life.
        let fd = open(logPath(index), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure(description: "EtcdTestCluster: cannot open \(logPath(index)): errno \(errno)") }
        let log = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        defer { try? log.close() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.etcdPath)
        process.arguments = arguments
        // No ETCD_* variable of the test's environment reaches etcd.
        process.environment = ["PATH": "/usr/bin:/bin"]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = log
        process.standardError = log
        do { try process.run() } catch {
            throw Failure(description: "EtcdTestCluster: cannot run \(Self.etcdPath): \(error)")
        }
        watchdog.watch(process.processIdentifier)
        members[index].process = process
        members[index].killed = false
        members[index].paused = false
    }

    // MARK: - Faults

    /// Kills member `member` (SIGKILL) and returns once it exited. Its data directory stays; ``restart(member:)``
    /// starts it again.
    ///
    /// When it was the leader, the others have none until they elect one (an election timeout or two, about a
    /// second here): raft drops a proposal made meanwhile, and etcd reports it only after its request timeout (about
    /// 6 s, "request timed out, possibly due to previous leader failure"). Call ``waitUntilHealthy(members:timeout:)``
    /// before expecting writes to succeed.
    public func kill(member: Int) {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped, members.indices.contains(member), let process = members[member].process else { return }
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        members[member].process = nil
        members[member].killed = true
        members[member].paused = false
    }

    /// Stops member `member` (SIGSTOP) without closing anything: its connections stay open, the kernel even accepts
    /// new ones, but it answers nothing, to its clients nor to its peers: a partition as clients see it. Returns once
    /// the kernel reports it stopped. ``resume(member:)`` lets it go on; ``kill(member:)`` and ``stop()`` end it
    /// either way. A paused leader leaves the others leaderless as ``kill(member:)`` does.
    public func pause(member: Int) {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped, members.indices.contains(member), let process = members[member].process, process.isRunning
        else { return }
        let pid = process.processIdentifier
        Glibc.kill(pid, SIGSTOP)
        members[member].paused = true
        // The signal is delivered asynchronously: wait (bounded) for state T in /proc/PID/stat.
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline && Self.processState(pid) != "T" { _ = poll(nil, 0, 1) }
    }

    /// Growth of ``pendingInput(member:)`` below this is no request (at most a few closed connections).
    public static let requestFloor = PendingInput.requestFloor

    /// The bytes clients sent member `member` that it has not read (``PendingInput``): while it is paused, this grows
    /// by a request's size exactly when a client sends it one. Nil when the kernel's tables cannot be read.
    public func pendingInput(member: Int) -> Int? {
        let port = lock.withLock { members.indices.contains(member) ? members[member].clientPort : nil }
        return port.flatMap { PendingInput.bytes(port: $0) }
    }

    /// Lets a paused member go on (SIGCONT): it answers what it was sent meanwhile.
    public func resume(member: Int) {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped, members.indices.contains(member), let process = members[member].process, process.isRunning
        else { return }
        Glibc.kill(process.processIdentifier, SIGCONT)
        members[member].paused = false
    }

    /// Starts a killed member again, on the same ports and data directory (`--initial-cluster-state existing`), and
    /// returns once it serves: it answers `/version`, and, when a majority of the members runs unpaused (a quorum
    /// can exist), `/health` says it is healthy (it has a leader and serves a linearizable read).
    ///
    /// Another process may have taken one of its ports meanwhile (the ports are not reserved): then the member exits
    /// and this throws.
    ///
    /// - Throws: ``Failure`` when the member is running, the cluster was stopped, or the member does not serve within
    ///   60 seconds (with the logs' tail).
    public func restart(member: Int) throws {
        lock.lock()
        guard !stopped else {
            lock.unlock()
            throw Failure(description: "EtcdTestCluster: the cluster was stopped")
        }
        guard members.indices.contains(member) else {
            lock.unlock()
            throw Failure(description: "EtcdTestCluster: no member \(member)")
        }
        if let process = members[member].process, process.isRunning {
            lock.unlock()
            throw Failure(description: "EtcdTestCluster: member \(member) is running; kill it before restarting it")
        }
        do { try launch(member, state: "existing") } catch {
            lock.unlock()
            throw error
        }
        let process = members[member].process
        let quorum = members.filter { $0.process != nil && !$0.paused }.count > members.count / 2
        lock.unlock()
        let deadline = Date().addingTimeInterval(60)
        while !answersVersion(member) {
            if !(process?.isRunning ?? false) {
                throw Failure(description: "EtcdTestCluster: m\(member) exited while restarting\(logTail())")
            }
            if Date() >= deadline {
                throw Failure(description: "EtcdTestCluster: m\(member) did not answer within 60 s\(logTail())")
            }
            _ = poll(nil, 0, 20)
        }
        if quorum { try waitUntilHealthy(members: [member], timeout: max(1, deadline.timeIntervalSinceNow)) }
    }

    /// Sets `--quota-backend-bytes` for the members started from now on (``restart(member:)``): kill and restart each
    /// member to raise the quota of a running cluster, as an operator does.
    public func setQuotaBackendBytes(_ bytes: Int?) {
        lock.lock()
        quotaBackendBytes = bytes
        lock.unlock()
    }

    /// Polls each member's `/health` until it answers healthy (it has a leader and serves a linearizable read).
    ///
    /// - Parameters:
    ///   - members: The members to wait for; nil: every member that is not killed (a paused one is waited for).
    ///   - timeout: The overall limit, in seconds.
    /// - Throws: ``Failure`` with the members still unhealthy and the tail of the logs after `timeout`, or when the
    ///   cluster was stopped.
    public func waitUntilHealthy(members wanted: [Int]? = nil, timeout: TimeInterval = 60) throws {
        lock.lock()
        let isStopped = stopped
        let indices = wanted ?? members.indices.filter { !members[$0].killed }
        let count = members.count
        lock.unlock()
        if isStopped { throw Failure(description: "EtcdTestCluster: the cluster was stopped") }
        if let wrong = indices.first(where: { !(0..<count).contains($0) }) {
            throw Failure(description: "EtcdTestCluster: no member \(wrong)")
        }
        let deadline = Date().addingTimeInterval(timeout)
        var pending = indices
        while true {
            pending = pending.filter { !isHealthy($0) }
            if pending.isEmpty { return }
            if Date() >= deadline {
                throw Failure(description: "EtcdTestCluster: not healthy after \(timeout) s: "
                    + pending.map { "m\($0)" }.joined(separator: ", ") + logTail())
            }
            _ = poll(nil, 0, 20)
        }
    }

    // MARK: - etcdctl

    /// Runs `etcdctl` (API 3) against the cluster and returns its standard output.
    ///
    /// `--endpoints` lists every member's client address unless `arguments` has an `--endpoints` of its own (to talk
    /// to one member); with TLS, `--cacert`, `--cert` and `--key` are added (https endpoints). Once
    /// ``enableAuthentication(rootPassword:)`` ran, the call authenticates as root through `ETCDCTL_USER` in etcdctl's
    /// environment (never its arguments), unless `arguments` has a `--user` or `environment` sets `ETCDCTL_USER`
    /// itself (an empty value: no credentials).
    ///
    /// - Parameters:
    ///   - arguments: etcdctl's command and flags, for example `["put", "key", "value"]`.
    ///   - input: etcdctl's standard input (none: /dev/null).
    ///   - environment: More environment variables for etcdctl (it gets only PATH and ETCDCTL_API=3 besides).
    /// - Returns: etcdctl's standard output.
    /// - Throws: ``Failure`` with etcdctl's standard error when it exits non-zero (or runs longer than 5 minutes).
    @discardableResult
    public func etcdctl(_ arguments: [String], input: Data? = nil, environment: [String: String] = [:]) throws -> String {
        lock.lock()
        let endpoints = members.map { "\(scheme)://127.0.0.1:\($0.clientPort)" }.joined(separator: ",")
        let password = rootPassword
        let isStopped = stopped
        lock.unlock()
        if isStopped { throw Failure(description: "EtcdTestCluster: the cluster was stopped") }
        var flags: [String] = []
        if !arguments.contains(where: { $0 == "--endpoints" || $0.hasPrefix("--endpoints=") }) {
            flags.append("--endpoints=\(endpoints)")
        }
        if let tls = tlsFiles {
            flags += ["--cacert=\(tls.caFile)", "--cert=\(tls.clientCertificateFile)", "--key=\(tls.clientKeyFile)"]
        }
        var variables = ["PATH": "/usr/bin:/bin", "ETCDCTL_API": "3"]
        // The throwaway test cluster's root password, in the environment (not visible in the process list as
        // arguments would be); etcdctl refuses an environment variable and the flag it shadows together.
        if let password, environment["ETCDCTL_USER"] == nil,
           !arguments.contains(where: { $0 == "--user" || $0.hasPrefix("--user=") }) {
            variables["ETCDCTL_USER"] = "root:\(password)"
        }
        variables.merge(environment) { $1 }
        let result = try run(Self.etcdctlPath, flags + arguments, input: input, environment: variables, within: 300)
        guard result.status == 0 else {
            throw Failure(description: "etcdctl \(arguments.joined(separator: " ")) exited with status \(result.status): "
                + result.error)
        }
        return result.output
    }

    /// Turns on etcd's authentication: creates user root with `rootPassword` (role root) and runs `auth enable`.
    /// Later ``etcdctl(_:input:environment:)`` calls authenticate as root.
    ///
    /// The password goes to `etcdctl user add root --interactive=false` on its standard input, never in arguments.
    ///
    /// - Throws: ``Failure`` with etcdctl's standard error when a step fails.
    public func enableAuthentication(rootPassword: String) throws {
        try etcdctl(["user", "add", "root", "--interactive=false"], input: Data((rootPassword + "\n").utf8))
        try etcdctl(["user", "grant-role", "root", "root"])
        try etcdctl(["auth", "enable"])
        lock.lock()
        self.rootPassword = rootPassword
        lock.unlock()
    }

    // MARK: - Stopping

    /// Kills every member and removes the directory. Idempotent; `deinit` does it too.
    public func stop() {
        lock.lock()
        defer { lock.unlock() }
        if stopped { return }
        stopped = true
        // The watchdog does the work (kills the members, removes the directory), so that this process dying at any
        // moment of stop() leaves nothing behind.
        watchdog.finish()
        for index in members.indices {
            guard let process = members[index].process else { continue }
            if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            members[index].process = nil
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Kills the members of a failed start, keeping the directory and the watchdog for the next attempt, and removes
    /// their data directories (made for ports that are given up).
    private func discard() {
        lock.lock()
        defer { lock.unlock() }
        stopped = true
        for index in members.indices {
            guard let process = members[index].process else { continue }
            if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            members[index].process = nil
            try? FileManager.default.removeItem(at: dataDirectories[index])
            try? FileManager.default.removeItem(atPath: logPath(index))
        }
    }

    // MARK: - Health

    private func curlFlags() -> [String] {
        guard let tls = tlsFiles else { return [] }
        return ["--cacert", tls.caFile, "--cert", tls.clientCertificateFile, "--key", tls.clientKeyFile]
    }

    private func clientURL(_ member: Int) -> String {
        lock.lock()
        defer { lock.unlock() }
        return "\(scheme)://127.0.0.1:\(members[member].clientPort)"
    }

    /// `GET /health` answers `{"health":"true"}`: the member has a leader and serves a linearizable read.
    private func isHealthy(_ member: Int) -> Bool {
        guard let result = try? run(Self.curlPath, ["-s", "--max-time", "2"] + curlFlags() + [clientURL(member) + "/health"],
                                    within: 10) else { return false }
        return result.status == 0 && result.output.contains(#""health":"true""#)
    }

    /// `GET /version` answers: the member serves HTTP (leader or not).
    private func answersVersion(_ member: Int) -> Bool {
        guard let result = try? run(Self.curlPath, ["-s", "--max-time", "2"] + curlFlags() + [clientURL(member) + "/version"],
                                    within: 10) else { return false }
        return result.status == 0 && result.output.contains("etcdserver")
    }

    // MARK: - Tools

    private func logPath(_ member: Int) -> String { directory.appendingPathComponent("m\(member).log").path }

    /// The last lines of every member's log, for error messages.
    private func logTail() -> String {
        var text = ""
        for member in 0..<memberCount {
            let log = (try? String(contentsOfFile: logPath(member), encoding: .utf8)) ?? "(no log)"
            text += "\n--- m\(member).log (end) ---\n" + log.split(separator: "\n").suffix(15).joined(separator: "\n")
        }
        return text
    }

    /// `/proc/PID/stat`'s state letter (R, S, T…), nil when unreadable.
    private static func processState(_ pid: Int32) -> Character? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(after: close)...].first { $0 != " " }
    }

    /// Runs a tool under `timeout -s KILL`, its output and error in files of the directory (removed after), its input
    /// written from a thread of its own (a large input cannot block this one).
    private func run(_ executable: String, _ arguments: [String], input: Data? = nil,
                     environment: [String: String] = ["PATH": "/usr/bin:/bin"],
                     within seconds: Int) throws -> (status: Int32, output: String, error: String) {
        let base = directory.appendingPathComponent("tool-\(UUID().uuidString)").path
        guard FileManager.default.createFile(atPath: base + ".out", contents: nil),
              FileManager.default.createFile(atPath: base + ".err", contents: nil),
              let output = FileHandle(forWritingAtPath: base + ".out"),
              let errorFile = FileHandle(forWritingAtPath: base + ".err") else {
            throw Failure(description: "EtcdTestCluster: cannot create \(base).out")
        }
        defer {
            try? FileManager.default.removeItem(atPath: base + ".out")
            try? FileManager.default.removeItem(atPath: base + ".err")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        process.arguments = ["-s", "KILL", "\(seconds)", executable] + arguments
        process.environment = environment
        process.standardOutput = output
        process.standardError = errorFile
        var pipe: Pipe?
        if input != nil {
            pipe = Pipe()
            process.standardInput = pipe
        } else {
            process.standardInput = FileHandle.nullDevice
        }
        do { try process.run() } catch {
            try? output.close()
            try? errorFile.close()
            throw Failure(description: "EtcdTestCluster: cannot run \(executable): \(error)")
        }
        try? output.close()
        try? errorFile.close()
        if let pipe, let input {
            try? pipe.fileHandleForReading.close()
            let writer = pipe.fileHandleForWriting
            let thread = Thread {
                try? writer.write(contentsOf: input)
                try? writer.close()
            }
            thread.start()
        }
        process.waitUntilExit()
        let out = (try? String(contentsOfFile: base + ".out", encoding: .utf8)) ?? ""
        let err = (try? String(contentsOfFile: base + ".err", encoding: .utf8)) ?? ""
        return (process.terminationStatus, out, err)
    }

    /// Makes the cluster's certificates with openssl in `directory/tls`: a CA, a server certificate for IP:127.0.0.1
    /// and DNS:localhost (serverAuth and clientAuth: etcd's JSON gateway connects to its own gRPC server with it),
    /// a client certificate for CN=root. P-256 keys, valid 10 years.
    private func makeCertificates() throws {
        let tls = directory.appendingPathComponent("tls").path
        try FileManager.default.createDirectory(atPath: tls, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        try """
            [server]
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature, keyEncipherment
            extendedKeyUsage = serverAuth, clientAuth
            subjectAltName = IP:127.0.0.1, DNS:localhost
            [client]
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature, keyEncipherment
            extendedKeyUsage = clientAuth

            """.write(toFile: "\(tls)/extensions.cnf", atomically: true, encoding: .utf8)
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        let steps: [[String]] = [
            ["req", "-x509"] + key + ["-keyout", "\(tls)/ca.key", "-out", "\(tls)/ca.crt", "-days", "3650",
             "-subj", "/O=Keystone tests/CN=Keystone etcd test CA",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
            ["req", "-new"] + key + ["-keyout", "\(tls)/server.key", "-out", "\(tls)/server.csr",
             "-subj", "/O=Keystone tests/CN=localhost"],
            ["x509", "-req", "-in", "\(tls)/server.csr", "-CA", "\(tls)/ca.crt", "-CAkey", "\(tls)/ca.key",
             "-set_serial", "2", "-days", "3650", "-out", "\(tls)/server.crt",
             "-extfile", "\(tls)/extensions.cnf", "-extensions", "server"],
            ["req", "-new"] + key + ["-keyout", "\(tls)/client.key", "-out", "\(tls)/client.csr",
             "-subj", "/O=Keystone tests/CN=root"],
            ["x509", "-req", "-in", "\(tls)/client.csr", "-CA", "\(tls)/ca.crt", "-CAkey", "\(tls)/ca.key",
             "-set_serial", "3", "-days", "3650", "-out", "\(tls)/client.crt",
             "-extfile", "\(tls)/extensions.cnf", "-extensions", "client"],
        ]
        for step in steps {
            let result = try run(Self.opensslPath, step, within: 60)
            guard result.status == 0 else {
                throw Failure(description: "EtcdTestCluster: openssl \(step[0]) failed: \(result.error)")
            }
        }
    }

    // MARK: - Ports

    /// `count` distinct ports that were free a moment ago: sockets bound to 127.0.0.1:0, all held open until the
    /// last is bound (so the kernel never hands out one twice), then closed.
    private static func freePorts(_ count: Int) throws -> [UInt16] {
        var sockets: [Int32] = []
        defer { for fd in sockets { close(fd) } }
        var ports: [UInt16] = []
        for _ in 0..<count {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw Failure(description: "socket failed: errno \(errno)") }
            sockets.append(fd)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = 0
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else { throw Failure(description: "bind failed: errno \(errno)") }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let named = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            guard named == 0 else { throw Failure(description: "getsockname failed: errno \(errno)") }
            ports.append(UInt16(bigEndian: address.sin_port))
        }
        return ports
    }

    // MARK: - Watchdog

    /// The cluster's watchdog: reads the members' pids, one a line, and on end of file kills each pid whose command
    /// line still names the cluster's directory (a pid that exited and was reused is left alone), then removes the
    /// directory. kill returns before a member is gone, and a dying member may still write to the directory: rm -rf
    /// is retried (at most 50 times, 0.1 s apart) until the directory is gone.
    struct Watchdog {
        let shell: ProcessWatchdog

        static func start(directory: String) throws -> Watchdog {
            do {
                return Watchdog(shell: try ProcessWatchdog.start(
                    script: "pids=; while read -r pid; do pids=\"$pids $pid\"; done; "
                        + "for pid in $pids; do "
                        + "tr '\\000' '\\n' < \"/proc/$pid/cmdline\" 2>/dev/null | grep -qF -- \"$1\" "
                        + "&& kill -KILL \"$pid\" 2>/dev/null; done; "
                        + "n=0; while [ -e \"$1\" ] && [ $n -lt 50 ]; do rm -rf -- \"$1\"; [ -e \"$1\" ] && sleep 0.1; "
                        + "n=$((n+1)); done",
                    name: "etcd-watchdog", arguments: [directory]))
            } catch {
                throw Failure(description: "EtcdTestCluster: \(error)")
            }
        }

        /// Gives the watchdog a member's pid to kill.
        func watch(_ pid: Int32) { shell.send(String(pid)) }

        /// Closes the watchdog's input: it kills the members and removes the directory. Waits for it (at most about
        /// 5 s).
        func finish() {
            try? shell.input.close()
            let deadline = Date().addingTimeInterval(5)
            while shell.process.isRunning && Date() < deadline { _ = poll(nil, 0, 5) }
            shell.end()
        }

        /// Kills the watchdog without letting it act, and waits for it.
        func end() { shell.end() }
    }
}
#endif
