#if !canImport(Darwin)
import Foundation
import KeychainEngine

// LocalAuthentication's LAContext, for keychain code that passes one (kSecUseAuthenticationContext); its types
// (LAPolicy, LAError…) are in LocalAuthenticationTypes.swift. Authentication is performed by the default keychain
// engine's `Authenticator`.

/// An authentication context: evaluates policies with the default keychain's authenticator and, passed as
/// `kSecUseAuthenticationContext`, lets keychain reads reuse a successful authentication.
///
/// A success is recorded with the factor the person used (the authenticator reports it; see
/// `AuthenticationContext`), and a keychain read that passes the context within
/// ``touchIDAuthenticationAllowableReuseDuration`` is covered only when that factor satisfies the item's access
/// control, as on Apple platforms: the password typed for ``LAPolicy/deviceOwnerAuthentication`` opens
/// `.devicePasscode` and `.userPresence` items but never a `.biometryAny` or `.biometryCurrentSet` one, and a
/// finger (``LAPolicy/deviceOwnerAuthenticationWithBiometrics``) never opens a `.devicePasscode` one. Any other
/// read asks for the missing factor, or fails with `errSecInteractionNotAllowed` under ``interactionNotAllowed``.
///
/// - Important: An authenticator that does not say which factor was used (a custom `Authenticator` without
///   `authenticateReportingFactors`) leaves a ``LAPolicy/deviceOwnerAuthentication`` success covering
///   `.userPresence` items only.
public final class LAContext: NSObject, Sendable {
    // Sendable, checked: the mutable state lives in `context`, `observed` and `texts`, each behind its lock.

    /// The engine's context this LAContext stands for.
    public let context = AuthenticationContext()
    /// What ``canEvaluatePolicy(_:error:)`` and evaluations observed (Apple sets these properties then).
    private let observed = Locked<(biometryType: LABiometryType, domainState: Data?, biometryPolicy: LAPolicy)>((.none, nil, .deviceOwnerAuthenticationWithBiometrics))
    private let texts = Locked<(reason: String, cancel: String?, fallback: String?)>(("", nil, nil))
    /// The application password ``setCredential(_:type:)`` set (never in a description or a log).
    private let applicationPassword = Locked<Data?>(nil)

    /// A new context, with no reuse window and no recorded authentication.
    public override init() { super.init() }

    /// Seconds during which a successful evaluation is reused by keychain operations that pass this context;
    /// values above ``LATouchIDAuthenticationMaximumAllowableReuseDuration`` (300) are clamped to it.
    public var touchIDAuthenticationAllowableReuseDuration: TimeInterval {
        get { context.reuseDuration }
        set { context.reuseDuration = newValue }
    }

    /// When true, operations that would prompt fail instead.
    public var interactionNotAllowed: Bool {
        get { context.interactionNotAllowed }
        set { context.interactionNotAllowed = newValue }
    }

    /// The reason shown when an operation that passes this context prompts (stored; the authenticator
    /// receives the operation's `kSecUseOperationPrompt`).
    public var localizedReason: String {
        get { texts.current.reason }
        set { texts.withLock { $0.reason = newValue } }
    }

    /// The Cancel button's title (stored only: prompts are the authenticator's).
    public var localizedCancelTitle: String? {
        get { texts.current.cancel }
        set { texts.withLock { $0.cancel = newValue } }
    }

    /// The fallback button's title (stored only: prompts are the authenticator's).
    public var localizedFallbackTitle: String? {
        get { texts.current.fallback }
        set { texts.withLock { $0.fallback = newValue } }
    }

    /// The biometry of the device, as the default authenticator sees it (on Linux: a fingerprint reader that fprintd
    /// serves is ``LABiometryType/touchID``, Apple's fingerprint type).
    ///
    /// As on Apple platforms, it is set by ``canEvaluatePolicy(_:error:)``, whatever that call returns, and is
    /// ``LABiometryType/none`` before.
    public var biometryType: LABiometryType { observed.current.biometryType }

    /// The state of the enrolled biometry: an opaque value that changes when a finger is enrolled or removed, so an
    /// app can notice enrollment changes (the rule `.biometryCurrentSet` items follow).
    ///
    /// As on Apple platforms, nil until ``canEvaluatePolicy(_:error:)`` succeeds for
    /// ``LAPolicy/deviceOwnerAuthenticationWithBiometrics`` or an evaluation succeeds; nil without biometry.
    public var evaluatedPolicyDomainState: Data? { observed.current.domainState }

