import Foundation

/// Runs `body` `iterations` times after a warm-up and returns the median nanoseconds per iteration
/// over `rounds` rounds.
func measure(_ iterations: Int, rounds: Int = 5, _ body: (Int) throws -> Void) rethrows -> Double {
    for i in 0..<min(iterations, 100) { try body(i) }  // warm-up
    var samples: [Double] = []
    for round in 0..<rounds {
        let start = DispatchTime.now().uptimeNanoseconds
        for i in 0..<iterations { try body(round &* iterations &+ i) }
        let end = DispatchTime.now().uptimeNanoseconds
        samples.append(Double(end - start) / Double(iterations))
    }
    samples.sort()
    return samples[samples.count / 2]
}

/// Resident memory of this process in bytes (Linux /proc; 0 elsewhere).
/// Measure footprints first in a run, before freed memory can be reused.
func residentBytes() -> Int {
    #if os(Linux)
    guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = statm.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    #else
    return 0
    #endif
}

func formatNanos(_ ns: Double) -> String {
    if ns >= 1_000_000 { return String(format: "%.2f ms", ns / 1_000_000) }
    if ns >= 1_000 { return String(format: "%.2f µs", ns / 1_000) }
    return String(format: "%.0f ns", ns)
}

/// A table of results printed at the end.
struct Report {
    var rows: [(String, String, String)] = []
    mutating func add(_ name: String, _ value: String, _ note: String = "") { rows.append((name, value, note)) }
    func print() {
        let w0 = rows.map(\.0.count).max() ?? 0
        let w1 = rows.map(\.1.count).max() ?? 0
        for (a, b, c) in rows {
            Swift.print(a.padding(toLength: w0, withPad: " ", startingAt: 0) + "  " + b.padding(toLength: w1, withPad: " ", startingAt: 0) + "  " + c)
        }
    }
}

/// Parses the `--name value` or `--name=value` options after a benchmark's subcommand, for every benchmark the same
/// way: `--help` (`-h`) prints `usage` and exits; an unknown option, a missing value, or a value `apply` rejects
/// prints why and the usage on standard error, and the result is false.
///
/// - Parameters:
///   - flags: the options that take no value (`apply` gets nil).
///   - valued: the options that take one.
///   - apply: takes one option; returns why its value is wrong, or nil.
func parseBenchmarkOptions(_ arguments: ArraySlice<String>, command: String, usage: String, flags: Set<String> = [],
                           valued: Set<String>, apply: (_ name: String, _ value: String?) -> String?) -> Bool {
    var rest = arguments
    func fail(_ message: String) -> Bool {
        FileHandle.standardError.write(Data("keystone-benchmarks \(command): \(message)\n\(usage)\n".utf8))
        return false
    }
    while let argument = rest.popFirst() {
        var (name, value) = (argument, String?.none)
        if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
            (name, value) = (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
        }
        if name == "--help" || name == "-h" {
            print(usage)
            exit(0)
        }
        if flags.contains(name) {
            if let problem = apply(name, nil) { return fail(problem) }
            continue
        }
        guard valued.contains(name) else { return fail("unknown option \(argument)") }
        guard let text = value ?? rest.popFirst() else { return fail("\(name) needs a value") }
        if let problem = apply(name, text) { return fail(problem) }
    }
    return true
}

/// `text` as a positive number, or nil.
func positiveNumber(_ text: String?) -> Int? { text.flatMap(Int.init).flatMap { $0 > 0 ? $0 : nil } }
