import CBaselineSQLite
import Foundation
import KeychainEngine
import KeychainFile
#if canImport(Glibc)
import Glibc
#endif

// `keystone-benchmarks file-scale [--part update,writers,readers,size] [--writers 1,2,4,8] [--adds N] [--readers 1,2,4,8]
//  [--reads N] [--updates N] [--items 10000,100000]`: the keychain file under a server's load (issue 32), every figure
// with its baseline from the same run:
// - update: durable SecItemUpdate and SecItemAdd, one caller, against the fsync floor (interleaved);
// - writers: durable adds/s with W writer threads sharing one instance and W processes, group commit on and off,
//   against the fsync floor and raw SQLite (WAL, synchronous=FULL, a connection per thread / process);
// - readers: point reads/s (decrypting: the row cache off) with R threads sharing one instance, against raw SQLite
//   with a connection per thread;
// - size: at each item count, bulk adds, durable adds, point reads p50/p99, limit-one by service, match-all peak
//   memory, dump-keychain, file size per item, open and unlock, against raw SQLite where it has the same operation.

struct FileScaleOptions {
    var parts: Set<String> = ["update", "writers", "readers", "size"]
    var writers = [1, 2, 4, 8]
    var adds = 400
    var readers = [1, 2, 4, 8]
    var reads = 20_000
    var updates = 1_000
    var items = [10_000, 100_000]

    static let usage = "usage: keystone-benchmarks file-scale [--part update,writers,readers,size] [--writers 1,2,4,8] [--adds N] "
        + "[--readers 1,2,4,8] [--reads N] [--updates N] [--items 10000,100000]"

    static func parse(_ arguments: ArraySlice<String>) -> FileScaleOptions? {
        var options = FileScaleOptions()
        func list(_ text: String) -> [Int]? {
            let values = text.split(separator: ",").map { positiveNumber(String($0)) }
            return values.contains(nil) || values.isEmpty ? nil : values.map { $0! }
        }
        let ok = parseBenchmarkOptions(arguments, command: "file-scale", usage: usage,
                                       valued: ["--part", "--writers", "--adds", "--readers", "--reads", "--updates", "--items"]) { name, value in
            let value = value ?? ""
            switch name {
            case "--part": options.parts = Set(value.split(separator: ",").map(String.init))
            case "--writers": guard let v = list(value) else { return "--writers takes counts: 1,2,4,8" }; options.writers = v
            case "--readers": guard let v = list(value) else { return "--readers takes counts: 1,2,4,8" }; options.readers = v
            case "--items": guard let v = list(value) else { return "--items takes counts: 10000,100000" }; options.items = v
            case "--adds": guard let v = positiveNumber(value) else { return "--adds takes a positive number" }; options.adds = v
            case "--reads": guard let v = positiveNumber(value) else { return "--reads takes a positive number" }; options.reads = v
            case "--updates": guard let v = positiveNumber(value) else { return "--updates takes a positive number" }; options.updates = v
            default: return "unknown option \(name)"
            }
            return nil
        }
        return ok ? options : nil
    }
}

private func nowNs() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

private func genericPassword(_ service: String, _ account: String) -> KeychainQuery {
    [Key.class: .string("genp"), Key.service: .string(service), Key.account: .string(account)]
}

/// Runs `count` threads at once, each running `body(thread)` after all have started; returns the wall time in ns.
private func concurrently(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) -> Double {
    let ready = DispatchGroup()
    let done = DispatchGroup()
    let start = DispatchSemaphore(value: 0)
    for t in 0..<count {
        ready.enter()
        done.enter()
        Thread.detachNewThread {
            ready.leave()
            start.wait()
            body(t)
            done.leave()
        }
    }
    ready.wait()
    let begin = nowNs()
    for _ in 0..<count { start.signal() }
    done.wait()
    return Double(nowNs() - begin)
}

/// `keystone-benchmarks file-scale ...`; also the child processes of the multi-process rows.
func runFileScaleBenchmarks(_ arguments: [String]) -> Int32 {
    if arguments.first == "--child" { return runFileScaleChild(Array(arguments.dropFirst())) }
    guard let options = FileScaleOptions.parse(arguments[...]) else { return 2 }
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-scale-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    chmod(dir.path, 0o700)
    defer { try? FileManager.default.removeItem(at: dir) }
    print("Keystone file-scale benchmarks (\(ProcessInfo.processInfo.activeProcessorCount) cores; \(dir.path))\n")
    var report = Report()
    do {
        if options.parts.contains("update") { try runUpdateRows(&report, dir: dir, options: options) }
        if options.parts.contains("writers") { try runWriterRows(&report, dir: dir, options: options) }
        if options.parts.contains("readers") { try runReaderRows(&report, dir: dir, options: options) }
        if options.parts.contains("size") { for count in options.items { try runSizeRows(&report, dir: dir, count: count) } }
    } catch {
        report.add("file-scale", "failed: \(error)")
    }
    report.print()
    return 0
}

