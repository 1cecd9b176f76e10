import Foundation

/// A value behind a lock: the package's one lock type for shared mutable state.
///
/// Like swift-nio's `NIOLockedValueBox`, a `Locked` is `Sendable` only when its value is: the lock makes the accesses
/// exclusive, but a value handed out of ``withLock(_:)`` (or by ``current``) is used outside the lock, so a value that
/// may not cross threads would escape through it.
package final class Locked<Value> {
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access to the value.
    package func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    /// The current value.
    package var current: Value { withLock { $0 } }
}

// @unchecked Sendable: `value` is reached only inside `withLock`, while `lock` is held, and `Value: Sendable` makes
// what crosses threads through it (the value itself, or anything `withLock` returns from it) safe to share.
extension Locked: @unchecked Sendable where Value: Sendable {}

/// What an authentication prompt ended with (or why none could be shown).
///
/// The raw values are LocalAuthentication's names; ``status`` is what a keychain operation that needed the
/// authentication fails with.
public enum AuthenticationOutcome: String, Sendable, Hashable, CaseIterable {
    /// The user authenticated: the operation goes on.
    case success
    /// The user cancelled the prompt: `errSecUserCanceled` (-128).
    case userCancel
    /// The user failed to authenticate: `errSecAuthFailed` (-25293).
    case failed
    /// No biometry or passcode is set up: `errSecAuthFailed` (-25293).
    case notAvailable
    /// Too many failed attempts: `errSecAuthFailed` (-25293).
    case lockout
    /// Biometry is there, but no identity (finger, face) is enrolled: `errSecAuthFailed` (-25293).
    case notEnrolled
    /// No passcode (no login password usable) is set: `errSecAuthFailed` (-25293).
    case passcodeNotSet
    /// The user chose the fallback (“Enter Password”) where the caller handles it: `errSecUserCanceled` (-128).
    case userFallback
    /// The app cancelled the prompt (`LAContext.invalidate()`): `errSecUserCanceled` (-128).
    case appCancel
    /// The system cancelled the prompt (the device, daemon or terminal went away): `errSecUserCanceled` (-128).
    case systemCancel
    /// A prompt was needed but no one can be asked (no terminal, no prompter, `interactionNotAllowed`):
    /// `errSecInteractionNotAllowed` (-25308).
    case notInteractive

    /// The status the operation fails with, nil for success.
    ///
    /// Decision (Apple's keychain maps LocalAuthentication's errors the same way): every cancellation — by the user,
    /// the fallback button, the app or the system — is `errSecUserCanceled`; a prompt that may not be shown is
    /// `errSecInteractionNotAllowed`; every other failure (wrong credentials, nothing enrolled, lockout) is
    /// `errSecAuthFailed`.
    public var status: Int32? {
        switch self {
        case .success: return nil
        case .userCancel, .userFallback, .appCancel, .systemCancel: return Status.userCanceled
        case .notInteractive: return Status.interactionNotAllowed
        case .failed, .notAvailable, .lockout, .notEnrolled, .passcodeNotSet: return Status.authFailed
        }
    }
}

/// The kind of biometry an ``Authenticator`` uses.
public enum BiometryKind: String, Sendable, Hashable, CaseIterable {
    /// No biometry.
    case none
    /// A fingerprint reader (Apple's Touch ID type).
    case fingerprint
    /// Face recognition (Apple's Face ID type).
    case face
    /// Iris recognition (Apple's Optic ID type).
    case iris
}

/// Cancels an authentication in progress (`LAContext.invalidate()` while a prompt waits).
///
/// Cancelling is final: handlers registered later run at once. An authenticator that waits for a person registers
/// a handler that wakes its wait (a terminal read, a fingerprint verification) and then reports
/// ``AuthenticationOutcome/appCancel``.
public final class AuthenticationCancellation: Sendable {
    private struct State {
        var cancelled = false
        var next = 0
        var handlers: [Int: @Sendable () -> Void] = [:]
    }

