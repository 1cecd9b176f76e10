import Foundation
import KeychainEngine

extension StorageContract {
    /// Searches: every shape of query the engine issues, and laziness.
    static let queryClauses: [Clause] = [
        Clause("every query shape the engine issues (full and partial primary keys, no constraint, a row id, the upsert lookup) gives exactly the rows of a reference model: same row ids, in row-id order, String and Data alike, a missing attribute as empty") { factory, c in
            let storage = try factory.makeStorage()
            let written: [StoredItem] = try storage.write { tx in
                try shapeRows().map { item in
                    var stored = item
                    stored.rowID = try tx.insert(item)
                    return stored
                }
            }
            // A missing attribute is its empty value for the UNIQUE constraint too: service "" and no service collide.
            var noService = row("unused", "d")
            noService.attributes[Key.service] = nil
            let duplicate = c.status { _ = try storage.write { try $0.insert(noService) } }
            c.check(duplicate == Status.duplicateItem,
                    "a row without a service, account d, gave status \(duplicate), not errSecDuplicateItem (a row with service \"\" and account d exists)")

            try storage.read { reader in
                for itemClass in [ItemClass.genericPassword, .internetPassword] {
                    let rows = written.filter { $0.itemClass == itemClass }
                    for constraints in queryShapes(itemClass, rows) {
                        let expected = rows.filter { matches($0, constraints) }.map(\.rowID).sorted()
                        let all = try reader.candidates(in: itemClass, matching: constraints)
                        checkShape(all, expected, written, "candidates", itemClass, constraints, &c)
                        var visited: [Candidate] = []
                        try reader.forEachCandidate(in: itemClass, matching: constraints) { visited.append($0); return true }
                        checkShape(visited, expected, written, "forEachCandidate", itemClass, constraints, &c)
                    }
                }
                // By row id: each row exactly as written; an id never used, or of another class's table, finds nothing.
                for item in written {
                    let found = try reader.candidate(in: item.itemClass, rowID: item.rowID)
                    guard case .item(let back)? = found else {
                        c.check(false, "candidate(in: \(item.itemClass), rowID: \(item.rowID)) is \(describe(found)), not the row written")
                        continue
                    }
                    c.check(back == item, "candidate(in: \(item.itemClass), rowID: \(item.rowID)) differs from the row written")
                }
                let unused = (written.map(\.rowID).max() ?? 0) + 1_000
                c.check(try reader.candidate(in: .genericPassword, rowID: unused) == nil, "candidate(rowID: \(unused)), an id never used, found a row")
                c.check(try reader.candidate(in: .certificate, rowID: written[0].rowID) == nil,
                        "candidate(in: certificate, rowID: \(written[0].rowID)) found a row in a table that holds none")
            }

            // The upsert lookup: each row's primary key, as written, with String and Data swapped, and with missing
            // attributes given as their empty values, finds that row and only it (merge keeps it: nothing changes).
            // Decision: a storage may run a write body more than once (etcd runs it again when it guessed wrong or
            // another machine changed what it read): only what the last run saw is checked.
            var lookups: [(item: StoredItem, variant: String, outcome: UpsertOutcome, seen: [Int64])] = []
            var fresh: (outcome: UpsertOutcome, mergeCalls: Int)?
            do {
                try storage.write { tx in
                    lookups = []
                    for item in written {
                        let schema = ClassSchema.of(item.itemClass)
                        var explicit = item.attributes
                        explicit.merge(schema.primaryKey(of: item.attributes)) { held, _ in held }
                        for (variant, attributes) in [("as written", item.attributes), ("with String and Data swapped", swapped(item.attributes, schema)),
                                                      ("with missing attributes empty", explicit)] {
                            var probe = StoredItem(itemClass: item.itemClass, attributes: attributes, secret: Data("probe".utf8))
                            probe.attributes[Key.label] = .string("probe")
                            var seen: [Int64] = []
                            let outcome = try tx.upsert(probe) { existing in seen.append(rowID(of: existing)); return nil }
                            lookups.append((item, variant, outcome, seen))
                        }
                    }
                    var calls = 0
                    fresh = (try tx.upsert(row("s1", "fresh")) { _ in calls += 1; return nil }, calls)
                    throw Rollback()
                }
            } catch is Rollback {}
            c.check(lookups.count == written.count * 3, "\(lookups.count) upsert lookups ran, not \(written.count * 3)")
            for lookup in lookups {
                c.check(lookup.outcome == .kept(rowID: lookup.item.rowID) && lookup.seen == [lookup.item.rowID],
                        "upsert of row \(lookup.item.rowID)'s primary key \(lookup.variant) gave \(lookup.outcome), merge saw \(lookup.seen), not row \(lookup.item.rowID)")
            }
            if case (.inserted(let id), let calls)? = fresh {
                c.check(calls == 0 && !written.contains { $0.rowID == id && $0.itemClass == .genericPassword },
                        "upsert of a new primary key called merge \(calls) times or reused row id \(id)")
            } else {
                c.check(false, "upsert of a new primary key gave \(String(describing: fresh?.outcome)), not an insert")
            }
            let after = try storage.read { items(try $0.candidates(in: .genericPassword, matching: [:])) }
            c.check(after.map(\.rowID) == written.filter { $0.itemClass == .genericPassword }.map(\.rowID).sorted() && !after.contains { $0.secret == Data("probe".utf8) },
                    "after upserts whose merge kept every row (and a rolled-back insert), the generic passwords changed")
        },
        Clause("a limit-one search stops at the first match: forEachCandidate visits rows in row-id order and none after its body returns false, and the engine's kSecMatchLimitOne takes one row from the storage") { factory, c in
            let storage = try factory.makeStorage()
            let ids = try lazyRows(storage)
            for constraints in [[Key.service: .string("lazy")], [:]] as [[String: AttributeValue]] {
                var visited: [Candidate] = []
                try storage.read { try $0.forEachCandidate(in: .genericPassword, matching: constraints) { visited.append($0); return false } }
                c.check(visited.count == 1, "forEachCandidate matching \(describe(constraints)) called its body \(visited.count) times after it returned false")
                c.check(visited.first.map(rowID(of:)) == ids.first, "forEachCandidate matching \(describe(constraints)) visited row \(visited.first.map(rowID(of:)) ?? 0) first, not row \(ids[0])")
                var order: [Int64] = []
                try storage.read { try $0.forEachCandidate(in: .genericPassword, matching: constraints) { order.append(rowID(of: $0)); return true } }
                c.check(order == ids, "forEachCandidate matching \(describe(constraints)) visited \(order), not the rows in row-id order")
            }
            let counting = CountingStorage(storage)
            let found = try KeychainEngine(storage: counting).copyMatching([
                Key.class: .string("genp"), Key.service: .string("lazy"), Key.matchLimit: .string(Key.matchLimitOne), Key.returnData: .bool(true),
            ])
            c.check(found?.data == Data("lazy 0".utf8), "the engine's limit-one search did not return the first row")
            c.check(counting.handedOut == 1, "the engine's limit-one search over \(ids.count) matching rows took \(counting.handedOut) rows from the storage, not 1")
        },
        Clause("a limit-one search decrypts only the first match, through forEachCandidate and through the engine",
               requires: [.decryptionCount]) { factory, c in
            let storage = try factory.makeStorage()
            let count = factory.decryptionCount!
            let ids = try lazyRows(storage)
            var before = count(storage)
            try storage.read { try $0.forEachCandidate(in: .genericPassword, matching: [Key.service: .string("lazy")]) { _ in false } }
            c.check(count(storage) - before <= 1, "forEachCandidate stopped after one of \(ids.count) rows decrypted \(count(storage) - before) rows")
            before = count(storage)
            _ = try KeychainEngine(storage: storage).copyMatching([
                Key.class: .string("genp"), Key.service: .string("lazy"), Key.matchLimit: .string(Key.matchLimitOne), Key.returnData: .bool(true),
            ])
            c.check(count(storage) - before <= 1, "the engine's limit-one search over \(ids.count) rows decrypted \(count(storage) - before) rows")
            // The count is live: reading every row decrypts the ones not read yet.
            before = count(storage)
            _ = try storage.read { try $0.candidates(in: .genericPassword, matching: [:]) }
            c.check(count(storage) - before >= ids.count - 1, "reading all \(ids.count) rows counted \(count(storage) - before) decryptions: decryptionCount does not count")
        },
    ]

