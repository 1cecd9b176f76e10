import Foundation
import KeychainEngine
import Keystone
import KeystoneTesting

/// The typed API over the in-memory keychain, against the bare dictionary measured in the same run.
func runTypedBenchmarks(_ report: inout Report, n: Int, payload: Data, baseline: Double) {
    let keychain = Keychain(store: KeychainEngine(storage: MemoryStorage()))
    let items = (0..<1000).compactMap { try? GenericPassword(service: "bench", account: "acct-\($0)") }
    let typed = measure(n) { i in
        let item = items[i % items.count]
        try? keychain.save(payload, for: item)
        _ = try? keychain.data(for: item)
    }
    report.add("memory set+get: Keystone typed API (save + data)", formatNanos(typed), String(format: "%.1f× dictionary (goal ≤ 20×)", typed / baseline))
    // The same through KeystoneTesting's InMemoryKeychain, which also records every call for assertions.
    let testing = Keychain(store: InMemoryKeychain())
    let recorded = measure(n / 4) { i in
        let item = items[i % items.count]
        try? testing.save(payload, for: item)
        _ = try? testing.data(for: item)
    }
    report.add("memory set+get: typed API over InMemoryKeychain", formatNanos(recorded), String(format: "%.1f× dictionary", recorded / baseline))
    runSecItemBenchmarks(&report, n: n, payload: payload, baseline: baseline)
}

/// Typed save + read with 10k and 100k items stored, against a dictionary holding as many keys,
/// both measured in this run on the same keys (random order, so neither runs from a warm cache line).
func runTypedScaleBenchmarks(_ report: inout Report, scale: Int, payload: Data) {
    for count in [10_000 / scale, 100_000 / scale] {
        let keys = (0..<count).map { "acct-\($0)" }
        var dictionary: [String: Data] = [:]
        for key in keys { dictionary[key] = payload }
        let lookups = 20_000 / scale
        let dictNs = measure(lookups) { i in
            let key = keys[(i &* 7919) % count]
            dictionary[key] = payload
            _ = dictionary[key]
        }
        let keychain = Keychain(store: KeychainEngine(storage: MemoryStorage()))
        let items = keys.compactMap { try? GenericPassword(service: "bench", account: $0) }
        for item in items { try? keychain.save(payload, for: item) }
        let typedNs = measure(lookups) { i in
            let item = items[(i &* 7919) % count]
            try? keychain.save(payload, for: item)
            _ = try? keychain.data(for: item)
        }
        report.add("typed save+get, \(count) items: [String: Data] set+get", formatNanos(dictNs))
        report.add("typed save+get, \(count) items: Keystone typed API", formatNanos(typedNs),
                   String(format: "%.1f× dictionary (goal ≤ 20×)", typedNs / dictNs))
        withExtendedLifetime((dictionary, keychain)) {}
    }
}
