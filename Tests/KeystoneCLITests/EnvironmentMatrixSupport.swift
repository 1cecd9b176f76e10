import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// One program run in an environment a matrix cell made: its exact environment (nothing inherited), its standard
/// input (`/dev/null`, closed, or bytes), a command prefix (`setpriv …`, `setsid -w`, `no-keyring-exec`, `unshare …`),
/// how long it took, and whether the watchdog had to kill it.
struct CellRun: CustomStringConvertible {
    let status: Int32
    let stdout: String
    let stderr: String
    /// Wall time from the start of the process to its exit.
    let seconds: Double
    /// True when the watchdog killed it (a hang).
    let hung: Bool

    var description: String {
        "status \(status)\(hung ? " (killed by the watchdog: it hung)" : "") in \(String(format: "%.2f", seconds)) s; stdout: \(stdout.debugDescription); stderr: \(stderr.debugDescription)"
    }

    /// The message a failing command printed, on one line.
    var message: String {
        stderr.split(separator: "\n").joined(separator: " / ")
    }
}

/// What a cell's standard input is.
enum CellInput {
    case devNull
    /// File descriptor 0 not open at all (`exec <&-`).
    case closed
    case bytes(Data)
}

/// How long a cell's command may run before it counts as a hang and is killed: a guard, not a bound (fail-fast cells
/// assert their own 1 s).
let cellWatchdogSeconds = 60.0

/// Runs `command` (`command[0]` an absolute path) with exactly `environment`, `input` as its standard input, and no
/// controlling terminal (the tests' own process has none either: Foundation's Process starts a new session).
func cellRun(_ command: [String], environment: [String: String], input: CellInput = .devNull,
             directory: String? = nil) throws -> CellRun {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-cell-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: scratch) }
    let out = scratch.appendingPathComponent("out"), err = scratch.appendingPathComponent("err")
    _ = FileManager.default.createFile(atPath: out.path, contents: nil)
    _ = FileManager.default.createFile(atPath: err.path, contents: nil)
    let process = Process()
    switch input {
    case .closed:
        // The shell closes fd 0 and replaces itself with the command: the command starts with no standard input.
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "exec \"$@\" <&-", "sh"] + command
        process.standardInput = FileHandle.nullDevice
    case .devNull:
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.standardInput = FileHandle.nullDevice
    case .bytes(let data):
        let file = scratch.appendingPathComponent("in")
        try data.write(to: file)
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.standardInput = try FileHandle(forReadingFrom: file)
    }
    process.environment = environment
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    process.standardOutput = try FileHandle(forWritingTo: out)
    process.standardError = try FileHandle(forWritingTo: err)
    let exited = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in exited.signal() }
    let start = ContinuousClock.now
    try process.run()
    var hung = false
    if exited.wait(timeout: .now() + cellWatchdogSeconds) == .timedOut {
        hung = true
        kill(-process.processIdentifier, SIGKILL)  // its group, when it made one
        kill(process.processIdentifier, SIGKILL)
        exited.wait()
    }
    let elapsed = ContinuousClock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return CellRun(status: process.terminationStatus,
                   stdout: String(decoding: (try? Data(contentsOf: out)) ?? Data(), as: UTF8.self),
                   stderr: String(decoding: (try? Data(contentsOf: err)) ?? Data(), as: UTF8.self),
                   seconds: seconds, hung: hung)
}

/// A built executable of the package, found beside the test bundle as ``Sandbox/binary`` finds `keystone`.
func builtExecutable(_ name: String) -> String? {
    var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = dir.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        dir = dir.deletingLastPathComponent()
    }
    return nil
}

/// The first of `paths` that is an executable file.
func systemTool(_ name: String) -> String? {
    ["/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/", "/usr/local/bin/"].map { $0 + name }
        .first { FileManager.default.isExecutableFile(atPath: $0) }
}

