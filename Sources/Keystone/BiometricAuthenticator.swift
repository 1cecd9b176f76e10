import Foundation
import KeychainServices
// On Apple platforms KeychainServices re-exports LocalAuthentication; imported here too so the file reads as Apple
// code does. Elsewhere KeychainServices declares LocalAuthentication's names (LAContext, LAPolicy, LAError…).
#if canImport(Darwin) && canImport(LocalAuthentication)
import LocalAuthentication
#endif

// Apple platforms: iOS, macOS, Mac Catalyst and visionOS. watchOS and tvOS lack `biometryType` and
// `evaluatedPolicyDomainState`.
#if !canImport(Darwin) || (canImport(LocalAuthentication) && !os(watchOS) && !os(tvOS))

// MARK: - Context

/// The members of `LAContext` a ``BiometricAuthenticator`` uses, so tests can hand it a scripted context.
///
/// `LAContext` conforms on every platform. `KeystoneTesting`'s `ScriptedBiometricContext` is a stand-in with
/// scripted outcomes.
///
/// The protocol is not `Sendable`, as Apple's `LAContext` is not: a ``BiometricAuthenticator`` makes a fresh
/// context for every check and evaluation and does not share it (apart from ``invalidate()``, which cancels an
/// evaluation in progress when the calling task is cancelled).
public protocol BiometricAuthenticationContext: AnyObject {
    /// Whether `policy` can be evaluated now, without asking anyone; when not, `error` receives an `LAError`.
    func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool
    /// Asks the person to authenticate for `policy`.
    ///
    /// - Returns: true (a failure throws).
    /// - Throws: `LAError`.
    func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool
    /// The device's biometry, set by ``canEvaluatePolicy(_:error:)`` (`.none` before it is called).
    var biometryType: LABiometryType { get }
    /// An opaque digest of the enrolled biometric identities after a successful biometric
    /// ``canEvaluatePolicy(_:error:)`` or evaluation; nil otherwise.
    var evaluatedPolicyDomainState: Data? { get }
    /// Cancels an evaluation in progress (it fails with `LAError.appCancel`); later evaluations fail with
    /// `LAError.invalidContext`.
    func invalidate()
    /// The Cancel button's title; nil for the system's.
    var localizedCancelTitle: String? { get set }
    /// The fallback button's title; nil for the system's (“Enter Password”), empty to hide the button.
    var localizedFallbackTitle: String? { get set }
}

extension LAContext: BiometricAuthenticationContext {}

// MARK: - Biometry type

/// The biometry a device has.
public enum BiometryType: String, Sendable, Hashable, CaseIterable {
    /// No biometry (or none that can be used now).
    case none
    /// Touch ID (a fingerprint reader on Linux).
    case touchID
    /// Face ID.
    case faceID
    /// Optic ID.
    case opticID

    /// Creates the type for LocalAuthentication's `LABiometryType` (unknown future types: ``none``).
    public init(_ type: LABiometryType) {
        // By raw value: Apple's LABiometryType is an open C enum, Linux's a Swift enum, and Apple's `.opticID`
        // needs iOS 17 / macOS 14 (above Keystone's deployment targets).
        switch type.rawValue {
        case LABiometryType.touchID.rawValue: self = .touchID
        case LABiometryType.faceID.rawValue: self = .faceID
        case 4: self = .opticID   // LABiometryType.opticID, kLABiometryTypeOpticID
        default: self = .none
        }
    }

    /// The name to show: “Touch ID”, “Face ID”, “Optic ID”, or “None”.
    public var displayName: String {
        switch self {
        case .none: return "None"
        case .touchID: return "Touch ID"
        case .faceID: return "Face ID"
        case .opticID: return "Optic ID"
        }
    }
}

// MARK: - Error

