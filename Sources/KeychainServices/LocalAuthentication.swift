#if !canImport(Darwin)
import Foundation
import KeychainEngine

// LocalAuthentication's names, for keychain code that passes an LAContext (kSecUseAuthenticationContext).
// Authentication is performed by the default keychain engine's `Authenticator`.

/// What to authenticate with.
public enum LAPolicy: Int, Sendable {
    /// Biometry only.
    case deviceOwnerAuthenticationWithBiometrics = 1
    /// Biometry, or the device passcode.
    case deviceOwnerAuthentication = 2
}

/// The kind of biometry a device has (Apple's raw values).
public enum LABiometryType: Int, Sendable {
    /// The LocalAuthentication type of an authenticator's biometry: a fingerprint reader is Touch ID.
    init(_ kind: BiometryKind) {
        switch kind {
        case .none: self = .none
        case .fingerprint: self = .touchID
        case .face: self = .faceID
        case .iris: self = .opticID
        }
    }

    /// No biometry: what ``LAContext/biometryType`` reports on this platform.
    case none = 0
    /// Touch ID.
    case touchID = 1
    /// Face ID.
    case faceID = 2
    /// Optic ID.
    case opticID = 4
}

/// The longest reuse window Apple allows, in seconds.
public let LATouchIDAuthenticationMaximumAllowableReuseDuration: TimeInterval = 300

/// LocalAuthentication's error domain: `com.apple.LocalAuthentication` (``LAError/errorDomain``).
public let LAErrorDomain: String = "com.apple.LocalAuthentication"

/// A credential an app can hand to ``LAContext/setCredential(_:type:)`` (Apple's raw values).
public enum LACredentialType: Int, Sendable {
    /// The application password of items protected with `.applicationPassword`.
    case applicationPassword = 0
    /// A smart card's PIN (macOS).
    case smartCardPIN = -3
}

/// What an access control is evaluated for, in ``LAContext/evaluateAccessControl(_:operation:localizedReason:reply:)``
/// (Apple's raw values).
public enum LAAccessControlOperation: Int, Sendable {
    /// Creating an item.
    case createItem = 0
    /// Reading an existing item's secret.
    case useItem = 1
    /// Creating a key.
    case createKey = 2
    /// Signing with an existing key.
    case useKeySign = 3
    /// Decrypting with an existing key.
    case useKeyDecrypt = 4
    /// A key exchange with an existing key.
    case useKeyKeyExchange = 5
}

/// An authentication failure, with LocalAuthentication's domain and codes.
///
/// Bridges to `NSError` as Apple's does: domain `com.apple.LocalAuthentication`, code the ``Code``'s raw value.
public struct LAError: Error, CustomNSError, Sendable, Hashable, CustomStringConvertible {
    /// LocalAuthentication's error codes, with Apple's raw values.
    public enum Code: Int, Sendable {
        /// The user failed to provide valid credentials.
        case authenticationFailed = -1
        /// The user tapped Cancel.
        case userCancel = -2
        /// The user tapped the fallback button.
        case userFallback = -3
        /// The system cancelled the authentication.
        case systemCancel = -4
        /// No passcode is set on the device.
        case passcodeNotSet = -5
        /// Biometry is not available on the device (always the case on this platform).
        case biometryNotAvailable = -6
        /// The user has no enrolled biometric identities.
        case biometryNotEnrolled = -7
        /// Biometry is locked after too many failed attempts.
        case biometryLockout = -8
        /// The app cancelled the authentication (`invalidate()`).
        case appCancel = -9
        /// The context was invalidated.
        case invalidContext = -10
        /// No paired companion device (such as a watch) could authenticate (macOS).
        case companionNotAvailable = -11
        /// Biometry needs a removable accessory, and none is paired (macOS).
        case biometryNotPaired = -12
        /// Biometry needs a removable accessory, and the paired one is not connected (macOS).
        case biometryDisconnected = -13
        /// The dimensions of embedded authentication UI are invalid (macOS).
        case invalidDimensions = -14
        /// Interaction was needed but `interactionNotAllowed` is set.
        case notInteractive = -1004

