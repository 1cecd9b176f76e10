import Foundation
import KeychainEngine
import KeychainSealing
#if os(Linux)
import CKeyring
import Glibc
#endif

// The unlock agent's server: one thread (the process's main thread, never Swift's cooperative pool), one connection
// at a time, a poll(2) loop whose timeout is the next entry's expiry. Entries are opaque bytes (the unlock cache's
// payloads: a date and sealed keys); the agent never interprets, prints or logs them.

#if os(Linux)
/// The descriptor a signal handler writes to, to wake the loop (SIGTERM, SIGINT, SIGHUP end the agent).
nonisolated(unsafe) private var agentWakeFD: Int32 = -1

/// One entry: its bytes in memory locked against swapping (mlock, best effort), wiped when it goes.
private final class LockedEntry {
    let buffer: UnsafeMutableRawBufferPointer
    let count: Int
    /// When it expires, in CLOCK_BOOTTIME nanoseconds (the time a suspended machine slept counts, as for the keyring).
    let expiry: UInt64
    private let locked: Bool

    init(_ bytes: [UInt8], expiry: UInt64) {
        count = bytes.count
        // A page of its own: mlock works on pages, and nothing else shares them.
        self.expiry = expiry
        let size = max(1, (bytes.count + 4095) / 4096) * 4096
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 4096)
        memory.initializeMemory(as: UInt8.self, repeating: 0)
        locked = mlock(memory.baseAddress, size) == 0
        _ = madvise(memory.baseAddress, size, MADV_DONTDUMP)
        bytes.withUnsafeBytes { raw in
            if let source = raw.baseAddress { memory.baseAddress!.copyMemory(from: source, byteCount: raw.count) }
        }
        buffer = memory
    }

    var bytes: [UInt8] { Array(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) }
    var isLocked: Bool { locked }

    deinit {
        ckagent_wipe(buffer.baseAddress, buffer.count)
        if locked { munlock(buffer.baseAddress, buffer.count) }
        buffer.deallocate()
    }
}

/// The agent: listens at its location until it holds no entry any more.
final class AgentServer {
    let location: UnlockAgentLocation
    /// How long the agent waits for its first entry before it exits (nothing was put: its starter failed).
    let startupGrace: UInt64
    private var entries: [String: LockedEntry] = [:]
    private var listener: Int32 = -1
    private var wakeRead: Int32 = -1
    private var socketInode: UInt64 = 0
    private let startedAt = AgentServer.now
    private var heldAnEntry = false

    static var now: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    init(location: UnlockAgentLocation, startupGraceSeconds: UInt64) {
        self.location = location
        self.startupGrace = startupGraceSeconds * 1_000_000_000
    }

    enum Start {
        /// This process listens now.
        case listening
        /// Another agent already answers at the location: nothing to do.
        case alreadyRunning(pid: Int32)
    }

