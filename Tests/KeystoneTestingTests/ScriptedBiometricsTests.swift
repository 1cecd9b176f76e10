import Foundation
import Testing
import Keystone
import KeychainEngine
import KeychainServices
import KeystoneTesting

// MARK: - A biometric-authentication manager, as an app writes it (Swift 6: Sendable protocol, @Sendable completion)

protocol BiometricAuthContext: Sendable {
    func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool
    func evaluatePolicy(_ policy: LAPolicy, localizedReason: String,
                        reply: @escaping @Sendable (Bool, (any Error)?) -> Void)
}

extension LAContext: BiometricAuthContext {}
extension ScriptedBiometricContext: BiometricAuthContext {}

final class BiometricAuthManager: Sendable {
    private let context: any BiometricAuthContext

    init(context: any BiometricAuthContext = LAContext()) {
        self.context = context
    }

    var isBiometricsAvailable: Bool {
        context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: nil)
    }

    func authenticate(reason: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        guard isBiometricsAvailable else {
            completion(.failure(LAError(.biometryNotAvailable)))
            return
        }
        context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: reason) { success, error in
            completion(success ? .success(()) : .failure(error ?? LAError(.authenticationFailed)))
        }
    }
}

/// The manager's completion result, awaited; the completion must run exactly once.
func authenticateOnce(_ manager: BiometricAuthManager, reason: String = "Test") async -> Result<Void, any Error> {
    await confirmation("the completion runs once") { completed in
        await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, any Error>, Never>) in
            manager.authenticate(reason: reason) { result in
                completed()
                continuation.resume(returning: result)
            }
        }
    }
}

func laCode(_ result: Result<Void, any Error>) -> LAError.Code? {
    if case .failure(let error) = result { return (error as? LAError)?.code }
    return nil
}

@Suite("An app's BiometricAuthManager against ScriptedBiometricContext")
struct BiometricManagerScenarioTests {
    @Test("Success: canEvaluate true, evaluate true → proceed")
    func success() async {
        let mock = ScriptedBiometricContext()
        let manager = BiometricAuthManager(context: mock)
        let result = await authenticateOnce(manager)
        #expect(throws: Never.self) { try result.get() }
        #expect(mock.evaluateCalled)
    }

    @Test("User cancel: canEvaluate true, evaluate fails with .userCancel → retry or abort")
    func userCancel() async {
        let mock = ScriptedBiometricContext(outcomes: [.userCancel])
        let manager = BiometricAuthManager(context: mock)
        #expect(laCode(await authenticateOnce(manager)) == .userCancel)
        #expect(mock.evaluateCalled)
        #expect(BiometricError(LAError(.userCancel)).isRecoverable)
    }

    @Test("Lockout: canEvaluate true, evaluate fails with .biometryLockout → fall back to the passcode")
    func lockout() async {
        let mock = ScriptedBiometricContext(outcomes: [.lockout])
        let manager = BiometricAuthManager(context: mock)
        #expect(manager.isBiometricsAvailable)
        #expect(laCode(await authenticateOnce(manager)) == .biometryLockout)
        #expect(mock.evaluateCalled)
    }

    @Test("Not enrolled: canEvaluate false with .biometryNotEnrolled → no evaluation, enrollment guidance")
    func notEnrolled() async {
        let mock = ScriptedBiometricContext()
        mock.enrolled = false
        var error: NSError?
        #expect(!mock.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        #expect(error?.domain == LAErrorDomain && error?.code == LAError.Code.biometryNotEnrolled.rawValue)

        let manager = BiometricAuthManager(context: mock)
        // This manager reports every unavailability as biometryNotAvailable (it drops canEvaluate's error).
        #expect(laCode(await authenticateOnce(manager)) == .biometryNotAvailable)
        #expect(!mock.evaluateCalled)   // no authentication is attempted
    }
}

// MARK: - ScriptedBiometricContext

