import Foundation

/// The attributes of one item, read without its secret.
public struct ItemAttributes: Sendable, Hashable {
    /// The item's class.
    public var itemClass: ItemClass
    /// The account (`acct`).
    public var account: String
    /// The service (`svce`), for generic passwords.
    public var service: String?
    /// The server (`srvr`), for internet passwords.
    public var server: String?
    /// The access group (`agrp`).
    public var accessGroup: String?
    /// The label (`labl`).
    public var label: String?
    /// The comment (`icmt`).
    public var comment: String?
    /// When the item was added (`cdat`).
    public var creationDate: Date?
    /// When the item last changed (`mdat`).
    public var modificationDate: Date?
    /// The accessibility (`pdmn`).
    public var accessibility: Accessibility?
    /// Whether the item synchronizes (`sync`).
    public var synchronizable: Bool
    /// Whether the item was given an access control with flags (`kSecAttrAccessControl` with
    /// `.userPresence`, `.biometryAny`, `.privateKeyUsage` …): reading its secret may need the user.
    ///
    /// ``SystemKeychain`` reports it on Apple platforms and on Linux, as engine-backed stores such as
    /// `InMemoryKeychain` do. Every item's attributes carry an access control (`accc`): for an item added
    /// with only `kSecAttrAccessible`, it is that protection class with no flags, as on Apple's keychain.
    /// Such an item reports false here.
    ///
    /// - Important: On Apple platforms the flags themselves cannot be read with public API: an access control
    ///   that is more than its protection class reports true, whatever its flags.
    public var hasAccessControl: Bool

    /// Reads the attributes out of an attributes dictionary (`kSecReturnAttributes`); ignores `v_Data`.
    public init(_ attributes: KeychainQuery) {
        itemClass = attributes[Key.class]?.stringValue.flatMap(ItemClass.init(rawValue:)) ?? .genericPassword
        // Account, service, server, label and comment may have been given as String or Data (SecItem code
        // does both): either reads as text here.
        account = attributes[Key.account]?.textValue ?? ""
        service = attributes[Key.service]?.textValue
        server = attributes[Key.server]?.textValue
        accessGroup = attributes[Key.accessGroup]?.stringValue
        label = attributes[Key.label]?.textValue
        comment = attributes[Key.comment]?.textValue
        if case .date(let d)? = attributes[Key.creationDate] { creationDate = d } else { creationDate = nil }
        if case .date(let d)? = attributes[Key.modificationDate] { modificationDate = d } else { modificationDate = nil }
        accessibility = attributes[Key.accessible]?.stringValue.flatMap(Accessibility.init(rawValue:))
        synchronizable = attributes[Key.synchronizable]?.boolValue ?? false
        switch attributes[Key.accessControl] {
        case .accessControl(let control)?: hasAccessControl = !control.flags.isEmpty
        // SystemKeychain on Apple platforms: an access control with constraints whose flags public API cannot read.
        case .bool(let constrained)?: hasAccessControl = constrained
        default: hasAccessControl = false
        }
    }
}
