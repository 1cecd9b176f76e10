import Foundation
import KeychainEngine
import KeychainFile
#if canImport(Glibc)
import Glibc
#endif

// `keystone-benchmarks group-commit [--rounds 3] [--writers 1,2,4,8] [--adds 800]`: durable adds/s with W writer
// processes (and W threads of one process) on one keychain file, interleaved round by round so that every figure has
// its baselines from the same minute (this machine's disk speed drifts several-fold with its other work):
// - the fsync floor (one thread: pwrite 128 B + fsync), measured right before each row;
// - raw SQLite (WAL, synchronous=FULL, a connection per process / thread);
// - KeychainFile with group commit shared across processes (the default), and with `KEYSTONE_SHARED_COMMIT=0` (each
//   process flushes its own commits: before the shared commit file existed).
// Each row prints the median over the rounds of adds/s, of its ratio to the same configuration with 1 writer run right
// before it, and of its ratio to the floor.

private struct GroupCommitOptions {
    var rounds = 3
    var writers = [1, 2, 4, 8]
    var adds = 800
    static let usage = "usage: keystone-benchmarks group-commit [--rounds 3] [--writers 1,2,4,8] [--adds 800]"
}

private func nanos() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

private func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? .nan : sorted[sorted.count / 2]
}

/// `keystone-benchmarks group-commit ...`, and its children (`group-commit --child KIND PATH N INDEX`).
func runGroupCommitBenchmarks(_ arguments: [String]) -> Int32 {
    if arguments.first == "--child" { return groupCommitChild(Array(arguments.dropFirst())) }
    var options = GroupCommitOptions()
    let ok = parseBenchmarkOptions(arguments[...], command: "group-commit", usage: GroupCommitOptions.usage,
                                   valued: ["--rounds", "--writers", "--adds"]) { name, value in
        switch name {
        case "--rounds": guard let v = positiveNumber(value) else { return "--rounds takes a positive number" }; options.rounds = v
        case "--adds": guard let v = positiveNumber(value) else { return "--adds takes a positive number" }; options.adds = v
        case "--writers":
            let v = (value ?? "").split(separator: ",").compactMap { positiveNumber(String($0)) }
            guard !v.isEmpty else { return "--writers takes counts: 1,2,4,8" }
            options.writers = v
        default: return "unknown option \(name)"
        }
        return nil
    }
    guard ok else { return 2 }
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-group-commit-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    chmod(dir.path, 0o700)
    defer { try? FileManager.default.removeItem(at: dir) }
    print("Keystone group-commit benchmarks (\(ProcessInfo.processInfo.activeProcessorCount) cores; \(options.rounds) rounds; \(dir.path))\n")

    let kinds: [(name: String, child: String, environment: [String: String])] = [
        ("raw SQLite (WAL, synchronous=FULL)", "raw", [:]),
        ("KeychainFile, shared across processes", "file", [:]),
        ("KeychainFile, each process flushes alone (before)", "file", ["KEYSTONE_SHARED_COMMIT": "0"]),
    ]
    let floor = DiskFloor(directory: dir)
    for _ in 0..<50 { floor.write() }
    // rates[mode][writers][kind] = one value per round; floors likewise.
    var rates: [String: [Int: [String: [Double]]]] = [:]
    var floors: [String: [Int: [Double]]] = [:]
    // Each configuration's 1-writer run right before its W-writer run: a ratio of two runs a few seconds apart.
    // scaling[mode][writers][kind]: W-writer rate / 1-writer rate, one per round.
    var scaling: [String: [Int: [String: [Double]]]] = [:]
    for round in 0..<options.rounds {
        for writers in options.writers {
            let perWriter = max(1, options.adds / writers)
            let total = Double(perWriter * writers)
            for mode in ["processes", "threads"] {
                floors[mode, default: [:]][writers, default: []].append(1e9 / measure(100, rounds: 3) { _ in floor.write() })
                for kind in kinds where mode == "processes" || kind.environment.isEmpty {
                    var pair: [Double] = []
                    for count in Set([1, writers]).sorted() {
                        let path = dir.appendingPathComponent("\(mode)-\(round)-\(writers)-\(count)-\(kind.child)-\(kind.environment.isEmpty).db").path
                        let each = count == 1 ? options.adds : perWriter
                        guard let wall = mode == "processes"
                            ? runWriters(count, kind: kind.child, path: path, perWriter: each, environment: kind.environment)
                            : runThreads(count, kind: kind.child, path: path, perWriter: each) else {
                            print("round \(round): \(count) \(mode), \(kind.name): failed")
                            continue
                        }
                        pair.append(Double(count == 1 ? options.adds : Int(total)) / (wall / 1e9))
                    }
                    guard let last = pair.last, let first = pair.first else { continue }
                    rates[mode, default: [:]][writers, default: [:]][kind.name, default: []].append(last)
                    scaling[mode, default: [:]][writers, default: [:]][kind.name, default: []].append(last / first)
                }
            }
        }
    }
    var report = Report()
    for mode in ["processes", "threads"] {
        for writers in options.writers {
            let floorRate = median(floors[mode]?[writers] ?? [])
            report.add("\(writers) \(mode): fsync floor", String(format: "%.0f writes/s", floorRate), "median of \(options.rounds)")
            for kind in kinds {
                guard let values = rates[mode]?[writers]?[kind.name], !values.isEmpty else { continue }
                let ratios = scaling[mode]?[writers]?[kind.name] ?? []
                let versusFloor = zip(values, floors[mode]?[writers] ?? []).map { $0 / $1 }
                report.add("\(writers) \(mode): \(kind.name)", String(format: "%.0f adds/s", median(values)),
                           String(format: "%.2f× 1 writer just before, %.2f× floor (medians; rates %@)", median(ratios),
                                  median(versusFloor), values.map { String(format: "%.0f", $0) }.joined(separator: ", ")))
            }
        }
    }
    report.print()
    return 0
}

