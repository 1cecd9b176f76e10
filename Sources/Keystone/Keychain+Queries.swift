import Foundation

// The queries ``Keychain`` passes to its store: identity, whole services, authentication keys, stored attributes.

extension Keychain {
    /// The query identifying `item` in this keychain: class, primary key, access group, synchronizable, platform keys.
    ///
    /// The one identity every operation on an item uses (save, read, attributes, update, delete, migrate): it depends
    /// on the item and the keychain's ``options`` only, never on a call's options.
    package func identity(of item: some KeychainItem) -> KeychainQuery {
        var query = item.identifyingAttributes
        let identity = identityAttributes(of: item)
        if let group = identity.accessGroup { query[Key.accessGroup] = .string(group) }
        if identity.synchronizable { query[Key.synchronizable] = .bool(true) }
        Self.addPlatformKeys(&query)
        return query
    }

    /// The access group and synchronizable of `item` in this keychain: the item's own, else the keychain's ``options``.
    ///
    /// Decision: the two primary-key attributes an item value may leave open are resolved here and only here, from
    /// the item and the keychain: the SecItem path (`identity(of:)`, `SystemKeychain` and any store) and the
    /// engine's compiled path (`compiledSave`, `compiledSecret`) take them from this function, so both address the
    /// same item. A synchronizable false is sent as no `kSecAttrSynchronizable` at all, which Apple's keychain (and
    /// the engine) match as false.
    package func identityAttributes(of item: some KeychainItem) -> (accessGroup: String?, synchronizable: Bool) {
        identityAttributes(accessGroup: item.accessGroup, synchronizable: item.synchronizable)
    }

    /// The access group and synchronizable an item names (nil where it leaves them open), completed from ``options``.
    package func identityAttributes(accessGroup: String?, synchronizable: Bool?) -> (accessGroup: String?, synchronizable: Bool) {
        (accessGroup ?? options.accessGroup, synchronizable ?? options.synchronizable)
    }

    /// Class + service (+ access group) + any synchronizable: the bounded query of a whole service.
    package func serviceQuery(_ service: String, accessGroup: String?) throws -> KeychainQuery {
        guard !service.isEmpty else {
            throw KeychainError(code: .invalidItem, reason: "a service query needs a non-empty service")
        }
        var query: KeychainQuery = [
            Key.class: .string(ItemClass.genericPassword.rawValue),
            Key.service: .string(service),
            Key.synchronizable: .string(Key.synchronizableAny),
        ]
        if let group = accessGroup ?? options.accessGroup {
            guard !group.isEmpty else { throw KeychainError(code: .invalidItem, reason: "the access group must not be empty") }
            query[Key.accessGroup] = .string(group)
        }
        Self.addPlatformKeys(&query)
        return query
    }

    /// Adds the authentication keys (prompt, context) to a query that reads or changes a secret.
    func authenticated(_ query: KeychainQuery) -> KeychainQuery {
        var query = query
        if let prompt = authentication.prompt { query[Key.useOperationPrompt] = .string(prompt) }
        if let context { query[Key.useAuthenticationContext] = .authenticationContext(context) }
        return query
    }

    /// The stored (non-identifying) attributes the options set: accessibility or access control, label, comment.
    package static func storedAttributes(_ options: ItemOptions) -> KeychainQuery {
        storedAttributes(options.saveOptions)
    }

    /// The stored (non-identifying) attributes a save sets: accessibility or access control, label, comment.
    package static func storedAttributes(_ options: SaveOptions) -> KeychainQuery {
        var attributes: KeychainQuery = [:]
        if let accessControl = options.accessControl {
            attributes[Key.accessControl] = .accessControl(accessControl)
        } else {
            attributes[Key.accessible] = .string(options.accessibility.rawValue)
        }
        if let label = options.label { attributes[Key.label] = .string(label) }
        if let comment = options.comment { attributes[Key.comment] = .string(comment) }
        return attributes
    }

    /// On macOS, every query goes to the data protection keychain (`kSecUseDataProtectionKeychain`):
    /// without it, SecItem calls use the legacy file keychain, which has different rules.
    package static func addPlatformKeys(_ query: inout KeychainQuery) {
        #if os(macOS)
        query[Key.useDataProtectionKeychain] = .bool(true)
        #endif
    }
}
