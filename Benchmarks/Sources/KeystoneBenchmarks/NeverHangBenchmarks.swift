import EtcdCluster
import Foundation
import SecretServiceDaemon
import Swtpm
#if os(Linux)
import Glibc
import KeychainEngine
import KeychainEtcd
import KeychainFile
import KeychainSecretService
import KeychainTPM
#endif

// `keystone-benchmarks never-hang [--backends secret-service,etcd,tpm,file] [--calls N] [--callers 1,4] [--seed S]
//                                 [--deadline-ms MS] [--margin-ms MS] [--think-ms MS] [--chaos-log PATH] [--tpm-lockout]`
//
// "Never hang, measured": N calls (default 10,000) against each backend while a chaos thread stops (SIGSTOP),
// continues, kills and restarts the process behind it at random moments, from a seeded generator whose seed is printed
// (give it again with --seed to replay the same schedule of decisions; the moments depend on the machine):
// - secret-service: KeychainEngine over SecretServiceStorage on a private gnome-keyring-daemon (SecretServiceDaemon);
//   the daemon is stopped, continued, killed and restarted (its login keyring unlocked again, as at a login);
// - etcd: KeychainEngine over EtcdKeychain on a private 3-member cluster (EtcdTestCluster); any member is paused,
//   resumed, killed or restarted, so the cluster sometimes loses its quorum;
// - tpm: the Secure Enclave token (TPMSecureEnclaveToken) signing, alternating with opening a keychain file sealed to
//   the TPM (what `unlock-keychain` of a `create-keychain --tpm` file does), on a private swtpm (Swtpm), which is
//   stopped, continued, killed and started again on the same state and port;
// - file: KeychainEngine over a keychain file while another process (`sqlite3`, in `BEGIN IMMEDIATE`) holds its
//   write lock, is stopped, continued, killed and started again (KeychainFile.busyTimeout).
// Every backend alternates a read (SecItemCopyMatching with kSecReturnData) and a write (SecItemUpdate of the secret)
// of items made before the chaos starts (tpm: a signature and a sealed-keychain open).
//
// The calls are made one after another from one thread (with `--callers 1,4`, then again from four threads at once),
// never on Swift's cooperative pool, while the chaos runs on a thread of its own. Each call is timed (monotonic clock)
// and counted by outcome: success, or the error's OSStatus. A call is "over deadline" when it took longer than the
// backend's deadline plus the margin (default 250 ms: scheduling on a loaded 2-core machine, process starts); every one
// is reported, with the worst listed. Deadlines are set short so that 10,000 calls take minutes: the Secret Service's
// call timeout (`Options.callTimeout`), etcd's request timeout (`?timeout=`), the TPM token's timeout
// (`TPMSecureEnclaveToken(tcti:timeout:)`), the file's busy timeout (`KeychainFile.busyTimeout`); the line says which.
// Each caller waits --think-ms (default 5 ms) between calls, so that the fast backends meet many faults in N calls.
// Once the chaos ends (every process running again), each operation is retried until it succeeds, for at most 60 s:
// the line says how long the backend took to recover, or that it did not. On the TPM, swtpm's dictionary-attack
// lockout is relaxed first (`tpm2_dictionarylockout -s`; `--tpm-lockout` keeps swtpm's defaults): every kill is a
// non-orderly shutdown, which the TPM counts against Keystone's keys (they are DA-protected) at its next start-up,
// and after a few kills the keys lock out, which would hide everything else.
// A call still running after 60 s is a hang: the run prints it and exits with status 3.

/// The command line of the `never-hang` benchmark.
struct NeverHangBenchmarkOptions {
    static let allBackends = ["secret-service", "etcd", "tpm", "file"]
    var backends = NeverHangBenchmarkOptions.allBackends
    /// Calls per backend and caller configuration.
    var calls = 10_000
    /// The caller configurations: 1 (sequential), and 4 concurrent callers when asked.
    var callers = [1]
    /// The chaos seed (printed; random unless given).
    var seed = UInt64.random(in: 1...UInt64.max)
    /// Every backend's deadline, instead of its default for this benchmark.
    var deadlineMilliseconds: Int?
    /// What a call may take beyond its deadline before it counts as over deadline.
    var marginMilliseconds = 250
    /// Where to write every chaos event (time, unit, action); none by default.
    var chaosLog: String?
    /// What each caller waits between two calls, so that fast backends meet many faults in N calls.
    var thinkMilliseconds = 5
    /// Keep swtpm's dictionary-attack lockout at its defaults (by default it is relaxed: see `tpm()`).
    var tpmLockout = false

    static let usage = "usage: keystone-benchmarks never-hang [--backends secret-service,etcd,tpm,file] [--calls N] "
        + "[--callers 1,4] [--seed S] [--deadline-ms MS] [--margin-ms MS] [--think-ms MS] [--chaos-log PATH] [--tpm-lockout]"

