import Foundation

// The former per-call `ItemOptions` overloads of the saves, kept for source compatibility and deprecated: per-call
// options may no longer say which item is written (issue 26 item 4; the decision is in Options.swift).
//
// Decision: a per-call `ItemOptions` is accepted only when its identity attributes, `accessGroup` and
// `synchronizable`, are the keychain's own (`keychain.options`): what `var o = keychain.options; o.label = …` gives,
// and what `ItemOptions(accessibility: …)` gives on a keychain with default options. Any other value used to write an
// item the keychain's `data(for:)`, `update(_:for:)` and `delete(_:)` do not address; it is now refused with
// `errSecParam` (-50) before anything reaches the store, so nothing is written. The rule compares with the keychain,
// not with the item: an item that names its own group or synchronizable keeps them whatever the options say, and
// options that are not the keychain's are refused even then, so one rule explains every refusal.

extension Keychain {
    /// The attributes of a per-call `ItemOptions`, once checked that they would not change which item is written.
    ///
    /// - Throws: ``KeychainError`` with `errSecParam` (-50) when `options.accessGroup` or `options.synchronizable`
    ///   differ from the keychain's ``options``: the message names both and the fix; nothing was written.
    package func saveOptions(checking options: ItemOptions, for item: some CustomStringConvertible) throws(KeychainError) -> SaveOptions {
        guard options.accessGroup == self.options.accessGroup, options.synchronizable == self.options.synchronizable else {
            func describe(_ options: ItemOptions) -> String {
                "synchronizable \(options.synchronizable), " + (options.accessGroup.map { "access group \"\($0)\"" } ?? "no access group")
            }
            throw KeychainError(status: Status.param, reason: """
                the per-call options of a save for \(item) would change which item is written: they say \(describe(options)), \
                this keychain's options say \(describe(self.options)). An item's access group and synchronizable come from the \
                item (GenericPassword(service:account:accessGroup:synchronizable:)) or from Keychain(options:), never from one \
                call; pass SaveOptions for accessibility, access control, label and comment. Nothing was written.
                """)
        }
        return options.saveOptions
    }

    /// Saves `data` for `item` with per-call `ItemOptions`.
    ///
    /// - Throws: ``KeychainError`` with `errSecParam` (-50) when `options` has another access group or synchronizable
    ///   than the keychain's ``options`` (nothing is written); else as `save(_:for:options:)`.
    @available(*, deprecated, message: "pass SaveOptions: an item's access group and synchronizable come from the item or Keychain(options:), never from one call")
    public func save(_ data: Data, for item: some KeychainItem, options: ItemOptions) throws {
        try save(data, for: item, options: try saveOptions(checking: options, for: item))
    }

    /// Saves `string` for `item` with per-call `ItemOptions`.
    ///
    /// - Throws: as the deprecated `save(_:for:options:)` taking `ItemOptions`.
    @available(*, deprecated, message: "pass SaveOptions: an item's access group and synchronizable come from the item or Keychain(options:), never from one call")
    public func save(_ string: String, for item: some KeychainItem, options: ItemOptions) throws {
        try save(Data(string.utf8), for: item, options: try saveOptions(checking: options, for: item))
    }

    /// Encodes and saves `value` for `item` with per-call `ItemOptions`.
    ///
    /// - Throws: as the deprecated `save(_:for:options:)` taking `ItemOptions`, or ``KeychainError/encodingFailed``.
    @available(*, deprecated, message: "pass SaveOptions: an item's access group and synchronizable come from the item or Keychain(options:), never from one call")
    public func encode<Value: Encodable>(_ value: Value, for item: some KeychainItem, options: ItemOptions,
                                         encoder: JSONEncoder = JSONEncoder()) throws {
        try encode(value, for: item, options: try saveOptions(checking: options, for: item), encoder: encoder)
    }

    /// Saves `key` for `item` with per-call `ItemOptions`.
    ///
    /// - Throws: as the deprecated `save(_:for:options:)` taking `ItemOptions`, else as `save(_:for:options:)`.
    @available(*, deprecated, message: "pass SaveOptions: an item's access group and synchronizable come from the item or Keychain(options:), never from one call")
    public func save<StoredKey>(_ key: StoredKey, for item: CryptoKeyItem<StoredKey>, options: ItemOptions) throws {
        try save(key, for: item, options: try saveOptions(checking: options, for: item))
    }

    /// Saves `data` for `item` with per-call `ItemOptions`, off the caller's actor.
    ///
    /// - Throws: as the synchronous deprecated `save(_:for:options:)`.
    @available(*, deprecated, message: "pass SaveOptions: an item's access group and synchronizable come from the item or Keychain(options:), never from one call")
    public func save(_ data: Data, for item: some KeychainItem, options: ItemOptions) async throws {
        let checked = try saveOptions(checking: options, for: item)
        try await save(data, for: item, options: checked)
    }

    /// Saves `string` for `item` with per-call `ItemOptions`, off the caller's actor.
    ///
    /// - Throws: as the synchronous deprecated `save(_:for:options:)`.
    @available(*, deprecated, message: "pass SaveOptions: an item's access group and synchronizable come from the item or Keychain(options:), never from one call")
    public func save(_ string: String, for item: some KeychainItem, options: ItemOptions) async throws {
        let checked = try saveOptions(checking: options, for: item)
        try await save(string, for: item, options: checked)
    }

    /// Encodes and saves `value` for `item` with per-call `ItemOptions`, off the caller's actor.
    ///
    /// - Throws: as the synchronous deprecated `encode(_:for:options:encoder:)`.
    @available(*, deprecated, message: "pass SaveOptions: an item's access group and synchronizable come from the item or Keychain(options:), never from one call")
    public func encode<Value: Encodable & Sendable>(_ value: Value, for item: some KeychainItem, options: ItemOptions,
                                                    encoder: @autoclosure @escaping @Sendable () -> JSONEncoder = JSONEncoder()) async throws {
        let checked = try saveOptions(checking: options, for: item)
        try await encode(value, for: item, options: checked, encoder: encoder())
    }

    /// Saves `key` for `item` with per-call `ItemOptions`, off the caller's actor.
    ///
    /// - Throws: as the synchronous deprecated `save(_:for:options:)`.
    @available(*, deprecated, message: "pass SaveOptions: an item's access group and synchronizable come from the item or Keychain(options:), never from one call")
    public func save<StoredKey>(_ key: StoredKey, for item: CryptoKeyItem<StoredKey>, options: ItemOptions) async throws {
        let checked = try saveOptions(checking: options, for: item)
        try await save(key, for: item, options: checked)
    }
}