    /// Not an Apple API: some app code sets it (`context.biometryPolicy = .deviceOwnerAuthenticationWithBiometrics`) as if
    /// it were. Kept so such code builds on Linux; it has no effect (the policy is the one passed to each call).
    @available(*, deprecated, message: "LAContext has no biometryPolicy on Apple platforms: pass the policy to canEvaluatePolicy/evaluatePolicy")
    public var biometryPolicy: LAPolicy {
        get { observed.current.biometryPolicy }
        set { observed.withLock { $0.biometryPolicy = newValue } }
    }

    /// Whether `policy` can be evaluated now, without asking anyone.
    ///
    /// Asks the default authenticator (on Linux: PAM and fprintd, through ``KeychainServicesDefaults/authenticator``
    /// or the current engine's): false with `error` set to an ``LAError`` —
    /// `.biometryNotAvailable` (no reader), `.biometryNotEnrolled` (no enrolled finger), `.biometryLockout` (too many
    /// misses), `.passcodeNotSet` (no usable login password), `.notInteractive` (no terminal and no prompter),
    /// `.invalidContext` after ``invalidate()``. Sets ``biometryType``, and ``evaluatedPolicyDomainState`` when a
    /// biometric policy can be evaluated.
    public func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool {
        let authenticator = KeychainServicesDefaults.currentAuthenticator()
        let kind = authenticator.biometryKind
        observed.withLock { $0.biometryType = LABiometryType(kind) }
        if context.isInvalidated {
            error?.pointee = LAError(.invalidContext).asNSError
            return false
        }
        let flags = Self.flags(for: policy)
        if let blocker = authenticator.availability(for: flags) {
            error?.pointee = Self.error(for: blocker, flags: flags).asNSError
            return false
        }
        if policy == .deviceOwnerAuthenticationWithBiometrics {
            let state = authenticator.biometryDomainState
            observed.withLock { $0.domainState = state }
        }
        return true
    }

    /// Asks the default keychain engine's authenticator; a success is recorded on this context with the factor the
    /// person used (biometry for ``LAPolicy/deviceOwnerAuthenticationWithBiometrics``; a finger or the password for
    /// ``LAPolicy/deviceOwnerAuthentication``), which decides the keychain items it covers (see the type).
    ///
    /// As on Apple platforms, `reply` runs on a private thread, never on the caller's thread, with `(true, nil)`
    /// or `(false, LAError)`. The evaluation, which waits for a person, has a thread of its own: several waiting
    /// prompts never hold dispatch's or Swift's shared worker threads.
    ///
    /// `reply` is not required to be `@Sendable`, so that the protocols apps declare to wrap `LAContext`
    /// (`func evaluatePolicy(_:localizedReason:reply: @escaping (Bool, Error?) -> Void)`, a common wrapper protocol) are
    /// satisfied by this method in the Swift 6 language mode, whether they spell the reply `@Sendable` or not.
    /// - Important: As with Apple's, `reply` runs on another thread: it must not touch state that is not safe to use
    ///   from there.
    public func evaluatePolicy(_ policy: LAPolicy, localizedReason: String, reply: @escaping (Bool, (any Error)?) -> Void) {
        runOnOwnThread(named: "keystone.evaluate-policy", reply: reply) { $0.evaluate(policy, reason: localizedReason) }
    }

