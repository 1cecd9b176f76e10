import Foundation

/// A keychain storage in memory: the tables, their primary-key indexes, and a lock state.
///
/// Rows are kept compact (a small array of interned attribute ids and values, not a `String`-keyed
/// dictionary) and indexed by hashes: the primary key without the access group (the usual query names every
/// key attribute but the group), and each primary-key attribute but the group and `sync`. A lookup by the
/// primary key, with or without the group, costs the same whatever the table's size. Index hits are always
/// compared with the row's values, so a hash collision never returns a wrong row. Writes are atomic through
/// an undo log.
public final class MemoryStorage: KeychainStorage, @unchecked Sendable {
    // @unchecked Sendable: all mutable state is reached only while `lock` is held.

    /// One row. The attributes nearly every row has (group, accessibility, `sync`, creation and modification
    /// dates) are fields when they have their usual type; every other attribute is encoded in `encoded`
    /// (attribute id, type, value; sorted by id). A row reads back exactly as written either way.
    struct Row {
        /// The other attributes: per attribute its id (2 bytes), a type tag and the value (strings and data
        /// with a length, numbers and dates in 8 bytes, Booleans in 1), sorted by id.
        private(set) var encoded: ContiguousArray<UInt8> = []
        var group: String?
        var secret: Data?
        /// Seconds since the reference date; NaN when absent (or in `encoded`).
        var created = Double.nan
        var modified = Double.nan
        /// The access control's flags and accessibility (nil: no access control).
        private var controlFlags: UInt = 0
        private var controlAccessibility: Accessibility?
        var accessible: Accessibility?
        var sync: Bool?

        init(values: ContiguousArray<(AttributeID, AttributeValue)>, secret: Data?, accessControl: AccessControl?) {
            self.secret = secret
            self.accessControl = accessControl
            var rest: [(AttributeID, AttributeValue)] = []
            for (id, value) in values where !lift(id, value) { rest.append((id, value)) }
            encoded = Self.encode(rest)
        }

        init(_ item: StoredItem) {
            secret = item.secret
            accessControl = item.accessControl
            var rest: [(AttributeID, AttributeValue)] = []
            for (key, value) in item.attributes {
                let id = AttributeID.of(key)
                if !lift(id, value) { rest.append((id, value)) }
            }
            encoded = Self.encode(rest)
        }

        var accessControl: AccessControl? {
            get { controlAccessibility.map { AccessControl(accessibility: $0, flags: AccessControlFlags(rawValue: controlFlags)) } }
            set {
                controlAccessibility = newValue?.accessibility
                controlFlags = newValue?.flags.rawValue ?? 0
            }
        }

        /// Stores `value` in its field when `id` has one and the value its usual type.
        private mutating func lift(_ id: AttributeID, _ value: AttributeValue) -> Bool {
            switch (id, value) {
            case (.accessGroup, .string(let s)): group = s
            case (.accessible, .string(let s)):
                guard let a = Accessibility(rawValue: s) else { return false }
                accessible = a
            case (.synchronizable, .bool(let b)): sync = b
            case (.creationDate, .date(let d)): created = d.timeIntervalSinceReferenceDate
            case (.modificationDate, .date(let d)): modified = d.timeIntervalSinceReferenceDate
            default: return false
            }
            return true
        }

        /// The value of `id`, if the row has one.
        func value(_ id: AttributeID) -> AttributeValue? {
            switch id {
            case .accessGroup: if let group { return .string(group) }
            case .accessible: if let accessible { return .string(accessible.rawValue) }
            case .synchronizable: if let sync { return .bool(sync) }
            case .creationDate: if !created.isNaN { return .date(Date(timeIntervalSinceReferenceDate: created)) }
            case .modificationDate: if !modified.isNaN { return .date(Date(timeIntervalSinceReferenceDate: modified)) }
            default: break
            }
            var found: AttributeValue?
            Self.decode(encoded) { entry, value in
                if entry == id { found = value(); return false }
                return entry < id
            }
            return found
        }

