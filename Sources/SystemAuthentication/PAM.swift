#if canImport(Glibc)
import CPAM
import Dispatch
import Foundation
import Glibc
import KeychainEngine

// MARK: - Configuration

/// Why a ``PAMConfiguration`` cannot be used.
public enum PAMConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// ``PAMConfiguration/maximumAttempts`` is outside ``PAMConfiguration/attemptRange`` (1...10).
    case maximumAttemptsOutOfRange(Int)
    /// ``PAMConfiguration/service`` is empty, contains a `/` (Linux-PAM would silently use the last path component)
    /// or a NUL byte.
    case invalidService(String)
    /// ``PAMConfiguration/user`` is empty or contains a NUL byte.
    case invalidUser(String)
    /// ``PAMConfiguration/configurationDirectory`` is empty or contains a NUL byte.
    case invalidConfigurationDirectory(String)

    /// What is wrong, for a person (`keystone` prints it).
    public var description: String {
        switch self {
        case .maximumAttemptsOutOfRange(let n):
            return "maximumAttempts \(n) is outside \(PAMConfiguration.attemptRange.lowerBound)...\(PAMConfiguration.attemptRange.upperBound)"
        case .invalidService(let s): return "invalid PAM service name \"\(s)\" (empty, contains \"/\" or NUL)"
        case .invalidUser(let u): return "invalid user name \"\(u)\" (empty or contains NUL)"
        case .invalidConfigurationDirectory(let d): return "invalid PAM configuration directory \"\(d)\" (empty or contains NUL)"
        }
    }
}

/// How ``PAMAuthentication/authenticate(_:reason:prompter:cancellation:)`` asks PAM: which service, which user, how
/// many tries.
///
/// The values are checked by ``init(service:user:configurationDirectory:maximumAttempts:)`` and ``validate()``; an
/// invalid configuration that reaches ``PAMAuthentication/authenticate(_:reason:prompter:cancellation:)`` (its
/// properties are `var`) is refused there with `AuthenticationOutcome.notAvailable`, never silently corrected.
public struct PAMConfiguration: Sendable, Hashable {
    /// The service ``service`` defaults to: `/etc/pam.d/keystone`, which `keystone install-pam` writes.
    public static let defaultService = "keystone"
    /// The valid values of ``maximumAttempts``.
    public static let attemptRange: ClosedRange<Int> = 1...10

    /// The PAM service name: the file in the configuration directory that holds the stack.
    ///
    /// When no file of that name exists, Linux-PAM uses the `other` service (on Debian: `@include common-auth`
    /// among others; on some systems `pam_deny`).
    public var service: String
    /// The user whose password is checked; nil: the effective user (`getpwuid_r(geteuid())`), the current user's
    /// own credentials, as `LAContext`'s device-owner policy asks for.
    ///
    /// - Important: A process running as root can check any user's password (pam_unix reads `/etc/shadow`). A
    ///   normal user's pam_unix can only check its own password, through the setuid helper `unix_chkpwd`; asking for
    ///   another user fails.
    public var user: String?
    /// The directory the service file is read from; nil: `/etc/pam.d` (`pam_start`). Otherwise
    /// `pam_start_confdir` (Linux-PAM 1.4 or later) is used; tests point it at a temporary directory.
    public var configurationDirectory: String?
    /// How many times the password is asked before the authentication fails (sudo's `passwd_tries`), 1...10;
    /// default 3.
    public var maximumAttempts: Int

    /// A configuration; every argument has the default a device-owner authentication uses.
    ///
    /// - Throws: ``PAMConfigurationError`` when a value is invalid (``maximumAttempts`` outside 1...10, an empty or
    ///   path-like service name, an empty user or directory).
    public init(service: String = PAMConfiguration.defaultService, user: String? = nil,
                configurationDirectory: String? = nil, maximumAttempts: Int = 3) throws(PAMConfigurationError) {
        self.service = service
        self.user = user
        self.configurationDirectory = configurationDirectory
        self.maximumAttempts = maximumAttempts
        try validate()
    }

    /// The defaults: service `keystone`, the effective user, `/etc/pam.d`, three attempts (valid by construction).
    public static var standard: PAMConfiguration {
        PAMConfiguration(unchecked: defaultService, user: nil, configurationDirectory: nil, maximumAttempts: 3)
    }