func evaluationError(_ context: ScriptedBiometricContext,
                     _ policy: LAPolicy = .deviceOwnerAuthenticationWithBiometrics) async -> LAError.Code? {
    do {
        _ = try await context.evaluatePolicy(policy, localizedReason: "Unlock")
        return nil
    } catch let error as LAError {
        return error.code
    } catch {
        Issue.record("not an LAError: \(error)")
        return nil
    }
}

let everyLAErrorCode: [LAError.Code] = [
    .authenticationFailed, .userCancel, .userFallback, .systemCancel, .passcodeNotSet, .biometryNotAvailable,
    .biometryNotEnrolled, .biometryLockout, .appCancel, .invalidContext, .companionNotAvailable, .biometryNotPaired,
    .biometryDisconnected, .invalidDimensions, .notInteractive,
]

@Suite("ScriptedBiometricContext")
struct ScriptedBiometricContextTests {
    @Test("Each scripted prompt outcome ends the evaluation with its LAError, and counts one prompt",
          arguments: AuthenticationOutcome.allCases)
    func everyOutcome(_ outcome: AuthenticationOutcome) async {
        let context = ScriptedBiometricContext(outcomes: [outcome])
        let expected: LAError.Code? = switch outcome {
        case .success: nil
        case .userCancel: .userCancel
        case .failed: .authenticationFailed
        case .notAvailable: .biometryNotAvailable
        case .lockout: .biometryLockout
        case .notEnrolled: .biometryNotEnrolled
        case .passcodeNotSet: .passcodeNotSet
        case .userFallback: .userFallback
        case .appCancel: .appCancel
        case .systemCancel: .systemCancel
        case .notInteractive: .notInteractive
        }
        #expect(await evaluationError(context) == expected)
        #expect(context.authenticator.promptCount == 1)
        #expect(context.evaluations == [.init(policy: .deviceOwnerAuthenticationWithBiometrics, reason: "Unlock")])
    }

    @Test("Any LAError code can be queued on the context itself", arguments: everyLAErrorCode)
    func everyLAError(_ code: LAError.Code) async {
        let context = ScriptedBiometricContext()
        context.enqueue(.failure(code), .success)
        #expect(await evaluationError(context) == code)
        #expect(await evaluationError(context) == nil)
        #expect(context.authenticator.promptCount == 0)   // the context's own script shows no prompt
        #expect(await evaluationError(context) == nil)   // then the authenticator's default: success
        #expect(context.authenticator.promptCount == 1)
    }

    @Test("canEvaluatePolicy follows the device: no biometry, not enrolled, lockout, no passcode")
    func canEvaluateFollowsTheDevice() {
        func check(_ context: ScriptedBiometricContext, _ policy: LAPolicy) -> LAError.Code? {
            var error: NSError?
            let ok = context.canEvaluatePolicy(policy, error: &error)
            #expect(ok == (error == nil))
            return error.flatMap { LAError.Code(rawValue: $0.code) }
        }
        let biometrics = LAPolicy.deviceOwnerAuthenticationWithBiometrics
        let owner = LAPolicy.deviceOwnerAuthentication

        let context = ScriptedBiometricContext()
        #expect(context.biometryType == .none)   // until canEvaluatePolicy is called, as Apple documents
        #expect(check(context, biometrics) == nil)
        #expect(context.biometryType == .faceID)

        context.enrolled = false
        #expect(check(context, biometrics) == .biometryNotEnrolled)
        #expect(context.biometryType == .faceID)  // set whatever the result
        #expect(check(context, owner) == nil)     // the passcode remains
        context.enrolled = true

        context.lockedOut = true
        #expect(check(context, biometrics) == .biometryLockout)
        #expect(check(context, owner) == nil)
        context.lockedOut = false

        context.passcodeSet = false
        #expect(check(context, biometrics) == .passcodeNotSet)
        #expect(check(context, owner) == .passcodeNotSet)
        context.passcodeSet = true

        context.biometryKind = .none
        #expect(check(context, biometrics) == .biometryNotAvailable)
        #expect(context.biometryType == .none)

        context.canEvaluateError = .biometryDisconnected
        #expect(check(context, owner) == .biometryDisconnected)
        #expect(context.canEvaluateCalls.count == 9)
    }

