import Foundation

// Saving and loading CryptoKit keys: the storage rules are in CryptoKeys.swift.

/// `kSecAttrKeyTypeECSECPrimeRandom`.
private let ecSECPrimeRandom = "73"
/// `kSecAttrKeyClassPrivate`.
private let keyClassPrivate = "1"

extension Keychain {
    /// Saves `key` as the item `item` names: adds it, or replaces the key of an existing item of the same key type.
    ///
    /// NIST keys become key items (`kSecClassKey`, their X9.63 bytes), other keys generic passwords (their raw or
    /// seed bytes, the key type's marker in `kSecAttrGeneric`): see ``KeychainStorableKey``. Adds first; on
    /// `errSecDuplicateItem` it updates the existing item's data and the options' attributes in place, keeping
    /// its creation date. It never deletes, and it never overwrites an item holding something else.
    ///
    /// ```swift
    /// let key = P256.Signing.PrivateKey()
    /// try keychain.save(key, for: try CryptoKeyItem(tag: "com.example.signing"))
    /// ```
    ///
    /// - Parameters:
    ///   - key: the key.
    ///   - item: where it lives.
    ///   - options: the accessibility, access control, label and comment of this save, replacing the keychain's
    ///     (``ItemOptions/saveOptions``); nil for the keychain's. The item's access group comes from `item`, else from
    ///     ``options``, and its synchronizable from ``options``: never from this call.
    /// - Throws: ``KeychainError/keyTypeMismatch`` when the item exists and holds another key type or a password
    ///   (nothing is changed); ``KeychainError`` with `errSecInteractionNotAllowed` (locked; transient),
    ///   `errSecMissingEntitlement` (access group), `errSecUserCanceled` / `errSecAuthFailed` (replacing a
    ///   protected key).
    /// - Important: The key is stored in software: whoever can read the item can read the private key. Prefer
    ///   the Secure Enclave where it is present, and a `ThisDeviceOnly` accessibility for keys that must not
    ///   leave the device in backups.
    public func save<StoredKey>(_ key: StoredKey, for item: CryptoKeyItem<StoredKey>, options: SaveOptions? = nil) throws {
        let options = options ?? self.options.saveOptions
        let owned = ownedQuery(item)
        let stored = Self.storedAttributes(options)
        let data = key.keychainRepresentation
        var attributes = owned
        attributes[Key.valueData] = .data(data)
        for (name, value) in stored { attributes[name] = value }
        var changes = stored
        changes[Key.valueData] = .data(data)
        do {
            // Add, or on errSecDuplicateItem update the item that carries this key type's marker. An existing item
            // without it (another key type, a password) matches no update: errSecItemNotFound, nothing changed.
            try store.addOrUpdate(attributes, matching: authenticated(owned), with: changes)
        } catch let error where KeychainError.itemNotFound ~= error {
            throw KeychainError(code: .keyTypeMismatch, reason: "\(item) exists and holds something other than a \(StoredKey.self); it was left unchanged")
        } catch {
            throw KeychainError(converting: error)
        }
    }

    /// Loads the key stored for `item`.
    ///
    /// Reading an access-controlled item shows the authentication prompt (with ``AuthenticationOptions/prompt``).
    ///
    /// ```swift
    /// let item = try CryptoKeyItem<P256.Signing.PrivateKey>(tag: "com.example.signing")
    /// if let key = try keychain.key(for: item) { let signature = try key.signature(for: message) }
    /// ```
    ///
    /// - Returns: the key, or nil when there is no such item.
    /// - Throws: ``KeychainError/keyTypeMismatch`` when the item holds another key type (another curve or purpose,
    ///   another family, a password); ``KeychainError/decodingFailed`` when the stored bytes are not a valid `StoredKey`
    ///   (damaged; the reason names the type, never the bytes); ``KeychainError`` with
    ///   `errSecInteractionNotAllowed` (locked: transient, the item is intact), `errSecUserCanceled`,
    ///   `errSecAuthFailed`, `errSecMissingEntitlement`.
    /// - Important: Never delete the item because this throws: only nil means "absent".
    public func key<StoredKey>(for item: CryptoKeyItem<StoredKey>) throws -> StoredKey? {
        var query = locatingQuery(item)
        if case .keyClass = item.location {
            // The curve size is part of a key item's identity: look for this curve's item.
            query[Key.keySizeInBits] = keyClassAttributes(item)[Key.keySizeInBits]
        }
        query[Key.returnData] = .bool(true)
        query[Key.returnAttributes] = .bool(true)
        query[Key.matchLimit] = .string(Key.matchLimitOne)
        let result: ItemResult?
        do {
            result = try store.copyMatching(authenticated(query))
        } catch let error where KeychainError.itemNotFound ~= error {
            if case .keyClass = item.location, try otherKeyExists(under: item) {
                throw KeychainError(code: .keyTypeMismatch, reason: "\(item) holds a key of another curve than \(StoredKey.self)")
            }
            return nil
        } catch {
            throw KeychainError(converting: error)
        }
        guard case .attributes(let attributes)? = result, let data = attributes[Key.valueData]?.dataValue else {
            throw KeychainError(code: .unexpectedResult, reason: "kSecReturnData with kSecReturnAttributes did not return a dictionary with data")
        }
        try checkMarker(of: attributes, for: item)
        do {
            return try StoredKey(keychainRepresentation: data)
        } catch {
            throw KeychainError(code: .decodingFailed, reason: "the data of \(item) is not a valid \(StoredKey.self) (\(data.count) bytes)")
        }
    }

