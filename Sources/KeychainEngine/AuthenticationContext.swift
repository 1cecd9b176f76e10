import Foundation

/// An authentication context (`kSecUseAuthenticationContext`, what an `LAContext` stands for): reuses a
/// successful authentication, for the access controls the person's factor satisfies.
///
/// A success is recorded with the factors the person proved (``AuthenticationFactor``: the passcode, biometry with
/// the enrolled set it was checked against, a companion device, or “the device owner” when the authenticator did not
/// say which) and when. Later operations that pass the same context do not prompt again for an access control those
/// factors satisfy (each ``AuthenticationFactor`` says which), while ``reuseDuration`` seconds have not passed since each factor's
/// success; an access control that needs a factor the context has not got prompts for that factor (or fails with
/// `errSecInteractionNotAllowed` with ``interactionNotAllowed``). So a password entered for
/// `deviceOwnerAuthentication` never opens a `.biometryAny` item, and a finger never opens a `.devicePasscode` item.
///
/// Decision: a success for one access control also covers a later access control with exactly the same constraints
/// (Apple's ACL is the same then): this is what makes a `.or` success, whose factor an authenticator may not report,
/// reusable. An application password is never carried from one item to another.
public final class AuthenticationContext: Sendable, Hashable {
    /// One recorded success: when, and the enrolled biometry it was checked against.
    private struct Grant: Sendable {
        var date: Date
        var biometryDomainState: Data?
    }

    private struct State {
        var reuseDuration: TimeInterval
        var interactionNotAllowed: Bool
        var factors: [AuthenticationFactor: Grant] = [:]
        /// Successes by the constraints they satisfied (normalized: see ``AuthenticationContext/memoKey(_:)``).
        var satisfied: [AccessControlFlags: Grant] = [:]
        /// ``AuthenticationContext/recordSuccess(at:)``: every access control.
        var everything: Date?
        var lastSuccess: Date?
        var invalidated = false

        func valid(_ date: Date, at now: Date) -> Bool { now.timeIntervalSince(date) <= reuseDuration }
    }

    private let state: Locked<State>

    /// Cancelled by ``invalidate()``: an authentication waiting for this context's person ends with
    /// ``AuthenticationOutcome/appCancel``.
    package let cancellation = AuthenticationCancellation()

    /// A context with no success recorded yet.
    ///
    /// - Parameters:
    ///   - reuseDuration: seconds a success is reused (0: none; at most 300).
    ///   - interactionNotAllowed: whether a needed prompt fails with `errSecInteractionNotAllowed` instead.
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

    /// When the last authentication through this context succeeded, whatever its factor.
    public var lastSuccess: Date? { state.current.lastSuccess }

    /// Whether ``invalidate()`` was called: an invalidated context never authenticates again.
    public var isInvalidated: Bool { state.current.invalidated }

    /// Records a success the person achieved with `factors` at `date` (as `LAContext.evaluatePolicy` does).
    ///
    /// - Parameters:
    ///   - factors: what the person proved (``AuthenticationResult/factors``).
    ///   - flags: the access control the success was asked for, if any: a later access control with the same
    ///     constraints is covered too. Ignored when it holds `.applicationPassword`.
    ///   - biometryDomainState: the enrolled biometry the biometric factor was checked against (the authenticator's
    ///     ``Authenticator/biometryDomainState`` at that moment): `.biometryCurrentSet` is covered only while it is
    ///     the current one.
    ///   - date: when the person succeeded (the reuse window starts there).
    package func record(_ factors: Set<AuthenticationFactor>, satisfying flags: AccessControlFlags? = nil,
                       biometryDomainState: Data? = nil, at date: Date) {
        state.withLock { s in
            guard !s.invalidated else { return }
            let grant = Grant(date: date, biometryDomainState: biometryDomainState)
            for factor in factors { s.factors[factor] = grant }
            if let flags, !flags.contains(.applicationPassword), let key = Self.memoKey(flags) { s.satisfied[key] = grant }
            s.lastSuccess = date
        }
    }

    /// Records, at `date`, an authorization that satisfies every access control, whatever its factors.
    ///
    /// - Important: Not for what a person did (use ``record(_:satisfying:biometryDomainState:at:)``): only for a
    ///   read the keychain itself authorizes by other means, on a context made for that one read and invalidated
    ///   after it (the blob of a Secure Enclave key, whose every use still asks its own authentication).
    package func recordSuccess(at date: Date) {
        state.withLock { s in
            guard !s.invalidated else { return }
            s.everything = date
            s.lastSuccess = date
        }
    }

