import Foundation
import Testing
import KeychainEngine

func row(_ service: String, _ account: String, secret: String? = nil, label: String? = nil) -> StoredItem {
    var attributes: [String: AttributeValue] = [
        Key.service: .string(service), Key.account: .string(account), Key.accessGroup: .string("default"),
        Key.synchronizable: .bool(false), Key.accessible: .string("ak"),
    ]
    if let label { attributes[Key.label] = .string(label) }
    return StoredItem(itemClass: .genericPassword, attributes: attributes, secret: secret.map { Data($0.utf8) })
}

func items(_ candidates: [Candidate]) -> [StoredItem] {
    candidates.compactMap { if case .item(let i) = $0 { return i } else { return nil } }
}

func storageStatus(_ body: () throws -> Void) -> Int32 {
    do { try body(); return 0 } catch let e as EngineError { return e.status } catch { return Int32.min }
}

struct Failure: Error {}

@Suite("Storage contract: every backend keeps rows the same way")
struct StorageContractTests {
    @Test("a row reads back exactly as written: every attribute type, the secret, the access control", arguments: Backend.all)
    func fidelity(_ backend: Backend) throws {
        let storage = try backend.make()
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
        #expect(id > 0)
        let found = try storage.read { try $0.candidate(in: .internetPassword, rowID: id) }
        guard case .item(let back)? = found else { Issue.record("row \(id) not readable: \(String(describing: found))"); return }
        var expected = item
        expected.rowID = id
        #expect(back == expected)
    }

    @Test("a blob attribute keeps its type: Data stays Data, a String stays a String", arguments: Backend.all)
    func blobTypeKept(_ backend: Backend) throws {
        let storage = try backend.make()
        var item = row("svc", "unused")
        item.attributes[Key.account] = .data(Data([0xC3, 0x28, 0x00]))   // not UTF-8
        item.attributes[Key.service] = .data(Data("svc".utf8))          // UTF-8, but given as Data
        item.attributes[Key.label] = .string("label")
        item.attributes[Key.creator] = .string("aapl")                  // a number attribute holding a string
        let id = try storage.write { try $0.insert(item) }
        guard case .item(let back)? = try storage.read({ try $0.candidate(in: .genericPassword, rowID: id) }) else {
            Issue.record("row not readable"); return
        }
        // `==` on AttributeValue compares bytes, so check the cases themselves.
        guard case .data(let account)? = back.attributes[Key.account], case .data(let service)? = back.attributes[Key.service],
              case .string(let label)? = back.attributes[Key.label], case .string(let creator)? = back.attributes[Key.creator] else {
            Issue.record("a value changed type: \(back.attributes)"); return
        }
        #expect(account == Data([0xC3, 0x28, 0x00]) && service == Data("svc".utf8) && label == "label" && creator == "aapl")
    }

    @Test("a String and Data with the same bytes are one primary key and satisfy each other's constraints", arguments: Backend.all)
    func blobsMatchByBytes(_ backend: Backend) throws {
        let storage = try backend.make()
        _ = try storage.write { try $0.insert(row("svc", "alice", secret: "one")) }
        var asData = row("svc", "unused", secret: "two")
        asData.attributes[Key.account] = .data(Data("alice".utf8))
        #expect(storageStatus { _ = try storage.write { try $0.insert(asData) } } == Status.duplicateItem)
        // One constraint (a digest column) and the whole primary key (the pk digest), given as Data.
        let byAccount = try storage.read { items(try $0.candidates(in: .genericPassword, matching: [Key.account: .data(Data("alice".utf8))])) }
        #expect(byAccount.map(\.secret) == [Data("one".utf8)])
        let fullKey: [String: AttributeValue] = [Key.service: .data(Data("svc".utf8)), Key.account: .data(Data("alice".utf8)),
                                                 Key.accessGroup: .string("default"), Key.synchronizable: .bool(false)]
        #expect(try storage.read { items(try $0.candidates(in: .genericPassword, matching: fullKey)) }.count == 1)
        // Different bytes are another key: precomposed and decomposed "é".
        _ = try storage.write { try $0.insert(row("svc", "caf\u{E9}")) }
        _ = try storage.write { try $0.insert(row("svc", "cafe\u{301}")) }
        #expect(try storage.read { items(try $0.candidates(in: .genericPassword, matching: [Key.account: .string("caf\u{E9}")])) }.count == 1)
    }

    @Test("an insert with an existing primary key fails with errSecDuplicateItem and changes nothing", arguments: Backend.all)
    func uniqueConstraint(_ backend: Backend) throws {
        let storage = try backend.make()
        _ = try storage.write { try $0.insert(row("svc", "a", secret: "one", label: "first")) }
        #expect(storageStatus { _ = try storage.write { try $0.insert(row("svc", "a", secret: "two", label: "second")) } } == Status.duplicateItem)
        let rows = try storage.read { items(try $0.candidates(in: .genericPassword, matching: [Key.service: .string("svc")])) }
        #expect(rows.count == 1)
        #expect(rows.first?.secret == Data("one".utf8))
    }

