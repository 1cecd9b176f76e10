import Foundation

/// A versioned, idempotent plan moving secrets out of `UserDefaults` (or any ``LegacyDefaultsStore``) into
/// typed keychain items.
///
/// The defaults record the last version done under ``versionKey``. Running the plan
/// (`Keychain.migrate(_:from:checkpoint:)`) runs each version above it, in order, and for each of its steps:
///
/// 1. reads the legacy value (`Data` as is, `String` as UTF-8);
/// 2. adds it to the keychain, unless the keychain already holds the item: **the keychain's value wins**
///    (it is the newer one: the app has been writing there since), and is never overwritten;
/// 3. verifies: reads the secret back (equal bytes), or checks the item exists when the keychain's value was kept
///    or the item has an access control (reading would prompt);
/// 4. removes the legacy value from the defaults, and synchronizes them.
///
/// After the last step of a version it records the version and synchronizes. Running it again after a success
/// does nothing. A crash between any two of these steps never loses the secret (it is in the defaults, the
/// keychain, or both) and the next run finishes the job.
///
/// ```swift
/// let migration = DefaultsMigration(versions: [
///     .init(1, steps: [.init(moving: "auth_token", to: try GenericPassword(service: "com.example.api", account: "token"))]),
///     .init(2, steps: [.init(moving: "smtp_password", to: try InternetPassword(server: "mail.example.com", account: "alice"))]),
/// ])
/// let report = try Keychain().migrate(migration, from: UserDefaults.standard)
/// ```
///
/// - Important: Run it when protected data is available (after the first unlock: `isProtectedDataAvailable`):
///   an app launched before the first unlock (iOS prewarming) may read its defaults as empty. A locked keychain
///   stops the run with `errSecInteractionNotAllowed` and nothing recorded.
public struct DefaultsMigration: Sendable {
    /// One secret to move: a defaults key to a keychain item.
    public struct Step: Sendable, CustomStringConvertible {
        /// The defaults key holding the legacy value.
        public let defaultsKey: String
        /// Where the secret goes.
        public let item: any KeychainItem
        /// How the item is stored (accessibility, access group…); nil for the keychain's ``Keychain/options``.
        public let options: ItemOptions?

        /// Moves the value under `defaultsKey` to `item`.
        ///
        /// - Parameters:
        ///   - defaultsKey: the defaults key; must not be empty.
        ///   - item: the keychain item the secret goes to.
        ///   - options: how the item is stored; nil for the keychain's options.
        public init(moving defaultsKey: String, to item: some KeychainItem, options: ItemOptions? = nil) {
            self.defaultsKey = defaultsKey
            self.item = item
            self.options = options
        }

        /// `'key' → genp service=… account=…`: names only, never a value.
        public var description: String { "'\(defaultsKey)' → \(item)" }
    }

    /// The steps of one version, run together; the version is recorded once they all succeeded.
    public struct Version: Sendable {
        /// The version number (positive; versions run in increasing order).
        public let number: Int
        /// The steps, in order.
        public let steps: [Step]

        /// A version and its steps.
        public init(_ number: Int, steps: [Step]) {
            self.number = number
            self.steps = steps
        }
    }

    /// The default defaults key of the version: `"com.keystone.defaultsMigrationVersion"`.
    public static let defaultVersionKey = "com.keystone.defaultsMigrationVersion"

    /// The defaults key holding the last version done (an integer; absent means 0).
    public let versionKey: String
    /// The versions, in increasing order.
    public let versions: [Version]

    /// A plan.
    ///
    /// - Parameters:
    ///   - versionKey: the defaults key the version is kept under.
    ///   - versions: the versions, numbered 1, 2, … (gaps allowed), in increasing order. The plan is checked when it
    ///     runs: see `Keychain.migrate(_:from:checkpoint:)`.
    public init(versionKey: String = DefaultsMigration.defaultVersionKey, versions: [Version]) {
        self.versionKey = versionKey
        self.versions = versions
    }

    /// The highest version of the plan (0 for an empty plan).
    public var latestVersion: Int { versions.last?.number ?? 0 }

    /// Checks the plan: a non-empty version key, positive increasing version numbers, non-empty defaults keys,
    /// none of them the version key and none moved twice.
    func validate() throws(KeychainError) {
        guard !versionKey.isEmpty else { throw KeychainError(code: .invalidItem, reason: "the migration's version key must not be empty") }
        var previous = 0
        var keys: Set<String> = []
        for version in versions {
            guard version.number > previous else {
                throw KeychainError(code: .invalidItem, reason: "migration versions must be positive and increasing (\(version.number) after \(previous))")
            }
            previous = version.number
            for step in version.steps {
                guard !step.defaultsKey.isEmpty, step.defaultsKey != versionKey else {
                    throw KeychainError(code: .invalidItem, reason: "version \(version.number): a step's defaults key must be non-empty and not the version key")
                }
                guard keys.insert(step.defaultsKey).inserted else {
                    throw KeychainError(code: .invalidItem, reason: "the defaults key '\(step.defaultsKey)' is moved by two steps")
                }
            }
        }
    }

