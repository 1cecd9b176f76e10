import Foundation

/// A way a person proves who they are to an ``Authenticator``: what an ``AuthenticationContext`` remembers of a
/// successful authentication, so that it covers later only the access controls that way satisfies.
public enum AuthenticationFactor: String, Sendable, Hashable, CaseIterable, Codable {
    /// The device passcode; on Linux the login password, checked by PAM. Satisfies `.devicePasscode` and
    /// `.userPresence`.
    case passcode
    /// A biometric match (Face ID, Touch ID; on Linux a fingerprint through fprintd), against the enrolled set the
    /// context records with it. Satisfies `.biometryAny`, `.userPresence`, and `.biometryCurrentSet` while the
    /// enrolled set is the one it was checked against.
    case biometry
    /// A paired companion device (Apple Watch). Satisfies `.watch` only.
    case companion
    /// An item's application password. Satisfies nothing later: each item's application password is its own, so a
    /// context never carries one from one item to another.
    case applicationPassword
    /// The device owner, by biometry or the passcode, without the authenticator saying which (Apple's
    /// `deviceOwnerAuthentication` policy, the constraint `.userPresence` stands for). Satisfies `.userPresence` only.
    case deviceOwner
}

/// How an authentication ended and, when it succeeded, which factors the person proved.
public struct AuthenticationResult: Sendable, Hashable {
    /// How the authentication ended.
    public let outcome: AuthenticationOutcome
    /// The factors the person proved; empty unless ``outcome`` is ``AuthenticationOutcome/success``.
    public let factors: Set<AuthenticationFactor>

    /// A result; `factors` are kept only for a success.
    public init(_ outcome: AuthenticationOutcome, factors: Set<AuthenticationFactor> = []) {
        self.outcome = outcome
        self.factors = outcome == .success ? factors : []
    }

    /// The result of an authenticator that reports only `outcome` for a request for `flags`: on success, the factors
    /// every way of satisfying `flags` proves (for `.userPresence`, whose factor it cannot know,
    /// ``AuthenticationFactor/deviceOwner``; for `.biometryAny`, ``AuthenticationFactor/biometry``).
    public static func inferred(_ outcome: AuthenticationOutcome, for flags: AccessControlFlags) -> AuthenticationResult {
        AuthenticationResult(outcome, factors: outcome == .success ? AccessControlRules.factorsProven(by: flags) : [])
    }
}

/// Apple's rules for which factors satisfy an access control (SecAccessControl.c builds the same constraints).
///
/// - `.userPresence` is the `deviceOwnerAuthentication` policy: biometry or the passcode (not a companion device:
///   Apple documents `.userPresence` as `.biometryAny`, `.or`, `.devicePasscode`).
/// - `.biometryAny`: biometry, whatever the enrolled set. `.biometryCurrentSet`: biometry against the set enrolled
///   when the item was stored (the engine refuses an item whose set changed; a context's biometric success counts
///   only while the set it was checked against is the current one).
/// - `.devicePasscode`: the passcode, never biometry. `.watch`: a companion device.
/// - Several constraints with `.or`: any one of them. With `.and`, or with no conjunction (Apple builds a k-of-n
///   constraint with k = n then): every one of them.
/// - `.applicationPassword` is not a constraint but an extra requirement, whatever the conjunction.
/// - `.privateKeyUsage` asks nothing.
package enum AccessControlRules {
    /// The flags that are constraints (what `.or` and `.and` combine).
    package static let constraints: AccessControlFlags = [.userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .watch]

    /// Whether any one constraint suffices (`.or` with more than one constraint).
    package static func anyOneSuffices(_ flags: AccessControlFlags) -> Bool {
        flags.contains(.or) && flags.intersection(constraints).rawValue.nonzeroBitCount > 1
    }

    /// The constraints of `flags`, one by one.
    package static func constraintList(_ flags: AccessControlFlags) -> [AccessControlFlags] {
        [.userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .watch].filter { flags.contains($0) }
    }

    /// Whether `factor` satisfies the single constraint `constraint` (the enrolled-set check of `.biometryCurrentSet`
    /// is the caller's).
    package static func factor(_ factor: AuthenticationFactor, satisfies constraint: AccessControlFlags) -> Bool {
        switch constraint {
        case .userPresence: return factor == .passcode || factor == .biometry || factor == .deviceOwner
        case .biometryAny, .biometryCurrentSet: return factor == .biometry
        case .devicePasscode: return factor == .passcode
        case .watch: return factor == .companion
        default: return false
        }
    }

    /// The factors any success for `flags` proves, for an authenticator that does not say which it used.
    ///
    /// Every required constraint proves its factor (`.userPresence`: ``AuthenticationFactor/deviceOwner``); with
    /// `.or`, the one used is unknown: ``AuthenticationFactor/deviceOwner`` when every alternative is biometry, the
    /// passcode or user presence, else nothing. An application password proves
    /// ``AuthenticationFactor/applicationPassword``.
    package static func factorsProven(by flags: AccessControlFlags) -> Set<AuthenticationFactor> {
        var proven: Set<AuthenticationFactor> = flags.contains(.applicationPassword) ? [.applicationPassword] : []
        let needed = flags.intersection(constraints)
        if anyOneSuffices(flags) {
            if needed.isSubset(of: [.userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode]) { proven.insert(.deviceOwner) }
            return proven
        }
        for constraint in constraintList(needed) {
            switch constraint {
            case .userPresence: proven.insert(.deviceOwner)
            case .biometryAny, .biometryCurrentSet: proven.insert(.biometry)
            case .devicePasscode: proven.insert(.passcode)
            case .watch: proven.insert(.companion)
            default: break
            }
        }
        return proven
    }

    /// Whether `factors` satisfy `flags` (for `.biometryCurrentSet`, `biometryIsCurrent` says whether the biometric
    /// factor was checked against the current enrolled set). An application password is never satisfied by factors
    /// alone (see ``AuthenticationFactor/applicationPassword``).
    package static func factors(_ factors: Set<AuthenticationFactor>, satisfy flags: AccessControlFlags,
                               biometryIsCurrent: () -> Bool) -> Bool {
        if flags.contains(.applicationPassword) { return false }
        let list = constraintList(flags)
        if list.isEmpty { return true }
        let met: (AccessControlFlags) -> Bool = { constraint in
            guard factors.contains(where: { factor($0, satisfies: constraint) }) else { return false }
            return constraint != .biometryCurrentSet || biometryIsCurrent()
        }
        guard anyOneSuffices(flags) else { return list.allSatisfy(met) }
        // Biometry or the passcode, unknown which, satisfies a choice that offers both (Apple documents
        // `.userPresence` as `.biometryAny`, `.or`, `.devicePasscode`).
        if factors.contains(.deviceOwner), flags.contains(.biometryAny), flags.contains(.devicePasscode) { return true }
        return list.contains(where: met)
    }
}
