import Foundation
import Keystone

/// A versioned, idempotent plan moving secrets out of `UserDefaults` (or any ``LegacyDefaultsStore``) into
/// typed keychain items.
///
/// The defaults record the last version done under ``versionKey``. Running the plan
/// (`Keychain.migrate(_:from:checkpoint:)`) takes every version above it, in two phases:
///
/// 1. **Copy**, for each step of each pending version, in order:
///    1. reads the legacy value (`Data` as is, `String` as UTF-8);
///    2. adds it to the keychain, unless the keychain already holds the item: **the keychain's value wins**
///       (it is the newer one: the app has been writing there since), and is never overwritten;
///    3. verifies: reads the secret back (equal bytes), or checks the item exists when the keychain's value was
///       kept or the item has an access control (reading would prompt).
///
///    Nothing is removed from the defaults yet. Any failure stops the run here with the defaults untouched.
/// 2. **Commit**, once every pending secret is in the keychain: checks the defaults still hold what was copied,
///    removes the moved keys, records the latest version, and writes the defaults **once** (one `synchronize()`).
///
/// Running it again after a success does nothing. A crash anywhere, inside the defaults write included, never
/// loses a secret (it is in the defaults, the keychain, or both) and the next run finishes the job.
///
/// - Important: On Linux (swift-corelibs-foundation) `UserDefaults.synchronize()` rewrites the suite's plist in
///   place (truncate, write, fsync): a process killed during any synchronize, the app's own included, can leave the
///   file empty and lose every value of the suite, unrelated keys too. That is why the migration writes the
///   defaults once, after the copies: the kill can then only take values already in the keychain. Keep secrets
///   out of the defaults on Linux.
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
        /// How the item is stored (accessibility, access group…); nil for the keychain's `Keychain.options`.
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
    /// - Throws: `KeychainError.decodingFailed` when the value is not an integer. Decision: a version that cannot
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