/// Why a biometric (or device-owner) authentication did not succeed: one ``Code`` per LocalAuthentication
/// outcome, with a message to show and whether asking again makes sense.
///
/// ```swift
/// do {
///     try await authenticator.authenticate(reason: "Unlock your vault")
/// } catch BiometricError.lockout {
///     // Offer the passcode (policy .biometricsOrPasscode) or the account password.
/// } catch BiometricError.notEnrolled {
///     // Explain how to set up Face ID or Touch ID in Settings.
/// } catch let error as BiometricError where error.isRecoverable {
///     // Let the user try again.
/// }
/// ```
///
/// Two errors are equal when their codes are; ``laErrorCode`` is not compared.
public struct BiometricError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: String, Sendable, Hashable, CaseIterable {
        /// No biometry on the device, or it is disabled (`LAError.biometryNotAvailable`; also the companion and
        /// accessory codes `companionNotAvailable`, `biometryNotPaired`, `biometryDisconnected`).
        case notAvailable
        /// Biometry is there but no identity is enrolled (`LAError.biometryNotEnrolled`).
        case notEnrolled
        /// Too many failed attempts: biometry is locked until the passcode is entered (`LAError.biometryLockout`).
        case lockout
        /// The user tapped Cancel (`LAError.userCancel`).
        case userCancel
        /// The user tapped the fallback button (`LAError.userFallback`): offer your own fallback.
        case userFallback
        /// The user did not authenticate (`LAError.authenticationFailed`).
        case authenticationFailed
        /// The app cancelled: `invalidate()`, or the task awaiting the evaluation was cancelled (`LAError.appCancel`).
        case appCancel
        /// The context was invalidated before the evaluation (`LAError.invalidContext`).
        case invalidContext
        /// No passcode is set on the device (`LAError.passcodeNotSet`).
        case passcodeNotSet
        /// The system cancelled, for example when another app came forward (`LAError.systemCancel`).
        case systemCancel
        /// A prompt was needed but interaction is not allowed (`LAError.notInteractive`).
        case notInteractive
        /// Any other failure (another `LAError` code, or an error that is not LocalAuthentication's).
        case failed
    }

    /// What went wrong.
    public let code: Code
    /// The `LAError` code (its raw value, such as -8 for `biometryLockout`) this error was made from; nil when it was
    /// not made from a LocalAuthentication error.
    public let laErrorCode: Int?

    /// An error with `code`, and optionally the `LAError` raw value it stands for.
    public init(_ code: Code, laErrorCode: Int? = nil) {
        self.code = code
        self.laErrorCode = laErrorCode
    }

    /// Converts any error: a `BiometricError` stays as is; an `LAError`, or an `NSError` in `LAErrorDomain`, becomes
    /// the matching code and keeps its raw value in ``laErrorCode``; anything else is ``Code/failed``.
    public init(_ error: any Error) {
        if let error = error as? BiometricError {
            self = error
        } else if let error = error as? LAError {
            self.init(laErrorCode: error.errorCode)
        } else {
            let error = error as NSError
            if error.domain == LAError.errorDomain {
                self.init(laErrorCode: error.code)
            } else {
                self.init(.failed)
            }
        }
    }

    /// The error for an `LAError` raw value.
    public init(laErrorCode: Int) {
        let code: Code
        switch laErrorCode {
        case LAError.Code.authenticationFailed.rawValue: code = .authenticationFailed
        case LAError.Code.userCancel.rawValue: code = .userCancel
        case LAError.Code.userFallback.rawValue: code = .userFallback
        case LAError.Code.systemCancel.rawValue: code = .systemCancel
        case LAError.Code.passcodeNotSet.rawValue: code = .passcodeNotSet
        case LAError.Code.biometryNotAvailable.rawValue: code = .notAvailable
        case LAError.Code.biometryNotEnrolled.rawValue: code = .notEnrolled
        case LAError.Code.biometryLockout.rawValue: code = .lockout
        case LAError.Code.appCancel.rawValue: code = .appCancel
        case LAError.Code.invalidContext.rawValue: code = .invalidContext
        case LAError.Code.notInteractive.rawValue: code = .notInteractive
        // companionNotAvailable (-11), biometryNotPaired (-12), biometryDisconnected (-13): the means of
        // authenticating is not there, as for biometryNotAvailable. By number: these codes are macOS-only or recent
        // in Apple's SDK.
        case -11, -12, -13: code = .notAvailable
        default: code = .failed
        }
        self.init(code, laErrorCode: laErrorCode)
    }

    /// A message for the user.
    public var message: String {
        switch code {
        case .notAvailable: return "Biometric authentication is not available on this device."
        case .notEnrolled: return "No biometric data is enrolled. Please set up Face ID or Touch ID in Settings."
        case .lockout:
            return "Biometric authentication is locked after too many failed attempts. Please enter your passcode to unlock it."
        case .userCancel: return "Authentication was cancelled."
        case .userFallback: return "You chose to enter your password instead."
        case .authenticationFailed: return "Biometric authentication failed. Please try again."
        case .appCancel: return "Authentication was cancelled by the app."
        case .invalidContext: return "The authentication session is no longer valid."
        case .passcodeNotSet: return "No device passcode is set. Please set up a passcode in Settings."
        case .systemCancel: return "Authentication was interrupted by the system. Please try again."
        case .notInteractive: return "Authentication needs your interaction, which is not possible right now."
        case .failed: return "Biometric authentication failed."
        }
    }

    /// Whether asking the user again, right away or once the app is active again, can succeed: true for
    /// ``Code/userCancel``, ``Code/userFallback``, ``Code/authenticationFailed`` and ``Code/systemCancel``.
    ///
    /// Decision: ``Code/systemCancel`` is recoverable. The system cancels when the app leaves the foreground or
    /// another prompt takes over; nothing is wrong with the device's setup, and the same request succeeds once the
    /// app is active again. The others need something else first: a setting (not available, not enrolled, passcode
    /// not set), the passcode (lockout), a new context (invalid context), or the app's own decision (app cancel,
    /// not interactive).
    public var isRecoverable: Bool {
        switch code {
        case .userCancel, .userFallback, .authenticationFailed, .systemCancel: return true
        case .notAvailable, .notEnrolled, .lockout, .appCancel, .invalidContext, .passcodeNotSet, .notInteractive, .failed:
            return false
        }
    }

    /// `BiometricError.lockout (LAError -8): <message>`.
    public var description: String {
        let native = laErrorCode.map { " (LAError \($0))" } ?? ""
        return "BiometricError.\(code.rawValue)\(native): \(message)"
    }

    /// Equal when the codes are equal; ``laErrorCode`` is ignored.
    public static func == (lhs: BiometricError, rhs: BiometricError) -> Bool { lhs.code == rhs.code }
    /// Hashes the code only, consistently with `==`.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// Matches an error against a `BiometricError` pattern, so `catch BiometricError.lockout` works.
    ///
    /// Matches a `BiometricError` with the same code only: convert LocalAuthentication's errors with
    /// ``init(_:)`` first (``BiometricAuthenticator`` throws converted errors).
    public static func ~= (lhs: BiometricError, rhs: any Error) -> Bool {
        (rhs as? BiometricError)?.code == lhs.code
    }

    // MARK: Named errors

    /// ``Code/notAvailable``.
    public static let notAvailable = BiometricError(.notAvailable)
    /// ``Code/notEnrolled``.
    public static let notEnrolled = BiometricError(.notEnrolled)
    /// ``Code/lockout``.
    public static let lockout = BiometricError(.lockout)
    /// ``Code/userCancel``.
    public static let userCancel = BiometricError(.userCancel)
    /// ``Code/userFallback``.
    public static let userFallback = BiometricError(.userFallback)
    /// ``Code/authenticationFailed``.
    public static let authenticationFailed = BiometricError(.authenticationFailed)
    /// ``Code/appCancel``.
    public static let appCancel = BiometricError(.appCancel)
    /// ``Code/invalidContext``.
    public static let invalidContext = BiometricError(.invalidContext)
    /// ``Code/passcodeNotSet``.
    public static let passcodeNotSet = BiometricError(.passcodeNotSet)
    /// ``Code/systemCancel``.
    public static let systemCancel = BiometricError(.systemCancel)
    /// ``Code/notInteractive``.
    public static let notInteractive = BiometricError(.notInteractive)
    /// ``Code/failed``.
    public static let failed = BiometricError(.failed)
}

