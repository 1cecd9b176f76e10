#if !canImport(Darwin)
import Foundation
import KeychainEngine

// LocalAuthentication's types on Linux: policies, biometry types, credentials, access-control operations and
// LAError. LAContext, which uses them, is in LocalAuthentication.swift.

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
#endif
