import Foundation
import KeychainEngine
import KeychainServices

/// Apple-style SecItem calls (an add-or-update, then a read) on a memory keychain, against the same dictionary baseline.
func runSecItemBenchmarks(_ report: inout Report, n: Int, payload: Data, baseline: Double) {
    #if !canImport(Darwin)
    KeychainServicesDefaults.useMemoryKeychain()
    #endif
    let ns = measure(n) { i in
        let account = "acct-\(i % 1000)"
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                                    kSecAttrAccount as String: account]
        if SecItemUpdate(query as CFDictionary, [kSecValueData as String: payload] as CFDictionary) == errSecItemNotFound {
            var add = query
            add[kSecValueData as String] = payload
            _ = SecItemAdd(add as CFDictionary, nil)
        }
        var read = query
        read[kSecReturnData as String] = true
        var result: CFTypeRef?
        _ = SecItemCopyMatching(read as CFDictionary, &result)
    }
    report.add("memory set+get: SecItemUpdate/Add + SecItemCopyMatching", formatNanos(ns), String(format: "%.1f× dictionary", ns / baseline))
}