extension BiometricError: LocalizedError {
    /// ``message``.
    public var errorDescription: String? { message }

    /// What the app can offer.
    public var recoverySuggestion: String? {
        switch code {
        case .notAvailable, .notEnrolled, .passcodeNotSet:
            return "Offer another way to sign in, and explain where to set up biometry or a passcode in Settings."
        case .lockout:
            return "Offer the device passcode (the biometrics-or-passcode policy) or your own sign-in."
        case .userCancel, .authenticationFailed, .systemCancel:
            return "Let the user try again."
        case .userFallback:
            return "Show your own fallback, such as the account password."
        case .appCancel, .notInteractive:
            return nil
        case .invalidContext:
            return "Create a new context and try again."
        case .failed:
            return "Offer another way to sign in."
        }
    }
}

// MARK: - Authenticator

/// Whether biometric authentication can be attempted now.
public enum BiometricAvailability: Sendable, Hashable {
    /// It can: the device has this biometry, enrolled.
    case available(BiometryType)
    /// It cannot, for this reason (not available, not enrolled, lockout, passcode not set…).
    case unavailable(BiometricError)

    /// Whether an authentication can be attempted.
    public var isAvailable: Bool {
        if case .available = self { return true }
        return false
    }
}

/// What a ``BiometricAuthenticator`` accepts.
public enum BiometricPolicy: Sendable, Hashable, CaseIterable {
    /// Biometry only (`LAPolicy.deviceOwnerAuthenticationWithBiometrics`): after a lockout it fails until the
    /// passcode is entered elsewhere, and the fallback button reports ``BiometricError/Code/userFallback``.
    case biometrics
    /// Biometry, or the device passcode (`LAPolicy.deviceOwnerAuthentication`): the system offers the passcode
    /// after failures and during a lockout.
    case biometricsOrPasscode

