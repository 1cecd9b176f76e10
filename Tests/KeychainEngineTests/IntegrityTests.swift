import Foundation
import KeychainEngine
import Testing

/// A storage whose index lies: for a search by `account`, it returns the rows of `substitute` instead, as a
/// keychain file whose digest columns were swapped would without its integrity checks. It also reports chosen
/// rows as damaged (`errSecDecode`), as a file reports a row that fails to open.
final class LyingStorage: KeychainStorage {
    let inner = MemoryStorage()
    let lie = Locked<(account: String, substitute: String)?>(nil)
    let damaged = Locked<Set<Int64>>([])

    var lockState: LockState { inner.lockState }

    func read<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        try inner.read { try body(Reader(base: $0, owner: self)) }
    }

    func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        try inner.write { try body(Writer(base: $0, owner: self)) }
    }

    fileprivate func filter(_ base: any StorageReader, _ cls: ItemClass, _ constraints: [String: AttributeValue]) throws -> [Candidate] {
        var asked = constraints
        if let (account, substitute) = lie.current, constraints[Key.account] == .string(account) {
            asked[Key.account] = .string(substitute)
        }
        return try base.candidates(in: cls, matching: asked).map(mark)
    }

    fileprivate func mark(_ candidate: Candidate) -> Candidate {
        if case .item(let item) = candidate, damaged.current.contains(item.rowID) {
            return .unreadable(itemClass: item.itemClass, rowID: item.rowID, error: EngineError(Status.decode, "damaged"))
        }
        return candidate
    }

    private struct Reader: StorageReader {
        let base: any StorageReader
        let owner: LyingStorage
        func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate] {
            try owner.filter(base, itemClass, constraints)
        }
        func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? {
            try base.candidate(in: itemClass, rowID: rowID).map(owner.mark)
        }
    }

    private struct Writer: StorageWriter {
        let base: any StorageWriter
        let owner: LyingStorage
        func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate] {
            try owner.filter(base, itemClass, constraints)
        }
        func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? {
            try base.candidate(in: itemClass, rowID: rowID).map(owner.mark)
        }
        func insert(_ item: StoredItem) throws -> Int64 { try base.insert(item) }
        func replace(_ item: StoredItem) throws { try base.replace(item) }
        func delete(in itemClass: ItemClass, rowID: Int64) throws { try base.delete(in: itemClass, rowID: rowID) }
    }
}

@Suite("The engine never trusts the storage's index")
struct IntegrityTests {
    func fixture() throws -> (LyingStorage, KeychainEngine) {
        let storage = LyingStorage()
        let engine = KeychainEngine(storage: storage)
        try engine.add(genp("tam", "a", [Key.valueData: secret("secret-a")]))
        try engine.add(genp("tam", "b", [Key.valueData: secret("secret-b")]))
        storage.lie.withLock { $0 = ("a", "b") }
        return (storage, engine)
    }

    @Test("a row returned for another account is errSecDecode, never that account's secret")
    func copy() throws {
        let (_, engine) = try fixture()
        #expect(status { _ = try engine.secretString(genp("tam", "a")) } == Status.decode)
        let all = try? engine.copyMatching(genp("tam", "a", [Key.matchLimit: .string(Key.matchLimitAll), Key.returnData: .bool(true)]))
        #expect(all == nil)
    }

    @Test("delete and update by the lied-about account change nothing")
    func deleteAndUpdate() throws {
        let (storage, engine) = try fixture()
        #expect(status { try engine.delete(genp("tam", "a")) } == Status.decode)
        #expect(status { try engine.update(genp("tam", "a"), with: [Key.valueData: secret("overwritten")]) } == Status.decode)
        storage.lie.withLock { $0 = nil }
        #expect(try engine.secretString(genp("tam", "a")) == "secret-a")
        #expect(try engine.secretString(genp("tam", "b")) == "secret-b")
    }

    @Test("damaged rows are skipped, counted and never deleted; only damaged matches is errSecDecode")
    func damagedRows() throws {
        let storage = LyingStorage()
        let engine = KeychainEngine(storage: storage)
        for name in ["a", "b", "c"] { try engine.add(genp("svc", name, [Key.valueData: secret("s-\(name)")])) }
        let rowB = try #require(try engine.copyMatching(genp("svc", "b", [Key.returnPersistentRef: .bool(true)]))?.data)
        storage.damaged.withLock { $0 = [PersistentReference(data: rowB)!.rowID] }
        let all = try engine.copyMatching(genp("svc", nil, [Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true)]))
        #expect(all?.array?.count == 2)
        #expect(engine.damagedItemsSeen == 1)
        #expect(status { _ = try engine.secretString(genp("svc", "b")) } == Status.decode)
        // Deleting the whole service removes the readable items and leaves the damaged one for a repair.
        try engine.delete(genp("svc"))
        #expect(status { try engine.delete(genp("svc", "b")) } == Status.decode)
        storage.damaged.withLock { $0 = [] }
        #expect(try engine.secretString(genp("svc", "b")) == "s-b")
        #expect(status { _ = try engine.secretString(genp("svc", "a")) } == Status.itemNotFound)
    }
}
