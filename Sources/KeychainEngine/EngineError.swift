/// The one error the engine, its storages (the keychain file, the Secret Service, etcd), its authenticators and
/// Secure Enclave tokens throw: Apple's `OSStatus` and a reason for developers.
///
/// Catch a code by name, as `Errno` is caught in swift-system; a pattern matches by status, whatever the reason:
///
/// ```swift
/// do {
///     try engine.add(item)
/// } catch EngineError.duplicateItem {
///     // an item with the same primary key exists: update it instead, never delete and re-add
/// } catch let error as EngineError where error.code == .interactionNotAllowed {
///     // locked: try again after the unlock; the item is intact
/// }
/// ```
///
/// Two errors are equal when their statuses are; the ``reason`` is not compared.
///
/// - Important: No ``description`` or ``reason`` holds secret bytes: reasons name attribute keys, classes, paths
///   and the operation, never an attribute's or a secret's value.
public struct EngineError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The `OSStatus`, one of ``Status``.
    public let status: Int32
    /// What went wrong, for logs and developers. Never holds secret bytes.
    public let reason: String

    /// Creates an error with an `OSStatus`.
    ///
    /// - Parameters:
    ///   - status: the `OSStatus`, one of ``Status``.
    ///   - reason: a developer explanation; never pass secret bytes.
    public init(_ status: Int32, _ reason: String = "") {
        self.status = status
        self.reason = reason
    }

    /// Creates an error with a code.
    ///
    /// - Parameters:
    ///   - code: what failed.
    ///   - reason: a developer explanation; never pass secret bytes.
    public init(_ code: Code, _ reason: String = "") {
        self.init(code.rawValue, reason)
    }

    /// The status, typed: compare it with a named code (`error.code == .itemNotFound`).
    public var code: Code { Code(rawValue: status) }

    /// `errSecItemNotFound (-25300): <Apple's message> <reason>`. Never holds secret bytes.
    public var description: String {
        let name = Status.name(for: status).map { "\($0) " } ?? ""
        let base = "\(name)(\(status)): \(Status.message(for: status))"
        return reason.isEmpty ? base : "\(base) \(reason)"
    }

    /// Equal when the statuses are equal; reasons are ignored.
    public static func == (lhs: EngineError, rhs: EngineError) -> Bool { lhs.status == rhs.status }
    /// Hashes the status only, consistently with `==`.
    public func hash(into hasher: inout Hasher) { hasher.combine(status) }

    /// Matches an error against an `EngineError` pattern by status, so `catch EngineError.itemNotFound` works.
    public static func ~= (pattern: EngineError, error: any Error) -> Bool {
        (error as? EngineError)?.status == pattern.status
    }

    /// Matches an `EngineError` against a status: `case Status.itemNotFound:` in a `switch` over an `EngineError`.
    public static func ~= (status: Int32, error: EngineError) -> Bool { error.status == status }
}

extension EngineError {
    /// An `OSStatus` as a type: what ``EngineError/code`` returns.
    ///
    /// The named codes are those the engine, its storages, authenticators and tokens throw; any other status is
    /// `Code(rawValue:)`. A code is also a pattern: `catch EngineError.Code.decode` matches an `EngineError`
    /// with that status.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        /// The `OSStatus`.
        public let rawValue: Int32

        /// The code of an `OSStatus`.
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// The `errSec…` name (`errSecItemNotFound`), or `OSStatus <n>` for a status Apple does not name.
        public var description: String { Status.name(for: rawValue) ?? "OSStatus \(rawValue)" }

        /// Apple's message for the status (what `SecCopyErrorMessageString` returns).
        public var message: String { Status.message(for: rawValue) }

