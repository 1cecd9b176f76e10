import Foundation
import KeychainEngine
import Keystone

func genpQuery(_ service: String, _ account: String) -> KeychainQuery {
    [Key.class: .string("genp"), Key.service: .string(service), Key.account: .string(account)]
}

/// An engine over memory holding `count` items of one service.
func filledEngine(_ count: Int) throws -> KeychainEngine {
    let storage = MemoryStorage()
    try storage.write { tx in
        for i in 0..<count {
            _ = try tx.insert(StoredItem(itemClass: .genericPassword, attributes: [
                Key.service: .string("bench"), Key.account: .string("acct-\(i)"), Key.accessGroup: .string("default"),
                Key.synchronizable: .bool(false), Key.accessible: .string("ak"),
            ], secret: Data("secret-\(i)".utf8)))
        }
    }
    return KeychainEngine(storage: storage)
}

func runMemoryBenchmarks(_ report: inout Report, scale: Int) {
    let n = 20_000 / scale
    let payload = Data(repeating: 0x5A, count: 32)

    // Baseline: a bare dictionary.
    var dictionary: [String: Data] = [:]
    let dictNs = measure(n) { i in
        let key = "acct-\(i % 1000)"
        dictionary[key] = payload
        _ = dictionary[key]
    }
    report.add("memory set+get: [String: Data] baseline", formatNanos(dictNs))

    // The engine directly (what KeychainServices' SecItem calls and the typed API run on).
    let engine = KeychainEngine(storage: MemoryStorage())
    let engineNs = measure(n) { i in
        let q = genpQuery("bench", "acct-\(i % 1000)")
        do { try engine.update(q, with: [Key.valueData: .data(payload)]) } catch {
            var add = q; add[Key.valueData] = .data(payload); _ = try? engine.add(add)
        }
        var read = q; read[Key.returnData] = .bool(true)
        _ = try? engine.copyMatching(read)
    }
    report.add("memory set+get: KeychainEngine", formatNanos(engineNs), String(format: "%.1f× dictionary", engineNs / dictNs))

    runTypedBenchmarks(&report, n: n, payload: payload, baseline: dictNs)
    runTypedScaleBenchmarks(&report, scale: scale, payload: payload)

    // Copy latency as the keychain grows.
    var latencies: [Int: Double] = [:]
    for count in [100, 10_000, 100_000 / scale] {
        guard let engine = try? filledEngine(count) else { continue }
        let lookups = 5_000 / scale
        let ns = measure(lookups) { i in
            var q = genpQuery("bench", "acct-\((i &* 7919) % count)")
            q[Key.returnData] = .bool(true)
            _ = try? engine.copyMatching(q)
        }
        latencies[count] = ns
        report.add("memory copy latency, \(count) items", formatNanos(ns))
    }
    if let small = latencies[100], let large = latencies[100_000 / scale] {
        report.add("memory copy: \(100_000 / scale) vs 100 items", String(format: "%.2f×", large / small), "goal ≤ 2×")
    }

}

/// Heap footprint at 10k and 100k stored items: MemoryStorage holding items saved through the typed API
/// (every attribute a save stores: service, account, group, sync, accessibility, creation and modification
/// dates), against a dictionary of the same accounts and secrets. Runs first, before freed memory can be reused.
func runFootprint(_ report: inout Report, scale: Int) {
    var keep: [Any] = []
    // Warm-up, kept alive: a run's first allocations (runtime metadata, malloc arenas, interned attribute
    // names) are not costs of the items measured next.
    var warmDictionary: [String: Data] = [:]
    for i in 0..<1_000 { warmDictionary["warm-\(i)"] = Data("secret-\(i)".utf8) }
    let warmKeychain = Keychain(store: KeychainEngine(storage: MemoryStorage()))
    for i in 0..<1_000 {
        guard let item = try? GenericPassword(service: "warm", account: "acct-\(i)") else { continue }
        try? warmKeychain.save(Data("secret-\(i)".utf8), for: item)
    }
    keep.append(warmDictionary)
    keep.append(warmKeychain)
    for count in [10_000 / scale, 100_000 / scale] {
        let before = residentBytes()
        var plain: [String: Data] = [:]
        for i in 0..<count { plain["acct-\(i)"] = Data("secret-\(i)".utf8) }
        let afterDictionary = residentBytes()
        let storage = MemoryStorage()
        let keychain = Keychain(store: KeychainEngine(storage: storage))
        for i in 0..<count {
            guard let item = try? GenericPassword(service: "bench", account: "acct-\(i)") else { continue }
            try? keychain.save(Data("secret-\(i)".utf8), for: item)
        }
        let afterEngine = residentBytes()
        keep.append(plain)
        keep.append(storage)
        guard before > 0 else { continue }
        let d = Double(afterDictionary - before) / Double(count)
        let e = Double(afterEngine - afterDictionary) / Double(count)
        report.add("memory per item, \(count) items: dictionary", String(format: "%.0f B", d))
        report.add("memory per item, \(count) items: MemoryStorage (typed saves)", String(format: "%.0f B", e),
                   d > 0 ? String(format: "%.1f× dictionary (goal ≤ 4×)", e / d) : "")
    }
    withExtendedLifetime(keep) {}
}
