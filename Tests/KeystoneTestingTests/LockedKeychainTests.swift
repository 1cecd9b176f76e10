import Foundation
import Testing
import Keystone
import KeychainEngine
import KeystoneTesting

/// An app-like token store written the way careless apps write it: when reading the token fails,
/// it "repairs" the keychain by deleting the item and reports the user as signed out.
struct CarelessTokenStore {
    let keychain: Keychain
    let item = try! GenericPassword(service: "com.example.app", account: "refresh-token")

    func token() -> String? {
        do {
            return try keychain.string(for: item)
        } catch {
            _ = try? keychain.delete(item)   // The classic bug: a locked device looks like a corrupt item.
            return nil
        }
    }
}

/// The same store written with Keystone's rules: nil only means absent; a transient failure is
/// reported as "try later" and the item is never touched.
struct TokenStore {
    enum Availability: Equatable { case token(String), signedOut, retryAfterUnlock }

    let keychain: Keychain
    let item = try! GenericPassword(service: "com.example.app", account: "refresh-token")

    func save(_ token: String) throws { try keychain.save(token, for: item) }

    func token() throws -> Availability {
        do {
            guard let token = try keychain.string(for: item) else { return .signedOut }
            return .token(token)
        } catch let error as KeychainError where error.isTransient {
            return .retryAfterUnlock
        }
    }
}

@Suite("A -25308 never deletes anything")
struct LockedKeychainTests {
    @Test("While locked, the token store reports retry-after-unlock and the token is there after unlocking",
          arguments: [LockState.locked, .lockedAfterFirstUnlock])
    func lockedReadIsTransient(state: LockState) throws {
        let memory = InMemoryKeychain()
        let store = TokenStore(keychain: Keychain(store: memory))
        try store.save(secret)
        memory.lockState = state

        let error = try #require(throws: KeychainError.self) { try store.keychain.string(for: store.item) }
        #expect(error == .interactionNotAllowed)
        #expect(error.isTransient)
        #expect(try store.token() == .retryAfterUnlock)
        #expect(memory.calls(.delete).isEmpty)

        memory.lockState = .unlocked
        #expect(try store.token() == .token(secret))
        #expect(memory.itemCount == 1)
    }

    @Test("Even a careless store's delete is refused while locked: the item survives and reads after unlocking")
    func carelessDeleteRefused() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        let careless = CarelessTokenStore(keychain: keychain)
        try keychain.save(secret, for: careless.item)
        memory.lockState = .locked

        #expect(careless.token() == nil)   // It believes the user is signed out…
        let deletes = memory.calls(.delete)
        #expect(deletes.count == 1)         // …and tried to delete,
        #expect(deletes.allSatisfy { $0.status == Status.interactionNotAllowed })  // but the keychain refused.

        memory.lockState = .unlocked
        #expect(careless.token() == secret)
    }

    @Test("afterFirstUnlock items stay readable when locked after the first unlock; whenUnlocked ones wait")
    func accessibilityDecides() throws {
        let memory = InMemoryKeychain()
        let background = Keychain(store: memory, options: ItemOptions(accessibility: .afterFirstUnlockThisDeviceOnly))
        let foreground = Keychain(store: memory)
        let bgItem = try GenericPassword(service: "s", account: "background")
        let fgItem = try GenericPassword(service: "s", account: "foreground")
        try background.save("bg", for: bgItem)
        try foreground.save("fg", for: fgItem)
        memory.lockState = .lockedAfterFirstUnlock
        #expect(try background.string(for: bgItem) == "bg")
        #expect(throws: KeychainError.interactionNotAllowed) { try foreground.string(for: fgItem) }
        memory.lockState = .unlocked
        #expect(try foreground.string(for: fgItem) == "fg")
    }

    @Test("Saving while locked fails as transient and changes nothing")
    func saveWhileLocked() throws {
        let memory = InMemoryKeychain()
        let store = TokenStore(keychain: Keychain(store: memory))
        try store.save("old")
        memory.lockState = .locked
        #expect(throws: KeychainError.interactionNotAllowed) { try store.save("new") }
        memory.lockState = .unlocked
        #expect(try store.token() == .token("old"))
    }
}