    private init(unchecked service: String, user: String?, configurationDirectory: String?, maximumAttempts: Int) {
        self.service = service
        self.user = user
        self.configurationDirectory = configurationDirectory
        self.maximumAttempts = maximumAttempts
    }

    /// Checks every value.
    ///
    /// - Throws: ``PAMConfigurationError`` for the first invalid value.
    public func validate() throws(PAMConfigurationError) {
        guard Self.attemptRange.contains(maximumAttempts) else {
            throw .maximumAttemptsOutOfRange(maximumAttempts)
        }
        guard !service.isEmpty, !service.contains("/"), !service.contains("\0") else { throw .invalidService(service) }
        if let user, user.isEmpty || user.contains("\0") { throw .invalidUser(user) }
        if let configurationDirectory, configurationDirectory.isEmpty || configurationDirectory.contains("\0") {
            throw .invalidConfigurationDirectory(configurationDirectory)
        }
    }
}

// MARK: - Result

/// How a PAM authentication ended.
///
/// Holds nothing the person typed: the outcome, PAM's status, the number of attempts and the messages the PAM
/// modules showed (never an answer).
public struct PAMResult: Sendable, Equatable, CustomStringConvertible {
    /// What the authentication ended with, mapped from ``pamStatus`` (see ``PAMAuthentication``).
    public let outcome: AuthenticationOutcome
    /// The last PAM return code (`PAM_SUCCESS`, `PAM_AUTH_ERR`, ...): of `pam_authenticate`, or of
    /// `pam_start` when that failed.
    ///
    /// When PAM was not reached at all: `PAM_ABORT` if the cancellation was cancelled before the start,
    /// `PAM_SYSTEM_ERR` if the configuration was invalid or the effective user has no account entry.
    public let pamStatus: Int32
    /// The name of ``pamStatus`` (`"PAM_AUTH_ERR"`).
    public let pamStatusName: String
    /// How many times `pam_authenticate` was called.
    public let attempts: Int
    /// The info and error messages the PAM modules sent (pam_faillock's “The account is locked due to 3 failed
    /// logins.”), in order. Never an answer, and not Keystone's own messages (the reason, “Wrong password, try
    /// again.”).
    public let moduleMessages: [AuthenticationMessage]
    /// Why PAM could not be used (`pam_start` failed, invalid configuration), or nil.
    public let detail: String?
    /// The service and user that were asked (for ``description``).
    public let service: String
    /// The user whose password was checked, nil when it could not be determined.
    public let user: String?

    /// A result; ``pamStatusName`` is derived from `pamStatus`. For composed authenticators and their tests: PAM
    /// results normally come from ``PAMAuthentication/authenticate(_:reason:prompter:cancellation:)``.
    public init(outcome: AuthenticationOutcome, pamStatus: Int32, attempts: Int,
                moduleMessages: [AuthenticationMessage] = [], detail: String? = nil,
                service: String = PAMConfiguration.defaultService, user: String? = nil) {
        self.outcome = outcome
        self.pamStatus = pamStatus
        self.pamStatusName = PAMAuthentication.statusName(pamStatus)
        self.attempts = attempts
        self.moduleMessages = moduleMessages
        self.detail = detail
        self.service = service
        self.user = user
    }

    /// A one-line summary: outcome, status, attempts, service, user, detail. Never contains what the person
    /// typed (module messages are counted, not quoted).
    public var description: String {
        var text = "PAM \(outcome.rawValue) (\(pamStatusName)) after \(attempts) attempt\(attempts == 1 ? "" : "s")"
        text += ", service \"\(service)\""
        if let user { text += ", user \"\(user)\"" }
        if !moduleMessages.isEmpty {
            text += ", \(moduleMessages.count) module message\(moduleMessages.count == 1 ? "" : "s")"
        }
        if let detail { text += ": \(detail)" }
        return text
    }
}

// MARK: - Authentication

