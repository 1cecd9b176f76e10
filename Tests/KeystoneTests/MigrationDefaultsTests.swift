import Foundation
import KeychainEngine
import Keystone
import KeystoneMigrations
import KeystoneTesting
import Testing

/// The plan the defaults migration tests run: two versions, a String, a Data and an internet password.
enum DefaultsPlan {
    static let token = try! GenericPassword(service: "com.example.app", account: "token")
    static let refresh = try! GenericPassword(service: "com.example.app", account: "refresh")
    static let smtp = try! InternetPassword(server: "mail.example.com", account: "alice", protocol: .imaps)
    static let plan = DefaultsMigration(versionKey: "migration_version", versions: [
        .init(1, steps: [.init(moving: "auth_token", to: token), .init(moving: "refresh_blob", to: refresh)]),
        .init(2, steps: [.init(moving: "smtp_password", to: smtp)]),
    ])
    static let tokenText = "tok-\(secretText)"
    static let refreshData = Data([0, 1, 2, 0xFF]) + secretData
    static let smtpText = "smtp-\(secretText)"

    /// Defaults as the old app left them, plus a key the plan does not move.
    static func legacyDefaults() -> InMemoryDefaults {
        InMemoryDefaults(["auth_token": tokenText, "refresh_blob": refreshData, "smtp_password": smtpText, "theme": "dark"])
    }

    /// How many copies of `item` the keychain holds (every access group, synchronizable or not).
    static func copies(_ memory: InMemoryKeychain, _ item: some KeychainItem) throws -> Int {
        var query = item.identifyingAttributes
        query[Key.synchronizable] = .string(Key.synchronizableAny)
        query[Key.returnAttributes] = .bool(true)
        query[Key.matchLimit] = .string(Key.matchLimitAll)
        do {
            switch try memory.copyMatching(query) {
            case .array(let rows)?: return rows.count
            case .attributes?: return 1
            default: return 0
            }
        } catch let error where KeychainError.itemNotFound ~= error {
            return 0
        }
    }

    /// Every checkpoint of a full run from version 0 with every value present, in order.
    static let checkpoints: [MigrationCheckpoint] = {
        let memory = InMemoryKeychain()
        var all: [MigrationCheckpoint] = []
        _ = try! Keychain(store: memory).migrate(plan, from: legacyDefaults()) { all.append($0) }
        return all
    }()
}

/// Thrown by a checkpoint observer to stop a run there, as a crash would.
struct SimulatedCrash: Error {}

@Suite("Defaults migration")
struct MigrationDefaultsTests {
    typealias P = DefaultsPlan

    @Test("A run moves String and Data values into typed items, removes them from the defaults, records the version")
    func movesEverything() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        let defaults = P.legacyDefaults()
        let report = try keychain.migrate(P.plan, from: defaults)

        #expect(report.startVersion == 0 && report.finalVersion == 2)
        #expect(report.keys(.moved) == ["auth_token", "refresh_blob", "smtp_password"])
        #expect(try keychain.string(for: P.token) == P.tokenText)
        #expect(try keychain.data(for: P.refresh) == P.refreshData)
        #expect(try keychain.string(for: P.smtp) == P.smtpText)
        for key in ["auth_token", "refresh_blob", "smtp_password"] { #expect(defaults.persisted[key] == nil) }
        #expect(defaults.persisted["migration_version"] as? Int == 2)
        #expect(defaults.persisted["theme"] as? String == "dark")
        // Never an update or a delete: the values were added.
        #expect(memory.calls(.update).isEmpty && memory.calls(.delete).isEmpty)
        // The report names items and keys, never a value.
        #expect(!report.description.contains(secretText))
    }

    @Test("A second run after a success does nothing: no keychain call, no defaults write")
    func idempotent() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        let defaults = P.legacyDefaults()
        try keychain.migrate(P.plan, from: defaults)
        memory.clearCalls()
        let syncs = defaults.synchronizeCount

