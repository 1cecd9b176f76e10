import Foundation
import KeychainEngine

/// One transaction on a ``SecretServiceStorage``: reads go to the service; writes are held and applied by
/// ``commit()``, so a body that throws writes nothing.
final class Transaction: StorageWriter {
    /// An item as found in the service: where it lives and which version it is.
    struct Found {
        var candidate: Candidate
        /// Every object path holding this row (its current version first, then superseded ones left by a crash).
        var paths: [String]
        var generation: Int
        var itemClass: ItemClass
        var rowID: Int64
    }

    private unowned let storage: SecretServiceStorage
    private let client: SecretServiceClient
    /// Rows this transaction inserted, by row id.
    private var inserted: [Int64: StoredItem] = [:]
    /// Existing rows this transaction replaced, by row id.
    private var replaced: [Int64: StoredItem] = [:]
    /// Existing rows this transaction deleted.
    private var deleted: Set<Int64> = []
    /// What reads saw of each existing row (paths, generation), for the commit.
    private var seen: [Int64: Found] = [:]
    /// Searches of Keystone's items this transaction made, by query: the service is not changed before the
    /// commit, so a second identical search (the engine's duplicate check, then ``insert(_:)``'s own) is answered
    /// from the first instead of costing another `SearchItems`, `GetAll` and `GetSecrets` round trip.
    private var searched: [[String]: [Found]] = [:]
    /// The collection's seal keys, oldest first, once this transaction has read them.
    private var loadedKeys: [Seal.Key]?

    init(storage: SecretServiceStorage, client: SecretServiceClient) {
        self.storage = storage
        self.client = client
    }

    // MARK: - Reading

