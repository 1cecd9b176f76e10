import Foundation
import KeychainEngine
import KeychainFile
#if canImport(Glibc)
import Glibc
#endif

/// The disk's floor for a durable write: one 128-byte pwrite at a fixed offset and an fsync, in the keychain's
/// directory. Nothing durable can be faster on this disk.
final class DiskFloor {
    private let fd: Int32
    private var buffer = [UInt8](repeating: 0x5A, count: 128)
    init(directory: URL) {
        fd = open(directory.appendingPathComponent("floor.bin").path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
    }
    deinit { close(fd) }
    func write() {
        _ = buffer.withUnsafeBytes { pwrite(fd, $0.baseAddress, 128, 0) }
        fsync(fd)
    }
}

private func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Fills a fresh keychain file with `count` generic passwords of service "bench" in one transaction.
func makeFile(_ path: String, count: Int) throws -> KeychainFile {
    let file = try KeychainFile.create(at: path, password: "bench")
    var done = 0
    while done < count {
        let batch = min(10_000, count - done)
        try file.write { tx in
            for i in done..<(done + batch) {
                _ = try tx.insert(StoredItem(itemClass: .genericPassword, attributes: [
                    Key.service: .string("bench"), Key.account: .string("acct-\(i)"), Key.accessGroup: .string("default"),
                    Key.synchronizable: .bool(false), Key.accessible: .string("ak"),
                ], secret: Data("secret-\(i)".utf8)))
            }
        }
        done += batch
    }
    return file
}

/// The keychain file against the disk's floor and raw SQLite, in the same run.
func runFileBenchmarks(_ report: inout Report, scale: Int) {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-bench-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    chmod(dir.path, 0o700)
    defer { try? FileManager.default.removeItem(at: dir) }
    let payload = Data(repeating: 0x42, count: 32)

    do {
        let floor = DiskFloor(directory: dir)
        let raw = RawSQLite(path: dir.appendingPathComponent("raw.sqlite").path)
        let file = try KeychainFile.create(at: dir.appendingPathComponent("bench.keychain-db").path, password: "bench")
        let engine = KeychainEngine(storage: file)
        func query(_ i: Int) -> KeychainQuery {
            [Key.class: .string("genp"), Key.service: .string("bench"), Key.account: .string("acct-\(i)")]
        }

        // Durable writes, interleaved with the floor and raw SQLite so all three see the same disk.
        let saves = 600 / scale
        for i in 0..<50 { floor.write(); raw.save(key: Data("warm-\(i)".utf8), value: payload); _ = try? engine.add(query(-1 - i).merging([Key.valueData: .data(payload)]) { $1 }) }
        var floorNs: UInt64 = 0, rawNs: UInt64 = 0, addNs: UInt64 = 0, updateNs: UInt64 = 0
        for i in 0..<saves {
            var t = now(); floor.write(); floorNs += now() - t
            t = now(); raw.save(key: Data("acct-\(i)".utf8), value: payload); rawNs += now() - t
            t = now(); _ = try? engine.add(query(i).merging([Key.valueData: .data(payload)]) { $1 }); addNs += now() - t
            t = now(); try? engine.update(query(i), with: [Key.valueData: .data(Data(repeating: 0x43, count: 32))]); updateNs += now() - t
        }
        let f = Double(floorNs) / Double(saves), r = Double(rawNs) / Double(saves)
        let a = Double(addNs) / Double(saves), u = Double(updateNs) / Double(saves)
        report.add("durable write floor: pwrite 128 B + fsync", formatNanos(f))
        report.add("durable write: raw SQLite upsert (WAL, synchronous=FULL)", formatNanos(r), String(format: "%.2f× floor", f / r))
        report.add("durable SecItemAdd: KeychainFile", formatNanos(a), String(format: "%.2f× floor throughput (goal ≥ 0.5), %.2f× raw SQLite", f / a, r / a))
        report.add("durable SecItemUpdate: KeychainFile", formatNanos(u), String(format: "%.2f× floor throughput (goal ≥ 0.6)", f / u))

        // Point reads.
        let reads = 5_000 / scale
        let rawRead = measure(reads) { i in _ = raw.read(key: Data("acct-\(i % saves)".utf8)) }
        let fileRead = measure(reads) { i in
            _ = try? engine.copyMatching(query(i % saves).merging([Key.returnData: .bool(true)]) { $1 })
        }
        report.add("point read: raw SQLite", formatNanos(rawRead))
        report.add("point read: KeychainFile", formatNanos(fileRead), String(format: "%.2f× raw throughput (goal ≥ 0.5)", rawRead / fileRead))
    } catch {
        report.add("file benchmarks", "failed: \(error)")
    }

    // Random reads as the file grows: every read a different item across the whole file, decrypting (cache off).
    var latencies: [Int: Double] = [:]
    let large = 100_000 / scale
    for count in [100, 10_000 / scale, large] {
        do {
            let path = dir.appendingPathComponent("size-\(count).keychain-db").path
            let file = try makeFile(path, count: count)
            file.cachesDecryptedItems = false
            let engine = KeychainEngine(storage: file)
            let ns = measure(4_000 / scale) { i in
                _ = try? engine.copyMatching([Key.class: .string("genp"), Key.service: .string("bench"),
                                              Key.account: .string("acct-\((i &* 7919) % count)"), Key.returnData: .bool(true)])
            }
            latencies[count] = ns
            report.add("random read across \(count) items", formatNanos(ns))
            if count == large {
                // A limit-one query by service alone: must stop at the first match, not decrypt all of them.
                let one = measure(20, rounds: 3) { _ in
                    _ = try? engine.copyMatching([Key.class: .string("genp"), Key.service: .string("bench"), Key.returnData: .bool(true)])
                }
                report.add("limit-one query by service over \(count) matches", formatNanos(one), "goal: independent of the number of matches")
                file.lock()
                report.add("kSecMatchLimitAll over \(count) items: peak memory", childPeak(path: path, mode: "--child-limit-all"), "goal ≤ 150 MB at 100k")
                report.add("keystone dump-keychain over \(count) items", timeDump(path: path), "goal ≤ 5 s at 100k")
            }
        } catch {
            report.add("random read across \(count) items", "failed: \(error)")
        }
    }
    for count in [10_000 / scale, large] {
        if let small = latencies[100], let big = latencies[count] {
            report.add("random read: \(count) vs 100 items", String(format: "%.2f×", big / small), "goal ≤ 2×")
        }
    }

    runCLIBenchmark(&report, dir: dir)
}

/// Runs this benchmark binary again as a child doing one job on `path`, and reports the child's peak resident
/// memory and wall time (the parent's own allocations do not count).
func childPeak(path: String, mode: String) -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    process.arguments = [mode, path]
    let pipe = Pipe()
    process.standardOutput = pipe
    let start = now()
    guard (try? process.run()) != nil else { return "failed to start" }
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    let wall = Double(now() - start)
    return output.trimmingCharacters(in: .whitespacesAndNewlines) + ", " + formatNanos(wall)
}