/// The device owner's login password, checked by PAM (Linux-PAM's `pam_authenticate`).
///
/// One ``authenticate(_:reason:prompter:cancellation:)`` is one PAM transaction: `pam_start` (or
/// `pam_start_confdir`), up to ``PAMConfiguration/maximumAttempts`` calls of `pam_authenticate` with sudo's retry
/// (after a wrong password, “Wrong password, try again.” and ask again), and `pam_end` always.
///
/// Decision: only the `auth` stack runs — no `pam_acct_mgmt`, no `pam_setcred`, no session. The question is
/// “is this the device owner” (Apple's `deviceOwnerAuthentication`), not “may this user log in now”: an expired
/// account or password still proves who the person is, no credentials (Kerberos tickets, keyrings) are established,
/// and nothing is left to clean up. A stack that wants account checks can put them in its `auth` lines
/// (pam_faillock's `preauth`, for example).
///
/// Status mapping (the last `pam_authenticate` status, after Keystone's own stop reasons):
///
/// | PAM status | Outcome |
/// |---|---|
/// | `PAM_SUCCESS` | `AuthenticationOutcome.success` |
/// | `PAM_AUTH_ERR`, `PAM_CRED_INSUFFICIENT`, `PAM_PERM_DENIED` | `AuthenticationOutcome.failed` |
/// | `PAM_MAXTRIES` after an answered prompt (pam_unix's third wrong password in one transaction) | `AuthenticationOutcome.failed` |
/// | `PAM_MAXTRIES` otherwise (a module refused before asking) | `AuthenticationOutcome.lockout` |
/// | `PAM_USER_UNKNOWN` | `AuthenticationOutcome.passcodeNotSet` (no usable login password for the user) |
/// | `PAM_AUTHINFO_UNAVAIL` | `AuthenticationOutcome.notAvailable` |
/// | any failure after the cancellation was cancelled | `AuthenticationOutcome.appCancel` |
/// | any failure after a prompt met a non-interactive prompter | `AuthenticationOutcome.notInteractive` |
/// | `PAM_CONV_ERR` otherwise (the prompter answered nil) | `AuthenticationOutcome.userCancel` |
/// | `PAM_ABORT` otherwise | `AuthenticationOutcome.systemCancel` |
/// | `pam_start` failed (no such configuration directory, no service and no `other` file) | `AuthenticationOutcome.notAvailable` |
/// | anything else | `AuthenticationOutcome.failed` |
///
/// Keystone's own stop reasons win over the status PAM gives (a stack like Debian's `common-auth` turns a
/// conversation error into `PAM_AUTH_ERR` through `pam_deny`), except that a `PAM_SUCCESS` despite a refused
/// prompt (an `optional` module) is a success — unless the app cancelled, which always ends in
/// `AuthenticationOutcome.appCancel`.
///
/// - Important: The PAM modules may log every attempt, failed or not, to syslog (`/var/log/auth.log`, the
///   journal) with the user name; pam_faillock and pam_tally count failures across processes and may lock the
///   account for every login, not only Keystone's.
/// - Important: A process running as root can check any user's password; a normal user's pam_unix can only check
///   its own, through the setuid helper `unix_chkpwd` (which itself slows down repeated failures).
public enum PAMAuthentication {
    /// The error message shown between attempts after a wrong password.
    public static let retryMessage = "Wrong password, try again."