    /// Parses the arguments after `never-hang`; nil (after printing why and the usage) when they are wrong.
    static func parse(_ arguments: ArraySlice<String>) -> NeverHangBenchmarkOptions? {
        var options = NeverHangBenchmarkOptions()
        let parsed = parseBenchmarkOptions(arguments, command: "never-hang", usage: usage, flags: ["--tpm-lockout"],
                                           valued: ["--backends", "--calls", "--callers", "--seed", "--deadline-ms",
                                                    "--margin-ms", "--think-ms", "--chaos-log"]) { name, value in
            let text = value ?? ""
            switch name {
            case "--tpm-lockout":
                options.tpmLockout = true
            case "--backends":
                let names = text.split(separator: ",").map(String.init)
                guard !names.isEmpty, names.allSatisfy(allBackends.contains) else {
                    return "--backends takes some of \(allBackends.joined(separator: ",")), separated by commas"
                }
                options.backends = names
            case "--callers":
                let counts = text.split(separator: ",").map { positiveNumber(String($0)) }
                guard !counts.isEmpty, counts.allSatisfy({ $0 != nil }) else {
                    return "--callers takes positive numbers separated by commas, such as 1,4"
                }
                options.callers = counts.compactMap { $0 }
            case "--seed":
                guard let seed = UInt64(text.hasPrefix("0x") ? String(text.dropFirst(2)) : text,
                                        radix: text.hasPrefix("0x") ? 16 : 10) else {
                    return "--seed takes a number (decimal, or hexadecimal with 0x)"
                }
                options.seed = seed
            case "--chaos-log":
                options.chaosLog = text
            case "--margin-ms", "--think-ms":
                guard let number = Int(text), number >= 0 else { return "\(name) takes a number ≥ 0" }
                if name == "--margin-ms" { options.marginMilliseconds = number } else { options.thinkMilliseconds = number }
            default:
                guard let number = positiveNumber(text) else { return "\(name) takes a positive number" }
                if name == "--calls" { options.calls = number } else { options.deadlineMilliseconds = number }
            }
            return nil
        }
        return parsed ? options : nil
    }
}

/// Runs the benchmark; the process's exit status (1 when a backend could not be set up, a call went over its
/// deadline or an operation still failed a minute after the chaos ended; 3 on a hang).
func runNeverHangBenchmarks(_ options: NeverHangBenchmarkOptions) -> Int32 {
    #if os(Linux)
    setenv("TSS2_LOG", "all+NONE", 1)  // tpm2-tss would print every expected failure on standard error
    print("Never hang, measured: \(options.calls) calls per backend while its daemon is stopped, killed and restarted "
        + "at random; chaos seed \(String(format: "0x%016llx", options.seed)); margin \(options.marginMilliseconds) ms; "
        + "each caller waits \(options.thinkMilliseconds) ms between calls\n")
    var rows: [NeverHangResult] = []
    var failed = false
    for backend in options.backends {
        for callers in options.callers {
            do {
                let result = try NeverHangRun(backend: backend, callers: callers, options: options).run()
                result.printSummary()
                rows.append(result)
                if result.overDeadline > 0 || result.recovery.contains("NOT RECOVERED") { failed = true }
            } catch {
                print("never-hang \(backend): could not run: \(error)\n")
                failed = true
            }
        }
    }
    if !rows.isEmpty {
        print("| backend | calls | deadline | over deadline | p50 | p99 | p99.9 | max | outcomes |")
        print("|---|---|---|---|---|---|---|---|---|")
        for row in rows { print(row.markdownRow) }
    }
    return failed ? 1 : 0
    #else
    print("The never-hang benchmark needs Linux (the Secret Service, etcd, swtpm and their fixtures).")
    return 1
    #endif
}

#if os(Linux)

// MARK: - Results

/// One backend's measured calls.
struct NeverHangResult {
    let backend: String
    let callers: Int
    let deadline: Duration
    let margin: Duration
    /// What sets the deadline, for the line.
    let deadlineSource: String
    /// Each call's duration (nanoseconds), operation and outcome.
    let calls: [NeverHangCall]
    let chaos: ChaosSummary
    let wall: Double
    /// One error message per failed outcome (the first seen).
    var examples: [String: String] = [:]
    /// How the backend did once the chaos ended and its processes were running again.
    var recovery = ""

    var overDeadline: Int { calls.filter { $0.nanoseconds > limitNanoseconds }.count }
    var limitNanoseconds: UInt64 { UInt64((deadline + margin).components.seconds) * 1_000_000_000
        + UInt64((deadline + margin).components.attoseconds / 1_000_000_000) }

    var name: String { callers == 1 ? backend : "\(backend), \(callers) callers" }