    private let state = Locked(State())

    /// A cancellation not yet cancelled.
    public init() {}

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { state.current.cancelled }

    /// Cancels: runs every registered handler once, on the calling thread.
    public func cancel() {
        let handlers: [@Sendable () -> Void] = state.withLock { s in
            if s.cancelled { return [] }
            s.cancelled = true
            defer { s.handlers = [:] }
            return Array(s.handlers.values)
        }
        for handler in handlers { handler() }
    }

    /// Registers `handler` to run on cancellation (at once, on this thread, when already cancelled).
    ///
    /// - Returns: a token for ``removeHandler(_:)``; nil when the handler already ran.
    @discardableResult
    public func onCancel(_ handler: @escaping @Sendable () -> Void) -> Int? {
        let token: Int? = state.withLock { s in
            if s.cancelled { return nil }
            s.next += 1
            s.handlers[s.next] = handler
            return s.next
        }
        if token == nil { handler() }
        return token
    }

    /// Forgets a handler registered with ``onCancel(_:)``.
    public func removeHandler(_ token: Int?) {
        guard let token else { return }
        state.withLock { _ = $0.handlers.removeValue(forKey: token) }
    }
}

/// What the engine asks an ``Authenticator`` to verify. Holds no secret.
public struct AuthenticationRequest: Sendable {
    /// The class of the item whose secret is wanted.
    public let itemClass: ItemClass
    /// The access-control flags to satisfy: the item's, less the constraints the caller's authentication context
    /// already covers when every constraint is required (then only the missing factors are asked).
    public let flags: AccessControlFlags
    /// `kSecUseOperationPrompt`, the text the prompt shows.
    public let operationPrompt: String?
    /// The operation: `copy`, `update`, `evaluatePolicy` or `evaluateAccessControl`.
    public let operation: String
    /// Cancelled when the caller's authentication context is invalidated while the prompt waits; the
    /// authenticator then ends with ``AuthenticationOutcome/appCancel``.
    public let cancellation: AuthenticationCancellation?

    /// A request; the engine makes these, tests and other authenticators may too.
    public init(itemClass: ItemClass, flags: AccessControlFlags, operationPrompt: String?, operation: String,
                cancellation: AuthenticationCancellation? = nil) {
        self.itemClass = itemClass
        self.flags = flags
        self.operationPrompt = operationPrompt
        self.operation = operation
        self.cancellation = cancellation
    }
}

/// Performs the user authentication an access-controlled item needs (biometry, passcode).
///
/// The contract every conformer keeps:
/// - ``authenticate(_:)`` is called synchronously, on a thread that may block (never on Swift's cooperative
///   pool: the engine's callers run it on their own thread), while the engine holds no storage lock. It may wait
///   for a person, but must end: when ``AuthenticationRequest/cancellation`` is cancelled it returns
///   ``AuthenticationOutcome/appCancel`` promptly, and when no one can be asked it returns
///   ``AuthenticationOutcome/notInteractive`` without waiting.
/// - ``availability(for:)`` answers without asking anyone (LocalAuthentication's `canEvaluatePolicy`).
/// - ``biometryDomainState`` changes exactly when the enrolled biometric identities change: `.biometryCurrentSet`
///   items record it when added and become unreadable (`errSecAuthFailed`) once it differs.
/// - Nothing it logs or returns contains what the person typed.
///
/// On Linux the system authenticator asks PAM (the login password) and fprintd (fingerprints); tests inject
/// scripted outcomes.
public protocol Authenticator: Sendable {
    /// Asks for an authentication and reports how it ended.
    func authenticate(_ request: AuthenticationRequest) -> AuthenticationOutcome