    /// The version recorded in `defaults`: 0 when absent.
    ///
    /// - Throws: ``KeychainError/decodingFailed`` when the value is not an integer. Decision: a version that cannot
    ///   be read is not guessed (reading it as 0 would rerun every version; reading it as the latest would skip
    ///   them): the app fixes or removes it.
    func recordedVersion(in defaults: some LegacyValueSource) throws(KeychainError) -> Int {
        guard let value = defaults.object(forKey: versionKey) else { return 0 }
        if let number = value as? Int { return number }
        if let number = value as? NSNumber { return number.intValue }
        if let text = value as? String, let number = Int(text) { return number }
        throw KeychainError(code: .decodingFailed,
                            reason: "the migration version under '\(versionKey)' is a \(type(of: value)), not an integer: fix or remove it")
    }
}

/// A point between two steps of a ``DefaultsMigration`` run, given to the run's checkpoint observer.
///
/// Tests stop the run at each of them (throw from the observer, or end the process) to prove that a crash there
/// loses nothing. A step passes its checkpoints in the order of ``Phase``; a step whose defaults hold no value
/// passes only ``Phase/willStart``.
public struct MigrationCheckpoint: Sendable, Hashable, CustomStringConvertible {
    /// Where in a step (or a version) the run is.
    public enum Phase: String, Sendable, Hashable, CaseIterable {
        /// Before the step reads the legacy value.
        case willStart
        /// The keychain holds a value for the item: added just now, or there already (kept).
        case keychainHoldsValue
        /// The keychain's value was verified.
        case verified
        /// The legacy value was removed from the defaults (not yet synchronized).
        case removedFromDefaults
        /// The defaults were synchronized after the removal.
        case synchronized
        /// The version was recorded in the defaults and synchronized.
        case versionRecorded
    }

    /// The version being run.
    public let version: Int
    /// The step's defaults key; nil for ``Phase/versionRecorded``.
    public let defaultsKey: String?
    /// Where the run is.
    public let phase: Phase

    /// A checkpoint.
    public init(version: Int, defaultsKey: String?, phase: Phase) {
        self.version = version
        self.defaultsKey = defaultsKey
        self.phase = phase
    }

    /// `v1 auth_token willStart`.
    public var description: String { "v\(version) \(defaultsKey ?? "-") \(phase.rawValue)" }
}

/// What a ``DefaultsMigration`` run did, step by step. Holds names only, never a secret.
public struct DefaultsMigrationReport: Sendable, CustomStringConvertible {
    /// What happened to one step's secret.
    public enum Outcome: String, Sendable, Hashable, CaseIterable {
        /// Added to the keychain from the defaults, verified, removed from the defaults.
        case moved
        /// Both held a value: the keychain's was kept (never overwritten), the legacy one removed.
        case keptKeychainValue
        /// The defaults held nothing and the keychain holds the item (an earlier run moved it).
        case alreadyInKeychain
        /// Neither the defaults nor the keychain held anything.
        case absent
    }

    /// One step's outcome.
    public struct Entry: Sendable, CustomStringConvertible {
        /// The version the step belongs to.
        public let version: Int
        /// The step's defaults key.
        public let defaultsKey: String
        /// The step's keychain item.
        public let item: any KeychainItem
        /// What happened.
        public let outcome: Outcome

        /// `v1 'auth_token' → genp …: moved`.
        public var description: String { "v\(version) '\(defaultsKey)' → \(item): \(outcome.rawValue)" }
    }

    /// The version recorded before the run.
    public let startVersion: Int
    /// The version recorded after the run.
    public let finalVersion: Int
    /// The steps run, in order (empty when nothing was pending).
    public let entries: [Entry]

    /// The defaults keys whose steps ended with `outcome`.
    public func keys(_ outcome: Outcome) -> [String] { entries.filter { $0.outcome == outcome }.map(\.defaultsKey) }

    /// Whether any version was pending.
    public var ranAnything: Bool { finalVersion != startVersion }

    /// One line per step, names only.
    public var description: String {
        (["defaults migration \(startVersion) → \(finalVersion)"] + entries.map(\.description)).joined(separator: "\n")
    }
}

