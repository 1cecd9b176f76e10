import Foundation
import Testing
import Keystone
import KeystoneMigrations
import KeychainEngine
import KeystoneTesting

@Suite("KeychainError")
struct KeychainErrorTests {
    @Test("catch KeychainError.itemNotFound matches Keystone's errors and the engine's", arguments: Backend.allCases)
    func patternMatching(backend: Backend) throws {
        let f = backend.make()
        var caught = false
        do {
            try f.keychain.update("x", for: generic())
        } catch KeychainError.itemNotFound {
            caught = true
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(caught)

        // The raw store's error matches the same pattern, whichever type it is.
        caught = false
        do {
            try f.recorder.base.delete([Key.class: .string("genp"), Key.service: .string("none")])
        } catch KeychainError.duplicateItem {
            Issue.record("matched the wrong code")
        } catch KeychainError.itemNotFound {
            caught = true
        }
        #expect(caught)
    }

    @Test("A switch over a KeychainError value matches the named codes")
    func switchOnValue() {
        func classify(_ error: KeychainError) -> String {
            switch error {
            case KeychainError.itemNotFound: return "absent"
            case KeychainError.interactionNotAllowed: return "later"
            case KeychainError.decodingFailed: return "corrupt"
            default: return "other"
            }
        }
        #expect(classify(KeychainError(status: -25300, reason: "x")) == "absent")
        #expect(classify(.interactionNotAllowed) == "later")
        #expect(classify(KeychainError(code: .decodingFailed, reason: "path")) == "corrupt")
        #expect(classify(.authFailed) == "other")
    }

    @Test("Errors are equal by code; the reason does not count")
    func equality() {
        #expect(KeychainError(status: -25300, reason: "a") == KeychainError.itemNotFound)
        #expect(KeychainError.itemNotFound != KeychainError.duplicateItem)
        #expect(KeychainError(status: Status.param) != KeychainError.invalidItem)
        #expect(KeychainError.invalidItem.status == Status.param)
        #expect(KeychainError(EngineError(Status.authFailed, "why")) == .authFailed)
        #expect(KeychainError(converting: EngineError.itemNotFound) == .itemNotFound)
        struct Other: Error {}
        #expect(KeychainError(converting: Other()).status == Status.internalError)
    }

    @Test("Named codes carry Apple's OSStatus values", arguments: [
        (KeychainError.itemNotFound, -25300), (.duplicateItem, -25299), (.interactionNotAllowed, -25308),
        (.authFailed, -25293), (.userCanceled, -128), (.missingEntitlement, -34018), (.param, -50),
        (.noSuchAttr, -25303), (.decode, -26275), (.notAvailable, -25291), (.unimplemented, -4),
    ] as [(KeychainError, Int32)])
    func namedCodes(error: KeychainError, status: Int32) {
        #expect(error.status == status)
        #expect(error.message == Status.message(for: status))
        #expect(error.recoverySuggestion?.isEmpty == false)
    }

    @Test("Messages are Apple's; an unknown code reads OSStatus <code>")
    func messages() {
        #expect(KeychainError.itemNotFound.message == "The specified item could not be found in the keychain.")
        #expect(KeychainError.missingEntitlement.message == "A required entitlement isn't present.")
        #expect(KeychainError(status: -12345).message == "OSStatus -12345")
        #expect(KeychainError.itemNotFound.description.hasPrefix("KeychainError.errSecItemNotFound (-25300)"))
        #expect(KeychainError.itemNotFound.errorDescription == "The specified item could not be found in the keychain. (-25300)")
    }

    @Test("Only interaction-not-allowed is transient, and its advice is to wait, never to delete")
    func transient() throws {
        #expect(KeychainError.interactionNotAllowed.isTransient)
        #expect(!KeychainError.itemNotFound.isTransient)
        #expect(!KeychainError.authFailed.isTransient)
        #expect(!KeychainError.userCanceled.isTransient)
        let advice = try #require(KeychainError.interactionNotAllowed.recoverySuggestion)
        #expect(advice.contains("unlocked"))
        #expect(advice.contains("do not delete"))
    }

    @Test("No error text holds the secret that was being written", arguments: Backend.allCases)
    func noSecretInErrors(backend: Backend) throws {
        let f = backend.make()
        f.lockState = .locked
        let error = try #require(throws: KeychainError.self) { try f.keychain.save(secretText, for: generic()) }
        #expect(error == .interactionNotAllowed)
        for text in [error.description, error.errorDescription ?? "", error.failureReason ?? "", error.recoverySuggestion ?? "",
                     String(reflecting: error), error.localizedDescription] {
            #expect(!text.contains(secretText))
            #expect(!text.contains("XYZZY"))
        }
    }
}

@Suite("Options")
struct OptionTests {
    @Test("Every accessibility is stored as given", arguments: Accessibility.allCases)
    func accessibility(level: Accessibility) throws {
        let f = Backend.inMemoryKeychain.make()
        let keychain = f.keychain(options: ItemOptions(accessibility: level))
        try keychain.save("v", for: generic())
        #expect(try keychain.attributes(for: generic())?.accessibility == level)
        #expect(f.recorder.entries(.add).first?.query[Key.accessible] == .string(level.rawValue))
    }