    @Test("a replace onto another row's primary key fails with errSecDuplicateItem", arguments: Backend.all)
    func replaceCollision(_ backend: Backend) throws {
        let storage = try backend.make()
        let a = try storage.write { try $0.insert(row("svc", "a", secret: "A")) }
        _ = try storage.write { try $0.insert(row("svc", "b", secret: "B")) }
        var moved = row("svc", "b", secret: "moved")
        moved.rowID = a
        #expect(storageStatus { try storage.write { try $0.replace(moved) } } == Status.duplicateItem)
        let back = try storage.read { try $0.candidate(in: .genericPassword, rowID: a) }
        guard case .item(let item)? = back else { Issue.record("row a lost"); return }
        #expect(item.secret == Data("A".utf8))
    }

    @Test("a transaction that throws leaves no trace of its inserts, replaces or deletes", arguments: Backend.all)
    func atomicity(_ backend: Backend) throws {
        let storage = try backend.make()
        let a = try storage.write { try $0.insert(row("svc", "a", secret: "A")) }
        let b = try storage.write { try $0.insert(row("svc", "b", secret: "B")) }
        #expect(throws: Failure.self) {
            try storage.write { tx in
                _ = try tx.insert(row("svc", "c", secret: "C"))
                var changed = row("svc", "a", secret: "changed")
                changed.rowID = a
                try tx.replace(changed)
                try tx.delete(in: .genericPassword, rowID: b)
                throw Failure()
            }
        }
        let rows = try storage.read { items(try $0.candidates(in: .genericPassword, matching: [:])) }
        #expect(Set(rows.map { $0.attributes[Key.account]?.stringValue ?? "?" }) == ["a", "b"])
        #expect(rows.first { $0.rowID == a }?.secret == Data("A".utf8))
        // The rolled-back key is free again.
        _ = try storage.write { try $0.insert(row("svc", "c", secret: "C")) }
    }

    @Test("candidates honour every constraint, full or partial, and treat a missing attribute as empty", arguments: Backend.all)
    func candidates(_ backend: Backend) throws {
        let storage = try backend.make()
        try storage.write { tx in
            for service in ["s1", "s2"] { for account in ["a", "b", "c"] { _ = try tx.insert(row(service, account)) } }
            var noAccount = row("s3", "x")
            noAccount.attributes[Key.account] = nil
            _ = try tx.insert(noAccount)
        }
        try storage.read { r in
            #expect(items(try r.candidates(in: .genericPassword, matching: [Key.service: .string("s1")])).count == 3)
            #expect(items(try r.candidates(in: .genericPassword, matching: [Key.account: .string("b")])).count == 2)
            let one = items(try r.candidates(in: .genericPassword, matching: [
                Key.service: .string("s2"), Key.account: .string("c"), Key.accessGroup: .string("default"), Key.synchronizable: .bool(false),
            ]))
            #expect(one.count == 1 && one.first?.attributes[Key.service] == .string("s2"))
            #expect(items(try r.candidates(in: .genericPassword, matching: [Key.service: .string("s9")])).isEmpty)
            #expect(items(try r.candidates(in: .genericPassword, matching: [Key.synchronizable: .bool(true)])).isEmpty)
            #expect(items(try r.candidates(in: .genericPassword, matching: [Key.service: .string("s3"), Key.account: .string("")])).count == 1)
            #expect(items(try r.candidates(in: .internetPassword, matching: [:])).isEmpty)
            #expect(items(try r.candidates(in: .genericPassword, matching: [:])).count == 7)
        }
    }

    @Test("a delete removes the row; deleting a missing row is not an error", arguments: Backend.all)
    func deletion(_ backend: Backend) throws {
        let storage = try backend.make()
        let id = try storage.write { try $0.insert(row("svc", "a")) }
        try storage.write { try $0.delete(in: .genericPassword, rowID: id) }
        try storage.write { try $0.delete(in: .genericPassword, rowID: id) }
        #expect(try storage.read { try $0.candidate(in: .genericPassword, rowID: id) } == nil)
        _ = try storage.write { try $0.insert(row("svc", "a")) }  // the key is free again
    }

    @Test("upsert inserts a new primary key, replaces an existing one under its row id, keeps it on nil, and writes nothing when merge throws",
          arguments: Backend.all)
    func upsert(_ backend: Backend) throws {
        let storage = try backend.make()
        let inserted = try storage.write { try $0.upsert(row("svc", "a", secret: "one")) { _ in
            Issue.record("merge called without an existing row"); return nil
        } }
        guard case .inserted(let id) = inserted else { Issue.record("expected an insert, got \(inserted)"); return }
        var seen: [Int64] = []
        let replaced = try storage.write { try $0.upsert(row("svc", "a", secret: "ignored")) { existing in
            guard case .item(var old) = existing else { return nil }
            seen.append(old.rowID)
            old.secret = Data("two".utf8)
            return old
        } }
        #expect(replaced == .replaced(rowID: id))
        #expect(seen == [id])
        let kept = try storage.write { try $0.upsert(row("svc", "a", secret: "three")) { _ in nil } }
        #expect(kept == .kept(rowID: id))
        #expect(throws: Failure.self) {
            try storage.write { tx in
                _ = try tx.upsert(row("svc", "b", secret: "B")) { _ in nil }
                _ = try tx.upsert(row("svc", "a", secret: "four")) { _ in throw Failure() }
            }
        }
        let rows = try storage.read { items(try $0.candidates(in: .genericPassword, matching: [Key.service: .string("svc")])) }
        #expect(rows.map(\.rowID) == [id])
        #expect(rows.first?.secret == Data("two".utf8))
    }

    @Test("concurrent read-modify-write transactions lose no update", arguments: Backend.all)
    func noLostUpdate(_ backend: Backend) async throws {
        let storage = try backend.make()
        let id = try storage.write { try $0.insert(row("counter", "n", secret: "0")) }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    for _ in 0..<25 {
                        try? storage.write { tx in
                            guard case .item(var item)? = try tx.candidate(in: .genericPassword, rowID: id) else { throw Failure() }
                            let n = Int(String(decoding: item.secret ?? Data(), as: UTF8.self)) ?? -1000
                            item.secret = Data(String(n + 1).utf8)
                            try tx.replace(item)
                        }
                    }
                }
            }
        }
        let final = try storage.read { try $0.candidate(in: .genericPassword, rowID: id) }
        guard case .item(let item)? = final else { Issue.record("counter lost"); return }
        #expect(String(decoding: item.secret ?? Data(), as: UTF8.self) == "100")
    }
}

