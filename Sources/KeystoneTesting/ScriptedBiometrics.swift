import Foundation
import Keystone
import KeychainEngine
// LocalAuthentication's names: KeychainServices declares them on Linux and re-exports Apple's framework elsewhere.
import KeychainServices

// As Keystone's BiometricAuthenticator: not on watchOS and tvOS.
#if !canImport(Darwin) || (canImport(LocalAuthentication) && !os(watchOS) && !os(tvOS))

/// An `LAContext` stand-in with scripted outcomes, for tests of app code that authenticates through a
/// `BiometricAuthenticationContext` (`BiometricAuthenticator`, or your own wrapper).
///
/// Standalone, it plays a device of its own; made from an ``InMemoryKeychain`` (``InMemoryKeychain/makeBiometricContext()``)
/// it plays that keychain's device: the same ``ScriptedAuthenticator`` answers the app's evaluations and the
/// keychain's prompts for access-controlled items (one queue of outcomes for both), the same profile applies, and
/// one ``changeEnrollment()`` changes this context's domain state and makes `.biometryCurrentSet` items unreadable.
///
/// ```swift
/// let memory = InMemoryKeychain()
/// let context = memory.makeBiometricContext()
/// let biometrics = BiometricAuthenticator(context: { context })
/// memory.enqueueAuthentication(.success, .userCancel)
/// try await biometrics.authenticate(reason: "Unlock")        // the first outcome
/// #expect(throws: KeychainError.userCanceled) { try keychain.string(for: token) }  // the second
/// ```
///
/// How an evaluation ends, in order:
/// 1. After ``invalidate()``: `LAError.invalidContext`.
/// 2. While ``holdEvaluations()`` is in force, it waits for ``releaseEvaluations()`` or ``invalidate()``, which
///    ends it with `LAError.appCancel`.
/// 3. With ``interactionNotAllowed``: `LAError.notInteractive`.
/// 4. The next result queued on this context with ``enqueue(_:)`` (any `LAError` code, success, or success with a
///    given factor: ``EvaluationResult/succeeded(via:)``).
/// 5. Simulator profile: `.deviceOwnerAuthentication` succeeds without prompting (as a simulator returns
///    access-controlled keychain items without a prompt); `.deviceOwnerAuthenticationWithBiometrics` fails with
///    `LAError.biometryNotAvailable`, as ``canEvaluatePolicy(_:error:)`` says.
/// 6. Device profile: the authenticator's state (``biometryKind``, ``enrolled``, ``lockedOut``, ``passcodeSet``)
///    may rule the prompt out (`biometryNotAvailable`, `biometryNotEnrolled`, `biometryLockout`, `passcodeNotSet`);
///    else the authenticator's next scripted `AuthenticationOutcome` decides (a prompt is counted).
///
/// ``canEvaluatePolicy(_:error:)``: false with `invalidContext` after ``invalidate()``; false with
/// ``canEvaluateError`` when set; on the simulator profile false with `biometryNotAvailable` for
/// `.deviceOwnerAuthenticationWithBiometrics` and true for `.deviceOwnerAuthentication` — decision: the fidelity of
/// a simulator without enrolled Face ID, where Apple's `canEvaluatePolicy(.biometrics)` is false (code written
/// against a real simulator sees the same); on the device profile the authenticator's state decides. It sets
/// ``biometryType`` whatever it returns (as Apple documents: `.none` on the simulator profile, the authenticator's
/// ``ScriptedAuthenticator/biometryKind`` on the device profile) and, when a biometric policy can be evaluated,
/// ``evaluatedPolicyDomainState``.
///
/// Every call is recorded: ``canEvaluateCalls``, ``evaluations`` (policy and reason), ``invalidateCount``.
///
/// Thread safety: every member is behind a lock; the type is `Sendable`. Evaluations never block a thread.
public final class ScriptedBiometricContext: BiometricAuthenticationContext, Sendable {
    /// How one evaluation queued with ``enqueue(_:)`` ends.
    public enum EvaluationResult: Sendable, Hashable {
        /// The person authenticated (with biometry for `.deviceOwnerAuthenticationWithBiometrics`; for
        /// `.deviceOwnerAuthentication` the factor is not said, so the context then covers `.userPresence` items only).
        case success
        /// The person authenticated with `factor`: for example `AuthenticationFactor.passcode` plays a person who
        /// typed the passcode at the `.deviceOwnerAuthentication` prompt, which then covers `.devicePasscode` and
        /// `.userPresence` items but never a biometry-only one.
        case succeeded(via: AuthenticationFactor)
        /// The evaluation fails with this `LAError` code.
        case failure(LAError.Code)
    }