    @Test("Synchronizable items are separate from local ones; a ThisDeviceOnly one is accepted as on Apple", arguments: Backend.allCases)
    func synchronizable(backend: Backend) throws {
        let f = backend.make()
        let synced = f.keychain(options: ItemOptions(synchronizable: true))
        try synced.save("cloud", for: generic())
        try f.keychain.save("local", for: generic())
        #expect(try synced.string(for: generic()) == "cloud")
        #expect(try f.keychain.string(for: generic()) == "local")
        let deviceOnly = f.keychain(options: ItemOptions(accessibility: .whenUnlockedThisDeviceOnly, synchronizable: true))
        try deviceOnly.save("x", for: generic("bob"))
        let attributes = try #require(try deviceOnly.attributes(for: generic("bob")))
        #expect(attributes.synchronizable && attributes.accessibility == .whenUnlockedThisDeviceOnly)
    }

    @Test("Saving again applies the new label and keeps the comment the options leave unset", arguments: Backend.allCases)
    func labelAndComment(backend: Backend) throws {
        let f = backend.make()
        try f.keychain(options: ItemOptions(label: "one", comment: "kept")).save("v1", for: generic())
        try f.keychain(options: ItemOptions(label: "two")).save("v2", for: generic())
        let attributes = try #require(try f.keychain.attributes(for: generic()))
        #expect(attributes.label == "two")
        #expect(attributes.comment == "kept")
    }

    @Test("An access-controlled read shows the operation prompt and reuses one authentication within the window")
    func authenticationContextAndPrompt() throws {
        let memory = InMemoryKeychain()
        let options = ItemOptions(accessibility: .whenPasscodeSetThisDeviceOnly, accessControlFlags: .biometryAny)
        let keychain = Keychain(store: memory, options: options,
                                authentication: AuthenticationOptions(prompt: "Unlock your account", reuseDuration: 60))
        try keychain.save(secretData, for: generic())
        #expect(memory.promptCount == 0)
        #expect(try keychain.data(for: generic()) == secretData)
        #expect(try keychain.data(for: generic()) == secretData)
        #expect(memory.promptCount == 1)
        #expect(memory.prompts.first?.operationPrompt == "Unlock your account")

        let noReuse = Keychain(store: memory, options: options)
        _ = try noReuse.data(for: generic())
        _ = try noReuse.data(for: generic())
        #expect(memory.promptCount == 3)
    }

    @Test("With interaction not allowed, a read that needs a prompt fails as interactionNotAllowed without prompting")
    func noInteraction() throws {
        let memory = InMemoryKeychain()
        let options = ItemOptions(accessControlFlags: .userPresence)
        try Keychain(store: memory, options: options).save("v", for: generic())
        let background = Keychain(store: memory, options: options, authentication: AuthenticationOptions(allowsInteraction: false))
        #expect(throws: KeychainError.interactionNotAllowed) { try background.data(for: generic()) }
        #expect(memory.promptCount == 0)
        #expect(try background.exists(generic()))
    }

    @Test("An access group the app is not entitled to fails with -34018")
    func accessGroups() throws {
        let memory = InMemoryKeychain(entitledAccessGroups: ["TEAM.app", "TEAM.shared"])
        let shared = Keychain(store: memory, options: ItemOptions(accessGroup: "TEAM.shared"))
        try shared.save("v", for: generic())
        #expect(try Keychain(store: memory).string(for: generic()) == "v")
        let foreign = Keychain(store: memory, options: ItemOptions(accessGroup: "OTHER.group"))
        #expect(throws: KeychainError.missingEntitlement) { try foreign.save("v", for: generic()) }
        #expect(throws: KeychainError.missingEntitlement) { try foreign.deleteAll(service: "com.example.api") }
    }

