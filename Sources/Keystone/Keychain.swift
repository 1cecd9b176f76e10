import Foundation

/// The typed keychain: save, read, update and delete passwords without hand-built dictionaries.
///
/// `Keychain` turns each call into SecItem queries on its ``store``: the platform keychain
/// (``SystemKeychain``) by default, an `InMemoryKeychain` (from `KeystoneTesting`) in tests, or a
/// `KeychainEngine`. It follows the rules careful keychain code follows:
///
/// - **Save adds first and updates on `errSecDuplicateItem`**: never delete-then-add, which would lose
///   the creation date and open a window where the secret is gone.
/// - **A missing item is not an error when reading or deleting**: reads return nil, deletes are done.
///   Every other failure throws, so "locked" is never mistaken for "absent".
/// - **A failed read never deletes anything.** `errSecInteractionNotAllowed` is
///   ``KeychainError/isTransient``: wait for the unlock.
/// - **Listing and existence checks never read secrets** (`kSecReturnAttributes` only), so they never
///   prompt.
/// - **Deleting a service is bounded**: the query always holds the class and the service (and the
///   access group when set), never less.
/// - On macOS every query sets `kSecUseDataProtectionKeychain`, so items go to the iOS-style keychain.
///
/// ```swift
/// let keychain = Keychain()
/// let item = try GenericPassword(service: "com.example.api", account: "alice")
/// try keychain.save("s3cret-token", for: item)
/// let token = try keychain.string(for: item)     // "s3cret-token", or nil if absent
/// try keychain.delete(item)
/// ```
///
/// An item's identity (class, primary key, access group, synchronizable) comes from the item value and, for what
/// the item leaves nil, from the keychain's ``options``; never from what one call passes. A save's per-call
/// ``SaveOptions`` set only the attributes that are not identity (accessibility, access control, label, comment), so
/// `save`, `data(for:)`, `update(_:for:)`, `delete(_:)` and `attributes(for:)` on one item value always address the
/// same item.
///
/// `Keychain` is a value: copies share the store. Every operation has an `async` form that runs off
/// the caller's actor (see `Keychain.save(_:for:options:)`'s async twin).
public struct Keychain: Sendable {
    /// Where the items live.
    public let store: any KeychainStore
    /// The keychain's configuration: the access group and synchronizable of items that do not name their own
    /// (part of their identity), and how saves store them (accessibility, access control, label, comment).
    public var options: ItemOptions
    /// How reads of access-controlled secrets authenticate.
    public let authentication: AuthenticationOptions
    /// The context passed as `kSecUseAuthenticationContext`, when one is needed.
    let context: AuthenticationContext?

    /// Creates a keychain over `store`.
    ///
    /// - Parameters:
    ///   - store: the four SecItem operations; the platform keychain by default.
    ///   - options: the default access group and synchronizable of its items, and how they are saved.
    ///   - authentication: prompt text, reuse window and interaction for access-controlled items.
    public init(store: any KeychainStore = SystemKeychain(), options: ItemOptions = ItemOptions(),
                authentication: AuthenticationOptions = AuthenticationOptions()) {
        self.store = store
        self.options = options
        self.authentication = authentication
        if let context = authentication.context {
            self.context = context
        } else if authentication.reuseDuration > 0 || !authentication.allowsInteraction {
            let context = AuthenticationContext(reuseDuration: 0, interactionNotAllowed: !authentication.allowsInteraction)
            context.reuseDuration = authentication.reuseDuration
            self.context = context
        } else {
            self.context = nil
        }
    }

    // MARK: - Save