    /// Asks the default keychain engine's authenticator; a success is recorded on this context.
    ///
    /// The authenticator (which may wait for the user) runs on a thread of its own, not on a Swift
    /// concurrency thread.
    ///
    /// - Returns: true (a failure throws).
    /// - Throws: ``LAError`` with the outcome's code: `.userCancel`, `.authenticationFailed`,
    ///   `.biometryNotAvailable` or `.passcodeNotSet`, `.biometryLockout`, `.invalidContext` after
    ///   ``invalidate()``, `.notInteractive` with ``interactionNotAllowed``.
    public func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Bool, any Error>) in
            evaluatePolicy(policy, localizedReason: localizedReason) { success, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: success) }
            }
        }
    }

    /// Performs the authentication `accessControl` asks for before `operation`; a success is recorded on this
    /// context, so keychain operations that pass it (`kSecUseAuthenticationContext`) within the reuse window
    /// do not ask again.
    ///
    /// What is asked: nothing for ``LAAccessControlOperation/createItem`` and ``LAAccessControlOperation/createKey``
    /// (Keystone's `SecItemAdd` never prompts) nor for an access control without authentication flags (only an
    /// accessibility, `.privateKeyUsage`, `.or`, `.and`): those succeed at once and record nothing. Every other
    /// operation asks the default keychain engine's authenticator for the access control's flags.
    ///
    /// `reply` runs on a thread of its own, as for ``evaluatePolicy(_:localizedReason:reply:)``, with
    /// `(true, nil)` or `(false, LAError)`: `.invalidContext` after ``invalidate()``, `.notInteractive` with
    /// ``interactionNotAllowed``, else the outcome's code (`.userCancel`, `.authenticationFailed`,
    /// `.biometryLockout`; when nothing can authenticate, `.biometryNotAvailable` for biometry-only flags,
    /// `.companionNotAvailable` for `.companion` alone, `.passcodeNotSet` otherwise).
    public func evaluateAccessControl(_ accessControl: SecAccessControl, operation: LAAccessControlOperation,
                                      localizedReason: String, reply: @escaping (Bool, (any Error)?) -> Void) {
        runOnOwnThread(named: "keystone.evaluate-access-control", reply: reply) {
            $0.evaluate(accessControl.accessControl.flags, operation: operation, reason: localizedReason)
        }
    }

    /// Performs the authentication `accessControl` asks for before `operation`, as
    /// ``evaluateAccessControl(_:operation:localizedReason:reply:)`` does.
    ///
    /// - Returns: true (a failure throws).
    /// - Throws: ``LAError``, with the codes the reply form reports.
    public func evaluateAccessControl(_ accessControl: SecAccessControl, operation: LAAccessControlOperation,
                                      localizedReason: String) async throws -> Bool {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Bool, any Error>) in
            evaluateAccessControl(accessControl, operation: operation, localizedReason: localizedReason) { success, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: success) }
            }
        }
    }

    /// Hands the context the application password of `.applicationPassword` keys and items, as Apple's does:
    /// operations that pass this context (`kSecUseAuthenticationContext`, CryptoKit's `authenticationContext:`) use it.
    ///
    /// A Secure Enclave key (`kSecAttrTokenIDSecureEnclave`, CryptoKit's `SecureEnclave.P256…PrivateKey`) made with
    /// `.applicationPassword` in its access control gets this password as its TPM authorization value when it is
    /// made, and each use sends it to the TPM, which refuses a wrong one (`errSecAuthFailed`, counted toward its
    /// dictionary-attack lockout).
    ///
    /// - Parameters:
    ///   - credential: The password (Apple stores a typed one as UTF-8); nil removes the one set.
    ///   - type: ``LACredentialType/applicationPassword``. Decision: ``LACredentialType/smartCardPIN`` is refused
    ///     (false): Keystone has no smart card token that would use it.
    /// - Returns: true when the credential was set or removed; false for a smart card PIN or after ``invalidate()``.
    /// - Important: The password stays in this process's memory until it is removed or the context invalidated
    ///   (then its bytes are overwritten, best effort: copies Foundation made are not). It never appears in a
    ///   description, a log or an error.
    public func setCredential(_ credential: Data?, type: LACredentialType) -> Bool {
        guard type == .applicationPassword else { return credential == nil }
        if context.isInvalidated { return credential == nil }
        applicationPassword.withLock { stored in
            Self.wipe(&stored)
            stored = credential.map { Data($0) }
        }
        return true
    }

    /// Whether a credential of `type` is set (``setCredential(_:type:)``).
    public func isCredentialSet(_ type: LACredentialType) -> Bool {
        type == .applicationPassword && !context.isInvalidated && applicationPassword.current != nil
    }

    /// The application password set with ``setCredential(_:type:)``; nil when none or after ``invalidate()``.
    package var applicationPasswordCredential: Data? {
        context.isInvalidated ? nil : applicationPassword.current
    }

    /// Overwrites the stored bytes, then drops them.
    private static func wipe(_ stored: inout Data?) {
        guard var bytes = stored else { return }
        stored = nil
        bytes.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { memset(base, 0, raw.count) }
        }
    }

    private func runOnOwnThread(named name: String, reply: @escaping (Bool, (any Error)?) -> Void,
                                _ body: @escaping @Sendable (LAContext) -> LAError?) {
        // The caller's reply, called once on this thread as Apple's is on its private queue (see evaluatePolicy).
        nonisolated(unsafe) let reply = reply
        let thread = Thread {
            let error = body(self)
            reply(error == nil, error)
        }
        thread.name = name
        thread.start()
    }

    private func evaluate(_ policy: LAPolicy, reason: String) -> LAError? {
        if context.isInvalidated { return LAError(.invalidContext) }
        if context.interactionNotAllowed { return LAError(.notInteractive) }
        return authenticate(Self.flags(for: policy), itemClass: .genericPassword, reason: reason, operation: "evaluatePolicy")
    }

    /// The access-control flags a policy asks for: biometry alone, or biometry with the passcode as fallback.
    private static func flags(for policy: LAPolicy) -> AccessControlFlags {
        policy == .deviceOwnerAuthenticationWithBiometrics ? .biometryAny : .userPresence
    }

    private func evaluate(_ flags: AccessControlFlags, operation: LAAccessControlOperation, reason: String) -> LAError? {
        if context.isInvalidated { return LAError(.invalidContext) }
        let needed = flags.intersection(.authenticationFlags)
        if needed.isEmpty || operation == .createItem || operation == .createKey { return nil }
        if context.interactionNotAllowed { return LAError(.notInteractive) }
        let itemClass: ItemClass = operation == .useItem ? .genericPassword : .key
        return authenticate(needed, itemClass: itemClass, reason: reason, operation: "evaluateAccessControl")
    }

    /// Asks the default authenticator for `flags`; records a success on this context. `invalidate()` while it waits
    /// ends it with `.appCancel`.
    private func authenticate(_ flags: AccessControlFlags, itemClass: ItemClass, reason: String, operation: String) -> LAError? {
        let authenticator = KeychainServicesDefaults.currentAuthenticator()
        let result = authenticator.authenticateReportingFactors(
            AuthenticationRequest(itemClass: itemClass, flags: flags, operationPrompt: reason, operation: operation,
                                  cancellation: context.cancellation))
        guard result.outcome == .success else { return Self.error(for: result.outcome, flags: flags) }
        // What the person proved, not merely that they succeeded: a password entered for the device-owner policy
        // never covers a biometry-only item, a finger never covers a passcode-only one.
        let biometric = result.factors.contains(.biometry)
        let state = flags.involvesBiometry || biometric ? authenticator.biometryDomainState : nil
        context.record(result.factors, satisfying: flags, biometryDomainState: biometric ? state : nil,
                       at: KeychainServicesDefaults.currentClock()())
        if flags.involvesBiometry { observed.withLock { $0.domainState = state } }
        return nil
    }

    /// LocalAuthentication's error for an outcome. Decision: a lockout is `.biometryLockout` whatever locked out
    /// (LocalAuthentication has no passcode lockout code); “not available” is `.biometryNotAvailable` for
    /// biometry-only flags, `.companionNotAvailable` for `.companion` alone, `.passcodeNotSet` otherwise.
    private static func error(for outcome: AuthenticationOutcome, flags: AccessControlFlags) -> LAError {
        switch outcome {
        case .success, .failed: return LAError(.authenticationFailed)
        case .userCancel: return LAError(.userCancel)
        case .notAvailable:
            if flags.isSubset(of: [.biometryAny, .biometryCurrentSet]) { return LAError(.biometryNotAvailable) }
            if flags == .watch { return LAError(.companionNotAvailable) }
            return LAError(.passcodeNotSet)
        case .lockout: return LAError(.biometryLockout)
        case .notEnrolled: return LAError(.biometryNotEnrolled)
        case .passcodeNotSet: return LAError(.passcodeNotSet)
        case .userFallback: return LAError(.userFallback)
        case .appCancel: return LAError(.appCancel)
        case .systemCancel: return LAError(.systemCancel)
        case .notInteractive: return LAError(.notInteractive)
        }
    }

    /// Invalidates the context: later uses fail, and the application password set on it is overwritten and dropped.
    public func invalidate() {
        context.invalidate()
        applicationPassword.withLock { Self.wipe(&$0) }
    }
}
#endif
