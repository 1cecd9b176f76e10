import Foundation
import KeychainEngine
import Testing

/// A storage whose transactions report the lock state they were opened in (as a keychain file's do), and which counts
/// how often the engine asks the storage itself for its lock state (for a keychain file: a read of its header).
/// Its inserts and replaces enforce nothing: the engine's checks are all there is.
final class ReportingStorage: KeychainStorage {
    let inner = MemoryStorage()
    let asked = Locked(0)

    var lockState: LockState {
        asked.withLock { $0 += 1 }
        return inner.lockState
    }

    func read<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        let state = inner.lockState
        return try inner.read { try body(Reader(base: $0, lockState: state)) }
    }

    func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        let state = inner.lockState
        return try inner.write { try body(Writer(base: $0, lockState: state)) }
    }

    private struct Reader: StorageReader {
        let base: any StorageReader
        let lockState: LockState?
        func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate] {
            try base.candidates(in: itemClass, matching: constraints)
        }
        func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? { try base.candidate(in: itemClass, rowID: rowID) }
    }

    private struct Writer: StorageWriter {
        let base: any StorageWriter
        let lockState: LockState?
        func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate] {
            try base.candidates(in: itemClass, matching: constraints)
        }
        func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? { try base.candidate(in: itemClass, rowID: rowID) }
        func insert(_ item: StoredItem) throws -> Int64 { try base.insert(item) }
        func replace(_ item: StoredItem) throws { try base.replace(item) }
        func delete(in itemClass: ItemClass, rowID: Int64) throws { try base.delete(in: itemClass, rowID: rowID) }
    }
}

@Suite("Engine: the lock state a write transaction reports")
struct TransactionLockStateTests {
    @Test("adds and updates check availability against the transaction's lock state and do not ask the storage again")
    func writesUseTheTransactionsState() throws {
        let storage = ReportingStorage()
        let engine = KeychainEngine(storage: storage)
        try engine.add(genp("svc", "first", [Key.valueData: secret("1")]))  // the engine learns the storage reports it
        let before = storage.asked.current
        for i in 0..<5 {
            try engine.add(genp("svc", "a\(i)", [Key.valueData: secret("a")]))
            try engine.update(genp("svc", "a\(i)"), with: [Key.valueData: secret("b")])
        }
        #expect(storage.asked.current == before)
        #expect(try engine.secretString(genp("svc", "a4")) == "b")
    }

    @Test("after the first add, an add of an item the lock state does not serve still fails with errSecInteractionNotAllowed and adds nothing")
    func addsStillChecked() throws {
        let storage = ReportingStorage()
        let engine = KeychainEngine(storage: storage)
        try engine.add(genp("svc", "first", [Key.valueData: secret("1")]))
        storage.inner.lockState = .lockedAfterFirstUnlock
        let whenUnlocked: KeychainQuery = [Key.valueData: secret("x"), Key.accessible: .string(Accessibility.whenUnlocked.rawValue)]
        #expect(status { try engine.add(genp("svc", "second", whenUnlocked)) } == Status.interactionNotAllowed)
        #expect(status { try engine.add(genp("svc", "third", whenUnlocked)) } == Status.interactionNotAllowed)
        // An item the state serves is added.
        try engine.add(genp("svc", "fourth", [Key.valueData: secret("y"), Key.accessible: .string(Accessibility.afterFirstUnlock.rawValue)]))
        #expect(storage.inner.count == 2)
    }

    @Test("an update to an accessibility the transaction's lock state does not serve fails with errSecInteractionNotAllowed")
    func updatesStillChecked() throws {
        let storage = ReportingStorage()
        let engine = KeychainEngine(storage: storage)
        try engine.add(genp("svc", "acct", [Key.valueData: secret("1"), Key.accessible: .string(Accessibility.afterFirstUnlock.rawValue)]))
        storage.inner.lockState = .lockedAfterFirstUnlock
        #expect(status {
            try engine.update(genp("svc", "acct"), with: [Key.accessible: .string(Accessibility.whenUnlocked.rawValue)])
        } == Status.interactionNotAllowed)
        storage.inner.lockState = .unlocked
        #expect(try engine.copyMatching(genp("svc", "acct").merging([Key.returnAttributes: .bool(true)]) { $1 })?
            .attributes?[Key.accessible] == .string(Accessibility.afterFirstUnlock.rawValue))
    }
}