    /// Saves `data` as the secret of `item`: adds it, or updates it when it exists.
    ///
    /// Adds first; on `errSecDuplicateItem` it updates the existing item's secret and the options'
    /// attributes (accessibility or access control, label, comment). It never deletes: the creation
    /// date and any attribute the options leave nil are kept.
    ///
    /// The item written is the one `data(for:)`, `update(_:for:)` and `delete(_:)` address with the same `item`:
    /// its access group and synchronizable come from `item`, else from ``options``, whatever `options` says here.
    ///
    /// - Parameters:
    ///   - data: the secret.
    ///   - item: which item.
    ///   - options: the accessibility, access control, label and comment of this save, replacing the keychain's
    ///     (``ItemOptions/saveOptions``); nil for the keychain's.
    /// - Throws: ``KeychainError`` with `errSecInteractionNotAllowed` (locked; transient),
    ///   `errSecMissingEntitlement` (access group), `errSecUserCanceled` / `errSecAuthFailed` (updating
    ///   a protected secret).
    public func save(_ data: Data, for item: some KeychainItem, options: SaveOptions? = nil) throws {
        let options = options ?? self.options.saveOptions
        if options.accessControl == nil, let engine = Self.engine(behind: store), let key = item.compiledKey {
            // The engine's compiled path: the same rules as add-or-update, without building dictionaries
            // (unless hooks observe it: then they get the queries the SecItem path would pass).
            let identity = identityAttributes(of: item)
            let outcome = try run {
                try engine.compiledSave(data, for: key, accessGroup: identity.accessGroup,
                                               synchronizable: identity.synchronizable, accessibility: options.accessibility,
                                               label: options.label, comment: options.comment) {
                    self.saveQueries(data, for: item, options)
                }
            }
            if case .done = outcome { return }
        }
        let (attributes, query, changes) = saveQueries(data, for: item, options)
        // One store call: add, or on errSecDuplicateItem update in place (never delete-then-add).
        try run { try store.addOrUpdate(attributes, matching: query, with: changes) }
    }

    /// The engine under `store`, when it is one (``EngineBackedStore``): the compiled path's.
    package static func engine(behind store: any KeychainStore) -> KeychainEngine? {
        if let engine = store as? KeychainEngine { return engine }
        return (store as? any EngineBackedStore)?.engine
    }

    /// A save's add attributes, update query and changes: `item`'s identity in this keychain (`identity(of:)`)
    /// with the attributes `options` set.
    package func saveQueries(_ data: Data, for item: some KeychainItem, _ options: SaveOptions) -> (add: KeychainQuery, query: KeychainQuery, changes: KeychainQuery) {
        let identity = identity(of: item)
        let stored = Self.storedAttributes(options)
        var attributes = identity
        attributes[Key.valueData] = .data(data)
        for (key, value) in stored { attributes[key] = value }
        var changes = stored
        changes[Key.valueData] = .data(data)
        return (attributes, authenticated(identity), changes)
    }

    /// Saves `string` as the UTF-8 secret of `item` (add, or update when it exists).
    ///
    /// - Throws: as `save(_:for:options:)`.
    public func save(_ string: String, for item: some KeychainItem, options: SaveOptions? = nil) throws {
        try save(Data(string.utf8), for: item, options: options)
    }

    /// Encodes `value` as JSON and saves it as the secret of `item` (add, or update when it exists).
    ///
    /// - Throws: ``KeychainError/encodingFailed`` when the encoder fails, else as `save(_:for:options:)`.
    public func encode<Value: Encodable>(_ value: Value, for item: some KeychainItem, options: SaveOptions? = nil,
                                         encoder: JSONEncoder = JSONEncoder()) throws {
        let data: Data
        do {
            data = try encoder.encode(value)
        } catch {
            throw KeychainError(code: .encodingFailed, reason: "could not encode \(Value.self)")
        }
        try save(data, for: item, options: options)
    }

    // MARK: - Read

    /// Reads the secret of `item`.
    ///
    /// Reading an access-controlled item shows the authentication prompt (with ``AuthenticationOptions/prompt``).
    ///
    /// - Returns: the secret, or nil when there is no such item.
    /// - Throws: ``KeychainError`` with `errSecInteractionNotAllowed` (locked: transient, the item is
    ///   intact), `errSecUserCanceled`, `errSecAuthFailed`, `errSecMissingEntitlement`.
    /// - Important: Never delete the item because this throws: only nil means "absent".
    public func data(for item: some KeychainItem) throws -> Data? {
        if let engine = Self.engine(behind: store), let key = item.compiledKey {
            // The engine's compiled path: the same rules as copyMatching, without building dictionaries
            // (unless hooks observe it: then they get the query the SecItem path would pass).
            do {
                let identity = identityAttributes(of: item)
                if case .done(let data) = try engine.compiledSecret(for: key, accessGroup: identity.accessGroup,
                                                                             synchronizable: identity.synchronizable, observedQuery: { self.readQuery(item) }) {
                    return data
                }
            } catch let error where KeychainError.itemNotFound ~= error {
                return nil
            } catch {
                throw KeychainError(converting: error)
            }
        }
        let result: ItemResult?
        do {
            result = try store.copyMatching(readQuery(item))
        } catch let error where KeychainError.itemNotFound ~= error {
            return nil
        } catch {
            throw KeychainError(converting: error)
        }
        switch result {
        case .data(let data)?: return data
        case .attributes(let attributes)?:
            if let data = attributes[Key.valueData]?.dataValue { return data }
        default: break
        }
        throw KeychainError(code: .unexpectedResult, reason: "kSecReturnData did not return data")
    }

