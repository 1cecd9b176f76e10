#if canImport(Glibc) && !canImport(Darwin)
import DefaultKeychainLock
import Foundation
import Glibc
import KeychainEngine
import KeychainServices
import SystemAuthentication
import Testing

/// Issue 24, finding 10: a reused `LAContext` must open only what the factor the person used satisfies. The real
/// path apps use: `LAContext.evaluatePolicy`, then `SecItemCopyMatching` with `kSecUseAuthenticationContext`, the
/// system authenticator asking real PAM (a test account's password) and the real fprintd (libfprint's virtual reader).
@Suite("A reused LAContext opens only what the person's factor satisfies (PAM, fprintd)", .serialized, .ownsDefaultKeychain,
       .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
final class ReusedLAContextTests {
    static let enrolled = "1001"
    static let stranger = "2002"

    let directory: PAMFixture.ServiceDirectory
    let previous: any Authenticator

    init() throws {
        directory = try PAMFixture.ServiceDirectory(["keystone": "auth required pam_unix.so nodelay\n"])
        previous = KeychainServicesDefaults.authenticator
        KeychainServicesDefaults.useMemoryKeychain()
    }

    deinit {
        KeychainServicesDefaults.useAuthenticator(previous)
        KeychainServicesDefaults.setEngine(nil)
        directory.remove()
    }

    /// The system authenticator with the test user's PAM service, `prompter`, and the fixture's reader if any.
    func use(_ prompter: any AuthenticationPrompter, reader fixture: FprintdFixture? = nil) throws {
        let pam = try PAMConfiguration(user: try PAMFixture.user().name, configurationDirectory: directory.path, maximumAttempts: 1)
        KeychainServicesDefaults.useSystemAuthentication(SystemAuthenticationConfiguration(
            pam: pam, fingerprint: fixture.map { FingerprintConfiguration(busAddress: $0.busAddress) }, prompter: prompter,
            polkit: nil, fingerprintAttempts: 1))
    }

    static func add(_ account: String, _ flags: SecAccessControlCreateFlags) throws {
        var cfError: Unmanaged<CFError>?
        let access = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, flags, &cfError))
        let add: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "vault",
            kSecAttrAccount as String: account, kSecValueData as String: Data("secret-\(account)".utf8),
            kSecAttrAccessControl as String: access,
        ]
        #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
    }

    /// `SecItemCopyMatching` of `account`'s secret with `context` as `kSecUseAuthenticationContext`.
    static func read(_ account: String, _ context: LAContext) -> OSStatus {
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "vault",
            kSecAttrAccount as String: account, kSecReturnData as String: true,
            kSecUseOperationPrompt as String: "Open \(account)", kSecUseAuthenticationContext as String: context,
        ]
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecSuccess, result as? Data != Data("secret-\(account)".utf8) { return errSecDecode }
        return status
    }

    /// Evaluates `policy` with the reply form and waits for the reply (it always comes, on LAContext's own thread).
    static func evaluate(_ context: LAContext, _ policy: LAPolicy) -> LAError.Code? {
        let done = DispatchSemaphore(value: 0)
        let outcome = Locked<LAError.Code??>(nil)
        context.evaluatePolicy(policy, localizedReason: "Sign in") { success, error in
            outcome.withLock { $0 = .some(success ? nil : ((error as? LAError)?.code ?? .systemCancel)) }
            done.signal()
        }
        done.wait()
        return outcome.current ?? .systemCancel
    }

    @Test("the password typed for deviceOwnerAuthentication (no reader) does not open a .biometryAny item, however reused")
    func passwordThenBiometryWithoutReader() async throws {
        let user = try PAMFixture.user()
        let prompter = ScriptedPrompter([user.password])
        try use(prompter)
        try Self.add("bio", .biometryAny)
        try Self.add("pin", .devicePasscode)
        let (evaluation, bio, pin) = await PAMFixture.onThread { () -> (LAError.Code?, OSStatus, OSStatus) in
            let context = LAContext()
            context.touchIDAuthenticationAllowableReuseDuration = 60
            let evaluation = Self.evaluate(context, .deviceOwnerAuthentication)
            return (evaluation, Self.read("bio", context), Self.read("pin", context))
        }
        #expect(evaluation == nil)
        #expect(prompter.secretPrompts.count == 1, "only the evaluation asked for the password")
        // Without a reader the biometry-only item cannot be opened: the password never stands in for a finger.
        #expect(bio == errSecAuthFailed)
        // The password does cover a passcode-only item, without asking again.
        #expect(pin == errSecSuccess)
        #expect(prompter.secretPrompts.count == 1)
    }

    @Test("deviceOwnerAuthentication passed with the password after a missed finger: a .biometryAny read asks for the finger",
          .enabled(if: FprintdFixture.unavailableReason == nil, Comment(rawValue: FprintdFixture.unavailableReason ?? "fprintd is there")))
    func passwordThenBiometry() async throws {
        let user = try PAMFixture.user()
        let directory = self.directory
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: Self.enrolled)
            // The person misses with the finger, types the password, then (asked for the finger) touches the reader.
            let monitor = try fixture.monitor()
            defer { monitor.stop() }
            let person = PersonPrompter(fixture: fixture, scans: [Self.stranger, Self.enrolled],
                                        typing: [.after({ _ = try? monitor.waitFor("verify-no-match") }, user.password)])
            let pam = try PAMConfiguration(user: user.name, configurationDirectory: directory.path, maximumAttempts: 1)
            KeychainServicesDefaults.useSystemAuthentication(SystemAuthenticationConfiguration(
                pam: pam, fingerprint: FingerprintConfiguration(busAddress: fixture.busAddress), prompter: person,
                polkit: nil, fingerprintAttempts: 1))
            try Self.add("bio", .biometryAny)
            let context = LAContext()
            context.touchIDAuthenticationAllowableReuseDuration = 60
            #expect(Self.evaluate(context, .deviceOwnerAuthentication) == nil)
            #expect(person.secretPrompts == 1 && person.scansLeft == 1, "the evaluation went through the password")

            // Not allowed to ask: the context has no biometric success, so the read fails instead of passing.
            context.interactionNotAllowed = true
            #expect(Self.read("bio", context) == errSecInteractionNotAllowed)
            #expect(person.scansLeft == 1)
            // Allowed to ask: the person is asked for the finger (not the password) and the read succeeds.
            context.interactionNotAllowed = false
            #expect(Self.read("bio", context) == errSecSuccess)
            #expect(person.scansLeft == 0, "the read asked for the finger")
            #expect(person.secretPrompts == 1, "and not for the password again")
            #expect(person.failures.isEmpty, "\(person.failures)")
        }
    }

    @Test("a finger-only evaluation does not open a .devicePasscode item: the read asks for the password",
          .enabled(if: FprintdFixture.unavailableReason == nil, Comment(rawValue: FprintdFixture.unavailableReason ?? "fprintd is there")))
    func fingerThenPasscode() async throws {
        let user = try PAMFixture.user()
        let directory = self.directory
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: Self.enrolled)
            let person = PersonPrompter(fixture: fixture, scans: [Self.enrolled], answers: [user.password])
            let pam = try PAMConfiguration(user: user.name, configurationDirectory: directory.path, maximumAttempts: 1)
            KeychainServicesDefaults.useSystemAuthentication(SystemAuthenticationConfiguration(
                pam: pam, fingerprint: FingerprintConfiguration(busAddress: fixture.busAddress), prompter: person,
                polkit: nil, fingerprintAttempts: 1))
            try Self.add("pin", .devicePasscode)
            try Self.add("current", .biometryCurrentSet)
            let context = LAContext()
            context.touchIDAuthenticationAllowableReuseDuration = 60
            #expect(Self.evaluate(context, .deviceOwnerAuthenticationWithBiometrics) == nil)
            #expect(person.scansLeft == 0 && person.secretPrompts == 0)
            // The finger covers the biometry item without asking again.
            #expect(Self.read("current", context) == errSecSuccess)
            #expect(person.secretPrompts == 0)
            // But not the passcode-only item: asked for the password.
            #expect(Self.read("pin", context) == errSecSuccess)
            #expect(person.secretPrompts == 1, "a finger never opens a .devicePasscode item")
            #expect(person.failures.isEmpty, "\(person.failures)")
        }
    }
}
#endif