    func percentile(_ p: Double, _ sorted: [UInt64]) -> UInt64 {
        guard !sorted.isEmpty else { return 0 }
        return sorted[min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1)]
    }

    /// "success 8123, errSecNotAvailable (-25291) 1877", most frequent first.
    static func outcomes(_ calls: [NeverHangCall]) -> String {
        var counts: [String: Int] = [:]
        for call in calls { counts[call.outcome, default: 0] += 1 }
        return counts.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
            .map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }

    func printSummary() {
        let sorted = calls.map(\.nanoseconds).sorted()
        func ms(_ ns: UInt64) -> String { formatNanos(Double(ns)) }
        print("never-hang \(name): \(calls.count) calls, deadline \(seconds(deadline)) (\(deadlineSource)) + "
            + "\(seconds(margin)) margin, \(overDeadline) over deadline, p50 \(ms(percentile(0.5, sorted))), "
            + "p99 \(ms(percentile(0.99, sorted))), p99.9 \(ms(percentile(0.999, sorted))), max \(ms(sorted.last ?? 0)); "
            + "outcomes: \(Self.outcomes(calls)); \(String(format: "%.0f", wall)) s")
        for operation in Set(calls.map(\.operation)).sorted() {
            let these = calls.filter { $0.operation == operation }
            let times = these.map(\.nanoseconds).sorted()
            print("  \(operation): \(these.count) calls, p50 \(ms(percentile(0.5, times))), p99 \(ms(percentile(0.99, times))), "
                + "max \(ms(times.last ?? 0)); \(Self.outcomes(these))")
        }
        print("  chaos: \(chaos.description)")
        for (outcome, example) in examples.sorted(by: { $0.key < $1.key }) { print("  \(outcome), for example: \(example)") }
        print("  after the chaos: \(recovery)")
        let worst = calls.filter { $0.nanoseconds > limitNanoseconds }.sorted { $0.nanoseconds > $1.nanoseconds }
        for call in worst.prefix(10) {
            print(String(format: "  OVER DEADLINE: call %d (%@) took %@ at %.3f s: %@", call.index, call.operation,
                         ms(call.nanoseconds), call.startedAt, call.outcome))
            if let detail = call.detail { print("    \(detail)") }
        }
        print("")
    }

    var markdownRow: String {
        let sorted = calls.map(\.nanoseconds).sorted()
        func ms(_ ns: UInt64) -> String { formatNanos(Double(ns)) }
        return "| \(name) | \(calls.count) | \(seconds(deadline)) (\(deadlineSource)) | \(overDeadline) | "
            + "\(ms(percentile(0.5, sorted))) | \(ms(percentile(0.99, sorted))) | \(ms(percentile(0.999, sorted))) | "
            + "\(ms(sorted.last ?? 0)) | \(Self.outcomes(calls)) |"
    }
}

struct NeverHangCall: Sendable {
    let index: Int
    let operation: String
    /// Seconds since the run started.
    let startedAt: Double
    let nanoseconds: UInt64
    let outcome: String
    /// The error's reason for a call over deadline (never a secret: errors hold none).
    let detail: String?
}

private func seconds(_ duration: Duration) -> String {
    let value = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    return value >= 1 && value == value.rounded() ? "\(Int(value)) s" : String(format: "%.0f ms", value * 1000)
}

private func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// "success", or the OSStatus's name and number.
private func outcomeName(_ error: (any Error)?) -> String {
    guard let error else { return "success" }
    if let engine = error as? EngineError {
        return "\(Status.name(for: engine.status) ?? "OSStatus") (\(engine.status))"
    }
    return "untyped \(type(of: error))"
}

// MARK: - The chaos

/// A SplitMix64 generator: the chaos's decisions from the printed seed.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A process the chaos acts on: one gnome-keyring-daemon, one etcd member, one swtpm, one lock holder.
struct ChaosUnit: Sendable {
    let name: String
    /// SIGSTOP.
    let pause: @Sendable () throws -> Void
    /// SIGCONT.
    let resume: @Sendable () throws -> Void
    /// SIGKILL, and reaped.
    let kill: @Sendable () throws -> Void
    /// Started again after a kill (same data, same address).
    let start: @Sendable () throws -> Void
}

struct ChaosSummary: CustomStringConvertible {
    var seed: UInt64
    var counts: [String: Int] = [:]
    var failures: [String] = []
    var description: String {
        let order = ["stop", "continue", "kill", "kill while stopped", "restart", "start after kill"]
        let parts = order.compactMap { name in counts[name].map { "\($0) \(name)" } }
        return parts.joined(separator: ", ")
            + (failures.isEmpty ? "" : "; \(failures.count) chaos actions failed (first: \(failures[0]))")
    }
}

/// Stops, continues, kills and restarts the units at random moments on a thread of its own, until ``finish()``.
///
/// Decisions come from a seeded generator. A running unit is stopped (60%), killed (25%) or restarted at once (15%);
/// a stopped one is continued (80%) or killed (20%); a killed one is started again. It waits 50 to 500 ms (the file:
/// 0.5 to 2 s) before its first action and after each action that leaves every unit healthy; otherwise 20 ms to 3
/// deadlines, so that some stops end before the
/// calls' deadline (the call then succeeds late) and others after it. With several units, one that is not running is
/// picked first more often than not, but faults do overlap (etcd then loses its quorum). For a unit whose healthy
/// state is killed (the file's lock holder), a running one is killed (60%), stopped (30%) or restarted (10%).
final class Chaos: @unchecked Sendable {
    // @unchecked Sendable: `states`, `finished`, `summary` and `log` are reached only while `condition` is held; the
    // generator only on the chaos thread.
    enum State { case running, paused, killed }

    private let units: [ChaosUnit]
    private let deadline: Double
    private var generator: SeededGenerator
    private let condition = NSCondition()
    private var states: [State]
    private var finished = false
    private var done = false
    private var summary: ChaosSummary
    private var log: [String] = []
    private let start: UInt64
    /// Whether a killed unit is the healthy state (the file's lock holder: killed, it holds nothing; running or
    /// stopped, it holds the lock).
    private let killedIsHealthy: Bool