// MARK: - One caller: durable update and add against the floor

private func runUpdateRows(_ report: inout Report, dir: URL, options: FileScaleOptions) throws {
    let floor = DiskFloor(directory: dir)
    let file = try KeychainFile.create(at: dir.appendingPathComponent("update.keychain-db").path, password: "bench")
    let engine = KeychainEngine(storage: file)
    let payload = Data(repeating: 0x42, count: 32)
    for i in 0..<100 { try engine.add(genericPassword("bench", "u\(i)").merging([Key.valueData: .data(payload)]) { $1 }) }
    var floorNs: [Double] = [], updateNs: [Double] = [], addNs: [Double] = []
    for i in 0..<options.updates {
        var t = nowNs(); floor.write(); floorNs.append(Double(nowNs() - t))
        t = nowNs()
        try engine.update(genericPassword("bench", "u\(i % 100)"), with: [Key.valueData: .data(Data(repeating: UInt8(i & 0xFF), count: 32))])
        updateNs.append(Double(nowNs() - t))
        t = nowNs()
        try engine.add(genericPassword("bench", "a\(i)").merging([Key.valueData: .data(payload)]) { $1 })
        addNs.append(Double(nowNs() - t))
    }
    func mean(_ v: [Double]) -> Double { v.reduce(0, +) / Double(v.count) }
    func median(_ v: [Double]) -> Double { v.sorted()[v.count / 2] }
    let f = mean(floorNs), u = mean(updateNs), a = mean(addNs)
    // Medians leave out the checkpoints (a few writes in a few hundred copy the log into the file: three more flushes).
    let fm = median(floorNs), um = median(updateNs), am = median(addNs)
    report.add("one caller: durable write floor (pwrite 128 B + fsync)", formatNanos(f), "mean of \(options.updates), interleaved; median " + formatNanos(fm))
    report.add("one caller: durable SecItemUpdate", formatNanos(u), String(format: "%.2f× floor throughput (goal ≥ 0.8); median ", f / u) + formatNanos(um) + String(format: ", %.2f× the floor's", fm / um))
    report.add("one caller: durable SecItemAdd", formatNanos(a), String(format: "%.2f× floor throughput; median ", f / a) + formatNanos(am) + String(format: ", %.2f× the floor's", fm / am))
    report.add("one caller: log flushes / writes", "\(file.logFlushCount) / \(2 * options.updates)", "group commit: one flush per write when alone")
}

// MARK: - Concurrent durable writers

