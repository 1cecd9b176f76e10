import Foundation
import KeychainEngine
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Waiting for another connection's lock, outside the keychain file's mutex.
//
// The file's own connection runs with SQLite's busy timeout at 0: a statement that needs a lock another connection
// (another process, or another instance in this one) holds fails at once with SQLITE_BUSY. The operation then
// releases the mutex, sleeps (backing off from 25 µs to 50 ms), and runs again from the start, until
// ``KeychainFile/busyTimeout`` has passed; then it fails with `errSecNotAvailable` naming the file and, when the
// kernel says, the process holding the lock. Meanwhile every other thread can use the instance: `lockState`,
// `lock()`, reads (a WAL reader is not blocked by a writer), and other writes that will meet the same wait.

extension KeychainFile {
    /// The environment variable that sets ``defaultBusyTimeout``: seconds (a decimal number, 0 or more).
    public static let busyTimeoutVariable = "KEYSTONE_BUSY_TIMEOUT"

    /// How long a keychain file waits for another process's lock before failing, unless its ``busyTimeout`` is set:
    /// `$KEYSTONE_BUSY_TIMEOUT` seconds when that is a number ≥ 0, else 10 seconds (SQLite's wait before this
    /// setting existed).
    public static var defaultBusyTimeout: TimeInterval { busyTimeout(fromEnvironment: ProcessInfo.processInfo.environment) }

    /// The busy timeout `environment` sets (``busyTimeoutVariable``): a finite number of seconds ≥ 0; else (unset,
    /// empty, not a number, negative) 10 seconds, with a warning logged for a value that is not usable.
    static func busyTimeout(fromEnvironment environment: [String: String]) -> TimeInterval {
        guard let text = environment[busyTimeoutVariable], !text.isEmpty else { return 10 }
        if let seconds = TimeInterval(text.trimmingCharacters(in: .whitespaces)), seconds.isFinite, seconds >= 0 {
            return seconds
        }
        KeystoneLog.logger.warning("\(busyTimeoutVariable) is not a number of seconds ≥ 0; using 10", metadata: ["value": "\(text)"])
        return 10
    }

    /// How long an operation waits for another process (or another instance in this process) holding the file's
    /// lock before it fails with `errSecNotAvailable` (default: ``defaultBusyTimeout``, 10 seconds).
    ///
    /// The wait happens with no lock of this instance held: other threads keep using it meanwhile. A negative or
    /// non-finite value is taken as 0 (fail at the first conflict).
    public var busyTimeout: TimeInterval {
        get { withMutex { busyTimeoutSetting } }
        set { withMutex { busyTimeoutSetting = newValue.isFinite ? max(0, newValue) : 0 } }
    }

    /// Runs `body` under the mutex; when it fails with `SQLITE_BUSY`, releases the mutex, waits and runs `body`
    /// again, until ``busyTimeout`` has passed. `body` must fail with `SQLITE_BUSY` only before it has changed
    /// anything (every caller takes its SQLite lock first: `BEGIN IMMEDIATE`, or the header read of `refresh()`).
    ///
    /// Nested in another mutex hold of this thread (the recursive mutex), it does not wait: the busy error goes to
    /// the outermost call, which releases the mutex before waiting.
    /// - Throws: `EngineError` with `errSecNotAvailable` naming the file and the lock's holder when the time is up;
    ///   whatever `body` throws.
    func withMutexWaitingOutside<T>(_ body: () throws -> T) throws -> T {
        var waiter: BusyWaiter?
        while true {
            var outermost = true
            var timeout: TimeInterval = 0
            var hook: (@Sendable (BusyWait) -> Void)?
            do {
                return try withMutex {
                    outermost = mutexDepth == 1
                    timeout = busyTimeoutSetting
                    hook = testHooks.busyWait
                    return try body()
                }
            } catch let error as SQLiteError where error.isBusy && outermost {
                if waiter == nil { waiter = BusyWaiter() }
                try waiter!.wait(path: path, timeout: timeout, hook: hook)
            }
        }
    }
}

/// One wait of an operation that met another connection's lock (for ``KeychainFile/TestHooks/busyWait``).
struct BusyWait: Sendable {
    /// 1 for the first wait of the operation.
    let attempt: Int
    /// The process holding the lock, when the kernel says (`/proc/locks`).
    let holder: String?
}

/// The backoff of one operation waiting for a busy file: called with no lock held.
struct BusyWaiter {
    private let start = ContinuousClock.now
    private var attempt = 0

