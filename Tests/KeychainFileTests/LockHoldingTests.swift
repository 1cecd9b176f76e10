import Foundation
import KeychainEngine
@testable import KeychainFile
import KeystoneTesting
import Testing

// Nothing slow under the keychain file's lock (issue 26, item 6): key derivation (scrypt, the TPM) and waiting for
// another process's SQLite lock run with no lock of the instance held, so other threads keep using it.
//
// Every ordering here is made by a signal: a test hook holds the operation at the point where it must hold no lock,
// and the test checks that other threads complete their calls before it lets the operation go on. The waits on
// semaphores have a bound only so that a regression fails instead of hanging; no result depends on time.

/// Runs `body` on a thread of its own; `result(within:)` waits for it (nil: it did not finish: it is blocked).
final class Background<T: Sendable>: Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let outcome = Locked<Result<T, EngineError>?>(nil)

    init(_ body: @escaping @Sendable () throws -> T) {
        let thread = Thread { [outcome, done] in
            let result: Result<T, EngineError>
            do { result = .success(try body()) } catch let error as EngineError { result = .failure(error) } catch {
                result = .failure(EngineError(.internalError, "not an EngineError: \(error)"))
            }
            outcome.withLock { $0 = result }
            done.signal()
        }
        thread.start()
    }

    /// The result; nil when `body` is still running after `seconds` (a hang guard, not a measure).
    func result(within seconds: Double = 120) -> Result<T, EngineError>? {
        guard done.wait(timeout: .now() + seconds) == .success else { return nil }
        done.signal()
        return outcome.current
    }
}

func engineStatus<T>(_ result: Result<T, EngineError>?) -> Int32? {
    switch result {
    case .success: return 0
    case .failure(let error): return error.status
    case nil: return nil
    }
}

