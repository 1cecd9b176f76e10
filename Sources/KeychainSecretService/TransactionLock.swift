import Foundation
import KeychainEngine
#if canImport(Glibc)
import Glibc
#endif

/// Serializes the transactions of Keystone processes on one Secret Service collection: `flock(2)` on a file in
/// `$XDG_RUNTIME_DIR/keystone` (else the temporary directory, in a directory only this user can enter), named after
/// the bus address and the collection. Readers share it; a writer holds it alone.
///
/// The Secret Service has no transactions; without this, two processes adding the same primary key at once could
/// both find it free and both create it. Other programs (secret-tool, Python keyring) do not take it.
///
/// - Important: `flock(2)` locks belong to the open file, which every thread of the process shares: the lock keeps
///   other processes out, not other threads. ``SecretServiceStorage`` takes its own mutex first.
final class TransactionLock: Sendable {
    let path: String
    private let descriptor: Int32
    /// How long a transaction waits for another process's before giving up.
    let timeout: Duration

    init(busAddress: String, collection: String, timeout: Duration = .seconds(30)) throws {
        let environment = ProcessInfo.processInfo.environment
        let base: String
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            base = runtime + "/keystone"
        } else {
            base = NSTemporaryDirectory() + "/keystone-\(getuid())"
        }
        if mkdir(base, 0o700) != 0 && errno != EEXIST {
            throw EngineError(Status.io, "cannot create the lock directory \(base): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard lstat(base, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == getuid(), info.st_mode & 0o022 == 0 else {
            throw EngineError(Status.io, "the lock directory \(base) is not a directory owned by this user and closed to others; remove it")
        }
        path = base + "/secret-service-\(Self.digest(busAddress + "\n" + collection)).lock"
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            throw EngineError(Status.io, "cannot open the lock file \(path): \(String(cString: strerror(errno)))")
        }
        self.timeout = timeout
    }

    deinit { close(descriptor) }

    /// FNV-1a, 64 bits, in hex: a name, not a secret.
    static func digest(_ text: String) -> String { String(fnv1a(text), radix: 16) }

    /// Runs `body` holding the lock (shared or exclusive).
    ///
    /// - Throws: `errSecNotAvailable` when another process holds it past ``timeout``.
    func withLock<T>(exclusive: Bool, _ body: () throws -> T) throws -> T {
        let operation = exclusive ? LOCK_EX : LOCK_SH
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var pause: UInt32 = 200
        while flock(descriptor, operation | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                throw EngineError(Status.io, "cannot lock \(path): \(String(cString: strerror(errno)))")
            }
            guard clock.now < deadline else {
                throw EngineError(Status.notAvailable, "another Keystone process has held the Secret Service keychain for more than \(timeout) (lock file \(path))")
            }
            usleep(pause)  // backoff, up to 20 ms: the holder is talking to the Secret Service
            pause = min(pause * 2, 20_000)
        }
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }
}
