import Foundation
import KeychainEngine
#if os(Linux)
import Glibc
#endif

/// Where this user's unlock agent listens (`keystone agent`), and the checks that keep a planted directory out.
///
/// The socket is `$KEYSTONE_AGENT_SOCKET` when set, else `$XDG_RUNTIME_DIR/keystone/agent.sock`, else
/// `<TMPDIR or /tmp>/keystone-<uid>/agent.sock`. Its directory must be a real directory (not a symbolic link) owned
/// by this user and closed to group and others (mode 0700): anything else could be a directory another user planted
/// to catch the keys, and is refused.
package struct UnlockAgentLocation: Sendable, Equatable, CustomStringConvertible {
    /// The socket's path.
    package let socket: String

    package init(socket: String) { self.socket = socket }

    /// The directory holding the socket.
    package var directory: String { (socket as NSString).deletingLastPathComponent }

    package var description: String { socket }

    /// The location the environment names (see the type's description).
    package static func resolve(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> UnlockAgentLocation {
        if let explicit = environment["KEYSTONE_AGENT_SOCKET"], !explicit.isEmpty {
            return UnlockAgentLocation(socket: URL(fileURLWithPath: explicit).standardizedFileURL.path)
        }
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            return UnlockAgentLocation(socket: URL(fileURLWithPath: runtime).appendingPathComponent("keystone/agent.sock").standardizedFileURL.path)
        }
        var temporary = environment["TMPDIR"] ?? "/tmp"
        if !temporary.hasPrefix("/") { temporary = "/tmp" }
        return UnlockAgentLocation(socket: URL(fileURLWithPath: temporary).appendingPathComponent("keystone-\(geteuid())/agent.sock").standardizedFileURL.path)
    }

    /// Whether the agent is turned off (`KEYSTONE_AGENT=0`): it is then neither started nor asked.
    package static func isDisabled(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        ["0", "no", "off", "false"].contains(environment["KEYSTONE_AGENT"]?.lowercased() ?? "")
    }

    /// What fixes an unusable agent directory, for messages.
    private var fix: String {
        "Remove it if you did not make it (rm -r \(directory)), or point KEYSTONE_AGENT_SOCKET (or XDG_RUNTIME_DIR) at a directory only you can use (mkdir -m 700)"
    }

    /// Checks that the socket's directory is this user's own: a directory, not a symbolic link, owned by this user,
    /// with no permission for group or others.
    ///
    /// - Throws: ``UnlockAgentError`` `.unsafeDirectory` naming the path and the fix; `.notRunning` when the
    ///   directory does not exist.
    package func checkDirectory() throws(UnlockAgentError) {
        var info = stat()
        guard lstat(directory, &info) == 0 else {
            let code = errno
            if code == ENOENT { throw UnlockAgentError(.notRunning, "no unlock agent: \(directory) does not exist") }
            throw UnlockAgentError(.unsafeDirectory, "the unlock agent's directory \(directory) cannot be examined (\(String(cString: strerror(code))))")
        }
        let type = info.st_mode & S_IFMT
        if type == S_IFLNK {
            throw UnlockAgentError(.unsafeDirectory, "the unlock agent's directory \(directory) is a symbolic link, refused (another user may have planted it). \(fix)")
        }
        guard type == S_IFDIR else {
            throw UnlockAgentError(.unsafeDirectory, "the unlock agent's directory \(directory) is not a directory. \(fix)")
        }
        guard info.st_uid == geteuid() else {
            throw UnlockAgentError(.unsafeDirectory, "the unlock agent's directory \(directory) belongs to uid \(info.st_uid), not to you (uid \(geteuid())): refused, another user may have planted it. \(fix)")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw UnlockAgentError(.unsafeDirectory, "the unlock agent's directory \(directory) is open to group or others (mode \(String(info.st_mode & 0o7777, radix: 8))): refused. \(fix)")
        }
    }

    /// Creates the socket's directory (mode 0700, its parent must exist) when it is missing, then checks it
    /// (``checkDirectory()``). An existing directory is never repaired: a wrong one is refused.
    ///
    /// - Throws: ``UnlockAgentError`` `.unsafeDirectory`, or `.unusable` when it cannot be created or the path is
    ///   too long for a Unix socket.
    package func prepareDirectory() throws(UnlockAgentError) {
        guard socket.utf8.count < 108 else {
            throw UnlockAgentError(.unusable, "the unlock agent's socket path \(socket) is longer than a Unix socket allows (107 bytes): set KEYSTONE_AGENT_SOCKET to a shorter path")
        }
        if mkdir(directory, 0o700) != 0 {
            let code = errno
            if code != EEXIST {
                throw UnlockAgentError(.unusable, "the unlock agent's directory \(directory) cannot be created (\(String(cString: strerror(code)))): set XDG_RUNTIME_DIR or KEYSTONE_AGENT_SOCKET to a directory you can write")
            }
        }
        try checkDirectory()
    }
}

/// Why the unlock agent could not be used.
package struct UnlockAgentError: Error, Sendable, CustomStringConvertible {
    package enum Kind: Sendable, Equatable {
        /// No agent listens there (no directory, no socket, or nobody accepting).
        case notRunning
        /// The agent did not answer within the deadline (a stopped agent): treated as not there.
        case unresponsive
        /// The agent's directory or socket is not this user's own, or the agent runs as another user.
        case unsafeDirectory
        /// The agent refused the request or answered something malformed.
        case refused
        /// The socket cannot be made (a path too long, a directory that cannot be created).
        case unusable
    }

    package let kind: Kind
    package let reason: String

    package init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    package var description: String { reason }

    /// The error as the engine reports it: `errSecWrPerm` for an unsafe directory, `errSecNotAvailable` otherwise.
    package var engineError: EngineError {
        EngineError(kind == .unsafeDirectory ? Status.wrPerm : Status.notAvailable, reason)
    }
}
