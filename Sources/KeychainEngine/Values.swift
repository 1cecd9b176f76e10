import Foundation

/// The five keychain item classes, each a table with its own primary key.
///
/// The raw values are Apple's `kSecClass*` strings.
public enum ItemClass: String, Sendable, CaseIterable, Hashable, Codable {
    /// `kSecClassGenericPassword` (`genp`): primary key service + account + access group + synchronizable.
    case genericPassword = "genp"
    /// `kSecClassInternetPassword` (`inet`): primary key server, account, protocol, port, path,
    /// security domain, authentication type, access group, synchronizable.
    case internetPassword = "inet"
    /// `kSecClassCertificate` (`cert`): primary key certificate type, issuer, serial number, access group, synchronizable.
    case certificate = "cert"
    /// `kSecClassKey` (`keys`).
    case key = "keys"
    /// `kSecClassIdentity` (`idnt`). Keystone stores an identity as one row keyed like a certificate.
    case identity = "idnt"

    /// The four-byte tag used in persistent references.
    var tag: [UInt8] { Array(rawValue.utf8) }
}

/// When an item's secret is available, Apple's `kSecAttrAccessible*` values.
public enum Accessibility: String, Sendable, CaseIterable, Hashable, Codable {
    /// `ak`: only while the keychain (device) is unlocked. The default.
    case whenUnlocked = "ak"
    /// `ck`: after the first unlock, until restart, even when locked again.
    case afterFirstUnlock = "ck"
    /// `dk`: always (deprecated by Apple).
    case always = "dk"
    /// `aku`: as ``whenUnlocked``, never migrated to another device.
    case whenUnlockedThisDeviceOnly = "aku"
    /// `cku`: as ``afterFirstUnlock``, never migrated to another device.
    case afterFirstUnlockThisDeviceOnly = "cku"
    /// `dku`: as ``always``, never migrated to another device (deprecated by Apple).
    case alwaysThisDeviceOnly = "dku"
    /// `akpu`: only while unlocked and only while a passcode is set; never migrated.
    case whenPasscodeSetThisDeviceOnly = "akpu"

    /// Whether the secret of an item with this accessibility can be used in `state`: the one rule every storage
    /// follows (the engine, memory, the keychain file, etcd, the Secret Service).
    ///
    /// - `unlocked`: every item.
    /// - `lockedAfterFirstUnlock`: `afterFirstUnlock*` and `always*` items, as a device locked again after its first
    ///   unlock serves them.
    /// - `locked` (never unlocked since start, or locked explicitly as `security lock-keychain` does): no item.
    ///
    /// Decision: `always*` items are not served before the first unlock. Apple's class D key is protected by the
    /// device's hardware key alone; no Keystone storage holds a key that opens without the keychain's password (or
    /// its TPM seal), so an `always*` item is kept as an `afterFirstUnlock*` one is, the class Apple recommends in
    /// its place since deprecating `kSecAttrAccessibleAlways` (iOS 12).
    public func isAvailable(in state: LockState) -> Bool {
        switch (self, state) {
        case (_, .unlocked): return true
        case (_, .locked): return false
        case (.afterFirstUnlock, .lockedAfterFirstUnlock), (.afterFirstUnlockThisDeviceOnly, .lockedAfterFirstUnlock),
             (.always, .lockedAfterFirstUnlock), (.alwaysThisDeviceOnly, .lockedAfterFirstUnlock): return true
        case (_, .lockedAfterFirstUnlock): return false
        }
    }

    /// Whether items with this accessibility may leave the device (synchronize, back up).
    public var isThisDeviceOnly: Bool {
        switch self {
        case .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly, .whenPasscodeSetThisDeviceOnly: return true
        default: return false
        }
    }
}

/// The lock state of a keychain, which decides which accessibility classes are available.
public enum LockState: String, Sendable, Hashable, CaseIterable, Codable {
    /// Locked: never unlocked since start, or locked explicitly (`lock()`, `security lock-keychain`): no item is
    /// available.
    case locked
    /// Unlocked: everything is available.
    case unlocked
    /// Locked again after a first unlock: `afterFirstUnlock` and `always` items stay available.
    case lockedAfterFirstUnlock
}

