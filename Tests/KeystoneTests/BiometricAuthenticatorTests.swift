import Foundation
import Testing
import Keystone
import KeychainEngine
import KeychainServices
import KeystoneTesting

/// One LocalAuthentication error and what Keystone makes of it.
struct LAErrorExpectation: Sendable, CustomTestStringConvertible {
    let code: LAError.Code
    let expected: BiometricError.Code
    let recoverable: Bool
    var testDescription: String { "LAError(\(code)) → .\(expected.rawValue)" }
}

/// Every LAError code, with the BiometricError it becomes.
let everyLAError: [LAErrorExpectation] = [
    .init(code: .authenticationFailed, expected: .authenticationFailed, recoverable: true),
    .init(code: .userCancel, expected: .userCancel, recoverable: true),
    .init(code: .userFallback, expected: .userFallback, recoverable: true),
    .init(code: .systemCancel, expected: .systemCancel, recoverable: true),
    .init(code: .passcodeNotSet, expected: .passcodeNotSet, recoverable: false),
    .init(code: .biometryNotAvailable, expected: .notAvailable, recoverable: false),
    .init(code: .biometryNotEnrolled, expected: .notEnrolled, recoverable: false),
    .init(code: .biometryLockout, expected: .lockout, recoverable: false),
    .init(code: .appCancel, expected: .appCancel, recoverable: false),
    .init(code: .invalidContext, expected: .invalidContext, recoverable: false),
    .init(code: .companionNotAvailable, expected: .notAvailable, recoverable: false),
    .init(code: .biometryNotPaired, expected: .notAvailable, recoverable: false),
    .init(code: .biometryDisconnected, expected: .notAvailable, recoverable: false),
    .init(code: .invalidDimensions, expected: .failed, recoverable: false),
    .init(code: .notInteractive, expected: .notInteractive, recoverable: false),
]

@Suite("BiometricError")
struct BiometricErrorTests {
    @Test("Every LAError becomes the matching BiometricError, keeps its code, and says whether to ask again",
          arguments: everyLAError)
    func mapsEveryLAError(_ row: LAErrorExpectation) {
        let error = BiometricError(LAError(row.code))
        #expect(error.code == row.expected)
        #expect(error.laErrorCode == row.code.rawValue)
        #expect(error.isRecoverable == row.recoverable)
        #expect(!error.message.isEmpty)
        #expect(error.errorDescription == error.message)
        #expect(error.localizedDescription == error.message)
        #expect(error.description.contains("LAError \(row.code.rawValue)"))
        #expect(BiometricError(row.expected) ~= error)
    }

    @Test("An NSError in LAErrorDomain maps as the LAError with its code", arguments: everyLAError)
    func mapsNSErrorInLAErrorDomain(_ row: LAErrorExpectation) {
        let error = BiometricError(NSError(domain: LAErrorDomain, code: row.code.rawValue))
        #expect(error.code == row.expected)
        #expect(error.laErrorCode == row.code.rawValue)
    }

    @Test("Each code has its own message, and exactly user cancel, fallback, failed and system cancel are recoverable")
    func messagesAndRecoverability() {
        let messages = Set(BiometricError.Code.allCases.map { BiometricError($0).message })
        #expect(messages.count == BiometricError.Code.allCases.count)
        let recoverable = Set(BiometricError.Code.allCases.filter { BiometricError($0).isRecoverable })
        #expect(recoverable == [.userCancel, .userFallback, .authenticationFailed, .systemCancel])
    }

    @Test("An error that is not LocalAuthentication's is .failed without a native code; a BiometricError stays itself")
    func foreignErrors() {
        struct Other: Error {}
        let other = BiometricError(Other())
        #expect(other.code == .failed)
        #expect(other.laErrorCode == nil)
        #expect(BiometricError(NSError(domain: "elsewhere", code: -8)).code == .failed)
        #expect(BiometricError(BiometricError.lockout) == .lockout)
        #expect(BiometricError(laErrorCode: 12345).code == .failed)
    }

    @Test("catch BiometricError.lockout matches, and equality ignores the native code")
    func patternMatching() {
        func classify(_ error: any Error) -> String {
            do { throw error } catch BiometricError.lockout {
                return "lockout"
            } catch BiometricError.userCancel {
                return "cancel"
            } catch {
                return "other"
            }
        }
        #expect(classify(BiometricError(LAError(.biometryLockout))) == "lockout")
        #expect(classify(BiometricError(LAError(.userCancel))) == "cancel")
        #expect(classify(LAError(.biometryLockout)) == "other")   // convert first: the authenticator does
        #expect(BiometricError(LAError(.biometryLockout)) == BiometricError.lockout)
    }