    /// Makes the directory, binds and listens (under a lock file, so that two agents started at once do not both
    /// bind), after checking no live agent answers there already.
    ///
    /// - Throws: ``UnlockAgentError`` for an unsafe directory or a socket that cannot be made.
    func start() throws(UnlockAgentError) -> Start {
        try location.prepareDirectory()
        _ = ckagent_set_undumpable()
        umask(0o077)
        let lockFD = open(location.socket + ".lock", O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard lockFD >= 0 else {
            throw UnlockAgentError(.unusable, "the unlock agent's lock file \(location.socket).lock cannot be opened: \(String(cString: strerror(errno)))")
        }
        defer { close(lockFD) }  // releases the flock: held only while starting
        while flock(lockFD, LOCK_EX) != 0 && errno == EINTR {}
        let client = UnlockAgentClient(location: location)
        var info = stat()
        if lstat(location.socket, &info) == 0 {
            if let pid = try? client.ping() { return .alreadyRunning(pid: pid) }
            // A socket nobody answers on (a dead agent's, or a stopped one's): replaced.
            guard info.st_mode & S_IFMT == S_IFSOCK, info.st_uid == geteuid() else {
                throw UnlockAgentError(.unsafeDirectory, "\(location.socket) exists and is not a socket of yours: refused. Remove it, or set KEYSTONE_AGENT_SOCKET to another path")
            }
            unlink(location.socket)
        }
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw UnlockAgentError(.unusable, "no socket: \(String(cString: strerror(errno)))") }
        let bound = UnlockAgentProtocol.withAddress(location.socket) { bind(listener, $0, $1) }
        guard bound == 0, chmod(location.socket, 0o600) == 0, listen(listener, 64) == 0 else {
            let code = errno
            close(listener)
            throw UnlockAgentError(.unusable, "the unlock agent cannot listen at \(location.socket): \(String(cString: strerror(code)))")
        }
        if lstat(location.socket, &info) == 0 { socketInode = UInt64(info.st_ino) }
        var pipeFDs: [Int32] = [-1, -1]
        if ckagent_pipe(&pipeFDs, 1) == 0 {
            wakeRead = pipeFDs[0]
            agentWakeFD = pipeFDs[1]
            for signalNumber in [SIGTERM, SIGINT, SIGHUP] {
                signal(signalNumber) { _ in
                    var byte: UInt8 = 1
                    _ = write(agentWakeFD, &byte, 1)
                }
            }
        }
        signal(SIGPIPE, SIG_IGN)
        // A starter may have blocked them (a test runner, a shell's job control): the agent must hear them.
        var stopSignals = sigset_t()
        sigemptyset(&stopSignals)
        for signalNumber in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&stopSignals, signalNumber) }
        pthread_sigmask(SIG_UNBLOCK, &stopSignals, nil)
        return .listening
    }

    /// Serves until the agent holds no entry any more (the last one removed or expired; or the start-up grace passed
    /// with none put), or a signal ends it. Every entry is wiped and the socket removed on the way out.
    func serve() {
        defer { shutDown() }
        while true {
            purgeExpired()
            if entries.isEmpty {
                if heldAnEntry {
                    KeystoneLog.logger.info("the unlock agent holds no entry any more; exiting")
                    return
                }
                if Self.now >= startedAt + startupGrace {
                    KeystoneLog.logger.info("the unlock agent was given no entry; exiting")
                    return
                }
            }
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            let result = poll(&fds, nfds_t(wakeRead >= 0 ? 2 : 1), nextTimeoutMilliseconds())
            if result < 0 && errno == EINTR { continue }
            if fds[1].revents != 0 {
                KeystoneLog.logger.info("the unlock agent was asked to stop")
                return
            }
            if fds[0].revents & Int16(POLLIN) != 0 {
                let connection = ckagent_accept(listener)
                if connection >= 0 {
                    handle(connection)
                    close(connection)
                }
            }
        }
    }

    private func nextTimeoutMilliseconds() -> Int32 {
        let now = Self.now
        let next = entries.values.map(\.expiry).min() ?? startedAt + startupGrace
        guard next > now else { return 0 }
        return Int32(min((next - now) / 1_000_000 + 1, 3_600_000))
    }

    private func purgeExpired() {
        let now = Self.now
        for (name, entry) in entries where entry.expiry <= now { entries[name] = nil }
    }

    /// One request on `connection`: only from this user (SO_PEERCRED), with the socket's deadline on each read and
    /// write so that a stopped client cannot hold the agent.
    private func handle(_ connection: Int32) {
        _ = ckagent_set_timeouts(connection, UnlockAgentProtocol.deadlineMilliseconds)
        var uid: UInt32 = 0
        var pid: Int32 = 0
        guard ckagent_peer_credentials(connection, &uid, &pid) == 0, uid == geteuid() else {
            KeystoneLog.logger.warning("the unlock agent refused a connection from another user", metadata: ["uid": "\(uid)", "pid": "\(pid)"])
            _ = UnlockAgentProtocol.writeAll(connection, UnlockAgentProtocol.frame([UnlockAgentProtocol.Status.refused.rawValue]))
            return
        }
        guard var body = UnlockAgentProtocol.readFrame(connection) else { return }
        defer { ckagentWipe(&body) }
        guard let request = UnlockAgentProtocol.Request.decode(body) else {
            _ = UnlockAgentProtocol.writeAll(connection, UnlockAgentProtocol.frame([UnlockAgentProtocol.Status.malformed.rawValue]))
            return
        }
        var answer: [UInt8]
        switch request {
        case .ping:
            let me = UInt32(bitPattern: getpid())
            answer = [UnlockAgentProtocol.Status.ok.rawValue, UInt8(me >> 24), UInt8((me >> 16) & 0xff), UInt8((me >> 8) & 0xff), UInt8(me & 0xff)]
        case .put(let name, let ttl, var payload):
            let entry = LockedEntry(payload, expiry: Self.now + UInt64(max(ttl, 1)) * 1_000_000_000)
            ckagentWipe(&payload)
            if !entry.isLocked { KeystoneLog.logger.notice("an entry could not be locked in memory (RLIMIT_MEMLOCK?); it may be swapped out") }
            entries[name] = entry
            heldAnEntry = true
            KeystoneLog.logger.debug("entry stored", metadata: ["ttl": "\(ttl)"])
            answer = [UnlockAgentProtocol.Status.ok.rawValue]
        case .get(let name):
            if let entry = entries[name], entry.expiry > Self.now {
                answer = [UnlockAgentProtocol.Status.ok.rawValue] + entry.bytes
            } else {
                answer = [UnlockAgentProtocol.Status.absent.rawValue]
            }
        case .remove(let name):
            answer = [entries.removeValue(forKey: name) == nil ? UnlockAgentProtocol.Status.absent.rawValue : UnlockAgentProtocol.Status.ok.rawValue]
        }
        var frame = UnlockAgentProtocol.frame(answer)
        _ = UnlockAgentProtocol.writeAll(connection, frame)
        ckagentWipe(&answer)
        ckagentWipe(&frame)
    }

    private func shutDown() {
        entries.removeAll()  // each entry wipes its memory as it goes
        if listener >= 0 { close(listener) }
        var info = stat()
        // Only our own socket: a newer agent that replaced a stopped one keeps its socket.
        if lstat(location.socket, &info) == 0, UInt64(info.st_ino) == socketInode { unlink(location.socket) }
    }
}
#endif