/// The flags of an access control, with Apple's `SecAccessControlCreateFlags` raw values.
public struct AccessControlFlags: OptionSet, Sendable, Hashable, Codable {
    /// The flags' bits, as Apple's `SecAccessControlCreateFlags`.
    public let rawValue: UInt
    /// Flags from Apple's bits.
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// Biometry or the device passcode.
    public static let userPresence = AccessControlFlags(rawValue: 1 << 0)
    /// Any enrolled biometry; survives enrollment changes.
    public static let biometryAny = AccessControlFlags(rawValue: 1 << 1)
    /// The biometry enrolled when the item was added; invalidated when the enrollment changes.
    public static let biometryCurrentSet = AccessControlFlags(rawValue: 1 << 3)
    /// The device passcode.
    public static let devicePasscode = AccessControlFlags(rawValue: 1 << 4)
    /// A paired watch (Apple) or companion device.
    public static let watch = AccessControlFlags(rawValue: 1 << 5)
    /// Any one of the constraints suffices.
    public static let or = AccessControlFlags(rawValue: 1 << 14)
    /// Every constraint is required.
    public static let and = AccessControlFlags(rawValue: 1 << 15)
    /// Private-key operations (Secure Enclave keys); does not gate reading a password.
    public static let privateKeyUsage = AccessControlFlags(rawValue: 1 << 30)
    /// An application-supplied password.
    public static let applicationPassword = AccessControlFlags(rawValue: 1 << 31)

    /// The flags that make reading or changing the secret require an authentication.
    public static let authenticationFlags: AccessControlFlags = [.userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .watch, .applicationPassword]

    /// Whether reading the secret of an item with these flags needs an authentication.
    public var requiresAuthentication: Bool { !intersection(.authenticationFlags).isEmpty }

    /// Whether these flags involve biometry.
    package var involvesBiometry: Bool { contains(.biometryAny) || contains(.biometryCurrentSet) || contains(.userPresence) }
}

/// An access control: an accessibility plus the authentication its secret needs (`kSecAttrAccessControl`).
public struct AccessControl: Sendable, Hashable, Codable {
    /// When the item is available at all.
    public var accessibility: Accessibility
    /// What authentication reading the secret needs.
    public var flags: AccessControlFlags

    /// An access control (`SecAccessControlCreateWithFlags`).
    public init(accessibility: Accessibility, flags: AccessControlFlags) {
        self.accessibility = accessibility
        self.flags = flags
    }
}

/// A stored attribute value, typed. The values of a keychain row.
///
/// A row keeps the type each value was given (a String account stays a String, a Data account stays Data),
/// but equality follows the keychain's matching rule rather than Swift's:
///
/// - A string and a data value are equal when the string's UTF-8 bytes are the data, and two strings are
///   equal when their UTF-8 bytes are (no Unicode normalisation: `"é"` precomposed and decomposed differ).
///   Apple's keychain compares the attributes that can hold either type (see ``AttributeType/blob``) by the
///   SHA-1 digest of those bytes (SecDbItem.c, `SecDbAttrBind` with `copyData`), so a query with
///   `kSecAttrAccount` as Data finds an item added with the same account as a String, and the two collide
///   as primary keys.
/// - Other values are equal when their type and value are. Hashing agrees with this equality.
///
/// Use `case` patterns (`if case .data(let d) = value`) to tell a string from data.
public enum AttributeValue: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Text.
    case string(String)
    /// Bytes.
    case data(Data)
    /// An integer.
    case number(Int64)
    /// A Boolean.
    case bool(Bool)
    /// A date.
    case date(Date)

    public static func == (lhs: AttributeValue, rhs: AttributeValue) -> Bool {
        switch (lhs, rhs) {
        case (.string(let a), .string(let b)): return Self.sameBytes(a, b)
        case (.data(let a), .data(let b)): return a == b
        case (.string(let s), .data(let d)), (.data(let d), .string(let s)):
            return s.utf8.count == d.count && d.withUnsafeBytes { y in
                s.utf8.withContiguousStorageIfAvailable { x in d.isEmpty || memcmp(x.baseAddress!, y.baseAddress!, d.count) == 0 }
            } ?? s.utf8.elementsEqual(d)
        case (.number(let a), .number(let b)): return a == b
        case (.bool(let a), .bool(let b)): return a == b
        case (.date(let a), .date(let b)): return a == b
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .string(let s):
            // Strings and data hash alike: their bytes, then their length.
            hasher.combine(0 as UInt8)
            if s.utf8.withContiguousStorageIfAvailable({ hasher.combine(bytes: UnsafeRawBufferPointer($0)) }) == nil {
                var copy = s
                copy.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
            }
            hasher.combine(s.utf8.count)
        case .data(let d):
            hasher.combine(0 as UInt8)
            d.withUnsafeBytes { hasher.combine(bytes: $0) }
            hasher.combine(d.count)
        case .number(let n): hasher.combine(1 as UInt8); hasher.combine(n)
        case .bool(let b): hasher.combine(2 as UInt8); hasher.combine(b)
        case .date(let d): hasher.combine(3 as UInt8); hasher.combine(d)
        }
    }

    private static func sameBytes(_ a: String, _ b: String) -> Bool {
        let count = a.utf8.count
        guard count == b.utf8.count else { return false }
        if let same = a.utf8.withContiguousStorageIfAvailable({ x in
            b.utf8.withContiguousStorageIfAvailable { y in count == 0 || memcmp(x.baseAddress!, y.baseAddress!, count) == 0 }
        }), let same { return same }
        return a.utf8.elementsEqual(b.utf8)
    }

    /// The bytes a string or data value is compared by (a string's UTF-8), or nil for other values.
    package var matchBytes: Data? {
        switch self {
        case .string(let s): return Data(s.utf8)
        case .data(let d): return d
        default: return nil
        }
    }

    /// The value for logs: a string quoted, data as its length only (never its bytes).
    public var description: String {
        switch self {
        case .string(let s): return "\"\(s)\""
        case .data(let d): return "<\(d.count) bytes>"
        case .number(let n): return String(n)
        case .bool(let b): return String(b)
        case .date(let d): return d.description
        }
    }

    /// The string, if this is one.
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    /// The text of a string, or of data holding UTF-8: what an attribute that may hold either
    /// (``AttributeType/blob``: account, service, label…) says, whichever type it was given as.
    public var textValue: String? {
        switch self {
        case .string(let s): return s
        case .data(let d): return String(data: d, encoding: .utf8)
        default: return nil
        }
    }
    /// The integer, if this is a number (or a Boolean as 0/1).
    public var numberValue: Int64? {
        switch self {
        case .number(let n): return n
        case .bool(let b): return b ? 1 : 0
        default: return nil
        }
    }
    /// The Boolean, if this is one (or a number: non-zero is true).
    public var boolValue: Bool? {
        switch self {
        case .bool(let b): return b
        case .number(let n): return n != 0
        default: return nil
        }
    }
    /// The bytes, if this is data.
    public var dataValue: Data? { if case .data(let d) = self { return d } else { return nil } }
    /// The date, if this is one.
    public var dateValue: Date? { if case .date(let d) = self { return d } else { return nil } }
}

