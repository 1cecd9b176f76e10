import Foundation
import Keystone
import KeystoneImporters
import KeychainEngine
import KeystoneTesting
import Testing

/// Items written with the dictionaries each library passes to `SecItemAdd`.
enum LibraryFixtures {
    /// `KeychainSwift(keyPrefix:)`.set(value, forKey:): no service; account = prefix + key; whenUnlocked by default.
    static func keychainSwift(_ store: any KeychainStore, prefix: String, key: String, value: Data, synchronizable: Bool = false) throws {
        var query: KeychainQuery = [
            Key.class: .string("genp"), Key.account: .string(prefix + key), Key.valueData: .data(value),
            Key.accessible: .string("ak"),
        ]
        if synchronizable { query[Key.synchronizable] = .bool(true) }
        _ = try store.add(query)
    }

    /// `KeychainWrapper(serviceName:)`.set(value, forKey:): account and generic = the key's UTF-8 as Data.
    static func swiftKeychainWrapper(_ store: any KeychainStore, service: String = "SwiftKeychainWrapper", key: String, value: Data) throws {
        let identifier = Data(key.utf8)
        _ = try store.add([
            Key.class: .string("genp"), Key.service: .string(service), Key.generic: .data(identifier), Key.account: .data(identifier),
            Key.synchronizable: .bool(false), Key.valueData: .data(value), Key.accessible: .string("ak"),
        ])
    }

    /// Valet's base query + account + data.
    static func valet(_ store: any KeychainStore, service: String, accessibility: String, key: String, value: String,
                      synchronizable: Bool = false, accessGroup: String? = nil) throws {
        var query: KeychainQuery = [
            Key.class: .string("genp"), Key.service: .string(service), Key.accessible: .string(accessibility),
            Key.account: .string(key), Key.valueData: .data(Data(value.utf8)),
        ]
        if synchronizable { query[Key.synchronizable] = .bool(true) }
        if let accessGroup { query[Key.accessGroup] = .string(accessGroup) }
        _ = try store.add(query)
    }

    /// KeychainAccess's `Options.query()` + `attributes(key:value:)`: synchronizable Any replaced by the Bool,
    /// afterFirstUnlock by default.
    static func keychainAccess(_ store: any KeychainStore, service: String, key: String, value: String) throws {
        _ = try store.add([
            Key.class: .string("genp"), Key.service: .string(service), Key.account: .string(key), Key.valueData: .data(Data(value.utf8)),
            Key.accessible: .string("ck"), Key.synchronizable: .bool(false),
        ])
    }

    /// KeychainAccess's `Keychain(server: "https://github.com", protocolType: .https)[key] = value`: no port (the URL has none).
    static func keychainAccessServer(_ store: any KeychainStore, host: String, key: String, value: String) throws {
        _ = try store.add([
            Key.class: .string("inet"), Key.server: .string(host), Key.protocol: .string("htps"), Key.authenticationType: .string("dflt"),
            Key.account: .string(key), Key.valueData: .data(Data(value.utf8)), Key.accessible: .string("ck"), Key.synchronizable: .bool(false),
        ])
    }
}

@Suite("Importers: other Swift keychain libraries' layouts, moved to typed items")
struct ImporterLibraryTests {
    @Test("keychain-swift: prefixed service-less items move to the target service, prefix stripped, accessibility and sync kept; others stay")
    func keychainSwift() throws {
        let store = InMemoryKeychain()
        try LibraryFixtures.keychainSwift(store, prefix: "myapp_", key: "token", value: Data("tok".utf8))
        try LibraryFixtures.keychainSwift(store, prefix: "myapp_", key: "flag", value: Data([1]), synchronizable: true)
        try LibraryFixtures.keychainSwift(store, prefix: "other_", key: "x", value: Data("keep".utf8))
        let keychain = Keychain(store: store)
        let source = KeychainSwiftImportSource(store: store, keyPrefix: "myapp_", targetService: "com.example.app")

        let dry = try keychain.importItems(from: source, options: ImportOptions(dryRun: true))
        #expect(dry.results.map(\.action) == [.add, .add])
        #expect(dry.results.allSatisfy { $0.movedOriginal })
        #expect(try LegacyCount.serviceless(store) == 3)

        let report = try keychain.importItems(from: source)
        #expect(report.results.map { $0.item.account } == ["flag", "token"])
        let token = try GenericPassword(service: "com.example.app", account: "token", accessGroup: "default")
        #expect(try keychain.string(for: token) == "tok")
        #expect(try keychain.attributes(for: token)?.accessibility == .whenUnlocked)
        var synced = keychain
        synced.options.synchronizable = true
        #expect(try synced.data(for: GenericPassword(service: "com.example.app", account: "flag", accessGroup: "default")) == Data([1]))
        #expect(try LegacyCount.serviceless(store) == 1)
    }