    /// Reads the secret of `item` as a UTF-8 string.
    ///
    /// - Returns: the string, or nil when there is no such item.
    /// - Throws: ``KeychainError/stringEncoding`` when the secret is not UTF-8; else as `data(for:)`.
    public func string(for item: some KeychainItem) throws -> String? {
        guard let data = try data(for: item) else { return nil }
        guard let string = String(data: data, encoding: .utf8) else {
            throw KeychainError(code: .stringEncoding, reason: "the secret of \(item) is not UTF-8 (\(data.count) bytes)")
        }
        return string
    }

    /// Reads the secret of `item` and decodes it from JSON as `type`.
    ///
    /// - Returns: the value, or nil when there is no such item.
    /// - Throws: ``KeychainError/decodingFailed`` (the reason names the type and coding path, never the
    ///   stored bytes); else as `data(for:)`.
    public func value<Value: Decodable>(_ type: Value.Type, for item: some KeychainItem,
                                        decoder: JSONDecoder = JSONDecoder()) throws -> Value? {
        guard let data = try data(for: item) else { return nil }
        do {
            return try decoder.decode(Value.self, from: data)
        } catch let error as DecodingError {
            throw KeychainError(code: .decodingFailed, reason: "could not decode \(Value.self) at '\(Self.codingPath(of: error))'")
        } catch {
            throw KeychainError(code: .decodingFailed, reason: "could not decode \(Value.self)")
        }
    }

    /// The query reading `item`'s secret: identity, `kSecReturnData`, limit One, authentication keys.
    func readQuery(_ item: some KeychainItem) -> KeychainQuery {
        var query = identity(of: item)
        query[Key.returnData] = .bool(true)
        query[Key.matchLimit] = .string(Key.matchLimitOne)
        return authenticated(query)
    }

    /// Whether `item` exists. Reads attributes only: never prompts, never reads the secret.
    ///
    /// - Throws: ``KeychainError`` with `errSecInteractionNotAllowed` (locked), `errSecMissingEntitlement`.
    public func exists(_ item: some KeychainItem) throws -> Bool {
        try attributes(for: item) != nil
    }

    /// The attributes of `item` (label, comment, dates, accessibility…), without its secret; never prompts.
    ///
    /// - Returns: the attributes, or nil when there is no such item.
    /// - Throws: ``KeychainError`` with `errSecInteractionNotAllowed` (locked), `errSecMissingEntitlement`.
    public func attributes(for item: some KeychainItem) throws -> ItemAttributes? {
        var query = identity(of: item)
        query[Key.returnAttributes] = .bool(true)
        query[Key.matchLimit] = .string(Key.matchLimitOne)
        let result: ItemResult?
        do {
            result = try store.copyMatching(query)
        } catch let error where KeychainError.itemNotFound ~= error {
            return nil
        } catch {
            throw KeychainError(converting: error)
        }
        guard case .attributes(let attributes)? = result else {
            throw KeychainError(code: .unexpectedResult, reason: "kSecReturnAttributes did not return a dictionary")
        }
        return ItemAttributes(attributes)
    }

    /// The accounts of `service` with their attributes, without reading any secret; never prompts.
    ///
    /// Lists synchronizable and local items alike (`kSecAttrSynchronizableAny`), in the access group
    /// given or ``ItemOptions/accessGroup``, sorted by account.
    ///
    /// - Returns: the items' attributes; empty when the service has none.
    /// - Throws: ``KeychainError/invalidItem`` for an empty service; ``KeychainError`` with
    ///   `errSecInteractionNotAllowed` (locked), `errSecMissingEntitlement`.
    public func accounts(service: String, accessGroup: String? = nil) throws -> [ItemAttributes] {
        let rows = try Self.attributeRows(in: store, try serviceQuery(service, accessGroup: accessGroup))
        return rows.map(ItemAttributes.init).sorted { $0.account < $1.account }
    }

