import Foundation
import Keystone

// Running a DefaultsMigration: copy every pending secret into the keychain first, then one defaults write.
//
// Why one write: swift-corelibs-foundation's `UserDefaults.synchronize()` rewrites the plist in place (open with
// O_TRUNC, write, fsync). A process killed inside it leaves an empty (or partial) file: every value of the suite is
// gone, the migration's and the app's own. A migration that removed one key and synchronized per step therefore
// opened one such window per step while the later secrets were still only in the defaults. Copying every pending
// secret (and verifying it) before the first write means that whatever a kill inside that write destroys is already
// in the keychain.

extension Keychain {
    /// Runs the versions of `migration` above the one recorded in `defaults`: copies and verifies every pending
    /// secret into its keychain item (see ``DefaultsMigration`` for the rules), then removes them from the defaults
    /// and records the latest version in one defaults write (one `synchronize()`).
    ///
    /// Idempotent: after a success a second run does nothing; after a crash or an error a second run finishes the
    /// job. Steps whose defaults were already emptied report ``DefaultsMigrationReport/Outcome/alreadyInKeychain``;
    /// steps copied by an interrupted run whose defaults still hold the value report
    /// ``DefaultsMigrationReport/Outcome/keptKeychainValue`` (the keychain's copy is kept, the legacy one removed).
    ///
    /// - Parameters:
    ///   - migration: the plan.
    ///   - defaults: where the legacy values and the version are (`UserDefaults.standard`, a suite).
    ///   - checkpoint: called at every ``MigrationCheckpoint``, for tests that end the run there; what it throws
    ///     ends the run and is rethrown as is.
    /// - Returns: what each step of the pending versions did.
    /// - Throws: `KeychainError` naming the version and the step (never a value) with the status of what
    ///   failed: `errSecInteractionNotAllowed` (-25308, locked: run again after the unlock),
    ///   `errSecMissingEntitlement` (-34018), `KeychainError.encodingFailed` (the legacy value is neither `Data`
    ///   nor `String`), `KeychainError.unexpectedResult` (the value did not read back, or a defaults value changed
    ///   while the run copied it), `errSecIO` (-36, the defaults could not be synchronized),
    ///   `KeychainError.invalidItem` (a malformed plan, before anything runs), `KeychainError.decodingFailed`
    ///   (the recorded version is not an integer). Any failure before the defaults write leaves the defaults
    ///   exactly as they were: every value stays, no version is recorded (what was copied stays in the keychain).
    /// - Important: A locked keychain is never taken as "the item is absent": the run stops and nothing is removed
    ///   from the defaults.
    /// - Important: On Linux `UserDefaults` rewrites its whole file in place when it synchronizes: a process killed
    ///   during any `synchronize()` (this migration's, or the app's own at any other time) can leave the suite
    ///   empty, unrelated keys included. This migration synchronizes once, after every secret it removes is in the
    ///   keychain, so such a kill loses none of them; it cannot protect values the app keeps in the defaults.
    @discardableResult
    public func migrate(_ migration: DefaultsMigration, from defaults: some LegacyDefaultsStore,
                        checkpoint: (MigrationCheckpoint) throws -> Void = { _ in }) throws -> DefaultsMigrationReport {
        try migration.validate()
        let start = try migration.recordedVersion(in: defaults)
        let pending = migration.versions.filter { $0.number > start }
        guard let latest = pending.last?.number else {
            return DefaultsMigrationReport(startVersion: start, finalVersion: start, entries: [])
        }

        // 1. Copy: every pending secret into the keychain, verified. Nothing is written to the defaults.
        //
        // Decision: a failure here writes nothing to the defaults, not even the removals of versions copied whole
        // before the failing one. Their write would be a synchronize, which can empty the file; the failing
        // version's secrets (and the later ones) are still only in the defaults. The rerun finishes the job.
        var copied: [(version: Int, step: DefaultsMigration.Step, outcome: DefaultsMigrationReport.Outcome, legacy: Data?)] = []
        for version in pending {
            for step in version.steps {
                let (outcome, legacy) = try copyLegacyValue(step, version: version.number, from: defaults, checkpoint: checkpoint)
                copied.append((version.number, step, outcome, legacy))
            }
        }

        // 2. Check that the defaults still hold what was copied: a value written meanwhile (by another thread of the
        //    app) is not in the keychain and must not be removed; a key that gained a value must not be skipped by
        //    recording its version.
        for entry in copied {
            let now: Data?
            do {
                now = try defaults.legacySecret(forKey: entry.step.defaultsKey)
            } catch {
                now = nil
            }
            guard now == entry.legacy, (now == nil) == (defaults.object(forKey: entry.step.defaultsKey) == nil) else {
                throw KeychainError(code: .unexpectedResult,
                                    reason: "defaults migration version \(entry.version), step \(entry.step): the defaults value changed while the "
                                    + "migration ran; nothing was removed from the defaults and no version recorded: run the migration again")
            }
        }

        // 3. One defaults write: the removals and the latest version, then one synchronize.
        for entry in copied where entry.legacy != nil {
            defaults.removeObject(forKey: entry.step.defaultsKey)
            try checkpoint(MigrationCheckpoint(version: entry.version, defaultsKey: entry.step.defaultsKey, phase: .removedFromDefaults))
        }
        defaults.set(latest, forKey: migration.versionKey)
        try checkpoint(MigrationCheckpoint(version: latest, defaultsKey: nil, phase: .versionRecorded))
        guard defaults.synchronize() else {
            throw KeychainError(status: Status.io, reason: "defaults migration to version \(latest): the defaults could not be written; "
                                + "every secret of it is in the keychain; run the migration again")
        }
        try checkpoint(MigrationCheckpoint(version: latest, defaultsKey: nil, phase: .synchronized))
        let entries = copied.map { DefaultsMigrationReport.Entry(version: $0.version, defaultsKey: $0.step.defaultsKey, item: $0.step.item, outcome: $0.outcome) }
        return DefaultsMigrationReport(startVersion: start, finalVersion: latest, entries: entries)
    }

