// Stand-in for the LocalAuthentication framework's Swift interface (LAContext.h, LAError.h), with Apple's
// types and signatures: `LAContext` is an `NSObject` subclass without a Sendable conformance.
// Only compiled by Tests/AppleSDKStandIn/check.sh, never run: bodies are placeholders.
@_exported import Foundation  // as the framework does: its header imports Foundation

/// Foundation's `NSErrorPointer` on Apple platforms is an autoreleasing pointer, which Linux does not have;
/// `&error` on an `NSError?` variable converts to either.
public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?

/// `LAPolicy`, an `NS_ENUM` over `NSInteger`: the policies every platform with `LAContext` has.
public enum LAPolicy: Int, Sendable {
    case deviceOwnerAuthenticationWithBiometrics = 1
    case deviceOwnerAuthentication = 2
}

/// `LABiometryType`.
public enum LABiometryType: Int, Sendable {
    case none = 0
    @available(*, deprecated, renamed: "none")
    public static var typeNone: LABiometryType { .none }
    case touchID = 1
    case faceID = 2
    case opticID = 4
}

/// `LAError`: the Swift error struct Apple's SDK bridges `LAErrorDomain` errors to.
public struct LAError: CustomNSError, Hashable, Error {
    /// `LAError.Code`.
    public enum Code: Int, Sendable, Equatable {
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

    public init(_ code: Code, userInfo: [String: Any] = [:]) { standIn() }
    public static var errorDomain: String { standIn() }
    public var code: Code { standIn() }
    public var errorCode: Int { standIn() }
    public static func == (lhs: LAError, rhs: LAError) -> Bool { standIn() }
    public func hash(into hasher: inout Hasher) { standIn() }

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
}

/// `catch LAError.userCancel`, as Foundation provides for bridged error codes on Apple platforms.
public func ~= (code: LAError.Code, error: any Error) -> Bool { standIn() }

/// `LAContext`.
open class LAContext: NSObject {
    public override init() { standIn() }

    /// iOS, macOS and visionOS only.
    open var touchIDAuthenticationAllowableReuseDuration: TimeInterval {
        get { standIn() }
        set { standIn() }
    }

    /// iOS, macOS and visionOS only.
    open var interactionNotAllowed: Bool {
        get { standIn() }
        set { standIn() }
    }

    open var localizedReason: String {
        get { standIn() }
        set { standIn() }
    }

    open var localizedCancelTitle: String? {
        get { standIn() }
        set { standIn() }
    }

    open var localizedFallbackTitle: String? {
        get { standIn() }
        set { standIn() }
    }

    open var biometryType: LABiometryType { standIn() }

    /// iOS 9, macOS 10.11 (Apple marks it API_TO_BE_DEPRECATED in favour of `domainState`: no warning).
    open var evaluatedPolicyDomainState: Data? { standIn() }

    open func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool { standIn() }

    open func evaluatePolicy(_ policy: LAPolicy, localizedReason: String,
                             reply: @escaping @Sendable (Bool, (any Error)?) -> Void) { standIn() }

    open func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool { standIn() }

    open func invalidate() { standIn() }
}

/// The longest reuse window Apple allows, in seconds.
public var LATouchIDAuthenticationMaximumAllowableReuseDuration: TimeInterval { standIn() }

func standIn(_ function: StaticString = #function) -> Never {
    fatalError("\(function): the Apple SDK stand-in is for compiling only")
}