        /// Deprecated name of ``companionNotAvailable``.
        @available(*, deprecated, renamed: "companionNotAvailable")
        public static let watchNotAvailable = Code.companionNotAvailable

        /// Deprecated name of ``biometryNotAvailable``.
        @available(*, deprecated, renamed: "biometryNotAvailable")
        public static let touchIDNotAvailable = Code.biometryNotAvailable
        /// Deprecated name of ``biometryNotEnrolled``.
        @available(*, deprecated, renamed: "biometryNotEnrolled")
        public static let touchIDNotEnrolled = Code.biometryNotEnrolled
        /// Deprecated name of ``biometryLockout``.
        @available(*, deprecated, renamed: "biometryLockout")
        public static let touchIDLockout = Code.biometryLockout
    }

    /// `LAErrorDomain`: `com.apple.LocalAuthentication`.
    public static let errorDomain = LAErrorDomain
    /// What went wrong.
    public let code: Code
    /// The code's raw value, for `NSError` bridging.
    public var errorCode: Int { code.rawValue }

    /// An error with `code`.
    public init(_ code: Code) { self.code = code }

    /// ``Code/authenticationFailed``, for `catch LAError.authenticationFailed`.
    public static var authenticationFailed: Code { .authenticationFailed }
    /// ``Code/userCancel``, for `catch LAError.userCancel`.
    public static var userCancel: Code { .userCancel }
    /// ``Code/userFallback``, for `catch LAError.userFallback`.
    public static var userFallback: Code { .userFallback }
    /// ``Code/systemCancel``, for `catch LAError.systemCancel`.
    public static var systemCancel: Code { .systemCancel }
    /// ``Code/passcodeNotSet``, for `catch LAError.passcodeNotSet`.
    public static var passcodeNotSet: Code { .passcodeNotSet }
    /// ``Code/biometryNotAvailable``, for `catch LAError.biometryNotAvailable`.
    public static var biometryNotAvailable: Code { .biometryNotAvailable }
    /// ``Code/biometryNotEnrolled``, for `catch LAError.biometryNotEnrolled`.
    public static var biometryNotEnrolled: Code { .biometryNotEnrolled }
    /// ``Code/biometryLockout``, for `catch LAError.biometryLockout`.
    public static var biometryLockout: Code { .biometryLockout }
    /// ``Code/appCancel``, for `catch LAError.appCancel`.
    public static var appCancel: Code { .appCancel }
    /// ``Code/invalidContext``, for `catch LAError.invalidContext`.
    public static var invalidContext: Code { .invalidContext }
    /// ``Code/notInteractive``, for `catch LAError.notInteractive`.
    public static var notInteractive: Code { .notInteractive }
    /// ``Code/companionNotAvailable``, for `catch LAError.companionNotAvailable`.
    public static var companionNotAvailable: Code { .companionNotAvailable }
    /// ``Code/biometryNotPaired``, for `catch LAError.biometryNotPaired`.
    public static var biometryNotPaired: Code { .biometryNotPaired }
    /// ``Code/biometryDisconnected``, for `catch LAError.biometryDisconnected`.
    public static var biometryDisconnected: Code { .biometryDisconnected }
    /// ``Code/invalidDimensions``, for `catch LAError.invalidDimensions`.
    public static var invalidDimensions: Code { .invalidDimensions }
    /// Deprecated name of ``companionNotAvailable``.
    @available(*, deprecated, renamed: "companionNotAvailable")
    public static var watchNotAvailable: Code { .companionNotAvailable }
    /// Deprecated name of ``biometryNotAvailable``.
    @available(*, deprecated, renamed: "biometryNotAvailable")
    public static var touchIDNotAvailable: Code { .biometryNotAvailable }
    /// Deprecated name of ``biometryNotEnrolled``.
    @available(*, deprecated, renamed: "biometryNotEnrolled")
    public static var touchIDNotEnrolled: Code { .biometryNotEnrolled }
    /// Deprecated name of ``biometryLockout``.
    @available(*, deprecated, renamed: "biometryLockout")
    public static var touchIDLockout: Code { .biometryLockout }

