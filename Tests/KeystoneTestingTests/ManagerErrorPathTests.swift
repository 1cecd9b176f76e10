import Foundation
import Testing
import Keystone
import KeychainEngine
import KeystoneTesting

// The code users write: a keychain protocol, and a manager that depends only on it.
protocol KeychainServiceProtocol: Sendable {
    func save(_ data: Data, forKey key: String) throws
    func read(forKey key: String) throws -> Data?
    func update(_ data: Data, forKey key: String) throws
    func delete(forKey key: String) throws
    func deleteAll() throws
}

extension MockKeychainService: KeychainServiceProtocol {}

final class AuthenticationManager: Sendable {
    private let keychain: any KeychainServiceProtocol
    init(keychain: any KeychainServiceProtocol) { self.keychain = keychain }

    func storeToken(_ token: String) throws { try keychain.save(Data(token.utf8), forKey: "auth_token") }

    func retrieveToken() throws -> String? {
        guard let data = try keychain.read(forKey: "auth_token") else { return nil }
        return String(data: data, encoding: .utf8)
    }
}

let secret = "tok-9f8e7d6c5b4a-SECRET"

@Suite("A keychain manager's error paths with MockKeychainService")
struct ManagerErrorPathTests {
    @Test("An injected error reaches the manager unchanged and every call is counted", arguments: [
        KeychainError.duplicateItem, .itemNotFound, .authFailed, .interactionNotAllowed, .missingEntitlement,
    ])
    func injectedErrors(error: KeychainError) throws {
        let mock = MockKeychainService()
        let manager = AuthenticationManager(keychain: mock)
        mock.errorToThrow = error
        #expect(throws: error) { try manager.storeToken(secret) }
        #expect(throws: error) { try manager.retrieveToken() }
        #expect(mock.saveCallCount == 1)
        #expect(mock.readCallCount == 1)
        mock.errorToThrow = nil
        #expect(throws: Never.self) { try manager.storeToken(secret) }
        #expect(try manager.retrieveToken() == secret)
    }

    @Test("Save then read round-trips; saving again overwrites without a duplicate error")
    func roundTrip() throws {
        let mock = MockKeychainService()
        let manager = AuthenticationManager(keychain: mock)
        #expect(try manager.retrieveToken() == nil)
        try manager.storeToken("one")
        try manager.storeToken(secret)
        #expect(try manager.retrieveToken() == secret)
        #expect(mock.storage == ["auth_token": Data(secret.utf8)])
        #expect(mock.saveCallCount == 2)
        #expect(mock.readCallCount == 2)
    }

    @Test("Updating a key that was never saved throws itemNotFound, as SecItemUpdate does")
    func updateMissing() throws {
        let mock = MockKeychainService()
        #expect(throws: KeychainError.itemNotFound) { try mock.update(Data("x".utf8), forKey: "missing") }
        try mock.save(Data("a".utf8), forKey: "k")
        try mock.update(Data("b".utf8), forKey: "k")
        #expect(try mock.read(forKey: "k") == Data("b".utf8))
        #expect(mock.updateCallCount == 2)
    }

    @Test("Deleting a missing key is fine; deleteAll clears only the mock's service")
    func deletes() throws {
        let memory = InMemoryKeychain()
        let mock = MockKeychainService(service: "svc.one", keychain: memory)
        let neighbour = MockKeychainService(service: "svc.two", keychain: memory)
        try mock.delete(forKey: "never-saved")
        try mock.save(Data("1".utf8), forKey: "a")
        try mock.save(Data("2".utf8), forKey: "b")
        try neighbour.save(Data("3".utf8), forKey: "a")
        try mock.deleteAll()
        #expect(mock.storage.isEmpty)
        #expect(neighbour.storage == ["a": Data("3".utf8)])
        #expect(mock.deleteCallCount == 1)
        #expect(mock.deleteAllCallCount == 1)
    }

