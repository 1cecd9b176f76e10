import Foundation

/// How ``Keychain`` stores items: accessibility, synchronization, access group, access control, label, comment.
///
/// ```swift
/// var options = ItemOptions(accessibility: .afterFirstUnlockThisDeviceOnly)
/// options.label = "API token"
/// let keychain = Keychain(options: options)
/// ```
///
/// See <doc:ChoosingAccessibility> for which accessibility to pick.
public struct ItemOptions: Sendable, Hashable {
    /// When the secret is available (`kSecAttrAccessible`). Default: `Accessibility.whenUnlocked`,
    /// Apple's default. With ``accessControlFlags``, this is the access control's protection class.
    public var accessibility: Accessibility
    /// Whether the item synchronizes through iCloud Keychain (`kSecAttrSynchronizable`). Default false.
    ///
    /// Synchronizable is part of an item's identity: a synchronizable and a local item with the same
    /// service and account are two items. With a `ThisDeviceOnly` accessibility the item is accepted and
    /// reads back as synchronizable, as on Apple's keychain, but it never leaves the device.
    public var synchronizable: Bool
    /// The access group for items that do not name one (`kSecAttrAccessGroup`); nil for the app's default.
    ///
    /// - Important: Naming a group the app is not entitled to fails with `errSecMissingEntitlement` (-34018).
    public var accessGroup: String?
    /// An access control (`kSecAttrAccessControl`): the authentication reading the secret needs
    /// (`.biometryCurrentSet`, `.userPresence`, `.devicePasscode` …). nil for none.
    ///
    /// - Important: On a simulator, biometric access control is not enforced: the secret comes back
    ///   without a prompt. Test the prompt paths on a device or with `InMemoryKeychain(profile: .device)`.
    public var accessControlFlags: AccessControlFlags?
    /// A user-visible label (`kSecAttrLabel`). nil leaves it unset (and unchanged by updates).
    public var label: String?
    /// A comment (`kSecAttrComment`). nil leaves it unset (and unchanged by updates).
    public var comment: String?

    /// Creates options; every parameter has Apple's default.
    public init(accessibility: Accessibility = .whenUnlocked, synchronizable: Bool = false, accessGroup: String? = nil,
                accessControlFlags: AccessControlFlags? = nil, label: String? = nil, comment: String? = nil) {
        self.accessibility = accessibility
        self.synchronizable = synchronizable
        self.accessGroup = accessGroup
        self.accessControlFlags = accessControlFlags
        self.label = label
        self.comment = comment
    }

    /// The access control these options describe, if any.
    public var accessControl: AccessControl? {
        accessControlFlags.map { AccessControl(accessibility: accessibility, flags: $0) }
    }
}

/// How ``Keychain`` authenticates reads of access-controlled items.
///
/// ```swift
/// let auth = AuthenticationOptions(prompt: "Unlock your account", reuseDuration: 10)
/// let keychain = Keychain(options: ItemOptions(accessControlFlags: .biometryCurrentSet), authentication: auth)
/// ```
public struct AuthenticationOptions: Sendable {
    /// The text the system prompt shows (`kSecUseOperationPrompt`). nil for the system's default.
    public var prompt: String?
    /// Seconds during which one successful authentication covers later reads through the same
    /// ``Keychain`` (LAContext's `touchIDAuthenticationAllowableReuseDuration`, at most 300). 0: every
    /// read of a protected secret prompts.
    public var reuseDuration: TimeInterval
    /// Whether a read may show a prompt. False turns a needed prompt into `errSecInteractionNotAllowed`
    /// (LAContext's `interactionNotAllowed`), for background work.
    public var allowsInteraction: Bool
    /// A context to share between several ``Keychain`` values (`kSecUseAuthenticationContext`); nil lets
    /// the keychain create one when ``reuseDuration`` or ``allowsInteraction`` needs it.
    public var context: AuthenticationContext?

    /// Creates authentication options.
    public init(prompt: String? = nil, reuseDuration: TimeInterval = 0, allowsInteraction: Bool = true,
                context: AuthenticationContext? = nil) {
        self.prompt = prompt
        self.reuseDuration = reuseDuration
        self.allowsInteraction = allowsInteraction
        self.context = context
    }
}

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