/// The sqlite3 command, when installed.
let sqlite3Command = ["/usr/bin/sqlite3", "/usr/local/bin/sqlite3", "/bin/sqlite3"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// A `sqlite3` process holding the write lock of the database at `path` (`BEGIN IMMEDIATE`) until ``release()``:
/// another process, as a second `keystone` or any SQLite tool would be.
final class OtherProcessWriting {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()

    init(path: String) throws {
        process.executableURL = URL(fileURLWithPath: try #require(sqlite3Command))
        process.arguments = [path]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(Data("BEGIN IMMEDIATE;\nSELECT 'held';\n".utf8))
        // sqlite3 answers once BEGIN IMMEDIATE returned: the lock is held.
        var received = Data()
        while !String(decoding: received, as: UTF8.self).contains("held") {
            let chunk = output.fileHandleForReading.availableData
            try #require(!chunk.isEmpty, "sqlite3 exited before taking the lock")
            received.append(chunk)
        }
    }

    var pid: Int32 { process.processIdentifier }

    private var released = false

    func release() {
        guard !released else { return }
        released = true
        if process.isRunning { input.fileHandleForWriting.write(Data("COMMIT;\n.quit\n".utf8)) }
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

/// The operations that derive keys (scrypt, or the TPM's unseal).
enum Derivation: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case unlockWithPassword = "unlock(password:)"
    case unlockSealed = "unlock() of a file sealed to a Secure Enclave"
    case changePassword = "changePassword(old:new:)"
    var testDescription: String { rawValue }
}

@Suite("Keychain file: nothing slow under its lock")
struct LockHoldingTests {
    @Test("while a key derivation is held, other threads' lockState, reads and lock() complete; the derivation then installs its keys",
          arguments: Derivation.allCases)
    func derivationOutsideTheLock(_ derivation: Derivation) throws {
        let path = TempDir().path()
        let token = EmulatedSecureEnclave()
        let file = derivation == .unlockSealed
            ? try KeychainFile.create(at: path, sealedTo: token)
            : try KeychainFile.create(at: path, password: "pw")
        try addSecret(file, "svc", "a", "x")
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let calls = Locked(0)
        file.withMutex {
            file.testHooks.beforeKeyDerivation = {
                // Holds the first derivation only.
                guard calls.withLock({ $0 += 1; return $0 }) == 1 else { return }
                entered.signal()
                release.wait()
            }
        }
        let deriving = Background { () throws -> Void in
            switch derivation {
            case .unlockWithPassword: try file.unlock(password: "pw")
            case .unlockSealed: try file.unlock()
            case .changePassword: try file.changePassword(old: "pw", new: "new")
            }
        }
        try #require(entered.wait(timeout: .now() + 120) == .success, "the derivation started")
        // The derivation is held inside its hook. Before issue 26 it held the mutex there (scrypt and the TPM ran
        // under it), and this thread's calls blocked until it finished.
        let others = Background { () throws -> [String] in
            let before = file.lockState
            let secret = try readSecret(file, "svc", "a")
            file.lock()
            let after = file.lockState
            return ["\(before)", secret ?? "nil", "\(after)"]
        }
        let seen = others.result()
        release.signal()
        #expect(try #require(seen, "lockState, a read and lock() blocked while keys were derived").get()
                == ["\(LockState.unlocked)", "x", "\(LockState.locked)"])
        #expect(engineStatus(deriving.result()) == 0)
        // The derivation's keys are installed after the lock: the header they came from is still the file's.
        #expect(file.lockState == .unlocked)
        #expect(try readSecret(file, "svc", "a") == "x")
        if derivation == .changePassword {
            file.lock()
            #expect(fileStatus { try file.unlock(password: "pw") } == Status.authFailed)
            try file.unlock(password: "new")
        }
    }

    @Test("keys derived from a password another process then changed are never installed: the unlock derives again and fails with errSecAuthFailed")
    func headerChangedDuringDerivation() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "old")
        try addSecret(file, "svc", "a", "x")
        file.lock()
        let other = try KeychainFile.open(at: path)
        let calls = Locked(0)
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        file.withMutex {
            file.testHooks.beforeKeyDerivation = {
                if calls.withLock({ $0 += 1; return $0 }) == 1 {
                    entered.signal()
                    release.wait()
                }
            }
        }
        let unlocking = Background { try file.unlock(password: "old") }
        try #require(entered.wait(timeout: .now() + 120) == .success)
        try other.changePassword(old: "old", new: "new")
        other.lock()
        release.signal()
        #expect(engineStatus(unlocking.result()) == Status.authFailed, "the old password no longer opens the keychain")
        #expect(calls.current == 2, "the keys were derived again from the new header")
        #expect(file.lockState == .locked)
        try file.unlock(password: "new")
        #expect(try readSecret(file, "svc", "a") == "x")
    }

    @Test("a write meeting another process's lock waits with no lock held: lockState and reads complete; at the timeout it fails with errSecNotAvailable naming the file and the process",
          .enabled(if: sqlite3Command != nil, "the sqlite3 command is not installed (apt-get install sqlite3)"))
    func busyWriteWaitsOutside() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        try addSecret(file, "svc", "a", "x")
        let holder = try OtherProcessWriting(path: path)
        defer { holder.release() }
        file.busyTimeout = 3600
        let waits = Locked<[BusyWait]>([])
        let waiting = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        file.withMutex {
            file.testHooks.busyWait = { wait in
                waits.withLock { $0.append(wait) }
                if wait.attempt == 1 {
                    waiting.signal()
                    proceed.wait()
                }
            }
        }
        let writing = Background { try addSecret(file, "svc", "b", "y") }
        try #require(waiting.wait(timeout: .now() + 120) == .success, "the write met the other process's lock")
        // Before issue 26 the write waited inside SQLite's busy handler holding the mutex, and these blocked.
        let others = Background { () throws -> [String] in
            ["\(file.lockState)", try readSecret(file, "svc", "a") ?? "nil"]
        }
        let seen = others.result()
        // The time is up: the setting is read before every try, so a following wait fails. (Set after letting the
        // write go on: were the wait under the mutex, setting it first would deadlock instead of failing.)
        proceed.signal()
        file.busyTimeout = 0
        #expect(try #require(seen, "lockState and a read blocked while a write waited for another process").get()
                == ["\(LockState.unlocked)", "x"])
        let result = try #require(writing.result())
        guard case .failure(let error) = result else {
            Issue.record("the write should fail once the busy timeout has passed: \(result)")
            return
        }
        #expect(error.status == Status.notAvailable)
        #expect(error.reason.contains(path))
        #expect(error.reason.contains("process \(holder.pid) (sqlite3)"), "names the process holding the lock: \(error.reason)")
        #expect(waits.current.first?.holder == "process \(holder.pid) (sqlite3)")
        // Nothing was half-written; once the other process is done, the same write succeeds.
        holder.release()
        #expect(fileStatus { _ = try readSecret(file, "svc", "b") } == Status.itemNotFound)
        try addSecret(file, "svc", "b", "y")
        #expect(try readSecret(file, "svc", "b") == "y")
    }

    @Test("lock() while another process holds the file's lock drops the keys at once, and tells other instances once that process is done",
          .enabled(if: sqlite3Command != nil, "the sqlite3 command is not installed (apt-get install sqlite3)"))
    func lockWhileBusy() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        try addSecret(file, "svc", "a", "x")
        let other = try KeychainFile.open(at: path)
        if other.lockState != .unlocked { try other.unlock(password: "pw") }
        let holder = try OtherProcessWriting(path: path)
        defer { holder.release() }
        file.busyTimeout = 3600
        let waiting = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        file.withMutex {
            file.testHooks.busyWait = { wait in
                if wait.attempt == 1 {
                    waiting.signal()
                    proceed.wait()
                }
            }
        }
        let locking = Background { file.lock() }
        try #require(waiting.wait(timeout: .now() + 120) == .success, "telling other instances met the other process's lock")
        let here = Background { () -> [String] in
            ["\(file.lockState)", "\(fileStatus { _ = try readSecret(file, "svc", "a") })"]
        }
        let seen = here.result()
        holder.release()
        proceed.signal()
        #expect(try #require(seen, "lockState and a read blocked while lock() waited").get()
                == ["\(LockState.locked)", "\(Status.interactionNotAllowed)"])
        #expect(engineStatus(locking.result()) == 0)
        #expect(other.lockState == .locked, "the epoch was bumped once the other process let go")
    }

    @Test("the busy timeout comes from KEYSTONE_BUSY_TIMEOUT (seconds), else 10 s; a value that is not a number ≥ 0 is ignored")
    func busyTimeoutSetting() throws {
        let variable = KeychainFile.busyTimeoutVariable
        #expect(variable == "KEYSTONE_BUSY_TIMEOUT")
        #expect(KeychainFile.busyTimeout(fromEnvironment: [:]) == 10)
        #expect(KeychainFile.busyTimeout(fromEnvironment: [variable: "2.5"]) == 2.5)
        #expect(KeychainFile.busyTimeout(fromEnvironment: [variable: "0"]) == 0)
        for bad in ["", "-1", "soon", "inf", "nan"] {
            #expect(KeychainFile.busyTimeout(fromEnvironment: [variable: bad]) == 10, "\(bad)")
        }
        let file = try KeychainFile.create(at: TempDir().path(), password: "pw")
        #expect(file.busyTimeout == KeychainFile.defaultBusyTimeout)
        file.busyTimeout = 0.25
        #expect(file.busyTimeout == 0.25)
        file.busyTimeout = -3
        #expect(file.busyTimeout == 0)
    }
}