@Suite("Engine over every backend: the SecItem rules hold whatever the storage")
struct EngineOverBackendTests {
    func q(_ service: String, _ account: String? = nil, _ extra: KeychainQuery = [:]) -> KeychainQuery {
        var query: KeychainQuery = [Key.class: .string("genp"), Key.service: .string(service)]
        if let account { query[Key.account] = .string(account) }
        return query.merging(extra) { $1 }
    }

    @Test("add, copy, update, delete round trip", arguments: Backend.all)
    func roundTrip(_ backend: Backend) throws {
        let engine = KeychainEngine(storage: try backend.make())
        try engine.add(q("svc", "a", [Key.valueData: .data(Data("one".utf8)), Key.label: .string("L")]))
        #expect(try engine.copyMatching(q("svc", "a", [Key.returnData: .bool(true)]))?.data == Data("one".utf8))
        try engine.update(q("svc", "a"), with: [Key.valueData: .data(Data("two".utf8))])
        let dict = try engine.copyMatching(q("svc", "a", [Key.returnData: .bool(true), Key.returnAttributes: .bool(true)]))?.attributes
        #expect(dict?[Key.valueData] == .data(Data("two".utf8)))
        #expect(dict?[Key.label] == .string("L"))
        try engine.delete(q("svc", "a"))
        #expect(storageStatus { _ = try engine.copyMatching(q("svc", "a")) } == Status.itemNotFound)
    }

    @Test("duplicate add, not found, delete of one service, persistent reference", arguments: Backend.all)
    func rules(_ backend: Backend) throws {
        let engine = KeychainEngine(storage: try backend.make())
        for account in ["a", "b"] { try engine.add(q("svc", account, [Key.valueData: .data(Data(account.utf8))])) }
        try engine.add(q("keep", "a"))
        #expect(storageStatus { try engine.add(q("svc", "a", [Key.label: .string("other label")])) } == Status.duplicateItem)
        #expect(storageStatus { _ = try engine.copyMatching(q("svc", "z", [Key.matchLimit: .string(Key.matchLimitAll)])) } == Status.itemNotFound)
        let ref = try #require(try engine.copyMatching(q("svc", "b", [Key.returnPersistentRef: .bool(true)]))?.data)
        #expect(try engine.copyMatching([Key.valuePersistentRef: .data(ref), Key.returnData: .bool(true)])?.data == Data("b".utf8))
        #expect(storageStatus { try engine.update(q("svc", "a"), with: [Key.account: .string("b")]) } == Status.duplicateItem)
        try engine.delete(q("svc"))
        #expect(try engine.copyMatching(q("keep", "a")) == nil)
        #expect(storageStatus { _ = try engine.copyMatching(q("svc")) } == Status.itemNotFound)
    }

    @Test("a thousand items: lookups by primary key find each one", arguments: Backend.all)
    func manyItems(_ backend: Backend) throws {
        let storage = try backend.make()
        try storage.write { tx in
            for i in 0..<1_000 { _ = try tx.insert(row("bulk", "acct-\(i)", secret: "s\(i)")) }
        }
        let engine = KeychainEngine(storage: storage)
        for i in stride(from: 0, to: 1_000, by: 97) {
            #expect(try engine.copyMatching(q("bulk", "acct-\(i)", [Key.returnData: .bool(true)]))?.data == Data("s\(i)".utf8))
        }
    }
}
