import Foundation
import KeychainEngine

/// One thing an authentication shows or asks: a PAM conversation message, a fingerprint reader's instruction.
///
/// Holds no secret: it is the question, never the answer.
public struct AuthenticationMessage: Sendable, Hashable, CustomStringConvertible {
    /// How the message is shown and whether it wants an answer.
    public enum Style: String, Sendable, Hashable {
        /// Asks for a secret, read without echo (`PAM_PROMPT_ECHO_OFF`: a password).
        case secret
        /// Asks for an answer shown as typed (`PAM_PROMPT_ECHO_ON`: a user name, an OTP a module asks for).
        case visible
        /// Information, no answer (`PAM_TEXT_INFO`, “Place your finger on the reader”).
        case info
        /// An error, no answer (`PAM_ERROR_MSG`, “Sorry, try again”, a PAM module's lockout notice).
        case error
    }

    /// How the message is shown.
    public let style: Style
    /// The text, as the PAM module or the reader gave it.
    public let text: String

    public init(_ style: Style, _ text: String) {
        self.style = style
        self.text = text
    }

    /// Whether the message wants an answer (``Style/secret`` or ``Style/visible``).
    public var expectsAnswer: Bool { style == .secret || style == .visible }

    public var description: String { "\(style.rawValue): \(text)" }
}

/// Talks to the person an authentication is for: shows messages and asks for answers.
///
/// The contract:
/// - ``prompt(_:cancellation:)`` may block (it runs on the authentication's own thread, never on Swift's
///   cooperative pool) but must return promptly once `cancellation` is cancelled, with nil.
/// - For a message that ``AuthenticationMessage/expectsAnswer``, nil means the person cancelled; for info and
///   error messages the return value is ignored.
/// - ``isInteractive`` is false when no person can be reached (no terminal): the authentication then ends at
///   once with `notInteractive` instead of waiting (or, in a desktop session, asks through polkit's agent).
/// - It may be called from two threads at once: when the finger and the password are asked together, the reader's
///   messages (“Fingerprint not recognized, try again.”) arrive while the password question waits. Each call has its
///   own cancellation: the losing side's fires when the other side succeeded, and its question must then return nil.
///
/// - Important: The answer to a ``AuthenticationMessage/Style/secret`` message is a password: a conformer must
///   not log, store or echo it.
public protocol AuthenticationPrompter: Sendable {
    /// Whether a person can be asked now.
    var isInteractive: Bool { get }

    /// Shows `message`; returns the person's answer when it expects one, nil when they cancelled (or when
    /// `cancellation` was cancelled).
    func prompt(_ message: AuthenticationMessage, cancellation: AuthenticationCancellation) -> String?
}
