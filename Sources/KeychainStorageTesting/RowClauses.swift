import Foundation
import KeychainEngine

extension StorageContract {
    /// Rows: fidelity, the UNIQUE constraint, atomicity, constraints, delete, upsert, lost updates.
    static let rowClauses: [Clause] = [
        Clause("a row reads back exactly as written: every attribute type, the secret, the access control") { factory, c in
            let storage = try factory.makeStorage()
            let date = Date(timeIntervalSinceReferenceDate: 123_456.5)
            let item = StoredItem(itemClass: .internetPassword, attributes: [
                Key.server: .string("example.com"), Key.account: .string("ålice ✓"), Key.port: .number(8443),
                Key.protocol: .string("htps"), Key.authenticationType: .string("form"), Key.path: .string("/"),
                Key.securityDomain: .string(""), Key.accessGroup: .string("g"), Key.synchronizable: .bool(true),
                Key.accessible: .string("ck"), Key.creationDate: .date(date), Key.modificationDate: .date(date),
                Key.label: .string("Example"), Key.comment: .string("note"), Key.isInvisible: .bool(true),
                Key.creator: .number(0x61626364),
            ], secret: Data([0, 1, 2, 255]), accessControl: AccessControl(accessibility: .afterFirstUnlock, flags: [.biometryAny, .or, .devicePasscode]))
            let id = try storage.write { try $0.insert(item) }
            c.check(id > 0, "the insert returned row id \(id), not a positive one")
            let found = try storage.read { try $0.candidate(in: .internetPassword, rowID: id) }
            guard case .item(let back)? = found else { try c.require(false, "row \(id) is not readable: \(String(describing: found))"); return }
            var expected = item
            expected.rowID = id
            c.check(back == expected, "the row read back differs from the row written")
        },
        Clause("a blob attribute keeps its type: Data stays Data, a String stays a String") { factory, c in
            let storage = try factory.makeStorage()
            var item = row("svc", "unused")
            item.attributes[Key.account] = .data(Data([0xC3, 0x28, 0x00]))   // not UTF-8
            item.attributes[Key.service] = .data(Data("svc".utf8))          // UTF-8, but given as Data
            item.attributes[Key.label] = .string("label")
            item.attributes[Key.creator] = .string("aapl")                  // a number attribute holding a string
            let id = try storage.write { try $0.insert(item) }
            guard case .item(let back)? = try storage.read({ try $0.candidate(in: .genericPassword, rowID: id) }) else {
                try c.require(false, "row \(id) is not readable"); return
            }
            // `==` on AttributeValue compares bytes, so check the cases themselves.
            guard case .data(let account)? = back.attributes[Key.account], case .data(let service)? = back.attributes[Key.service],
                  case .string(let label)? = back.attributes[Key.label], case .string(let creator)? = back.attributes[Key.creator] else {
                try c.require(false, "a value changed type: \(back.attributes.keys.sorted())"); return
            }
            c.check(account == Data([0xC3, 0x28, 0x00]) && service == Data("svc".utf8) && label == "label" && creator == "aapl",
                    "a value changed its bytes")
        },
        Clause("a String and Data with the same bytes are one primary key and satisfy each other's constraints") { factory, c in
            let storage = try factory.makeStorage()
            _ = try storage.write { try $0.insert(row("svc", "alice", secret: "one")) }
            var asData = row("svc", "unused", secret: "two")
            asData.attributes[Key.account] = .data(Data("alice".utf8))
            c.check(c.status { _ = try storage.write { try $0.insert(asData) } } == Status.duplicateItem,
                    "an account given as Data with the bytes of an existing String account was not a duplicate")
            // One constraint (a digest column) and the whole primary key (the pk digest), given as Data.
            let byAccount = try storage.read { items(try $0.candidates(in: .genericPassword, matching: [Key.account: .data(Data("alice".utf8))])) }
            c.check(byAccount.map(\.secret) == [Data("one".utf8)], "a Data constraint did not match the String account exactly once")
            let fullKey: [String: AttributeValue] = [Key.service: .data(Data("svc".utf8)), Key.account: .data(Data("alice".utf8)),
                                                     Key.accessGroup: .string("default"), Key.synchronizable: .bool(false)]
            c.check(try storage.read { items(try $0.candidates(in: .genericPassword, matching: fullKey)) }.count == 1,
                    "the full primary key given as Data did not find the row")
            // Different bytes are another key: precomposed and decomposed "é".
            _ = try storage.write { try $0.insert(row("svc", "caf\u{E9}")) }
            _ = try storage.write { try $0.insert(row("svc", "cafe\u{301}")) }
            c.check(try storage.read { items(try $0.candidates(in: .genericPassword, matching: [Key.account: .string("caf\u{E9}")])) }.count == 1,
                    "precomposed and decomposed é matched each other (values compare by their UTF-8 bytes)")
        },
        Clause("an insert with an existing primary key fails with errSecDuplicateItem and changes nothing") { factory, c in
            let storage = try factory.makeStorage()
            _ = try storage.write { try $0.insert(row("svc", "a", secret: "one", label: "first")) }
            let status = c.status { _ = try storage.write { try $0.insert(row("svc", "a", secret: "two", label: "second")) } }
            c.check(status == Status.duplicateItem, "the second insert gave status \(status), not errSecDuplicateItem")
            let rows = try storage.read { items(try $0.candidates(in: .genericPassword, matching: [Key.service: .string("svc")])) }
            c.check(rows.count == 1, "\(rows.count) rows hold one primary key")
            c.check(rows.first?.secret == Data("one".utf8), "the failed insert changed the existing row's secret")
        },
        Clause("a replace onto another row's primary key fails with errSecDuplicateItem") { factory, c in
            let storage = try factory.makeStorage()
            let a = try storage.write { try $0.insert(row("svc", "a", secret: "A")) }
            _ = try storage.write { try $0.insert(row("svc", "b", secret: "B")) }
            var moved = row("svc", "b", secret: "moved")
            moved.rowID = a
            let status = c.status { try storage.write { try $0.replace(moved) } }
            c.check(status == Status.duplicateItem, "the colliding replace gave status \(status), not errSecDuplicateItem")
            let back = try storage.read { try $0.candidate(in: .genericPassword, rowID: a) }
            guard case .item(let item)? = back else { try c.require(false, "row a was lost"); return }
            c.check(item.secret == Data("A".utf8), "the failed replace changed row a")
        },
        Clause("a transaction that throws leaves no trace of its inserts, replaces or deletes") { factory, c in
            let storage = try factory.makeStorage()
            let a = try storage.write { try $0.insert(row("svc", "a", secret: "A")) }
            let b = try storage.write { try $0.insert(row("svc", "b", secret: "B")) }
            do {
                try storage.write { tx in
                    _ = try tx.insert(row("svc", "c", secret: "C"))
                    var changed = row("svc", "a", secret: "changed")
                    changed.rowID = a
                    try tx.replace(changed)
                    try tx.delete(in: .genericPassword, rowID: b)
                    throw Rollback()
                }
                c.check(false, "write(_:) returned although its body threw")
            } catch is Rollback {}
            let rows = try storage.read { items(try $0.candidates(in: .genericPassword, matching: [:])) }
            c.check(Set(rows.map { $0.attributes[Key.account]?.stringValue ?? "?" }) == ["a", "b"], "the rolled-back insert or delete is visible")
            c.check(rows.first { $0.rowID == a }?.secret == Data("A".utf8), "the rolled-back replace is visible")
            // The rolled-back key is free again.
            _ = try storage.write { try $0.insert(row("svc", "c", secret: "C")) }
        },
        Clause("candidates honour every constraint, full or partial, and treat a missing attribute as empty") { factory, c in
            let storage = try factory.makeStorage()
            try storage.write { tx in
                for service in ["s1", "s2"] { for account in ["a", "b", "c"] { _ = try tx.insert(row(service, account)) } }
                var noAccount = row("s3", "x")
                noAccount.attributes[Key.account] = nil
                _ = try tx.insert(noAccount)
            }
            try storage.read { r in
                c.check(items(try r.candidates(in: .genericPassword, matching: [Key.service: .string("s1")])).count == 3, "service s1: not 3 rows")
                c.check(items(try r.candidates(in: .genericPassword, matching: [Key.account: .string("b")])).count == 2, "account b: not 2 rows")
                let one = items(try r.candidates(in: .genericPassword, matching: [
                    Key.service: .string("s2"), Key.account: .string("c"), Key.accessGroup: .string("default"), Key.synchronizable: .bool(false),
                ]))
                c.check(one.count == 1 && one.first?.attributes[Key.service] == .string("s2"), "the full primary key: not exactly its row")
                c.check(items(try r.candidates(in: .genericPassword, matching: [Key.service: .string("s9")])).isEmpty, "service s9 matched rows")
                c.check(items(try r.candidates(in: .genericPassword, matching: [Key.synchronizable: .bool(true)])).isEmpty, "sync true matched rows")
                c.check(items(try r.candidates(in: .genericPassword, matching: [Key.service: .string("s3"), Key.account: .string("")])).count == 1,
                        "a row without an account did not match the empty account")
                c.check(items(try r.candidates(in: .internetPassword, matching: [:])).isEmpty, "another class's table holds rows")
                c.check(items(try r.candidates(in: .genericPassword, matching: [:])).count == 7, "no constraints: not all 7 rows")
            }
        },
        Clause("a delete removes the row; deleting a missing row is not an error") { factory, c in
            let storage = try factory.makeStorage()
            let id = try storage.write { try $0.insert(row("svc", "a")) }
            try storage.write { try $0.delete(in: .genericPassword, rowID: id) }
            try storage.write { try $0.delete(in: .genericPassword, rowID: id) }
            c.check(try storage.read { try $0.candidate(in: .genericPassword, rowID: id) } == nil, "the deleted row is still there")
            _ = try storage.write { try $0.insert(row("svc", "a")) }  // the key is free again
        },
        Clause("upsert inserts a new primary key, replaces an existing one under its row id, keeps it on nil, and writes nothing when merge throws") { factory, c in
            let storage = try factory.makeStorage()
            let mergeCalls = Locked(0)
            let inserted = try storage.write { try $0.upsert(row("svc", "a", secret: "one")) { _ in mergeCalls.withLock { $0 += 1 }; return nil } }
            c.check(mergeCalls.current == 0, "merge was called without an existing row")
            guard case .inserted(let id) = inserted else { try c.require(false, "expected an insert, got \(inserted)"); return }
            var seen: [Int64] = []
            let replaced = try storage.write { tx in
                seen = []   // what the body's last run saw (a storage may run a write body again)
                return try tx.upsert(row("svc", "a", secret: "ignored")) { existing in
                    guard case .item(var old) = existing else { return nil }
                    seen.append(old.rowID)
                    old.secret = Data("two".utf8)
                    return old
                }
            }
            c.check(replaced == .replaced(rowID: id), "expected a replace of row \(id), got \(replaced)")
            c.check(seen == [id], "merge saw rows \(seen), not [\(id)]")
            let kept = try storage.write { try $0.upsert(row("svc", "a", secret: "three")) { _ in nil } }
            c.check(kept == .kept(rowID: id), "expected row \(id) kept, got \(kept)")
            do {
                try storage.write { tx in
                    _ = try tx.upsert(row("svc", "b", secret: "B")) { _ in nil }
                    _ = try tx.upsert(row("svc", "a", secret: "four")) { _ in throw Rollback() }
                }
                c.check(false, "an upsert whose merge threw did not throw")
            } catch is Rollback {}
            let rows = try storage.read { items(try $0.candidates(in: .genericPassword, matching: [Key.service: .string("svc")])) }
            c.check(rows.map(\.rowID) == [id], "after the failed transaction the rows are \(rows.map(\.rowID)), not [\(id)]")
            c.check(rows.first?.secret == Data("two".utf8), "the row's secret is not the merged one")
        },
        Clause("concurrent read-modify-write transactions lose no update") { factory, c in
            let storage = try factory.makeStorage()
            let id = try storage.write { try $0.insert(row("counter", "n", secret: "0")) }
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                for _ in 0..<25 {
                    try? storage.write { tx in
                        guard case .item(var item)? = try tx.candidate(in: .genericPassword, rowID: id) else { throw Rollback() }
                        let n = Int(String(decoding: item.secret ?? Data(), as: UTF8.self)) ?? -1000
                        item.secret = Data(String(n + 1).utf8)
                        try tx.replace(item)
                    }
                }
            }
            let final = try storage.read { try $0.candidate(in: .genericPassword, rowID: id) }
            guard case .item(let item)? = final else { try c.require(false, "the counter row was lost"); return }
            let value = String(decoding: item.secret ?? Data(), as: UTF8.self)
            c.check(value == "100", "100 increments left the counter at \(value)")
        },
    ]
}
