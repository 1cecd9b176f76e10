import Foundation
import KeychainEngine
import KeychainFile

/// The keychain file against raw SQLite with the same pragmas, in the same run.
func runFileBenchmarks(_ report: inout Report, scale: Int) {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-bench-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let payload = Data(repeating: 0x42, count: 32)

    do {
        let raw = RawSQLite(path: dir.appendingPathComponent("raw.sqlite").path)
        let file = try KeychainFile.create(at: dir.appendingPathComponent("bench.keychain-db").path, password: "bench")
        let engine = KeychainEngine(storage: file)

        // Durable single-item saves: one transaction, fsync'd, per item.
        let saves = 200 / scale
        let rawSave = measure(saves, rounds: 3) { i in raw.save(key: Data("acct-\(i)".utf8), value: payload) }
        let fileSave = measure(saves, rounds: 3) { i in
            _ = try? engine.add([Key.class: .string("genp"), Key.service: .string("bench"), Key.account: .string("acct-\(i)"),
                                 Key.valueData: .data(payload)])
        }
        report.add("durable save: raw SQLite (WAL, synchronous=FULL)", formatNanos(rawSave))
        report.add("durable save: KeychainFile via SecItemAdd rules", formatNanos(fileSave), String(format: "%.2f× raw throughput (goal ≥ 0.8)", rawSave / fileSave))

        // Point reads.
        let reads = 5_000 / scale
        let rawRead = measure(reads) { i in _ = raw.read(key: Data("acct-\(i % saves)".utf8)) }
        let fileRead = measure(reads) { i in
            _ = try? engine.copyMatching([Key.class: .string("genp"), Key.service: .string("bench"), Key.account: .string("acct-\(i % saves)"),
                                          Key.returnData: .bool(true)])
        }
        report.add("point read: raw SQLite", formatNanos(rawRead))
        report.add("point read: KeychainFile", formatNanos(fileRead), String(format: "%.2f× raw throughput (goal ≥ 0.5)", rawRead / fileRead))
    } catch {
        report.add("file benchmarks", "failed: \(error)")
    }

    // Read latency as the file grows: cold (every read decrypts: the decrypted-item cache off) and hot (cache on).
    var latencies: [String: Double] = [:]
    let large = 100_000 / scale
    for count in [100, 10_000, large] {
        do {
            let file = try KeychainFile.create(at: dir.appendingPathComponent("size-\(count).keychain-db").path, password: "bench")
            try file.write { tx in
                for i in 0..<count {
                    _ = try tx.insert(StoredItem(itemClass: .genericPassword, attributes: [
                        Key.service: .string("bench"), Key.account: .string("acct-\(i)"), Key.accessGroup: .string("default"),
                        Key.synchronizable: .bool(false), Key.accessible: .string("ak"),
                    ], secret: Data("secret-\(i)".utf8)))
                }
            }
            let engine = KeychainEngine(storage: file)
            for (mode, caching) in [("cold", false), ("hot", true)] {
                file.cachesDecryptedItems = caching
                let ns = measure(2_000 / scale) { i in
                    _ = try? engine.copyMatching([Key.class: .string("genp"), Key.service: .string("bench"),
                                                  Key.account: .string("acct-\((i &* 7919) % min(count, 100))"), Key.returnData: .bool(true)])
                }
                latencies["\(mode)-\(count)"] = ns
                report.add("file read latency, \(count) items, \(mode)", formatNanos(ns))
            }
        } catch {
            report.add("file read latency, \(count) items", "failed: \(error)")
        }
    }
    for mode in ["cold", "hot"] {
        if let small = latencies["\(mode)-100"], let big = latencies["\(mode)-\(large)"] {
            report.add("file read (\(mode)): \(large) vs 100 items", String(format: "%.2f×", big / small), "goal ≤ 2×")
        }
    }

    runCLIBenchmark(&report, dir: dir)
}

/// Wall time of `keystone find-generic-password -w`, against spawning `/bin/true`.
func runCLIBenchmark(_ report: inout Report, dir: URL) {
    let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("keystone").path
    guard FileManager.default.isExecutableFile(atPath: binary) else {
        report.add("CLI find-generic-password -w", "skipped", "build the keystone product in the same configuration")
        return
    }
    let keychain = dir.appendingPathComponent("cli.keychain-db").path
    func run(_ path: String, _ arguments: [String]) -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["KEYSTONE_KEYCHAIN"] = keychain
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let start = DispatchTime.now().uptimeNanoseconds
        try? process.run()
        process.waitUntilExit()
        return Double(DispatchTime.now().uptimeNanoseconds - start)
    }
    _ = run(binary, ["add-generic-password", "-a", "alice", "-s", "bench", "-w", "s3cret"])
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
    guard let file = try? KeychainFile.create(at: dir.appendingPathComponent("p.keychain-db").path, password: "p") else { return }
    try? file.write { tx in
        for i in 0..<10_000 {
            _ = try tx.insert(StoredItem(itemClass: .genericPassword, attributes: [
                Key.service: .string("bench"), Key.account: .string("acct-\(i)"), Key.accessGroup: .string("default"),
                Key.synchronizable: .bool(false), Key.accessible: .string("ak"),
            ], secret: Data("secret-\(i)".utf8)))
        }
    }
    let engine = KeychainEngine(storage: file)
    let start = DispatchTime.now().uptimeNanoseconds
    defer { print("miss reads:", formatNanos(Double(DispatchTime.now().uptimeNanoseconds - start) / 20_000)) }
    for i in (0..<20_000).map({ ($0 &* 7919) % 10_000 }) {
        _ = try? engine.copyMatching([Key.class: .string("genp"), Key.service: .string("bench"),
                                      Key.account: .string("acct-\(i)"), Key.returnData: .bool(true)])
    }
}