    @Test("BiometryType maps LABiometryType and names itself")
    func biometryTypes() {
        #expect(BiometryType(LABiometryType.none) == .none)
        #expect(BiometryType(.touchID) == .touchID)
        #expect(BiometryType(.faceID) == .faceID)
        #expect(BiometryType(.opticID) == .opticID)
        #expect(BiometryType.allCases.map(\.displayName) == ["None", "Touch ID", "Face ID", "Optic ID"])
    }

    @Test("The policies are LocalAuthentication's")
    func policies() {
        #expect(BiometricPolicy.biometrics.laPolicy == .deviceOwnerAuthenticationWithBiometrics)
        #expect(BiometricPolicy.biometricsOrPasscode.laPolicy == .deviceOwnerAuthentication)
    }
}

@Suite("BiometricAuthenticator")
struct BiometricAuthenticatorTests {
    @Test("Every scripted LAError comes out of authenticate(reason:) as its BiometricError", arguments: everyLAError)
    func evaluationErrors(_ row: LAErrorExpectation) async {
        let context = ScriptedBiometricContext()
        context.enqueue(.failure(row.code))
        let biometrics = BiometricAuthenticator(context: { context })
        await #expect(throws: BiometricError(row.expected)) { try await biometrics.authenticate(reason: "Unlock") }
        #expect(context.evaluations.count == 1)
    }

    @Test("Every engine outcome of a prompt comes out as its BiometricError", arguments: AuthenticationOutcome.allCases)
    func promptOutcomes(_ outcome: AuthenticationOutcome) async throws {
        let context = ScriptedBiometricContext(outcomes: [outcome])
        let biometrics = BiometricAuthenticator(context: { context })
        let expected: BiometricError.Code? = switch outcome {
        case .success: nil
        case .userCancel: .userCancel
        case .failed: .authenticationFailed
        case .notAvailable: .notAvailable
        case .lockout: .lockout
        case .notEnrolled: .notEnrolled
        case .passcodeNotSet: .passcodeNotSet
        case .userFallback: .userFallback
        case .appCancel: .appCancel
        case .systemCancel: .systemCancel
        case .notInteractive: .notInteractive
        }
        if let expected {
            await #expect(throws: BiometricError(expected)) { try await biometrics.authenticate(reason: "Unlock") }
        } else {
            try await biometrics.authenticate(reason: "Unlock")
        }
        #expect(context.authenticator.promptCount == 1)
    }

    @Test("Success: one check, one evaluation with the reason and the policy, the titles set on the context")
    func success() async throws {
        let context = ScriptedBiometricContext()
        let biometrics = BiometricAuthenticator(policy: .biometricsOrPasscode, cancelTitle: "Not now",
                                                fallbackTitle: "Use Password", context: { context })
        try await biometrics.authenticate(reason: "Unlock your vault")
        #expect(context.canEvaluateCalls == [.deviceOwnerAuthentication])
        #expect(context.evaluations.map(\.reason) == ["Unlock your vault"])
        #expect(context.evaluations.map(\.policy) == [.deviceOwnerAuthentication])
        #expect(context.localizedCancelTitle == "Not now")
        #expect(context.localizedFallbackTitle == "Use Password")
    }

    @Test("When canEvaluatePolicy fails, authenticate throws its reason and never evaluates",
          arguments: [LAError.Code.biometryNotAvailable, .biometryNotEnrolled, .biometryLockout, .passcodeNotSet])
    func unavailableNeverEvaluates(_ code: LAError.Code) async {
        let context = ScriptedBiometricContext()
        context.canEvaluateError = code
        let biometrics = BiometricAuthenticator(context: { context })
        await #expect(throws: BiometricError(LAError(code))) { try await biometrics.authenticate(reason: "Unlock") }
        #expect(context.canEvaluateCalls.count == 1)
        #expect(!context.evaluateCalled)
        #expect(context.authenticator.promptCount == 0)
    }

    @Test("Lockout: biometry-only fails before prompting; biometrics-or-passcode prompts for the passcode")
    func lockout() async throws {
        let context = ScriptedBiometricContext()
        context.lockedOut = true
        let biometricsOnly = BiometricAuthenticator(policy: .biometrics, context: { context })
        #expect(biometricsOnly.availability == .unavailable(.lockout))
        #expect(biometricsOnly.biometryType == .none)
        await #expect(throws: BiometricError.lockout) { try await biometricsOnly.authenticate(reason: "Unlock") }
        #expect(!context.evaluateCalled)

        let orPasscode = BiometricAuthenticator(policy: .biometricsOrPasscode, context: { context })
        #expect(orPasscode.availability == .available(.faceID))
        try await orPasscode.authenticate(reason: "Unlock")
        #expect(context.authenticator.promptCount == 1)
    }

