#if NIO
import Configuration
import Foundation
import KeychainEngine
import Keystone

/// What went wrong when ``KeystoneConfigProvider`` read a keychain, or when ``KeystoneSecretsService`` unlocked it.
///
/// A missing item is not an error (swift-configuration then asks the next provider). Every other outcome is one of
/// these codes, with the keychain's name (a file path, an etcd URL: never credentials) and the fix in ``message``.
///
/// - Important: No message, description or log line of this module holds a secret's bytes: an item that cannot be
///   read as the asked type is named by its configuration key and the type only.
public struct KeystoneConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The outcome.
    public enum Code: String, Sendable, Hashable {
        /// The keychain is locked (or was never unlocked for this provider, or its values were discarded): no value
        /// is served. The fix: unlock it (``KeystoneSecretsService``, `keystone unlock-keychain`) and reload.
        case locked
        /// The keychain's storage does not answer: an etcd cluster without a quorum, a keychain file held busy by
        /// another process. Status `errSecNotAvailable`.
        case unavailable
        /// An item cannot be decrypted or decoded (edited into garbage, sealed with other keys). Status `errSecDecode`.
        case damaged
        /// An item's bytes are not a value of the asked type (not UTF-8, not an integer, …).
        case notConvertible
        /// The password the password source gave does not open the keychain. Status `errSecAuthFailed`.
        case invalidPassword
        /// The password source has nothing to give (no `$CREDENTIALS_DIRECTORY`, no such file, closed standard input).
        case passwordSourceUnavailable
        /// Any other keychain failure, with its status.
        case keychain
    }

    /// The outcome.
    public let code: Code
    /// The keychain, as ``KeystoneConfigProvider`` names it (a file path, an etcd URL without credentials).
    public let keychain: String
    /// The configuration key the failure is about, when there is one (never a value).
    public let key: String?
    /// The `OSStatus` the keychain returned, when it returned one.
    public let status: Int32?
    /// What happened and what to do, for a person.
    public let message: String

    /// An error; `message` must hold no secret.
    public init(_ code: Code, keychain: String, key: String? = nil, status: Int32? = nil, message: String) {
        self.code = code
        self.keychain = keychain
        self.key = key
        self.status = status
        self.message = message
    }

    public var description: String {
        var text = "KeystoneConfiguration (\(code.rawValue)"
        if let status { text += ", OSStatus \(status)" }
        text += "): \(message)"
        return text
    }

    /// Same code, keychain and key (the message may word the same outcome differently).
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.code == rhs.code && lhs.keychain == rhs.keychain && lhs.key == rhs.key
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(keychain)
        hasher.combine(key)
    }

    /// The same error about `key`.
    func about(key: String) -> Self { Self(code, keychain: keychain, key: key, status: status, message: message) }

    /// A keychain failure classified by its status.
    ///
    /// Decision: the status decides the code, never the reason's text (storages word their reasons differently);
    /// the storage's reason is kept (storages keep secrets out of their reasons), prefixed with what to do.
    static func classify(_ error: any Error, keychain: String, key: String? = nil, while action: String) -> Self {
        if let error = error as? KeystoneConfigurationError { return error }
        let status: Int32?
        let reason: String
        if let engine = error as? EngineError {
            status = engine.status
            reason = engine.reason
        } else if let typed = error as? KeychainError {
            status = typed.status
            reason = typed.reason
        } else {
            status = nil
            reason = String(describing: type(of: error))
        }
        let detail = reason.isEmpty ? "" : " (\(reason))"
        switch status {
        case Status.interactionNotAllowed?:
            return Self(.locked, keychain: keychain, key: key, status: status,
                        message: "the keychain \(keychain) is locked\(detail) while \(action): unlock it (KeystoneSecretsService with a password source, or `keystone unlock-keychain`) and reload the provider")
        case Status.notAvailable?:
            return Self(.unavailable, keychain: keychain, key: key, status: status,
                        message: "the keychain \(keychain) did not answer\(detail) while \(action): for etcd, bring a quorum of members back; for a file, see which process holds it busy; then reload")
        case Status.decode?, Status.invalidKeychain?, Status.invalidItemRef?:
            return Self(.damaged, keychain: keychain, key: key, status: status,
                        message: "an item of the keychain \(keychain) is damaged\(detail) while \(action): store the value again (`keystone add-generic-password -U …`)")
        case Status.authFailed?:
            return Self(.invalidPassword, keychain: keychain, key: key, status: status,
                        message: "the password does not open the keychain \(keychain)\(detail): check the password source")
        default:
            return Self(.keychain, keychain: keychain, key: key, status: status,
                        message: "the keychain \(keychain) failed\(detail) while \(action)")
        }
    }
}
#endif