    /// One recorded evaluation.
    public struct EvaluationCall: Sendable, Hashable {
        /// The policy evaluated.
        public let policy: LAPolicy
        /// The reason given.
        public let reason: String

        /// A call evaluating `policy` for `reason`.
        public init(policy: LAPolicy, reason: String) {
            self.policy = policy
            self.reason = reason
        }
    }

    private struct State {
        var profile: InMemoryKeychain.DeviceProfile
        var queue: [EvaluationResult] = []
        var canEvaluateError: LAError.Code?
        var canEvaluateCalls: [LAPolicy] = []
        var evaluations: [EvaluationCall] = []
        var biometryType: LABiometryType?
        var domainState: Data?
        var cancelTitle: String?
        var fallbackTitle: String?
        var holding = false
        var held: [UUID: CheckedContinuation<LAError.Code?, Never>] = [:]
        var heldWaiters: [CheckedContinuation<Void, Never>] = []
        var invalidateCount = 0
        /// Set under the same lock that holds evaluations, so none starts waiting after ``invalidate()`` took them.
        var invalidated = false
    }

    /// The authenticator that plays the device's biometry and answers prompts (shared with the keychain when made
    /// from one).
    public let authenticator: ScriptedAuthenticator
    /// The engine's context this one stands for: pass it to keychain reads
    /// (`AuthenticationOptions(context: scripted.authenticationContext)`) so a successful evaluation is reused within
    /// ``touchIDAuthenticationAllowableReuseDuration``, as an `LAContext` passed as `kSecUseAuthenticationContext` is:
    /// only for items whose access control the evaluation's factor satisfies (a biometric evaluation never opens a
    /// `.devicePasscode` item; a device-owner evaluation, whose factor is not said, opens `.userPresence` items only).
    public let authenticationContext = AuthenticationContext()
    private let keychain: InMemoryKeychain?
    private let state: Locked<State>

    /// A context playing a device of its own.
    ///
    /// - Parameters:
    ///   - profile: device (the script decides) or simulator (see the type's description). Default: device.
    ///   - biometryKind: the device's biometry. Default: `BiometryKind.face` (an iPhone with Face ID).
    ///   - outcomes: the first evaluations' outcomes, in order.
    ///   - defaultOutcome: the outcome once they are used. Default: success.
    public init(profile: InMemoryKeychain.DeviceProfile = .device, biometryKind: BiometryKind = .face,
                outcomes: [AuthenticationOutcome] = [], defaultOutcome: AuthenticationOutcome = .success) {
        authenticator = ScriptedAuthenticator(outcomes, defaultOutcome: defaultOutcome, biometryKind: biometryKind)
        keychain = nil
        state = Locked(State(profile: profile))
    }

    /// A context playing `keychain`'s device: its authenticator, profile and enrollment.
    public init(keychain: InMemoryKeychain) {
        authenticator = keychain.authenticator
        self.keychain = keychain
        state = Locked(State(profile: keychain.profile))
    }

    // MARK: Script

    /// Queues outcomes on the authenticator's script (shared with the keychain's prompts when made from one).
    public func enqueueAuthentication(_ outcomes: AuthenticationOutcome...) { authenticator.enqueue(outcomes) }

    /// Queues results for this context's next evaluations only, before the authenticator's script: any `LAError`
    /// code (including those no `AuthenticationOutcome` stands for, such as `.invalidContext`), or success.
    public func enqueue(_ results: EvaluationResult...) { state.withLock { $0.queue += results } }