/// The child side of ``childPeak(path:mode:)``: `--child-limit-all PATH` copies every item with its secret and
/// attributes (as `dump-keychain -d` does) and prints its peak resident memory.
func runFileChild(_ arguments: [String]) -> Bool {
    guard arguments.count >= 3, arguments[1] == "--child-limit-all" else { return false }
    do {
        let file = try KeychainFile.open(at: arguments[2])
        if file.lockState != .unlocked { try file.unlock(password: "bench") }
        let engine = KeychainEngine(storage: file)
        let all = try engine.copyMatching([Key.class: .string("genp"), Key.matchLimit: .string(Key.matchLimitAll),
                                           Key.returnAttributes: .bool(true), Key.returnData: .bool(true)])
        let count = all?.array?.count ?? 0
        // VmHWM: this process image's own peak. (getrusage's maxrss keeps the spawning parent's peak across exec.)
        print(String(format: "%.0f MB peak for %d items", Double(peakResidentKilobytes()) / 1024, count))
    } catch {
        print("failed: \(error)")
    }
    return true
}

/// The `keystone` binary built next to this one, if any: the Benchmarks package depends on Keystone's `keystone`
/// product, so `swift build --package-path Benchmarks` builds both into the same folder.
var keystoneBinary: String? {
    let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("keystone").path
    return FileManager.default.isExecutableFile(atPath: binary) ? binary : nil
}

/// Runs `path` with `arguments`, `input` on standard input and output discarded; returns the wall time and status.
func timedRun(_ path: String, _ arguments: [String], input: String? = nil, environment extra: [String: String] = [:]) -> (ns: Double, status: Int32) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(extra) { $1 }
    let stdin = Pipe()
    process.standardInput = stdin
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    let start = now()
    guard (try? process.run()) != nil else { return (0, -1) }
    if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
    try? stdin.fileHandleForWriting.close()
    process.waitUntilExit()
    return (Double(now() - start), process.terminationStatus)
}

