import Foundation
import Testing
import KeychainEngine
import KeychainStorageTesting

/// A view of another storage under a new identity: a "second keychain" that is really the first one.
final class AliasStorage: KeychainStorage, Sendable {
    let base: any KeychainStorage
    init(_ base: any KeychainStorage) { self.base = base }
    var lockState: LockState { base.lockState }
    func read<T>(_ body: (any StorageReader) throws -> T) throws -> T { try base.read(body) }
    func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T { try base.write(body) }
}

@Suite("Storage contract: the clauses catch storages that break them")
struct ContractViolationTests {
    func clause(_ prefix: String) throws -> StorageContract.Clause {
        try #require(StorageContract.clauses.first { $0.name.hasPrefix(prefix) })
    }

    @Test("two keychains that share rows fail the isolation clause with a ContractViolation naming it")
    func sharedKeychainsFail() throws {
        let shared = StorageFactory(makeStorage: { MemoryStorage() }, makeSecondKeychain: { AliasStorage($0) })
        let isolation = try clause("two keychains on one backend are isolated")
        let violation = try #require(throws: ContractViolation.self) { try StorageContract.run(isolation, on: shared) }
        #expect(violation.clause == isolation.name)
        #expect(violation.message.contains("share a table"))
    }

    @Test("a damaged row that vanishes (the factory deletes it) fails the damaged-row clause")
    func vanishingDamageFails() throws {
        let deleting = StorageFactory(makeStorage: { MemoryStorage() }, damageRow: { storage, itemClass, rowID in
            try storage.write { try $0.delete(in: itemClass, rowID: rowID) }
        })
        let damaged = try clause("a damaged row is reported")
        #expect(throws: ContractViolation.self) { try StorageContract.run(damaged, on: deleting) }
    }

    @Test("a storage that serves a damaged row as readable fails the damaged-row clause (here the damage is a no-op)")
    func unauthenticatedRowFails() throws {
        let noDamage = StorageFactory(makeStorage: { MemoryStorage() }, damageRow: { _, _, _ in })
        let damaged = try clause("a damaged row is reported")
        let violation = try #require(throws: ContractViolation.self) { try StorageContract.run(damaged, on: noDamage) }
        #expect(violation.message.contains("returned as readable"))
    }

    @Test("a clause needing a capability the factory lacks does not apply, and running it says which capability is missing")
    func missingCapability() throws {
        let plain = StorageFactory(makeStorage: { MemoryStorage() })
        let isolation = try clause("two keychains on one backend are isolated")
        #expect(!isolation.applies(to: plain))
        let violation = try #require(throws: ContractViolation.self) { try StorageContract.run(isolation, on: plain) }
        #expect(violation.message.contains("makeSecondKeychain"))
    }
}

/// A memory storage whose searches misbehave in one way, to show that the clauses catch it.
final class FaultyStorage: KeychainStorage, Sendable {
    enum Fault: Sendable {
        /// forEachCandidate goes on after its body returns false.
        case ignoresStop
        /// forEachCandidate reads (and "decrypts") every match before visiting the first; a lazy one decrypts each
        /// row as it visits it.
        case eager, lazy
        /// Searches leave out this constraint.
        case dropsConstraint(String)
        /// Searches return rows in descending row-id order.
        case reversed
    }

    let base = MemoryStorage()
    let fault: Fault
    /// Rows "decrypted" so far (the eager and lazy faults).
    let decrypted = Locked(0)

    init(_ fault: Fault) { self.fault = fault }

    var lockState: LockState { base.lockState }
    func read<T>(_ body: (any StorageReader) throws -> T) throws -> T { try base.read { try body(Reader(base: $0, storage: self)) } }
    func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T { try base.write { try body(Writer(base: $0, storage: self)) } }

    struct Reader: StorageReader {
        let base: any StorageReader
        let storage: FaultyStorage

        func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate] {
            var all: [Candidate] = []
            try forEachCandidate(in: itemClass, matching: constraints) { all.append($0); return true }
            return all
        }

        func forEachCandidate(in itemClass: ItemClass, matching constraints: [String: AttributeValue], _ body: (Candidate) throws -> Bool) throws {
            switch storage.fault {
            case .ignoresStop:
                for candidate in try base.candidates(in: itemClass, matching: constraints) { _ = try body(candidate) }
            case .eager:
                let all = try base.candidates(in: itemClass, matching: constraints)
                storage.decrypted.withLock { $0 += all.count }
                for candidate in all { guard try body(candidate) else { return } }
            case .lazy:
                try base.forEachCandidate(in: itemClass, matching: constraints) { candidate in
                    storage.decrypted.withLock { $0 += 1 }
                    return try body(candidate)
                }
            case .dropsConstraint(let key):
                try base.forEachCandidate(in: itemClass, matching: constraints.filter { $0.key != key }, body)
            case .reversed:
                for candidate in try base.candidates(in: itemClass, matching: constraints).reversed() { guard try body(candidate) else { return } }
            }
        }