        /// Sets (or, with nil, removes) the value of `id`.
        mutating func set(_ id: AttributeID, _ value: AttributeValue?) {
            switch id {
            case .accessGroup: group = nil
            case .accessible: accessible = nil
            case .synchronizable: sync = nil
            case .creationDate: created = .nan
            case .modificationDate: modified = .nan
            default: break
            }
            var rest = others.filter { $0.0 != id }
            if let value, !lift(id, value) { rest.append((id, value)) }
            encoded = Self.encode(rest)
        }

        /// The attributes in `encoded`.
        var others: [(AttributeID, AttributeValue)] {
            var result: [(AttributeID, AttributeValue)] = []
            Self.decode(encoded) { id, value in result.append((id, value())); return true }
            return result
        }

        /// The accessibility (`pdmn`), `whenUnlocked` if unreadable, as ``StoredItem/accessibility``.
        var accessibility: Accessibility { accessible ?? .whenUnlocked }

        func item(_ cls: ItemClass, _ rowID: Int64) -> StoredItem {
            var attributes: [String: AttributeValue] = [:]
            attributes.reserveCapacity(8)
            Self.decode(encoded) { id, value in attributes[id.name] = value(); return true }
            if let group { attributes[Key.accessGroup] = .string(group) }
            if let accessible { attributes[Key.accessible] = .string(accessible.rawValue) }
            if let sync { attributes[Key.synchronizable] = .bool(sync) }
            if !created.isNaN { attributes[Key.creationDate] = .date(Date(timeIntervalSinceReferenceDate: created)) }
            if !modified.isNaN { attributes[Key.modificationDate] = .date(Date(timeIntervalSinceReferenceDate: modified)) }
            return StoredItem(itemClass: cls, rowID: rowID, attributes: attributes, secret: secret, accessControl: accessControl)
        }

        // MARK: Encoding

