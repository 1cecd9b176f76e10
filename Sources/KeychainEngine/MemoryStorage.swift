import Foundation

/// A keychain storage in memory: the tables, their primary-key indexes, and a lock state.
///
/// Every primary-key attribute has an index (value → rows), so a lookup by any primary-key value costs
/// the same whatever the table's size. Writes are atomic through an undo log.
public final class MemoryStorage: KeychainStorage, @unchecked Sendable {
    // @unchecked Sendable: all mutable state is reached only while `lock` is held.

    private struct Table {
        var rows: [Int64: StoredItem] = [:]
        var primaryKeys: [[AttributeValue]: Int64] = [:]
        /// The primary key without the access group → rows: the usual query (class, service, account) names
        /// every key attribute but the group, and must not depend on the table's size either.
        var groupFreeKeys: [[AttributeValue]: Set<Int64>] = [:]
        /// attribute key → value → row ids.
        var indexes: [String: [AttributeValue: Set<Int64>]] = [:]
        var nextRowID: Int64 = 1
    }

    private let lock = NSRecursiveLock()
    private var tables: [ItemClass: Table] = [:]
    private var state: LockState

    /// Creates an empty storage in `lockState`.
    public init(lockState: LockState = .unlocked) {
        self.state = lockState
        for cls in ItemClass.allCases { tables[cls] = Table() }
    }

    /// The lock state; set it to simulate locking and unlocking the device.
    public var lockState: LockState {
        get { lock.lock(); defer { lock.unlock() }; return state }
        set { lock.lock(); defer { lock.unlock() }; state = newValue }
    }

    /// The number of rows in all tables.
    public var count: Int {
        lock.lock(); defer { lock.unlock() }
        return tables.values.reduce(0) { $0 + $1.rows.count }
    }

