import Foundation
import KeychainEngine

/// How the system authenticator reaches the person: which PAM service and user, which fingerprint reader, which
/// prompter, and the biometry limits.
public struct SystemAuthenticationConfiguration: Sendable {
    /// The PAM service, user and attempts for the login password (`.devicePasscode`, and `.userPresence`'s fallback).
    public var pam: PAMConfiguration
    /// The fingerprint reader (fprintd); nil: no biometry (biometry-only items then fail with `notAvailable`).
    public var fingerprint: FingerprintConfiguration?
    /// Who is asked: the controlling terminal by default (``TerminalPrompter``); a GUI passes its own.
    public var prompter: any AuthenticationPrompter
    /// The desktop's polkit agent, asked for the password when ``prompter`` cannot reach anyone (no terminal) and
    /// ``PolkitConfiguration/isActive`` (a desktop session, by default); nil: never.
    public var polkit: PolkitConfiguration?
    /// Fingerprint scans that do not match before one authentication gives up (and `.userPresence` falls back to
    /// the password). Default 3; at least 1.
    public var fingerprintAttempts: Int
    /// Consecutive non-matching scans, across authentications, after which biometry is locked out until the
    /// password is entered successfully (Apple's Touch ID: 5). Default 5; at least 1.
    public var lockoutThreshold: Int

    /// The defaults: PAM service `keystone` for the effective user, fprintd on the system bus, the terminal, and
    /// polkit's agent in a desktop session without a terminal.
    public init(pam: PAMConfiguration = .standard, fingerprint: FingerprintConfiguration? = FingerprintConfiguration(),
                prompter: any AuthenticationPrompter = TerminalPrompter(), polkit: PolkitConfiguration? = PolkitConfiguration(),
                fingerprintAttempts: Int = 3, lockoutThreshold: Int = 5) {
        self.pam = pam
        self.fingerprint = fingerprint
        self.prompter = prompter
        self.polkit = polkit
        self.fingerprintAttempts = max(1, fingerprintAttempts)
        self.lockoutThreshold = max(1, lockoutThreshold)
    }
}

/// The person behind LocalAuthentication on Linux: the login password through PAM, fingerprints through fprintd.
///
/// An engine `Authenticator`: the keychain engine asks it for access-controlled items, and `LAContext` on Linux
/// evaluates its policies with it. What each access-control flag asks:
///
/// | Flags | Asks |
/// |---|---|
/// | `.biometryAny`, `.biometryCurrentSet` | a fingerprint; no reader → `notAvailable`, no enrolled finger → `notEnrolled`, locked out → `lockout` |
/// | `.devicePasscode` | the login password (PAM) |
/// | `.userPresence` | a fingerprint and the password **at once** when a finger can be verified (the first to succeed wins, the other is cancelled cleanly), else the password |
/// | several, with `.or` | the first of them that can be attempted, biometry first; finger or password at once |
/// | no terminal (the prompter is not interactive), a desktop session | the password through polkit's agent (``PolkitAuthentication``); biometry-only: `notInteractive` |
/// | several, with `.and` or no conjunction | each of them in turn |
/// | `.watch` (companion), `.applicationPassword` | `notAvailable`: Linux has no companion device, and application passwords are not supported |
///
/// Decisions:
/// - Each success reports the factor the person used (`authenticateReportingFactors(_:)`): a fingerprint is
///   `AuthenticationFactor.biometry`, the password `AuthenticationFactor.passcode`. An authentication context
///   then covers only what that factor satisfies: the password typed at a `.userPresence` prompt (after the
///   fingerprint missed, or without a reader) never opens a `.biometryAny` item, a finger never a `.devicePasscode` one.
/// - Every authentication needs an interactive prompter (a terminal, or the app's own) or, for the password, polkit's
///   agent in a desktop session (``SystemAuthenticationConfiguration/polkit``): without one it ends at once with
///   `notInteractive` (`errSecInteractionNotAllowed`), also for a fingerprint, since nobody would be told to touch the
///   reader.
/// - Every prompt starts with ``RequestingProgram/headline(reason:)``: the program's name and the reason.
/// - Lockout: after ``SystemAuthenticationConfiguration/lockoutThreshold`` consecutive misses, biometry is locked
///   out (`lockout`, `LAError.biometryLockout`) until the password is entered successfully, as on Apple devices. The
///   count lives in this authenticator (this process): it is a usability rule, not a security boundary — fprintd and
///   PAM enforce their own limits.
/// - There is no fallback button on a terminal: `userFallback` is never reported.
/// - The enrolled-biometry domain state is a digest of the reader's name and the enrolled fingers
///   (``FingerprintReader/domainState()``): enrolling or deleting a finger changes it, so `.biometryCurrentSet` items
///   become unreadable while `.biometryAny` items still read.
///
/// - Important: The password goes from the prompter to PAM and nowhere else: it is never logged, stored or kept
///   after the conversation.
public final class SystemAuthenticator: Authenticator {
    /// The configuration in force.
    public let configuration: SystemAuthenticationConfiguration
    private let reader: FingerprintReader?
    private let consecutiveMisses = Locked(0)