    /// Asks for an authentication and reports how it ended and, on success, which factors the person proved: what
    /// an ``AuthenticationContext`` records, so that it later covers only the access controls those factors satisfy.
    ///
    /// The default calls ``authenticate(_:)`` and infers the factors from the request's flags
    /// (``AuthenticationResult/inferred(_:for:)``): for `.userPresence`, whose factor it cannot know, that is
    /// ``AuthenticationFactor/deviceOwner``, which covers later `.userPresence` access controls only. An
    /// authenticator that knows which factor the person used (the system authenticator: a fingerprint, or the
    /// password) reports it.
    ///
    /// - Important: Report only factors the person actually proved in this authentication, and on success factors
    ///   that satisfy the request's flags (each ``AuthenticationFactor`` says which access controls it satisfies); a context trusts them for its reuse window.
    func authenticateReportingFactors(_ request: AuthenticationRequest) -> AuthenticationResult

    /// Whether an authentication satisfying `flags` could be attempted now: nil if so, else the reason it cannot
    /// (``AuthenticationOutcome/notAvailable``, ``AuthenticationOutcome/notEnrolled``,
    /// ``AuthenticationOutcome/lockout``, ``AuthenticationOutcome/passcodeNotSet``,
    /// ``AuthenticationOutcome/notInteractive``). The default: ``AuthenticationOutcome/notAvailable`` for
    /// biometry-only flags when ``biometryKind`` is ``BiometryKind/none``, else nil.
    func availability(for flags: AccessControlFlags) -> AuthenticationOutcome?

    /// The biometry this authenticator uses. The default: ``BiometryKind/none``.
    var biometryKind: BiometryKind { get }

    /// An opaque digest of the enrolled biometric identities, nil without biometry. The default: nil, and the
    /// engine then keeps its own enrollment counter, which Keystone's test doubles advance to play an enrollment change.
    var biometryDomainState: Data? { get }
}

extension Authenticator {
    /// Calls ``authenticate(_:)`` and infers the factors (``AuthenticationResult/inferred(_:for:)``).
    public func authenticateReportingFactors(_ request: AuthenticationRequest) -> AuthenticationResult {
        .inferred(authenticate(request), for: request.flags)
    }
    /// ``AuthenticationOutcome/notAvailable`` for biometry-only flags without biometry, else nil.
    public func availability(for flags: AccessControlFlags) -> AuthenticationOutcome? {
        let needed = flags.intersection(.authenticationFlags)
        if !needed.isEmpty, needed.isSubset(of: [.biometryAny, .biometryCurrentSet]), biometryKind == .none { return .notAvailable }
        return nil
    }
    /// ``BiometryKind/none``.
    public var biometryKind: BiometryKind { .none }
    /// Nil: the engine keeps its own enrollment counter.
    public var biometryDomainState: Data? { nil }
}

/// An authenticator that always reports the same outcome: the engine's default (`notAvailable`), and a test double.
public struct FixedAuthenticator: Authenticator {
    /// What every authentication ends with.
    public let outcome: AuthenticationOutcome
    /// An authenticator that always reports `outcome`.
    public init(_ outcome: AuthenticationOutcome) { self.outcome = outcome }
    /// `outcome`, or ``AuthenticationOutcome/appCancel`` when the request was cancelled.
    public func authenticate(_ request: AuthenticationRequest) -> AuthenticationOutcome {
        if request.cancellation?.isCancelled == true { return .appCancel }
        return outcome
    }

    /// Outcomes that say nothing can be attempted (not available, not enrolled, lockout, passcode not set, not
    /// interactive) are reported here too; the others can be attempted.
    public func availability(for flags: AccessControlFlags) -> AuthenticationOutcome? {
        switch outcome {
        case .notAvailable, .notEnrolled, .lockout, .passcodeNotSet, .notInteractive: return outcome
        default:
            let needed = flags.intersection(.authenticationFlags)
            if !needed.isEmpty, needed.isSubset(of: [.biometryAny, .biometryCurrentSet]) { return .notAvailable }
            return nil
        }
    }
}
