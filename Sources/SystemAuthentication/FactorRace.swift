import Dispatch
import Foundation
import KeychainEngine

/// The fingerprint and the password asked at once, as gdm does: the person may touch the reader while the password
/// prompt waits, or type the password while the reader waits.
///
/// Each side runs on a thread of its own (both block: fprintd's verification, PAM's conversation) with a
/// cancellation of its own, linked to the caller's:
/// - The first success wins: the other side is cancelled and waited for, so it ends cleanly before the result is
///   returned — a waiting password prompt returns nil and PAM's conversation ends with `PAM_CONV_ERR` (`pam_end`
///   follows); a waiting verification gets fprintd's `VerifyStop` and `Release`.
/// - A failure of one side (a finger that does not match after the allowed attempts, biometry locked out, the reader
///   gone, fprintd's verify timeout) does not end the other: the result waits for both.
/// - The person cancelling (the prompter answered nil: `userCancel`) ends both, as a Cancel button does.
/// - The caller's cancellation (`LAContext.invalidate()`) cancels both; the result is `appCancel`.
///
/// The combined outcome when neither succeeded (decision): `appCancel` if the caller cancelled; `userCancel` if the
/// person cancelled either prompt; `failed` if either side saw wrong credentials (a finger that did not match, a wrong
/// password); else the password's outcome (`lockout` for a PAM lockout, `systemCancel`, `passcodeNotSet`,
/// `notAvailable`), since the password is the factor that always stands in for the finger.
enum FactorRace {
    /// Runs `fingerprint` and `password` at once; each gets a cancellation of its own and must end promptly when it
    /// fires. `fingerprintShown` is what the fingerprint side calls once the person has been told to touch the reader
    /// (or once it ended): the password side waits for it, at most `instructionWait` seconds, so the terminal shows
    /// the reader's instruction before the password prompt rather than in the middle of it.
    static func run(cancellation: AuthenticationCancellation, instructionWait: TimeInterval,
                    fingerprint: @escaping @Sendable (_ cancellation: AuthenticationCancellation, _ shown: @escaping @Sendable () -> Void) -> AuthenticationOutcome,
                    password: @escaping @Sendable (_ cancellation: AuthenticationCancellation) -> AuthenticationOutcome) -> AuthenticationResult {
        let fingerCancellation = AuthenticationCancellation()
        let passwordCancellation = AuthenticationCancellation()
        let token = cancellation.onCancel {
            fingerCancellation.cancel()
            passwordCancellation.cancel()
        }
        defer { cancellation.removeHandler(token) }

        let state = Locked<(finger: AuthenticationOutcome?, password: AuthenticationOutcome?)>((nil, nil))
        let ended = DispatchSemaphore(value: 0)
        let instructed = DispatchSemaphore(value: 0)
        let shown: @Sendable () -> Void = { instructed.signal() }

        let fingerThread = Thread {
            let outcome = fingerprint(fingerCancellation, shown)
            instructed.signal()
            state.withLock { $0.finger = outcome }
            ended.signal()
        }
        fingerThread.name = "keystone.fingerprint"
        let passwordThread = Thread {
            // The reader's instruction first (bounded: a hung fprintd never holds the password back for long).
            let wake = passwordCancellation.onCancel { instructed.signal() }
            _ = instructed.wait(timeout: .now() + .milliseconds(Int(max(0, instructionWait) * 1000)))
            passwordCancellation.removeHandler(wake)
            let outcome = passwordCancellation.isCancelled ? AuthenticationOutcome.appCancel : password(passwordCancellation)
            state.withLock { $0.password = outcome }
            ended.signal()
        }
        passwordThread.name = "keystone.password"
        fingerThread.start()
        passwordThread.start()

        var winner: AuthenticationFactor?
        var decided = false
        for _ in 0..<2 {
            ended.wait()
            guard !decided else { continue }
            let current = state.current
            if current.finger == .success {
                winner = .biometry
            } else if current.password == .success {
                winner = .passcode
            }
            let personCancelled = current.finger == .userCancel || current.password == .userCancel
            if winner != nil || personCancelled || cancellation.isCancelled {
                decided = true
                fingerCancellation.cancel()
                passwordCancellation.cancel()
            }
        }

        if let winner { return AuthenticationResult(.success, factors: [winner]) }
        if cancellation.isCancelled { return AuthenticationResult(.appCancel) }
        let outcomes = state.current
        let finger = outcomes.finger ?? .systemCancel
        let typed = outcomes.password ?? .systemCancel
        if finger == .userCancel || typed == .userCancel { return AuthenticationResult(.userCancel) }
        if finger == .failed || typed == .failed { return AuthenticationResult(.failed) }
        return AuthenticationResult(typed)
    }
}
