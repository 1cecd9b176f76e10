import Foundation
import KeychainEngine

/// A transaction's seal keys, its batched secret reads, and what it refuses to store.
extension Transaction {
    /// The secrets of `items` (path, recorded length or nil), asking for several in one `GetSecrets` only while
    /// their recorded lengths fit one reply (`SecretServiceStorage.secretsPerReplyBudget`); an item of unknown
    /// length is asked for alone. A reply larger than the bus carries would make the bus disconnect the Secret
    /// Service itself.
    func fetchSecrets(_ items: [(path: String, size: Int?)]) throws -> [String: Data] {
        var result: [String: Data] = [:]
        var batch: [String] = []
        var total = 0
        for (path, size) in items {
            let cost = size.map { $0 + 4096 } ?? SecretServiceStorage.secretsPerReplyBudget
            if !batch.isEmpty, total + cost > SecretServiceStorage.secretsPerReplyBudget {
                result.merge(try client.secrets(batch)) { first, _ in first }
                batch = []
                total = 0
            }
            batch.append(path)
            total += cost
        }
        if !batch.isEmpty { result.merge(try client.secrets(batch)) { first, _ in first } }
        return result
    }

    /// The collection's seal keys, oldest first (read once per transaction; their bytes are cached by the storage).
    ///
    /// - Throws: `errSecInteractionNotAllowed` when a seal key item is locked (and no prompt may unlock it) or the
    ///   service returned no secret for it.
    func sealKeys() throws -> [Seal.Key] {
        if let loadedKeys { return loadedKeys }
        let paths = try client.search(storage.collectionPath, Seal.keyAttributes)
        var cache = storage.sealKeyCache.current.filter { paths.contains($0.key) }
        var missing: [(String, SecretServiceClient.ItemInfo)] = []
        for path in paths where cache[path] == nil {
            guard let info = try client.itemInfo(path) else { continue }
            missing.append((path, info))
        }
        if missing.contains(where: { $0.1.locked }) {
            if try storage.handleLockedCollection() { return try sealKeys() }
            throw Self.lockedError
        }
        let secrets = try fetchSecrets(missing.map { ($0.0, 32) })
        for (path, info) in missing {
            guard let bytes = secrets[path] else {
                throw EngineError(Status.interactionNotAllowed, "the Secret Service returned no secret for the collection's seal key")
            }
            // A key item holding anything but 32 bytes is not Keystone's: it seals nothing.
            if bytes.count == 32 { cache[path] = Seal.Key(path: path, bytes: bytes, created: info.created) }
        }
        storage.sealKeyCache.withLock { $0 = cache }
        let keys = cache.values.sorted { ($0.created, $0.path) < ($1.created, $1.path) }
        loadedKeys = keys
        return keys
    }

    /// The key new items are sealed with: the collection's oldest seal key, made now when it has none.
    func signingKey() throws -> Seal.Key {
        if let key = try sealKeys().first { return key }
        let bytes = Seal.newKeyBytes()
        let path = try client.createItem(in: storage.collectionPath, label: Seal.keyLabel, attributes: Seal.keyAttributes,
                                         secret: bytes, contentType: "application/octet-stream")
        guard let info = try client.itemInfo(path) else {
            throw EngineError(Status.notAvailable, "the Secret Service lost the seal key item it just created")
        }
        let key = Seal.Key(path: path, bytes: bytes, created: info.created)
        storage.sealKeyCache.withLock { $0[path] = key }
        loadedKeys = [key]
        return key
    }

    /// Refuses, before anything is written, what this storage cannot keep as asked.
    ///
    /// - Throws: `errSecDataTooLarge` for a secret over ``SecretServiceStorage/maximumSecretSize``;
    ///   `errSecUnimplemented` for an access control that needs a person, unless
    ///   ``SecretServiceStorage/Options/allowsUnenforcedAccessControl``.
    func checkStorable(_ item: StoredItem) throws {
        if let secret = item.secret, secret.count > SecretServiceStorage.maximumSecretSize {
            throw EngineError(Status.dataTooLarge, "the secret is \(secret.count) bytes; the Secret Service storage keeps at most 16 MiB (16,777,216 bytes) per secret, as one D-Bus message must carry it. Store a larger secret in a keychain file, or keep it in a protected file and store its key here.")
        }
        // Decision: errSecUnimplemented (-4), not errSecParam: the query is well formed; this storage does not
        // implement access controls that need a person, and an app can fall back to another keychain.
        if let control = item.accessControl, control.flags.requiresAuthentication, !storage.options.allowsUnenforcedAccessControl {
            throw EngineError(Status.unimplemented, "the Secret Service cannot enforce an access control that needs a person (user presence, biometry, passcode): any program of the session could read this secret with `secret-tool lookup`, with no prompt. Store the item in a keychain file, or accept this with SecretServiceStorage.Options.allowsUnenforcedAccessControl (KEYSTONE_SECRET_SERVICE_UNENFORCED_ACCESS_CONTROL=1).")
        }
    }

    /// Seals every unlocked item in Keystone's schema whose seal does not verify but whose attributes are whole
    /// (``SecretServiceStorage/resealItems()``); the number sealed.
    func resealAll() throws -> Int {
        if try storage.noteLockState(client.isLocked(storage.collectionPath)) {
            guard try storage.handleLockedCollection() else {
                throw EngineError(Status.interactionNotAllowed, "the Secret Service collection is locked: nothing was sealed")
            }
        }
        let key = try signingKey()
        let keys = try sealKeys()
        var count = 0
        for path in try client.search(storage.collectionPath, [(ItemMapping.schemaKey, ItemMapping.schemaName)]).sorted() {
            guard let info = try client.itemInfo(path), !info.locked,
                  let itemClass = info.attributes[ItemMapping.classKey].flatMap(ItemClass.init(rawValue:)),
                  let rowID = info.attributes[ItemMapping.rowIDKey].flatMap(Int64.init),
                  Seal.verdict(path: path, info: info, keys: keys) != .sealed,
                  let secret = try fetchSecrets([(path, nil)])[path],
                  (try? ItemMapping.row(from: info.attributes, secret: secret, itemClass: itemClass, rowID: rowID)) != nil
            else { continue }  // not Keystone's, already sealed, or damaged: left as it is
            var attributes = info.attributes.filter { $0.key != Seal.attribute && $0.key != ItemMapping.sizeKey }.map { ($0.key, $0.value) }
            attributes.append((ItemMapping.sizeKey, String(secret.count)))
            attributes.append((Seal.attribute, Seal.seal(path: path, attributes: attributes, key: key)))
            try client.setAttributes(path, attributes)
            count += 1
        }
        return count
    }
}