    /// Twenty rows of service `lazy` (secrets `lazy 0`…), in one transaction; their row ids, ascending.
    private static func lazyRows(_ storage: any KeychainStorage) throws -> [Int64] {
        let ids = try storage.write { tx in try (0..<20).map { try tx.insert(row("lazy", "acct-\($0)", secret: "lazy \($0)")) } }
        return ids.sorted()
    }

    /// The rows of the query-shape clause: values given as String and as Data, missing primary-key attributes, other
    /// groups and sync, a number attribute present and missing.
    private static func shapeRows() -> [StoredItem] {
        func genp(_ service: AttributeValue?, _ account: AttributeValue?, _ extra: [String: AttributeValue] = [:], _ n: Int) -> StoredItem {
            var item = row("unused", "unused", secret: "genp \(n)")
            item.attributes[Key.service] = service
            item.attributes[Key.account] = account
            item.attributes.merge(extra) { $1 }
            return item
        }
        func inet(_ server: AttributeValue, _ account: String, port: Int64?, protocol proto: String?, path: String? = nil, _ n: Int) -> StoredItem {
            var attributes: [String: AttributeValue] = [Key.server: server, Key.account: .string(account), Key.accessGroup: .string("default"),
                                                        Key.synchronizable: .bool(false), Key.accessible: .string("ak")]
            attributes[Key.port] = port.map(AttributeValue.number)
            attributes[Key.protocol] = proto.map(AttributeValue.string)
            attributes[Key.path] = path.map(AttributeValue.string)
            return StoredItem(itemClass: .internetPassword, attributes: attributes, secret: Data("inet \(n)".utf8))
        }
        let s1 = AttributeValue.string("s1"), a = AttributeValue.string("a")
        return [
            genp(s1, a, [:], 1),
            genp(s1, .string("b"), [:], 2),
            genp(.data(Data("s1".utf8)), .string("c"), [:], 3),
            genp(.string("s2"), .data(Data("a".utf8)), [:], 4),
            genp(.string("s2"), nil, [:], 5),
            genp(nil, a, [:], 6),
            genp(s1, a, [Key.accessGroup: .string("other")], 7),
            genp(s1, a, [Key.synchronizable: .bool(true)], 8),
            genp(.string(""), .string("d"), [:], 9),
            genp(s1, .data(Data([0xFF, 0x00])), [:], 10),
            inet(.string("h"), "u", port: 443, protocol: "htps", 11),
            inet(.string("h"), "u", port: nil, protocol: "htps", 12),
            inet(.data(Data("h".utf8)), "v", port: 443, protocol: nil, 13),
            inet(.string("h"), "u", port: 443, protocol: "htps", path: "/x", 14),
        ]
    }

