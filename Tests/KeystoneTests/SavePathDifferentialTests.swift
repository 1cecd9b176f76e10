#if !canImport(Darwin)
import DefaultKeychainLock
import Foundation
import KeychainEngine
import KeychainServices
import Keystone
import KeystoneTesting
import Testing

/// Forwards every call, `addOrUpdate` included, to `base`, and is not engine-backed: a ``Keychain`` over it saves
/// through `addOrUpdate` even when `base` is an engine (which a ``Keychain`` over `base` itself saves through
/// `compiledSave`).
private struct AddOrUpdateStore: KeychainStore {
    let base: any KeychainStore
    func add(_ attributes: KeychainQuery) throws -> ItemResult? { try base.add(attributes) }
    func copyMatching(_ query: KeychainQuery) throws -> ItemResult? { try base.copyMatching(query) }
    func update(_ query: KeychainQuery, with: KeychainQuery) throws { try base.update(query, with: with) }
    func delete(_ query: KeychainQuery) throws { try base.delete(query) }
    func addOrUpdate(_ attributes: KeychainQuery, matching query: KeychainQuery, with changes: KeychainQuery) throws {
        try base.addOrUpdate(attributes, matching: query, with: changes)
    }
}

/// Which save path a differential run takes.
private enum SavePath: String, CaseIterable {
    case compiledSave, addOrUpdate
}

/// `compiledSave` (engine-backed stores) and `addOrUpdate` (`SystemKeychain`, any other store) leave the same items.
@Suite("compiledSave and addOrUpdate give identical items on every stack", .serialized, .ownsDefaultKeychain)
struct SavePathDifferentialTests {
    /// Every item of the engine, attributes and secret, ordered by class and account (row ids left out: they are
    /// the storage's own).
    private static func dump(_ engine: KeychainEngine) throws -> [KeychainQuery] {
        var rows: [KeychainQuery] = []
        for itemClass in ["genp", "inet"] {
            let query: KeychainQuery = [Key.class: .string(itemClass), Key.matchLimit: .string(Key.matchLimitAll),
                                        Key.returnAttributes: .bool(true), Key.returnData: .bool(true),
                                        Key.synchronizable: .string(Key.synchronizableAny)]
            do {
                rows += try engine.copyMatching(query)?.array?.compactMap(\.attributes) ?? []
            } catch let error where KeychainError.itemNotFound ~= error {}
        }
        return rows.map { row in
            var row = row
            row[Key.persistentReferenceAttribute] = nil
            return row
        }.sorted { "\($0[Key.class] ?? .bool(false))\($0[Key.account] ?? .bool(false))\($0[Key.synchronizable] ?? .bool(false))"
                  < "\($1[Key.class] ?? .bool(false))\($1[Key.account] ?? .bool(false))\($1[Key.synchronizable] ?? .bool(false))" }
    }

    /// The same saves through the typed API: a new item, the same item again, an item with other attributes (in a
    /// group, synchronizable), an item whose attributes change, a save that leaves label and comment unset, an internet
    /// password. The clock moves between saves so modification dates tell updates apart. A save's attributes come from
    /// a keychain with those options on the same store (not per-call options, whose rules item 4 of issue 26 changes).
    private static func saves(_ keychain: Keychain, clock: TestClock) throws {
        func with(_ options: ItemOptions) -> Keychain { Keychain(store: keychain.store, options: options) }
        let alice = try GenericPassword(service: "com.example.diff", account: "alice")
        let bob = try GenericPassword(service: "com.example.diff", account: "bob", accessGroup: "team.shared", synchronizable: true)
        try keychain.save(Data("one".utf8), for: alice)
        clock.advance(10)
        try keychain.save(Data("two".utf8), for: alice)
        clock.advance(10)
        try with(ItemOptions(accessibility: .afterFirstUnlock, label: "Bob", comment: "bob's")).save(Data("bob".utf8), for: bob)
        clock.advance(10)
        try with(ItemOptions(accessibility: .afterFirstUnlockThisDeviceOnly, label: "Alice", comment: "changed")).save(Data("three".utf8), for: alice)
        clock.advance(10)
        try with(ItemOptions(accessibility: .whenUnlocked)).save(Data("four".utf8), for: alice)
        clock.advance(10)
        let web = try InternetPassword(server: "example.com", account: "alice", protocol: .https, port: 443)
        try with(ItemOptions(label: "site")).save(Data("web".utf8), for: web)
        clock.advance(10)
        try keychain.save(Data("web2".utf8), for: web)
    }

    /// Runs the saves on a fresh `stack` through `path`; gives the items it leaves.
    private static func run(_ stack: TypedStack, _ path: SavePath) throws -> [KeychainQuery] {
        var rows: [KeychainQuery] = []
        try TypedStackFixture.with(stack) { f in
            let keychain: Keychain
            switch (stack, path) {
            case (_, .compiledSave) where stack.isThroughSecItem:
                keychain = Keychain(store: f.engine) // the same engine (file, Secret Service, etcd), saved to directly
                #expect(Keychain.engine(behind: keychain.store) != nil)
            case (_, .addOrUpdate) where stack.isThroughSecItem:
                keychain = f.keychain // Keychain() → SystemKeychain → SecItem
                #expect(keychain.store is SystemKeychain)
            case (_, .compiledSave):
                keychain = f.keychain
                #expect(Keychain.engine(behind: keychain.store) != nil)
            case (_, .addOrUpdate):
                keychain = Keychain(store: AddOrUpdateStore(base: f.keychain.store))
                #expect(Keychain.engine(behind: keychain.store) == nil)
            }
            try saves(keychain, clock: f.clock)
            rows = try dump(f.engine)
        }
        return rows
    }

    @Test("the same saves through compiledSave and through addOrUpdate leave identical items (attributes and data)",
          arguments: TypedStack.available)
    func identicalItems(stack: TypedStack) throws {
        let compiled = try Self.run(stack, .compiledSave)
        let addOrUpdate = try Self.run(stack, .addOrUpdate)
        #expect(compiled.count == 3)
        #expect(compiled == addOrUpdate)
        if compiled != addOrUpdate {
            for (a, b) in zip(compiled, addOrUpdate) where a != b {
                let keys = Set(a.keys).union(b.keys).filter { a[$0] != b[$0] }
                Issue.record("differs in \(keys.sorted()): compiledSave \(keys.sorted().map { a[$0] }) addOrUpdate \(keys.sorted().map { b[$0] })")
            }
        }
    }

    @Test("every stack leaves the same items for the same saves (attributes and data)")
    func identicalAcrossStacks() throws {
        let reference = try Self.run(.engine, .compiledSave)
        for stack in TypedStack.available {
            for path in SavePath.allCases {
                let rows = try Self.run(stack, path)
                #expect(rows == reference, "\(stack) via \(path)")
                for (a, b) in zip(reference, rows) where a != b {
                    let keys = Set(a.keys).union(b.keys).filter { a[$0] != b[$0] }
                    Issue.record("\(stack) via \(path) differs in \(keys.sorted()): \(keys.sorted().map { b[$0] }) instead of \(keys.sorted().map { a[$0] })")
                }
            }
        }
    }
}
#endif