/// Wall time of `keystone dump-keychain` over the keychain at `path` (password "bench"), output discarded.
func timeDump(path: String) -> String {
    guard let binary = keystoneBinary else { return "skipped: no keystone binary next to keystone-benchmarks (swift build --package-path Benchmarks builds both)" }
    _ = timedRun(binary, ["unlock-keychain", path], input: "bench\n")
    let (ns, status) = timedRun(binary, ["dump-keychain", path])
    return status == 0 ? formatNanos(ns) : "failed (exit \(status))"
}

/// Wall time of `keystone find-generic-password -w`, against spawning `/bin/true`.
func runCLIBenchmark(_ report: inout Report, dir: URL) {
    guard let binary = keystoneBinary else {
        report.add("CLI find-generic-password -w", "skipped", "no keystone binary next to keystone-benchmarks (swift build --package-path Benchmarks builds both)")
        return
    }
    let environment = ["KEYSTONE_KEYCHAIN": dir.appendingPathComponent("cli.keychain-db").path]
    func run(_ path: String, _ arguments: [String], input: String? = nil) -> Double {
        timedRun(path, arguments, input: input, environment: environment).ns
    }
    _ = run(binary, ["add-generic-password", "-a", "alice", "-s", "bench", "-w"], input: "s3cret\n")
    var cli: [Double] = []
    var spawn: [Double] = []
    for _ in 0..<10 {
        cli.append(run(binary, ["find-generic-password", "-a", "alice", "-s", "bench", "-w"]))
        spawn.append(run("/bin/true", []))
    }
    cli.sort()
    spawn.sort()
    report.add("CLI find-generic-password -w (median of 10)", formatNanos(cli[5]), String(format: "spawning /bin/true: %@", formatNanos(spawn[5])))
}

/// A loop of cache-missing reads on a 10k-item file, for a profiler (`--profile-file-misses`).
func profileFileMisses() {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-profile-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: dir) }
    guard let file = try? makeFile(dir.appendingPathComponent("p.keychain-db").path, count: 10_000) else { return }
    file.cachesDecryptedItems = false
    let engine = KeychainEngine(storage: file)
    let start = now()
    defer { print("miss reads:", formatNanos(Double(now() - start) / 20_000)) }
    for i in (0..<20_000).map({ ($0 &* 7919) % 10_000 }) {
        _ = try? engine.copyMatching([Key.class: .string("genp"), Key.service: .string("bench"),
                                      Key.account: .string("acct-\(i)"), Key.returnData: .bool(true)])
    }
}

/// A loop of SecItemUpdate calls on a keychain file, for a profiler (`--profile-file-updates`; set TMPDIR to a
/// tmpfs to leave out the disk).
func profileFileUpdates() {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-profile-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: dir) }
    guard let file = try? makeFile(dir.appendingPathComponent("p.keychain-db").path, count: 100) else { return }
    let engine = KeychainEngine(storage: file)
    let start = now()
    defer { print("updates:", formatNanos(Double(now() - start) / 5_000)) }
    if CommandLine.arguments.contains("--reads") {
        for i in 0..<50_000 {
            _ = try? engine.copyMatching([Key.class: .string("genp"), Key.service: .string("bench"), Key.account: .string("acct-\(i % 100)"),
                                          Key.returnData: .bool(true)])
        }
        return
    }
    if CommandLine.arguments.contains("--adds") {
        for i in 0..<5_000 {
            _ = try? engine.add([Key.class: .string("genp"), Key.service: .string("bench"), Key.account: .string("new-\(i)"),
                                 Key.valueData: .data(Data(repeating: UInt8(i & 0xFF), count: 32))])
        }
        return
    }
    for i in 0..<5_000 {
        try? engine.update([Key.class: .string("genp"), Key.service: .string("bench"), Key.account: .string("acct-\(i % 100)")],
                           with: [Key.valueData: .data(Data(repeating: UInt8(i & 0xFF), count: 32))])
    }
}

/// The peak resident set of this process image, from /proc/self/status (VmHWM), in kilobytes.
func peakResidentKilobytes() -> Int {
    guard let handle = FileHandle(forReadingAtPath: "/proc/self/status") else { return 0 }
    let text = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
    for line in text.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
    return 0
}