    /// Checks the password of ``PAMConfiguration/user`` (default: the effective user) with the PAM service of
    /// `configuration`, asking `prompter`.
    ///
    /// Blocks the calling thread until the authentication ends (the caller runs it on a dedicated thread, never on
    /// Swift's cooperative pool). The prompter is called on this thread, from inside `pam_authenticate`.
    ///
    /// - `reason`, when non-nil, is shown as an ``AuthenticationMessage/Style/info`` message before the first
    ///   thing PAM shows or asks.
    /// - A wrong password (`PAM_AUTH_ERR` after a prompt was answered) is retried up to
    ///   ``PAMConfiguration/maximumAttempts`` times, with ``retryMessage`` as an ``AuthenticationMessage/Style/error``
    ///   message before each retry. A failure without any answered prompt (`pam_deny`) is not retried, and a module
    ///   may end the retries earlier with `PAM_MAXTRIES` (pam_unix allows three wrong passwords per transaction).
    /// - A prompter that is not ``AuthenticationPrompter/isInteractive`` is never asked: a prompt ends the
    ///   authentication with `AuthenticationOutcome.notInteractive`; a stack that asks nothing (`pam_permit`) still
    ///   succeeds.
    /// - Cancelling `cancellation` (before or during) ends it with `AuthenticationOutcome.appCancel`: the prompter
    ///   must return nil promptly, and PAM's fail delay is interrupted at once.
    /// - `PAM_DISALLOW_NULL_AUTHTOK` is passed: an account with an empty password does not authenticate through
    ///   pam_unix even with `nullok`.
    ///
    /// - Important: PAM modules ask for a delay after a failure (pam_unix: about 2 s unless `nodelay`;
    ///   pam_faildelay). Keystone installs a `PAM_FAIL_DELAY` callback so PAM does not sleep itself, and waits the
    ///   delay on this thread where cancellation interrupts it; the delay is still waited, as a brake on guessing.
    /// - Important: The password goes from the prompter to PAM in a `malloc`ed C string that PAM owns and wipes; the
    ///   buffers Keystone frees itself are zeroed first. Swift's own copy of the answer (a `String`) cannot be wiped.
    ///   Nothing typed appears in the result, its description or any log.
    public static func authenticate(_ configuration: PAMConfiguration, reason: String?,
                                    prompter: any AuthenticationPrompter,
                                    cancellation: AuthenticationCancellation) -> PAMResult {
        let service = configuration.service
        do {
            try configuration.validate()
        } catch {
            return PAMResult(outcome: .notAvailable, pamStatus: PAM_SYSTEM_ERR, attempts: 0,
                             detail: "invalid configuration: \(error)", service: service, user: configuration.user)
        }
        if cancellation.isCancelled {
            return PAMResult(outcome: .appCancel, pamStatus: PAM_ABORT, attempts: 0,
                             detail: "cancelled before PAM started", service: service, user: configuration.user)
        }
        guard let user = configuration.user ?? effectiveUserName() else {
            return PAMResult(outcome: .notAvailable, pamStatus: PAM_SYSTEM_ERR, attempts: 0,
                             detail: "the effective user id \(geteuid()) has no account entry", service: service)
        }

        let conversation = Conversation(prompter: prompter, cancellation: cancellation, reason: reason)
        // Cancelling wakes a fail delay at once (the prompter watches the cancellation itself).
        let wake = conversation.delayWake
        let token = cancellation.onCancel { wake.signal() }
        defer { cancellation.removeHandler(token) }

        let appdata = Unmanaged.passUnretained(conversation).toOpaque()
        let pamConversation = UnsafeMutablePointer<pam_conv>.allocate(capacity: 1)
        pamConversation.initialize(to: pam_conv(conv: { count, messages, responses, appdata in
            guard let appdata else { return PAM_CONV_ERR }
            return Unmanaged<Conversation>.fromOpaque(appdata).takeUnretainedValue()
                .converse(count: count, messages: messages, responses: responses)
        }, appdata_ptr: appdata))
        defer { pamConversation.deallocate() }

        var handle: OpaquePointer?
        let started: Int32
        if let directory = configuration.configurationDirectory {
            guard let startConfdir = pamStartConfdir else {
                return PAMResult(outcome: .notAvailable, pamStatus: PAM_SYSTEM_ERR, attempts: 0,
                                 detail: "a configuration directory needs pam_start_confdir (Linux-PAM 1.4 or later)",
                                 service: service, user: user)
            }
            started = startConfdir(service, user, pamConversation, directory, &handle)
        } else {
            started = pam_start(service, user, pamConversation, &handle)
        }
        guard started == PAM_SUCCESS, let handle else {
            let place = configuration.configurationDirectory ?? "/etc/pam.d"
            if let handle { pam_end(handle, started) }
            return PAMResult(outcome: .notAvailable, pamStatus: started, attempts: 0,
                             detail: "pam_start failed: \(statusName(started)) (\(statusText(started))); is there a "
                                + "\"\(service)\" or \"other\" service in \(place)?",
                             service: service, user: user)
        }

        // PAM_FAIL_DELAY: PAM calls this instead of sleeping, with the conversation's appdata.
        let delay: @convention(c) (Int32, UInt32, UnsafeMutableRawPointer?) -> Void = { status, microseconds, appdata in
            guard let appdata else { return }
            Unmanaged<Conversation>.fromOpaque(appdata).takeUnretainedValue()
                .failDelay(status: status, microseconds: microseconds)
        }
        var status = pam_set_item(handle, PAM_FAIL_DELAY, unsafeBitCast(delay, to: UnsafeRawPointer.self))
        if status == PAM_SUCCESS, let requester = effectiveUserName() {
            // The requesting user, as sudo and su set it: modules log it (“ruser=”).
            status = pam_set_item(handle, PAM_RUSER, requester)
        }
        var attempts = 0
        if status == PAM_SUCCESS {
            while attempts < configuration.maximumAttempts {
                if cancellation.isCancelled {
                    conversation.stop = .appCancel
                    break
                }
                conversation.answeredThisAttempt = 0
                attempts += 1
                status = pam_authenticate(handle, Int32(bitPattern: PAM_DISALLOW_NULL_AUTHTOK))
                if status == PAM_SUCCESS || conversation.stop != nil { break }
                guard status == PAM_AUTH_ERR, conversation.answeredThisAttempt > 0,
                      attempts < configuration.maximumAttempts else { break }
                conversation.show(AuthenticationMessage(.error, retryMessage))
            }
        }
        pam_end(handle, status)

        let answered = conversation.answeredThisAttempt > 0
        return PAMResult(outcome: outcome(status: status, stop: conversation.stop, answered: answered), pamStatus: status,
                         attempts: attempts, moduleMessages: conversation.moduleMessages,
                         detail: conversation.stop == .conversationFailed ? "the PAM conversation failed" : nil,
                         service: service, user: user)
    }

