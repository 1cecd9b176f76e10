import Foundation
import KeychainEngine
@testable import KeychainFile
import Testing

// The durable update's hot path (issue 32 item 2): the `pk` digest comes from the digest cache when the primary key is
// unchanged (kept by the exact bytes the HMAC authenticates, per key generation), the write statements' SQL is made once
// per class, and the cached row is refreshed from the plaintext just sealed. These tests check that what lands in the
// file is what a fresh instance, with no cache, finds and opens.

@Suite("Keychain file: the update path")
struct UpdatePathTests {
    /// Opens `path` in a new instance (no cache of any kind) and unlocks it.
    private func fresh(_ path: String, password: String = "pw") throws -> KeychainEngine {
        let file = try KeychainFile.open(at: path)
        try file.unlock(password: password)
        return KeychainEngine(storage: file)
    }

    private func rowID(_ engine: KeychainEngine, _ service: String, _ account: String) throws -> Int64? {
        guard let reference = try engine.copyMatching(genp(service, account, [Key.returnPersistentRef: .bool(true)]))?.data else { return nil }
        return PersistentReference(data: reference)?.rowID
    }

    @Test("an update of the data only leaves the row's digest columns as they were and the item is found by its primary key, here and in a fresh instance")
    func dataOnlyUpdate() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("svc", "acct", [Key.valueData: .data(Data("one".utf8))]))
        try engine.add(genp("svc", "other", [Key.valueData: .data(Data("other".utf8))]))
        let row = try #require(try rowID(engine, "svc", "acct"))
        let pk = rawColumn(path, "genp", "pk", rowID: row), account = rawColumn(path, "genp", "d_acct", rowID: row)
        let payload = rawColumn(path, "genp", "payload", rowID: row)
        for round in 2...4 {
            try engine.update(genp("svc", "acct"), with: [Key.valueData: .data(Data("v\(round)".utf8))])
            #expect(try engine.secret("svc", "acct") == "v\(round)")
        }
        #expect(rawColumn(path, "genp", "pk", rowID: row) == pk)
        #expect(rawColumn(path, "genp", "d_acct", rowID: row) == account)
        #expect(rawColumn(path, "genp", "payload", rowID: row) != payload)
        let other = try fresh(path)
        #expect(try other.secret("svc", "acct") == "v4")
        #expect(try other.secret("svc", "other") == "other")
        #expect(try rowID(other, "svc", "acct") == row)
    }

    @Test("an update that changes the primary key moves the item: its digest columns follow, the new key finds it and the old one does not, here and in a fresh instance")
    func primaryKeyUpdate() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("svc", "old", [Key.valueData: .data(Data("s".utf8))]))
        let row = try #require(try rowID(engine, "svc", "old"))
        let pk = rawColumn(path, "genp", "pk", rowID: row), account = rawColumn(path, "genp", "d_acct", rowID: row)
        let service = rawColumn(path, "genp", "d_svce", rowID: row)
        try engine.update(genp("svc", "old"), with: [Key.account: .string("new"), Key.valueData: .data(Data("t".utf8))])
        #expect(rawColumn(path, "genp", "pk", rowID: row) != pk)
        #expect(rawColumn(path, "genp", "d_acct", rowID: row) != account)
        #expect(rawColumn(path, "genp", "d_svce", rowID: row) == service)
        for reader in [engine, try fresh(path)] {
            #expect(try reader.secret("svc", "new") == "t")
            #expect(fileStatus { _ = try reader.secret("svc", "old") } == Status.itemNotFound)
            #expect(try rowID(reader, "svc", "new") == row)
        }
        // And back: the digests of the old key are the ones it had (a search of the old key finds it again).
        try engine.update(genp("svc", "new"), with: [Key.account: .string("old")])
        #expect(rawColumn(path, "genp", "pk", rowID: row) == pk)
        #expect(try fresh(path).secret("svc", "old") == "t")
    }

    @Test("the row an update caches is the one decrypting the file gives: same attributes and secret as a fresh instance reads, with no decryption")
    func cachedRowAfterUpdate() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("svc", "acct", [Key.valueData: .data(Data("one".utf8)), Key.label: .string("L"),
                                            Key.generic: .data(Data([0, 1, 2]))]))
        _ = try engine.secret("svc", "acct")  // cached
        try engine.update(genp("svc", "acct"), with: [Key.valueData: .data(Data("two".utf8)), Key.comment: .string("c")])
        let decryptions = file.decryptionCount
        let query = genp("svc", "acct", [Key.returnAttributes: .bool(true), Key.returnData: .bool(true)])
        let here = try #require(try engine.copyMatching(query))
        #expect(file.decryptionCount == decryptions)
        let there = try #require(try fresh(path).copyMatching(query))
        #expect(here.attributes != nil)
        #expect(here.attributes == there.attributes)
        #expect(here.attributes?[Key.valueData] == .data(Data("two".utf8)))
        #expect(here.attributes?[Key.comment] == .string("c"))
    }

    @Test("an item the row codec keeps bit for bit is cached as it is: decoding its encoding gives an equal item")
    func decodedFormIsTheItem() throws {
        let item = StoredItem(itemClass: .genericPassword, rowID: 7, attributes: [
            Key.service: .string("svc é"), Key.account: .data(Data("acct".utf8)), Key.generic: .data(Data([0, 255, 1])),
            Key.type: .number(-42), Key.isInvisible: .bool(true), Key.modificationDate: .date(Date(timeIntervalSinceReferenceDate: 1.0 / 3.0)),
            Key.accessible: .string(Accessibility.afterFirstUnlock.rawValue),
        ], secret: Data("secret".utf8), accessControl: AccessControl(accessibility: .afterFirstUnlock, flags: [.userPresence]))
        let cached = try #require(KeychainFile.decodedForm(of: item))
        var stored = item
        stored.rowID = 0
        let decoded = try RowCodec.decode(RowCodec.encode(stored), itemClass: .genericPassword, rowID: 7)
        #expect(cached == decoded)
        #expect(cached.attributes == decoded.attributes && cached.secret == decoded.secret && cached.accessControl == decoded.accessControl)
    }

    @Test("an item holding a slice of a larger Data is decoded for the cache instead (its data then starts at index 0)")
    func slicesAreDecoded() {
        let big = Data("0123456789".utf8)
        var item = StoredItem(itemClass: .genericPassword, rowID: 1, attributes: [Key.generic: .data(big[3...])], secret: nil, accessControl: nil)
        #expect(KeychainFile.decodedForm(of: item) == nil)
        item.attributes[Key.generic] = .data(Data(big[3...]))
        item.secret = big[2...]
        #expect(KeychainFile.decodedForm(of: item) == nil)
        item.secret = Data(big[2...])
        #expect(KeychainFile.decodedForm(of: item) != nil)
    }

    @Test("primary-key digests cached under one file's keys are not used after the file is replaced by another with other keys")
    func digestsFollowKeys() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("svc", "acct", [Key.valueData: .data(Data("first".utf8))]))
        try engine.update(genp("svc", "acct"), with: [Key.valueData: .data(Data("first2".utf8))])
        #expect(try engine.secret("svc", "acct") == "first2")
        // Another process deletes the keychain and creates one at the same path: another master key, so another
        // index key, with an item of the same primary key.
        try KeychainFile.delete(at: path)
        do {
            let other = try KeychainFile.create(at: path, password: "pw2")
            try KeychainEngine(storage: other).add(genp("svc", "acct", [Key.valueData: .data(Data("second".utf8))]))
            other.lock()
        }
        // The instance follows the replacement with none of the old keys; unlocked, its digests are the new file's.
        try file.unlock(password: "pw2")
        #expect(try engine.secret("svc", "acct") == "second")
        try engine.update(genp("svc", "acct"), with: [Key.valueData: .data(Data("second2".utf8))])
        #expect(try fresh(path, password: "pw2").secret("svc", "acct") == "second2")
    }
}