private func runWriterRows(_ report: inout Report, dir: URL, options: FileScaleOptions) throws {
    let payload = Data(repeating: 0x42, count: 32)
    let floor = DiskFloor(directory: dir)
    for _ in 0..<50 { floor.write() }
    let floorNs = measure(300, rounds: 3) { _ in floor.write() }
    report.add("writers: fsync floor, one thread", String(format: "%.0f writes/s", 1e9 / floorNs), formatNanos(floorNs) + " per write")
    var base: [String: Double] = [:]
    for writers in options.writers {
        let perWriter = max(1, options.adds / writers)
        let total = Double(perWriter * writers)
        // The floor again, right before this row: the disk's speed drifts with the machine's other work.
        let floorNs = measure(200, rounds: 3) { _ in floor.write() }
        // Raw SQLite: a connection per thread, WAL, synchronous=FULL, one row per transaction.
        let rawPath = dir.appendingPathComponent("raw-threads-\(writers).sqlite").path
        _ = RawSQLite(path: rawPath)
        let rawWall = concurrently(writers) { t in
            let raw = RawSQLite(path: rawPath)
            for i in 0..<perWriter { raw.save(key: Data("t\(t)-\(i)".utf8), value: payload) }
        }
        // The keychain file: one instance shared by every thread, group commit on, then off.
        var rows: [(String, Double)] = [("raw SQLite", total / (rawWall / 1e9))]
        for groupCommit in [true, false] {
            let file = try KeychainFile.create(at: dir.appendingPathComponent("threads-\(writers)-\(groupCommit).keychain-db").path, password: "bench")
            file.groupCommitEnabled = groupCommit
            let engine = KeychainEngine(storage: file)
            try engine.add(genericPassword("bench", "warm").merging([Key.valueData: .data(payload)]) { $1 })
            let flushesBefore = file.logFlushCount
            let wall = concurrently(writers) { t in
                for i in 0..<perWriter {
                    _ = try? engine.add(genericPassword("bench", "t\(t)-\(i)").merging([Key.valueData: .data(payload)]) { $1 })
                }
            }
            let name = groupCommit ? "KeychainFile, group commit" : "KeychainFile, flush per commit (before)"
            rows.append((name, total / (wall / 1e9)))
            if groupCommit {
                report.add("writers: \(writers) threads, log flushes for \(Int(total)) adds", "\(file.logFlushCount - flushesBefore)")
            }
        }
        for (name, rate) in rows {
            let key = "threads " + name
            if writers == options.writers.first { base[key] = rate }
            let scaling = base[key].map { String(format: "%.2f× its %d-writer rate", rate / $0, options.writers.first!) } ?? ""
            report.add("writers: \(writers) threads, \(name)", String(format: "%.0f adds/s", rate),
                       String(format: "%.2f× floor (%.0f/s); ", rate * floorNs / 1e9, 1e9 / floorNs) + scaling)
        }
    }
    for writers in options.writers {
        let perWriter = max(1, options.adds / writers)
        let total = Double(perWriter * writers)
        let rawPath = dir.appendingPathComponent("raw-procs-\(writers).sqlite").path
        _ = RawSQLite(path: rawPath)
        let floorNs = measure(200, rounds: 3) { _ in floor.write() }
        let filePath = dir.appendingPathComponent("procs-\(writers).keychain-db").path
        _ = try KeychainFile.create(at: filePath, password: "bench")
        var rows: [(String, Double)] = []
        if let wall = runChildren(writers, ["raw-adds", rawPath, "\(perWriter)"]) { rows.append(("raw SQLite", total / (wall / 1e9))) }
        if let wall = runChildren(writers, ["file-adds", filePath, "\(perWriter)"]) { rows.append(("KeychainFile, group commit", total / (wall / 1e9))) }
        if let wall = runChildren(writers, ["file-adds-full", filePath, "\(perWriter)"]) { rows.append(("KeychainFile, flush per commit (before)", total / (wall / 1e9))) }
        for (name, rate) in rows {
            let key = "processes " + name
            if writers == options.writers.first { base[key] = rate }
            let scaling = base[key].map { String(format: "%.2f× its %d-writer rate", rate / $0, options.writers.first!) } ?? ""
            report.add("writers: \(writers) processes, \(name)", String(format: "%.0f adds/s", rate),
                       String(format: "%.2f× floor (%.0f/s); ", rate * floorNs / 1e9, 1e9 / floorNs) + scaling)
        }
    }
}

/// Starts `count` children (`file-scale --child KIND ARGS…` with the child's index appended), lets them open their
/// file, starts them at once, and returns the wall time from the start to the last one's end; nil on a failure.
private func runChildren(_ count: Int, _ arguments: [String]) -> Double? {
    var children: [(Process, Pipe, Pipe)] = []
    for index in 0..<count {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = ["file-scale", "--child"] + arguments + ["\(index)"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        guard (try? process.run()) != nil else { return nil }
        children.append((process, input, output))
    }
    // Each child says "ready" once its file is open (and unlocked), then waits for a line on its standard input.
    for (_, _, output) in children {
        var line = Data()
        while !line.contains(0x0A) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            line.append(chunk)
        }
    }
    let begin = nowNs()
    for (_, input, _) in children { input.fileHandleForWriting.write(Data("go\n".utf8)) }
    var failed = false
    for (process, _, output) in children {
        let rest = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        if process.terminationStatus != 0 || !rest.contains("done") { failed = true }
    }
    let wall = Double(nowNs() - begin)
    return failed ? nil : wall
}