    /// How long every unit stays healthy between faults, in seconds.
    private let healthyGap: ClosedRange<Double>

    init(units: [ChaosUnit], seed: UInt64, deadline: Duration, start: UInt64, killedIsHealthy: Bool = false,
         healthyGap: ClosedRange<Double> = 0.05...0.5) {
        self.healthyGap = healthyGap
        self.units = units
        self.deadline = Double(deadline.components.seconds) + Double(deadline.components.attoseconds) / 1e18
        generator = SeededGenerator(seed: seed)
        states = Array(repeating: killedIsHealthy ? .killed : .running, count: units.count)
        summary = ChaosSummary(seed: seed)
        self.start = start
        self.killedIsHealthy = killedIsHealthy
    }

    func begin() {
        let thread = Thread { [self] in loop() }
        thread.name = "chaos"
        thread.start()
    }

    /// Stops the chaos and brings every unit back to its healthy state (continues stopped units and starts killed
    /// ones; kills the file's lock holder); returns what it did.
    func finish() -> (ChaosSummary, [String]) {
        condition.lock()
        finished = true
        condition.broadcast()
        while !done { condition.wait() }
        condition.unlock()
        for (index, unit) in units.enumerated() {
            switch (states[index], killedIsHealthy) {
            case (.running, false), (.killed, true): break
            case (.paused, false): try? unit.resume()
            case (.killed, false): try? unit.start()
            case (.running, true), (.paused, true): try? unit.kill()
            }
        }
        return (summary, log)
    }

    private func loop() {
        condition.lock()
        let first = Date(timeIntervalSinceNow: Double.random(in: healthyGap, using: &generator))
        while !finished && Date() < first { _ = condition.wait(until: first) }
        let early = finished
        condition.unlock()
        if early {
            condition.lock()
            done = true
            condition.broadcast()
            condition.unlock()
            return
        }
        while true {
            let (index, action) = decide()
            let unit = units[index]
            let began = monotonicNanoseconds()
            var failure: String?
            do {
                switch action {
                case "stop": try unit.pause()
                case "continue": try unit.resume()
                case "kill", "kill while stopped": try unit.kill()
                case "restart":
                    try unit.kill()
                    try unit.start()
                default: try unit.start()
                }
            } catch {
                failure = "\(error)"
            }
            let ended = monotonicNanoseconds()
            condition.lock()
            if let failure {
                summary.failures.append("\(action) \(unit.name): \(failure)")
                // A start that failed leaves the unit killed; any other failure leaves it as it was.
                if action == "restart" { states[index] = .killed }
            } else {
                summary.counts[action, default: 0] += 1
                switch action {
                case "stop": states[index] = .paused
                case "kill", "kill while stopped": states[index] = .killed
                default: states[index] = .running
                }
            }
            log.append(String(format: "%.3f-%.3f %@ %@%@", Double(began - start) / 1e9, Double(ended - start) / 1e9,
                              unit.name, action, failure.map { " FAILED: \($0)" } ?? ""))
            let healthy = states.allSatisfy { killedIsHealthy ? $0 == .killed : $0 == .running }
            let pause = healthy ? Double.random(in: healthyGap, using: &generator)
                : Double.random(in: 0.02...(3 * deadline), using: &generator)
            let wake = Date(timeIntervalSinceNow: pause)
            while !finished && Date() < wake { _ = condition.wait(until: wake) }
            if finished {
                done = true
                condition.broadcast()
                condition.unlock()
                return
            }
            condition.unlock()
        }
    }

    /// The next unit and action (under no lock: only this thread changes `states`).
    private func decide() -> (Int, String) {
        let faulted = states.indices.filter { killedIsHealthy ? states[$0] != .killed : states[$0] != .running }
        let index: Int
        if !faulted.isEmpty && (units.count == 1 || Double.random(in: 0..<1, using: &generator) < 0.6) {
            index = faulted.randomElement(using: &generator)!
        } else {
            index = Int.random(in: 0..<units.count, using: &generator)
        }
        let roll = Double.random(in: 0..<1, using: &generator)
        switch states[index] {
        case .running where killedIsHealthy: return (index, roll < 0.6 ? "kill" : roll < 0.9 ? "stop" : "restart")
        case .running: return (index, roll < 0.6 ? "stop" : roll < 0.85 ? "kill" : "restart")
        case .paused: return (index, roll < 0.8 ? "continue" : "kill while stopped")
        case .killed: return (index, "start after kill")
        }
    }
}

// MARK: - One backend

/// A backend under test: its calls and the units the chaos acts on.
struct NeverHangTarget {
    let deadline: Duration
    let deadlineSource: String
    let units: [ChaosUnit]
    var killedIsHealthy = false
    var healthyGap: ClosedRange<Double> = 0.05...0.5
    /// The operations, by name; call `i` runs `operations[i % count]`.
    let operations: [(String, @Sendable () throws -> Void)]
    /// Releases the fixtures.
    let tearDown: () -> Void
}

/// Whether the run must stop: a call has been running for 60 s.
private final class HangWatch: @unchecked Sendable {
    // @unchecked Sendable: `running` is reached only while `lock` is held.
    private let lock = NSLock()
    /// Per caller: when its current call started and what it is.
    private var running: [Int: (UInt64, String)] = [:]
    private var stopped = false
    let limit: UInt64 = 60_000_000_000