extension Keychain {
    /// Runs the versions of `migration` above the one recorded in `defaults`: each step moves a legacy value into
    /// its keychain item (see ``DefaultsMigration`` for the rules), then the version is recorded.
    ///
    /// Idempotent: after a success a second run does nothing; after a crash or an error a second run finishes the
    /// job (steps done already report ``DefaultsMigrationReport/Outcome/alreadyInKeychain``).
    ///
    /// - Parameters:
    ///   - migration: the plan.
    ///   - defaults: where the legacy values and the version are (`UserDefaults.standard`, a suite).
    ///   - checkpoint: called at every step boundary (``MigrationCheckpoint``), for tests that end the run there;
    ///     what it throws ends the run and is rethrown as is.
    /// - Returns: what each step of the pending versions did.
    /// - Throws: ``KeychainError`` naming the version and the step (never a value) with the status of what
    ///   failed: `errSecInteractionNotAllowed` (-25308, locked: run again after the unlock),
    ///   `errSecMissingEntitlement` (-34018), ``KeychainError/encodingFailed`` (the legacy value is neither `Data`
    ///   nor `String`), ``KeychainError/unexpectedResult`` (the value did not read back), `errSecIO` (-36, the
    ///   defaults could not be synchronized), ``KeychainError/invalidItem`` (a malformed plan, before anything
    ///   runs), ``KeychainError/decodingFailed`` (the recorded version is not an integer). The failing step and
    ///   every later one leave their legacy values in the defaults, and the version is not recorded.
    /// - Important: A locked keychain is never taken as "the item is absent": the run stops and nothing of the
    ///   unfinished steps is removed from the defaults.
    @discardableResult
    public func migrate(_ migration: DefaultsMigration, from defaults: some LegacyDefaultsStore,
                        checkpoint: (MigrationCheckpoint) throws -> Void = { _ in }) throws -> DefaultsMigrationReport {
        try migration.validate()
        let start = try migration.recordedVersion(in: defaults)
        var recorded = start
        var entries: [DefaultsMigrationReport.Entry] = []
        for version in migration.versions where version.number > recorded {
            for step in version.steps {
                let outcome = try moveLegacyValue(step, version: version.number, from: defaults,
                                                  synchronize: { defaults.synchronize() }, checkpoint: checkpoint)
                entries.append(.init(version: version.number, defaultsKey: step.defaultsKey, item: step.item, outcome: outcome))
            }
            defaults.set(version.number, forKey: migration.versionKey)
            guard defaults.synchronize() else {
                throw KeychainError(status: Status.io, reason: "defaults migration version \(version.number): the version could not be "
                                    + "written to the defaults; every secret of it is in the keychain; run the migration again")
            }
            recorded = version.number
            try checkpoint(MigrationCheckpoint(version: version.number, defaultsKey: nil, phase: .versionRecorded))
        }
        return DefaultsMigrationReport(startVersion: start, finalVersion: recorded, entries: entries)
    }

    /// Moves a secret kept in a plain key-value store (`UserDefaults`, a dictionary) into the keychain: one step
    /// of a ``DefaultsMigration``, without a version.
    ///
    /// When the keychain already holds `item`, its value wins: it is kept (never overwritten) and the legacy value
    /// is removed. Otherwise the value is added (a `String` as UTF-8, `Data` as is), read back, and removed from
    /// `source` only when it reads back equal. A `UserDefaults` source is not synchronized here (use
    /// ``DefaultsMigration`` for that).
    ///
    /// - Returns: whether `source` held a value, now removed because the keychain holds the item (false when
    ///   `source` had nothing under `key`).
    /// - Throws: ``KeychainError`` from the keychain (`errSecInteractionNotAllowed` when locked, the source is left
    ///   untouched then); ``KeychainError/encodingFailed`` when the value is neither `Data` nor `String`;
    ///   ``KeychainError/unexpectedResult`` when it did not read back equal (the source is kept).
    @discardableResult
    public func migrateValue(forKey key: String, from source: some LegacyValueSource, to item: some KeychainItem) throws -> Bool {
        let step = DefaultsMigration.Step(moving: key, to: item)
        switch try moveLegacyValue(step, version: 0, from: source, synchronize: nil, checkpoint: { _ in }) {
        case .moved, .keptKeychainValue: return true
        case .alreadyInKeychain, .absent: return false
        }
    }

    /// One step: read, add unless present (the keychain wins), verify, remove, synchronize.
    func moveLegacyValue(_ step: DefaultsMigration.Step, version: Int, from source: some LegacyValueSource,
                         synchronize: (() -> Bool)?,
                         checkpoint: (MigrationCheckpoint) throws -> Void) throws -> DefaultsMigrationReport.Outcome {
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
            return try named { try keychain.exists(step.item) } ? .alreadyInKeychain : .absent
        }

        let outcome: DefaultsMigrationReport.Outcome
        if try named({ try keychain.exists(step.item) }) {
            // Decision: the keychain's value wins. The app has been writing the keychain since it shipped the
            // keychain code; the defaults' copy can only be older. Never overwrite it.
            outcome = .keptKeychainValue
        } else {
            // Add, never add-or-update: an item that appeared since the check (another process) wins too.
            let attributes = keychain.saveQueries(legacy, for: step.item, keychain.options).add
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

        // Verify before removing anything: the secret itself when we added it (unless reading would prompt),
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

        source.removeObject(forKey: step.defaultsKey)
        try mark(.removedFromDefaults)
        if let synchronize {
            guard synchronize() else {
                throw KeychainError(status: Status.io, reason: "defaults migration version \(version), step \(step): the defaults could "
                                    + "not be synchronized after the removal; the secret is in the keychain; run the migration again")
            }
            try mark(.synchronized)
        }
        return outcome
    }
}