    public func read<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        lock.lock(); defer { lock.unlock() }
        return try body(Transaction(storage: self))
    }

    public func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        lock.lock(); defer { lock.unlock() }
        let transaction = Transaction(storage: self)
        do {
            return try body(transaction)
        } catch {
            transaction.rollBack()
            throw error
        }
    }

    // MARK: - Table operations (lock held)

    fileprivate func candidates(_ cls: ItemClass, _ constraints: [String: AttributeValue]) -> [Candidate] {
        guard let table = tables[cls] else { return [] }
        let schema = ClassSchema.of(cls)
        if constraints.count == schema.primaryKey.count {
            let key = schema.primaryKeyValues(of: constraints)
            guard let id = table.primaryKeys[key], let row = table.rows[id] else { return [] }
            return [.item(row)]
        }
        var best: Set<Int64>?
        if constraints.count == schema.primaryKey.count - 1, constraints[Key.accessGroup] == nil {
            // Exact: the composite key equals the constraints, so no filtering is needed.
            let ids = table.groupFreeKeys[Self.groupFreeKey(schema, constraints)] ?? []
            return ids.sorted().compactMap { table.rows[$0].map { .item($0) } }
        }
        // Otherwise pick the most selective index among the constraints, then filter.
        if best == nil {
            for (attribute, value) in constraints {
                let ids = table.indexes[attribute]?[value] ?? []
                if best == nil || ids.count < best!.count { best = ids }
                if best!.isEmpty { return [] }
            }
        }
        let rows: [StoredItem]
        if let ids = best {
            rows = ids.sorted().compactMap { table.rows[$0] }
        } else {
            rows = table.rows.keys.sorted().compactMap { table.rows[$0] }
        }
        return rows.filter { row in
            constraints.allSatisfy { key, value in
                (row.attributes[key] ?? schema.attributes[key]?.type.emptyValue) == value
            }
        }.map { .item($0) }
    }

    fileprivate func row(_ cls: ItemClass, _ id: Int64) -> StoredItem? { tables[cls]?.rows[id] }

    fileprivate func insertRow(_ item: StoredItem, id: Int64? = nil) throws -> Int64 {
        let cls = item.itemClass
        let key = item.primaryKey
        if tables[cls]!.primaryKeys[key] != nil {
            throw EngineError.duplicateItem("an item with the same primary key exists")
        }
        var row = item
        row.rowID = id ?? tables[cls]!.nextRowID
        tables[cls]!.nextRowID = max(tables[cls]!.nextRowID, row.rowID + 1)
        tables[cls]!.rows[row.rowID] = row
        tables[cls]!.primaryKeys[key] = row.rowID
        index(row, add: true)
        return row.rowID
    }

    fileprivate func removeRow(_ cls: ItemClass, _ id: Int64) -> StoredItem? {
        guard let row = tables[cls]!.rows.removeValue(forKey: id) else { return nil }
        tables[cls]!.primaryKeys.removeValue(forKey: row.primaryKey)
        index(row, add: false)
        return row
    }

    private static func groupFreeKey(_ schema: ClassSchema, _ attributes: [String: AttributeValue]) -> [AttributeValue] {
        schema.primaryKey.compactMap { key in
            key == Key.accessGroup ? nil : (attributes[key] ?? schema.attributes[key]!.type.emptyValue)
        }
    }

    /// Replaces a row in place when its primary key is unchanged (no index work); otherwise re-indexes it.
    fileprivate func replaceRow(_ item: StoredItem) throws -> StoredItem {
        guard let old = tables[item.itemClass]!.rows[item.rowID] else { throw EngineError.itemNotFound }
        if old.primaryKey == item.primaryKey {
            tables[item.itemClass]!.rows[item.rowID] = item
            return old
        }
        _ = removeRow(item.itemClass, item.rowID)
        do {
            _ = try insertRow(item, id: item.rowID)
        } catch {
            _ = try? insertRow(old, id: old.rowID)
            throw error
        }
        return old
    }

    private func index(_ row: StoredItem, add: Bool) {
        let schema = ClassSchema.of(row.itemClass)
        let groupFree = Self.groupFreeKey(schema, row.attributes)
        if add {
            tables[row.itemClass]!.groupFreeKeys[groupFree, default: []].insert(row.rowID)
        } else {
            tables[row.itemClass]!.groupFreeKeys[groupFree]?.remove(row.rowID)
            if tables[row.itemClass]!.groupFreeKeys[groupFree]?.isEmpty == true { tables[row.itemClass]!.groupFreeKeys[groupFree] = nil }
        }
        for attribute in schema.primaryKey {
            let value = row.attributes[attribute] ?? schema.attributes[attribute]!.type.emptyValue
            if add {
                tables[row.itemClass]!.indexes[attribute, default: [:]][value, default: []].insert(row.rowID)
            } else {
                tables[row.itemClass]!.indexes[attribute]?[value]?.remove(row.rowID)
                if tables[row.itemClass]!.indexes[attribute]?[value]?.isEmpty == true {
                    tables[row.itemClass]!.indexes[attribute]?[value] = nil
                }
            }
        }
    }

    private final class Transaction: StorageWriter {
        private enum Undo {
            case removeInserted(ItemClass, Int64)
            case restore(StoredItem)
        }

        let storage: MemoryStorage
        private var undo: [Undo] = []

        init(storage: MemoryStorage) { self.storage = storage }

        func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate] {
            storage.candidates(itemClass, constraints)
        }

        func forEachCandidate(in itemClass: ItemClass, matching constraints: [String: AttributeValue],
                              _ body: (Candidate) throws -> Bool) throws {
            // The same rows as `candidates`, handed out one by one: a limit-one search stops at the first.
            for candidate in storage.candidates(itemClass, constraints) {
                guard try body(candidate) else { return }
            }
        }

        func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? {
            storage.row(itemClass, rowID).map { .item($0) }
        }

        func insert(_ item: StoredItem) throws -> Int64 {
            let id = try storage.insertRow(item)
            undo.append(.removeInserted(item.itemClass, id))
            return id
        }

        func replace(_ item: StoredItem) throws {
            let old = try storage.replaceRow(item)
            undo.append(.restore(old))
        }

        func delete(in itemClass: ItemClass, rowID: Int64) throws {
            if let old = storage.removeRow(itemClass, rowID) { undo.append(.restore(old)) }
        }

        func rollBack() {
            for step in undo.reversed() {
                switch step {
                case .removeInserted(let cls, let id):
                    _ = storage.removeRow(cls, id)
                case .restore(let old):
                    _ = storage.removeRow(old.itemClass, old.rowID)
                    _ = try? storage.insertRow(old, id: old.rowID)
                }
            }
            undo.removeAll()
        }
    }
}
