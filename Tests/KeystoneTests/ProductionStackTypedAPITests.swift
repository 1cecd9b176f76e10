#if !canImport(Darwin)
import DefaultKeychainLock
import Foundation
import KeychainEngine
import KeychainFile
import KeychainSecretService
import KeychainServices
import Keystone
import KeystoneTesting
import Testing
#if NIO
import KeychainEtcd
#endif

private let service = "com.example.stacks"
private func item(_ account: String = "alice") throws -> GenericPassword {
    try GenericPassword(service: service, account: account)
}

/// The typed API's core behaviours on every stack, the production ones included, with identical expectations.
@Suite("Typed API on every stack: InMemoryKeychain, the engine, Keychain() over SecItem over a keychain file, the Secret Service and etcd",
       .serialized, .ownsDefaultKeychain)
struct ProductionStackTypedAPITests {
    @Test("the engine stacks are engine-backed (compiled save path)")
    func engineStores() throws {
        try TypedStackFixture.with(.engine) { #expect($0.keychain.store is KeychainEngine) }
        try TypedStackFixture.with(.inMemoryKeychain) { #expect($0.keychain.store is InMemoryKeychain) }
    }

    @Test("Keychain() on the keychain-file stack is SystemKeychain over the process's default engine, a keychain file",
          .enabled(if: TypedStack.keychainFileThroughSecItem.unavailableReason == nil,
                   Comment(rawValue: "keychain-file stack skipped: \(TypedStack.keychainFileThroughSecItem.unavailableReason ?? "")")))
    func keychainFileStack() throws {
        try expectSystemKeychainOverDefaultEngine(.keychainFileThroughSecItem) { $0 is KeychainFile }
    }

    @Test("Keychain() on the Secret Service stack is SystemKeychain over the process's default engine, a Secret Service collection",
          .enabled(if: TypedStack.secretServiceThroughSecItem.unavailableReason == nil,
                   Comment(rawValue: "Secret Service stack skipped: \(TypedStack.secretServiceThroughSecItem.unavailableReason ?? "")")))
    func secretServiceStack() throws {
        try expectSystemKeychainOverDefaultEngine(.secretServiceThroughSecItem) { $0 is SecretServiceStorage }
    }

    @Test("Keychain() on the etcd stack is SystemKeychain over the process's default engine, an etcd keychain",
          .enabled(if: TypedStack.etcdThroughSecItem.unavailableReason == nil,
                   Comment(rawValue: "etcd stack skipped: \(TypedStack.etcdThroughSecItem.unavailableReason ?? "")")))
    func etcdStack() throws {
        #if NIO
        try expectSystemKeychainOverDefaultEngine(.etcdThroughSecItem) { $0 is EtcdKeychain }
        #else
        try expectSystemKeychainOverDefaultEngine(.etcdThroughSecItem) { _ in true }
        #endif
    }

    /// `Keychain()` on `stack` is a `SystemKeychain` over the process's default engine, whose storage `isExpected`.
    private func expectSystemKeychainOverDefaultEngine(_ stack: TypedStack,
                                                       storage isExpected: (any KeychainStorage) -> Bool) throws {
        try TypedStackFixture.with(stack) { f in
            #expect(f.keychain.store is SystemKeychain)
            let current = try KeychainServicesDefaults.currentEngine()
            #expect(current === f.engine)
            #expect(isExpected(f.engine.storage), "\(stack): unexpected storage \(type(of: f.engine.storage))")
        }
    }

    @Test("save then read gives the secret; a missing item reads as nil", arguments: TypedStack.available)
    func saveAndRead(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            #expect(try f.keychain.data(for: item()) == nil)
            try f.keychain.save(secretData, for: item())
            #expect(try f.keychain.data(for: item()) == secretData)
            #expect(try f.keychain.string(for: item("bob")) == nil)
        }
    }

    @Test("saving twice updates the one item in place: new secret, creation date kept, modification date moved",
          arguments: TypedStack.available)
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

    @Test("update changes an existing secret; updating a missing item throws itemNotFound", arguments: TypedStack.available)
    func update(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            #expect(throws: KeychainError.itemNotFound) { try f.keychain.update("x", for: item()) }
            #expect(try f.keychain.exists(item()) == false)
            try f.keychain.save("old", for: item())
            try f.keychain.update("new", for: item())
            #expect(try f.keychain.string(for: item()) == "new")
        }
    }