    @Test("Not enrolled: unavailable with notEnrolled, no evaluation; enrolling makes it available")
    func notEnrolled() async throws {
        let context = ScriptedBiometricContext(biometryKind: .fingerprint)
        context.enrolled = false
        let biometrics = BiometricAuthenticator(context: { context })
        #expect(biometrics.availability == .unavailable(.notEnrolled))
        await #expect(throws: BiometricError.notEnrolled) { try await biometrics.authenticate(reason: "Unlock") }
        #expect(!context.evaluateCalled)
        context.enrolled = true
        #expect(biometrics.availability == .available(.touchID))
        #expect(biometrics.biometryType == .touchID)
        try await biometrics.authenticate(reason: "Unlock")
    }

    @Test("No biometry: the type is none and biometry-only is notAvailable")
    func noBiometry() {
        let biometrics = BiometricAuthenticator(context: { ScriptedBiometricContext(biometryKind: .none) })
        #expect(biometrics.biometryType == .none)
        #expect(biometrics.availability == .unavailable(.notAvailable))
    }

    @Test("An enrollment change is detected through the saved domain state")
    func enrollmentChangeDetected() throws {
        let context = ScriptedBiometricContext()
        let biometrics = BiometricAuthenticator(context: { context })
        let saved = try #require(biometrics.domainState())
        #expect(!biometrics.enrollmentChanged(since: saved))
        #expect(!biometrics.enrollmentChanged(since: nil))
        context.changeEnrollment()
        #expect(biometrics.enrollmentChanged(since: saved))
        #expect(biometrics.domainState() != saved)

        // Removing every identity is a change; a lockout hides the state but is no evidence of one.
        let current = biometrics.domainState()
        context.lockedOut = true
        #expect(biometrics.domainState() == nil)
        #expect(!biometrics.enrollmentChanged(since: current))
        context.lockedOut = false
        context.enrolled = false
        #expect(biometrics.enrollmentChanged(since: current))
    }

    @Test("Invalidating the context while the prompt is up ends authenticate with appCancel")
    func invalidateDuringEvaluation() async throws {
        let context = ScriptedBiometricContext()
        context.holdEvaluations()
        let biometrics = BiometricAuthenticator(context: { context })
        let waiting = Task { try await biometrics.authenticate(reason: "Unlock") }
        await context.waitForHeldEvaluation()
        context.invalidate()
        await #expect(throws: BiometricError.appCancel) { try await waiting.value }
        // The context is spent: the next evaluation fails with invalidContext.
        await #expect(throws: BiometricError.invalidContext) { try await biometrics.authenticate(reason: "Again") }
    }

    @Test("Cancelling the waiting task invalidates the context and throws appCancel")
    func taskCancellation() async throws {
        let context = ScriptedBiometricContext()
        context.holdEvaluations()
        let biometrics = BiometricAuthenticator(context: { context })
        let waiting = Task { try await biometrics.authenticate(reason: "Unlock") }
        await context.waitForHeldEvaluation()
        waiting.cancel()
        await #expect(throws: BiometricError.appCancel) { try await waiting.value }
        #expect(context.invalidateCount == 1)
    }

    @Test("A fresh context per call: an invalidated one does not spoil the next authentication")
    func freshContextPerCall() async throws {
        let made = Locked<[ScriptedBiometricContext]>([])
        let biometrics = BiometricAuthenticator(context: {
            let context = ScriptedBiometricContext()
            made.withLock { $0.append(context) }
            return context
        })
        try await biometrics.authenticate(reason: "One")
        made.current.forEach { $0.invalidate() }
        try await biometrics.authenticate(reason: "Two")
        #expect(made.current.count == 2)
    }

    @Test("With LAContext, an unavailable policy throws its reason without prompting")
    func realContext() async {
        // What the platform's LAContext reports depends on the machine (on Linux: no biometry unless a reader is
        // configured); the rule holds whatever it is.
        let biometrics = BiometricAuthenticator()
        if case .unavailable(let error) = biometrics.availability {
            #expect(biometrics.biometryType == .none)
            await #expect(throws: error) { try await biometrics.authenticate(reason: "Unlock") }
        }
    }
}
