import Foundation

// Decision (issue 26 item 4): an item's identity never depends on per-call options. The attributes that are part of an
// item's primary key, the access group (`agrp`) and synchronizable (`sync`), come from the item value when it names
// them (`GenericPassword(service:account:accessGroup:synchronizable:)`) and otherwise from the keychain's own
// ``ItemOptions``, never from what one call passes: save, read, update, delete, attributes and existence of one item
// value on one `Keychain` all address the same item. What a single save may change is ``SaveOptions``, which has no
// identity attribute, so the mismatch cannot be written. The former per-call `ItemOptions` overloads stay, deprecated,
// and refuse (errSecParam, nothing written) options whose access group or synchronizable differ from the keychain's.
// Valet fixes identity the same way (an identifier, a shared group and the iCloud flavour chosen once, when the Valet
// is made, no per-call options); KeychainAccess keeps service, group and synchronizable on the `Keychain` value.

/// A keychain's configuration: which items it addresses by default (access group, synchronizable) and how it stores
/// them (accessibility, access control, label, comment).
///
/// ```swift
/// var options = ItemOptions(accessibility: .afterFirstUnlockThisDeviceOnly)
/// options.label = "API token"
/// let keychain = Keychain(options: options)
/// ```
///
/// ``accessGroup`` and ``synchronizable`` are part of an item's identity: they apply to every item of the keychain
/// that does not name its own (``GenericPassword/accessGroup``, `GenericPassword.synchronizable`), identically for
/// save, read, update and delete. To save one item with other attributes, pass ``SaveOptions``; to address items in
/// another group or synchronized, name it on the item or use another `Keychain`.
///
/// See <doc:ChoosingAccessibility> for which accessibility to pick.
public struct ItemOptions: Sendable, Hashable {
    /// When the secret is available (`kSecAttrAccessible`). Default: `Accessibility.whenUnlocked`,
    /// Apple's default. With ``accessControlFlags``, this is the access control's protection class.
    public var accessibility: Accessibility
    /// Whether the keychain's items synchronize through iCloud Keychain (`kSecAttrSynchronizable`), for items that
    /// do not say (`KeychainItem.synchronizable` nil). Default false.
    ///
    /// Synchronizable is part of an item's identity: a synchronizable and a local item with the same
    /// service and account are two items. With a `ThisDeviceOnly` accessibility the item is accepted and
    /// reads back as synchronizable, as on Apple's keychain, but it never leaves the device.
    public var synchronizable: Bool
    /// The access group for items that do not name one (`kSecAttrAccessGroup`); nil for the app's default.
    ///
    /// Part of an item's identity: the same service and account in two groups are two items.
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

    /// The attributes a save sets (accessibility, access control, label, comment): these options without their
    /// identity attributes. Setting it leaves ``accessGroup`` and ``synchronizable`` as they are.
    ///
    /// ```swift
    /// var once = keychain.options.saveOptions
    /// once.label = "Rotated token"
    /// try keychain.save(token, for: item, options: once)
    /// ```
    public var saveOptions: SaveOptions {
        get { SaveOptions(accessibility: accessibility, accessControlFlags: accessControlFlags, label: label, comment: comment) }
        set {
            accessibility = newValue.accessibility
            accessControlFlags = newValue.accessControlFlags
            label = newValue.label
            comment = newValue.comment
        }
    }
}

/// What one save may set besides the secret: accessibility, access control, label and comment.
///
/// None of these is part of an item's identity, so a save with `SaveOptions` writes the very item that `data(for:)`,
/// `update(_:for:)` and `delete(_:)` address with the same item value. The access group and synchronizable, which
/// are identity, are not here: they come from the item (``GenericPassword/accessGroup``,
/// `GenericPassword.synchronizable`) or the keychain's ``ItemOptions``.
///
/// The options replace the keychain's for this save (they are not merged): start from
/// `keychain.options.saveOptions` to change one attribute only.
///
/// ```swift
/// try keychain.save(token, for: item, options: SaveOptions(accessibility: .afterFirstUnlockThisDeviceOnly, label: "API token"))
/// ```
public struct SaveOptions: Sendable, Hashable {
    /// When the secret is available (`kSecAttrAccessible`). Default: `Accessibility.whenUnlocked`, Apple's default.
    /// With ``accessControlFlags``, this is the access control's protection class.
    public var accessibility: Accessibility
    /// An access control (`kSecAttrAccessControl`): the authentication reading the secret needs. nil for none.
    ///
    /// - Important: On a simulator, biometric access control is not enforced.
    public var accessControlFlags: AccessControlFlags?
    /// A user-visible label (`kSecAttrLabel`). nil leaves it unset (and unchanged when the item exists).
    public var label: String?
    /// A comment (`kSecAttrComment`). nil leaves it unset (and unchanged when the item exists).
    public var comment: String?

    /// Creates save options; every parameter has Apple's default.
    public init(accessibility: Accessibility = .whenUnlocked, accessControlFlags: AccessControlFlags? = nil,
                label: String? = nil, comment: String? = nil) {
        self.accessibility = accessibility
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
