// Linux-only: the fixture's code runs on Apple platforms against the real keychain; here it runs against
// KeychainServices over a fresh in-memory keychain per test.
#if !canImport(Darwin)
import AppleStyleKeychain
import DefaultKeychainLock
import Foundation
import KeychainEngine
import KeychainServices
import Testing

/// An authenticator that reports scripted outcomes (success once the script is empty) and counts prompts.
final class ScriptedPrompts: Authenticator {
    let outcomes: Locked<[AuthenticationOutcome]>
    let count = Locked(0)
    init(_ outcomes: [AuthenticationOutcome] = []) { self.outcomes = Locked(outcomes) }
    func authenticate(_ request: AuthenticationRequest) -> AuthenticationOutcome {
        count.withLock { $0 += 1 }
        return outcomes.withLock { $0.isEmpty ? .success : $0.removeFirst() }
    }
}

/// The AppleStyleKeychain fixture, code written as for iOS (`import Security`, `import LocalAuthentication`),
/// built on Linux with Keystone's `Security` and `LocalAuthentication` products.
///
/// Every test replaces the process-wide default keychain, so the suite runs its tests one at a time and only
/// while no other suite owns the default keychain.
@Suite("Apple-style keychain code built with import Security", .serialized, .ownsDefaultKeychain)
struct AppleStyleKeychainTests {
    let storage = MemoryStorage()
    let engine: KeychainEngine
    let helper = KeychainHelper(service: "com.example.app")

    init() {
        engine = KeychainEngine(storage: storage)
        KeychainServicesDefaults.setEngine(engine)
    }

    // MARK: - KeychainHelper: generic passwords

    @Test("A saved secret reads back; a missing one reads as nil")
    func addThenRead() throws {
        #expect(try helper.save("s3cret", account: "alice") == .added)
        #expect(try helper.readString(account: "alice") == "s3cret")
        #expect(try helper.read(account: "bob") == nil)
    }

    @Test("Saving an existing item takes the errSecDuplicateItem path and updates it in place")
    func duplicateAddUpdates() throws {
        try helper.save("first", account: "alice")
        let created = try #require(try helper.readAttributes(account: "alice")?[kSecAttrCreationDate as String] as? Date)
        #expect(try helper.save("second", account: "alice") == .updated)
        #expect(try helper.readString(account: "alice") == "second")
        let attributes = try #require(try helper.readAttributes(account: "alice"))
        #expect(attributes[kSecAttrCreationDate as String] as? Date == created)   // updated, not deleted and re-added
        #expect(attributes[kSecValueData as String] as? Data == Data("second".utf8))
        #expect(attributes[kSecAttrAccount as String] as? String == "alice")
        #expect(attributes[kSecAttrService as String] as? String == "com.example.app")
        #expect(attributes[kSecAttrAccessible as String] as? String == "ck")         // kSecAttrAccessibleAfterFirstUnlock
        #expect(try helper.allAccounts() == ["alice"])
    }