    func begin(_ caller: Int, _ what: String) { lock.withLock { running[caller] = (monotonicNanoseconds(), what) } }
    func end(_ caller: Int) { lock.withLock { running[caller] = nil } }
    func stop() { lock.withLock { stopped = true } }

    func watch(_ backend: String) {
        Thread { [self] in
            while true {
                Thread.sleep(forTimeInterval: 1)
                let (hung, finished) = lock.withLock { () -> ((Int, UInt64, String)?, Bool) in
                    let now = monotonicNanoseconds()
                    let hung = running.first { now - $0.value.0 > limit }.map { ($0.key, now - $0.value.0, $0.value.1) }
                    return (hung, stopped)
                }
                if finished { return }
                if let (caller, elapsed, what) = hung {
                    print("never-hang \(backend): HANG: caller \(caller)'s call \(what) has not returned after "
                        + "\(elapsed / 1_000_000_000) s; stopping the run")
                    exit(3)
                }
            }
        }.start()
    }
}

struct NeverHangRun {
    let backend: String
    let callers: Int
    let options: NeverHangBenchmarkOptions

    init(backend: String, callers: Int, options: NeverHangBenchmarkOptions) {
        self.backend = backend
        self.callers = callers
        self.options = options
    }

    func deadline(default milliseconds: Int) -> Duration { .milliseconds(options.deadlineMilliseconds ?? milliseconds) }

    func run() throws -> NeverHangResult {
        let target: NeverHangTarget
        switch backend {
        case "secret-service": target = try secretService()
        case "etcd": target = try etcd()
        case "tpm": target = try tpm()
        default: target = try file()
        }
        defer { target.tearDown() }
        let start = monotonicNanoseconds()
        // Each backend and caller count gets its own stream of decisions from the one printed seed.
        let seed = options.seed &+ UInt64(NeverHangBenchmarkOptions.allBackends.firstIndex(of: backend) ?? 0) &* 0x1000
            &+ UInt64(callers)
        let chaos = Chaos(units: target.units, seed: seed, deadline: target.deadline, start: start,
                          killedIsHealthy: target.killedIsHealthy, healthyGap: target.healthyGap)
        let watch = HangWatch()
        watch.watch(backend)
        chaos.begin()
        let results = Guarded<[NeverHangCall]>([])
        let operations = target.operations
        let total = options.calls
        let think = UInt32(options.thinkMilliseconds * 1000)
        let group = DispatchGroup()
        for caller in 0..<callers {
            group.enter()
            let thread = Thread {
                var mine: [NeverHangCall] = []
                mine.reserveCapacity(total / callers + 1)
                var index = caller
                while index < total {
                    let (operation, body) = operations[index % operations.count]
                    watch.begin(caller, "\(index) (\(operation))")
                    let began = monotonicNanoseconds()
                    var failure: (any Error)?
                    do { try body() } catch { failure = error }
                    let ended = monotonicNanoseconds()
                    watch.end(caller)
                    mine.append(NeverHangCall(index: index, operation: operation, startedAt: Double(began - start) / 1e9,
                                              nanoseconds: ended - began, outcome: outcomeName(failure),
                                              detail: failure.map { "\($0)" }))
                    index += callers
                    if think > 0 { usleep(think) }
                }
                results.withLock { $0.append(contentsOf: mine) }
                group.leave()
            }
            thread.name = "caller \(caller)"
            thread.start()
        }
        group.wait()
        watch.stop()
        let wall = Double(monotonicNanoseconds() - start) / 1e9
        let (summary, log) = chaos.finish()
        if let path = options.chaosLog {
            let header = "# \(backend), \(callers) caller(s), seed \(String(format: "0x%016llx", seed))\n"
            let text = header + log.joined(separator: "\n") + "\n"
            if let handle = FileHandle(forWritingAtPath: path) {
                handle.seekToEndOfFile()
                handle.write(Data(text.utf8))
                handle.closeFile()
            } else {
                _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
            }
        }
        let recovery = recover(operations)
        var calls = results.current.sorted { $0.index < $1.index }
        var examples: [String: String] = [:]
        for call in calls where call.detail != nil && examples[call.outcome] == nil { examples[call.outcome] = call.detail }
        // Keep the reason only where it is printed (calls over the deadline).
        let limit = NeverHangResult(backend: backend, callers: callers, deadline: target.deadline,
                                    margin: .milliseconds(options.marginMilliseconds), deadlineSource: "", calls: [],
                                    chaos: summary, wall: wall).limitNanoseconds
        calls = calls.map { call in
            call.nanoseconds > limit ? call : NeverHangCall(index: call.index, operation: call.operation,
                                                             startedAt: call.startedAt, nanoseconds: call.nanoseconds,
                                                             outcome: call.outcome, detail: nil)
        }
        return NeverHangResult(backend: backend, callers: callers, deadline: target.deadline,
                               margin: .milliseconds(options.marginMilliseconds), deadlineSource: target.deadlineSource,
                               calls: calls, chaos: summary, wall: wall, examples: examples, recovery: recovery)
    }