    /// The service file `keystone install-pam` writes, for the system whose PAM configuration is in `pamDirectory`.
    ///
    /// - Returns: a comment line and `@include common-auth` when `<pamDirectory>/common-auth` exists (Debian,
    ///   Ubuntu); a comment line and `auth include system-auth` when `system-auth` exists (Fedora, Arch, openSUSE);
    ///   nil when neither exists (the caller reports that it cannot tell how this system checks passwords).
    public static func serviceFileContents(pamDirectory: String = "/etc/pam.d") -> String? {
        let header = "# Keystone (keystone install-pam): the login password behind LocalAuthentication's device-owner authentication.\n"
        let directory = pamDirectory.hasSuffix("/") ? pamDirectory : pamDirectory + "/"
        if FileManager.default.fileExists(atPath: directory + "common-auth") {
            return header + "@include common-auth\n"
        }
        if FileManager.default.fileExists(atPath: directory + "system-auth") {
            return header + "auth include system-auth\n"
        }
        return nil
    }

    /// The name of a PAM return code (`PAM_AUTH_ERR`), or `PAM_<n>` for a code Linux-PAM does not define.
    public static func statusName(_ status: Int32) -> String {
        statusNames[status] ?? "PAM_\(status)"
    }

    // MARK: Internals

    /// Why Keystone itself stopped an authentication.
    enum Stop: Equatable {
        /// The cancellation was cancelled.
        case appCancel
        /// A prompt met a non-interactive prompter.
        case notInteractive
        /// The prompter answered nil.
        case userCancel
        /// A message Keystone cannot answer (binary prompt, bad message count) or no memory.
        case conversationFailed
    }

    /// The status table of ``PAMAuthentication``.
    ///
    /// `answered`: whether a prompt was answered during the last `pam_authenticate`. pam_unix counts wrong passwords
    /// per PAM transaction and answers its third with `PAM_MAXTRIES`: that is a wrong password, not a locked account.
    static func outcome(status: Int32, stop: Stop?, answered: Bool) -> AuthenticationOutcome {
        if stop == .appCancel { return .appCancel }
        if status == PAM_SUCCESS { return .success }
        switch stop {
        case .notInteractive: return .notInteractive
        case .userCancel: return .userCancel
        case .appCancel, .conversationFailed, nil: break
        }
        switch status {
        case PAM_AUTH_ERR, PAM_CRED_INSUFFICIENT, PAM_PERM_DENIED: return .failed
        case PAM_MAXTRIES: return answered ? .failed : .lockout
        case PAM_USER_UNKNOWN: return .passcodeNotSet
        case PAM_AUTHINFO_UNAVAIL: return .notAvailable
        case PAM_CONV_ERR: return .userCancel
        case PAM_ABORT: return .systemCancel
        default: return .failed
        }
    }