/// The environment matrix's file: one line per cell, `CELL: passed`, `CELL: failed fast (0.03 s): MESSAGE`,
/// `CELL: skipped: REASON` or `CELL: FAILED: WHAT` (the cell did not behave as specified).
///
/// `$KEYSTONE_MATRIX_FILE` when set, else `.build/environment-matrix.txt` of the package whose tests run. A cell's line
/// replaces its line of an earlier run; lines are kept in the order of the cells' first runs. CI prints it with
/// `scripts/print-environment-matrix.sh`.
enum MatrixFile {
    private static let lock = NSLock()

    static var path: String {
        if let path = ProcessInfo.processInfo.environment["KEYSTONE_MATRIX_FILE"], !path.isEmpty { return path }
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<6 where dir.lastPathComponent != ".build" { dir = dir.deletingLastPathComponent() }
        if dir.lastPathComponent != ".build" {
            dir = URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build")
        }
        return dir.appendingPathComponent("environment-matrix.txt").path
    }

    /// Writes `cell`'s line (replacing an earlier one), atomically (a temporary file renamed over the file).
    static func record(_ cell: String, _ outcome: String) {
        lock.lock()
        defer { lock.unlock() }
        let path = self.path
        let existing = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        var lines = existing.split(separator: "\n").map(String.init)
        let line = "\(cell): \(outcome)".replacingOccurrences(of: "\n", with: " / ")
        if let index = lines.firstIndex(where: { $0.hasPrefix(cell + ": ") }) { lines[index] = line } else { lines.append(line) }
        let temporary = path + ".\(getpid()).tmp"
        try? FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        guard (try? (lines.joined(separator: "\n") + "\n").write(toFile: temporary, atomically: false, encoding: .utf8)) != nil else { return }
        rename(temporary, path)
    }
}

/// A cell's verdict, written to the matrix file when the cell ends.
///
/// `check` records a failed expectation both as a test issue and in the cell's line (`FAILED: …`), so the printed
/// matrix never says `passed` for a cell whose test failed.
final class Cell: @unchecked Sendable {
    // @unchecked Sendable: one test's cell, used from that test's thread only.
    let name: String
    private(set) var failures: [String] = []
    private var outcome: String?

    init(_ name: String) { self.name = name }

    /// Records a failed expectation (as `#expect` does) unless `condition` holds.
    func check(_ condition: Bool, _ what: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard !condition else { return }
        let text = what()
        failures.append(text)
        Issue.record(Comment(rawValue: "\(name): \(text)"), sourceLocation: sourceLocation)
    }

    /// Checks that `run` failed fast (not hung, non-zero, within 1 s) with a message containing every one of `fix`;
    /// the cell's outcome becomes `failed fast (… s): MESSAGE`.
    func expectFastFailure(_ run: CellRun, naming fix: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        check(!run.hung, "it hung: \(run)", sourceLocation: sourceLocation)
        check(run.status != 0, "it succeeded where it should fail: \(run)", sourceLocation: sourceLocation)
        check(run.seconds < failFastLimit, "it took \(String(format: "%.2f", run.seconds)) s, not an answer at once: \(run)", sourceLocation: sourceLocation)
        for word in fix {
            check(run.stderr.contains(word) || run.stdout.contains(word), "its message does not name \(word): \(run)", sourceLocation: sourceLocation)
        }
        if outcome == nil {
            let message = run.stderr.isEmpty ? run.stdout : run.stderr
            outcome = "failed fast (\(String(format: "%.2f", run.seconds)) s): " + message.split(separator: "\n").joined(separator: " / ")
        }
    }

    /// Checks that `run` succeeded (and did not hang).
    func expectSuccess(_ run: CellRun, _ step: String, sourceLocation: SourceLocation = #_sourceLocation) {
        check(!run.hung && run.status == 0, "\(step) failed: \(run)", sourceLocation: sourceLocation)
    }

    /// Writes the cell's line: `FAILED: …` when a check failed, else its fast failure, else `passed`.
    func finish() {
        if let first = failures.first {
            MatrixFile.record(name, "FAILED: \(first)" + (failures.count > 1 ? " (and \(failures.count - 1) more)" : ""))
        } else {
            MatrixFile.record(name, outcome ?? "passed")
        }
    }

    /// Writes `skipped: REASON`.
    func skip(_ reason: String) { MatrixFile.record(name, "skipped: \(reason)") }
}