    /// Once the chaos has continued and started every unit again: how long until every operation succeeds again
    /// (each tried until it does, for at most 60 s).
    private func recover(_ operations: [(String, @Sendable () throws -> Void)]) -> String {
        var parts: [String] = []
        for (name, body) in operations {
            let start = monotonicNanoseconds()
            var attempts = 0
            var last: (any Error)?
            while monotonicNanoseconds() - start < 60_000_000_000 {
                attempts += 1
                do {
                    try body()
                    last = nil
                    break
                } catch {
                    last = error
                    usleep(20_000)
                }
            }
            let at = String(format: "%.2f s", Double(monotonicNanoseconds() - start) / 1e9)
            if let last {
                parts.append("\(name) NOT RECOVERED after \(attempts) attempts, \(at): \(last)")
            } else {
                parts.append("\(name) succeeds again (attempt \(attempts), \(at))")
            }
        }
        return parts.joined(separator: "; ")
    }

    // MARK: The Secret Service

    private func secretService() throws -> NeverHangTarget {
        if let reason = SecretServiceDaemon.unavailableReason { throw NeverHangError("skipped: \(reason)") }
        let daemon = try SecretServiceDaemon.start()
        do {
            let deadline = deadline(default: 500)
            var storageOptions = SecretServiceStorage.Options(busAddress: daemon.busAddress)
            storageOptions.callTimeout = deadline
            storageOptions.unlockPrompt = .never
            let engine = KeychainEngine(storage: try SecretServiceStorage(options: storageOptions))
            let (read, write) = try readAndWrite(engine, service: "never-hang-secret-service")
            let pid = Guarded<pid_t>(try Self.keyringDaemonPID(daemon))
            let unit = ChaosUnit(name: "gnome-keyring-daemon", pause: {
                guard Glibc.kill(pid.current, SIGSTOP) == 0 else { throw NeverHangError("SIGSTOP: errno \(errno)") }
            }, resume: {
                guard Glibc.kill(pid.current, SIGCONT) == 0 else { throw NeverHangError("SIGCONT: errno \(errno)") }
            }, kill: {
                try daemon.killKeyringDaemon()
            }, start: {
                try daemon.restartKeyringDaemon(unlock: true)
                pid.withLock { $0 = (try? Self.keyringDaemonPID(daemon)) ?? 0 }
            })
            return NeverHangTarget(deadline: deadline, deadlineSource: "SecretServiceStorage.Options.callTimeout",
                                   units: [unit], operations: [read, write], tearDown: { daemon.stop() })
        } catch {
            daemon.stop()
            throw error
        }
    }

