import Foundation
import Testing
import KeychainEngine

/// A storage below the engine that cannot be trusted: it answers a search for one account with another
/// account's row (as a storage whose unauthenticated index columns were swapped would), and reports some
/// rows as damaged (`errSecDecode`), as a storage does for a row that fails its integrity check.
final class TamperedStorage: KeychainStorage, @unchecked Sendable {
    // @unchecked Sendable: the settings are set before the engine runs, then only read.
    let inner = MemoryStorage()
    /// A search for the key account is answered with the rows of the value account.
    var redirect: [String: String] = [:]
    /// Rows reported as unreadable with errSecDecode.
    var damaged: Set<Int64> = []

    var lockState: LockState { inner.lockState }

    func read<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        try inner.write { try body(Reader(inner: $0, owner: self)) }
    }

    func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        try inner.write { try body(Reader(inner: $0, owner: self)) }
    }

    /// The row as stored, bypassing the tampering.
    func stored(_ rowID: Int64) throws -> StoredItem? {
        try inner.read { tx in
            if case .item(let item)? = try tx.candidate(in: .genericPassword, rowID: rowID) { return item }
            return nil
        }
    }

    private struct Reader: StorageWriter {
        let inner: any StorageWriter
        let owner: TamperedStorage

        func tamper(_ candidate: Candidate) -> Candidate {
            if case .item(let item) = candidate, owner.damaged.contains(item.rowID) {
                return .unreadable(itemClass: item.itemClass, rowID: item.rowID, error: EngineError(Status.decode, "the item failed its integrity check"))
            }
            return candidate
        }

        func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate] {
            var constraints = constraints
            if let account = constraints[Key.account]?.stringValue, let other = owner.redirect[account] {
                constraints[Key.account] = .string(other)
            }
            return try inner.candidates(in: itemClass, matching: constraints).map(tamper)
        }

        func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? {
            try inner.candidate(in: itemClass, rowID: rowID).map(tamper)
        }

        func insert(_ item: StoredItem) throws -> Int64 { try inner.insert(item) }
        func replace(_ item: StoredItem) throws { try inner.replace(item) }
        func delete(in itemClass: ItemClass, rowID: Int64) throws { try inner.delete(in: itemClass, rowID: rowID) }
    }
}

/// Counts the damaged rows operations report.
final class DamageRecorder: EngineHook, @unchecked Sendable {
    // @unchecked Sendable: guarded by `lock`.
    private let lock = NSLock()
    private var reports: [(KeychainOperation, Int)] = []
    var skipped: [(operation: KeychainOperation, count: Int)] { lock.withLock { reports.map { ($0.0, $0.1) } } }

    func willPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?) throws {}
    func didPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?, status: Int32) {}
    func didSkipDamagedItems(_ operation: KeychainOperation, count: Int) { lock.withLock { reports.append((operation, count)) } }
}

/// An engine over a tampered storage holding svc/a, svc/b, svc/c with secrets "A", "B", "C" (row ids 1, 2, 3).
struct TamperedFixture {
    let storage = TamperedStorage()
    let engine: KeychainEngine
    let recorder = DamageRecorder()

    init() throws {
        engine = KeychainEngine(storage: storage)
        engine.addHook(recorder)
        for account in ["a", "b", "c"] {
            try engine.add(genp("svc", account, [Key.valueData: secret(account.uppercased()), Key.label: .string("old")]))
        }
    }

    func secretOf(_ rowID: Int64) throws -> String? {
        try storage.stored(rowID)?.secret.flatMap { String(data: $0, encoding: .utf8) }
    }
}

@Suite("Damaged and tampered rows: the engine trusts no storage and never destroys what it cannot read")
struct DamagedItemTests {
    @Test("a row the storage returns for another account is an integrity failure: copy neither returns it nor succeeds",
          arguments: [false, true])
    func lyingStorageCopy(_ limitAll: Bool) throws {
        let f = try TamperedFixture()
        f.storage.redirect = ["a": "b"]
        var query = genp("svc", "a", [Key.returnData: .bool(true)])
        if limitAll { query[Key.matchLimit] = .string(Key.matchLimitAll) }
        var returned: ItemResult?
        let code = status { returned = try f.engine.copyMatching(query) }
        #expect(code == Status.decode)
        #expect(returned == nil)
        #expect(f.recorder.skipped.map(\.count) == [1])
    }