    private static let statusNames: [Int32: String] = [
        PAM_SUCCESS: "PAM_SUCCESS", PAM_OPEN_ERR: "PAM_OPEN_ERR", PAM_SYMBOL_ERR: "PAM_SYMBOL_ERR",
        PAM_SERVICE_ERR: "PAM_SERVICE_ERR", PAM_SYSTEM_ERR: "PAM_SYSTEM_ERR", PAM_BUF_ERR: "PAM_BUF_ERR",
        PAM_PERM_DENIED: "PAM_PERM_DENIED", PAM_AUTH_ERR: "PAM_AUTH_ERR",
        PAM_CRED_INSUFFICIENT: "PAM_CRED_INSUFFICIENT", PAM_AUTHINFO_UNAVAIL: "PAM_AUTHINFO_UNAVAIL",
        PAM_USER_UNKNOWN: "PAM_USER_UNKNOWN", PAM_MAXTRIES: "PAM_MAXTRIES",
        PAM_NEW_AUTHTOK_REQD: "PAM_NEW_AUTHTOK_REQD", PAM_ACCT_EXPIRED: "PAM_ACCT_EXPIRED",
        PAM_SESSION_ERR: "PAM_SESSION_ERR", PAM_CRED_UNAVAIL: "PAM_CRED_UNAVAIL", PAM_CRED_EXPIRED: "PAM_CRED_EXPIRED",
        PAM_CRED_ERR: "PAM_CRED_ERR", PAM_NO_MODULE_DATA: "PAM_NO_MODULE_DATA", PAM_CONV_ERR: "PAM_CONV_ERR",
        PAM_AUTHTOK_ERR: "PAM_AUTHTOK_ERR", PAM_AUTHTOK_RECOVERY_ERR: "PAM_AUTHTOK_RECOVERY_ERR",
        PAM_AUTHTOK_LOCK_BUSY: "PAM_AUTHTOK_LOCK_BUSY", PAM_AUTHTOK_DISABLE_AGING: "PAM_AUTHTOK_DISABLE_AGING",
        PAM_TRY_AGAIN: "PAM_TRY_AGAIN", PAM_IGNORE: "PAM_IGNORE", PAM_ABORT: "PAM_ABORT",
        PAM_AUTHTOK_EXPIRED: "PAM_AUTHTOK_EXPIRED", PAM_MODULE_UNKNOWN: "PAM_MODULE_UNKNOWN",
        PAM_BAD_ITEM: "PAM_BAD_ITEM", PAM_CONV_AGAIN: "PAM_CONV_AGAIN", PAM_INCOMPLETE: "PAM_INCOMPLETE",
    ]

    /// Linux-PAM's text for a status (its `pam_strerror` ignores the handle).
    private static func statusText(_ status: Int32) -> String {
        guard let text = pam_strerror(nil, status) else { return "unknown" }
        return String(cString: text)
    }

    private typealias StartConfdir = @convention(c) (
        UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<pam_conv>?, UnsafePointer<CChar>?,
        UnsafeMutablePointer<OpaquePointer?>?
    ) -> Int32

    /// `pam_start_confdir`, looked up at run time: Linux-PAM before 1.4 has no such symbol, and linking to it would
    /// keep the whole library from loading there.
    private static var pamStartConfdir: StartConfdir? {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pam_start_confdir") else { return nil }
        return unsafeBitCast(symbol, to: StartConfdir.self)
    }

    /// The effective user's login name (`getpwuid_r(geteuid())`).
    static func effectiveUserName() -> String? {
        var size = max(sysconf(Int32(_SC_GETPW_R_SIZE_MAX)), 1024)
        while size <= 1 << 20 {
            var entry = passwd()
            var found: UnsafeMutablePointer<passwd>?
            var buffer = [CChar](repeating: 0, count: size)
            let error = getpwuid_r(geteuid(), &entry, &buffer, buffer.count, &found)
            if error == ERANGE { size *= 2; continue }
            guard error == 0, found != nil, let name = entry.pw_name else { return nil }
            return String(cString: name)
        }
        return nil
    }
}

// MARK: - The conversation

