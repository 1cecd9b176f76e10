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
}

/// Lets `catch LAError.userCancel` match an ``LAError``.
public func ~= (code: LAError.Code, error: any Error) -> Bool { (error as? LAError)?.code == code }

/// Foundation's `NSErrorPointer`, which swift-corelibs-foundation lacks (Apple: an autoreleasing pointer).
public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?

/// An authentication context: evaluates policies with the default keychain's authenticator and, passed as
/// `kSecUseAuthenticationContext`, lets keychain reads reuse a successful authentication.
public final class LAContext: NSObject, @unchecked Sendable {
    // @unchecked Sendable: the mutable state lives in `context` (locked) and `texts` (locked).

    /// The engine's context this LAContext stands for.
    public let context = AuthenticationContext()
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

    /// The biometry the default keychain's device has: none on this platform.
    public var biometryType: LABiometryType { .none }

    /// The state of the enrolled biometry, to notice enrollment changes: always nil on this platform, as on
    /// Apple devices without biometry.
    public var evaluatedPolicyDomainState: Data? { nil }

    /// Whether `policy` can be evaluated: false on this platform for biometry; the device-owner policy is
    /// evaluated by the keychain engine's authenticator.
    public func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool {
        if context.isInvalidated {
            error?.pointee = NSError(domain: LAError.errorDomain, code: LAError.Code.invalidContext.rawValue)
            return false
        }
        if policy == .deviceOwnerAuthenticationWithBiometrics {
            error?.pointee = NSError(domain: LAError.errorDomain, code: LAError.Code.biometryNotAvailable.rawValue)
            return false
        }
        return true
    }

    /// Asks the default keychain engine's authenticator; a success is recorded on this context.
    ///
    /// As on Apple platforms, `reply` runs on a private thread, never on the caller's thread, with `(true, nil)`
    /// or `(false, LAError)`. The evaluation, which waits for a person, has a thread of its own: several waiting
    /// prompts never hold dispatch's or Swift's shared worker threads.
    public func evaluatePolicy(_ policy: LAPolicy, localizedReason: String, reply: @escaping @Sendable (Bool, (any Error)?) -> Void) {
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
                                      localizedReason: String, reply: @escaping @Sendable (Bool, (any Error)?) -> Void) {
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

    private func runOnOwnThread(named name: String, reply: @escaping @Sendable (Bool, (any Error)?) -> Void,
                                _ body: @escaping @Sendable (LAContext) -> LAError?) {
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
        let flags: AccessControlFlags = policy == .deviceOwnerAuthenticationWithBiometrics ? .biometryAny : .userPresence
        return authenticate(flags, itemClass: .genericPassword, reason: reason, operation: "evaluatePolicy")
    }

    private func evaluate(_ flags: AccessControlFlags, operation: LAAccessControlOperation, reason: String) -> LAError? {
        if context.isInvalidated { return LAError(.invalidContext) }
        let needed = flags.intersection(.authenticationFlags)
        if needed.isEmpty || operation == .createItem || operation == .createKey { return nil }
        if context.interactionNotAllowed { return LAError(.notInteractive) }
        let itemClass: ItemClass = operation == .useItem ? .genericPassword : .key
        return authenticate(needed, itemClass: itemClass, reason: reason, operation: "evaluateAccessControl")
    }

    /// Asks the default engine's authenticator for `flags`; records a success on this context.
    private func authenticate(_ flags: AccessControlFlags, itemClass: ItemClass, reason: String, operation: String) -> LAError? {
        guard let engine = try? KeychainServicesDefaults.currentEngine() else { return LAError(.systemCancel) }
        let outcome = engine.authenticator.authenticate(
            AuthenticationRequest(itemClass: itemClass, flags: flags, operationPrompt: reason, operation: operation))
        switch outcome {
        case .success:
            context.recordSuccess(at: engine.configuration.now())
            return nil
        case .userCancel: return LAError(.userCancel)
        case .failed: return LAError(.authenticationFailed)
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
