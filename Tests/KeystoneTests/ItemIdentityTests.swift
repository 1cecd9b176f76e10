import Crypto
import DefaultKeychainLock
import Foundation
import KeychainEngine
import KeychainServices
import Keystone
import KeystoneTesting
import Testing

// Issue 26 item 4: an item's identity never depends on per-call options. Save, read, attributes, update and delete of
// one item value on one Keychain address the same item whatever a save's options say; the access group and
// synchronizable come from the item or the keychain; the deprecated per-call ItemOptions that would change identity
// are refused (errSecParam) with nothing written.

private let service = "com.example.identity"

/// The stores a `Keychain` runs on here: both save paths (the engine's compiled one and the SecItem-style
/// `addOrUpdate`), and on Linux the production stack.
enum IdentityStack: String, CaseIterable, CustomTestStringConvertible, Sendable {
    /// `InMemoryKeychain`: engine-backed, the compiled path.
    case inMemoryKeychain
    /// A store that is not engine-backed, over the engine: every call goes through `saveQueries`/`addOrUpdate`.
    case secItemPathOverEngine
    /// `Keychain()` → `SystemKeychain` → `SecItem*` → a fresh keychain file (Linux; the process's default keychain).
    case keychainFileThroughSecItem

    var testDescription: String { rawValue }

    static var available: [IdentityStack] {
        #if canImport(Darwin)
        [.inMemoryKeychain, .secItemPathOverEngine]
        #else
        allCases
        #endif
    }
}

/// Forwards the four operations to `base`, hiding that it is engine-backed (so `Keychain` takes the SecItem path),
/// and counts the writes that reach it.
private final class PlainStore: KeychainStore {
    let base: any KeychainStore
    private let writes = Locked(0)
    init(_ base: any KeychainStore) { self.base = base }

    var writeCount: Int { writes.current }
    func add(_ attributes: KeychainQuery) throws -> ItemResult? {
        writes.withLock { $0 += 1 }
        return try base.add(attributes)
    }
    func copyMatching(_ query: KeychainQuery) throws -> ItemResult? { try base.copyMatching(query) }
    func update(_ query: KeychainQuery, with attributes: KeychainQuery) throws {
        writes.withLock { $0 += 1 }
        try base.update(query, with: attributes)
    }
    func delete(_ query: KeychainQuery) throws {
        writes.withLock { $0 += 1 }
        try base.delete(query)
    }
}

/// One fresh stack: the store a `Keychain` uses, and a way to list every item of the test service.
private struct IdentityFixture {
    let store: any KeychainStore
    private let directory: URL?

    init(_ stack: IdentityStack) throws {
        switch stack {
        case .inMemoryKeychain:
            store = InMemoryKeychain()
            directory = nil
        case .secItemPathOverEngine:
            store = PlainStore(KeychainEngine(storage: MemoryStorage(), authenticator: ScriptedAuthenticator(defaultOutcome: .success)))
            directory = nil
        case .keychainFileThroughSecItem:
            #if canImport(Darwin)
            throw KeychainError(code: .invalidItem, reason: "the keychain file stack is Linux's")
            #else
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-identity-\(UUID().uuidString)")
            let engine = try KeychainServicesDefaults.fileEngine(at: folder.appendingPathComponent("login.keychain-db").path)
            engine.authenticator = ScriptedAuthenticator(defaultOutcome: .success)
            KeychainServicesDefaults.setEngine(engine)
            store = SystemKeychain()
            directory = folder
            #endif
        }
    }

    func keychain(_ options: ItemOptions = ItemOptions()) -> Keychain { Keychain(store: store, options: options) }

    /// Every item of the test service, in any access group, synchronizable or not (attributes only).
    func rows() throws -> [ItemAttributes] {
        let query: KeychainQuery = [Key.class: .string(ItemClass.genericPassword.rawValue), Key.service: .string(service),
                                    Key.synchronizable: .string(Key.synchronizableAny)]
        return try Keychain.attributeRows(in: store, query).map(ItemAttributes.init)
    }

    func remove() {
        guard let directory else { return }
        KeychainServicesDefaults.useMemoryKeychain()
        try? FileManager.default.removeItem(at: directory)
    }

    static func with(_ stack: IdentityStack, _ body: (IdentityFixture) throws -> Void) throws {
        let fixture = try IdentityFixture(stack)
        defer { fixture.remove() }
        try body(fixture)
    }
}

