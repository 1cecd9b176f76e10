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

/// The kind of biometry a device has.
public enum LABiometryType: Int, Sendable {
    case none = 0
    case touchID = 1
    case faceID = 2
    case opticID = 4
}

/// The longest reuse window Apple allows, in seconds.
public let LATouchIDAuthenticationMaximumAllowableReuseDuration: TimeInterval = 300

/// An authentication failure, with LocalAuthentication's codes.
public struct LAError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: Int, Sendable {
        case authenticationFailed = -1
        case userCancel = -2
        case userFallback = -3
        case systemCancel = -4
        case passcodeNotSet = -5
        case biometryNotAvailable = -6
        case biometryNotEnrolled = -7
        case biometryLockout = -8
        case appCancel = -9
        case invalidContext = -10
        case notInteractive = -1004
    }

    public static let errorDomain = "com.apple.LocalAuthentication"
    public let code: Code

    public init(_ code: Code) { self.code = code }

    public static var authenticationFailed: Code { .authenticationFailed }
    public static var userCancel: Code { .userCancel }
    public static var userFallback: Code { .userFallback }
    public static var systemCancel: Code { .systemCancel }
    public static var passcodeNotSet: Code { .passcodeNotSet }
    public static var biometryNotAvailable: Code { .biometryNotAvailable }
    public static var biometryNotEnrolled: Code { .biometryNotEnrolled }
    public static var biometryLockout: Code { .biometryLockout }
    public static var appCancel: Code { .appCancel }
    public static var invalidContext: Code { .invalidContext }
    public static var notInteractive: Code { .notInteractive }

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

    public override init() { super.init() }

    /// Seconds during which a successful device unlock or evaluation is reused (at most 300).
    public var touchIDAuthenticationAllowableReuseDuration: TimeInterval {
        get { context.reuseDuration }
        set { context.reuseDuration = newValue }
    }

    /// When true, operations that would prompt fail instead.
    public var interactionNotAllowed: Bool {
        get { context.interactionNotAllowed }
        set { context.interactionNotAllowed = newValue }
    }

    public var localizedReason: String {
        get { texts.current.reason }
        set { texts.withLock { $0.reason = newValue } }
    }

    public var localizedCancelTitle: String? {
        get { texts.current.cancel }
        set { texts.withLock { $0.cancel = newValue } }
    }

    public var localizedFallbackTitle: String? {
        get { texts.current.fallback }
        set { texts.withLock { $0.fallback = newValue } }
    }

    /// The biometry the default keychain's device has: none on this platform.
    public var biometryType: LABiometryType { .none }

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
    public func evaluatePolicy(_ policy: LAPolicy, localizedReason: String, reply: @escaping @Sendable (Bool, (any Error)?) -> Void) {
        let result = evaluate(policy, reason: localizedReason)
        reply(result == nil, result)
    }

    /// Asks the default keychain engine's authenticator; a success is recorded on this context.
    ///
    /// - Throws: ``LAError`` with the outcome's code.
    public func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool {
        if let error = evaluate(policy, reason: localizedReason) { throw error }
        return true
    }

    private func evaluate(_ policy: LAPolicy, reason: String) -> LAError? {
        if context.isInvalidated { return LAError(.invalidContext) }
        if context.interactionNotAllowed { return LAError(.notInteractive) }
        guard let engine = try? KeychainServicesDefaults.currentEngine() else { return LAError(.systemCancel) }
        let flags: AccessControlFlags = policy == .deviceOwnerAuthenticationWithBiometrics ? .biometryAny : .userPresence
        let outcome = engine.authenticator.authenticate(
            AuthenticationRequest(itemClass: .genericPassword, flags: flags, operationPrompt: reason, operation: "evaluatePolicy"))
        switch outcome {
        case .success:
            context.recordSuccess(at: engine.configuration.now())
            return nil
        case .userCancel: return LAError(.userCancel)
        case .failed: return LAError(.authenticationFailed)
        case .notAvailable: return LAError(policy == .deviceOwnerAuthenticationWithBiometrics ? .biometryNotAvailable : .passcodeNotSet)
        case .lockout: return LAError(.biometryLockout)
        }
    }

    /// Invalidates the context: later uses fail.
    public func invalidate() { context.invalidate() }
}
#endif
