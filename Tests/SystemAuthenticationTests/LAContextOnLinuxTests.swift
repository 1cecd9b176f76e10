#if canImport(Glibc)
import DefaultKeychainLock
import Foundation
import Glibc
import KeychainEngine
import KeychainServices
import SystemAuthentication
import Testing

/// `LAContext` and the SecItem functions on Linux, with the system authenticator checking a real test account's
/// password through PAM.
@Suite("LAContext on Linux: PAM behind the device-owner policy", .serialized, .ownsDefaultKeychain)
final class LAContextOnLinuxTests {
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

    /// Uses the system authenticator with `prompter` and the test user.
    func use(_ prompter: any AuthenticationPrompter) throws {
        let user = try PAMFixture.user()
        let pam = try PAMConfiguration(user: user.name, configurationDirectory: directory.path, maximumAttempts: 1)
        KeychainServicesDefaults.useSystemAuthentication(SystemAuthenticationConfiguration(pam: pam, fingerprint: nil, prompter: prompter, polkit: nil))
    }

    static func evaluate(_ context: LAContext, _ policy: LAPolicy = .deviceOwnerAuthentication) async -> Result<Bool, LAError> {
        do { return .success(try await context.evaluatePolicy(policy, localizedReason: "Unlock the vault")) } catch let error as LAError {
            return .failure(error)
        } catch {
            return .failure(LAError(.systemCancel))
        }
    }

    @Test("the right password evaluates the device-owner policy; a wrong one is LAError.authenticationFailed",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func evaluatesWithPAM() async throws {
        let user = try PAMFixture.user()
        let prompter = ScriptedPrompter([user.password, PAMFixture.wrongPassword()])
        try use(prompter)
        #expect(await Self.evaluate(LAContext()) == .success(true))
        #expect(await Self.evaluate(LAContext()) == .failure(LAError(.authenticationFailed)))
        #expect(prompter.messages.contains(AuthenticationMessage(.info, RequestingProgram.headline(reason: "Unlock the vault"))))
    }

    @Test("canEvaluatePolicy: the owner policy with a person to ask; biometry without a reader is biometryNotAvailable",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func canEvaluate() throws {
        try use(ScriptedPrompter([]))
        let context = LAContext()
        var error: NSError?
        #expect(context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        #expect(error == nil)
        #expect(!context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        #expect(error?.domain == LAErrorDomain && error?.code == LAError.Code.biometryNotAvailable.rawValue)
        #expect(error?.localizedDescription.contains("fprintd") == true)
        #expect(context.biometryType == .none)
        #expect(context.evaluatedPolicyDomainState == nil)
    }

    @Test("no terminal and no prompter: canEvaluatePolicy is false with notInteractive, and evaluation asks nobody",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func notInteractive() async throws {
        let prompter = ScriptedPrompter([], interactive: false)
        try use(prompter)
        var error: NSError?
        #expect(!LAContext().canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        #expect(error?.code == LAError.Code.notInteractive.rawValue)
        #expect(await Self.evaluate(LAContext()) == .failure(LAError(.notInteractive)))
        #expect(prompter.messages.isEmpty)
    }

    @Test("interactionNotAllowed fails with notInteractive before anyone is asked",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func interactionNotAllowed() async throws {
        let prompter = ScriptedPrompter(["unused"])
        try use(prompter)
        let context = LAContext()
        context.interactionNotAllowed = true
        #expect(await Self.evaluate(context) == .failure(LAError(.notInteractive)))
        #expect(prompter.messages.isEmpty)
    }

    @Test("invalidate() while the password prompt waits ends it with appCancel; afterwards the context is invalid",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func invalidateWhileWaiting() async throws {
        let prompter = BlockingPrompter()
        try use(prompter)
        let context = LAContext()
        async let result = Self.evaluate(context)
        await PAMFixture.onThread { prompter.waiting.wait() }
        context.invalidate()
        #expect(await result == .failure(LAError(.appCancel)))
        #expect(await Self.evaluate(context) == .failure(LAError(.invalidContext)))
        var error: NSError?
        #expect(!context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        #expect(error?.code == LAError.Code.invalidContext.rawValue)
    }

    @Test("SecItemCopyMatching of a .userPresence item asks once; with the LAContext's reuse duration a second read does not",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func secItemReuse() async throws {
        let user = try PAMFixture.user()
        let prompter = ScriptedPrompter([user.password])
        try use(prompter)
        var cfError: Unmanaged<CFError>?
        let access = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .userPresence, &cfError))
        let add: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "vault",
            kSecAttrAccount as String: "alice", kSecValueData as String: Data("s3cret".utf8),
            kSecAttrAccessControl as String: access,
        ]
        #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
        let context = LAContext()
        context.touchIDAuthenticationAllowableReuseDuration = 30
        let read: @Sendable (LAContext?) -> (OSStatus, String?) = { context in
            var query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "vault",
                kSecAttrAccount as String: "alice", kSecReturnData as String: true,
                kSecUseOperationPrompt as String: "Open the vault",
            ]
            if let context { query[kSecUseAuthenticationContext as String] = context }
            var result: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &result)
            return (status, (result as? Data).map { String(decoding: $0, as: UTF8.self) })
        }
        let first = await PAMFixture.onThread { read(context) }
        #expect(first.0 == errSecSuccess && first.1 == "s3cret")
        let second = await PAMFixture.onThread { read(context) }
        #expect(second.0 == errSecSuccess && second.1 == "s3cret")
        #expect(prompter.secretPrompts.count == 1)
        #expect(prompter.messages.contains(AuthenticationMessage(.info, RequestingProgram.headline(reason: "Open the vault"))))
        // Without the context, the next read asks again (the script is used up: a cancel).
        let third = await PAMFixture.onThread { read(nil) }
        #expect(third.0 == errSecUserCanceled)
        #expect(prompter.secretPrompts.count == 2)
    }

    @Test("with a fingerprint reader: biometryType is touchID after canEvaluatePolicy, the domain state follows enrollment, a scan evaluates",
          .enabled(if: FprintdFixture.unavailableReason == nil, Comment(rawValue: FprintdFixture.unavailableReason ?? "fprintd is there")))
    func fingerprintReader() async throws {
        try await withFixture { fixture in
            let prompter = FingerPrompter { _ in try fixture.send("SCAN 1001") }
            KeychainServicesDefaults.useSystemAuthentication(SystemAuthenticationConfiguration(
                fingerprint: FingerprintConfiguration(busAddress: fixture.busAddress), prompter: prompter, polkit: nil))
            let context = LAContext()
            #expect(context.biometryType == .none, "set only by canEvaluatePolicy, as on Apple platforms")
            var error: NSError?
            #expect(!context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
            #expect(error?.code == LAError.Code.biometryNotEnrolled.rawValue)
            #expect(context.biometryType == .touchID)
            #expect(context.evaluatedPolicyDomainState == nil)

            try fixture.enroll(finger: "right-index-finger", scanID: "1001")
            error = nil
            #expect(context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
            let first = try #require(context.evaluatedPolicyDomainState)
            try fixture.enroll(finger: "left-index-finger", scanID: "1002")
            let fresh = LAContext()
            #expect(fresh.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
            #expect(fresh.evaluatedPolicyDomainState != first)

            let evaluated = DispatchSemaphore(value: 0)
            let outcome = Locked<(Bool, LAError.Code?)>((false, nil))
            fresh.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Unlock") { success, error in
                outcome.withLock { $0 = (success, (error as? LAError)?.code) }
                evaluated.signal()
            }
            evaluated.wait()
            #expect(outcome.current.0 && outcome.current.1 == nil)
        }
    }
}
#endif