    /// The gnome-keyring-daemon serving `daemon` (the one whose HOME is the fixture's).
    private static func keyringDaemonPID(_ daemon: SecretServiceDaemon) throws -> pid_t {
        let home = Data("HOME=\(daemon.root)/home\u{0}".utf8)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(name),
                  let comm = try? String(contentsOfFile: "/proc/\(name)/comm", encoding: .utf8),
                  comm.hasPrefix("gnome-keyring-d"),
                  let environment = FileManager.default.contents(atPath: "/proc/\(name)/environ"),
                  environment.range(of: home) != nil else { continue }
            return pid
        }
        throw NeverHangError("no gnome-keyring-daemon with HOME=\(daemon.root)/home")
    }

    /// A read (copyMatching with data) and a write (update of the secret) of an item added now.
    private func readAndWrite(_ engine: KeychainEngine, service: String)
        throws -> ((String, @Sendable () throws -> Void), (String, @Sendable () throws -> Void)) {
        let item: KeychainQuery = [Key.class: .string("genp"), Key.service: .string(service),
                                   Key.account: .string("never-hang")]
        try? engine.delete(item)
        try engine.add(item.merging([Key.valueData: .data(Data("initial".utf8))]) { $1 })
        let counter = Guarded(0)
        let read: @Sendable () throws -> Void = {
            _ = try engine.copyMatching(item.merging([Key.returnData: .bool(true)]) { $1 })
        }
        let write: @Sendable () throws -> Void = {
            let n = counter.withLock { $0 += 1; return $0 }
            try engine.update(item, with: [Key.valueData: .data(Data("secret \(n)".utf8))])
        }
        return (("read", read), ("update", write))
    }

    // MARK: etcd

    private func etcd() throws -> NeverHangTarget {
        if let reason = EtcdTestCluster.unavailableReason { throw NeverHangError("skipped: \(reason)") }
        let cluster = try EtcdTestCluster.start(EtcdTestCluster.Options(members: 3))
        do {
            let deadline = deadline(default: 1_000)
            let seconds = Double(deadline.components.seconds) + Double(deadline.components.attoseconds) / 1e18
            let endpoints = cluster.clientEndpoints.joined(separator: ",")
            let configuration = try KeychainEtcd.EtcdConfiguration(
                url: "etcd://\(endpoints)/never-hang?timeout=\(seconds)", environment: [:])
            let password = UUID().uuidString  // a throwaway cluster's throwaway password; never printed
            _ = try EtcdKeychain.create(configuration, password: password)
            let keychain = try EtcdKeychain.open(configuration)
            try keychain.unlock(password: password)
            let engine = KeychainEngine(storage: keychain)
            let (read, write) = try readAndWrite(engine, service: "never-hang-etcd")
            let units = (0..<3).map { member in
                ChaosUnit(name: "etcd member \(member)", pause: { cluster.pause(member: member) },
                          resume: { cluster.resume(member: member) }, kill: { cluster.kill(member: member) },
                          start: { try cluster.restart(member: member) })
            }
            return NeverHangTarget(deadline: deadline, deadlineSource: "EtcdConfiguration.timeout", units: units,
                                   operations: [read, write], tearDown: {
                                       keychain.lock()
                                       cluster.stop()
                                   })
        } catch {
            cluster.stop()
            throw error
        }
    }

    // MARK: The TPM

    private func tpm() throws -> NeverHangTarget {
        if let reason = SwtpmFixture.unavailableReason { throw NeverHangError("skipped: \(reason)") }
        let fixture = try SwtpmFixture.start()
        let swtpm = RestartableSwtpm(fixture: fixture)
        do {
            let deadline = deadline(default: 500)
            if !options.tpmLockout {
                // Every kill is a non-orderly shutdown, which the TPM counts as an authorization failure at its next
                // start-up; at swtpm's defaults the keys (which are DA-protected) lock out after a few kills.
                let relaxed = try fixture.run("/usr/bin/tpm2_dictionarylockout",
                                              ["-T", fixture.tcti, "-s", "-n", "1000000", "-t", "1", "-l", "1"])
                guard relaxed.status == 0 else { throw NeverHangError("tpm2_dictionarylockout: \(relaxed.output)") }
            }
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti, timeout: deadline)
            let key = try token.createKey(.signing)
            let digest = Data(repeating: 7, count: 32)
            let path = "\(fixture.directory)/never-hang.keychain-db"
            let sealed = try KeychainFile.create(at: path, sealedTo: token)
            sealed.lock()  // no unlock cache: every open below asks the TPM
            let sign: @Sendable () throws -> Void = { _ = try token.signature(digest: digest, with: key.dataRepresentation) }
            let open: @Sendable () throws -> Void = {
                let file = try KeychainFile.open(at: path, secureEnclave: token)
                guard file.lockState == .unlocked else { throw EngineError(Status.interactionNotAllowed, "opened locked") }
            }
            let unit = ChaosUnit(name: "swtpm", pause: { try swtpm.signal(SIGSTOP) }, resume: { try swtpm.signal(SIGCONT) },
                                 kill: { try swtpm.kill() }, start: { try swtpm.start() })
            let source = "TPMSecureEnclaveToken timeout, per TPM command"
                + (options.tpmLockout ? "" : "; swtpm's dictionary-attack lockout relaxed")
            return NeverHangTarget(deadline: deadline, deadlineSource: source,
                                   units: [unit], operations: [("sign", sign), ("open sealed keychain", open)],
                                   tearDown: { swtpm.stop() })
        } catch {
            swtpm.stop()
            throw error
        }
    }

    // MARK: The keychain file

    private func file() throws -> NeverHangTarget {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3") else {
            throw NeverHangError("skipped: /usr/bin/sqlite3 is missing (apt-get install sqlite3)")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("never-hang-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let holder = LockHolderProcess(path: "\(directory)/never-hang.keychain-db")
        do {
            let deadline = deadline(default: 500)
            let file = try KeychainFile.create(at: holder.path, password: "never-hang")
            file.busyTimeout = Double(deadline.components.seconds) + Double(deadline.components.attoseconds) / 1e18
            let engine = KeychainEngine(storage: file)
            let (read, write) = try readAndWrite(engine, service: "never-hang-file")
            let unit = ChaosUnit(name: "sqlite3 holding the write lock", pause: { try holder.signal(SIGSTOP) },
                                 resume: { try holder.signal(SIGCONT) }, kill: { holder.kill() },
                                 start: { try holder.start() })
            return NeverHangTarget(deadline: deadline, deadlineSource: "KeychainFile.busyTimeout", units: [unit],
                                   killedIsHealthy: true, healthyGap: 0.5...2, operations: [read, write], tearDown: {
                                       holder.kill()
                                       file.lock()
                                       try? FileManager.default.removeItem(atPath: directory)
                                   })
        } catch {
            holder.kill()
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }
}

/// A value behind a lock (KeychainEngine's `Locked` has package access).
final class Guarded<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is reached only while `lock` is held; the values kept here are Sendable.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
    var current: Value { withLock { $0 } }
}

struct NeverHangError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Processes of this benchmark

/// The fixture's swtpm, then swtpm processes this benchmark starts again on the same state directory and ports after
/// a kill. Each is started by a shell that kills it when this process's end of its standard input closes (this
/// process exits or dies), so none outlives the run.
final class RestartableSwtpm: @unchecked Sendable {
    // @unchecked Sendable: `own` and `fixtureAlive` are reached only while `lock` is held.
    private let fixture: SwtpmFixture
    private let lock = NSLock()
    private var fixtureAlive = true
    /// The swtpm this benchmark started (its pid), and its guard shell.
    private var own: (pid: pid_t, guardShell: Process, input: Pipe)?

    init(fixture: SwtpmFixture) { self.fixture = fixture }