    @Test("The device state also fails evaluations before any prompt")
    func stateFailsEvaluations() async {
        let context = ScriptedBiometricContext()
        context.lockedOut = true
        #expect(await evaluationError(context) == .biometryLockout)
        #expect(await evaluationError(context, .deviceOwnerAuthentication) == nil)   // the passcode prompt
        #expect(context.authenticator.promptCount == 1)
    }

    @Test("The domain state appears after a biometric check and changes with the enrollment")
    func domainState() async throws {
        let context = ScriptedBiometricContext()
        #expect(context.evaluatedPolicyDomainState == nil)
        #expect(context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: nil))
        let first = try #require(context.evaluatedPolicyDomainState)
        context.changeEnrollment()
        #expect(context.evaluatedPolicyDomainState == first)   // a snapshot, as Apple's
        #expect(await evaluationError(context) == nil)
        #expect(try #require(context.evaluatedPolicyDomainState) != first)
    }

    @Test("After invalidate(), checks and evaluations fail with invalidContext")
    func invalidated() async {
        let context = ScriptedBiometricContext()
        context.invalidate()
        var error: NSError?
        #expect(!context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        #expect(error?.code == LAError.Code.invalidContext.rawValue)
        #expect(await evaluationError(context) == .invalidContext)
        #expect(context.isInvalidated && context.invalidateCount == 1)
    }

    @Test("invalidate() while an evaluation waits ends it with appCancel; release lets it go on")
    func holdAndInvalidate() async {
        let context = ScriptedBiometricContext()
        context.holdEvaluations()
        let waiting = Task { await evaluationError(context) }
        await context.waitForHeldEvaluation()
        #expect(context.heldEvaluationCount == 1)
        context.invalidate()
        #expect(await waiting.value == .appCancel)

        let other = ScriptedBiometricContext(outcomes: [.userFallback])
        other.holdEvaluations()
        let held = Task { await evaluationError(other) }
        await other.waitForHeldEvaluation()
        other.releaseEvaluations()
        #expect(await held.value == .userFallback)
    }

    @Test("interactionNotAllowed fails evaluations with notInteractive")
    func notInteractive() async {
        let context = ScriptedBiometricContext()
        context.interactionNotAllowed = true
        #expect(await evaluationError(context) == .notInteractive)
        #expect(context.authenticator.promptCount == 0)
    }

    @Test("The reply form answers on another call, once, with the LAError")
    func replyForm() async {
        let context = ScriptedBiometricContext(outcomes: [.failed])
        let (success, error) = await withCheckedContinuation { (continuation: CheckedContinuation<(Bool, LAError.Code?), Never>) in
            context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Sign") { success, error in
                continuation.resume(returning: (success, (error as? LAError)?.code))
            }
            #expect(context.evaluateCalled)   // recorded before the call returns
        }
        #expect(!success && error == .authenticationFailed)
    }
}

// MARK: - One device for the app and the keychain

@Suite("ScriptedBiometricContext with an InMemoryKeychain")
struct SharedScriptTests {
    let token = try! GenericPassword(service: "com.example.vault", account: "alice")

    func store(_ value: String, in memory: InMemoryKeychain, _ flags: AccessControlFlags,
               item: GenericPassword? = nil) throws {
        try Keychain(store: memory, options: ItemOptions(accessControlFlags: flags)).save(value, for: item ?? token)
    }

    @Test("One script drives the app's authenticate(reason:) and the keychain's prompts, in order")
    func oneScript() async throws {
        let memory = InMemoryKeychain()
        try store("secret", in: memory, .biometryAny)
        let context = memory.makeBiometricContext()
        let biometrics = BiometricAuthenticator(context: { context })
        memory.enqueueAuthentication(.success, .userCancel, .lockout)

        try await biometrics.authenticate(reason: "Unlock")
        let keychain = Keychain(store: memory, authentication: AuthenticationOptions(prompt: "Read the token"))
        #expect(throws: KeychainError.userCanceled) { try keychain.string(for: token) }
        await #expect(throws: BiometricError.lockout) { try await biometrics.authenticate(reason: "Again") }
        #expect(memory.promptCount == 3)
        #expect(memory.prompts.map(\.operation) == ["evaluatePolicy", "copy", "evaluatePolicy"])
        #expect(memory.prompts.map(\.operationPrompt) == ["Unlock", "Read the token", "Again"])
    }