    /// The constraint sets the engine can issue for `rows` of `itemClass`: none; each row's full primary key; every
    /// single attribute, every pair and every set but one of it; each of these with String and Data swapped; and keys
    /// no row has. Deduplicated by their values and types.
    private static func queryShapes(_ itemClass: ItemClass, _ rows: [StoredItem]) -> [[String: AttributeValue]] {
        let schema = ClassSchema.of(itemClass)
        let keys = schema.primaryKey
        var subsets: [[String]] = [keys]
        for (i, first) in keys.enumerated() {
            subsets.append([first])
            subsets.append(keys.filter { $0 != first })
            for second in keys[(i + 1)...] { subsets.append([first, second]) }
        }
        var shapes: [[String: AttributeValue]] = [[:]]
        for item in rows {
            let full = schema.primaryKey(of: item.attributes)
            for subset in subsets {
                let constraints = full.filter { subset.contains($0.key) }
                shapes.append(constraints)
                shapes.append(swapped(constraints, schema))
            }
        }
        var absent = schema.primaryKey(of: rows.first?.attributes ?? [:])
        absent[Key.account] = .string("no such account")
        shapes.append(absent)
        shapes.append([Key.account: .string("no such account")])
        var seen: Set<String> = []
        return shapes.filter { seen.insert(describe($0)).inserted }
    }

    /// The reference model: a row matches when its value for each constrained attribute (a missing one as the
    /// attribute's empty value) equals the constraint (``AttributeValue``'s `==`: a String and Data with the same bytes
    /// are equal).
    private static func matches(_ item: StoredItem, _ constraints: [String: AttributeValue]) -> Bool {
        let schema = ClassSchema.of(item.itemClass)
        return constraints.allSatisfy { schema.primaryKeyValue($0.key, of: item.attributes) == $0.value }
    }

    /// The blob attributes of `attributes` with String given as Data and UTF-8 Data as String.
    private static func swapped(_ attributes: [String: AttributeValue], _ schema: ClassSchema) -> [String: AttributeValue] {
        attributes.reduce(into: [:]) { result, entry in
            guard schema.attributes[entry.key]?.type == .blob else { result[entry.key] = entry.value; return }
            switch entry.value {
            case .string(let text): result[entry.key] = .data(Data(text.utf8))
            case .data(let bytes): result[entry.key] = String(data: bytes, encoding: .utf8).map(AttributeValue.string) ?? .data(bytes)
            default: result[entry.key] = entry.value
            }
        }
    }

