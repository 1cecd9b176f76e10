import Foundation
import Keystone

/// A point of a ``DefaultsMigration`` run, given to the run's checkpoint observer.
///
/// Tests stop the run at each of them (throw from the observer, or end the process) to prove that a crash there
/// loses nothing. A run passes them in two phases:
///
/// 1. **Copy**, step by step through every pending version: ``Phase/willStart``, ``Phase/keychainHoldsValue``,
///    ``Phase/verified``. A step whose defaults hold no value passes only ``Phase/willStart``. Nothing is written
///    to the defaults in this phase.
/// 2. **Commit**, once every pending secret is in the keychain: ``Phase/removedFromDefaults`` for each step that
///    held a value (in memory), ``Phase/versionRecorded`` (in memory), then the one defaults write and
///    ``Phase/synchronized``. A crash inside that write can empty the defaults file (on Linux it is rewritten in
///    place), which loses no secret: they are all in the keychain by then.
public struct MigrationCheckpoint: Sendable, Hashable, CustomStringConvertible {
    /// Where in a step (or in the commit) the run is.
    public enum Phase: String, Sendable, Hashable, CaseIterable {
        /// Before the step reads the legacy value.
        case willStart
        /// The keychain holds a value for the item: added just now, or there already (kept).
        case keychainHoldsValue
        /// The keychain's value was verified. The defaults are untouched.
        case verified
        /// Commit: the legacy value was removed from the defaults in memory (not yet written). Every pending
        /// secret is in the keychain.
        case removedFromDefaults
        /// Commit: the latest pending version was set in the defaults in memory, with the removals; the next thing
        /// is the one defaults write (`synchronize()`). ``MigrationCheckpoint/defaultsKey`` is nil.
        case versionRecorded
        /// Commit: the defaults were written (removals and version). ``MigrationCheckpoint/defaultsKey`` is nil.
        case synchronized
    }

    /// The version of the step; for ``Phase/versionRecorded`` and ``Phase/synchronized``, the version recorded.
    public let version: Int
    /// The step's defaults key; nil for ``Phase/versionRecorded`` and ``Phase/synchronized``.
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