    @Test("A successful evaluation covers keychain reads that pass the context, within the reuse window")
    func reuse() async throws {
        let memory = InMemoryKeychain()
        try store("secret", in: memory, .biometryCurrentSet)
        let context = memory.makeBiometricContext()
        context.touchIDAuthenticationAllowableReuseDuration = 60
        _ = try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Unlock")
        let keychain = Keychain(store: memory, authentication: AuthenticationOptions(context: context.authenticationContext))
        #expect(try await keychain.string(for: token) == "secret")
        #expect(memory.promptCount == 1)   // the evaluation's only

        context.invalidate()
        #expect(throws: KeychainError.authFailed) { try keychain.string(for: token) }
    }

    @Test("A device-owner evaluation (finger or passcode, not said which) does not open a .biometryAny item: the read prompts")
    func ownerEvaluationDoesNotOpenBiometryItem() async throws {
        let memory = InMemoryKeychain()
        try store("secret", in: memory, .biometryAny)
        let context = memory.makeBiometricContext()
        context.touchIDAuthenticationAllowableReuseDuration = 60
        memory.enqueueAuthentication(.success, .userCancel)
        _ = try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Unlock")
        let keychain = Keychain(store: memory, authentication: AuthenticationOptions(context: context.authenticationContext))
        #expect(throws: KeychainError.userCanceled) { try keychain.string(for: self.token) }
        #expect(memory.promptCount == 2, "the read asked for biometry")
        #expect(memory.prompts.last?.flags == .biometryAny)
    }

    @Test("A biometric evaluation does not open a .devicePasscode item: the read prompts")
    func biometricEvaluationDoesNotOpenPasscodeItem() async throws {
        let memory = InMemoryKeychain()
        try store("secret", in: memory, .devicePasscode)
        let context = memory.makeBiometricContext()
        context.touchIDAuthenticationAllowableReuseDuration = 60
        memory.enqueueAuthentication(.success, .userCancel)
        _ = try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Unlock")
        let keychain = Keychain(store: memory, authentication: AuthenticationOptions(context: context.authenticationContext))
        #expect(throws: KeychainError.userCanceled) { try keychain.string(for: self.token) }
        #expect(memory.promptCount == 2, "the read asked for the passcode")
    }

    @Test("An evaluation scripted as passed with the passcode covers .devicePasscode and .userPresence items, never .biometryAny")
    func scriptedPasscode() async throws {
        let memory = InMemoryKeychain()
        let pin = try GenericPassword(service: "com.example.vault", account: "pin")
        let presence = try GenericPassword(service: "com.example.vault", account: "presence")
        try store("bio", in: memory, .biometryAny)
        try store("pin", in: memory, .devicePasscode, item: pin)
        try store("presence", in: memory, .userPresence, item: presence)
        // The engine's clock stands still: the reuse window cannot end while a loaded machine runs the reads.
        let fixed = Date(timeIntervalSinceReferenceDate: 800_000_000)
        var configuration = memory.engine.configuration
        configuration.now = { fixed }
        memory.engine.configuration = configuration
        let context = memory.makeBiometricContext()
        context.touchIDAuthenticationAllowableReuseDuration = 60
        context.enqueue(.succeeded(via: .passcode))
        _ = try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Unlock")
        let keychain = Keychain(store: memory, authentication: AuthenticationOptions(context: context.authenticationContext))
        #expect(try await keychain.string(for: pin) == "pin")
        #expect(try await keychain.string(for: presence) == "presence")
        #expect(memory.promptCount == 0)
        memory.enqueueAuthentication(.userCancel)
        #expect(throws: KeychainError.userCanceled) { try keychain.string(for: self.token) }
        #expect(memory.promptCount == 1)
    }