    /// Deletes the key item `item` names. An item that does not exist counts as deleted.
    ///
    /// Only an item holding this key type is deleted: a password, or a key of another type under the same
    /// service and account (or tag and curve), is left alone and reported as absent.
    ///
    /// - Returns: whether an item holding this key type was there.
    /// - Throws: ``KeychainError`` with `errSecInteractionNotAllowed` (locked; nothing is deleted),
    ///   `errSecMissingEntitlement`.
    @discardableResult
    public func delete<StoredKey>(_ item: CryptoKeyItem<StoredKey>) throws -> Bool {
        try reportsExistence { try store.delete(ownedQuery(item)) }
    }

    // MARK: - Queries

    /// The class and identifying attributes of `item`, with access group, synchronizable and platform keys; no marker.
    ///
    /// Like `identity(of:)`, it depends on the item and the keychain's ``options`` only, never on a call's options.
    func locatingQuery<StoredKey>(_ item: CryptoKeyItem<StoredKey>) -> KeychainQuery {
        var query: KeychainQuery
        switch item.location {
        case .keyClass(let tag, _, _):
            query = [
                Key.class: .string(ItemClass.key.rawValue),
                Key.keyClass: .string(keyClassPrivate),
                Key.keyType: .string(ecSECPrimeRandom),
                Key.applicationTag: .data(Data(tag.utf8)),
            ]
        case .genericPassword(let service, let account, _):
            query = [
                Key.class: .string(ItemClass.genericPassword.rawValue),
                Key.service: .string(service),
                Key.account: .string(account),
            ]
        }
        let identity = identityAttributes(accessGroup: item.accessGroup, synchronizable: nil)
        if let group = identity.accessGroup { query[Key.accessGroup] = .string(group) }
        if identity.synchronizable { query[Key.synchronizable] = .bool(true) }
        Self.addPlatformKeys(&query)
        return query
    }

    /// The query of the item holding exactly this key type: identity, curve size and purpose marks, or the
    /// generic-password marker. What saves update and deletes remove.
    package func ownedQuery<StoredKey>(_ item: CryptoKeyItem<StoredKey>) -> KeychainQuery {
        var query = locatingQuery(item)
        switch item.location {
        case .keyClass:
            for (name, value) in keyClassAttributes(item) { query[name] = value }
        case .genericPassword(_, _, let marker):
            query[Key.generic] = .data(Data(marker.utf8))
        }
        return query
    }

    /// A NIST key item's size and purpose attributes.
    func keyClassAttributes<StoredKey>(_ item: CryptoKeyItem<StoredKey>) -> KeychainQuery {
        guard case .keyClass(_, let bits, let purpose) = item.location else { return [:] }
        return [
            Key.keySizeInBits: .number(Int64(bits)),
            Key.canSign: .bool(purpose == .signing),
            Key.canDerive: .bool(purpose == .keyAgreement),
        ]
    }

    /// Throws ``KeychainError/keyTypeMismatch`` unless the attributes read carry `item`'s marker.
    func checkMarker<StoredKey>(of attributes: KeychainQuery, for item: CryptoKeyItem<StoredKey>) throws {
        switch item.location {
        case .keyClass(_, _, let purpose):
            // Our items set both marks; an item from other code may set neither, and is accepted.
            let wanted = purpose == .signing ? Key.canSign : Key.canDerive
            if attributes[wanted]?.boolValue == false {
                throw KeychainError(code: .keyTypeMismatch, reason: "\(item) holds a key of the other purpose than \(StoredKey.self)")
            }
        case .genericPassword(_, _, let marker):
            let stored: Data?
            switch attributes[Key.generic] {
            case .data(let data)?: stored = data
            case .string(let string)?: stored = Data(string.utf8)
            default: stored = nil
            }
            guard stored == Data(marker.utf8) else {
                let what = stored.flatMap { String(data: $0, encoding: .utf8) }.map { "marker \"\($0)\"" } ?? "no Keystone key marker"
                throw KeychainError(code: .keyTypeMismatch, reason: "\(item) has \(what), not a \(StoredKey.self)")
            }
        }
    }

    /// Whether a private EC key of any size exists under `item`'s tag (attributes only: never prompts).
    func otherKeyExists<StoredKey>(under item: CryptoKeyItem<StoredKey>) throws -> Bool {
        var query = locatingQuery(item)
        query[Key.returnAttributes] = .bool(true)
        query[Key.matchLimit] = .string(Key.matchLimitOne)
        do {
            _ = try store.copyMatching(query)
            return true
        } catch let error where KeychainError.itemNotFound ~= error {
            return false
        } catch {
            throw KeychainError(converting: error)
        }
    }
}

extension Keychain {
    /// Saves `key` for `item` off the caller's actor: add, or replace a key of the same type.
    ///
    /// - Throws: as the synchronous `save(_:for:options:)`, or `CancellationError` before it starts.
    /// - Important: The key is stored in software; prefer the Secure Enclave where it is present.
    public func save<StoredKey>(_ key: StoredKey, for item: CryptoKeyItem<StoredKey>, options: SaveOptions? = nil) async throws {
        try await offActor { try self.save(key, for: item, options: options) }
    }

    /// Loads the key stored for `item` off the caller's actor; nil when absent.
    ///
    /// - Throws: as the synchronous `key(for:)`.
    public func key<StoredKey>(for item: CryptoKeyItem<StoredKey>) async throws -> StoredKey? {
        try await offActor { try self.key(for: item) }
    }

    /// Deletes the key item `item` names, off the caller's actor; a missing item counts as deleted.
    ///
    /// - Throws: as the synchronous `delete(_:)`.
    @discardableResult
    public func delete<StoredKey>(_ item: CryptoKeyItem<StoredKey>) async throws -> Bool {
        try await offActor { try self.delete(item) }
    }
}