    /// When set, ``canEvaluatePolicy(_:error:)`` returns false with this code for every policy.
    public var canEvaluateError: LAError.Code? {
        get { state.current.canEvaluateError }
        set { state.withLock { $0.canEvaluateError = newValue } }
    }

    /// The device profile: the keychain's when made from one (setting it sets the keychain's).
    public var profile: InMemoryKeychain.DeviceProfile {
        get { keychain?.profile ?? state.current.profile }
        set {
            if let keychain { keychain.profile = newValue } else { state.withLock { $0.profile = newValue } }
        }
    }

    /// The device's biometry (the authenticator's).
    public var biometryKind: BiometryKind {
        get { authenticator.biometryKind }
        set { authenticator.biometryKind = newValue }
    }

    /// Whether a biometric identity is enrolled (the authenticator's).
    public var enrolled: Bool {
        get { authenticator.enrolled }
        set { authenticator.enrolled = newValue }
    }

    /// Whether biometry is locked out (the authenticator's).
    public var lockedOut: Bool {
        get { authenticator.lockedOut }
        set { authenticator.lockedOut = newValue }
    }

    /// Whether the device has a passcode (the authenticator's, and the keychain's when made from one).
    public var passcodeSet: Bool {
        get { authenticator.passcodeSet }
        set {
            if let keychain { keychain.passcodeSet = newValue } else { authenticator.passcodeSet = newValue }
        }
    }

    /// Simulates adding or removing a finger or face: the domain state the next check reports differs; with a
    /// keychain, its `.biometryCurrentSet` items become unreadable (``InMemoryKeychain/changeBiometryEnrollment()``).
    public func changeEnrollment() {
        if let keychain { keychain.changeBiometryEnrollment() } else { authenticator.changeEnrollment() }
    }

    // MARK: Holding evaluations

    /// Makes later evaluations wait (until ``releaseEvaluations()``, or ``invalidate()`` which ends them with
    /// `LAError.appCancel`): a prompt left on screen.
    public func holdEvaluations() { state.withLock { $0.holding = true } }

    /// Lets waiting and later evaluations go on with the script.
    public func releaseEvaluations() {
        let held = state.withLock { s in
            s.holding = false
            defer { s.held = [:] }
            return Array(s.held.values)
        }
        for continuation in held { continuation.resume(returning: nil) }
    }

    /// How many evaluations are waiting.
    public var heldEvaluationCount: Int { state.current.held.count }