    @Test("keychain-swift: a conflict keeps the legacy item (never zero copies); keepOriginals keeps them all")
    func keychainSwiftConflict() throws {
        let store = InMemoryKeychain()
        try LibraryFixtures.keychainSwift(store, prefix: "", key: "token", value: Data("legacy".utf8))
        let keychain = Keychain(store: store)
        try keychain.save("newer", for: GenericPassword(service: "svc", account: "token", accessGroup: "default"))
        let source = KeychainSwiftImportSource(store: store, targetService: "svc")
        let report = try keychain.importItems(from: source)
        #expect(report.results.map(\.action) == [.conflict])
        #expect(report.results[0].movedOriginal == false)
        #expect(try LegacyCount.serviceless(store) == 1)
        let kept = try keychain.importItems(from: source, options: ImportOptions(replace: true, keepOriginals: true))
        #expect(kept.results.map(\.action) == [.replace])
        #expect(try LegacyCount.serviceless(store) == 1)
        #expect(try keychain.string(for: GenericPassword(service: "svc", account: "token", accessGroup: "default")) == "legacy")
    }

    @Test("SwiftKeychainWrapper: Data-valued accounts read as keys; same service → unchanged and kept; another service → moved; archives unsupported")
    func swiftKeychainWrapper() throws {
        let store = InMemoryKeychain()
        try LibraryFixtures.swiftKeychainWrapper(store, key: "apiKey", value: Data("pw".utf8))
        try LibraryFixtures.swiftKeychainWrapper(store, key: "count", value: Data("bplist00\u{d4}\u{01}\u{02}".utf8))
        let keychain = Keychain(store: store)
        // The engine matches a String account against the Data account SwiftKeychainWrapper stored.
        #expect(try keychain.string(for: GenericPassword(service: "SwiftKeychainWrapper", account: "apiKey")) == "pw")

        let inPlace = try keychain.importItems(from: SwiftKeychainWrapperImportSource(store: store))
        #expect(inPlace.results.map(\.action) == [.unchanged])
        #expect(inPlace.results[0].movedOriginal == false)
        #expect(inPlace.problems.map(\.kind) == [.unsupported])
        #expect(inPlace.problems[0].origin.contains("count"))

        let moved = try keychain.importItems(from: SwiftKeychainWrapperImportSource(store: store, targetService: "com.example.app"))
        #expect(moved.results.map(\.action) == [.add])
        #expect(try keychain.string(for: GenericPassword(service: "com.example.app", account: "apiKey", accessGroup: "default")) == "pw")
        #expect(try keychain.exists(GenericPassword(service: "SwiftKeychainWrapper", account: "apiKey")) == false)
        // The archived value was left where it was.
        #expect(try keychain.exists(GenericPassword(service: "SwiftKeychainWrapper", account: "count")))
    }

    @Test("Valet service strings parse", arguments: [
        ("VAL_VALValet_initWithIdentifier:accessibility:_Druidia_AccessibleWhenUnlocked", "VALValet", false, "Druidia"),
        ("VAL_VALSynchronizableValet_initWithIdentifier:accessibility:_my_app_AccessibleAfterFirstUnlock", "VALSynchronizableValet", false, "my_app"),
        ("VAL_VALValet_initWithSharedAccessGroupIdentifier:accessibility:_group.shared_AccessibleWhenUnlockedThisDeviceOnly", "VALValet", true, "group.shared"),
        ("VAL_VALSecureEnclaveValet_initWithIdentifier:accessibility:_Druidia_AccessibleWhenPasscodeSetThisDeviceOnlyUserPresence", "VALSecureEnclaveValet", false, "Druidia"),
    ])
    func valetServiceNames(service: String, configuration: String, shared: Bool, identifier: String) throws {
        let parsed = try #require(ValetImportSource.ServiceName(service))
        #expect(parsed.configuration == configuration && parsed.sharedAccessGroup == shared && parsed.identifier == identifier)
        #expect(ValetImportSource.ServiceName("com.example.app") == nil)
    }

