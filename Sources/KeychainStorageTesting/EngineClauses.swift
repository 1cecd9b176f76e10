import Foundation
import KeychainEngine

extension StorageContract {
    /// The engine's SecItem rules over the storage: what the engine issues, the storage answers alike.
    static let engineClauses: [Clause] = [
        Clause("the engine over the storage: add, copy, update, delete round trip") { factory, c in
            let engine = KeychainEngine(storage: try factory.makeStorage())
            try engine.add(q("svc", "a", [Key.valueData: .data(Data("one".utf8)), Key.label: .string("L")]))
            c.check(try engine.copyMatching(q("svc", "a", [Key.returnData: .bool(true)]))?.data == Data("one".utf8), "the added secret does not read back")
            try engine.update(q("svc", "a"), with: [Key.valueData: .data(Data("two".utf8))])
            let dict = try engine.copyMatching(q("svc", "a", [Key.returnData: .bool(true), Key.returnAttributes: .bool(true)]))?.attributes
            c.check(dict?[Key.valueData] == .data(Data("two".utf8)), "the updated secret does not read back")
            c.check(dict?[Key.label] == .string("L"), "the update lost the label")
            try engine.delete(q("svc", "a"))
            let status = c.status { _ = try engine.copyMatching(q("svc", "a")) }
            c.check(status == Status.itemNotFound, "a deleted item's lookup gave \(status), not errSecItemNotFound")
        },
        Clause("the engine over the storage: duplicate add, not found, delete of one service, persistent reference") { factory, c in
            let engine = KeychainEngine(storage: try factory.makeStorage())
            for account in ["a", "b"] { try engine.add(q("svc", account, [Key.valueData: .data(Data(account.utf8))])) }
            try engine.add(q("keep", "a"))
            c.check(c.status { try engine.add(q("svc", "a", [Key.label: .string("other label")])) } == Status.duplicateItem, "a duplicate add succeeded")
            c.check(c.status { _ = try engine.copyMatching(q("svc", "z", [Key.matchLimit: .string(Key.matchLimitAll)])) } == Status.itemNotFound,
                    "a search without a match did not give errSecItemNotFound")
            let ref = try engine.copyMatching(q("svc", "b", [Key.returnPersistentRef: .bool(true)]))?.data
            try c.require(ref != nil, "no persistent reference returned")
            c.check(try engine.copyMatching([Key.valuePersistentRef: .data(ref!), Key.returnData: .bool(true)])?.data == Data("b".utf8),
                    "the persistent reference does not find its item")
            c.check(c.status { try engine.update(q("svc", "a"), with: [Key.account: .string("b")]) } == Status.duplicateItem,
                    "an update onto another item's primary key succeeded")
            try engine.delete(q("svc"))
            c.check(try engine.copyMatching(q("keep", "a")) == nil, "deleting service svc touched service keep")
            c.check(c.status { _ = try engine.copyMatching(q("svc")) } == Status.itemNotFound, "service svc still has items")
        },
        Clause("the engine over the storage: a thousand items, lookups by primary key find each one") { factory, c in
            let storage = try factory.makeStorage()
            try storage.write { tx in
                for i in 0..<1_000 { _ = try tx.insert(row("bulk", "acct-\(i)", secret: "s\(i)")) }
            }
            let engine = KeychainEngine(storage: storage)
            for i in stride(from: 0, to: 1_000, by: 97) {
                c.check(try engine.copyMatching(q("bulk", "acct-\(i)", [Key.returnData: .bool(true)]))?.data == Data("s\(i)".utf8),
                        "item \(i) of 1000 not found by its primary key")
            }
        },
    ]

    private static func q(_ service: String, _ account: String? = nil, _ extra: KeychainQuery = [:]) -> KeychainQuery {
        var query: KeychainQuery = [Key.class: .string("genp"), Key.service: .string(service)]
        if let account { query[Key.account] = .string(account) }
        return query.merging(extra) { $1 }
    }
}