    @Test("On macOS every query goes to the data protection keychain; elsewhere the key is not sent")
    func dataProtectionKeychain() throws {
        let f = Backend.inMemoryKeychain.make()
        try f.keychain.save("v", for: generic())
        _ = try f.keychain.data(for: generic())
        _ = try f.keychain.accounts(service: "com.example.api")
        try f.keychain.deleteAll(service: "com.example.api")
        #expect(f.recorder.log.count == 4)
        for entry in f.recorder.log {
            #if os(macOS)
            #expect(entry.query[Key.useDataProtectionKeychain] == .bool(true))
            #else
            #expect(entry.query[Key.useDataProtectionKeychain] == nil)
            #endif
        }
    }
}

@Suite("Migration")
struct MigrationTests {
    @Test("Migrating an item's accessibility updates it in place: same secret, same creation date, no delete", arguments: Backend.allCases)
    func migrateAccessibility(backend: Backend) throws {
        let f = backend.make()
        try f.keychain.save(secretData, for: generic())
        let created = try #require(try f.keychain.attributes(for: generic())?.creationDate)
        f.clock.advance(5)
        #expect(try f.keychain.migrate(generic(), to: .afterFirstUnlockThisDeviceOnly))
        #expect(try f.keychain.migrate(generic("nobody"), to: .afterFirstUnlock) == false)

        let attributes = try #require(try f.keychain.attributes(for: generic()))
        #expect(attributes.accessibility == .afterFirstUnlockThisDeviceOnly)
        #expect(attributes.creationDate == created)
        #expect(f.recorder.entries(.delete).isEmpty)
        #expect(f.recorder.entries(.add).count == 1)

        // Now readable while locked after the first unlock.
        f.lockState = .lockedAfterFirstUnlock
        #expect(try f.keychain.data(for: generic()) == secretData)
    }

    @Test("Migrating a whole service moves every account", arguments: Backend.allCases)
    func migrateService(backend: Backend) throws {
        let f = backend.make()
        for account in ["a", "b"] { try f.keychain.save(account, for: generic(account)) }
        #expect(try f.keychain.migrateAll(service: "com.example.api", to: .afterFirstUnlock))
        #expect(try f.keychain.accounts(service: "com.example.api").allSatisfy { $0.accessibility == .afterFirstUnlock })
    }

    @Test("A legacy value moves into the keychain and leaves the source only once it reads back")
    func legacyValue() throws {
        let f = Backend.inMemoryKeychain.make()
        let source = DictionaryValueSource(["auth_token": secretText, "other": 1])
        #expect(try f.keychain.migrateValue(forKey: "auth_token", from: source, to: generic()))
        #expect(try f.keychain.string(for: generic()) == secretText)
        #expect(source.values["auth_token"] == nil)
        #expect(try f.keychain.migrateValue(forKey: "auth_token", from: source, to: generic()) == false)

        // A failed save keeps the source.
        f.lockState = .locked
        let again = DictionaryValueSource(["auth_token": "t2"])
        #expect(throws: KeychainError.interactionNotAllowed) { try f.keychain.migrateValue(forKey: "auth_token", from: again, to: generic()) }
        #expect(again.values["auth_token"] as? String == "t2")
    }
}

@Suite("Async forms", .serialized)
struct AsyncTests {
    @Test("Each async form does what the synchronous one does", arguments: Backend.allCases)
    func asyncRoundTrip(backend: Backend) async throws {
        let f = backend.make()
        let keychain = f.keychain
        try await keychain.save(secretData, for: generic())
        #expect(try await keychain.data(for: generic()) == secretData)
        try await keychain.update("two", for: generic())
        #expect(try await keychain.string(for: generic()) == "two")
        try await keychain.encode(["k": "v"], for: generic("json"))
        #expect(try await keychain.value([String: String].self, for: generic("json")) == ["k": "v"])
        #expect(try await keychain.exists(generic()))
        #expect(try await keychain.attributes(for: generic())?.account == "alice")
        #expect(try await keychain.accounts(service: "com.example.api").count == 2)
        #expect(try await keychain.migrate(generic(), to: .afterFirstUnlock))
        #expect(try await keychain.delete(generic()))
        #expect(try await keychain.deleteAll(service: "com.example.api"))
        await #expect(throws: KeychainError.itemNotFound) { try await keychain.update("x", for: generic()) }
    }

    @Test("A cancelled task does not start the keychain call")
    func cancellation() async throws {
        let f = Backend.inMemoryKeychain.make()
        let keychain = f.keychain
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await keychain.save("v", for: generic())
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(f.recorder.log.isEmpty)
    }
}