    /// The factors whose success still counts at `date`.
    package func factors(at date: Date) -> Set<AuthenticationFactor> {
        state.withLock { s in
            guard !s.invalidated else { return [] }
            return Set(s.factors.filter { s.valid($0.value.date, at: date) }.keys)
        }
    }

    /// Forgets any success; later uses fail with `errSecAuthFailed` (Apple: the context is invalid); a prompt
    /// waiting for this context ends with ``AuthenticationOutcome/appCancel``.
    public func invalidate() {
        state.withLock { s in
            s.invalidated = true
            s.factors = [:]
            s.satisfied = [:]
            s.everything = nil
            s.lastSuccess = nil
        }
        cancellation.cancel()
    }

    /// Whether the successes recorded earlier still cover an access control with `flags` at `date`.
    ///
    /// - Parameters:
    ///   - flags: the item's access-control flags.
    ///   - date: now, by the engine's clock.
    ///   - currentBiometryDomainState: the enrolled biometry now (asked only for `.biometryCurrentSet`).
    package func covers(_ flags: AccessControlFlags, at date: Date, currentBiometryDomainState: () -> Data?) -> Bool {
        uncovered(flags, at: date, currentBiometryDomainState: currentBiometryDomainState) == nil
    }

    /// What is still to be asked for an access control with `flags` at `date`: nil when the recorded successes cover
    /// it; else `flags` less the constraints already covered when every constraint is required (the person is
    /// asked only for the factors the context has not got), and all of `flags` when any one suffices (`.or`).
    package func uncovered(_ flags: AccessControlFlags, at date: Date, currentBiometryDomainState: () -> Data?) -> AccessControlFlags? {
        guard flags.requiresAuthentication else { return nil }
        return withoutActuallyEscaping(currentBiometryDomainState) { uncovered(flags, at: date, currentState: $0) }
    }

    private func uncovered(_ flags: AccessControlFlags, at date: Date, currentState fetch: @escaping () -> Data?) -> AccessControlFlags? {
        // The enrolled biometry is asked at most once, and only when `.biometryCurrentSet` needs it.
        var current: Data??
        let currentState: () -> Data? = {
            if let current { return current }
            let state = fetch()
            current = .some(state)
            return state
        }
        let s = state.current
        guard !s.invalidated else { return flags }
        if let everything = s.everything, s.valid(everything, at: date) { return nil }
        if !flags.contains(.applicationPassword), let key = Self.memoKey(flags), let grant = s.satisfied[key],
           s.valid(grant.date, at: date),
           !flags.contains(.biometryCurrentSet) || grant.biometryDomainState == currentState() {
            return nil
        }
        let valid = s.factors.filter { s.valid($0.value.date, at: date) }
        let biometryIsCurrent = { valid[.biometry].map { $0.biometryDomainState == currentState() } ?? false }
        let factors = Set(valid.keys)
        if AccessControlRules.factors(factors, satisfy: flags, biometryIsCurrent: biometryIsCurrent) { return nil }
        if AccessControlRules.anyOneSuffices(flags) { return flags }
        var missing = flags
        for constraint in AccessControlRules.constraintList(flags)
        where AccessControlRules.factors(factors, satisfy: constraint, biometryIsCurrent: biometryIsCurrent) {
            missing.remove(constraint)
        }
        return missing
    }

    /// The constraints of `flags` as a success is remembered by: the constraints, with `.or` only when it chooses
    /// between several (no conjunction and `.and` both require every constraint). Nil without constraints.
    static func memoKey(_ flags: AccessControlFlags) -> AccessControlFlags? {
        let constraints = flags.intersection(AccessControlRules.constraints)
        if constraints.isEmpty { return nil }
        return AccessControlRules.anyOneSuffices(flags) ? constraints.union(.or) : constraints
    }

    /// A context for one keychain operation: a success recorded on it covers the rest of that operation (every
    /// later item whose access control the person's factor satisfies), however long the person took to answer.
    ///
    /// Decision (Apple's `SecItemCopyMatching` makes one authentication context for a call that has none, and
    /// retries the query with it once the person answered, so one answer serves every item of the call): the engine
    /// makes one per operation, whatever the caller's context and its reuse duration (0 included), and drops it when
    /// the operation ends. Nothing is carried to the next operation through it.
    package static func forOneOperation() -> AuthenticationContext {
        AuthenticationContext(reuseDuration: .infinity)
    }