    /// LocalAuthentication's policy.
    public var laPolicy: LAPolicy {
        switch self {
        case .biometrics: return .deviceOwnerAuthenticationWithBiometrics
        case .biometricsOrPasscode: return .deviceOwnerAuthentication
        }
    }
}

/// Asks the person at the device to authenticate with biometry (Face ID, Touch ID, Optic ID; a fingerprint reader
/// on Linux), or the passcode, through LocalAuthentication.
///
/// ```swift
/// let biometrics = BiometricAuthenticator(policy: .biometrics, fallbackTitle: "Use Password")
/// guard case .available(let type) = biometrics.availability else { return showPasswordLogin() }
/// try await biometrics.authenticate(reason: "Unlock with \(type.displayName)")
/// ```
///
/// Every check and evaluation uses a fresh context from the factory (`LAContext()` by default), as Apple
/// recommends: a context that was evaluated or invalidated is not reused by accident. Tests pass a factory that
/// returns a scripted context (`KeystoneTesting`'s `ScriptedBiometricContext`).
///
/// - Important: An app-side authentication is a user-experience gate, not a security boundary: code running in
///   the app's process can skip it. Protect the secret itself with a keychain item's access control (for example
///   `AccessControlFlags.biometryCurrentSet`): the keychain then asks for the authentication before it releases
///   the secret, and nothing in the app can skip that.
public struct BiometricAuthenticator: Sendable {
    /// Makes the context for one check or evaluation.
    public typealias ContextFactory = @Sendable () -> any BiometricAuthenticationContext

    /// What is accepted: biometry only, or biometry or the passcode.
    public var policy: BiometricPolicy
    /// The prompt's Cancel button title; nil for the system's.
    public var cancelTitle: String?
    /// The prompt's fallback button title; nil for the system's (“Enter Password”), empty to hide the button.
    public var fallbackTitle: String?
    private let makeContext: ContextFactory

    /// Creates an authenticator.
    ///
    /// - Parameters:
    ///   - policy: biometry only (the default), or biometry or the passcode.
    ///   - cancelTitle: the Cancel button's title; nil for the system's.
    ///   - fallbackTitle: the fallback button's title; nil for the system's, empty to hide it.
    ///   - context: makes a fresh context for each check and evaluation. Default: `LAContext()`.
    public init(policy: BiometricPolicy = .biometrics, cancelTitle: String? = nil, fallbackTitle: String? = nil,
                context: @escaping ContextFactory = { LAContext() }) {
        self.policy = policy
        self.cancelTitle = cancelTitle
        self.fallbackTitle = fallbackTitle
        self.makeContext = context
    }

    /// Whether the policy can be evaluated now, and with which biometry. Asks no one (`canEvaluatePolicy`).
    public var availability: BiometricAvailability {
        let context = makeContext()
        var error: NSError?
        guard context.canEvaluatePolicy(policy.laPolicy, error: &error) else {
            return .unavailable(error.map { BiometricError($0) } ?? .notAvailable)
        }
        return .available(BiometryType(context.biometryType))
    }

    /// The device's biometry, ``BiometryType/none`` when the policy cannot be evaluated now (no biometry, none
    /// enrolled, lockout…).
    public var biometryType: BiometryType {
        if case .available(let type) = availability { return type }
        return .none
    }

