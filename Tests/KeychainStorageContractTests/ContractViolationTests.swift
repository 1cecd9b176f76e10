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
        #expect(violation.message.contains("secondKeychain"))
    }
}