    /// The same context (identity, as an `LAContext`).
    public static func == (lhs: AuthenticationContext, rhs: AuthenticationContext) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// The authentication a protected secret or private key needs before one use, as the keychain asks it: the
/// engine before it returns a protected item's data, and on Linux the SecKey and CryptoKit `SecureEnclave` layers
/// before each use of a key made with `.privateKeyUsage` and an authentication flag.
///
/// The rules, in order (Apple's, as the engine applies them to items):
/// 1. Flags that need no authentication (none, or only `.privateKeyUsage`) pass.
/// 2. An invalidated context fails with `errSecAuthFailed`; a context whose recorded factors satisfy the flags
///    within its reuse duration passes without asking (``AuthenticationContext/uncovered(_:at:currentBiometryDomainState:)``).
/// 3. A context with `interactionNotAllowed` (or `allowsInteraction == false`: `kSecUseAuthenticationUIFail`)
///    fails with `errSecInteractionNotAllowed`.
/// 4. Otherwise the authenticator asks the person — with a context, only for the constraints it does not cover;
///    a success is recorded on the context with the factors the authenticator reports; any other outcome
///    fails with its status (`errSecUserCanceled`, `errSecAuthFailed`, `errSecInteractionNotAllowed`).
///
/// Within one operation over several items (`kSecMatchLimitAll`, an update of every match), the successes of the
/// operation's earlier items count as a context of their own (``AuthenticationContext/forOneOperation()``): one
/// success covers every item of the operation whose access control the person's factor satisfies, whatever the
/// caller's reuse duration. Each item's application password is still asked for.
package enum AuthenticationGate {
    /// Authenticates one use. Blocks while the person is asked: call it off Swift's cooperative pool.
    ///
    /// - Parameter operationGrants: the successes of the operation so far, for an operation over several items
    ///   (``AuthenticationContext/forOneOperation()``, made once per operation); nil for a single use.
    /// - Throws: ``EngineError`` with `errSecAuthFailed`, `errSecUserCanceled` or `errSecInteractionNotAllowed`.
    package static func authorize(_ flags: AccessControlFlags, itemClass: ItemClass, operation: String,
                                 prompt: String?, context: AuthenticationContext?, allowsInteraction: Bool = true,
                                 authenticator: any Authenticator, now: Date,
                                 operationGrants: AuthenticationContext? = nil) throws(EngineError) {
        guard flags.requiresAuthentication else { return }
        if let context, context.isInvalidated {
            throw EngineError(Status.authFailed, "the authentication context was invalidated")
        }
        let currentState = { authenticator.biometryDomainState }
        var asked = flags
        if let operationGrants {
            guard let uncovered = operationGrants.uncovered(flags, at: now, currentBiometryDomainState: currentState) else {
                return
            }
            asked = uncovered
        }
        if let context {
            guard let uncovered = context.uncovered(flags, at: now, currentBiometryDomainState: currentState) else {
                return
            }
            // A constraint either one covers is not asked again (when any one suffices, neither covers any).
            asked = AccessControlRules.anyOneSuffices(flags) ? flags : asked.intersection(uncovered)
            if context.interactionNotAllowed {
                throw EngineError.interactionNotAllowed("an authentication is needed (\(Self.describe(asked))) and the context does not allow interaction")
            }
        }
        if !allowsInteraction {
            throw EngineError.interactionNotAllowed("an authentication is needed (\(Self.describe(asked))) and kSecUseAuthenticationUI is Fail")
        }
        let request = AuthenticationRequest(itemClass: itemClass, flags: asked, operationPrompt: prompt,
                                            operation: operation, cancellation: context?.cancellation)
        let result = authenticator.authenticateReportingFactors(request)
        if let status = result.outcome.status {
            throw EngineError(status, "authentication ended with '\(result.outcome.rawValue)'")
        }
        let state = result.factors.contains(.biometry) ? authenticator.biometryDomainState : nil
        context?.record(result.factors, satisfying: asked, biometryDomainState: state, at: now)
        operationGrants?.record(result.factors, satisfying: asked, biometryDomainState: state, at: now)
    }

    /// The constraints in words, for messages: `biometryAny or devicePasscode`.
    static func describe(_ flags: AccessControlFlags) -> String {
        var names = AccessControlRules.constraintList(flags).map { flag -> String in
            switch flag {
            case .userPresence: return "userPresence"
            case .biometryAny: return "biometryAny"
            case .biometryCurrentSet: return "biometryCurrentSet"
            case .devicePasscode: return "devicePasscode"
            default: return "watch"
            }
        }
        if flags.contains(.applicationPassword) { names.append("applicationPassword") }
        return names.joined(separator: AccessControlRules.anyOneSuffices(flags) ? " or " : " and ")
    }
}