    public init(configuration: SystemAuthenticationConfiguration = SystemAuthenticationConfiguration()) {
        self.configuration = configuration
        self.reader = configuration.fingerprint.map { FingerprintReader(configuration: $0) }
    }

    /// Whether biometry is locked out after too many misses.
    public var isBiometryLockedOut: Bool { consecutiveMisses.current >= configuration.lockoutThreshold }

    // MARK: - Authenticator

    public var biometryKind: BiometryKind {
        switch reader?.availability() {
        case .ready?, .notEnrolled?: return .fingerprint
        default: return .none
        }
    }

    public var biometryDomainState: Data? { reader?.domainState() }

    public func availability(for flags: AccessControlFlags) -> AuthenticationOutcome? {
        let plan = Plan(flags)
        if plan.unsupported { return .notAvailable }
        if !configuration.prompter.isInteractive {
            // No terminal: polkit's agent can ask for the password, nobody can tell the person to touch the reader.
            guard desktopPolkit != nil, plan.mode == .passcode || plan.mode == .biometryOrPasscode else { return .notInteractive }
            return nil
        }
        switch plan.mode {
        case .biometry: return biometryBlocker()
        case .passcode: return nil
        case .biometryOrPasscode: return nil
        case .all: return plan.biometry ? biometryBlocker() : nil
        }
    }

    public func authenticate(_ request: AuthenticationRequest) -> AuthenticationOutcome {
        authenticateReportingFactors(request).outcome
    }

    /// Asks for what `request`'s flags need and reports the factors the person proved: `AuthenticationFactor.biometry`
    /// for a fingerprint match, `AuthenticationFactor.passcode` for the password PAM accepted (both, when both
    /// were required). So a `.userPresence` prompt answered with the password leaves a context that covers
    /// `.devicePasscode` and `.userPresence` items, never a biometry-only one.
    public func authenticateReportingFactors(_ request: AuthenticationRequest) -> AuthenticationResult {
        let cancellation = request.cancellation ?? AuthenticationCancellation()
        if cancellation.isCancelled { return AuthenticationResult(.appCancel) }
        let plan = Plan(request.flags)
        if plan.unsupported { return AuthenticationResult(.notAvailable) }
        if !configuration.prompter.isInteractive {
            guard let polkit = desktopPolkit, plan.mode == .passcode || plan.mode == .biometryOrPasscode else {
                return AuthenticationResult(.notInteractive)
            }
            let result = PolkitAuthentication.authenticate(polkit, reason: request.operationPrompt, cancellation: cancellation)
            if result.outcome == .success { consecutiveMisses.withLock { $0 = 0 } }
            return AuthenticationResult(result.outcome, factors: [.passcode])
        }
        // Every prompt names the program and the reason (shown once, first).
        let headline = RequestingProgram.headline(reason: request.operationPrompt)
        let password = { AuthenticationResult(self.verifyPassword(reason: headline, cancellation: cancellation), factors: [.passcode]) }
        switch plan.mode {
        case .biometry:
            if let blocker = biometryBlocker() { return AuthenticationResult(blocker) }
            return AuthenticationResult(verifyFingerprint(reason: headline, prompter: configuration.prompter, cancellation: cancellation),
                                        factors: [.biometry])
        case .passcode:
            return password()
        case .biometryOrPasscode:
            guard biometryBlocker() == nil else { return password() }
            // Both at once: the first to succeed wins (FactorRace).
            _ = configuration.prompter.prompt(AuthenticationMessage(.info, headline), cancellation: cancellation)
            if cancellation.isCancelled { return AuthenticationResult(.appCancel) }
            let prompter = configuration.prompter
            return FactorRace.run(cancellation: cancellation, instructionWait: configuration.fingerprint?.callTimeout ?? 10,
                                  fingerprint: { own, shown in
                                      self.verifyFingerprint(reason: nil, prompter: NotifyingPrompter(base: prompter, shown: shown),
                                                             cancellation: own)
                                  },
                                  password: { own in self.verifyPassword(reason: nil, cancellation: own) })
        case .all:
            var factors: Set<AuthenticationFactor> = []
            var pendingHeadline: String? = headline
            if plan.biometry {
                if let blocker = biometryBlocker() { return AuthenticationResult(blocker) }
                let outcome = verifyFingerprint(reason: headline, prompter: configuration.prompter, cancellation: cancellation)
                if outcome != .success { return AuthenticationResult(outcome) }
                factors.insert(.biometry)
                pendingHeadline = nil
            }
            guard plan.passcode else { return AuthenticationResult(.success, factors: factors) }
            let outcome = verifyPassword(reason: pendingHeadline, cancellation: cancellation)
            return AuthenticationResult(outcome, factors: factors.union([.passcode]))
        }
    }