/// A directory for one cell: `root` (0755 so that another uid can reach what is given to it), removed at the end.
struct CellDirectory {
    let root: String

    init(owner: uid_t? = nil) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-matrix-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        chmod(root, 0o755)
        if let owner { chown(root, owner, gid_t(owner)) }
    }

    func path(_ name: String) -> String { root + "/" + name }

    /// Makes `name` (mode 0700, owned by `owner` when given) and returns its path.
    func directory(_ name: String, owner: uid_t? = nil, mode: mode_t = 0o700) throws -> String {
        let path = self.path(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        chmod(path, mode)
        if let owner { chown(path, owner, gid_t(owner)) }
        return path
    }

    /// Writes `text` to `name` (mode 0600, owned by `owner` when given) and returns its path.
    func file(_ name: String, _ text: String, owner: uid_t? = nil) throws -> String {
        let path = self.path(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o600)
        if let owner { chown(path, owner, gid_t(owner)) }
        return path
    }

    func remove() { try? FileManager.default.removeItem(atPath: root) }
}

/// The environment every cell starts from: PATH and LANG only (no HOME, no XDG_*, no DBUS_*, no KEYSTONE_*, no
/// terminal variables), as a service or a container's process gets.
func bareEnvironment(_ extra: [String: String] = [:]) -> [String: String] {
    ["PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"].merging(extra) { $1 }
}

/// The full CLI round trip of a cell: create-keychain, unlock-keychain, add-generic-password,
/// find-generic-password -w, lock-keychain, find refused; each step run as `prefix + [keystone, …]` with
/// `environment`. The keychain password comes from `password` (the environment's headless source) unless
/// `passwordArgument` is given.
func cliRoundTrip(_ cell: Cell, keystone: String, prefix: [String] = [], environment: [String: String],
                  keychain: String, input: CellInput = .devNull, passwordArgument: String? = nil) throws {
    func step(_ arguments: [String]) throws -> CellRun {
        try cellRun(prefix + [keystone] + arguments, environment: environment, input: input)
    }
    let password = passwordArgument.map { ["-p", $0] } ?? []
    cell.expectSuccess(try step(["create-keychain"] + password + [keychain]), "create-keychain")
    cell.expectSuccess(try step(["unlock-keychain"] + password + [keychain]), "unlock-keychain")
    cell.expectSuccess(try step(["add-generic-password", "-s", "matrix", "-a", "cell", "-w", "cell-secret", keychain]), "add-generic-password")
    let find = try step(["find-generic-password", "-s", "matrix", "-a", "cell", "-w", keychain])
    cell.check(!find.hung && find.status == 0 && find.stdout == "cell-secret\n", "find-generic-password -w: \(find)")
    cell.expectSuccess(try step(["lock-keychain", keychain]), "lock-keychain")
    let refused = try step(["find-generic-password", "-s", "matrix", "-a", "cell", "-w", keychain])
    cell.check(!refused.hung && refused.status == 36 && !refused.stdout.contains("cell-secret"),
               "find after lock-keychain is refused with 36 (errSecInteractionNotAllowed): \(refused)")
}

/// The library round trip of a cell: `EnvironmentProbe` (`Keychain()` on the default keychain) saves and reads an item.
func libraryRoundTrip(_ cell: Cell, probe: String, prefix: [String] = [], environment: [String: String],
                      input: CellInput = .devNull) throws {
    let run = try cellRun(prefix + [probe, "cell"], environment: environment, input: input)
    cell.check(!run.hung && run.status == 0 && run.stdout == "ok\n", "the library round trip (Keychain() save, read): \(run)")
}

/// The bound a "fails at once" assertion checks, in seconds. The measured time is what the matrix and the closing
/// figures report (0.02–0.2 s here, the issue's goal is 1 s); the assertion only tells an answer at once from waiting
/// (a prompt on a closed standard input, D-Bus's 25 s call timeout, the 60 s hang watchdog), with room for a loaded CI
/// machine, where starting a process alone can take seconds.
let failFastLimit: Double = 20