/// Where an item's access group and synchronizable come from: the item value, the keychain's options, or both (the
/// item wins).
struct IdentitySource: CustomTestStringConvertible, Sendable {
    let name: String
    let keychainOptions: ItemOptions
    let itemGroup: String?
    let itemSynchronizable: Bool?
    /// What the stored item must carry.
    let group: String?
    let synchronizable: Bool

    var testDescription: String { name }

    func item(_ account: String = "alice") throws -> GenericPassword {
        try GenericPassword(service: service, account: account, accessGroup: itemGroup, synchronizable: itemSynchronizable)
    }

    static let all: [IdentitySource] = [
        IdentitySource(name: "defaults", keychainOptions: ItemOptions(), itemGroup: nil, itemSynchronizable: nil, group: nil, synchronizable: false),
        IdentitySource(name: "group on the item", keychainOptions: ItemOptions(), itemGroup: "team.shared", itemSynchronizable: nil,
                       group: "team.shared", synchronizable: false),
        IdentitySource(name: "group on the keychain", keychainOptions: ItemOptions(accessGroup: "team.shared"), itemGroup: nil,
                       itemSynchronizable: nil, group: "team.shared", synchronizable: false),
        IdentitySource(name: "the item's group over the keychain's", keychainOptions: ItemOptions(accessGroup: "team.other"),
                       itemGroup: "team.shared", itemSynchronizable: nil, group: "team.shared", synchronizable: false),
        IdentitySource(name: "synchronizable on the item", keychainOptions: ItemOptions(), itemGroup: nil, itemSynchronizable: true,
                       group: nil, synchronizable: true),
        IdentitySource(name: "synchronizable on the keychain", keychainOptions: ItemOptions(synchronizable: true), itemGroup: nil,
                       itemSynchronizable: nil, group: nil, synchronizable: true),
        IdentitySource(name: "a local item on a synchronizable keychain", keychainOptions: ItemOptions(synchronizable: true),
                       itemGroup: nil, itemSynchronizable: false, group: nil, synchronizable: false),
        IdentitySource(name: "group and synchronizable on the keychain", keychainOptions: ItemOptions(synchronizable: true, accessGroup: "team.shared"),
                       itemGroup: nil, itemSynchronizable: nil, group: "team.shared", synchronizable: true),
    ]
}

/// A save's per-call options: accessibility, label and comment, never identity.
private let perCallOptions: [SaveOptions?] = [
    nil,
    SaveOptions(accessibility: .afterFirstUnlockThisDeviceOnly),
    SaveOptions(accessibility: .afterFirstUnlock, label: "Token", comment: "per call"),
]

/// The deprecated per-call `ItemOptions` overloads, reached through a protocol so the tests call them without a
/// deprecation warning (a deprecated method may witness a requirement).
private protocol PerCallItemOptionsSaving {
    func save(_ data: Data, for item: some KeychainItem, options: ItemOptions) throws
    func save(_ string: String, for item: some KeychainItem, options: ItemOptions) throws
    func encode<Value: Encodable>(_ value: Value, for item: some KeychainItem, options: ItemOptions, encoder: JSONEncoder) throws
    func save<StoredKey>(_ key: StoredKey, for item: CryptoKeyItem<StoredKey>, options: ItemOptions) throws
    func save(_ data: Data, for item: some KeychainItem, options: ItemOptions) async throws
}
extension Keychain: PerCallItemOptionsSaving {}