    /// Returns once an evaluation is waiting (at once if one already is).
    public func waitForHeldEvaluation() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { s in
                if !s.held.isEmpty { return true }
                s.heldWaiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    // MARK: Recorded calls

    /// The policies ``canEvaluatePolicy(_:error:)`` was asked about, in order.
    public var canEvaluateCalls: [LAPolicy] { state.current.canEvaluateCalls }
    /// The evaluations asked for, in order (including those that failed at once).
    public var evaluations: [EvaluationCall] { state.current.evaluations }
    /// Whether an evaluation was asked for (what hand-written LAContext mocks call `evaluateCalled`).
    public var evaluateCalled: Bool { !state.current.evaluations.isEmpty }
    /// How many times ``invalidate()`` was called.
    public var invalidateCount: Int { state.current.invalidateCount }
    /// Whether ``invalidate()`` was called.
    public var isInvalidated: Bool { authenticationContext.isInvalidated }

    // MARK: LAContext

    /// The Cancel button's title (recorded only).
    public var localizedCancelTitle: String? {
        get { state.current.cancelTitle }
        set { state.withLock { $0.cancelTitle = newValue } }
    }

    /// The fallback button's title (recorded only).
    public var localizedFallbackTitle: String? {
        get { state.current.fallbackTitle }
        set { state.withLock { $0.fallbackTitle = newValue } }
    }

    /// Seconds during which a successful evaluation covers keychain reads passing ``authenticationContext``.
    public var touchIDAuthenticationAllowableReuseDuration: TimeInterval {
        get { authenticationContext.reuseDuration }
        set { authenticationContext.reuseDuration = newValue }
    }

    /// When true, evaluations fail with `LAError.notInteractive` (and keychain reads passing
    /// ``authenticationContext`` that would prompt fail with `errSecInteractionNotAllowed`).
    public var interactionNotAllowed: Bool {
        get { authenticationContext.interactionNotAllowed }
        set { authenticationContext.interactionNotAllowed = newValue }
    }

    /// `.none` until ``canEvaluatePolicy(_:error:)`` is called, then the device's biometry (`.none` on the simulator
    /// profile).
    public var biometryType: LABiometryType { state.current.biometryType ?? .none }

    /// The enrollment's domain state as of the last successful biometric check or evaluation; nil before one.
    public var evaluatedPolicyDomainState: Data? { state.current.domainState }

    /// Whether `policy` can be evaluated now (see the type's description); records the call.
    public func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool {
        let profile = self.profile
        let canEvaluateError = state.withLock { s -> LAError.Code? in
            s.canEvaluateCalls.append(policy)
            return s.canEvaluateError
        }
        let biometric = policy == .deviceOwnerAuthenticationWithBiometrics
        let code: LAError.Code?
        if authenticationContext.isInvalidated {
            code = .invalidContext
        } else if let canEvaluateError {
            code = canEvaluateError
        } else if profile == .simulator {
            code = biometric ? .biometryNotAvailable : nil
        } else {
            code = authenticator.availability(for: Self.flags(for: policy)).flatMap { Self.code(for: $0, policy: policy) }
        }
        let type = profile == .simulator ? LABiometryType.none : Self.biometryType(for: authenticator.biometryKind)
        let domainState = code == nil && biometric ? authenticator.biometryDomainState : nil
        state.withLock { s in
            s.biometryType = type
            if let domainState { s.domainState = domainState }
        }
        if let code {
            error?.pointee = NSError(domain: LAError.errorDomain, code: code.rawValue, userInfo: nil)
            return false
        }
        return true
    }

    /// Evaluates `policy` with the script (see the type's description); records the call.
    ///
    /// - Returns: true (a failure throws).
    /// - Throws: `LAError` with the scripted code.
    public func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool {
        record(policy, localizedReason)
        try await perform(policy, reason: localizedReason)
        return true
    }

    /// The reply form: `reply` runs on another thread (as Apple's), with `(true, nil)` or `(false, LAError)`.
    /// The call is recorded before this returns.
    public func evaluatePolicy(_ policy: LAPolicy, localizedReason: String,
                               reply: @escaping @Sendable (Bool, (any Error)?) -> Void) {
        record(policy, localizedReason)
        Task.detached {
            do {
                try await self.perform(policy, reason: localizedReason)
                reply(true, nil)
            } catch {
                reply(false, error)
            }
        }
    }

    /// Invalidates the context: a waiting evaluation ends with `LAError.appCancel`, later ones fail with
    /// `LAError.invalidContext`, and keychain reads passing ``authenticationContext`` fail.
    public func invalidate() {
        let held = state.withLock { s in
            s.invalidateCount += 1
            s.invalidated = true
            defer { s.held = [:] }
            return Array(s.held.values)
        }
        authenticationContext.invalidate()
        for continuation in held { continuation.resume(returning: .appCancel) }
    }

    // MARK: - Evaluation

    private func record(_ policy: LAPolicy, _ reason: String) {
        state.withLock { $0.evaluations.append(EvaluationCall(policy: policy, reason: reason)) }
    }

    private func perform(_ policy: LAPolicy, reason: String) async throws {
        if authenticationContext.isInvalidated { throw LAError(.invalidContext) }
        if let code = await waitWhileHeld() { throw LAError(code) }
        if authenticationContext.interactionNotAllowed { throw LAError(.notInteractive) }
        let biometric = policy == .deviceOwnerAuthenticationWithBiometrics
        let queued: EvaluationResult? = state.withLock { s in s.queue.isEmpty ? nil : s.queue.removeFirst() }
        switch queued {
        case .success?:
            succeeded(policy, factors: Self.factors(for: policy))
            return
        case .succeeded(let factor)?:
            succeeded(policy, factors: [factor])
            return
        case .failure(let code)?:
            throw LAError(code)
        case nil:
            break
        }
        if profile == .simulator {
            if biometric { throw LAError(.biometryNotAvailable) }
            succeeded(policy, factors: Self.factors(for: policy))
            return
        }
        let request = AuthenticationRequest(itemClass: .genericPassword, flags: Self.flags(for: policy),
                                            operationPrompt: reason, operation: "evaluatePolicy",
                                            cancellation: authenticationContext.cancellation)
        let result = authenticator.authenticateReportingFactors(request)
        if let code = Self.code(for: result.outcome, policy: policy) { throw LAError(code) }
        succeeded(policy, factors: result.factors)
    }

    /// Waits while evaluations are held: nil to go on, `.appCancel` when invalidated meanwhile.
    private func waitWhileHeld() async -> LAError.Code? {
        let id = UUID()
        return await withCheckedContinuation { (continuation: CheckedContinuation<LAError.Code?, Never>) in
            let (answer, waiters): (LAError.Code??, [CheckedContinuation<Void, Never>]) = state.withLock { s in
                if !s.holding { return (.some(nil), []) }
                if s.invalidated { return (.some(.appCancel), []) }
                s.held[id] = continuation
                defer { s.heldWaiters = [] }
                return (nil, s.heldWaiters)
            }
            for waiter in waiters { waiter.resume() }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    /// Records the success on ``authenticationContext`` with the factors the person proved, so keychain reads
    /// passing it are covered only for the access controls those factors satisfy.
    private func succeeded(_ policy: LAPolicy, factors: Set<AuthenticationFactor>) {
        let now = keychain?.engine.configuration.now() ?? Date()
        let domainState = authenticator.biometryDomainState
        authenticationContext.record(factors, biometryDomainState: factors.contains(.biometry) ? domainState : nil, at: now)
        if policy == .deviceOwnerAuthenticationWithBiometrics, let domainState {
            state.withLock { $0.domainState = domainState }
        }
    }

    /// What a success of `policy` proves when the script does not say: biometry for the biometric policy; for the
    /// device-owner policy, biometry or the passcode without saying which (`AuthenticationFactor.deviceOwner`).
    static func factors(for policy: LAPolicy) -> Set<AuthenticationFactor> {
        AccessControlRules.factorsProven(by: flags(for: policy))
    }

    // MARK: - Mapping

    /// The access-control flags a policy stands for: biometry for the biometric policy, user presence otherwise.
    static func flags(for policy: LAPolicy) -> AccessControlFlags {
        policy == .deviceOwnerAuthenticationWithBiometrics ? .biometryAny : .userPresence
    }

    /// The `LAError` code an outcome ends an evaluation of `policy` with; nil for success.
    static func code(for outcome: AuthenticationOutcome, policy: LAPolicy) -> LAError.Code? {
        switch outcome {
        case .success: return nil
        case .userCancel: return .userCancel
        case .failed: return .authenticationFailed
        case .notAvailable:
            return policy == .deviceOwnerAuthenticationWithBiometrics ? .biometryNotAvailable : .passcodeNotSet
        case .lockout: return .biometryLockout
        case .notEnrolled: return .biometryNotEnrolled
        case .passcodeNotSet: return .passcodeNotSet
        case .userFallback: return .userFallback
        case .appCancel: return .appCancel
        case .systemCancel: return .systemCancel
        case .notInteractive: return .notInteractive
        }
    }

    /// LocalAuthentication's type for a biometry kind.
    static func biometryType(for kind: BiometryKind) -> LABiometryType {
        switch kind {
        case .none: return .none
        case .fingerprint: return .touchID
        case .face: return .faceID
        // By raw value: Apple's `.opticID` needs iOS 17 / macOS 14, above Keystone's deployment targets.
        case .iris: return LABiometryType(rawValue: 4) ?? .none
        }
    }
}

extension InMemoryKeychain {
    /// A scripted `LAContext` playing this keychain's device: the same authenticator (one script for the app's
    /// evaluations and the keychain's prompts), profile and biometry enrollment.
    public func makeBiometricContext() -> ScriptedBiometricContext { ScriptedBiometricContext(keychain: self) }
}

#endif