    /// Moves a secret kept in a plain key-value store (`UserDefaults`, a dictionary) into the keychain: one step
    /// of a ``DefaultsMigration``, without a version.
    ///
    /// When the keychain already holds `item`, its value wins: it is kept (never overwritten) and the legacy value
    /// is removed. Otherwise the value is added (a `String` as UTF-8, `Data` as is), read back, and removed from
    /// `source` only when it reads back equal. A `UserDefaults` source is not synchronized here (use
    /// ``DefaultsMigration`` for that, or synchronize once after moving every value).
    ///
    /// - Returns: whether `source` held a value, now removed because the keychain holds the item (false when
    ///   `source` had nothing under `key`).
    /// - Throws: `KeychainError` from the keychain (`errSecInteractionNotAllowed` when locked, the source is left
    ///   untouched then); `KeychainError.encodingFailed` when the value is neither `Data` nor `String`;
    ///   `KeychainError.unexpectedResult` when it did not read back equal (the source is kept).
    /// - Important: On Linux a `UserDefaults` synchronize rewrites the file in place: synchronize once, after every
    ///   value you remove is in the keychain, never between two moves.
    @discardableResult
    public func migrateValue(forKey key: String, from source: some LegacyValueSource, to item: some KeychainItem) throws -> Bool {
        let step = DefaultsMigration.Step(moving: key, to: item)
        let (outcome, legacy) = try copyLegacyValue(step, version: 0, from: source, checkpoint: { _ in })
        guard legacy != nil else { return false }
        source.removeObject(forKey: key)
        switch outcome {
        case .moved, .keptKeychainValue: return true
        case .alreadyInKeychain, .absent: return false
        }
    }

    /// One step's copy: read, add unless present (the keychain wins), verify. Removes nothing.
    ///
    /// - Returns: the outcome and the legacy bytes read (nil when the defaults held nothing).
    func copyLegacyValue(_ step: DefaultsMigration.Step, version: Int, from source: some LegacyValueSource,
                         checkpoint: (MigrationCheckpoint) throws -> Void) throws -> (DefaultsMigrationReport.Outcome, Data?) {
        func mark(_ phase: MigrationCheckpoint.Phase) throws {
            try checkpoint(MigrationCheckpoint(version: version, defaultsKey: step.defaultsKey, phase: phase))
        }
        /// Runs a keychain call; its error names the step (never a value) and keeps the status.
        func named<T>(_ body: () throws -> T) throws(KeychainError) -> T {
            do {
                return try body()
            } catch {
                let error = KeychainError(converting: error)
                let prefix = version > 0 ? "defaults migration version \(version), step \(step)" : "migrating \(step)"
                throw KeychainError(code: error.code, reason: "\(prefix): \(error.reason.isEmpty ? error.message : error.reason)"
                                    + "; its value was left in the defaults")
            }
        }
        let keychain: Keychain = {
            var keychain = self
            if let options = step.options { keychain.options = options }
            return keychain
        }()

        try mark(.willStart)
        let legacy = try named { try source.legacySecret(forKey: step.defaultsKey) }
        guard let legacy else {
            // Nothing in the defaults: an earlier run moved it, or there never was one. Attributes only (no
            // prompt); a locked item throws: never reported as absent.
            return (try named { try keychain.exists(step.item) } ? .alreadyInKeychain : .absent, nil)
        }

        let outcome: DefaultsMigrationReport.Outcome
        if try named({ try keychain.exists(step.item) }) {
            // Decision: the keychain's value wins. The app has been writing the keychain since it shipped the
            // keychain code; the defaults' copy can only be older. Never overwrite it.
            outcome = .keptKeychainValue
        } else {
            // Add, never add-or-update: an item that appeared since the check (another process) wins too.
            let attributes = keychain.saveQueries(legacy, for: step.item, keychain.options.saveOptions).add
            let added: Bool = try named {
                do {
                    _ = try keychain.store.add(attributes)
                    return true
                } catch let error where KeychainError.duplicateItem ~= error {
                    return false
                }
            }
            outcome = added ? .moved : .keptKeychainValue
        }
        try mark(.keychainHoldsValue)

        // Verify before anything is removed: the secret itself when we added it (unless reading would prompt),
        // else that the item is there.
        if outcome == .moved && keychain.options.accessControl == nil {
            guard try named({ try keychain.data(for: step.item) }) == legacy else {
                throw KeychainError(code: .unexpectedResult, reason: "migrating \(step): the keychain's value did not read back equal; "
                                    + "its value was left in the defaults")
            }
        } else if !(try named { try keychain.exists(step.item) }) {
            throw KeychainError(code: .unexpectedResult, reason: "migrating \(step): the item is not in the keychain after the add; "
                                + "its value was left in the defaults")
        }
        try mark(.verified)
        return (outcome, legacy)
    }
}
