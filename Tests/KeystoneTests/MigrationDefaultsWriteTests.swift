import Foundation
import KeychainEngine
import Keystone
import KeystoneMigrations
import KeystoneTesting
import Testing

/// The defaults write of a migration: copy everything first, then one write, which a crash may empty (Linux's
/// UserDefaults rewrites its plist in place).
@Suite("Defaults migration: the one defaults write")
struct MigrationDefaultsWriteTests {
    typealias P = DefaultsPlan
    static let steps: [(String, any KeychainItem)] = [("auth_token", P.token), ("refresh_blob", P.refresh), ("smtp_password", P.smtp)]

    @Test("A crash inside any defaults write of a run (the file left empty) loses no secret; the rerun moves them all and records the version",
          arguments: 1...5)
    func crashInsideSynchronize(write: Int) throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        let defaults = P.legacyDefaults()
        defaults.crashInsideSynchronize = write
        _ = try? keychain.migrate(P.plan, from: defaults)
        defaults.simulateCrash()
        for (key, item) in Self.steps {
            let copies = try P.copies(memory, item) + (defaults.values[key] == nil ? 0 : 1)
            #expect(copies >= 1, "\(key) has no copy after a crash inside write \(write)")
        }

        let report = try keychain.migrate(P.plan, from: defaults)
        #expect(report.finalVersion == 2)
        #expect(try keychain.string(for: P.token) == P.tokenText)
        #expect(try keychain.data(for: P.refresh) == P.refreshData)
        #expect(try keychain.string(for: P.smtp) == P.smtpText)
        #expect(defaults.persisted["migration_version"] as? Int == 2)
    }

    @Test("A run writes the defaults once, after every secret of every pending version is in the keychain")
    func oneWriteAfterEveryCopy() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        let defaults = P.legacyDefaults()
        var phases: [MigrationCheckpoint.Phase] = []
        try keychain.migrate(P.plan, from: defaults) { checkpoint in
            phases.append(checkpoint.phase)
            if checkpoint.phase == .removedFromDefaults || checkpoint.phase == .versionRecorded {
                // Nothing written yet, and every secret already in the keychain.
                #expect(defaults.synchronizeCount == 0)
                var copies: [Int] = []
                for (_, item) in Self.steps { copies.append(try P.copies(memory, item)) }
                #expect(copies == [1, 1, 1])
            }
        }
        #expect(defaults.synchronizeCount == 1)
        let firstRemoval = try #require(phases.firstIndex(of: .removedFromDefaults))
        #expect(!phases[firstRemoval...].contains(.willStart) && !phases[firstRemoval...].contains(.verified))
        #expect(phases.suffix(2) == [.versionRecorded, .synchronized])
        #expect(phases.count == DefaultsPlan.checkpoints.count && phases.count == 14)
    }

    @Test("A failure in a later version's copy writes nothing to the defaults: the versions copied before it keep their values, none is recorded")
    func failureInLaterVersion() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        let defaults = P.legacyDefaults()
        memory.injectFailure(Status.interactionNotAllowed, on: .add, .onCall(3))
        let error = try #require(throws: KeychainError.self) { try keychain.migrate(P.plan, from: defaults) }
        #expect(error == .interactionNotAllowed && error.reason.contains("smtp_password"))
        #expect(defaults.synchronizeCount == 0)
        #expect(defaults.values["auth_token"] as? String == P.tokenText && defaults.values["refresh_blob"] as? Data == P.refreshData)
        #expect(defaults.values["migration_version"] == nil)
    }

    @Test("A defaults value changed while the run copied it is not removed: the run stops with nothing removed and no version recorded")
    func valueChangedDuringRun() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        let defaults = P.legacyDefaults()
        let error = try #require(throws: KeychainError.self) {
            try keychain.migrate(P.plan, from: defaults) { checkpoint in
                // Another thread of the app writes a new token once the old one was copied.
                if checkpoint.defaultsKey == "smtp_password" && checkpoint.phase == .verified { defaults.set("rotated", forKey: "auth_token") }
            }
        }
        #expect(error == .unexpectedResult && error.reason.contains("auth_token"))
        #expect(!error.description.contains("rotated") && !error.description.contains(secretText))
        #expect(defaults.values["auth_token"] as? String == "rotated" && defaults.synchronizeCount == 0)
        #expect(defaults.values["smtp_password"] as? String == P.smtpText && defaults.values["migration_version"] == nil)
    }

    @Test("A key that gained a value while the run ran is not skipped: nothing is recorded")
    func keyGainedValueDuringRun() throws {
        let memory = InMemoryKeychain()
        let defaults = InMemoryDefaults(["auth_token": P.tokenText])
        #expect(throws: KeychainError.unexpectedResult) {
            try Keychain(store: memory).migrate(P.plan, from: defaults) { checkpoint in
                if checkpoint.defaultsKey == "smtp_password" && checkpoint.phase == .willStart { defaults.set(Data([1]), forKey: "refresh_blob") }
            }
        }
        #expect(defaults.values["refresh_blob"] as? Data == Data([1]) && defaults.values["migration_version"] == nil)
    }
}