    /// Asks the person to authenticate.
    ///
    /// Checks the policy first (`canEvaluatePolicy`) and, when it cannot be evaluated, throws without prompting.
    /// The evaluation waits for the person without holding a Swift concurrency thread (LocalAuthentication
    /// evaluates on its own thread). Cancelling the calling task invalidates the context: the prompt goes away and
    /// the call throws ``BiometricError/appCancel``.
    ///
    /// - Parameter reason: why the app asks, shown in the prompt (Touch ID, Linux) or for the passcode (Face ID
    ///   shows the Info.plist's `NSFaceIDUsageDescription` instead).
    /// - Throws: ``BiometricError``: before any prompt ``BiometricError/notAvailable``,
    ///   ``BiometricError/notEnrolled``, ``BiometricError/lockout``, ``BiometricError/passcodeNotSet`` or
    ///   ``BiometricError/invalidContext``; after one ``BiometricError/userCancel``,
    ///   ``BiometricError/userFallback``, ``BiometricError/authenticationFailed``, ``BiometricError/lockout``,
    ///   ``BiometricError/systemCancel``, ``BiometricError/appCancel`` (invalidated or task cancelled),
    ///   ``BiometricError/notInteractive``, or ``BiometricError/failed`` for anything else.
    public func authenticate(reason: String) async throws {
        let context = makeContext()
        if let cancelTitle { context.localizedCancelTitle = cancelTitle }
        if let fallbackTitle { context.localizedFallbackTitle = fallbackTitle }
        let laPolicy = policy.laPolicy
        var error: NSError?
        guard context.canEvaluatePolicy(laPolicy, error: &error) else {
            throw error.map { BiometricError($0) } ?? .notAvailable
        }
        if Task.isCancelled { throw BiometricError(.appCancel, laErrorCode: LAError.Code.appCancel.rawValue) }
        let handle = ContextHandle(context)
        do {
            let success = try await withTaskCancellationHandler {
                try await context.evaluatePolicy(laPolicy, localizedReason: reason)
            } onCancel: {
                handle.invalidate()
            }
            // LocalAuthentication reports failures by throwing; a false without an error is a failure all the same.
            guard success else { throw BiometricError(.authenticationFailed, laErrorCode: LAError.Code.authenticationFailed.rawValue) }
        } catch {
            let converted = BiometricError(error)
            // A cancellation that reached the context just before the evaluation started reports invalidContext.
            if converted.code == .invalidContext && Task.isCancelled {
                throw BiometricError(.appCancel, laErrorCode: LAError.Code.appCancel.rawValue)
            }
            throw converted
        }
    }

    /// The current enrolled-biometry state (`evaluatedPolicyDomainState` after a biometric `canEvaluatePolicy`);
    /// nil when biometry cannot be evaluated now (none, not enrolled, lockout).
    ///
    /// Save it after a successful authentication, and compare it later with ``enrollmentChanged(since:)``: a
    /// different state means a finger or face was added or removed, which is what makes
    /// `AccessControlFlags.biometryCurrentSet` items unreadable.
    public func domainState() -> Data? {
        let context = makeContext()
        var error: NSError?
        guard context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error) else { return nil }
        return context.evaluatedPolicyDomainState
    }

    /// Whether the enrolled biometry changed since `saved` (a ``domainState()`` kept earlier).
    ///
    /// - Returns: false when nothing was saved. When biometry can be evaluated: whether the state differs. When it
    ///   cannot: true if no identity is enrolled any more or the passcode was removed (which removes every
    ///   enrollment), false otherwise (lockout, biometry unavailable: the state cannot be read, which is no
    ///   evidence of a change).
    public func enrollmentChanged(since saved: Data?) -> Bool {
        guard let saved else { return false }
        let context = makeContext()
        var error: NSError?
        guard context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error) else {
            let code = error.map { BiometricError($0).code }
            return code == .notEnrolled || code == .passcodeNotSet
        }
        guard let current = context.evaluatedPolicyDomainState else { return false }
        return current != saved
    }
}

/// Lets the task-cancellation handler invalidate the context that the evaluation uses.
///
/// `@unchecked Sendable`: the only call made through it is `invalidate()`, which LocalAuthentication provides for
/// exactly this (cancelling an evaluation in progress from elsewhere); Keystone's LAContext and the scripted
/// context are thread-safe.
private struct ContextHandle: @unchecked Sendable {
    let context: any BiometricAuthenticationContext
    init(_ context: any BiometricAuthenticationContext) { self.context = context }
    func invalidate() { context.invalidate() }
}

#endif