    // MARK: - The methods

    /// polkit's configuration when its agent is to be asked instead of the terminal now.
    private var desktopPolkit: PolkitConfiguration? {
        guard let polkit = configuration.polkit, polkit.isActive else { return nil }
        return polkit
    }

    /// Why biometry cannot be attempted now, nil when it can.
    private func biometryBlocker() -> AuthenticationOutcome? {
        guard let reader else { return .notAvailable }
        switch reader.availability() {
        case .ready: return isBiometryLockedOut ? .lockout : nil
        case .notEnrolled: return .notEnrolled
        case .noDevice, .noDaemon: return .notAvailable
        }
    }

    private func verifyFingerprint(reason: String?, prompter: any AuthenticationPrompter,
                                   cancellation: AuthenticationCancellation) -> AuthenticationOutcome {
        guard let reader else { return .notAvailable }
        for attempt in 1...configuration.fingerprintAttempts {
            if cancellation.isCancelled { return .appCancel }
            switch reader.verify(reason: attempt == 1 ? reason : nil, prompter: prompter, cancellation: cancellation) {
            case .match:
                consecutiveMisses.withLock { $0 = 0 }
                return .success
            case .noMatch:
                let misses = consecutiveMisses.withLock { count -> Int in count += 1; return count }
                if misses >= configuration.lockoutThreshold {
                    _ = prompter.prompt(AuthenticationMessage(.error, "Too many failed fingerprint attempts: biometry is locked until you enter your password."), cancellation: cancellation)
                    return .lockout
                }
                if attempt < configuration.fingerprintAttempts {
                    _ = prompter.prompt(AuthenticationMessage(.error, "Fingerprint not recognized, try again."), cancellation: cancellation)
                }
            case .cancelled: return .appCancel
            case .notEnrolled: return .notEnrolled
            case .noDevice, .unavailable: return .notAvailable
            case .claimedByAnotherProcess, .disconnected, .timedOut: return .systemCancel
            }
        }
        return .failed
    }

    private func verifyPassword(reason: String?, cancellation: AuthenticationCancellation) -> AuthenticationOutcome {
        let result = PAMAuthentication.authenticate(configuration.pam, reason: reason, prompter: configuration.prompter, cancellation: cancellation)
        if result.outcome == .success { consecutiveMisses.withLock { $0 = 0 } }  // the password unlocks biometry
        return result.outcome
    }

    /// What a set of access-control flags asks for.
    private struct Plan {
        enum Mode { case biometry, passcode, biometryOrPasscode, all }
        var biometry = false
        var passcode = false
        var unsupported = false
        var mode: Mode = .all

        init(_ flags: AccessControlFlags) {
            let needed = flags.intersection(.authenticationFlags)
            biometry = !needed.intersection([.biometryAny, .biometryCurrentSet]).isEmpty
            passcode = needed.contains(.devicePasscode)
            let presence = needed.contains(.userPresence)
            let others = needed.subtracting([.biometryAny, .biometryCurrentSet, .devicePasscode, .userPresence])
            if flags.contains(.or) {
                // Any one of them: the unsupported ones are simply not offered.
                let anyBiometry = biometry || presence
                let anyPasscode = passcode || presence
                if !anyBiometry && !anyPasscode { unsupported = true; return }
                mode = anyBiometry && anyPasscode ? .biometryOrPasscode : (anyBiometry ? .biometry : .passcode)
                return
            }
            if !others.isEmpty { unsupported = true; return }
            if presence && !biometry && !passcode { mode = .biometryOrPasscode; return }
            // Presence together with a required method is proven by that method.
            if biometry && !passcode { mode = .biometry } else if passcode && !biometry { mode = .passcode } else { mode = .all }
        }
    }
}

/// The fingerprint side's prompter in a ``FactorRace``: tells the race once each message has been shown, so the
/// password prompt comes after the reader's instruction.
private struct NotifyingPrompter: AuthenticationPrompter {
    let base: any AuthenticationPrompter
    let shown: @Sendable () -> Void

    var isInteractive: Bool { base.isInteractive }

    func prompt(_ message: AuthenticationMessage, cancellation: AuthenticationCancellation) -> String? {
        let answer = base.prompt(message, cancellation: cancellation)
        shown()
        return answer
    }
}
