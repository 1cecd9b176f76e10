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