@Suite("Isolated keychains for tests")
struct IsolationTests {
    @Test("The trait gives the test its own empty keychain and service", .isolatedKeychain)
    func trait() throws {
        let isolated = try #require(IsolatedKeychain.current)
        let memory = try #require(isolated.memory)
        #expect(memory.itemCount == 0)
        #expect(isolated.service.hasPrefix("keystone-test."))
        try isolated.keychain.save("v", for: isolated.item("a"))
        #expect(try isolated.keychain.accounts(service: isolated.service).map(\.account) == ["a"])
    }

    @Test("Each case of a parameterized test gets a fresh keychain", .isolatedKeychain, arguments: 1...3)
    func perCase(n: Int) throws {
        let isolated = try #require(IsolatedKeychain.current)
        #expect(isolated.memory?.itemCount == 0)
        for i in 0..<n { try isolated.keychain.save("v", for: isolated.item("\(i)")) }
        #expect(isolated.memory?.itemCount == n)
    }

    @Test("The simulator backend plays a simulator", .isolatedKeychain(.inMemory(.simulator)))
    func simulatorBackend() throws {
        let isolated = try #require(IsolatedKeychain.current)
        #expect(isolated.memory?.profile == .simulator)
    }

    @Test("Without the trait there is no isolated keychain")
    func noTrait() {
        #expect(IsolatedKeychain.current == nil)
    }

    @Test("withIsolatedKeychain cleans up after the body, even when it throws")
    func function() throws {
        var captured: IsolatedKeychain?
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try withIsolatedKeychain { isolated in
                captured = isolated
                #expect(IsolatedKeychain.current?.service == isolated.service)
                try isolated.keychain.save("v", for: isolated.item("a"))
                isolated.memory?.lockState = .locked
                throw Boom()
            }
        }
        let isolated = try #require(captured)
        #expect(isolated.memory?.itemCount == 0)
        #expect(IsolatedKeychain.current == nil)
    }

    @Test("The async withIsolatedKeychain works with the async API")
    func asyncFunction() async throws {
        let count = try await withIsolatedKeychain { isolated in
            try await isolated.keychain.save("v", for: isolated.item("a"))
            return try await isolated.keychain.accounts(service: isolated.service).count
        }
        #expect(count == 1)
    }
}

@Suite("Isolated suite", .isolatedKeychain)
struct IsolatedSuiteTests {
    @Test("A suite trait isolates the first test")
    func first() throws {
        let isolated = try #require(IsolatedKeychain.current)
        #expect(isolated.memory?.itemCount == 0)
        try isolated.keychain.save("one", for: isolated.item("shared-name"))
    }

    @Test("A suite trait isolates the second test")
    func second() throws {
        let isolated = try #require(IsolatedKeychain.current)
        #expect(isolated.memory?.itemCount == 0)
        try isolated.keychain.save("two", for: isolated.item("shared-name"))
    }
}

@Suite("Raw SecItem-style code on the exposed engine")
struct RawEngineTests {
    @Test("Items added with raw queries are read by the typed API, and the reverse")
    func rawAndTyped() throws {
        let memory = InMemoryKeychain()
        try memory.engine.add([Key.class: .string("genp"), Key.service: .string("legacy"), Key.account: .string("a"),
                               Key.valueData: .data(Data("raw".utf8))])
        let keychain = Keychain(store: memory)
        #expect(try keychain.string(for: GenericPassword(service: "legacy", account: "a")) == "raw")
        try keychain.save("typed", for: GenericPassword(service: "legacy", account: "b"))
        let result = try memory.engine.copyMatching([Key.class: .string("genp"), Key.service: .string("legacy"),
                                                     Key.account: .string("b"), Key.returnData: .bool(true)])
        #expect(result == .data(Data("typed".utf8)))
    }
}