/// The child side: `raw-adds PATH N INDEX`, `file-adds PATH N INDEX`, `file-adds-full PATH N INDEX`.
private func runFileScaleChild(_ arguments: [String]) -> Int32 {
    guard arguments.count == 4, let count = Int(arguments[2]) else { return 2 }
    let path = arguments[1], index = arguments[3]
    let payload = Data(repeating: 0x42, count: 32)
    func ready() {
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        _ = readLine()
    }
    switch arguments[0] {
    case "raw-adds":
        let raw = RawSQLite(path: path)
        ready()
        for i in 0..<count { raw.save(key: Data("p\(index)-\(i)".utf8), value: payload) }
    case "file-adds", "file-adds-full":
        do {
            let file = try KeychainFile.open(at: path)
            if file.lockState != .unlocked { try file.unlock(password: "bench") }
            file.groupCommitEnabled = arguments[0] == "file-adds"
            let engine = KeychainEngine(storage: file)
            let tag = arguments[0] == "file-adds" ? "g" : "f"
            try engine.add(genericPassword("bench", "\(tag)\(index)-warm").merging([Key.valueData: .data(payload)]) { $1 })
            ready()
            for i in 0..<count {
                try engine.add(genericPassword("bench", "\(tag)\(index)-\(i)").merging([Key.valueData: .data(payload)]) { $1 })
            }
        } catch {
            FileHandle.standardError.write(Data("child failed: \(error)\n".utf8))
            return 1
        }
    default:
        return 2
    }
    FileHandle.standardOutput.write(Data("done\n".utf8))
    return 0
}

// MARK: - Concurrent readers

private func runReaderRows(_ report: inout Report, dir: URL, options: FileScaleOptions) throws {
    let count = 10_000
    let path = dir.appendingPathComponent("readers.keychain-db").path
    let file = try makeFile(path, count: count)
    file.cachesDecryptedItems = false
    let engine = KeychainEngine(storage: file)
    let rawPath = dir.appendingPathComponent("readers.sqlite").path
    let loader = RawSQLite(path: rawPath)
    loader.load((0..<count).map { (Data("acct-\($0)".utf8), Data(repeating: 0x42, count: 32)) })
    // Warm-up, not measured: the page cache, and the keychain's pooled connections with their copies of its keys.
    _ = concurrently(options.readers.max() ?? 1) { t in
        let raw = RawSQLite(path: rawPath)
        for i in 0..<200 {
            _ = raw.read(key: Data("acct-\((i &+ t &* 200) % count)".utf8))
            _ = try? engine.copyMatching(genericPassword("bench", "acct-\((i &+ t &* 200) % count)").merging([Key.returnData: .bool(true)]) { $1 })
        }
    }
    // Process CPU time (user + system): CPU per read shows whether readers contend (it grows with the threads when
    // they wait on a lock or a cache line) even when other work on the machine takes the cores they would scale to.
    func cpuNs() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e9 + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e3
    }
    func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
    var base: [String: Double] = [:]
    for readers in options.readers {
        let perReader = max(1, options.reads / readers)
        let total = Double(perReader * readers)
        var rates: [String: [Double]] = [:], cpu: [String: [Double]] = [:]
        let raw = "raw SQLite (a connection per thread)", keystone = "KeychainFile (one instance, decrypting)"
        // Three rounds, raw SQLite and the keychain interleaved; the medians are reported.
        for _ in 0..<3 {
            var before = cpuNs()
            let rawWall = concurrently(readers) { t in
                let raw = RawSQLite(path: rawPath)
                for i in 0..<perReader { _ = raw.read(key: Data("acct-\((i &* 7919 &+ t &* 104_729) % count)".utf8)) }
            }
            rates[raw, default: []].append(total / (rawWall / 1e9))
            cpu[raw, default: []].append((cpuNs() - before) / total)
            before = cpuNs()
            let fileWall = concurrently(readers) { t in
                for i in 0..<perReader {
                    _ = try? engine.copyMatching(genericPassword("bench", "acct-\((i &* 7919 &+ t &* 104_729) % count)")
                        .merging([Key.returnData: .bool(true)]) { $1 })
                }
            }
            rates[keystone, default: []].append(total / (fileWall / 1e9))
            cpu[keystone, default: []].append((cpuNs() - before) / total)
        }
        var scaling: [String: Double] = [:]
        for name in [raw, keystone] {
            let rate = median(rates[name]!)
            if readers == options.readers.first { base[name] = rate }
            scaling[name] = base[name].map { rate / $0 }
            report.add("readers: \(readers) threads, \(name)", String(format: "%.0f reads/s", rate),
                       (scaling[name].map { String(format: "%.2f× its %d-thread rate; ", $0, options.readers.first!) } ?? "")
                       + formatNanos(median(cpu[name]!)) + " CPU per read")
        }
        if let k = scaling[keystone], let r = scaling[raw] {
            report.add("readers: \(readers) threads, KeychainFile scaling / raw SQLite scaling", String(format: "%.2f", k / r),
                       "medians of 3; \(ProcessInfo.processInfo.activeProcessorCount) cores")
        }
    }
}

// MARK: - Size

private func percentile(_ sorted: [Double], _ p: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }

