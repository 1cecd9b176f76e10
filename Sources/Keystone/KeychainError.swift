import Foundation

/// The one error type Keystone throws: a keychain `OSStatus`, or a failure of Keystone's own around it.
///
/// Every keychain failure keeps Apple's `OSStatus` in ``status``. Failures that are not keychain statuses
/// (a secret that is not UTF-8, a value that does not decode, an item built wrong) have their own ``code``,
/// so one `catch` handles them all:
///
/// ```swift
/// do {
///     let token = try keychain.string(for: item)
/// } catch KeychainError.interactionNotAllowed {
///     // The device is locked: try again after the first unlock. Never delete the item.
/// } catch KeychainError.userCanceled {
///     // The user dismissed the prompt.
/// } catch let error as KeychainError where error.isTransient {
///     // Retry later.
/// }
/// ```
///
/// Two errors are equal when their codes are equal (for keychain statuses: when the `OSStatus` is the
/// same); the developer ``reason`` is not compared.
///
/// - Important: No description, message or reason of a `KeychainError` contains secret bytes.
public struct KeychainError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What failed: a keychain `OSStatus`, or one of Keystone's own failures.
    public enum Code: Sendable, Hashable {
        /// The keychain answered with this `OSStatus` (an `errSec…` code).
        case status(Int32)
        /// A stored secret is not valid UTF-8, or a string could not be encoded.
        case stringEncoding
        /// A stored secret could not be decoded as the requested `Decodable` type.
        case decodingFailed
        /// A value could not be encoded with the `Encoder` given.
        case encodingFailed
        /// An item description was built wrong (an empty service or server, a port out of range…).
        case invalidItem
        /// The store answered in a shape the operation did not ask for.
        case unexpectedResult
        /// The item holds something other than the requested key type (another CryptoKit key type, another curve
        /// or purpose, or a password), so it was neither read nor overwritten.
        case keyTypeMismatch
    }

    /// What failed.
    public let code: Code
    /// A developer explanation (which attribute, which rule). Never contains secret bytes.
    public let reason: String

    /// Creates an error for a keychain `OSStatus`.
    ///
    /// - Parameters:
    ///   - status: the `OSStatus` the keychain returned.
    ///   - reason: a developer explanation; never pass secret bytes.
    public init(status: Int32, reason: String = "") {
        self.code = .status(status)
        self.reason = reason
    }

    /// Creates an error with `code`.
    ///
    /// - Parameters:
    ///   - code: what failed.
    ///   - reason: a developer explanation; never pass secret bytes.
    public init(code: Code, reason: String = "") {
        self.code = code
        self.reason = reason
    }

    /// Converts an engine failure, keeping its status and reason.
    public init(_ error: EngineError) {
        self.init(status: error.status, reason: error.reason)
    }

    /// Converts any error a ``KeychainStore`` threw: a `KeychainError` stays as is, an `EngineError`
    /// keeps its status, anything else becomes `errSecInternalError` (-67671) naming the error's type only.
    public init(converting error: any Error) {
        switch error {
        case let error as KeychainError: self = error
        case let error as EngineError: self.init(error)
        default: self.init(status: Status.internalError, reason: "the store threw \(type(of: error))")
        }
    }

    /// The `OSStatus` of this error.
    ///
    /// For Keystone's own failures it is the nearest keychain status: `errSecDecode` (-26275) for
    /// ``Code/stringEncoding`` and ``Code/decodingFailed``, `errSecParam` (-50) for ``Code/encodingFailed``
    /// and ``Code/invalidItem``, `errSecInternalError` (-67671) for ``Code/unexpectedResult``, `errSecInvalidItemRef`
    /// (-25304) for ``Code/keyTypeMismatch``.
    public var status: Int32 {
        switch code {
        case .status(let status): return status
        case .stringEncoding, .decodingFailed: return Status.decode
        case .encodingFailed, .invalidItem: return Status.param
        case .unexpectedResult: return Status.internalError
        case .keyTypeMismatch: return Status.invalidItemRef
        }
    }

    /// The `errSec…` name of the status, such as `errSecItemNotFound`, or Keystone's code name.
    public var name: String {
        switch code {
        case .status(let status): return Status.name(for: status) ?? "OSStatus \(status)"
        case .stringEncoding: return "stringEncoding"
        case .decodingFailed: return "decodingFailed"
        case .encodingFailed: return "encodingFailed"
        case .invalidItem: return "invalidItem"
        case .unexpectedResult: return "unexpectedResult"
        case .keyTypeMismatch: return "keyTypeMismatch"
        }
    }

    /// Apple's message for the status (what `SecCopyErrorMessageString` returns), or Keystone's for its own codes.
    public var message: String {
        switch code {
        case .status(let status): return Status.message(for: status)
        case .stringEncoding: return "The stored value is not a valid UTF-8 string."
        case .decodingFailed: return "The stored value could not be decoded as the requested type."
        case .encodingFailed: return "The value could not be encoded for storage."
        case .invalidItem: return "The keychain item description is not valid."
        case .unexpectedResult: return "The keychain returned a result of an unexpected shape."
        case .keyTypeMismatch: return "The keychain item holds a different kind of key or secret than the one requested."
        }
    }

    /// Whether the failure is temporary: the item is intact and the same call can succeed later.
    ///
    /// True for `errSecInteractionNotAllowed` (-25308): the device or keychain is locked (or a prompt
    /// was not allowed). Wait for the unlock (`protectedDataDidBecomeAvailable` on iOS) and try again.
    ///
    /// - Important: Never delete or overwrite an item because reading it failed with a transient error:
    ///   the secret is still there and becomes readable after the unlock.
    public var isTransient: Bool {
        code == .status(Status.interactionNotAllowed)
    }

    /// Whether this is `errSecItemNotFound` (-25300).
    public var isNotFound: Bool { code == .status(Status.itemNotFound) }

    /// `KeychainError.errSecItemNotFound (-25300): <Apple's message> [reason]`. Never holds secret bytes.
    public var description: String {
        let numeric: String
        if case .status(let status) = code { numeric = " (\(status))" } else { numeric = "" }
        let base = "KeychainError.\(name)\(numeric): \(message)"
        return reason.isEmpty ? base : "\(base) [\(reason)]"
    }

    /// Equal when the codes are equal (the same `OSStatus`, or the same Keystone code); reasons are ignored.
    public static func == (lhs: KeychainError, rhs: KeychainError) -> Bool { lhs.code == rhs.code }
    /// Hashes the code only, consistently with `==`.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// Matches an error against a `KeychainError` pattern, so `catch KeychainError.itemNotFound` works.
    ///
    /// Matches a `KeychainError` with the same code, and an `EngineError` with the same status (when
    /// the pattern is a status), so raw engine calls can be caught the same way.
    public static func ~= (lhs: KeychainError, rhs: any Error) -> Bool {
        switch rhs {
        case let error as KeychainError: return error.code == lhs.code
        case let error as EngineError: return lhs.code == .status(error.status)
        default: return false
        }
    }

    // MARK: - Named codes

    /// `errSecParam` (-50): a parameter was not valid (a malformed query).
    public static let param = KeychainError(status: Status.param)
    /// `errSecUnimplemented` (-4): not available here (for example the Secure Enclave on a simulator).
    public static let unimplemented = KeychainError(status: Status.unimplemented)
    /// `errSecUserCanceled` (-128): the user dismissed the authentication prompt.
    public static let userCanceled = KeychainError(status: Status.userCanceled)
    /// `errSecNotAvailable` (-25291): no keychain is available.
    public static let notAvailable = KeychainError(status: Status.notAvailable)
    /// `errSecAuthFailed` (-25293): the authentication failed (wrong biometry, lockout, biometry changed).
    public static let authFailed = KeychainError(status: Status.authFailed)
    /// `errSecDuplicateItem` (-25299): an item with the same primary key exists.
    public static let duplicateItem = KeychainError(status: Status.duplicateItem)
    /// `errSecItemNotFound` (-25300): no item matched.
    public static let itemNotFound = KeychainError(status: Status.itemNotFound)
    /// `errSecNoSuchAttr` (-25303): an attribute does not belong to the item's class.
    public static let noSuchAttr = KeychainError(status: Status.noSuchAttr)
    /// `errSecInteractionNotAllowed` (-25308): locked, or a needed prompt was not allowed. Transient.
    public static let interactionNotAllowed = KeychainError(status: Status.interactionNotAllowed)
    /// `errSecDecode` (-26275): the keychain could not decode stored data (an integrity failure).
    public static let decode = KeychainError(status: Status.decode)
    /// `errSecMissingEntitlement` (-34018): the app lacks the keychain entitlement or the access group.
    public static let missingEntitlement = KeychainError(status: Status.missingEntitlement)
    /// `errSecInternalError` (-67671): an internal failure of the keychain or its store.
    public static let internalError = KeychainError(status: Status.internalError)
    /// A stored secret is not a valid UTF-8 string.
    public static let stringEncoding = KeychainError(code: .stringEncoding)
    /// A stored secret did not decode as the requested type.
    public static let decodingFailed = KeychainError(code: .decodingFailed)
    /// A value could not be encoded.
    public static let encodingFailed = KeychainError(code: .encodingFailed)
    /// An item description was built wrong (empty service or server, port out of range).
    public static let invalidItem = KeychainError(code: .invalidItem)
    /// The store returned an unexpected result shape.
    public static let unexpectedResult = KeychainError(code: .unexpectedResult)
    /// The item holds another key type (or a password) than the one requested: nothing was read or changed.
    public static let keyTypeMismatch = KeychainError(code: .keyTypeMismatch)
}

