#if !canImport(Darwin)
import Foundation
import KeychainEngine

/// The authentication an item's secret needs, with Apple's raw values.
public struct SecAccessControlCreateFlags: OptionSet, Sendable, Hashable {
    /// The bits, as Apple's `SecAccessControlCreateFlags`.
    public let rawValue: UInt
    /// Flags from their raw bits.
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// Biometry or the device passcode.
    public static let userPresence = SecAccessControlCreateFlags(rawValue: 1 << 0)
    /// Any enrolled biometry; the item survives enrollment changes.
    public static let biometryAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    /// Deprecated name of ``biometryAny``.
    @available(*, deprecated, renamed: "biometryAny")
    public static let touchIDAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    /// The biometry enrolled now; the item becomes unreadable when the enrollment changes.
    public static let biometryCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    /// Deprecated name of ``biometryCurrentSet``.
    @available(*, deprecated, renamed: "biometryCurrentSet")
    public static let touchIDCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    /// The device passcode.
    public static let devicePasscode = SecAccessControlCreateFlags(rawValue: 1 << 4)
    /// A paired watch (deprecated by Apple in favour of ``companion``).
    public static let watch = SecAccessControlCreateFlags(rawValue: 1 << 5)
    /// A paired companion device.
    public static let companion = SecAccessControlCreateFlags(rawValue: 1 << 5)
    /// Any one of the listed constraints suffices.
    public static let or = SecAccessControlCreateFlags(rawValue: 1 << 14)
    /// Every listed constraint is needed.
    public static let and = SecAccessControlCreateFlags(rawValue: 1 << 15)
    /// The constraint applies to private-key operations (Secure Enclave keys).
    public static let privateKeyUsage = SecAccessControlCreateFlags(rawValue: 1 << 30)
    /// An application-provided password is also needed.
    public static let applicationPassword = SecAccessControlCreateFlags(rawValue: 1 << 31)
}

/// An access control object (`kSecAttrAccessControl`): an accessibility and the authentication the secret needs.
public final class SecAccessControl: NSObject, Sendable {
    /// The engine's value for this access control.
    public let accessControl: AccessControl

    /// Wraps an engine access control (``SecAccessControlCreateWithFlags(_:_:_:_:)`` is the Apple-style way).
    public init(_ accessControl: AccessControl) {
        self.accessControl = accessControl
    }

    /// Equal when protection and flags are equal.
    public override func isEqual(_ object: Any?) -> Bool {
        (object as? SecAccessControl)?.accessControl == accessControl
    }

    /// A hash of protection and flags.
    public override var hash: Int { accessControl.hashValue }

    /// The protection and flags, for debugging.
    public override var description: String {
        "<SecAccessControl protection: \(accessControl.accessibility.rawValue), flags: 0x\(String(accessControl.flags.rawValue, radix: 16))>"
    }
}

/// Creates an access control from a protection class (`kSecAttrAccessible…`) and flags.
///
/// `protection` is `Any` here (Apple: `CFTypeRef`) because the accessibility constants are Swift strings on this platform.
///
/// - Returns: nil, with `error` set (errSecParam), when `protection` is not one of the accessibility constants.
public func SecAccessControlCreateWithFlags(_ allocator: CFAllocator?, _ protection: Any,
                                            _ flags: SecAccessControlCreateFlags,
                                            _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> SecAccessControl? {
    guard let raw = (protection as? String), let accessibility = Accessibility(rawValue: raw) else {
        error?.pointee = Unmanaged.passRetained(NSError(domain: "NSOSStatusErrorDomain", code: Int(Status.param),
                                                        userInfo: [NSLocalizedDescriptionKey: "invalid protection class for an access control"]))
        return nil
    }
    return SecAccessControl(AccessControl(accessibility: accessibility, flags: AccessControlFlags(rawValue: flags.rawValue)))
}
#endif