        func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? { try base.candidate(in: itemClass, rowID: rowID) }
    }

    struct Writer: StorageWriter {
        let base: any StorageWriter
        let storage: FaultyStorage
        var reader: Reader { Reader(base: base, storage: storage) }

        func candidates(in itemClass: ItemClass, matching constraints: [String: AttributeValue]) throws -> [Candidate] {
            try reader.candidates(in: itemClass, matching: constraints)
        }
        func forEachCandidate(in itemClass: ItemClass, matching constraints: [String: AttributeValue], _ body: (Candidate) throws -> Bool) throws {
            try reader.forEachCandidate(in: itemClass, matching: constraints, body)
        }
        func candidate(in itemClass: ItemClass, rowID: Int64) throws -> Candidate? { try base.candidate(in: itemClass, rowID: rowID) }
        func insert(_ item: StoredItem) throws -> Int64 { try base.insert(item) }
        func replace(_ item: StoredItem) throws { try base.replace(item) }
        func delete(in itemClass: ItemClass, rowID: Int64) throws { try base.delete(in: itemClass, rowID: rowID) }
    }
}

@Suite("Storage contract: the search and lock-state clauses catch storages that break them")
struct SearchAndLockViolationTests {
    func clause(_ prefix: String) throws -> StorageContract.Clause {
        try #require(StorageContract.clauses.first { $0.name.hasPrefix(prefix) })
    }

    func factory(_ fault: FaultyStorage.Fault) -> StorageFactory {
        StorageFactory(makeStorage: { FaultyStorage(fault) },
                       decryptionCount: { ($0 as? FaultyStorage)?.decrypted.current ?? 0 })
    }

    @Test("a forEachCandidate that goes on after its body returns false fails the limit-one clause")
    func ignoresStop() throws {
        let violation = try #require(throws: ContractViolation.self) {
            try StorageContract.run(try clause("a limit-one search stops at the first match"), on: factory(.ignoresStop))
        }
        #expect(violation.message.contains("called its body 20 times after it returned false"))
    }

    @Test("a storage that decrypts every match before visiting the first fails the decryption clause; one that decrypts as it visits keeps it")
    func eagerDecryption() throws {
        let decrypts = try clause("a limit-one search decrypts only the first match")
        let violation = try #require(throws: ContractViolation.self) { try StorageContract.run(decrypts, on: factory(.eager)) }
        #expect(violation.message.contains("decrypted 20 rows"))
        try StorageContract.run(decrypts, on: factory(.lazy))
    }

    @Test("a search that leaves out the access group, or returns rows out of row-id order, fails the query-shape clause")
    func wrongShapes() throws {
        let shapes = try clause("every query shape the engine issues")
        let dropped = try #require(throws: ContractViolation.self) { try StorageContract.run(shapes, on: factory(.dropsConstraint(Key.accessGroup))) }
        #expect(dropped.message.contains("agrp"))
        #expect(throws: ContractViolation.self) { try StorageContract.run(shapes, on: factory(.reversed)) }
        try StorageContract.run(shapes, on: factory(.lazy))
    }

    @Test("a storage that serves rows while locked, though it claims to withhold them, fails the locked clause naming always*")
    func servesWhileLocked() throws {
        let locked = try clause("locked:")
        let serving = StorageFactory(makeStorage: { MemoryStorage() }, setLockState: { storage, state in
            (storage as? MemoryStorage)?.lockState = state
        })   // withholdsUnavailableRows: true, which the memory storage does not do
        let violation = try #require(throws: ContractViolation.self) { try StorageContract.run(locked, on: serving) }
        #expect(violation.message.contains("locked: the always row was served by row id, but the rule makes it unavailable in this state"))
    }

    @Test("a lock state the factory cannot reach: its clause does not apply, and the reason says which state and why")
    func unreachableState() throws {
        let afterFirstUnlock = try clause("after first unlock:")
        let twoStates = StorageFactory(makeStorage: { MemoryStorage() }, setLockState: { _, _ in }, reachableLockStates: [.locked, .unlocked],
                                       reasonsForMissingCapabilities: [.lockState(.lockedAfterFirstUnlock): "only locked or unlocked"])
        #expect(!afterFirstUnlock.applies(to: twoStates))
        #expect(afterFirstUnlock.reasonNotApplicable(to: twoStates) == "no setLockState(lockedAfterFirstUnlock): only locked or unlocked")
        #expect(try clause("locked:").applies(to: twoStates))
    }
}