        /// Matches an `EngineError` with this status.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? EngineError)?.status == code.rawValue
        }

        /// `errSecUnimplemented` (-4): not available here (no Secure Enclave, a backend not installed).
        public static let unimplemented = Code(rawValue: Status.unimplemented)
        /// `errSecDiskFull` (-34): the disk is full.
        public static let diskFull = Code(rawValue: Status.diskFull)
        /// `errSecIO` (-36): the storage failed to read or write.
        public static let io = Code(rawValue: Status.io)
        /// `errSecParam` (-50): a malformed query or argument.
        public static let param = Code(rawValue: Status.param)
        /// `errSecWrPerm` (-61): the keychain cannot be written, or its file or directory is not safe to use.
        public static let wrPerm = Code(rawValue: Status.wrPerm)
        /// `errSecAllocate` (-108): memory or key derivation failed.
        public static let allocate = Code(rawValue: Status.allocate)
        /// `errSecUserCanceled` (-128): the person or the app cancelled the authentication.
        public static let userCanceled = Code(rawValue: Status.userCanceled)
        /// `errSecInternalComponent` (-2070): a component (the TPM, the Secret Service) refused for a reason of its own.
        public static let internalComponent = Code(rawValue: Status.internalComponent)
        /// `errSecNotAvailable` (-25291): no keychain, token or service can be reached.
        public static let notAvailable = Code(rawValue: Status.notAvailable)
        /// `errSecAuthFailed` (-25293): a wrong password, a failed or impossible authentication, changed biometry.
        public static let authFailed = Code(rawValue: Status.authFailed)
        /// `errSecNoSuchKeychain` (-25294): no keychain at that path (or it was deleted).
        public static let noSuchKeychain = Code(rawValue: Status.noSuchKeychain)
        /// `errSecInvalidKeychain` (-25295): the file is not a keychain, or its header is damaged.
        public static let invalidKeychain = Code(rawValue: Status.invalidKeychain)
        /// `errSecDuplicateKeychain` (-25296): a keychain already exists at that path.
        public static let duplicateKeychain = Code(rawValue: Status.duplicateKeychain)
        /// `errSecDuplicateItem` (-25299): an item with the same primary key exists.
        public static let duplicateItem = Code(rawValue: Status.duplicateItem)
        /// `errSecItemNotFound` (-25300): no item matched.
        public static let itemNotFound = Code(rawValue: Status.itemNotFound)
        /// `errSecDataTooLarge` (-25302): a value is larger than the storage takes.
        public static let dataTooLarge = Code(rawValue: Status.dataTooLarge)
        /// `errSecNoSuchAttr` (-25303): an attribute does not belong to the item's class.
        public static let noSuchAttr = Code(rawValue: Status.noSuchAttr)
        /// `errSecInteractionNotAllowed` (-25308): locked, or a needed prompt was not allowed. Transient: the item
        /// is intact.
        public static let interactionNotAllowed = Code(rawValue: Status.interactionNotAllowed)
        /// `errSecWrongSecVersion` (-25310): a newer keychain format than this Keystone reads.
        public static let wrongSecVersion = Code(rawValue: Status.wrongSecVersion)
        /// `errSecDecode` (-26275): stored data failed its integrity check (a damaged or tampered row, a file sealed
        /// to another TPM).
        public static let decode = Code(rawValue: Status.decode)
        /// `errSecMissingEntitlement` (-34018): an access group the caller is not entitled to.
        public static let missingEntitlement = Code(rawValue: Status.missingEntitlement)
        /// `errSecInternalError` (-67671): an unexpected failure inside the keychain or its storage.
        public static let internalError = Code(rawValue: Status.internalError)
        /// `errSecQuotaExceeded` (-67596): the kernel keyring is full: the keychain is unlocked in this process only.
        public static let quotaExceeded = Code(rawValue: Status.quotaExceeded)
    }

    // MARK: - Named errors (patterns for `catch`, values to throw), with an empty reason

    /// `errSecUnimplemented` (-4).
    public static let unimplemented = EngineError(.unimplemented)
    /// `errSecDiskFull` (-34).
    public static let diskFull = EngineError(.diskFull)
    /// `errSecIO` (-36).
    public static let io = EngineError(.io)
    /// `errSecParam` (-50).
    public static let param = EngineError(.param)
    /// `errSecWrPerm` (-61).
    public static let wrPerm = EngineError(.wrPerm)
    /// `errSecAllocate` (-108).
    public static let allocate = EngineError(.allocate)
    /// `errSecUserCanceled` (-128).
    public static let userCanceled = EngineError(.userCanceled)
    /// `errSecInternalComponent` (-2070).
    public static let internalComponent = EngineError(.internalComponent)
    /// `errSecNotAvailable` (-25291).
    public static let notAvailable = EngineError(.notAvailable)
    /// `errSecAuthFailed` (-25293).
    public static let authFailed = EngineError(.authFailed)
    /// `errSecNoSuchKeychain` (-25294).
    public static let noSuchKeychain = EngineError(.noSuchKeychain)
    /// `errSecInvalidKeychain` (-25295).
    public static let invalidKeychain = EngineError(.invalidKeychain)
    /// `errSecDuplicateKeychain` (-25296).
    public static let duplicateKeychain = EngineError(.duplicateKeychain)
    /// `errSecDuplicateItem` (-25299).
    public static let duplicateItem = EngineError(.duplicateItem)
    /// `errSecItemNotFound` (-25300).
    public static let itemNotFound = EngineError(.itemNotFound)
    /// `errSecDataTooLarge` (-25302).
    public static let dataTooLarge = EngineError(.dataTooLarge)
    /// `errSecNoSuchAttr` (-25303).
    public static let noSuchAttr = EngineError(.noSuchAttr)
    /// `errSecInteractionNotAllowed` (-25308).
    public static let interactionNotAllowed = EngineError(.interactionNotAllowed)
    /// `errSecWrongSecVersion` (-25310).
    public static let wrongSecVersion = EngineError(.wrongSecVersion)
    /// `errSecDecode` (-26275).
    public static let decode = EngineError(.decode)
    /// `errSecMissingEntitlement` (-34018).
    public static let missingEntitlement = EngineError(.missingEntitlement)
    /// `errSecInternalError` (-67671).
    public static let internalError = EngineError(.internalError)
    /// `errSecQuotaExceeded` (-67596).
    public static let quotaExceeded = EngineError(.quotaExceeded)

    /// `errSecParam` (-50) with a reason.
    public static func param(_ reason: String) -> EngineError { EngineError(.param, reason) }
    /// `errSecDuplicateItem` (-25299) with a reason.
    public static func duplicateItem(_ reason: String = "") -> EngineError { EngineError(.duplicateItem, reason) }
    /// `errSecInteractionNotAllowed` (-25308) with a reason.
    public static func interactionNotAllowed(_ reason: String) -> EngineError { EngineError(.interactionNotAllowed, reason) }
}