    @Test("A raw second SecItemAdd is errSecDuplicateItem, with Apple's message")
    func rawDuplicate() throws {
        try helper.save("v", account: "alice")
        let attributes: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "com.example.app",
                                         kSecAttrAccount as String: "alice", kSecValueData as String: Data("w".utf8)]
        let status = SecItemAdd(attributes as CFDictionary, nil)
        #expect(status == errSecDuplicateItem)
        #expect(KeychainHelper.message(for: status) == "The specified item already exists in the keychain.")
    }

    @Test("kSecMatchLimitAll with attributes lists every account of the service, and only of that service")
    func listAccounts() throws {
        for account in ["carol", "alice", "bob"] { try helper.save("x", account: account) }
        try KeychainHelper(service: "com.example.other").save("y", account: "dave")
        #expect(try helper.allAccounts() == ["alice", "bob", "carol"])
        #expect(try KeychainHelper(service: "com.example.empty").allAccounts() == [])
    }

    @Test("After delete, SecItemCopyMatching is errSecItemNotFound and the helper reads nil")
    func deleteThenRead() throws {
        try helper.save("v", account: "alice")
        try helper.delete(account: "alice")
        #expect(try helper.read(account: "alice") == nil)
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "alice",
                                    kSecReturnData as String: true]
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        #expect(status == errSecItemNotFound)
        #expect(result == nil)
        #expect(KeychainHelper.message(for: status) == "The specified item could not be found in the keychain.")
        try helper.delete(account: "alice")                                  // a missing item is not an error
    }

    @Test("deleteAll through a [CFString: Any] query removes the service's items, then reports not found")
    func deleteAll() throws {
        try helper.save("a", account: "alice")
        try helper.save("b", account: "bob")
        #expect(helper.deleteAll() == errSecSuccess)
        #expect(try helper.allAccounts() == [])
        #expect(helper.deleteAll() == errSecItemNotFound)
    }

    @Test("SecCopyErrorMessageString as String? gives Apple's messages")
    func messages() {
        #expect(KeychainHelper.message(for: errSecSuccess) == "No error.")
        #expect(KeychainHelper.message(for: errSecParam) == "One or more parameters passed to a function were not valid.")
        #expect(KeychainHelper.message(for: errSecUserCanceled) == "User canceled the operation.")
        #expect(KeychainHelperError(statusForTest: errSecAuthFailed)
                == .unhandled(status: errSecAuthFailed, message: "The user name or passphrase you entered is not correct."))
    }

    @Test("A locked keychain is errSecInteractionNotAllowed, and the item survives it")
    func locked() throws {
        try helper.save("v", account: "alice")
        storage.lockState = .locked
        #expect(throws: KeychainHelperError.unhandled(status: errSecInteractionNotAllowed,
                                                      message: KeychainHelper.message(for: errSecInteractionNotAllowed))) {
            try helper.read(account: "alice")
        }
        storage.lockState = .unlocked
        #expect(try helper.readString(account: "alice") == "v")
    }

    // MARK: - WebCredentialStore: internet passwords

    @Test("Internet passwords: kSecAttrServer and kSecAttrProtocolHTTPS, saved, replaced and found")
    func internetPasswords() throws {
        #expect(WebCredentialStore.save(Credentials(username: "alice", password: "pw1"), server: "example.com") == errSecSuccess)
        #expect(try WebCredentialStore.credentials(for: "example.com") == Credentials(username: "alice", password: "pw1"))
        #expect(WebCredentialStore.storedProtocol(for: "example.com") == "htps")
        #expect(WebCredentialStore.save(Credentials(username: "alice", password: "pw2"), server: "example.com") == errSecSuccess)
        #expect(try WebCredentialStore.credentials(for: "example.com") == Credentials(username: "alice", password: "pw2"))
        #expect(try WebCredentialStore.credentials(for: "other.example") == nil)
        #expect(WebCredentialStore.deleteCredentials(for: "example.com") == errSecSuccess)
        #expect(WebCredentialStore.deleteCredentials(for: "example.com") == errSecItemNotFound)
    }

    @Test("Internet and generic passwords with the same account are different items")
    func classesAreSeparate() throws {
        try helper.save("generic", account: "alice")
        #expect(WebCredentialStore.save(Credentials(username: "alice", password: "web"), server: "example.com") == errSecSuccess)
        #expect(try helper.readString(account: "alice") == "generic")
        #expect(try WebCredentialStore.credentials(for: "example.com")?.password == "web")
    }

    // MARK: - BiometricVault: SecAccessControl and LAContext

    @Test("SecAccessControlCreateWithFlags with biometryCurrentSet succeeds; a bad protection reports a CFError")
    func accessControl() throws {
        _ = try BiometricVault.biometryAccessControl()
        #expect(throws: KeychainHelperError.self) { try BiometricVault.biometryAccessControl(protection: "not-a-protection") }
    }

    @Test("A protected secret reads after a successful prompt; a cancelled one is errSecUserCanceled")
    func protectedRead() throws {
        let prompts = ScriptedPrompts([.success, .userCancel])
        engine.authenticator = prompts
        try BiometricVault.store(Data("vault".utf8), service: "vault", account: "alice", flags: .biometryCurrentSet)
        #expect(try BiometricVault.read(service: "vault", account: "alice", reason: "Unlock") == Data("vault".utf8))
        #expect(throws: KeychainHelperError.unhandled(status: errSecUserCanceled, message: "User canceled the operation.")) {
            try BiometricVault.read(service: "vault", account: "alice", reason: "Unlock")
        }
        #expect(prompts.count.current == 2)
        #expect(BiometricVault.exists(service: "vault", account: "alice"))     // attributes only: no prompt
        #expect(prompts.count.current == 2)
    }

    @Test("After a biometry enrollment change, a biometryCurrentSet secret is errSecAuthFailed")
    func enrollmentChange() throws {
        engine.authenticator = ScriptedPrompts()
        try BiometricVault.store(Data("vault".utf8), service: "vault", account: "alice", flags: .biometryCurrentSet)
        engine.changeBiometryEnrollment()
        #expect(throws: KeychainHelperError.unhandled(status: errSecAuthFailed, message: KeychainHelper.message(for: errSecAuthFailed))) {
            try BiometricVault.read(service: "vault", account: "alice", reason: "Unlock")
        }
    }

    @Test("canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics) is false with biometryNotAvailable on Linux")
    func biometryUnavailable() {
        let status = BiometricVault.biometryStatus()
        #expect(!status.isAvailable)
        #expect(status.errorCode == LAError.Code.biometryNotAvailable.rawValue)
    }

    @Test("evaluatePolicy replies through the completion handler: success, then a cancel as LAError.userCancel")
    func evaluateWithCompletion() async throws {
        engine.authenticator = ScriptedPrompts([.success, .userCancel])
        let first = await withCheckedContinuation { continuation in
            BiometricVault.authenticate(reason: "Sign in") { success, error in continuation.resume(returning: (success, error == nil)) }
        }
        #expect(first == (true, true))
        let second = await withCheckedContinuation { continuation in
            BiometricVault.authenticate(reason: "Sign in") { success, error in
                continuation.resume(returning: (success, (error as? LAError)?.code))
            }
        }
        #expect(second.0 == false)
        #expect(second.1 == .userCancel)
    }

    @Test("evaluatePolicy with async/await: true on success, false on cancel, LAError otherwise")
    func evaluateAsync() async throws {
        engine.authenticator = ScriptedPrompts([.success, .userCancel, .failed])
        #expect(try await BiometricVault.authenticate(reason: "Sign in"))
        #expect(try await !BiometricVault.authenticate(reason: "Sign in"))
        await #expect(throws: LAError(.authenticationFailed)) { try await BiometricVault.authenticate(reason: "Sign in") }
    }
}

extension KeychainHelperError {
    /// The error the fixture builds for `status` (its initializer is internal to the fixture).
    init(statusForTest status: OSStatus) {
        self = .unhandled(status: status, message: KeychainHelper.message(for: status))
    }
}
#endif