/// A value in a SecItem dictionary as the engine receives it: an attribute value, or one of the
/// non-attribute values queries carry (access control, authentication context).
///
/// `KeychainServices` turns the `Any` values of an Apple-style `[String: Any]` dictionary into these.
public enum KeychainValue: Sendable, Hashable {
    /// Text.
    case string(String)
    /// Bytes (a secret in `v_Data`, a persistent reference, a blob attribute).
    case data(Data)
    /// An integer.
    case number(Int64)
    /// A floating-point number (as a `CFNumber` can be).
    case double(Double)
    /// A Boolean.
    case bool(Bool)
    /// A date.
    case date(Date)
    /// `kSecAttrAccessControl`.
    case accessControl(AccessControl)
    /// `kSecUseAuthenticationContext`.
    case authenticationContext(AuthenticationContext)

    /// Wraps a stored attribute value.
    public init(_ value: AttributeValue) {
        switch value {
        case .string(let s): self = .string(s)
        case .data(let d): self = .data(d)
        case .number(let n): self = .number(n)
        case .bool(let b): self = .bool(b)
        case .date(let d): self = .date(d)
        }
    }

    /// The string, if this is one.
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    /// The text of a string, or of data holding UTF-8 (see ``AttributeValue/textValue``).
    public var textValue: String? {
        switch self {
        case .string(let s): return s
        case .data(let d): return String(data: d, encoding: .utf8)
        default: return nil
        }
    }
    /// The bytes, if this is data.
    public var dataValue: Data? { if case .data(let d) = self { return d } else { return nil } }
    /// The Boolean, if this is a Boolean or a number.
    public var boolValue: Bool? {
        switch self {
        case .bool(let b): return b
        case .number(let n): return n != 0
        case .double(let d): return d != 0
        default: return nil
        }
    }
    /// The integer, if this is an integral number or a Boolean.
    public var integerValue: Int64? {
        switch self {
        case .number(let n): return n
        case .bool(let b): return b ? 1 : 0
        case .double(let d): return d.rounded() == d && abs(d) < 9.2e18 ? Int64(d) : nil
        default: return nil
        }
    }
}

/// A SecItem dictionary in typed form: the keys are Apple's raw key strings (`"class"`, `"svce"`, `"r_Data"` …).
public typealias KeychainQuery = [String: KeychainValue]

/// What a copy (or an add with return keys) hands back, in Apple's result shapes.
public indirect enum ItemResult: Sendable, Hashable {
    /// A bare value: the secret (`kSecReturnData` alone) or a persistent reference (`kSecReturnPersistentRef` alone).
    case data(Data)
    /// A dictionary: `kSecReturnAttributes`, or several return keys. Holds `v_Data` when data was asked.
    case attributes(KeychainQuery)
    /// Several results: match limit above one or All, even with one match.
    case array([ItemResult])

    /// The bytes, if this is a bare value.
    public var data: Data? { if case .data(let d) = self { return d } else { return nil } }
    /// The dictionary, if this is one.
    public var attributes: KeychainQuery? { if case .attributes(let a) = self { return a } else { return nil } }
    /// The elements, if this is an array.
    public var array: [ItemResult]? { if case .array(let a) = self { return a } else { return nil } }
}
