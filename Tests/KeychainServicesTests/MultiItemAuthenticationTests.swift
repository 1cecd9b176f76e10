// Linux-only: KeychainServices' own default engine (Apple platforms replace it with the Security framework).
#if !canImport(Darwin)
import DefaultKeychainLock
import Foundation
import KeychainEngine
import KeychainServices
import Testing

/// SecItemCopyMatching with kSecMatchLimitAll over several protected items asks once per call, as Apple's does (one
/// authentication context for the call, whatever the LAContext's reuse duration).
@Suite("SecItemCopyMatching over several protected items asks once per call", .serialized, .ownsDefaultKeychain)
struct MultiItemAuthenticationTests {
    let prompts = Prompts()

    /// A fresh default keychain in memory (the engine's own clock: real time) with `count` `.userPresence` items.
    func keychain(items count: Int) throws {
        let engine = KeychainServicesDefaults.useMemoryKeychain()
        engine.authenticator = prompts
        var error: Unmanaged<CFError>?
        let access = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly,
                                                                  .userPresence, &error))
        for index in 0..<count {
            let status = SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "multi",
                                     kSecAttrAccount as String: "account-\(index)", kSecAttrAccessControl as String: access,
                                     kSecValueData as String: Data("secret-\(index)".utf8)] as CFDictionary, nil)
            try #require(status == errSecSuccess)
        }
    }

    /// Every secret of service "multi" in one SecItemCopyMatching call.
    func readAll(context: LAContext? = nil) throws -> [Data] {
        var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "multi",
                                    kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnData as String: true]
        if let context { query[kSecUseAuthenticationContext as String] = context }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        try #require(status == errSecSuccess, "SecItemCopyMatching: \(status)")
        return try #require(result as? [Data])
    }

    @Test("2 and 10 .userPresence items, no LAContext: one prompt per call", arguments: [2, 10])
    func withoutContext(count: Int) throws {
        try keychain(items: count)
        #expect(try readAll().count == count)
        #expect(prompts.count.current == 1)
        #expect(try readAll().count == count)
        #expect(prompts.count.current == 2, "the next call asks again")
    }

    @Test("2 and 10 .userPresence items, an LAContext with a reuse duration of 0: one prompt per call", arguments: [2, 10])
    func contextWithoutReuse(count: Int) throws {
        try keychain(items: count)
        let context = LAContext()
        context.touchIDAuthenticationAllowableReuseDuration = 0
        #expect(try readAll(context: context).count == count)
        #expect(prompts.count.current == 1)
        #expect(try readAll(context: context).count == count)
        #expect(prompts.count.current == 2, "a reuse duration of 0 covers no later call")
    }
}
#endif