    @Test("The real rules give the statuses apps handle: duplicate, not found, auth failed, locked, missing entitlement")
    func realRuleStatuses() throws {
        // Duplicate item: a raw SecItemAdd twice on the exposed engine.
        let memory = InMemoryKeychain()
        let attributes: KeychainQuery = [Key.class: .string("genp"), Key.service: .string("s"), Key.account: .string("a"),
                                         Key.valueData: .data(Data(secret.utf8))]
        _ = try memory.add(attributes)
        #expect(throws: KeychainError.duplicateItem) { try memory.add(attributes) }
        // The raw engine throws EngineError; the KeychainError pattern still matches it.
        do {
            try memory.engine.add(attributes)
            Issue.record("the second raw add should fail")
        } catch KeychainError.duplicateItem {
            // expected
        }

        // Not found.
        #expect(throws: KeychainError.itemNotFound) { try memory.copyMatching([Key.class: .string("genp"), Key.service: .string("none")]) }

        // Authentication failed on a protected item.
        let protected = Keychain(store: memory, options: ItemOptions(accessControlFlags: .biometryAny))
        let item = try GenericPassword(service: "s", account: "bio")
        try protected.save(secret, for: item)
        memory.enqueueAuthentication(.failed)
        #expect(throws: KeychainError.authFailed) { try protected.string(for: item) }

        // Interaction not allowed while locked.
        let mock = MockKeychainService(keychain: memory)
        try mock.save(Data(secret.utf8), forKey: "k")
        memory.lockState = .locked
        #expect(throws: KeychainError.interactionNotAllowed) { try mock.read(forKey: "k") }
        memory.lockState = .unlocked
        #expect(try mock.read(forKey: "k") == Data(secret.utf8))

        // Missing entitlement: an app without keychain-access-groups.
        let unentitled = MockKeychainService(keychain: InMemoryKeychain(entitledAccessGroups: []))
        #expect(throws: KeychainError.missingEntitlement) { try unentitled.save(Data("x".utf8), forKey: "k") }
    }
}

@Suite("Authentication")
struct AuthenticationTests {
    let item = try! GenericPassword(service: "com.example.bank", account: "alice")

    @Test("A cancelled biometric prompt is userCanceled and leaves the item for the next try")
    func cancelledPrompt() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory, options: ItemOptions(accessibility: .whenUnlockedThisDeviceOnly, accessControlFlags: .biometryCurrentSet),
                                authentication: AuthenticationOptions(prompt: "Sign in to your bank"))
        try keychain.save(secret, for: item)
        memory.enqueueAuthentication(.userCancel)
        do {
            _ = try keychain.string(for: item)
            Issue.record("the read should have thrown")
        } catch KeychainError.userCanceled {
            // expected
        }
        #expect(memory.itemCount == 1)
        #expect(try keychain.string(for: item) == secret)
        #expect(memory.promptCount == 2)
        #expect(memory.prompts.allSatisfy { $0.operationPrompt == "Sign in to your bank" })
    }

    @Test("Simulator returns access-controlled items without a prompt; a device asks", arguments: InMemoryKeychain.DeviceProfile.allCases)
    func simulatorVersusDevice(profile: InMemoryKeychain.DeviceProfile) throws {
        let memory = InMemoryKeychain(profile: profile, authentication: .failed)
        let keychain = Keychain(store: memory, options: ItemOptions(accessControlFlags: .biometryAny))
        try keychain.save(secret, for: item)
        switch profile {
        case .simulator:
            #expect(try keychain.string(for: item) == secret)
            #expect(memory.promptCount == 0)
        case .device:
            #expect(throws: KeychainError.authFailed) { try keychain.string(for: item) }
            #expect(memory.promptCount == 1)
        }
    }

    @Test("Secure Enclave keys exist on a device, not on a simulator", arguments: InMemoryKeychain.DeviceProfile.allCases)
    func secureEnclave(profile: InMemoryKeychain.DeviceProfile) throws {
        let memory = InMemoryKeychain(profile: profile)
        let key: KeychainQuery = [Key.class: .string("keys"), Key.tokenID: .string(Key.tokenIDSecureEnclave),
                                  Key.applicationTag: .data(Data("com.example.key".utf8)), Key.keyClass: .number(1)]
        if profile == .simulator {
            #expect(throws: KeychainError.unimplemented) { try memory.add(key) }
        } else {
            #expect(throws: Never.self) { try memory.add(key) }
        }
    }

    @Test("After a biometry enrollment change, biometryCurrentSet items fail and biometryAny items still read")
    func enrollmentChange() throws {
        let memory = InMemoryKeychain()
        let current = try GenericPassword(service: "s", account: "current")
        let any = try GenericPassword(service: "s", account: "any")
        try Keychain(store: memory, options: ItemOptions(accessControlFlags: .biometryCurrentSet)).save("c", for: current)
        try Keychain(store: memory, options: ItemOptions(accessControlFlags: .biometryAny)).save("a", for: any)
        memory.changeBiometryEnrollment()
        let keychain = Keychain(store: memory)
        #expect(throws: KeychainError.authFailed) { try keychain.string(for: current) }
        #expect(try keychain.string(for: any) == "a")
        #expect(try keychain.exists(current))
    }
}