        private static func encode(_ values: [(AttributeID, AttributeValue)]) -> ContiguousArray<UInt8> {
            var bytes = ContiguousArray<UInt8>()
            func length(_ n: Int) {
                var n = UInt(n)
                while n >= 0x80 { bytes.append(UInt8(n & 0x7F) | 0x80); n >>= 7 }
                bytes.append(UInt8(n))
            }
            func word(_ w: UInt64) { for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: w >> UInt64(shift))) } }
            for (id, value) in values.sorted(by: { $0.0 < $1.0 }) {
                bytes.append(UInt8(truncatingIfNeeded: id.raw))
                bytes.append(UInt8(truncatingIfNeeded: id.raw >> 8))
                switch value {
                case .string(let s):
                    bytes.append(0)
                    length(s.utf8.count)
                    bytes.append(contentsOf: s.utf8)
                case .data(let d):
                    bytes.append(1)
                    length(d.count)
                    bytes.append(contentsOf: d)
                case .number(let n):
                    bytes.append(2)
                    word(UInt64(bitPattern: n))
                case .bool(let b):
                    bytes.append(3)
                    bytes.append(b ? 1 : 0)
                case .date(let d):
                    bytes.append(4)
                    word(d.timeIntervalSinceReferenceDate.bitPattern)
                }
            }
            return bytes
        }

        /// Visits the encoded attributes in id order; `body` gets the id and a function decoding the value,
        /// and returns false to stop.
        private static func decode(_ bytes: ContiguousArray<UInt8>, _ body: (AttributeID, () -> AttributeValue) -> Bool) {
            bytes.withUnsafeBufferPointer { b in
                var i = 0
                func length() -> Int {
                    var n = 0, shift = 0
                    while true {
                        let byte = b[i]; i += 1
                        n |= Int(byte & 0x7F) << shift
                        if byte < 0x80 { return n }
                        shift += 7
                    }
                }
                func word(_ at: Int) -> UInt64 {
                    var w: UInt64 = 0
                    for k in 0..<8 { w |= UInt64(b[at + k]) << UInt64(8 * k) }
                    return w
                }
                while i < b.count {
                    let id = AttributeID(raw: UInt16(b[i]) | UInt16(b[i + 1]) << 8)
                    let tag = b[i + 2]
                    i += 3
                    let start: Int, end: Int
                    switch tag {
                    case 0, 1:
                        let n = length()
                        start = i; end = i + n
                    case 2, 4: start = i; end = i + 8
                    default: start = i; end = i + 1
                    }
                    i = end
                    let more = body(id) {
                        switch tag {
                        case 0: return .string(String(decoding: UnsafeBufferPointer(rebasing: b[start..<end]), as: UTF8.self))
                        case 1: return .data(Data(UnsafeBufferPointer(rebasing: b[start..<end])))
                        case 2: return .number(Int64(bitPattern: word(start)))
                        case 3: return .bool(b[start] != 0)
                        default: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: word(start))))
                        }
                    }
                    if !more { return }
                }
            }
        }
    }

    /// Row ids by hash: most hashes have one row, kept without a set. Hashes and ids are stored in 32 bits
    /// (a hit is always compared with the row's values; a memory storage holds far fewer rows).
    struct HashIndex {
        private var single: [UInt32: UInt32] = [:]
        private var multi: [UInt32: Set<UInt32>] = [:]

        mutating func insert(_ fullHash: Int, _ rowID: Int64) {
            let hash = UInt32(truncatingIfNeeded: fullHash), id = UInt32(rowID)
            if let other = single.removeValue(forKey: hash) {
                multi[hash] = [other, id]
            } else if multi[hash] != nil {
                multi[hash]!.insert(id)
            } else {
                single[hash] = id
            }
        }

        mutating func remove(_ fullHash: Int, _ rowID: Int64) {
            let hash = UInt32(truncatingIfNeeded: fullHash), id = UInt32(rowID)
            if single[hash] == id { single[hash] = nil; return }
            guard multi[hash] != nil else { return }
            multi[hash]!.remove(id)
            if multi[hash]!.count == 1 { single[hash] = multi.removeValue(forKey: hash)!.first! }
        }

        /// How many rows have `hash`.
        func count(_ fullHash: Int) -> Int {
            let hash = UInt32(truncatingIfNeeded: fullHash)
            return single[hash] != nil ? 1 : multi[hash]?.count ?? 0
        }

        /// Visits the rows with `hash` in row-id order until `body` returns false; allocates nothing for one row.
        func forEachID(_ fullHash: Int, _ body: (Int64) throws -> Bool) rethrows {
            let hash = UInt32(truncatingIfNeeded: fullHash)
            if let id = single[hash] { _ = try body(Int64(id)); return }
            guard let ids = multi[hash] else { return }
            for id in ids.sorted() { guard try body(Int64(id)) else { return } }
        }

        /// The rows with `hash`, in row-id order.
        func ids(_ fullHash: Int) -> [Int64] {
            var result: [Int64] = []
            forEachID(fullHash) { result.append($0); return true }
            return result
        }
    }

    /// Rows by id in fixed-size chunks: growing never copies more than one chunk, and the unused capacity
    /// stays under one chunk.
    struct RowStore {
        static let chunkSize = 4096
        private var chunks: [[Row?]] = []
        private(set) var count = 0

        subscript(id: Int64) -> Row? {
            get {
                guard id >= 1, id <= Int64(count) else { return nil }
                let i = Int(id - 1)
                return chunks[i / Self.chunkSize][i % Self.chunkSize]
            }
            set {
                let i = Int(id - 1)
                while count <= i {
                    if count % Self.chunkSize == 0 {
                        var chunk: [Row?] = []
                        chunk.reserveCapacity(Self.chunkSize)
                        chunks.append(chunk)
                    }
                    chunks[chunks.count - 1].append(nil)
                    count += 1
                }
                chunks[i / Self.chunkSize][i % Self.chunkSize] = newValue
            }
        }

        /// Changes row `id` in place (it must exist).
        mutating func modify(_ id: Int64, _ body: (inout Row) -> Void) {
            let i = Int(id - 1)
            body(&chunks[i / Self.chunkSize][i % Self.chunkSize]!)
        }
    }

    struct Table {
        let schema: ClassSchema
        /// The primary-key attributes but the access group, in schema order.
        let groupFreeKey: [AttributeID]
        /// The attributes with an index of their own: the primary key but the group and `sync`.
        let indexed: [AttributeID]
        /// Deleted rows leave nil.
        var rows = RowStore()
        var liveCount = 0
        var groupFree = HashIndex()
        var indexes: [AttributeID: HashIndex] = [:]
        var nextRowID: Int64 = 1

        init(_ cls: ItemClass) {
            schema = ClassSchema.of(cls)
            groupFreeKey = schema.primaryKey.filter { $0 != Key.accessGroup }.map(AttributeID.of)
            indexed = schema.primaryKey.filter { $0 != Key.accessGroup && $0 != Key.synchronizable }.map(AttributeID.of)
        }

        func row(_ id: Int64) -> Row? { rows[id] }

        /// The value of `id` in `row`, a missing attribute counting as its type's empty value (``ClassSchema/storedValue(_:of:)``).
        func value(_ row: Row, _ id: AttributeID) -> AttributeValue? {
            schema.storedValue(row.value(id), of: id.name)
        }

        /// The hash of the primary key but the group, `value` giving each attribute's value (missing ones count as
        /// empty, ``ClassSchema/storedValue(_:of:)``).
        func groupFreeHash(_ value: (AttributeID) -> AttributeValue?) -> Int {
            var hasher = Hasher()
            for id in groupFreeKey { hasher.combine(schema.storedValue(value(id), of: id.name)) }
            return hasher.finalize()
        }

        func samePrimaryKey(_ a: Row, _ b: Row) -> Bool {
            for key in schema.primaryKey {
                let id = AttributeID.of(key)
                if value(a, id) != value(b, id) { return false }
            }
            return true
        }

        /// The row holding `row`'s primary key, other than `except`.
        func primaryKeyHolder(of row: Row, except: Int64? = nil) -> Int64? {
            let hash = groupFreeHash { row.value($0) }
            for id in groupFree.ids(hash) where id != except {
                if let other = self.row(id), samePrimaryKey(other, row) { return id }
            }
            return nil
        }

        mutating func index(_ row: Row, _ id: Int64, add: Bool) {
            let hash = groupFreeHash { row.value($0) }
            if add { groupFree.insert(hash, id) } else { groupFree.remove(hash, id) }
            for attribute in indexed {
                let h = (value(row, attribute) ?? .string("")).hashValue
                if add { indexes[attribute, default: HashIndex()].insert(h, id) } else { indexes[attribute]?.remove(h, id) }
            }
        }

        /// Inserts `row` under `id` (a new id when nil); fails with errSecDuplicateItem on a taken primary key.
        mutating func insert(_ row: Row, id: Int64? = nil) throws -> Int64 {
            guard let rowID = try insertUnlessTaken(row, id: id) else {
                throw EngineError.duplicateItem("an item with the same primary key exists")
            }
            return rowID
        }

        /// The table's UNIQUE check: inserts `row` under `id` (a new id when nil) and returns its row id, or returns
        /// nil and changes nothing when a row holds its primary key.
        mutating func insertUnlessTaken(_ row: Row, id: Int64? = nil) throws -> Int64? {
            if primaryKeyHolder(of: row) != nil { return nil }
            let rowID = id ?? nextRowID
            guard rowID <= Int64(UInt32.max) else { throw EngineError(Status.allocate, "the memory storage is full") }
            nextRowID = max(nextRowID, rowID + 1)
            rows[rowID] = row
            liveCount += 1
            index(row, rowID, add: true)
            return rowID
        }

        mutating func remove(_ id: Int64) -> Row? {
            guard let row = row(id) else { return nil }
            index(row, id, add: false)
            rows[id] = nil
            liveCount -= 1
            return row
        }

        /// Replaces row `id` in place when its primary key is unchanged, else re-indexes it.
        mutating func replace(_ id: Int64, with row: Row) throws -> Row {
            guard let old = self.row(id) else { throw EngineError.itemNotFound }
            if samePrimaryKey(old, row) {
                rows[id] = row
                return old
            }
            if primaryKeyHolder(of: row, except: id) != nil { throw EngineError.duplicateItem("an item with the same primary key exists") }
            _ = remove(id)
            _ = try insert(row, id: id)
            return old
        }

        /// The ids of the rows whose values equal every constraint, in row-id order.
        func matching(_ constraints: [AttributeID: AttributeValue]) -> [Int64] {
            var ids: [Int64]?
            if groupFreeKey.allSatisfy({ constraints[$0] != nil }) {
                ids = groupFree.ids(groupFreeHash { constraints[$0] })
            } else {
                // The most selective attribute index among the constraints, else every row.
                var best: (AttributeID, Int, Int)?
                for attribute in indexed {
                    guard let value = constraints[attribute] else { continue }
                    let hash = value.hashValue
                    let count = indexes[attribute]?.count(hash) ?? 0
                    if best == nil || count < best!.2 { best = (attribute, hash, count) }
                }
                if let (attribute, hash, count) = best {
                    if count == 0 { return [] }
                    ids = indexes[attribute]?.ids(hash) ?? []
                }
            }
            let candidates = ids ?? (1...max(1, Int64(rows.count))).filter { rows[$0] != nil }
            if constraints.isEmpty { return candidates }
            return candidates.filter { id in
                guard let row = row(id) else { return false }
                return constraints.allSatisfy { value(row, $0.key) == $0.value }
            }
        }
    }

    private let lock = NSRecursiveLock()
    private var tables: [Table]
    private var state: LockState

    /// Creates an empty storage in `lockState`.
    public init(lockState: LockState = .unlocked) {
        self.state = lockState
        tables = ItemClass.allCases.map(Table.init)
    }

    /// The lock state; set it to simulate locking and unlocking the device.
    public var lockState: LockState {
        get { lock.lock(); defer { lock.unlock() }; return state }
        set { lock.lock(); defer { lock.unlock() }; state = newValue }
    }

    /// The number of rows in all tables.
    public var count: Int {
        lock.lock(); defer { lock.unlock() }
        return tables.reduce(0) { $0 + $1.liveCount }
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

    /// Runs `body` on the table of `cls` and the lock state, under the lock: the engine's compiled fast path.
    /// `body` must leave the table unchanged when it throws.
    func withTable<T>(_ cls: ItemClass, _ body: (inout Table, LockState) throws -> T) rethrows -> T {
        lock.lock(); defer { lock.unlock() }
        return try body(&tables[Self.index(cls)], state)
    }

    static func index(_ cls: ItemClass) -> Int {
        switch cls {
        case .genericPassword: return 0
        case .internetPassword: return 1
        case .certificate: return 2
        case .key: return 3
        case .identity: return 4
        }
    }

    // MARK: - Transactions (lock held)

    fileprivate func constraintIDs(_ constraints: [String: AttributeValue]) -> [AttributeID: AttributeValue] {
        var result: [AttributeID: AttributeValue] = [:]
        result.reserveCapacity(constraints.count)
        for (key, value) in constraints { result[AttributeID.of(key)] = value }
        return result
    }

    private final class Transaction: StorageWriter {
        private enum Undo {
            case removeInserted(ItemClass, Int64)
            case restore(ItemClass, Int64, Row)
        }

        let storage: MemoryStorage
        private var undo: [Undo] = []

        init(storage: MemoryStorage) { self.storage = storage }

        private func table(_ cls: ItemClass) -> Table { storage.tables[MemoryStorage.index(cls)] }

        func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate] {
            var result: [Candidate] = []
            try forEachCandidate(in: itemClass, matching: constraints) { result.append($0); return true }
            return result
        }

        func forEachCandidate(in itemClass: ItemClass, matching constraints: [String: AttributeValue],
                              _ body: (Candidate) throws -> Bool) throws {
            // Rows are made into items one at a time: a limit-one search stops at the first.
            let table = table(itemClass)
            for id in table.matching(storage.constraintIDs(constraints)) {
                guard let row = table.row(id) else { continue }
                guard try body(.item(row.item(itemClass, id))) else { return }
            }
        }

        func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? {
            table(itemClass).row(rowID).map { .item($0.item(itemClass, rowID)) }
        }

        func insert(_ item: StoredItem) throws -> Int64 {
            let id = try storage.tables[MemoryStorage.index(item.itemClass)].insert(Row(item))
            undo.append(.removeInserted(item.itemClass, id))
            return id
        }

        func replace(_ item: StoredItem) throws {
            let old = try storage.tables[MemoryStorage.index(item.itemClass)].replace(item.rowID, with: Row(item))
            undo.append(.restore(item.itemClass, item.rowID, old))
        }

        func delete(in itemClass: ItemClass, rowID: Int64) throws {
            if let old = storage.tables[MemoryStorage.index(itemClass)].remove(rowID) { undo.append(.restore(itemClass, rowID, old)) }
        }

        func upsert(_ item: StoredItem, merge: (Candidate) throws -> StoredItem?) throws -> UpsertOutcome {
            let index = MemoryStorage.index(item.itemClass)
            let row = Row(item)
            guard let id = storage.tables[index].primaryKeyHolder(of: row) else {
                return .inserted(rowID: try insert(item))
            }
            let existing = storage.tables[index].row(id)!.item(item.itemClass, id)
            guard var replacement = try merge(.item(existing)) else { return .kept(rowID: id) }
            replacement.rowID = id
            try replace(replacement)
            return .replaced(rowID: id)
        }

        func rollBack() {
            for step in undo.reversed() {
                switch step {
                case .removeInserted(let cls, let id):
                    _ = storage.tables[MemoryStorage.index(cls)].remove(id)
                case .restore(let cls, let id, let old):
                    _ = storage.tables[MemoryStorage.index(cls)].remove(id)
                    _ = try? storage.tables[MemoryStorage.index(cls)].insert(old, id: id)
                }
            }
            undo.removeAll()
        }
    }
}

