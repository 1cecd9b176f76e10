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

    unowned let storage: SecretServiceStorage
    let client: SecretServiceClient
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
    var loadedKeys: [Seal.Key]?

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
            guard schema.storedValue(of: attribute, in: item.attributes) == wanted else { return false }
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
    /// before its secret is read (`Seal`): not returned, not a duplicate, never changed or deleted.
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
        } catch let error as EngineError where secret.count >= 32 << 10 && client.droppedForSize(error) {
            // (No bus drops messages under 32 KiB: a smaller write that lost its connection lost it for another reason.)
            throw EngineError(Status.dataTooLarge, "the session bus dropped the item (a secret of \(secret.count) bytes) for its size and closed the connection, while the Secret Service runs: the bus's max_message_size (its dbus-daemon configuration) is lower than this secret needs. Store a smaller secret, or raise the bus's limits.")
        }
        created.append(path)
        attributes.append((Seal.attribute, Seal.seal(path: path, attributes: attributes, key: key)))
        try client.setAttributes(path, attributes)
    }
}
