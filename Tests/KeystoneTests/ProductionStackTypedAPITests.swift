#if !canImport(Darwin)
import DefaultKeychainLock
import Foundation
import KeychainEngine
import KeychainServices
import Keystone
import KeystoneTesting
import Testing

/// The stacks the typed API's core behaviours run on, with the same expectations.
enum TypedStack: String, CaseIterable, CustomTestStringConvertible, Sendable {
    /// `InMemoryKeychain` (the test double; the engine over `MemoryStorage`, compiled save path).
    case inMemoryKeychain
    /// The bare engine over `MemoryStorage` (compiled save path).
    case engine
    /// The production stack: `Keychain()` → `SystemKeychain` → `SecItem*` → the process's default keychain, here a
    /// fresh keychain file in a temporary folder (never the user's), installed with `setEngine`.
    case keychainFileThroughSecItem

    var testDescription: String { rawValue }
}

/// One stack, fresh: the keychain the typed API uses and the engine underneath (for its clock).
struct TypedStackFixture {
    let keychain: Keychain
    let engine: KeychainEngine
    let clock = TestClock()
    private let directory: URL?

    /// Installs `stack`. For ``TypedStack/keychainFileThroughSecItem`` it replaces the process's default keychain:
    /// only suites with `.ownsDefaultKeychain` may make one.
    init(_ stack: TypedStack) throws {
        switch stack {
        case .inMemoryKeychain:
            let memory = InMemoryKeychain()
            keychain = Keychain(store: memory)
            engine = memory.engine
            directory = nil
        case .engine:
            engine = KeychainEngine(storage: MemoryStorage(), authenticator: ScriptedAuthenticator(defaultOutcome: .success))
            keychain = Keychain(store: engine)
            directory = nil
        case .keychainFileThroughSecItem:
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-typed-\(UUID().uuidString)")
            engine = try KeychainServicesDefaults.fileEngine(at: folder.appendingPathComponent("login.keychain-db").path)
            engine.authenticator = ScriptedAuthenticator(defaultOutcome: .success)
            KeychainServicesDefaults.setEngine(engine)
            keychain = Keychain()
            directory = folder
        }
        let clock = self.clock
        engine.configuration.now = { clock.now }
    }

    /// A keychain on the same store with other default options.
    func keychain(options: ItemOptions) -> Keychain { Keychain(store: keychain.store, options: options) }

    /// Puts a memory keychain back as the default (when this fixture replaced it) and removes the file.
    func remove() {
        guard let directory else { return }
        KeychainServicesDefaults.useMemoryKeychain()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs `body` over a fresh `stack`, then removes it.
    static func with(_ stack: TypedStack, _ body: (TypedStackFixture) throws -> Void) throws {
        let fixture = try TypedStackFixture(stack)
        defer { fixture.remove() }
        try body(fixture)
    }
}

private let service = "com.example.stacks"
private func item(_ account: String = "alice") throws -> GenericPassword {
    try GenericPassword(service: service, account: account)
}

/// The typed API's core behaviours on every stack, the production one included, with identical expectations.
@Suite("Typed API on every stack: InMemoryKeychain, the engine, Keychain() over SecItem over a keychain file",
       .serialized, .ownsDefaultKeychain)
struct ProductionStackTypedAPITests {
    @Test("Keychain() on the production stack is SystemKeychain; the others are engine-backed")
    func storeKinds() throws {
        try TypedStackFixture.with(.keychainFileThroughSecItem) { #expect($0.keychain.store is SystemKeychain) }
        try TypedStackFixture.with(.engine) { #expect($0.keychain.store is KeychainEngine) }
    }

    @Test("save then read gives the secret; a missing item reads as nil", arguments: TypedStack.allCases)
    func saveAndRead(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            #expect(try f.keychain.data(for: item()) == nil)
            try f.keychain.save(secretData, for: item())
            #expect(try f.keychain.data(for: item()) == secretData)
            #expect(try f.keychain.string(for: item("bob")) == nil)
        }
    }

    @Test("saving twice updates the one item in place: new secret, creation date kept, modification date moved",
          arguments: TypedStack.allCases)
    func saveTwice(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            try f.keychain.save("first", for: item())
            let before = try #require(try f.keychain.attributes(for: item()))
            f.clock.advance(60)
            try f.keychain.save("second", for: item())
            let after = try #require(try f.keychain.attributes(for: item()))
            #expect(try f.keychain.string(for: item()) == "second")
            #expect(try f.keychain.accounts(service: service).count == 1)
            #expect(after.creationDate == before.creationDate)
            #expect(after.modificationDate == before.creationDate?.addingTimeInterval(60))
        }
    }