    func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate] {
        var rows: [Int64: Candidate] = [:]
        for found in try fetch(itemClass, constraints) where !deleted.contains(found.rowID) && replaced[found.rowID] == nil {
            rows[found.rowID] = found.candidate
        }
        for (rowID, item) in replaced.merging(inserted, uniquingKeysWith: { a, _ in a })
        where item.itemClass == itemClass && Self.matches(item, constraints) {
            rows[rowID] = .item(item)
        }
        return rows.sorted { $0.key < $1.key }.map(\.value)
    }

    func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? {
        if deleted.contains(rowID) { return nil }
        if let item = inserted[rowID] ?? replaced[rowID] { return item.itemClass == itemClass ? .item(item) : nil }
        if RowIdentity.isForeign(rowID), storage.options.compatibility != nil, itemClass == .genericPassword {
            // A foreign item keeps the id its object path gives it until Keystone replaces it.
            if let found = try fetchKeystone(itemClass, [(ItemMapping.rowIDKey, String(rowID))]).first { return found.candidate }
            return try fetchForeign([:]).first { $0.rowID == rowID }?.candidate
        }
        return try fetchKeystone(itemClass, [(ItemMapping.rowIDKey, String(rowID))]).first?.candidate
    }

    static func matches(_ item: StoredItem, _ constraints: [String: AttributeValue]) -> Bool {
        let schema = ClassSchema.of(item.itemClass)
        for (attribute, wanted) in constraints {
            let value = item.attributes[attribute] ?? schema.attributes[attribute]?.type.emptyValue
            guard value == wanted else { return false }
        }
        return true
    }

    /// The service's rows of a class holding `constraints`: Keystone's own, and in compatibility mode other
    /// clients' generic passwords.
    private func fetch(_ itemClass: ItemClass, _ constraints: [String: AttributeValue]) throws -> [Found] {
        var found = try fetchKeystone(itemClass, ItemMapping.lookupAttributes(itemClass, constraints))
        if itemClass == .genericPassword, storage.options.compatibility != nil {
            let ours = Set(found.map(\.rowID))
            found += try fetchForeign(constraints).filter { !ours.contains($0.rowID) }
        }
        // A readable row must hold every constraint exactly (the lookup strings are an index, not the values).
        return found.filter { entry in
            if case .item(let item) = entry.candidate { return Self.matches(item, constraints) }
            return true
        }
    }

    /// Keystone's items of a class holding the given lookup attributes, one per row id (the newest version).
    private func fetchKeystone(_ itemClass: ItemClass, _ lookup: [(String, String)]) throws -> [Found] {
        let query = [(ItemMapping.schemaKey, ItemMapping.schemaName), (ItemMapping.classKey, itemClass.rawValue)] + lookup
        let key = query.flatMap { [$0.0, $0.1] }
        if let found = searched[key] { return found }
        let paths = try client.search(storage.collectionPath, query)
        let found = try load(paths, sealed: true) { path, info, secret in
            let attributes = info.attributes
            let generation = attributes[ItemMapping.generationKey].flatMap(Int.init) ?? 0
            guard let rowID = attributes[ItemMapping.rowIDKey].flatMap(Int64.init) else {
                let rowID = RowIdentity.foreignRowID(path: path)
                return Found(candidate: .unreadable(itemClass: itemClass, rowID: rowID, error: EngineError(Status.decode, "a Secret Service item has no keystone:rowid")),
                             paths: [path], generation: generation, itemClass: itemClass, rowID: rowID)
            }
            if info.locked {
                return Found(candidate: .unreadable(itemClass: itemClass, rowID: rowID, error: Self.lockedError),
                             paths: [path], generation: generation, itemClass: itemClass, rowID: rowID)
            }
            do {
                let item = try ItemMapping.row(from: attributes, secret: secret, itemClass: itemClass, rowID: rowID)
                return Found(candidate: .item(item), paths: [path], generation: generation, itemClass: itemClass, rowID: rowID)
            } catch let error as EngineError {
                return Found(candidate: .unreadable(itemClass: itemClass, rowID: rowID, error: error),
                             paths: [path], generation: generation, itemClass: itemClass, rowID: rowID)
            }
        }
        searched[key] = found
        return found
    }

    /// Other clients' items read as generic passwords (compatibility mode).
    private func fetchForeign(_ constraints: [String: AttributeValue]) throws -> [Found] {
        guard let compatibility = storage.options.compatibility,
              let searches = compatibility.searches(for: constraints) else { return [] }
        var paths: [String] = []
        for search in searches {
            for path in try client.search(storage.collectionPath, search) where !paths.contains(path) { paths.append(path) }
        }
        return try load(paths) { path, info, secret in
            guard !ItemMapping.isKeystoneItem(info.attributes), info.attributes[ItemMapping.classKey] == nil,
                  let item = compatibility.row(from: info, secret: secret, rowID: RowIdentity.foreignRowID(path: path)) else { return nil }
            if info.locked {
                return Found(candidate: .unreadable(itemClass: .genericPassword, rowID: item.rowID, error: Self.lockedError),
                             paths: [path], generation: 0, itemClass: .genericPassword, rowID: item.rowID)
            }
            return Found(candidate: .item(item), paths: [path], generation: 0, itemClass: .genericPassword, rowID: item.rowID)
        }
    }

    static let lockedError = EngineError(Status.interactionNotAllowed, "the Secret Service collection is locked")

    /// Reads each path's attributes and (for unlocked items) secrets, builds rows with `make`, keeps the newest
    /// version of each row id and remembers what it saw for the commit. Unlocks first when the collection is
    /// locked and a prompt is allowed.
    ///
    /// With `sealed` (items claiming Keystone's schema), an unlocked item whose seal does not verify is left out
    /// before its secret is read (``Seal``): not returned, not a duplicate, never changed or deleted.
    private func load(_ paths: [String], sealed: Bool = false,
                      _ make: (String, SecretServiceClient.ItemInfo, Data?) throws -> Found?) throws -> [Found] {
        guard !paths.isEmpty else { return [] }
        var infos: [(String, SecretServiceClient.ItemInfo)] = []
        for path in paths {
            guard let info = try client.itemInfo(path) else { continue }  // deleted meanwhile by another program
            infos.append((path, info))
        }
        if infos.contains(where: { $0.1.locked }) {
            if try storage.handleLockedCollection() { return try load(paths, sealed: sealed, make) }
        } else {
            storage.noteUnlocked()
        }
        // Secret lengths Keystone recorded (and sealed): reads batch only those.
        var sizes: [String: Int] = [:]
        if sealed, infos.contains(where: { !$0.1.locked }) {
            let keys = try sealKeys()
            infos = infos.filter { path, info in
                guard !info.locked else { return true }  // its attributes are hidden: unreadable while locked
                switch Seal.verdict(path: path, info: info, keys: keys) {
                case .sealed:
                    sizes[path] = info.attributes[ItemMapping.sizeKey].flatMap(Int.init)
                    return true
                case .legacy:
                    return true
                case .refused(let reason):
                    storage.noteIgnored(path: path, reason: reason)
                    return false
                }
            }
        }
        let secrets = try fetchSecrets(infos.filter { !$0.1.locked }.map { ($0.0, sizes[$0.0]) })
        var byRow: [Int64: Found] = [:]
        for (path, info) in infos {
            let secret = secrets[path]
            guard var found = try make(path, info, info.locked ? nil : secret) else { continue }
            // The service returned no secret for an unlocked item: it was locked or deleted meanwhile.
            if !info.locked, secret == nil, case .item = found.candidate {
                found.candidate = .unreadable(itemClass: found.itemClass, rowID: found.rowID,
                                              error: EngineError(Status.interactionNotAllowed, "the Secret Service returned no secret for an item"))
            }
            if var existing = byRow[found.rowID] {
                if found.generation > existing.generation {
                    found.paths += existing.paths
                    byRow[found.rowID] = found
                } else {
                    existing.paths += found.paths
                    byRow[found.rowID] = existing
                }
            } else {
                byRow[found.rowID] = found
            }
        }
        for (rowID, found) in byRow {
            if var known = seen[rowID] {
                for path in found.paths where !known.paths.contains(path) { known.paths.append(path) }
                seen[rowID] = known
            } else {
                seen[rowID] = found
            }
        }
        return byRow.values.sorted { $0.rowID < $1.rowID }
    }

    /// The secrets of `items` (path, recorded length or nil), asking for several in one `GetSecrets` only while
    /// their recorded lengths fit one reply (``SecretServiceStorage/secretsPerReplyBudget``); an item of unknown
    /// length is asked for alone. A reply larger than the bus carries would make the bus disconnect the Secret
    /// Service itself.
    private func fetchSecrets(_ items: [(path: String, size: Int?)]) throws -> [String: Data] {
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
    private func sealKeys() throws -> [Seal.Key] {
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
    private func signingKey() throws -> Seal.Key {
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
    private func checkStorable(_ item: StoredItem) throws {
        if let secret = item.secret, secret.count > SecretServiceStorage.maximumSecretSize {
            throw EngineError(Status.dataTooLarge, "the secret is \(secret.count) bytes; the Secret Service storage keeps at most 16 MiB (16,777,216 bytes) per secret, as one D-Bus message must carry it. Store a larger secret in a keychain file, or keep it in a protected file and store its key here.")
        }
        // Decision: errSecUnimplemented (-4), not errSecParam: the query is well formed; this storage does not
        // implement access controls that need a person, and an app can fall back to another keychain.
        if let control = item.accessControl, control.flags.requiresAuthentication, !storage.options.allowsUnenforcedAccessControl {
            throw EngineError(Status.unimplemented, "the Secret Service cannot enforce an access control that needs a person (user presence, biometry, passcode): any program of the session could read this secret with `secret-tool lookup`, with no prompt. Store the item in a keychain file, or accept this with SecretServiceStorage.Options.allowsUnenforcedAccessControl (KEYSTONE_SECRET_SERVICE_UNENFORCED_ACCESS_CONTROL=1).")
        }
    }

    // MARK: - Writing

    func insert(_ item: StoredItem) throws -> Int64 {
        try checkStorable(item)
        let key = ClassSchema.of(item.itemClass).primaryKey(of: item.attributes)
        guard try candidates(in: item.itemClass, matching: key).isEmpty else {
            throw EngineError.duplicateItem("an item with this primary key is already in the Secret Service collection")
        }
        var row = item
        row.rowID = RowIdentity.newRowID()
        while inserted[row.rowID] != nil || seen[row.rowID] != nil { row.rowID = RowIdentity.newRowID() }
        inserted[row.rowID] = row
        return row.rowID
    }

    func replace(_ item: StoredItem) throws {
        try checkStorable(item)
        let key = ClassSchema.of(item.itemClass).primaryKey(of: item.attributes)
        let clash = try candidates(in: item.itemClass, matching: key).contains { candidate in
            switch candidate {
            case .item(let other): other.rowID != item.rowID
            case .unreadable(_, let rowID, _): rowID != item.rowID
            }
        }
        if clash { throw EngineError.duplicateItem("another item of the Secret Service collection has this primary key") }
        if inserted[item.rowID] != nil {
            inserted[item.rowID] = item
            return
        }
        let known = try seen[item.rowID] != nil || candidate(in: item.itemClass, rowID: item.rowID) != nil
        guard known else {
            throw EngineError(Status.itemNotFound, "the item to replace is no longer in the Secret Service collection")
        }
        replaced[item.rowID] = item
    }

    func delete(in itemClass: ItemClass, rowID: Int64) throws {
        if inserted.removeValue(forKey: rowID) != nil { return }
        replaced.removeValue(forKey: rowID)
        if seen[rowID] == nil { _ = try candidate(in: itemClass, rowID: rowID) }
        if seen[rowID] != nil { deleted.insert(rowID) }
    }

    // MARK: - Commit

    /// Applies the held writes: creates every new item and new version, then deletes what they supersede and what
    /// was deleted. If a creation fails, the items this commit created are deleted again and nothing else changes.
    func commit() throws {
        guard !inserted.isEmpty || !replaced.isEmpty || !deleted.isEmpty else { return }
        // Never let the service prompt in a non-interactive write: check the lock first.
        if try storage.noteLockState(client.isLocked(storage.collectionPath)) {
            guard try storage.handleLockedCollection() else {
                throw EngineError(Status.interactionNotAllowed, "the Secret Service collection is locked: nothing was written")
            }
        }
        let extra = storage.options.compatibility
        var created: [String] = []
        var superseded: [String] = []
        do {
            let key = inserted.isEmpty && replaced.isEmpty ? nil : try signingKey()
            for (_, item) in inserted.sorted(by: { $0.key < $1.key }) {
                try create(item, generation: 1, compatibility: extra, key: key!, created: &created)
            }
            for (rowID, item) in replaced.sorted(by: { $0.key < $1.key }) {
                let old = seen[rowID]
                try create(item, generation: (old?.generation ?? 0) + 1, compatibility: extra, key: key!, created: &created)
                superseded += old?.paths ?? []
            }
        } catch {
            // Our own new items: undo, nothing else touched (on a new connection if the bus closed this one).
            let undo = client.isClosed ? try? SecretServiceClient.connect(address: client.address, callTimeout: client.callTimeout) : client
            for path in created { try? undo?.deleteItem(path) }
            throw error
        }
        for path in superseded { try? client.deleteItem(path) }  // a leftover is an older version readers ignore
        for rowID in deleted.sorted() {
            for path in seen[rowID]?.paths ?? [] { try client.deleteItem(path) }
        }
    }

    /// Creates an item, then seals it (its object path is known only once it exists); appends its path to
    /// `created` as soon as it exists. Until sealed, readers ignore it.
    ///
    /// - Throws: `errSecDataTooLarge` when the bus dropped the message for its size.
    private func create(_ item: StoredItem, generation: Int, compatibility: Compatibility?, key: Seal.Key,
                        created: inout [String]) throws {
        let extra = compatibility?.attributes(for: item) ?? []
        var attributes = ItemMapping.attributes(of: item, generation: generation, extra: extra)
        let secret = item.secret ?? Data()
        let path: String
        do {
            path = try client.createItem(in: storage.collectionPath, label: ItemMapping.label(of: item), attributes: attributes,
                                         secret: secret, contentType: ItemMapping.contentType(secret))
        } catch let error as EngineError where client.droppedForSize(error) {
            throw EngineError(Status.dataTooLarge, "the session bus dropped the item (a secret of \(secret.count) bytes) for its size and closed the connection, while the Secret Service runs: the bus's max_message_size (its dbus-daemon configuration) is lower than this secret needs. Store a smaller secret, or raise the bus's limits.")
        }
        created.append(path)
        attributes.append((Seal.attribute, Seal.seal(path: path, attributes: attributes, key: key)))
        try client.setAttributes(path, attributes)
    }
}

/// Row ids in the Secret Service: Keystone's items carry theirs; other programs' items get one from their object path.
enum RowIdentity {
    /// Bit 62 marks ids derived from an object path.
    static let foreignBit: Int64 = 1 << 62

    /// A new row id: microseconds since 1970 shifted left by 10, plus 10 random bits. Increasing with time (so
    /// rows list in creation order, as in Apple's keychain), unique across processes without a counter, below
    /// bit 62 until the year 2116.
    static func newRowID() -> Int64 {
        let microseconds = Int64(Date().timeIntervalSince1970 * 1_000_000)
        return (microseconds << 10 | Int64.random(in: 0..<1024)) & (foreignBit - 1)
    }

    static func isForeign(_ rowID: Int64) -> Bool { rowID & foreignBit != 0 }

    /// The row id of another program's item: FNV-1a of its object path, with bit 62 set.
    static func foreignRowID(path: String) -> Int64 {
        Int64(bitPattern: fnv1a(path) & UInt64(foreignBit - 1)) | foreignBit
    }
}

/// FNV-1a, 64 bits: stable names for object paths and lock files (not a cryptographic digest).
func fnv1a(_ text: String) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in text.utf8 {
        hash ^= UInt64(byte)
        hash = hash &* 0x100_0000_01b3
    }
    return hash
}