    @Test("a row the storage returns for another account is neither deleted nor changed")
    func lyingStorageWrites() throws {
        let f = try TamperedFixture()
        f.storage.redirect = ["a": "b"]
        #expect(status { try f.engine.delete(genp("svc", "a")) } == Status.decode)
        #expect(status { try f.engine.update(genp("svc", "a"), with: [Key.valueData: secret("overwritten")]) } == Status.decode)
        #expect(try f.secretOf(2) == "B")
        #expect(try f.storage.stored(2)?.attributes[Key.label] == .string("old"))
        #expect(f.storage.inner.count == 3)
    }

    @Test("delete never removes a row it could not read, even when the storage's index columns say it matches")
    func swappedDigestDelete() throws {
        // An attacker swapped the digest column of b's row to a's: the storage finds it for 'a', but it
        // cannot authenticate it (its sealed contents are b's), so it reports it damaged.
        let f = try TamperedFixture()
        f.storage.redirect = ["a": "b"]
        f.storage.damaged = [2]
        #expect(status { try f.engine.delete(genp("svc", "a")) } == Status.decode)
        #expect(status { try f.engine.update(genp("svc", "a"), with: [Key.valueData: secret("x")]) } == Status.decode)
        #expect(try f.secretOf(2) == "B")
        #expect(f.storage.inner.count == 3)
    }

    @Test("delete and update act on the readable matches, skip the damaged one and report it",
          arguments: [KeychainOperation.update, .delete])
    func readableMatchesWin(_ operation: KeychainOperation) throws {
        let f = try TamperedFixture()
        f.storage.damaged = [2]
        if operation == .delete {
            try f.engine.delete(genp("svc"))
            #expect(f.storage.inner.count == 1)
            #expect(try f.secretOf(1) == nil)
            #expect(try f.secretOf(3) == nil)
        } else {
            try f.engine.update(genp("svc"), with: [Key.valueData: secret("new")])
            #expect(try f.secretOf(1) == "new")
            #expect(try f.secretOf(3) == "new")
        }
        #expect(try f.secretOf(2) == "B")
        #expect(f.recorder.skipped.map(\.operation) == [operation])
        #expect(f.recorder.skipped.map(\.count) == [1])
    }

    @Test("copy with limit All returns the readable matches and reports how many damaged ones it left out")
    func copyAllSkipsDamaged() throws {
        let f = try TamperedFixture()
        f.storage.damaged = [1, 3]
        let result = try f.engine.copyMatching(genp("svc", nil, [Key.returnData: .bool(true), Key.matchLimit: .string(Key.matchLimitAll)]))
        #expect(result?.array?.compactMap(\.string) == ["B"])
        #expect(f.recorder.skipped.map(\.count) == [2])
    }

    @Test("copy with limit One passes over a damaged first match to a readable one")
    func copyOneSkipsDamaged() throws {
        let f = try TamperedFixture()
        f.storage.damaged = [1]
        #expect(try f.engine.secretString(genp("svc")) == "B")
        #expect(f.recorder.skipped.map(\.count) == [1])
    }

    @Test("when only damaged rows match, copy, update and delete fail with errSecDecode and change nothing",
          arguments: [KeychainOperation.copy, .update, .delete])
    func onlyDamaged(_ operation: KeychainOperation) throws {
        let f = try TamperedFixture()
        f.storage.damaged = [1, 2, 3]
        let code: Int32
        switch operation {
        case .copy:
            code = status { _ = try f.engine.copyMatching(genp("svc", nil, [Key.matchLimit: .string(Key.matchLimitAll)])) }
        case .update:
            code = status { try f.engine.update(genp("svc"), with: [Key.valueData: secret("x")]) }
        default:
            code = status { try f.engine.delete(genp("svc")) }
        }
        #expect(code == Status.decode)
        #expect(f.storage.inner.count == 3)
        #expect(try f.secretOf(1) == "A")
        #expect(f.recorder.skipped.map(\.count) == [3])
    }

    @Test("a locked match still fails the whole delete, even next to readable ones")
    func lockedStillFails() throws {
        let f = try TamperedFixture()
        try f.engine.add(genp("svc", "always", [Key.valueData: secret("D"), Key.accessible: .string(Accessibility.always.rawValue)]))
        f.storage.inner.lockState = .locked
        #expect(status { try f.engine.delete(genp("svc")) } == Status.interactionNotAllowed)
        #expect(f.storage.inner.count == 4)
    }
}