    @Test("delete removes the item and says so; deleting a missing item returns false", arguments: TypedStack.available)
    func delete(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            try f.keychain.save("v", for: item())
            #expect(try f.keychain.delete(item()) == true)
            #expect(try f.keychain.data(for: item()) == nil)
            #expect(try f.keychain.delete(item()) == false)
        }
    }

    @Test("a second add of the same primary key through the store fails with errSecDuplicateItem and keeps the first",
          arguments: TypedStack.available)
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
          arguments: TypedStack.available)
    func attributesAndListing(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            let labelled = f.keychain(options: ItemOptions(accessibility: .afterFirstUnlock, label: "Alice's token", comment: "for the API"))
            try labelled.save(secretData, for: item("alice"))
            try f.keychain.save(secretData, for: GenericPassword(service: service, account: "bob", synchronizable: true))
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
          arguments: TypedStack.available)
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

    @Test("a synchronizable item and a local one with the same key are two items", arguments: TypedStack.available)
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

    @Test("accessibility is stored and migrated in place: same secret, same creation date", arguments: TypedStack.available)
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

    @Test("internet passwords round-trip and their protocol tells two items apart", arguments: TypedStack.available)
    func internetPasswords(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            let https = try InternetPassword(server: "example.com", account: "alice", protocol: .https, authenticationType: .htmlForm, port: 443, path: "/login")
            let ftp = try InternetPassword(server: "example.com", account: "alice", protocol: .ftp)
            try f.keychain.save("web", for: https)
            try f.keychain.save("files", for: ftp)
            try f.keychain.save("web2", for: https)
            #expect(try f.keychain.string(for: https) == "web2")
            #expect(try f.keychain.string(for: ftp) == "files")
            #expect(try f.keychain.attributes(for: https)?.server == "example.com")
            #expect(try f.keychain.delete(ftp))
            #expect(try f.keychain.string(for: https) == "web2")
        }
    }

    @Test("deleting a service deletes all its accounts and nothing of another service or class", arguments: TypedStack.available)
    func deleteService(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            for account in ["a", "b", "c"] { try f.keychain.save(account, for: item(account)) }
            try f.keychain.save("synced", for: GenericPassword(service: service, account: "d", synchronizable: true))
            try f.keychain.save("keep", for: GenericPassword(service: "com.example.other", account: "a"))
            try f.keychain.save("keep-web", for: InternetPassword(server: service, account: "a"))
            #expect(try f.keychain.deleteAll(service: service) == true)
            #expect(try f.keychain.accounts(service: service).isEmpty)
            #expect(try f.keychain.string(for: GenericPassword(service: "com.example.other", account: "a")) == "keep")
            #expect(try f.keychain.string(for: InternetPassword(server: service, account: "a")) == "keep-web")
            #expect(try f.keychain.deleteAll(service: service) == false)
        }
    }

    @Test("a Codable value round-trips as JSON; a value of another shape fails with decodingFailed without the bytes",
          arguments: TypedStack.available)
    func codable(stack: TypedStack) throws {
        struct Token: Codable, Equatable { let user: String; let token: String }
        try TypedStackFixture.with(stack) { f in
            let value = Token(user: "alice", token: secretText)
            try f.keychain.encode(value, for: item())
            #expect(try f.keychain.value(Token.self, for: item()) == value)
            #expect(try f.keychain.value(Token.self, for: item("nobody")) == nil)
            try f.keychain.save(secretText + " not json", for: item())
            let error = try #require(throws: KeychainError.self) { try f.keychain.value(Token.self, for: item()) }
            #expect(error == .decodingFailed)
            #expect(!String(describing: error).contains(secretText))
        }
    }

    @Test("a .userPresence item: exists and attributes answer without a prompt (hasAccessControl true); reading the secret prompts once",
          arguments: TypedStack.available)
    func accessControl(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            let guarded = f.keychain(options: ItemOptions(accessControlFlags: .userPresence))
            try guarded.save(secretData, for: item())
            #expect(try f.keychain.exists(item()) == true)
            #expect(try f.keychain.attributes(for: item())?.hasAccessControl == true)
            #expect(try f.keychain.accounts(service: service).map(\.hasAccessControl) == [true])
            #expect(f.authenticator.promptCount == 0)
            #expect(try guarded.data(for: item()) == secretData)
            #expect(f.authenticator.promptCount == 1)
        }
    }

    @Test("migrating accessibility updates in place: same secret, same creation date; a missing item or empty service gives false",
          arguments: TypedStack.available)
    func migrateAccessibility(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            try f.keychain.save(secretData, for: item("a"))
            try f.keychain.save("b", for: item("b"))
            let created = try #require(try f.keychain.attributes(for: item("a"))?.creationDate)
            f.clock.advance(5)
            #expect(try f.keychain.migrate(item("a"), to: .afterFirstUnlockThisDeviceOnly))
            #expect(try f.keychain.migrate(item("nobody"), to: .afterFirstUnlock) == false)
            let migrated = try #require(try f.keychain.attributes(for: item("a")))
            #expect(migrated.accessibility == .afterFirstUnlockThisDeviceOnly)
            #expect(migrated.creationDate == created)
            #expect(try f.keychain.data(for: item("a")) == secretData)
            #expect(try f.keychain.migrateAll(service: service, to: .afterFirstUnlock))
            #expect(try f.keychain.accounts(service: service).map(\.accessibility) == [.afterFirstUnlock, .afterFirstUnlock])
            #expect(try f.keychain.migrateAll(service: "com.example.none", to: .afterFirstUnlock) == false)
        }
    }

    @Test("the async forms do what the synchronous ones do", arguments: TypedStack.available)
    func asyncForms(stack: TypedStack) async throws {
        let fixture = try TypedStackFixture(stack)
        defer { fixture.remove() }
        let keychain = fixture.keychain
        try await keychain.save("async", for: item())
        #expect(try await keychain.string(for: item()) == "async")
        try await keychain.update("again", for: item())
        #expect(try await keychain.attributes(for: item())?.account == "alice")
        #expect(try await keychain.accounts(service: service).count == 1)
        #expect(try await keychain.delete(item()) == true)
        #expect(try await keychain.data(for: item()) == nil)
    }

    /// What a read of the item of account `accessible` (its class's name) gives: 0 or the status.
    private static func readStatus(_ f: TypedStackFixture, _ accessible: String) -> Int32 {
        do {
            _ = try f.keychain.store.copyMatching([Key.class: .string("genp"), Key.service: .string(service),
                                                   Key.account: .string(accessible), Key.returnData: .bool(true)])
            return 0
        } catch { return KeychainError(converting: error).status }
    }

    /// Adds one item of each class: whenUnlocked (ak), afterFirstUnlock (ck), always (dk).
    private static func addOneOfEachClass(_ f: TypedStackFixture) throws {
        for accessible in ["ak", "ck", "dk"] {
            _ = try f.keychain.store.add([Key.class: .string("genp"), Key.service: .string(service), Key.account: .string(accessible),
                                          Key.accessible: .string(accessible), Key.valueData: .data(secretData)])
        }
    }

    @Test("a locked keychain refuses every item, always* included, with errSecInteractionNotAllowed and loses none",
          arguments: TypedStack.available)
    func locked(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            try Self.addOneOfEachClass(f)
            try f.lock(.locked)
            let refused = KeychainError.interactionNotAllowed.status
            #expect(Self.readStatus(f, "ak") == refused)
            #expect(Self.readStatus(f, "ck") == refused)
            #expect(Self.readStatus(f, "dk") == refused)
            try f.lock(.unlocked)
            #expect(["ak", "ck", "dk"].map { Self.readStatus(f, $0) } == [0, 0, 0])
        }
    }

    @Test("locked after the first unlock, a keychain refuses whenUnlocked items with errSecInteractionNotAllowed and serves afterFirstUnlock and always ones",
          Comment(rawValue: "Not on the Secret Service stack: a collection is locked or unlocked, it has no after-first-unlock state"),
          arguments: TypedStack.available.filter(\.hasAfterFirstUnlockState))
    func lockedAfterFirstUnlock(stack: TypedStack) throws {
        try TypedStackFixture.with(stack) { f in
            try Self.addOneOfEachClass(f)
            try f.lock(.lockedAfterFirstUnlock)
            #expect(Self.readStatus(f, "ak") == KeychainError.interactionNotAllowed.status)
            #expect(Self.readStatus(f, "ck") == 0)
            #expect(Self.readStatus(f, "dk") == 0)
        }
    }
}
#endif