    /// Checks the rows a search returned against the reference model's row ids, in order, and against the rows written.
    private static func checkShape(_ found: [Candidate], _ expected: [Int64], _ written: [StoredItem], _ method: String,
                                   _ itemClass: ItemClass, _ constraints: [String: AttributeValue], _ c: inout Checker) {
        let ids = found.map(rowID(of:))
        c.check(ids == expected, "\(method)(in: \(itemClass), matching: \(describe(constraints))) gave rows \(ids), not \(expected)")
        for candidate in found {
            guard case .item(let item) = candidate else {
                c.check(false, "\(method)(in: \(itemClass), matching: \(describe(constraints))) gave row \(rowID(of: candidate)) \(describe(candidate))")
                continue
            }
            c.check(written.contains { $0.itemClass == itemClass && $0 == item },
                    "\(method)(in: \(itemClass), matching: \(describe(constraints))) gave row \(item.rowID) with contents other than written")
        }
    }
}

/// Constraints in words, with each value's type (`acct="a"`, `svce=<7331>`), sorted by key.
func describe(_ constraints: [String: AttributeValue]) -> String {
    let parts = constraints.sorted { $0.key < $1.key }.map { key, value -> String in
        switch value {
        case .string(let text): "\(key)=\"\(text)\""
        case .data(let bytes): "\(key)=<\(bytes.map { String(format: "%02x", $0) }.joined())>"
        case .number(let number): "\(key)=\(number)"
        case .bool(let flag): "\(key)=\(flag)"
        case .date(let date): "\(key)=\(date.timeIntervalSinceReferenceDate)"
        }
    }
    return "[" + parts.joined(separator: ", ") + "]"
}

/// A storage that counts the rows its readers hand out (each candidate a search visits or returns, each row looked up
/// by id): how many rows an engine operation took from the storage below.
final class CountingStorage: KeychainStorage, Sendable {
    let base: any KeychainStorage
    private let counter = Locked(0)

    init(_ base: any KeychainStorage) { self.base = base }

    /// Rows handed out so far.
    var handedOut: Int { counter.current }

    var lockState: LockState { base.lockState }
    var isSharedAcrossMachines: Bool { base.isSharedAcrossMachines }

    func read<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        try base.read { try body(CountingReader(base: $0, counter: counter)) }
    }

    func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        try base.write { try body(CountingWriter(base: $0, counter: counter)) }
    }

    private struct CountingReader: StorageReader {
        let base: any StorageReader
        let counter: Locked<Int>

        func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate] {
            let found = try base.candidates(in: itemClass, matching: constraints)
            counter.withLock { $0 += found.count }
            return found
        }

        func forEachCandidate(in itemClass: ItemClass, matching constraints: [String: AttributeValue], _ body: (Candidate) throws -> Bool) throws {
            try base.forEachCandidate(in: itemClass, matching: constraints) { candidate in
                counter.withLock { $0 += 1 }
                return try body(candidate)
            }
        }

        func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? {
            let found = try base.candidate(in: itemClass, rowID: rowID)
            if found != nil { counter.withLock { $0 += 1 } }
            return found
        }
    }

    private struct CountingWriter: StorageWriter {
        let base: any StorageWriter
        let counter: Locked<Int>
        private var reader: CountingReader { CountingReader(base: base, counter: counter) }

        init(base: any StorageWriter, counter: Locked<Int>) {
            self.base = base
            self.counter = counter
        }

        func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate] {
            try reader.candidates(in: itemClass, matching: constraints)
        }

        func forEachCandidate(in itemClass: ItemClass, matching constraints: [String: AttributeValue], _ body: (Candidate) throws -> Bool) throws {
            try reader.forEachCandidate(in: itemClass, matching: constraints, body)
        }

        func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? { try reader.candidate(in: itemClass, rowID: rowID) }
        func insert(_ item: StoredItem) throws -> Int64 { try base.insert(item) }
        func replace(_ item: StoredItem) throws { try base.replace(item) }
        func delete(in itemClass: ItemClass, rowID: Int64) throws { try base.delete(in: itemClass, rowID: rowID) }

        func upsert(_ item: StoredItem, merge: (Candidate) throws -> StoredItem?) throws -> UpsertOutcome {
            try base.upsert(item) { candidate in
                counter.withLock { $0 += 1 }
                return try merge(candidate)
            }
        }
    }
}
