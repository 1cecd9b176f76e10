import Foundation
import Keystone

/// The install marker as a `UserDefaults` key: opt-in, with a caveat.
///
/// - Important: Before the first unlock (an iOS app prewarmed at boot) `UserDefaults` can read as empty: the
///   marker then looks absent and the app's keychain items would be wiped. Use it only in an app that is never
///   launched before the first unlock (macOS, Linux), or prefer ``FileInstallMarker``. The defaults also
///   survive less than the keychain on some paths (a "reset settings" feature of the app). On Linux
///   (swift-corelibs-foundation) the marker is persisted by `synchronize()`, which ``writeMarker()`` calls, and
///   which rewrites the suite's file in place: a process killed during any synchronize of the suite can empty it,
///   marker included, and the next launch then wipes.
public struct UserDefaultsInstallMarker: InstallMarkerStore {
    /// The suite; nil for `UserDefaults.standard`.
    public let suiteName: String?
    /// The key.
    public let key: String

    /// A marker under `key` in the suite `suiteName` (nil for the standard defaults).
    public init(suiteName: String? = nil, key: String = "com.keystone.installMarker") {
        self.suiteName = suiteName
        self.key = key
    }

    private func defaults() throws(KeychainError) -> UserDefaults {
        guard let suiteName else { return .standard }
        guard let defaults = UserDefaults(suiteName: suiteName) else {
            throw KeychainError(code: .invalidItem, reason: "the defaults suite '\(suiteName)' cannot be opened")
        }
        return defaults
    }

    /// Whether the key holds a value.
    ///
    /// - Throws: `KeychainError.invalidItem` when the suite cannot be opened.
    public func markerExists() throws(KeychainError) -> Bool { try defaults().object(forKey: key) != nil }

    /// Checks that the suite opens. Decision: the defaults are not written to prove they can be (a probe would be
    /// one more synchronize, which on Linux rewrites the file in place); a failing ``writeMarker()`` defers.
    ///
    /// - Throws: `KeychainError.invalidItem` when the suite cannot be opened.
    public func checkWritable() throws(KeychainError) { _ = try defaults() }

    /// Sets the key and synchronizes.
    ///
    /// - Throws: `KeychainError` with `errSecIO` (-36) when the defaults could not be synchronized.
    public func writeMarker() throws(KeychainError) {
        let defaults = try defaults()
        defaults.set(true, forKey: key)
        guard defaults.synchronize() else { throw KeychainError(status: Status.io, reason: "the defaults could not be synchronized") }
    }
}
