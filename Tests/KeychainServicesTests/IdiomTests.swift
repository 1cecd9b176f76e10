// Linux-only: these tests use KeychainServices' own API (the default engine, SecItemBridge), which Apple
// platforms replace with the Security framework. AppleStyleCode.swift compiles on both.
#if !canImport(Darwin)
import Foundation
import KeychainServices
import Testing

extension KeychainServicesTests {
    /// Dictionary and result idioms of popular wrappers (Valet's `[String: AnyHashable]`, older code's
    /// `[String: AnyObject]`, `Bool`/`NSNumber` flags, `Int` limits).
    @Suite("Wrapper idioms")
    struct Idioms {
        init() { KeychainServicesDefaults.useMemoryKeychain() }

        @Test("[String: AnyHashable] queries and [String: AnyObject] results")
        func anyHashable() {
            let base: [String: AnyHashable] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "valet",
                                               kSecAttrAccount as String: "key"]
            var add = base
            add[kSecValueData as String] = Data("v".utf8)
            add[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlock
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            var query = base
            query[kSecReturnAttributes as String] = true
            query[kSecReturnData as String] = kCFBooleanTrue
            query[kSecMatchLimit as String] = kSecMatchLimitOne
            var result: AnyObject?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            let attributes = result as? [String: AnyObject]
            #expect(attributes?[kSecValueData as String] as? Data == Data("v".utf8))
            #expect(attributes?[kSecAttrAccessible as String] as? String == "ck")
        }

        @Test("[String: AnyObject] queries built with explicit bridging, numeric limits and NSNumber flags")
        func anyObject() {
            var query: [String: AnyObject] = [kSecClass as String: kSecClassGenericPassword as AnyObject,
                                              kSecAttrService as String: "legacy" as AnyObject]
            query[kSecAttrAccount as String] = "a" as AnyObject
            query[kSecValueData as String] = Data("x".utf8) as AnyObject
            query[kSecAttrSynchronizable as String] = NSNumber(value: false)
            #expect(SecItemAdd(query as CFDictionary, nil) == errSecSuccess)
            query[kSecValueData as String] = nil
            query[kSecReturnData as String] = NSNumber(value: true)
            query[kSecMatchLimit as String] = 5 as AnyObject
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            #expect((result as? [Data])?.first == Data("x".utf8))
            #expect((result as? NSArray)?.count == 1)
        }
    }
}
#endif
