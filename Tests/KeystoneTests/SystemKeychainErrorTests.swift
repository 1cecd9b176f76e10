#if !canImport(Darwin)
import DefaultKeychainLock
import Foundation
import KeychainEngine
import KeychainServices
import Keystone
import Testing

// On Linux the engine knows why a SecItem call failed; `Keychain()` (SystemKeychain over SecItem*) passes that reason
// on in its KeychainError, so an app's log line names the fix (Apple's functions give only the OSStatus).

@Suite("Keychain()'s errors carry the engine's reason on Linux", .serialized, .ownsDefaultKeychain)
struct SystemKeychainErrorTests {
    @Test("a SecItem failure through Keychain()'s store keeps its OSStatus and gains the engine's reason")
    func failureCarriesTheEngineReason() throws {
        let engine = KeychainServicesDefaults.useMemoryKeychain()
        defer { KeychainServicesDefaults.useMemoryKeychain() }
        // A generic password cannot have a server: the engine says which attribute of which class.
        let query: KeychainQuery = [Key.class: .string(ItemClass.genericPassword.rawValue), Key.service: .string("com.example.reason"),
                                    Key.account: .string("a"), Key.server: .string("example.com"), Key.valueData: .data(Data("v".utf8))]
        var direct: EngineError?
        do { _ = try engine.add(query) } catch let error as EngineError { direct = error }
        let expected = try #require(direct, "the engine refuses a server on a generic password")
        #expect(!expected.reason.isEmpty)
        do {
            _ = try SystemKeychain().add(query)
            Issue.record("SecItemAdd accepted a server on a generic password")
        } catch let error as KeychainError {
            #expect(error.status == expected.status)
            #expect(error.reason == "SecItemAdd failed: \(expected.reason)")
        }
    }

    @Test("a success clears the reason: the next failure never repeats an earlier call's reason")
    func reasonIsPerCall() throws {
        KeychainServicesDefaults.useMemoryKeychain()
        defer { KeychainServicesDefaults.useMemoryKeychain() }
        let wrong: KeychainQuery = [Key.class: .string(ItemClass.genericPassword.rawValue), Key.service: .string("com.example.reason"),
                                    Key.server: .string("example.com")]
        #expect(throws: KeychainError.self) { _ = try SystemKeychain().add(wrong) }
        #expect(SecItemBridge.lastFailureReason != nil)
        let item = try GenericPassword(service: "com.example.reason", account: "b")
        try Keychain().save("v", for: item)
        #expect(SecItemBridge.lastFailureReason == nil)
        #expect(try Keychain().string(for: item) == "v")
    }
}
#endif