    /// The attribute dictionaries of every item matching `query` (limit All, attributes only: never a secret, never
    /// a prompt); empty when none matches. Shared by listing, re-protection and the importers.
    ///
    /// - Throws: ``KeychainError`` from the store (`errSecInteractionNotAllowed` when a matching item is locked: never
    ///   taken as "none"); ``KeychainError/unexpectedResult`` for a result that is not attributes.
    package static func attributeRows(in store: any KeychainStore, _ query: KeychainQuery) throws(KeychainError) -> [KeychainQuery] {
        var query = query
        query[Key.returnAttributes] = .bool(true)
        query[Key.matchLimit] = .string(Key.matchLimitAll)
        let result: ItemResult?
        do {
            result = try store.copyMatching(query)
        } catch let error where KeychainError.itemNotFound ~= error {
            return []
        } catch {
            throw KeychainError(converting: error)
        }
        switch result {
        case .array(let array)?: return array.compactMap(\.attributes)
        case .attributes(let attributes)?: return [attributes]
        default: throw KeychainError(code: .unexpectedResult, reason: "a limit-All attributes query did not return attributes")
        }
    }

    // MARK: - Update

    /// Replaces the secret of an existing `item`; the options' label and comment are applied when set.
    ///
    /// - Throws: ``KeychainError/itemNotFound`` when the item does not exist (use `save(_:for:options:)`
    ///   to add or update); `errSecInteractionNotAllowed`, `errSecUserCanceled`, `errSecAuthFailed`.
    public func update(_ data: Data, for item: some KeychainItem) throws {
        var changes: KeychainQuery = [Key.valueData: .data(data)]
        if let label = options.label { changes[Key.label] = .string(label) }
        if let comment = options.comment { changes[Key.comment] = .string(comment) }
        try run { try store.update(authenticated(identity(of: item)), with: changes) }
    }

    /// Replaces the secret of an existing `item` with the UTF-8 bytes of `string`.
    ///
    /// - Throws: as `update(_:for:)`.
    public func update(_ string: String, for item: some KeychainItem) throws {
        try update(Data(string.utf8), for: item)
    }

    // MARK: - Delete

    /// Deletes `item`. An item that does not exist counts as deleted.
    ///
    /// - Returns: whether an item was there.
    /// - Throws: ``KeychainError`` with `errSecInteractionNotAllowed` (locked), `errSecMissingEntitlement`.
    @discardableResult
    public func delete(_ item: some KeychainItem) throws -> Bool {
        try reportsExistence { try store.delete(identity(of: item)) }
    }

    /// Deletes every generic password of `service`, synchronizable or not, and nothing else.
    ///
    /// The query always holds `kSecClass` = generic password and `kSecAttrService`, plus the access
    /// group given (or ``ItemOptions/accessGroup``) when there is one: other services are untouched.
    ///
    /// - Returns: whether anything was deleted.
    /// - Throws: ``KeychainError/invalidItem`` for an empty service (which would widen the query);
    ///   ``KeychainError`` with `errSecInteractionNotAllowed` (locked), `errSecMissingEntitlement`.
    @discardableResult
    public func deleteAll(service: String, accessGroup: String? = nil) throws -> Bool {
        let query = try serviceQuery(service, accessGroup: accessGroup)
        return try reportsExistence { try store.delete(query) }
    }

    /// Runs an update or delete: true when it matched, false on `errSecItemNotFound`; other errors as ``KeychainError``.
    package func reportsExistence(_ body: () throws -> Void) throws -> Bool {
        do {
            try body()
            return true
        } catch let error where KeychainError.itemNotFound ~= error {
            return false
        } catch {
            throw KeychainError(converting: error)
        }
    }

    /// Runs a store call, converting its error to ``KeychainError``.
    package func run<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw KeychainError(converting: error)
        }
    }

    static func codingPath(of error: DecodingError) -> String {
        // Only coding keys: the context's debugDescription may quote the stored bytes.
        var keys: [String] = []
        switch error {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .dataCorrupted(let c):
            keys = c.codingPath.map(\.stringValue)
        case .keyNotFound(let key, let c):
            keys = c.codingPath.map(\.stringValue) + [key.stringValue]
        @unknown default:
            break
        }
        return keys.isEmpty ? "(root)" : keys.joined(separator: ".")
    }
}