        let again = try keychain.migrate(P.plan, from: defaults)
        #expect(again.entries.isEmpty && !again.ranAnything && again.finalVersion == 2)
        #expect(memory.calls.isEmpty)
        #expect(defaults.synchronizeCount == syncs)
    }

    @Test("Only the versions above the recorded one run")
    func pendingVersionsOnly() throws {
        let memory = InMemoryKeychain()
        let defaults = P.legacyDefaults()
        defaults.set(1, forKey: "migration_version")
        let report = try Keychain(store: memory).migrate(P.plan, from: defaults)
        #expect(report.entries.map(\.defaultsKey) == ["smtp_password"])
        // Version 1's keys are not touched (the app recorded it as done).
        #expect(defaults.values["auth_token"] as? String == P.tokenText)
        #expect(try DefaultsPlan.copies(memory, P.token) == 0)
    }

    @Test("When the keychain already holds the item its value wins: kept, never overwritten; the legacy copy is removed")
    func keychainWins() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        try keychain.save("newer-value", for: P.token)
        memory.clearCalls()
        let defaults = P.legacyDefaults()
        let report = try keychain.migrate(P.plan, from: defaults)

        #expect(report.keys(.keptKeychainValue) == ["auth_token"])
        #expect(try keychain.string(for: P.token) == "newer-value")
        #expect(defaults.persisted["auth_token"] == nil)
        #expect(memory.calls(.update).isEmpty && memory.calls(.delete).isEmpty)
    }

    @Test("Steps whose defaults hold nothing report absent, or already in the keychain when an earlier run moved them")
    func absentAndAlreadyMoved() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        try keychain.save(P.tokenText, for: P.token)
        let report = try keychain.migrate(P.plan, from: InMemoryDefaults(["smtp_password": P.smtpText]))
        #expect(report.keys(.alreadyInKeychain) == ["auth_token"])
        #expect(report.keys(.absent) == ["refresh_blob"])
        #expect(report.keys(.moved) == ["smtp_password"])
        #expect(report.finalVersion == 2)
    }

    @Test("A run stopped at any checkpoint never leaves zero copies, and a rerun finishes: one copy, right value, version recorded",
          arguments: DefaultsPlan.checkpoints.indices)
    func crashAtEveryCheckpoint(index: Int) throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        let defaults = P.legacyDefaults()
        var seen = 0
        #expect(throws: SimulatedCrash.self) {
            try keychain.migrate(P.plan, from: defaults) { _ in
                if seen == index { throw SimulatedCrash() }
                seen += 1
            }
        }
        defaults.simulateCrash()  // what was not synchronized is lost
        let expected: [(String, any KeychainItem)] = [("auth_token", P.token), ("refresh_blob", P.refresh), ("smtp_password", P.smtp)]
        for (key, item) in expected {
            let copies = try P.copies(memory, item) + (defaults.values[key] == nil ? 0 : 1)
            #expect(copies >= 1, "\(key) has no copy after a crash at \(P.checkpoints[index])")
        }

        let report = try keychain.migrate(P.plan, from: defaults)
        #expect(report.finalVersion == 2)
        #expect(try keychain.string(for: P.token) == P.tokenText)
        #expect(try keychain.data(for: P.refresh) == P.refreshData)
        #expect(try keychain.string(for: P.smtp) == P.smtpText)
        for (key, item) in expected {
            #expect(try P.copies(memory, item) == 1)
            #expect(defaults.persisted[key] == nil)
        }
        #expect(defaults.persisted["migration_version"] as? Int == 2)
        #expect(memory.calls(.delete).isEmpty && memory.calls(.update).isEmpty)
    }

    @Test("A locked keychain stops the run at the step: its value and the later ones stay in the defaults, the version is not recorded",
          arguments: [LockState.locked, .lockedAfterFirstUnlock])
    func lockedKeychainStops(state: LockState) throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        // The token is there already, written while unlocked: reading it now fails (-25308), never "absent".
        try keychain.save("newer-value", for: P.token)
        memory.lockState = state
        let defaults = P.legacyDefaults()
        let error = try #require(throws: KeychainError.self) { try keychain.migrate(P.plan, from: defaults) }
        #expect(error == .interactionNotAllowed)
        #expect(error.reason.contains("auth_token") && error.reason.contains("version 1"))
        #expect(!error.description.contains(secretText) && !error.reason.contains(P.tokenText))
        #expect(defaults.values["auth_token"] as? String == P.tokenText)
        #expect(defaults.values["refresh_blob"] as? Data == P.refreshData)
        #expect(defaults.values["migration_version"] == nil)

        memory.lockState = .unlocked
        let report = try keychain.migrate(P.plan, from: defaults)
        #expect(report.keys(.keptKeychainValue) == ["auth_token"] && report.finalVersion == 2)
    }

    @Test("A keychain failure at a later step leaves the defaults untouched (the earlier copy stays in the keychain), the version unrecorded; the rerun finishes")
    func failureAtSecondStep() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        let defaults = P.legacyDefaults()
        // The second add fails.
        memory.injectFailure(Status.interactionNotAllowed, on: .add, .onCall(2))
        #expect(throws: KeychainError.interactionNotAllowed) { try keychain.migrate(P.plan, from: defaults) }
        #expect(defaults.synchronizeCount == 0)
        #expect(defaults.values["auth_token"] as? String == P.tokenText)
        #expect(defaults.values["refresh_blob"] as? Data == P.refreshData)
        #expect(defaults.values["migration_version"] == nil)
        #expect(try keychain.string(for: P.token) == P.tokenText)
        let report = try keychain.migrate(P.plan, from: defaults)
        #expect(report.keys(.keptKeychainValue) == ["auth_token"] && report.keys(.moved) == ["refresh_blob", "smtp_password"])
        #expect(defaults.persisted["auth_token"] == nil && defaults.persisted["migration_version"] as? Int == 2)
    }

    @Test("A value that is neither Data nor String stops the run without being converted or removed", arguments: [
        ("a number", 42 as any Sendable), ("a date", Date(timeIntervalSince1970: 0) as any Sendable), ("an array", ["a"] as any Sendable),
    ])
    func otherTypes(name: String, value: any Sendable) throws {
        let memory = InMemoryKeychain()
        let defaults = InMemoryDefaults(["auth_token": value])
        let error = try #require(throws: KeychainError.self) { try Keychain(store: memory).migrate(P.plan, from: defaults) }
        #expect(error == .encodingFailed, "\(name)")
        #expect(defaults.values["auth_token"] != nil && defaults.values["migration_version"] == nil)
        #expect(memory.itemCount == 0)
    }

    @Test("Defaults that cannot be synchronized stop the run with errSecIO and the version unrecorded")
    func synchronizeFails() throws {
        let memory = InMemoryKeychain()
        let defaults = P.legacyDefaults()
        defaults.synchronizeFails = true
        #expect(throws: KeychainError(status: Status.io)) { try Keychain(store: memory).migrate(P.plan, from: defaults) }
        defaults.simulateCrash()
        // The secrets are in the keychain and still in the defaults: the rerun finishes.
        defaults.synchronizeFails = false
        let report = try Keychain(store: memory).migrate(P.plan, from: defaults)
        #expect(report.keys(.keptKeychainValue) == ["auth_token", "refresh_blob", "smtp_password"] && report.finalVersion == 2)
        #expect(try P.copies(memory, P.token) == 1)
    }

    @Test("A malformed plan is refused before anything is read or written", arguments: [
        DefaultsMigration(versionKey: "", versions: []),
        DefaultsMigration(versions: [.init(0, steps: [])]),
        DefaultsMigration(versions: [.init(2, steps: []), .init(1, steps: [])]),
        DefaultsMigration(versions: [.init(1, steps: [.init(moving: "", to: DefaultsPlan.token)])]),
        DefaultsMigration(versionKey: "v", versions: [.init(1, steps: [.init(moving: "v", to: DefaultsPlan.token)])]),
        DefaultsMigration(versions: [.init(1, steps: [.init(moving: "k", to: DefaultsPlan.token)]),
                                     .init(2, steps: [.init(moving: "k", to: DefaultsPlan.refresh)])]),
    ])
    func malformedPlans(plan: DefaultsMigration) throws {
        let memory = InMemoryKeychain()
        let defaults = InMemoryDefaults(["k": "v", "v": "x"])
        #expect(throws: KeychainError.invalidItem) { try Keychain(store: memory).migrate(plan, from: defaults) }
        #expect(memory.calls.isEmpty && defaults.synchronizeCount == 0)
    }

    @Test("A recorded version that is not an integer is not guessed", arguments: [("a string", "two" as any Sendable), ("data", Data([1]) as any Sendable)])
    func unreadableVersion(name: String, value: any Sendable) throws {
        let defaults = P.legacyDefaults()
        defaults.set(value, forKey: "migration_version")
        #expect(throws: KeychainError.decodingFailed, "\(name)") { try Keychain(store: InMemoryKeychain()).migrate(P.plan, from: defaults) }
        #expect(defaults.values["auth_token"] as? String == P.tokenText)
    }

    @Test("A step with options stores the item with them")
    func stepOptions() throws {
        let memory = InMemoryKeychain()
        let plan = DefaultsMigration(versions: [.init(1, steps: [
            .init(moving: "auth_token", to: P.token, options: ItemOptions(accessibility: .afterFirstUnlockThisDeviceOnly, label: "Token")),
        ])])
        try Keychain(store: memory).migrate(plan, from: P.legacyDefaults())
        let attributes = try #require(try Keychain(store: memory).attributes(for: P.token))
        #expect(attributes.accessibility == .afterFirstUnlockThisDeviceOnly && attributes.label == "Token")
    }
}