@Suite("An item's identity never depends on per-call options", .serialized, .ownsDefaultKeychain)
struct ItemIdentityTests {
    @Test("save, data, attributes, update and delete of one item value address the same item, whatever the save's options",
          arguments: IdentityStack.available, IdentitySource.all)
    func oneItemValueOneItem(stack: IdentityStack, source: IdentitySource) throws {
        for options in perCallOptions {
            try IdentityFixture.with(stack) { f in
                let keychain = f.keychain(source.keychainOptions)
                let item = try source.item()
                try keychain.save(secretData, for: item, options: options)
                #expect(try keychain.data(for: item) == secretData)
                let attributes = try #require(try keychain.attributes(for: item))
                #expect(attributes.synchronizable == source.synchronizable)
                if let group = source.group { #expect(attributes.accessGroup == group) }
                #expect(attributes.accessibility == (options ?? source.keychainOptions.saveOptions).accessibility)
                #expect(attributes.label == options?.label)
                // The only item of the service, in any group, synchronizable or not.
                #expect(try f.rows().count == 1)

                // A second save with other options updates that item: still one.
                try keychain.save("second", for: item, options: SaveOptions(accessibility: .whenUnlocked, label: "again"))
                #expect(try keychain.string(for: item) == "second")
                #expect(try f.rows().map(\.label) == ["again"])

                try keychain.update("rotated", for: item)
                #expect(try keychain.string(for: item) == "rotated")
                #expect(try keychain.exists(item))
                #expect(try keychain.delete(item))
                #expect(try keychain.data(for: item) == nil)
                #expect(try f.rows().isEmpty)
            }
        }
    }

    @Test("item values differing only in synchronizable or access group are different items, each addressed on its own",
          arguments: IdentityStack.available)
    func distinctIdentities(stack: IdentityStack) throws {
        try IdentityFixture.with(stack) { f in
            let keychain = f.keychain()
            let local = try GenericPassword(service: service, account: "alice")
            let synced = try GenericPassword(service: service, account: "alice", synchronizable: true)
            let shared = try GenericPassword(service: service, account: "alice", accessGroup: "team.shared")
            try keychain.save("local", for: local)
            try keychain.save("synced", for: synced, options: SaveOptions(accessibility: .afterFirstUnlock))
            try keychain.save("shared", for: shared, options: SaveOptions(label: "team"))
            #expect(try f.rows().count == 3)
            #expect(try keychain.string(for: synced) == "synced")
            #expect(try keychain.string(for: shared) == "shared")
            #expect(try keychain.delete(synced))
            #expect(try keychain.string(for: local) == "local")
            #expect(try keychain.string(for: shared) == "shared")
            #expect(try keychain.data(for: synced) == nil)
            // The keychain-level default reaches the same item as the item-level attribute.
            try keychain.save("synced again", for: synced)
            #expect(try f.keychain(ItemOptions(synchronizable: true)).string(for: local) == "synced again")
        }
    }

    @Test("a CryptoKit key saved with per-call options is found, replaced and deleted with the keychain's identity",
          arguments: IdentityStack.available, [ItemOptions(), ItemOptions(synchronizable: true, accessGroup: "team.shared")])
    func cryptoKeys(stack: IdentityStack, keychainOptions: ItemOptions) throws {
        try IdentityFixture.with(stack) { f in
            let keychain = f.keychain(keychainOptions)
            let item = try CryptoKeyItem<SymmetricKey>(service: service, account: "key")
            let key = SymmetricKey(size: .bits256)
            try keychain.save(key, for: item, options: SaveOptions(accessibility: .afterFirstUnlockThisDeviceOnly, label: "k"))
            #expect(try keychain.key(for: item)?.withUnsafeBytes { Data($0) } == key.withUnsafeBytes { Data($0) })
            let row = try #require(try f.rows().first)
            #expect(row.synchronizable == keychainOptions.synchronizable)
            if let group = keychainOptions.accessGroup { #expect(row.accessGroup == group) }
            let other = SymmetricKey(size: .bits256)
            try keychain.save(other, for: item)
            #expect(try f.rows().count == 1)
            #expect(try keychain.key(for: item)?.withUnsafeBytes { Data($0) } == other.withUnsafeBytes { Data($0) })
            #expect(try keychain.delete(item))
            #expect(try f.rows().isEmpty)
        }
    }

    @Test("KeychainStored reads, writes and deletes the item its value names, synchronizable included", arguments: IdentityStack.available)
    func keychainStored(stack: IdentityStack) throws {
        try IdentityFixture.with(stack) { f in
            let item = try GenericPassword(service: service, account: "alice", synchronizable: true)
            let stored = KeychainStored<String>(item, keychain: f.keychain())
            stored.wrappedValue = "t0k3n"
            #expect(stored.wrappedValue == "t0k3n")
            #expect(try f.rows().map(\.synchronizable) == [true])
            stored.wrappedValue = nil
            #expect(stored.lastError == nil)
            #expect(try f.rows().isEmpty)
        }
    }

    // MARK: - The deprecated per-call ItemOptions

    @Test("per-call ItemOptions naming another synchronizable or access group than the keychain's are refused with errSecParam; nothing is written",
          arguments: [
              (ItemOptions(), ItemOptions(synchronizable: true)),
              (ItemOptions(), ItemOptions(accessGroup: "team.shared")),
              (ItemOptions(), ItemOptions(synchronizable: true, accessGroup: "team.shared")),
              (ItemOptions(accessGroup: "team.shared"), ItemOptions(accessibility: .afterFirstUnlock)),
              (ItemOptions(synchronizable: true), ItemOptions(label: "local")),
          ])
    func mismatchRefused(keychainOptions: ItemOptions, perCall: ItemOptions) async throws {
        let engine = KeychainEngine(storage: MemoryStorage(), authenticator: ScriptedAuthenticator(defaultOutcome: .success))
        let store = PlainStore(engine)
        let keychain = Keychain(store: store, options: keychainOptions)
        let saving: any PerCallItemOptionsSaving = keychain
        let item = try GenericPassword(service: service, account: "alice")

        let error = try #require(throws: KeychainError.self) { try saving.save(secretData, for: item, options: perCall) }
        #expect(error == .param)
        #expect(error.status == -50)
        #expect(error.reason.contains("Nothing was written"))
        #expect(error.reason.contains("SaveOptions"))
        #expect(!error.description.contains(secretText))
        #expect(throws: KeychainError.param) { try saving.save(secretText, for: item, options: perCall) }
        #expect(throws: KeychainError.param) { try saving.encode(["a": 1], for: item, options: perCall, encoder: JSONEncoder()) }
        #expect(throws: KeychainError.param) {
            try saving.save(SymmetricKey(size: .bits256), for: CryptoKeyItem<SymmetricKey>(service: service, account: "key"), options: perCall)
        }
        await #expect(throws: KeychainError.param) { try await saving.save(secretData, for: item, options: perCall) }

        #expect(store.writeCount == 0)
        let everything: KeychainQuery = [Key.class: .string(ItemClass.genericPassword.rawValue), Key.synchronizable: .string(Key.synchronizableAny)]
        #expect(try Keychain.attributeRows(in: engine, everything).isEmpty)
    }

    @Test("per-call ItemOptions with the keychain's own group and synchronizable still save the item data(for:) reads",
          arguments: IdentityStack.available)
    func matchingPerCallItemOptionsAccepted(stack: IdentityStack) throws {
        try IdentityFixture.with(stack) { f in
            let keychain = f.keychain(ItemOptions(synchronizable: true, accessGroup: "team.shared"))
            let saving: any PerCallItemOptionsSaving = keychain
            var perCall = keychain.options
            perCall.label = "once"
            perCall.accessibility = .afterFirstUnlock
            let item = try GenericPassword(service: service, account: "alice")
            try saving.save(secretData, for: item, options: perCall)
            #expect(try keychain.data(for: item) == secretData)
            let attributes = try #require(try keychain.attributes(for: item))
            #expect(attributes.label == "once" && attributes.accessibility == .afterFirstUnlock)
            #expect(attributes.synchronizable && attributes.accessGroup == "team.shared")
            #expect(try keychain.delete(item))
            #expect(try f.rows().isEmpty)
        }
    }

    @Test("ItemOptions.saveOptions carries every non-identity attribute and setting it leaves identity alone")
    func saveOptionsOfItemOptions() {
        var options = ItemOptions(accessibility: .afterFirstUnlock, synchronizable: true, accessGroup: "team.shared",
                                  accessControlFlags: .userPresence, label: "l", comment: "c")
        #expect(options.saveOptions == SaveOptions(accessibility: .afterFirstUnlock, accessControlFlags: .userPresence, label: "l", comment: "c"))
        #expect(options.saveOptions.accessControl == options.accessControl)
        options.saveOptions = SaveOptions(accessibility: .whenUnlockedThisDeviceOnly)
        #expect(options == ItemOptions(accessibility: .whenUnlockedThisDeviceOnly, synchronizable: true, accessGroup: "team.shared"))
    }

    @Test("an item's description names its synchronizable when it sets one, and never a secret")
    func descriptions() throws {
        #expect(try GenericPassword(service: "s", account: "a", synchronizable: true).description == "genp service=\"s\" account=\"a\" synchronizable=true")
        #expect(try GenericPassword(service: "s", account: "a").description == "genp service=\"s\" account=\"a\"")
        #expect(try InternetPassword(server: "h", account: "a", synchronizable: false).description == "inet server=\"h\" account=\"a\" synchronizable=false")
        #expect(try GenericPassword(service: "s", account: "a", synchronizable: true).withAccount("b").synchronizable == true)
    }
}