    @Test("After changeBiometryEnrollment(), biometryCurrentSet items are unreadable, biometryAny items read, and the app notices")
    func enrollmentChange() throws {
        let memory = InMemoryKeychain()
        let any = try GenericPassword(service: "com.example.vault", account: "any")
        try store("current", in: memory, .biometryCurrentSet)
        try store("any", in: memory, .biometryAny, item: any)
        let context = memory.makeBiometricContext()
        let biometrics = BiometricAuthenticator(context: { context })
        let saved = biometrics.domainState()
        #expect(saved != nil)

        memory.changeBiometryEnrollment()
        let keychain = Keychain(store: memory)
        #expect(throws: KeychainError.authFailed) { try keychain.string(for: token) }
        #expect(try keychain.string(for: any) == "any")
        #expect(biometrics.enrollmentChanged(since: saved))
        #expect(memory.promptCount == 1)   // the biometryAny read; the changed set fails before any prompt
    }

    @Test("The context's changeEnrollment() is the keychain's")
    func contextChangesTheKeychain() throws {
        let memory = InMemoryKeychain()
        try store("current", in: memory, .biometryCurrentSet)
        memory.makeBiometricContext().changeEnrollment()
        #expect(throws: KeychainError.authFailed) { try Keychain(store: memory).string(for: self.token) }
    }

    @Test("The device state rules keychain prompts out as it does evaluations")
    func deviceStateForKeychainReads() throws {
        let memory = InMemoryKeychain()
        let presence = try GenericPassword(service: "com.example.vault", account: "presence")
        try store("bio", in: memory, .biometryAny)
        try store("presence", in: memory, .userPresence, item: presence)
        let keychain = Keychain(store: memory)

        memory.authenticator.lockedOut = true
        #expect(throws: KeychainError.authFailed) { try keychain.string(for: token) }
        #expect(try keychain.string(for: presence) == "presence")   // the passcode prompt
        memory.authenticator.lockedOut = false

        memory.passcodeSet = false
        #expect(throws: KeychainError.authFailed) { try keychain.string(for: presence) }
        #expect(memory.makeBiometricContext().canEvaluatePolicy(.deviceOwnerAuthentication, error: nil) == false)
        #expect(memory.promptCount == 1)
    }

    @Test("A request already cancelled ends with appCancel without a prompt")
    func cancelledRequest() {
        let authenticator = ScriptedAuthenticator()
        let cancellation = AuthenticationCancellation()
        cancellation.cancel()
        let request = AuthenticationRequest(itemClass: .genericPassword, flags: .userPresence, operationPrompt: nil,
                                            operation: "copy", cancellation: cancellation)
        #expect(authenticator.authenticate(request) == .appCancel)
        #expect(authenticator.promptCount == 0)
    }

    @Test("Simulator profile: no biometry, passcode gates and keychain reads pass silently; device: the script decides",
          arguments: InMemoryKeychain.DeviceProfile.allCases)
    func profiles(_ profile: InMemoryKeychain.DeviceProfile) async throws {
        let memory = InMemoryKeychain(profile: profile, authentication: .userCancel)
        try store("secret", in: memory, .biometryAny)
        let context = memory.makeBiometricContext()
        var error: NSError?
        let biometricsAvailable = context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error)
        let passcode = await evaluationError(context, .deviceOwnerAuthentication)
        let read = Result { try Keychain(store: memory).string(for: token) }
        switch profile {
        case .simulator:
            #expect(!biometricsAvailable && error?.code == LAError.Code.biometryNotAvailable.rawValue)
            #expect(context.biometryType == .none)
            #expect(passcode == nil)
            #expect(try read.get() == "secret")
            #expect(await evaluationError(context) == .biometryNotAvailable)
            #expect(memory.promptCount == 0)
        case .device:
            #expect(biometricsAvailable && error == nil)
            #expect(context.biometryType == .faceID)
            #expect(passcode == .userCancel)
            #expect(throws: KeychainError.userCanceled) { try read.get() }
            #expect(memory.promptCount == 2)
        }
    }
}
