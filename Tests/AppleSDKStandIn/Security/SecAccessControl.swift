// Stand-in for SecAccessControl.h, with the types and signatures Apple's SDK gives Swift.
// Only compiled by Tests/AppleSDKStandIn/check.sh, never run.

/// `SecAccessControl`: a CoreFoundation class. Apple's SDK declares no Sendable conformance for it; the
/// stand-in has none either, the stricter assumption (code that compiles here compiles if it were Sendable).
public final class SecAccessControl {
    private init() {}
}

/// `SecAccessControlCreateFlags`: a `CF_OPTIONS` type over `CFOptionFlags`, with Apple's bits.
public struct SecAccessControlCreateFlags: OptionSet, Sendable {
    public let rawValue: CFOptionFlags
    public init(rawValue: CFOptionFlags) { self.rawValue = rawValue }

    public static var userPresence: SecAccessControlCreateFlags { .init(rawValue: 1 << 0) }
    public static var biometryAny: SecAccessControlCreateFlags { .init(rawValue: 1 << 1) }
    @available(*, deprecated, renamed: "biometryAny")
    public static var touchIDAny: SecAccessControlCreateFlags { .init(rawValue: 1 << 1) }
    public static var biometryCurrentSet: SecAccessControlCreateFlags { .init(rawValue: 1 << 3) }
    @available(*, deprecated, renamed: "biometryCurrentSet")
    public static var touchIDCurrentSet: SecAccessControlCreateFlags { .init(rawValue: 1 << 3) }
    public static var devicePasscode: SecAccessControlCreateFlags { .init(rawValue: 1 << 4) }
    public static var companion: SecAccessControlCreateFlags { .init(rawValue: 1 << 5) }
    public static var or: SecAccessControlCreateFlags { .init(rawValue: 1 << 14) }
    public static var and: SecAccessControlCreateFlags { .init(rawValue: 1 << 15) }
    public static var privateKeyUsage: SecAccessControlCreateFlags { .init(rawValue: 1 << 30) }
    public static var applicationPassword: SecAccessControlCreateFlags { .init(rawValue: 1 << 31) }
}

/// Creates an access control object from a protection class (a `kSecAttrAccessible…` value) and flags.
public func SecAccessControlCreateWithFlags(_ allocator: CFAllocator?, _ protection: CFTypeRef,
                                            _ flags: SecAccessControlCreateFlags,
                                            _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> SecAccessControl? {
    standIn()
}

/// `SecAccessControlGetTypeID`: the CoreFoundation type of `SecAccessControl` objects.
public func SecAccessControlGetTypeID() -> CFTypeID { standIn() }