extension KeychainError: LocalizedError {
    /// Apple's message, with the status code.
    public var errorDescription: String? {
        if case .status(let status) = code { return "\(message) (\(status))" }
        return message
    }

    /// The developer reason, when there is one.
    public var failureReason: String? { reason.isEmpty ? nil : reason }

    /// What to do about it.
    public var recoverySuggestion: String? {
        switch code {
        case .status(Status.interactionNotAllowed):
            return "The keychain is locked or a prompt was not allowed. Try again when the device is unlocked; do not delete the item, it is intact."
        case .status(Status.itemNotFound):
            return "No item matches. Save it first, or treat a missing item as an empty value."
        case .status(Status.duplicateItem):
            return "An item with the same service, account and access group exists. Update it instead of adding (Keychain.save does this)."
        case .status(Status.userCanceled):
            return "The user cancelled the authentication. Offer to try again; do not delete the item."
        case .status(Status.authFailed):
            return "Authentication failed or the enrolled biometry changed. Ask the user to authenticate again, or sign in again to replace a biometry-bound item."
        case .status(Status.missingEntitlement):
            return "Add the keychain-access-groups entitlement (Keychain Sharing capability) and use an access group the app is entitled to; tests need a host app."
        case .status(Status.noSuchAttr):
            return "Remove the attribute that does not belong to the item's class from the query."
        case .status(Status.param):
            return "The query is malformed: check the class, the match limit and which keys an update may change."
        case .status(Status.decode):
            return "The stored item is damaged. Restore it from its source (for example sign in again)."
        case .status(Status.notAvailable), .status(Status.serviceNotAvailable):
            return "The keychain service is not available. Try again later."
        case .status(Status.unimplemented):
            return "This feature is not available on this device (for example the Secure Enclave on a simulator)."
        case .status:
            return "See the OSStatus code in Apple's Security documentation."
        case .stringEncoding:
            return "The stored value is binary: read it as Data instead of String."
        case .decodingFailed:
            return "The stored value was written by another version or type: read it as Data, or save a new value."
        case .encodingFailed:
            return "Check that the value can be encoded with the encoder given."
        case .invalidItem:
            return "Give a non-empty service (or server) and valid attributes."
        case .unexpectedResult:
            return "The store does not follow SecItem's result shapes; check the KeychainStore implementation."
        case .keyTypeMismatch:
            return "Read the item with the key type it was saved with, or save this key under another tag, service or account."
        }
    }
}