private func fileBytes(_ path: String) -> Int {
    ["", "-wal"].reduce(0) { total, suffix in
        var info = stat()
        return total + (stat(path + suffix, &info) == 0 ? Int(info.st_size) : 0)
    }
}

private func runSizeRows(_ report: inout Report, dir: URL, count: Int) throws {
    let label = count >= 1_000_000 ? "\(count / 1_000_000)M" : count >= 1_000 ? "\(count / 1_000)k" : "\(count)"
    let path = dir.appendingPathComponent("size-\(count).keychain-db").path
    let rawPath = dir.appendingPathComponent("size-\(count).sqlite").path
    let payload = Data(repeating: 0x42, count: 32)

    // Bulk adds, 10,000 per transaction (as makeFile), against raw SQLite's.
    var t = nowNs()
    let file = try makeFile(path, count: count)
    let bulk = Double(nowNs() - t) / Double(count)
    let raw = RawSQLite(path: rawPath)
    t = nowNs()
    var loaded = 0
    while loaded < count {
        let batch = min(10_000, count - loaded)
        raw.load((loaded..<(loaded + batch)).map { (Data("acct-\($0)".utf8), payload) })
        loaded += batch
    }
    let rawBulk = Double(nowNs() - t) / Double(count)
    report.add("\(label) items: bulk add (10,000 per transaction)", formatNanos(bulk) + " per item", "raw SQLite: " + formatNanos(rawBulk))

    let engine = KeychainEngine(storage: file)
    // Durable adds into a file of this size, against raw SQLite's durable upserts.
    var durable: [Double] = [], rawDurable: [Double] = []
    for i in 0..<200 {
        t = nowNs()
        try engine.add(genericPassword("extra", "x\(i)").merging([Key.valueData: .data(payload)]) { $1 })
        durable.append(Double(nowNs() - t))
        t = nowNs()
        raw.save(key: Data("extra-\(i)".utf8), value: payload)
        rawDurable.append(Double(nowNs() - t))
    }
    durable.sort(); rawDurable.sort()
    report.add("\(label) items: durable SecItemAdd p50", formatNanos(percentile(durable, 0.5)), "raw SQLite upsert: " + formatNanos(percentile(rawDurable, 0.5)))

    // Point reads at random across the file, decrypting every time (cache off).
    file.cachesDecryptedItems = false
    var reads: [Double] = [], rawReads: [Double] = []
    for i in 0..<4_000 {
        let n = (i &* 7919) % count
        t = nowNs()
        _ = try engine.copyMatching(genericPassword("bench", "acct-\(n)").merging([Key.returnData: .bool(true)]) { $1 })
        reads.append(Double(nowNs() - t))
        t = nowNs()
        _ = raw.read(key: Data("acct-\(n)".utf8))
        rawReads.append(Double(nowNs() - t))
    }
    reads.sort(); rawReads.sort()
    report.add("\(label) items: point read p50 / p99", formatNanos(percentile(reads, 0.5)) + " / " + formatNanos(percentile(reads, 0.99)),
               "raw SQLite: " + formatNanos(percentile(rawReads, 0.5)) + " / " + formatNanos(percentile(rawReads, 0.99)))
    let one = measure(20, rounds: 3) { _ in
        _ = try? engine.copyMatching([Key.class: .string("genp"), Key.service: .string("bench"), Key.returnData: .bool(true)])
    }
    report.add("\(label) items: limit-one by service over \(label) matches", formatNanos(one), "goal: flat")

    // Open and unlock (scrypt), from a locked file, against raw SQLite's open and first read.
    file.lock()
    t = nowNs()
    let reopened = try KeychainFile.open(at: path)
    let openNs = Double(nowNs() - t)
    t = nowNs()
    try reopened.unlock(password: "bench")
    let unlockNs = Double(nowNs() - t)
    t = nowNs()
    let rawAgain = RawSQLite(path: rawPath)
    _ = rawAgain.read(key: Data("acct-1".utf8))
    let rawOpen = Double(nowNs() - t)
    report.add("\(label) items: open / unlock", formatNanos(openNs) + " / " + formatNanos(unlockNs), "raw SQLite open + first read: " + formatNanos(rawOpen))
    reopened.lock()

    report.add("\(label) items: file size per item", String(format: "%.0f B", Double(fileBytes(path)) / Double(count)),
               String(format: "raw SQLite (32-byte values, no encryption): %.0f B", Double(fileBytes(rawPath)) / Double(count)))
    report.add("\(label) items: kSecMatchLimitAll, peak memory", childPeak(path: path, mode: "--child-limit-all"))
    report.add("\(label) items: keystone dump-keychain", timeDump(path: path))
}