    @Test("Valet: standard, iCloud and shared-group items move to their identifier's service; Secure Enclave ones stay")
    func valet() throws {
        let store = InMemoryKeychain()
        try LibraryFixtures.valet(store, service: "VAL_VALValet_initWithIdentifier:accessibility:_Druidia_AccessibleWhenUnlocked", accessibility: "ak",
                                  key: "combination", value: "12345")
        try LibraryFixtures.valet(store, service: "VAL_VALSynchronizableValet_initWithIdentifier:accessibility:_Druidia_AccessibleAfterFirstUnlock",
                                  accessibility: "ck", key: "synced", value: "s", synchronizable: true)
        try LibraryFixtures.valet(store, service: "VAL_VALValet_initWithSharedAccessGroupIdentifier:accessibility:_group.shared_AccessibleWhenUnlocked",
                                  accessibility: "ak", key: "shared", value: "g", accessGroup: "TEAM123.group.shared")
        try LibraryFixtures.valet(store, service: "VAL_VALSecureEnclaveValet_initWithIdentifier:accessibility:_Druidia_AccessibleWhenPasscodeSetThisDeviceOnlyUserPresence",
                                  accessibility: "akpu", key: "enclave", value: "e")
        let keychain = Keychain(store: store)
        let report = try keychain.importItems(from: ValetImportSource(store: store))
        #expect(report.results.map(\.action) == [.add, .add, .add])
        #expect(report.problems.map(\.kind) == [.unsupported])
        #expect(try keychain.string(for: GenericPassword(service: "Druidia", account: "combination", accessGroup: "default")) == "12345")
        #expect(try keychain.string(for: GenericPassword(service: "group.shared", account: "shared", accessGroup: "TEAM123.group.shared")) == "g")
        var synced = keychain
        synced.options.synchronizable = true
        let syncedItem = try GenericPassword(service: "Druidia", account: "synced", accessGroup: "default")
        #expect(try synced.string(for: syncedItem) == "s")
        #expect(try synced.attributes(for: syncedItem)?.accessibility == .afterFirstUnlock)
        #expect(try LegacyCount.services(store, prefix: "VAL_") == 1)
    }

    @Test("KeychainAccess: Keychain(service:) items are already typed (unchanged, kept); an empty service moves to the target; server items read as internet passwords")
    func keychainAccess() throws {
        let store = InMemoryKeychain()
        try LibraryFixtures.keychainAccess(store, service: "com.example.github-token", key: "kishikawakatsumi", value: "01234567-89ab")
        try LibraryFixtures.keychainAccess(store, service: "", key: "nobundle", value: "n")
        try LibraryFixtures.keychainAccessServer(store, host: "github.com", key: "alice", value: "web")
        let keychain = Keychain(store: store)

        let same = try keychain.importItems(from: KeychainAccessImportSource(store: store, layout: .service("com.example.github-token")))
        #expect(same.results.map(\.action) == [.unchanged])
        #expect(try keychain.exists(GenericPassword(service: "com.example.github-token", account: "kishikawakatsumi")))

        let empty = KeychainAccessImportSource(store: store, layout: .service(""))
        #expect(throws: KeychainError.invalidItem) { try keychain.importItems(from: empty) }
        let moved = try keychain.importItems(from: KeychainAccessImportSource(store: store, layout: .service(""), targetService: "com.example.moved"))
        #expect(moved.results.map(\.action) == [.add])
        let item = try GenericPassword(service: "com.example.moved", account: "nobundle", accessGroup: "default")
        #expect(try keychain.string(for: item) == "n")
        #expect(try keychain.attributes(for: item)?.accessibility == .afterFirstUnlock)
        #expect(try LegacyCount.serviceless(store) == 0)

        let server = try keychain.importItems(from: KeychainAccessImportSource(store: store, layout: .server("github.com", protocol: .https)))
        #expect(server.results.map(\.action) == [.unchanged])
        #expect(try keychain.string(for: InternetPassword(server: "github.com", account: "alice", protocol: .https, authenticationType: .default)) == "web")
    }
}

enum LegacyCount {
    static func all(_ store: any KeychainStore) throws -> [ItemAttributes] {
        do {
            guard case .array(let rows)? = try store.copyMatching([
                Key.class: .string("genp"), Key.returnAttributes: .bool(true), Key.matchLimit: .string(Key.matchLimitAll),
                Key.synchronizable: .string(Key.synchronizableAny),
            ]) else { return [] }
            return rows.compactMap(\.attributes).map(ItemAttributes.init)
        } catch let error where KeychainError.itemNotFound ~= error {
            return []
        }
    }

    static func serviceless(_ store: any KeychainStore) throws -> Int { try all(store).filter { ($0.service ?? "").isEmpty }.count }
    static func services(_ store: any KeychainStore, prefix: String) throws -> Int { try all(store).filter { $0.service?.hasPrefix(prefix) == true }.count }
}