    /// `LAError(<code>)`.
    public var description: String { "LAError(\(code))" }

    /// `NSLocalizedDescriptionKey`: what happened, in words a user can act on.
    public var errorUserInfo: [String: Any] { [NSLocalizedDescriptionKey: message] }

    /// What happened, in words a user can act on.
    public var message: String {
        switch code {
        case .authenticationFailed: return "Authentication failed: the credentials were not recognized."
        case .userCancel: return "Authentication was canceled by the user."
        case .userFallback: return "The user chose to enter a password instead."
        case .systemCancel: return "Authentication was canceled by the system (the reader, daemon or terminal went away or is in use)."
        case .passcodeNotSet: return "No passcode is set: this user has no login password that can be checked."
        case .biometryNotAvailable: return "Biometry is not available: no fingerprint reader was found (is fprintd installed and running?)."
        case .biometryNotEnrolled: return "No fingerprint is enrolled: enroll one with fprintd-enroll or the desktop settings."
        case .biometryLockout: return "Biometry is locked after too many failed attempts: enter your password to unlock it."
        case .appCancel: return "Authentication was canceled by the application."
        case .invalidContext: return "The authentication context was invalidated."
        case .companionNotAvailable: return "No companion device is available to authenticate."
        case .biometryNotPaired: return "No biometric accessory is paired."
        case .biometryDisconnected: return "The biometric accessory is not connected."
        case .invalidDimensions: return "The dimensions of the embedded authentication UI are invalid."
        case .notInteractive: return "Authentication needs interaction, which is not allowed here (no terminal or prompter, or interactionNotAllowed)."
        }
    }

    /// This error as an `NSError` in `LAErrorDomain`, for `NSErrorPointer` out-parameters.
    var asNSError: NSError { NSError(domain: Self.errorDomain, code: code.rawValue, userInfo: errorUserInfo) }
}

/// Lets `catch LAError.userCancel` match an ``LAError``.
public func ~= (code: LAError.Code, error: any Error) -> Bool { (error as? LAError)?.code == code }

/// Foundation's `NSErrorPointer`, which swift-corelibs-foundation lacks (Apple: an autoreleasing pointer).
public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?

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
public final class LAContext: NSObject, @unchecked Sendable {
    // @unchecked Sendable: the mutable state lives in `context` (locked) and `texts` (locked).

    /// The engine's context this LAContext stands for.
    public let context = AuthenticationContext()
    /// What ``canEvaluatePolicy(_:error:)`` and evaluations observed (Apple sets these properties then).
    private let observed = Locked<(biometryType: LABiometryType, domainState: Data?, biometryPolicy: LAPolicy)>((.none, nil, .deviceOwnerAuthenticationWithBiometrics))
    private let texts = Locked<(reason: String, cancel: String?, fallback: String?)>(("", nil, nil))

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

    /// Not an Apple API: seed code sets it (`context.biometryPolicy = .deviceOwnerAuthenticationWithBiometrics`) as if
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
    /// (`func evaluatePolicy(_:localizedReason:reply: @escaping (Bool, Error?) -> Void)`, as in seed 000) are
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

    /// Would hand the context a credential, such as the application password of `.applicationPassword` items.
    ///
    /// Keystone asks the engine's authenticator for application passwords, so a context cannot carry one:
    /// setting a credential fails (false, Apple's failure result) and nothing is stored; clearing one (nil)
    /// succeeds, as there is nothing to clear.
    public func setCredential(_ credential: Data?, type: LACredentialType) -> Bool {
        credential == nil
    }

    /// Whether a credential of `type` is set: never on this platform (``setCredential(_:type:)`` stores none).
    public func isCredentialSet(_ type: LACredentialType) -> Bool { false }

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

    /// Invalidates the context: later uses fail.
    public func invalidate() { context.invalidate() }
}
#endif