/// An attribute key interned as a small number: the keys of every class schema first, others as they come.
struct AttributeID: Hashable, Comparable, Sendable {
    let raw: UInt16

    static func < (a: AttributeID, b: AttributeID) -> Bool { a.raw < b.raw }

    private static let registry = Locked<(ids: [String: UInt16], names: [String])>({
        var names: [String] = []
        for cls in ItemClass.allCases { names.append(contentsOf: ClassSchema.of(cls).attributes.keys) }
        names = Array(Set(names)).sorted()
        names.append(KeychainEngine.enrollmentAttribute)
        var ids: [String: UInt16] = [:]
        for (i, name) in names.enumerated() { ids[name] = UInt16(i) }
        return (ids, names)
    }())
    private static let known: [String: UInt16] = registry.current.ids
    private static let knownNames: [String] = registry.current.names

    /// The id of `key`, interning it when new.
    static func of(_ key: String) -> AttributeID {
        if let raw = known[key] { return AttributeID(raw: raw) }
        return registry.withLock { r in
            if let raw = r.ids[key] { return AttributeID(raw: raw) }
            let raw = UInt16(r.names.count)
            r.names.append(key)
            r.ids[key] = raw
            return AttributeID(raw: raw)
        }
    }

    /// The key.
    var name: String {
        if Int(raw) < Self.knownNames.count { return Self.knownNames[Int(raw)] }
        return Self.registry.withLock { $0.names[Int(raw)] }
    }

    static let accessible = AttributeID.of(Key.accessible)
    static let accessGroup = AttributeID.of(Key.accessGroup)
    static let synchronizable = AttributeID.of(Key.synchronizable)
    static let creationDate = AttributeID.of(Key.creationDate)
    static let modificationDate = AttributeID.of(Key.modificationDate)
}