    func signal(_ signal: Int32) throws {
        try lock.withLock {
            if fixtureAlive {
                if signal == SIGSTOP { fixture.suspend() } else { fixture.resume() }
            } else if let own {
                guard Glibc.kill(own.pid, signal) == 0 else { throw NeverHangError("signal \(signal): errno \(errno)") }
            }
        }
    }

    func kill() throws {
        try lock.withLock {
            if fixtureAlive {
                try fixture.killTPM()
                fixtureAlive = false
            }
            endOwn()
        }
    }

    /// Starts swtpm again on the fixture's state and ports; returns once it accepts connections.
    func start() throws {
        try lock.withLock {
            endOwn()
            let port = fixture.port
            let script = "/usr/bin/swtpm socket --tpm2 --tpmstate dir=\"$1\" "
                + "--server type=tcp,port=\(port),bindaddr=127.0.0.1 --ctrl type=tcp,port=\(port + 1),bindaddr=127.0.0.1 "
                + "--flags not-need-init,startup-clear --log file=\"$1/swtpm.log\",level=1 </dev/null >/dev/null 2>&1 & "
                + "echo $!; read -r line; kill -KILL $! 2>/dev/null"
            let shell = Process()
            shell.executableURL = URL(fileURLWithPath: "/bin/sh")
            shell.arguments = ["-c", script, "never-hang-swtpm", fixture.directory]
            let input = Pipe(), output = Pipe()
            shell.standardInput = input
            shell.standardOutput = output
            shell.standardError = FileHandle.nullDevice
            try shell.run()
            let line = readLine(output.fileHandleForReading.fileDescriptor, timeout: 10)
            guard let line, let pid = pid_t(line) else {
                try? input.fileHandleForWriting.close()
                shell.waitUntilExit()
                throw NeverHangError("swtpm's guard shell printed no pid")
            }
            own = (pid, shell, input)
            // Ready once it accepts a connection (it binds before it listens; a few retries).
            let deadline = Date(timeIntervalSinceNow: 10)
            while !accepts(port: port) {
                guard Date() < deadline else { throw NeverHangError("swtpm did not listen again on port \(port)") }
                usleep(5_000)
            }
        }
    }

    func stop() {
        lock.withLock { endOwn() }
        fixture.stop()
    }

    /// Ends the swtpm this benchmark started, if any (called with `lock` held).
    private func endOwn() {
        guard let own else { return }
        Glibc.kill(own.pid, SIGKILL)
        try? own.input.fileHandleForWriting.close()
        own.guardShell.waitUntilExit()  // swtpm, killed, has closed its sockets: the ports are free again
        self.own = nil
    }

    private func accepts(port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

/// A `sqlite3` process holding a keychain file's write lock (`BEGIN IMMEDIATE`, never committed) until it is killed.
final class LockHolderProcess: @unchecked Sendable {
    // @unchecked Sendable: `process` and `input` are reached only while `lock` is held.
    let path: String
    private let lock = NSLock()
    private var process: Process?
    private var input: Pipe?

    init(path: String) { self.path = path }

    /// Starts a holder and returns once it holds the lock (it waits up to 10 s for a writer of Keystone's to finish).
    func start() throws {
        try lock.withLock {
            endGuarded()
            let process = Process()
            // stdbuf: sqlite3's answer reaches the pipe at once (stdio would hold it until exit); it execs sqlite3.
            process.executableURL = URL(fileURLWithPath: "/usr/bin/stdbuf")
            process.arguments = ["-o0", "/usr/bin/sqlite3", "-batch", path]
            let input = Pipe(), output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            process.standardError = output
            try process.run()
            self.process = process
            self.input = input
            input.fileHandleForWriting.write(Data(".timeout 10000\nBEGIN IMMEDIATE;\nSELECT 'held';\n".utf8))
            let line = readLine(output.fileHandleForReading.fileDescriptor, timeout: 15)
            guard line == "held" else {
                endGuarded()
                throw NeverHangError("sqlite3 did not take the write lock: \(line ?? "no answer")")
            }
        }
    }

    func signal(_ signal: Int32) throws {
        try lock.withLock {
            guard let process else { return }
            guard Glibc.kill(process.processIdentifier, signal) == 0 else { throw NeverHangError("signal: errno \(errno)") }
        }
    }

    func kill() { lock.withLock { endGuarded() } }

    private func endGuarded() {
        guard let process else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        try? input?.fileHandleForWriting.close()
        process.waitUntilExit()
        self.process = nil
        input = nil
    }
}

/// One line from `fd` (without its newline), waiting at most `timeout` seconds; nil at end of file or time out.
private func readLine(_ fd: Int32, timeout: Double) -> String? {
    var bytes: [UInt8] = []
    let deadline = Date(timeIntervalSinceNow: timeout)
    while true {
        let left = deadline.timeIntervalSinceNow
        guard left > 0 else { return nil }
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, Int32(left * 1000) + 1)
        if ready < 0 && errno == EINTR { continue }
        guard ready > 0 else { return nil }
        var byte: UInt8 = 0
        let count = read(fd, &byte, 1)
        if count < 0 && errno == EINTR { continue }
        guard count == 1 else { return nil }
        if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(byte)
    }
}

#endif