    /// Sleeps before the next try, or throws when `timeout` has passed since the first conflict.
    mutating func wait(path: String, timeout: TimeInterval, hook: (@Sendable (BusyWait) -> Void)?) throws {
        attempt += 1
        let holder = LockHolder.describe(path: path)
        hook?(BusyWait(attempt: attempt, holder: holder))
        let elapsed = start.duration(to: .now)
        let limit = Duration.milliseconds(Int64(min(timeout, 1e9) * 1000))
        guard elapsed < limit else {
            // Decision: errSecNotAvailable (the keychain cannot be used now), not errSecInteractionNotAllowed, which
            // the engine and callers read as "locked": a busy file is not locked, and unlocking it would not help.
            throw EngineError(Status.notAvailable, "the keychain file \(path) stayed busy for \(Self.seconds(timeout)): "
                + (holder.map { "\($0) holds its lock" } ?? "another connection holds its lock")
                + "; try again when it is done, or wait longer (KeychainFile.busyTimeout, \(KeychainFile.busyTimeoutVariable))")
        }
        // From 25 µs, doubling to 50 ms: another process's writer holds the lock for the microseconds of its transaction
        // (its flush runs after it lets go, group commit), so the first tries come soon; a long holder (a
        // migration, the sqlite3 tool) is polled ever more rarely. (From 1 ms, 8 processes adding at once got less
        // than one process's throughput: each conflict slept far longer than the lock was held.)
        //
        // Decision: no wake-up at the holder's release. Measured (issue 32) with a futex in the keychain's commit file
        // that each Keystone writer bumped when its transaction ended: 8 processes on 2 cores spent their time
        // switching (up to 43,000 context switches for 8,000 adds against 700, 1.3-1.5× the wall time of this back-off
        // on tmpfs; on disk no better), even when only sleeps of 1 ms or 10 ms and more were woken: the writer woken
        // mostly found the lock taken again by the one that had just let it go, whose next write keeps its page cache
        // warm (every other writer's commit empties it). The back-off lets the running writer go on.
        let backoff = min(50_000, 25 << min(attempt - 1, 11))
        let left = limit - elapsed
        let microseconds = min(Int64(backoff), max(1, left.components.seconds * 1_000_000 + left.components.attoseconds / 1_000_000_000_000))
        usleep(UInt32(microseconds))
    }

    private static func seconds(_ value: TimeInterval) -> String {
        value == value.rounded() ? "\(Int(value)) s" : String(format: "%.3f s", value)
    }
}

/// Who holds the lock a connection to a keychain file waits for, read from `/proc/locks` (Linux).
///
/// Never opens the database or its `-shm` file: closing a descriptor of a file drops every POSIX lock this process
/// holds on it, SQLite's included.
enum LockHolder {
    /// "process 1234 (sqlite3)", "another connection in this process", or nil when unknown.
    static func describe(path: String) -> String? {
        #if os(Linux)
        guard let table = try? String(contentsOfFile: "/proc/locks", encoding: .utf8) else { return nil }
        // SQLite's exclusive locks: WAL write, checkpoint and recovery locks (bytes 120-122 of the -shm file);
        // the database file's PENDING, RESERVED and SHARED bytes (from 2^30), held for writing only by a
        // connection that excludes readers.
        let targets: [(String, ClosedRange<UInt64>)] = [(path + "-shm", 120...122), (path, 0x4000_0000...0x4000_0201)]
        for (file, bytes) in targets {
            var info = stat()
            guard stat(file, &info) == 0 else { continue }
            let device = UInt64(info.st_dev)
            let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff))
            let minor = (device & 0xff) | ((device >> 12) & ~UInt64(0xff))
            let identity = String(format: "%02llx:%02llx:%llu", major, minor, UInt64(info.st_ino))
            for line in table.split(separator: "\n") where !line.contains("->") {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                // "1: POSIX  ADVISORY  WRITE 1234 fd:01:567 120 120"
                guard fields.count >= 8, fields[1] == "POSIX", fields[3] == "WRITE", let pid = Int32(fields[4]),
                      fields[5].lowercased() == identity,
                      let first = UInt64(fields[6]) else { continue }
                let last = fields[7] == "EOF" ? UInt64.max : (UInt64(fields[7]) ?? 0)
                guard first <= bytes.upperBound, last >= bytes.lowerBound else { continue }
                if pid == getpid() { return "another connection in this process" }
                let name = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines)
                return "process \(pid)" + (name.map { " (\($0))" } ?? "")
            }
        }
        return nil
        #else
        return nil
        #endif
    }
}