@Suite("Injected failures and the call log")
struct FailureInjectionTests {
    let item = try! GenericPassword(service: "com.example.app", account: "token")

    @Test("An injected -34018 fails the next save only")
    func injectedMissingEntitlement() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        memory.injectFailure(Status.missingEntitlement, on: .add)
        #expect(throws: KeychainError.missingEntitlement) { try keychain.save(secret, for: item) }
        #expect(memory.itemCount == 0)
        try keychain.save(secret, for: item)
        #expect(try keychain.string(for: item) == secret)
        #expect(memory.calls(.add).map(\.status) == [Status.missingEntitlement, Status.success])
    }

    @Test("A failure on the Nth call fires once, on that call")
    func nthCall() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        try keychain.save(secret, for: item)
        memory.injectFailure(Status.interactionNotAllowed, on: .copy, .onCall(2))
        #expect(try keychain.string(for: item) == secret)
        #expect(throws: KeychainError.interactionNotAllowed) { try keychain.string(for: item) }
        #expect(try keychain.string(for: item) == secret)
    }

    @Test("An always-failure on every operation lasts until removed, and fails before touching anything", arguments: [
        Status.missingEntitlement, Status.notAvailable, Status.decode, -99_999,
    ])
    func always(status: Int32) throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        try keychain.save("kept", for: item)
        let id = memory.injectFailure(status, on: nil, .always)
        for _ in 0..<3 {
            #expect(throws: KeychainError(status: status)) { try keychain.delete(item) }
            #expect(throws: KeychainError(status: status)) { try keychain.data(for: item) }
        }
        memory.removeFailure(id)
        #expect(try keychain.string(for: item) == "kept")
    }

    @Test("The call log records operations and queries, but never the secret")
    func callLog() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        try keychain.save(secret, for: item)
        try keychain.save(secret, for: item)
        _ = try keychain.string(for: item)
        _ = try keychain.accounts(service: "com.example.app")

        let calls = memory.calls
        #expect(calls.map(\.operation) == [.add, .add, .update, .copy, .copy])
        #expect(calls.map(\.status) == [Status.success, Status.duplicateItem, Status.success, Status.success, Status.success])
        #expect(calls[0].service == "com.example.app")
        #expect(calls[0].account == "token")
        #expect(calls[0].secretByteCount == secret.utf8.count)
        #expect(calls[2].secretByteCount == secret.utf8.count)
        #expect(calls[3].readsSecret)
        #expect(!calls[4].readsSecret)
        for call in calls {
            #expect(call.query[Key.valueData] == nil)
            #expect(call.attributesToUpdate?[Key.valueData] == nil)
            #expect(!call.description.contains(secret))
            #expect(!String(reflecting: call).contains(secret))
        }
        #expect(calls[1].description.contains("errSecDuplicateItem (-25299)"))
        memory.clearCalls()
        #expect(memory.calls.isEmpty)
    }
}
