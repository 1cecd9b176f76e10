import Foundation

/// A value behind a lock, for the engine's few pieces of shared mutable state.
///
/// `@unchecked Sendable`: every access to `value` goes through `lock`.
public final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access to the value.
    public func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    /// The current value.
    public var current: Value { withLock { $0 } }
}

/// What an authentication prompt ended with.
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

    /// The status the operation fails with, nil for success.
    ///
    /// Apple's keychain reports a failed, unavailable or locked-out evaluation as errSecAuthFailed; only a
    /// cancelled prompt has its own code.
    public var status: Int32? {
        switch self {
        case .success: return nil
        case .userCancel: return Status.userCanceled
        case .failed, .notAvailable, .lockout: return Status.authFailed
        }
    }
}

/// What the engine asks an ``Authenticator`` to verify. Holds no secret.
public struct AuthenticationRequest: Sendable, Hashable {
    /// The class of the item whose secret is wanted.
    public let itemClass: ItemClass
    /// The item's access-control flags.
    public let flags: AccessControlFlags
    /// `kSecUseOperationPrompt`, the text the prompt shows.
    public let operationPrompt: String?
    /// The operation: `copy` or `update`.
    public let operation: String

    public init(itemClass: ItemClass, flags: AccessControlFlags, operationPrompt: String?, operation: String) {
        self.itemClass = itemClass
        self.flags = flags
        self.operationPrompt = operationPrompt
        self.operation = operation
    }
}

/// Performs the user authentication an access-controlled item needs (biometry, passcode).
///
/// The engine calls it synchronously while it holds no storage lock. On Linux there is no biometric
/// hardware: production code injects an authenticator that asks the user (a terminal prompt, a desktop
/// dialog); tests inject scripted outcomes.
public protocol Authenticator: Sendable {
    /// Asks for an authentication and reports how it ended.
    func authenticate(_ request: AuthenticationRequest) -> AuthenticationOutcome
}

/// An authenticator that always reports the same outcome.
public struct FixedAuthenticator: Authenticator {
    public let outcome: AuthenticationOutcome
    public init(_ outcome: AuthenticationOutcome) { self.outcome = outcome }
    public func authenticate(_ request: AuthenticationRequest) -> AuthenticationOutcome { outcome }
}

/// An authentication context (`kSecUseAuthenticationContext`): reuses a successful authentication.
///
/// Once an authentication through this context succeeded, later operations that pass the same context
/// do not prompt again while `reuseDuration` seconds have not passed since that success. Within one
/// operation a context's success always covers every item. With `interactionNotAllowed`, an operation
/// that would need a prompt fails with `errSecInteractionNotAllowed` instead.
public final class AuthenticationContext: Sendable, Hashable {
    private struct State {
        var reuseDuration: TimeInterval
        var interactionNotAllowed: Bool
        var lastSuccess: Date?
        var invalidated = false
    }

    private let state: Locked<State>

    public init(reuseDuration: TimeInterval = 0, interactionNotAllowed: Bool = false) {
        state = Locked(State(reuseDuration: reuseDuration, interactionNotAllowed: interactionNotAllowed))
    }

    /// Seconds during which a success is reused (Apple's `touchIDAuthenticationAllowableReuseDuration`, at most 300).
    public var reuseDuration: TimeInterval {
        get { state.current.reuseDuration }
        set { state.withLock { $0.reuseDuration = min(max(newValue, 0), 300) } }
    }

    /// When true, a needed prompt fails with `errSecInteractionNotAllowed` (LAContext's `interactionNotAllowed`).
    public var interactionNotAllowed: Bool {
        get { state.current.interactionNotAllowed }
        set { state.withLock { $0.interactionNotAllowed = newValue } }
    }

    /// When the last authentication through this context succeeded.
    public var lastSuccess: Date? { state.current.lastSuccess }

    /// Whether ``invalidate()`` was called: an invalidated context never authenticates again.
    public var isInvalidated: Bool { state.current.invalidated }

    /// Records a successful authentication at `date` (as `LAContext.evaluatePolicy` does).
    public func recordSuccess(at date: Date) {
        state.withLock { if !$0.invalidated { $0.lastSuccess = date } }
    }

    /// Forgets any success; later uses fail with `errSecAuthFailed` (Apple: the context is invalid).
    public func invalidate() {
        state.withLock { $0.invalidated = true; $0.lastSuccess = nil }
    }

    /// Whether a success recorded earlier still covers an operation at `date`.
    public func covers(_ date: Date) -> Bool {
        state.withLock { s in
            guard !s.invalidated, let last = s.lastSuccess else { return false }
            return date.timeIntervalSince(last) <= s.reuseDuration
        }
    }

    public static func == (lhs: AuthenticationContext, rhs: AuthenticationContext) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
