import Foundation
import KeychainEngine
#if os(Linux)
import CKeyring
import Glibc
#endif

/// A client of this user's unlock agent (`keystone agent`): where the kernel keyring is refused (a container's seccomp
/// profile), the agent keeps the unlock cache's entries for later processes.
///
/// Every call checks the agent's directory (``UnlockAgentLocation/checkDirectory()``) and socket (a socket owned by
/// this user), connects, checks that the agent runs as this user (`SO_PEERCRED`), and waits at most
/// ``UnlockAgentProtocol/deadlineMilliseconds`` on each socket operation: a stopped agent never hangs a call. An
/// agent that did not answer in time is not asked again by this process for ``backoff`` seconds.
package struct UnlockAgentClient: Sendable {
    package let location: UnlockAgentLocation

    /// How long an agent that missed its deadline is left alone by this process.
    package static let backoff: TimeInterval = 60

    package init(location: UnlockAgentLocation = .resolve()) { self.location = location }

    /// The client of the agent the environment names; nil when the agent is turned off (`KEYSTONE_AGENT=0`).
    package static var configured: UnlockAgentClient? {
        UnlockAgentLocation.isDisabled() ? nil : UnlockAgentClient()
    }

    /// Sockets whose agent missed a deadline, with when: skipped until ``backoff`` has passed.
    private static let unresponsive = UnresponsiveAgents()

    /// Forgets that the agent at this location missed a deadline (a new agent was just started there).
    package func forgetMissedDeadline() { Self.unresponsive.forget(location.socket) }

    /// The agent's pid, when it answers.
    package func ping() throws(UnlockAgentError) -> Int32 {
        let answer = try exchange(.ping)
        guard answer.count == 5 else { throw UnlockAgentError(.refused, "the unlock agent at \(location) answered a ping with \(answer.count) bytes") }
        return Int32(bitPattern: UInt32(answer[1]) << 24 | UInt32(answer[2]) << 16 | UInt32(answer[3]) << 8 | UInt32(answer[4]))
    }

    /// Stores `payload` under `name` for `ttl` seconds (replacing an entry of that name).
    package func put(name: String, payload: [UInt8], ttl: UInt32) throws(UnlockAgentError) {
        _ = try exchange(.put(name: name, ttl: ttl, payload: payload))
    }

    /// The payload stored under `name`, nil when there is none (or it expired).
    package func get(name: String) throws(UnlockAgentError) -> [UInt8]? {
        var answer = try exchange(.get(name: name), absentIsNil: true)
        guard answer.count > 1 else { return nil }
        defer { ckagentWipe(&answer) }
        return Array(answer[1...])
    }

    /// Removes the entry `name`, if any.
    package func remove(name: String) throws(UnlockAgentError) {
        _ = try exchange(.remove(name: name), absentIsNil: true)
    }

    /// Whether a socket exists where the agent would listen (no connection is made): cheap, for paths that must
    /// not pay a connection attempt where no agent was ever started.
    package var socketExists: Bool {
        var info = stat()
        return lstat(location.socket, &info) == 0
    }

    /// One request and its answer (the status byte first). An `absent` answer is returned as `[absent]` when
    /// `absentIsNil`, else thrown.
    private func exchange(_ request: UnlockAgentProtocol.Request, absentIsNil: Bool = false) throws(UnlockAgentError) -> [UInt8] {
        #if os(Linux)
        if Self.unresponsive.skips(location.socket) {
            throw UnlockAgentError(.unresponsive, "the unlock agent at \(location) did not answer a moment ago (stopped?); not asked again for \(Int(Self.backoff)) s")
        }
        try location.checkDirectory()
        var info = stat()
        guard lstat(location.socket, &info) == 0 else {
            throw UnlockAgentError(.notRunning, "no unlock agent listens at \(location)")
        }
        guard info.st_mode & S_IFMT == S_IFSOCK, info.st_uid == geteuid() else {
            throw UnlockAgentError(.unsafeDirectory, "\(location) is not a socket of yours (uid \(info.st_uid)): refused. Remove it, or set KEYSTONE_AGENT_SOCKET to a path in a directory only you can use")
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw UnlockAgentError(.unusable, "no socket for the unlock agent: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        _ = ckagent_set_timeouts(fd, UnlockAgentProtocol.deadlineMilliseconds)
        var connected: Int32 = -1
        repeat {
            connected = UnlockAgentProtocol.withAddress(location.socket) { connect(fd, $0, $1) }
        } while connected != 0 && errno == EINTR
        guard connected == 0 else {
            let code = errno
            if code == EAGAIN || code == ETIMEDOUT || code == EINPROGRESS { throw markUnresponsive("connecting") }
            throw UnlockAgentError(.notRunning, "no unlock agent answers at \(location) (\(String(cString: strerror(code))))")
        }
        var peerUID: UInt32 = 0
        guard ckagent_peer_credentials(fd, &peerUID, nil) == 0, peerUID == geteuid() else {
            throw UnlockAgentError(.unsafeDirectory, "the unlock agent at \(location) runs as uid \(peerUID), not as you (uid \(geteuid())): refused")
        }
        var frame = request.encoded()
        defer { ckagentWipe(&frame) }
        guard UnlockAgentProtocol.writeAll(fd, frame) else {
            let code = errno
            if code == EAGAIN || code == EWOULDBLOCK { throw markUnresponsive("sending to it") }
            throw UnlockAgentError(.notRunning, "the unlock agent at \(location) closed the connection (\(String(cString: strerror(code))))")
        }
        guard let answer = UnlockAgentProtocol.readFrame(fd), let first = answer.first,
              let status = UnlockAgentProtocol.Status(rawValue: first) else {
            let code = errno
            if code == EAGAIN || code == EWOULDBLOCK { throw markUnresponsive("waiting for its answer") }
            throw UnlockAgentError(.refused, "the unlock agent at \(location) gave no valid answer (\(String(cString: strerror(code))))")
        }
        switch status {
        case .ok: return answer
        case .absent where absentIsNil: return [first]
        case .absent: throw UnlockAgentError(.refused, "the unlock agent at \(location) has no such entry")
        case .malformed: throw UnlockAgentError(.refused, "the unlock agent at \(location) refused the request as malformed")
        case .refused: throw UnlockAgentError(.unsafeDirectory, "the unlock agent at \(location) refused this user")
        }
        #else
        throw UnlockAgentError(.notRunning, "the unlock agent exists on Linux only")
        #endif
    }

    private func markUnresponsive(_ doing: String) -> UnlockAgentError {
        Self.unresponsive.mark(location.socket)
        KeystoneLog.logger.warning("the unlock agent did not answer within its deadline; treated as unavailable",
                                   metadata: ["socket": "\(location.socket)", "while": "\(doing)",
                                              "deadline_ms": "\(UnlockAgentProtocol.deadlineMilliseconds)"])
        return UnlockAgentError(.unresponsive, "the unlock agent at \(location) did not answer within \(UnlockAgentProtocol.deadlineMilliseconds) ms while \(doing) (is it stopped?): treated as unavailable. Continue it (kill -CONT) or stop it and unlock again")
    }
}

/// Overwrites an array's bytes with zeros.
package func ckagentWipe(_ bytes: inout [UInt8]) {
    #if os(Linux)
    bytes.withUnsafeMutableBytes { if let base = $0.baseAddress { ckagent_wipe(base, $0.count) } }
    #else
    for i in bytes.indices { bytes[i] = 0 }
    #endif
}

/// Agents that missed a deadline, by socket, with the monotonic time they did.
private final class UnresponsiveAgents: @unchecked Sendable {
    // @unchecked Sendable: `missed` is reached only under `lock`.
    private let lock = NSLock()
    private var missed: [String: UInt64] = [:]

    private static var now: UInt64 { DispatchTime.now().uptimeNanoseconds }

    func mark(_ socket: String) { lock.withLock { missed[socket] = Self.now } }

    func forget(_ socket: String) { lock.withLock { missed[socket] = nil } }

    func skips(_ socket: String) -> Bool {
        lock.withLock {
            guard let when = missed[socket] else { return false }
            if Self.now - when < UInt64(UnlockAgentClient.backoff * 1_000_000_000) { return true }
            missed[socket] = nil
            return false
        }
    }
}