/// Wall time of `count` threads each adding `perWriter` items to one instance (or raw SQLite, a connection each).
private func runThreads(_ count: Int, kind: String, path: String, perWriter: Int) -> Double? {
    let payload = Data(repeating: 0x42, count: 32)
    let body: @Sendable (Int) -> Void
    if kind == "raw" {
        _ = RawSQLite(path: path)
        // Connections open one at a time before the start (concurrent opens of one file can meet SQLITE_BUSY in
        // RawSQLite's set-up, which it does not retry).
        let opening = NSLock()
        body = { t in
            opening.lock()
            let raw = RawSQLite(path: path)
            opening.unlock()
            for i in 0..<perWriter { raw.save(key: Data("t\(t)-\(i)".utf8), value: payload) }
        }
    } else {
        guard let file = try? KeychainFile.create(at: path, password: "bench") else { return nil }
        let engine = KeychainEngine(storage: file)
        _ = try? engine.add(groupCommitItem("warm"))
        body = { t in for i in 0..<perWriter { _ = try? engine.add(groupCommitItem("t\(t)-\(i)")) } }
    }
    let started = DispatchGroup(), done = DispatchGroup(), go = DispatchSemaphore(value: 0)
    for t in 0..<count {
        started.enter(); done.enter()
        Thread.detachNewThread { started.leave(); go.wait(); body(t); done.leave() }
    }
    started.wait()
    let begin = nanos()
    for _ in 0..<count { go.signal() }
    done.wait()
    return Double(nanos() - begin)
}

private func groupCommitItem(_ account: String) -> KeychainQuery {
    [Key.class: .string("genp"), Key.service: .string("bench"), Key.account: .string(account),
     Key.valueData: .data(Data(repeating: 0x42, count: 32))]
}

/// Starts `count` child processes on `path`, lets each open its file, starts them at once; the wall time to the last
/// one's end, nil on a failure.
private func runWriters(_ count: Int, kind: String, path: String, perWriter: Int, environment: [String: String]) -> Double? {
    if kind == "raw" { _ = RawSQLite(path: path) } else if (try? KeychainFile.create(at: path, password: "bench")) == nil { return nil }
    var children: [(Process, Pipe, Pipe)] = []
    for index in 0..<count {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = ["group-commit", "--child", kind, path, "\(perWriter)", "\(index)"]
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        guard (try? process.run()) != nil else { return nil }
        children.append((process, input, output))
    }
    for (_, _, output) in children {
        var line = Data()
        while !line.contains(0x0A) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            line.append(chunk)
        }
    }
    let begin = nanos()
    for (_, input, _) in children { input.fileHandleForWriting.write(Data("go\n".utf8)) }
    var failed = false
    for (process, _, output) in children {
        let rest = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        if process.terminationStatus != 0 || !rest.contains("done") { failed = true }
    }
    let wall = Double(nanos() - begin)
    return failed ? nil : wall
}

/// The child: `raw PATH N INDEX` or `file PATH N INDEX`; says "ready" once open (and, for a keychain, after one
/// warm-up add), adds N items after a line on its standard input, then says "done".
private func groupCommitChild(_ arguments: [String]) -> Int32 {
    guard arguments.count == 4, let count = Int(arguments[2]) else { return 2 }
    let path = arguments[1], index = arguments[3]
    func ready() {
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        _ = readLine()
    }
    if arguments[0] == "raw" {
        let raw = RawSQLite(path: path)
        ready()
        for i in 0..<count { raw.save(key: Data("p\(index)-\(i)".utf8), value: Data(repeating: 0x42, count: 32)) }
    } else {
        do {
            let file = try KeychainFile.open(at: path)
            if file.lockState != .unlocked { try file.unlock(password: "bench") }
            let engine = KeychainEngine(storage: file)
            try engine.add(groupCommitItem("p\(index)-warm"))
            ready()
            for i in 0..<count { try engine.add(groupCommitItem("p\(index)-\(i)")) }
        } catch {
            FileHandle.standardError.write(Data("child failed: \(error)\n".utf8))
            return 1
        }
    }
    FileHandle.standardOutput.write(Data("done\n".utf8))
    return 0
}