/// The state of one authentication's PAM conversation: the `appdata_ptr` of its `pam_conv` and of the
/// `PAM_FAIL_DELAY` callback.
///
/// Used only on the authenticating thread (PAM calls the conversation synchronously from `pam_authenticate`),
/// except `delayWake`, which the cancellation handler signals.
private final class Conversation {
    let prompter: any AuthenticationPrompter
    let cancellation: AuthenticationCancellation
    let interactive: Bool
    /// The reason, until it has been shown.
    var pendingReason: String?
    var moduleMessages: [AuthenticationMessage] = []
    var stop: PAMAuthentication.Stop?
    /// Prompts answered during the current `pam_authenticate`.
    var answeredThisAttempt = 0
    let delayWake = DispatchSemaphore(value: 0)

    init(prompter: any AuthenticationPrompter, cancellation: AuthenticationCancellation, reason: String?) {
        self.prompter = prompter
        self.cancellation = cancellation
        self.interactive = prompter.isInteractive
        self.pendingReason = reason
    }

    /// Shows a message that wants no answer (the reason first, if still pending).
    func show(_ message: AuthenticationMessage) {
        guard interactive, !cancellation.isCancelled else { return }
        showReason()
        _ = prompter.prompt(message, cancellation: cancellation)
    }

    private func showReason() {
        if let reason = pendingReason {
            pendingReason = nil
            _ = prompter.prompt(AuthenticationMessage(.info, reason), cancellation: cancellation)
        }
    }

    /// The conversation function's body. On any failure every answer allocated so far is zeroed and freed, and
    /// `PAM_CONV_ERR` is returned.
    func converse(count: Int32, messages: UnsafeMutablePointer<UnsafePointer<pam_message>?>?,
                  responses: UnsafeMutablePointer<UnsafeMutablePointer<pam_response>?>?) -> Int32 {
        guard !cancellation.isCancelled else {
            stop = .appCancel
            return PAM_CONV_ERR
        }
        guard count > 0, count <= PAM_MAX_NUM_MSG, let messages, let responses,
              let replies = calloc(Int(count), MemoryLayout<pam_response>.stride)?
                .bindMemory(to: pam_response.self, capacity: Int(count)) else {
            stop = stop ?? .conversationFailed
            return PAM_CONV_ERR
        }
        func fail(_ reason: PAMAuthentication.Stop) -> Int32 {
            if stop == nil { stop = reason }
            for index in 0..<Int(count) {
                if let answer = replies[index].resp {
                    explicit_bzero(answer, strlen(answer))
                    free(answer)
                }
            }
            free(replies)
            return PAM_CONV_ERR
        }
        for index in 0..<Int(count) {
            guard let message = messages[index]?.pointee else { return fail(.conversationFailed) }
            let text = message.msg.map { String(cString: $0) } ?? ""
            let style: AuthenticationMessage.Style
            switch message.msg_style {
            case PAM_PROMPT_ECHO_OFF: style = .secret
            case PAM_PROMPT_ECHO_ON: style = .visible
            case PAM_ERROR_MSG: style = .error
            case PAM_TEXT_INFO: style = .info
            default: return fail(.conversationFailed)  // PAM_BINARY_PROMPT and anything unknown
            }
            let shown = AuthenticationMessage(style, text)
            guard shown.expectsAnswer else {
                moduleMessages.append(shown)
                show(shown)
                continue
            }
            guard interactive else { return fail(.notInteractive) }
            showReason()
            if cancellation.isCancelled { return fail(.appCancel) }
            guard let answer = prompter.prompt(shown, cancellation: cancellation) else {
                return fail(cancellation.isCancelled ? .appCancel : .userCancel)
            }
            if cancellation.isCancelled { return fail(.appCancel) }
            guard let copy = strdup(answer) else { return fail(.conversationFailed) }
            replies[index].resp = copy
            replies[index].resp_retcode = 0
            answeredThisAttempt += 1
        }
        responses.pointee = replies
        return PAM_SUCCESS
    }

    /// The `PAM_FAIL_DELAY` callback: waits the delay PAM asks for after a failure, woken at once by cancellation.
    /// No delay after a success or when Keystone itself stopped the attempt (nothing was guessed).
    func failDelay(status: Int32, microseconds: UInt32) {
        guard status != PAM_SUCCESS, microseconds > 0, stop == nil, !cancellation.isCancelled else { return }
        _ = delayWake.wait(timeout: .now() + .microseconds(Int(microseconds)))
    }
}
#endif