    @Test("update changes an existing secret; updating a missing item throws itemNotFound", arguments: TypedStack.allCases)
    func update(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            #expect(throws: KeychainError.itemNotFound) { try f.keychain.update("x", for: item()) }
            #expect(try f.keychain.exists(item()) == false)
            try f.keychain.save("old", for: item())
            try f.keychain.update("new", for: item())
            #expect(try f.keychain.string(for: item()) == "new")
        }
    }

    @Test("delete removes the item and says so; deleting a missing item returns false", arguments: TypedStack.allCases)
    func delete(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            try f.keychain.save("v", for: item())
            #expect(try f.keychain.delete(item()) == true)
            #expect(try f.keychain.data(for: item()) == nil)
            #expect(try f.keychain.delete(item()) == false)
        }
    }

    @Test("a second add of the same primary key through the store fails with errSecDuplicateItem and keeps the first",
          arguments: TypedStack.allCases)
    func duplicateAdd(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            let attributes: KeychainQuery = [Key.class: .string("genp"), Key.service: .string(service),
                                             Key.account: .string("alice"), Key.valueData: .data(Data("one".utf8))]
            _ = try f.keychain.store.add(attributes)
            var again = attributes
            again[Key.valueData] = .data(Data("two".utf8))
            // The bare engine's store calls throw EngineError (Keychain converts it); the status is the same on every stack.
            let error = #expect(throws: (any Error).self) { _ = try f.keychain.store.add(again) }
            #expect(error.map(KeychainError.init(converting:)) == KeychainError.duplicateItem)
            #expect(try f.keychain.string(for: item()) == "one")
        }
    }

    @Test("attributes and listing (kSecMatchLimitAll) report label, comment, accessibility and synchronizable, never a secret",
          arguments: TypedStack.allCases)
    func attributesAndListing(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            let labelled = f.keychain(options: ItemOptions(accessibility: .afterFirstUnlock, label: "Alice's token", comment: "for the API"))
            try labelled.save(secretData, for: item("alice"))
            try f.keychain.save(secretData, for: item("bob"), options: ItemOptions(synchronizable: true))
            try f.keychain.save("other", for: GenericPassword(service: "com.example.elsewhere", account: "carol"))

            let alice = try #require(try f.keychain.attributes(for: item("alice")))
            #expect(alice.account == "alice")
            #expect(alice.service == service)
            #expect(alice.label == "Alice's token")
            #expect(alice.comment == "for the API")
            #expect(alice.accessibility == .afterFirstUnlock)
            #expect(alice.synchronizable == false)
            #expect(alice.hasAccessControl == false)

            let listed = try f.keychain.accounts(service: service)
            #expect(listed.map(\.account) == ["alice", "bob"])
            #expect(listed.map(\.synchronizable) == [false, true])
            #expect(listed.map(\.accessibility) == [.afterFirstUnlock, .whenUnlocked])
            #expect(!listed.map(String.init(describing:)).joined().contains(secretText))
            #expect(try f.keychain.accounts(service: "com.example.none").isEmpty)
        }
    }

    @Test("the access group is part of identity: the same account in two groups is two items, deleted one at a time",
          arguments: TypedStack.allCases)
    func accessGroups(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            let team = f.keychain(options: ItemOptions(accessGroup: "team.shared"))
            let app = f.keychain(options: ItemOptions(accessGroup: "app.private"))
            try team.save("team", for: item())
            try app.save("app", for: item())
            #expect(try team.string(for: item()) == "team")
            #expect(try app.string(for: item()) == "app")
            #expect(try team.attributes(for: item())?.accessGroup == "team.shared")
            #expect(try team.deleteAll(service: service) == true)
            #expect(try team.data(for: item()) == nil)
            #expect(try app.string(for: item()) == "app")
        }
    }

    @Test("a synchronizable item and a local one with the same key are two items", arguments: TypedStack.allCases)
    func synchronizable(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            let synced = f.keychain(options: ItemOptions(synchronizable: true))
            try f.keychain.save("local", for: item())
            try synced.save("synced", for: item())
            #expect(try f.keychain.string(for: item()) == "local")
            #expect(try synced.string(for: item()) == "synced")
            #expect(try synced.attributes(for: item())?.synchronizable == true)
            #expect(try f.keychain.accounts(service: service).map(\.synchronizable).sorted { !$0 && $1 } == [false, true])
        }
    }

    @Test("accessibility is stored and migrated in place: same secret, same creation date", arguments: TypedStack.allCases)
    func accessibility(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            try f.keychain(options: ItemOptions(accessibility: .whenUnlockedThisDeviceOnly)).save(secretData, for: item())
            let before = try #require(try f.keychain.attributes(for: item()))
            #expect(before.accessibility == .whenUnlockedThisDeviceOnly)
            f.clock.advance(5)
            try f.keychain(options: ItemOptions(accessibility: .afterFirstUnlock)).save(secretData, for: item())
            let after = try #require(try f.keychain.attributes(for: item()))
            #expect(after.accessibility == .afterFirstUnlock)
            #expect(after.creationDate == before.creationDate)
            #expect(try f.keychain.data(for: item()) == secretData)
        }
    }
}

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

    /// The same saves through the typed API: a new item, the same item again, an item with other attributes, an
    /// item whose attributes change, a save that leaves label and comment unset, an internet password. The clock
    /// moves between saves so modification dates tell updates apart.
    private static func saves(_ keychain: Keychain, clock: TestClock) throws {
        let alice = try GenericPassword(service: "com.example.diff", account: "alice")
        let bob = try GenericPassword(service: "com.example.diff", account: "bob")
        try keychain.save(Data("one".utf8), for: alice)
        clock.advance(10)
        try keychain.save(Data("two".utf8), for: alice)
        clock.advance(10)
        try keychain.save(Data("bob".utf8), for: bob, options: ItemOptions(accessibility: .afterFirstUnlock, synchronizable: true,
                                                                     accessGroup: "team.shared", label: "Bob", comment: "bob's"))
        clock.advance(10)
        try keychain.save(Data("three".utf8), for: alice, options: ItemOptions(accessibility: .afterFirstUnlockThisDeviceOnly,
                                                                         label: "Alice", comment: "changed"))
        clock.advance(10)
        try keychain.save(Data("four".utf8), for: alice, options: ItemOptions(accessibility: .whenUnlocked))
        clock.advance(10)
        let web = try InternetPassword(server: "example.com", account: "alice", protocol: .https, port: 443)
        try keychain.save(Data("web".utf8), for: web, options: ItemOptions(label: "site"))
        clock.advance(10)
        try keychain.save(Data("web2".utf8), for: web)
    }

    /// Runs the saves on a fresh `stack` through `path`; gives the items it leaves.
    private static func run(_ stack: TypedStack, _ path: SavePath) throws -> [KeychainQuery] {
        var rows: [KeychainQuery] = []
        try TypedStackFixture.with(stack) { f in
            let keychain: Keychain
            switch (stack, path) {
            case (.keychainFileThroughSecItem, .compiledSave):
                keychain = Keychain(store: f.engine) // the same file engine, saved to directly
                #expect(Keychain.engine(behind: keychain.store) != nil)
            case (.keychainFileThroughSecItem, .addOrUpdate):
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
          arguments: TypedStack.allCases)
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
        for stack in TypedStack.allCases {
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
