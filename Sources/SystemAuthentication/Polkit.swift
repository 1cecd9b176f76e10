import CFprintd
import Foundation
import KeychainEngine
#if canImport(Glibc)
import Glibc
#endif

/// Where and when ``PolkitAuthentication`` asks the desktop's polkit authentication agent.
public struct PolkitConfiguration: Sendable, Hashable {
    /// The action Keystone installs (``PolkitAuthentication/actionFileContents(owners:)``): `auth_self`, asked every
    /// time.
    public static let defaultActionID = "io.github.keystone.authenticate"

    /// When polkit is asked instead of the terminal.
    public enum Activation: Sendable, Hashable {
        /// When there is no terminal and the process runs in a desktop session (`DISPLAY` or `WAYLAND_DISPLAY` set):
        /// the default.
        case desktopSession
        /// Whenever there is no terminal (a session without `DISPLAY` whose polkit agent is `pkttyagent`, tests).
        case always
    }

    /// Whether the authorization request carries details (`polkit.message` naming the program and the reason,
    /// `program`, `reason`).
    public enum Details: Sendable, Hashable {
        /// Asked with details first; polkit accepts them only from root or a user the action file names as an owner
        /// (`org.freedesktop.policykit.owner`), and refuses anyone else's at once, without a dialog (“Only trusted
        /// callers (e.g. uid 0 or an action owner) can use CheckAuthorization() and pass details”): then asked again
        /// without, and the dialog shows the action's own message.
        case automatic
        /// Always (polkit refuses the request from an untrusted caller: ``PolkitResult/detail`` says so).
        case always
        /// Never: the dialog shows the action's message.
        case never
    }

    /// The bus polkit is on (`unix:path=…`); nil: the system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else
    /// `unix:path=/var/run/dbus/system_bus_socket`).
    public var busAddress: String?
    /// The polkit action asked for; default ``defaultActionID``.
    public var actionID: String
    /// When polkit is used; default ``Activation/desktopSession``.
    public var activation: Activation
    /// Whether the request carries the program and the reason; default ``Details/automatic``.
    public var details: Details
    /// The deadline of connecting to the bus and of each short D-Bus call, in seconds. Default 10.
    public var callTimeout: TimeInterval
    /// How long the person has to answer the dialog, in seconds, before the request is withdrawn
    /// (`AuthenticationOutcome.systemCancel`). Default 300.
    public var answerTimeout: TimeInterval
    /// A configuration; every argument has the default a desktop app uses (the system bus, Keystone's action, only in
    /// a desktop session, details when polkit accepts them, 10 s per call, 300 s for the person).
    public init(busAddress: String? = nil, actionID: String = PolkitConfiguration.defaultActionID,
                activation: Activation = .desktopSession, details: Details = .automatic, callTimeout: TimeInterval = 10,
                answerTimeout: TimeInterval = 300) {
        self.busAddress = busAddress
        self.actionID = actionID
        self.activation = activation
        self.details = details
        self.callTimeout = callTimeout
        self.answerTimeout = answerTimeout
    }

    /// Whether `environment` is a desktop session's: `DISPLAY` or `WAYLAND_DISPLAY` set and not empty.
    public static func isDesktopSession(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        !(environment["DISPLAY"] ?? "").isEmpty || !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty
    }

    /// Whether polkit is to be asked now (``activation``, and the process's environment for
    /// ``Activation/desktopSession``).
    public var isActive: Bool {
        switch activation {
        case .always: return true
        case .desktopSession: return Self.isDesktopSession()
        }
    }
}

/// How a polkit authentication ended.
public struct PolkitResult: Sendable, Equatable, CustomStringConvertible {
    /// The outcome (see ``PolkitAuthentication`` for the mapping).
    public let outcome: AuthenticationOutcome
    /// Whether the request carried the program and the reason as details.
    public let sentDetails: Bool
    /// Why polkit could not be used, or what it said; nil on success.
    public let detail: String?

    /// polkit refused the request because it carried details from an untrusted caller.
    let refusedDetails: Bool

    /// A result (for composed authenticators and their tests; results normally come from
    /// ``PolkitAuthentication/authenticate(_:reason:cancellation:)``).
    public init(outcome: AuthenticationOutcome, sentDetails: Bool, detail: String? = nil) {
        self.init(outcome: outcome, sentDetails: sentDetails, detail: detail, refusedDetails: false)
    }

    init(outcome: AuthenticationOutcome, sentDetails: Bool, detail: String?, refusedDetails: Bool) {
        self.outcome = outcome
        self.sentDetails = sentDetails
        self.detail = detail
        self.refusedDetails = refusedDetails
    }

    /// A one-line summary: the outcome and what polkit said. Never a secret (the password never reaches this process).
    public var description: String {
        "polkit \(outcome.rawValue)" + (detail.map { ": \($0)" } ?? "")
    }
}

/// The login password (or whatever the agent's PAM stack asks) through the desktop's polkit authentication agent: the
/// graphical prompt of a GUI app that has no terminal.
///
/// One ``authenticate(_:reason:cancellation:)`` is one `CheckAuthorization` of Keystone's action
/// (``PolkitConfiguration/defaultActionID``, `auth_self`: the person proves they are the user the process runs as)
/// for the subject “this process” (`unix-process`: pid, start time, uid), with `AllowUserInteraction`. polkit
/// asks the authentication agent registered for the session (GNOME Shell, KDE's polkit agent, `lxpolkit`,
/// `pkttyagent`), which checks the password through PAM (`polkit-agent-helper-1`) and tells polkit.
///
/// Outcomes:
///
/// | polkit's answer | Outcome |
/// |---|---|
/// | authorized | `success` |
/// | not authorized, `polkit.dismissed` (the person closed the dialog) | `userCancel` |
/// | not authorized, challenge (no agent to ask) | `notInteractive` |
/// | not authorized | `failed` (wrong password; the agent allows its own number of tries) |
/// | the cancellation fired (`LAContext.invalidate()`) | `appCancel`, the dialog withdrawn (`CancelCheckAuthorization`) |
/// | no answer within ``PolkitConfiguration/answerTimeout`` | `systemCancel`, the dialog withdrawn |
/// | no bus, no polkit, the action not installed, details refused | `notAvailable`, with the reason in ``PolkitResult/detail`` |
///
/// Decision (the message): polkit takes a message of the caller's (the `polkit.message` detail) only from root or
/// from a user the action file names as its owner; from anyone else a request with details is refused at once. So with
/// ``PolkitConfiguration/Details/automatic`` the request carries `polkit.message` (“Authentication requested by
/// <program>: <reason>”), `program` and `reason`, and when polkit refuses them it is made again without: the dialog then shows
/// the action's own message, “A program asks you to authenticate to use a protected keychain item”, and agents that
/// show the subject (KDE's, from `polkit.subject-pid`) name the process. `keystone`'s installer can name the desktop
/// users as owners (``actionFileContents(owners:)``).
///
/// - Important: Blocks until the person answers (up to ``PolkitConfiguration/answerTimeout``): call it on a thread of
///   your own. The password never reaches this process: the agent and polkit check it.
/// - Important: An action owner may ask polkit about this action for any process, also another user's: naming a user
///   as owner lets that user's programs put a Keystone dialog with their own text in front of other users' sessions
///   (they learn only whether the person authenticated, never the password). Name only the desktop's users.
public enum PolkitAuthentication {
    /// Where the action file is installed: polkit reads actions from `/usr/share/polkit-1/actions`.
    public static let actionFilePath = "/usr/share/polkit-1/actions/\(PolkitConfiguration.defaultActionID).policy"

    /// Asks polkit to authenticate the person for Keystone's action, showing `reason` and the program's name when
    /// polkit accepts details.
    ///
    /// Blocking: one connection of its own to the bus, then up to two `CheckAuthorization` calls (see
    /// ``PolkitConfiguration/Details/automatic``). Cancelling `cancellation` from any thread withdraws the dialog.
    public static func authenticate(_ configuration: PolkitConfiguration, reason: String?,
                                    cancellation: AuthenticationCancellation) -> PolkitResult {
        if cancellation.isCancelled { return PolkitResult(outcome: .appCancel, sentDetails: false, detail: "cancelled before polkit was asked") }
        guard let startTime = processStartTime() else {
            return PolkitResult(outcome: .notAvailable, sentDetails: false, detail: "cannot read this process's start time from /proc/self/stat")
        }
        var error = ks_fprint_error()
        defer { ks_fprint_error_clear(&error) }
        guard let handle = ks_fprint_open(configuration.busAddress, FingerprintReader.milliseconds(configuration.callTimeout), &error) else {
            return PolkitResult(outcome: .notAvailable, sentDetails: false,
                                detail: "no D-Bus bus at \(configuration.busAddress ?? "the system bus"): \(message(error))")
        }
        let shared = Locked<PolkitHandle?>(PolkitHandle(pointer: handle))
        let token = cancellation.onCancel { shared.withLock { if let handle = $0 { ks_fprint_cancel(handle.pointer) } } }
        defer {
            cancellation.removeHandler(token)
            shared.withLock { $0 = nil }
            ks_fprint_close(handle)
        }
        let details: [(String, String)] = [
            ("polkit.message", RequestingProgram.headline(reason: reason)),
            ("program", RequestingProgram.name),
            ("reason", reason ?? ""),
        ]
        switch configuration.details {
        case .always:
            return check(handle, configuration, startTime: startTime, details: details)
        case .never:
            return check(handle, configuration, startTime: startTime, details: [])
        case .automatic:
            // With details first; polkit refuses them at once (no dialog) from an untrusted caller: then without.
            let first = check(handle, configuration, startTime: startTime, details: details)
            guard first.refusedDetails else { return first }
            return check(handle, configuration, startTime: startTime, details: [])
        }
    }

    /// One CheckAuthorization on `handle`, mapped to an outcome.
    private static func check(_ handle: OpaquePointer, _ configuration: PolkitConfiguration, startTime: UInt64,
                              details: [(String, String)]) -> PolkitResult {
        let sentDetails = !details.isEmpty
        var error = ks_fprint_error()
        defer { ks_fprint_error_clear(&error) }
        var result = ks_polkit_result()
        let keys = details.map { strdup($0.0) }
        let values = details.map { strdup($0.1) }
        defer { (keys + values).forEach { free($0) } }
        let rc = keys.map { UnsafePointer($0) }.withUnsafeBufferPointer { keyBuffer in
            values.map { UnsafePointer($0) }.withUnsafeBufferPointer { valueBuffer in
                ks_polkit_check(handle, configuration.actionID, UInt32(getpid()), startTime, Int32(bitPattern: getuid()),
                                keyBuffer.baseAddress, valueBuffer.baseAddress, details.count, 1,
                                FingerprintReader.milliseconds(configuration.answerTimeout), &result, &error)
            }
        }
        if rc == 0 {
            if result.authorized != 0 { return PolkitResult(outcome: .success, sentDetails: sentDetails) }
            if result.dismissed != 0 {
                return PolkitResult(outcome: .userCancel, sentDetails: sentDetails, detail: "the person dismissed the dialog")
            }
            if result.challenge != 0 {
                return PolkitResult(outcome: .notInteractive, sentDetails: sentDetails,
                                    detail: "no polkit authentication agent could ask (none is registered for this session)")
            }
            return PolkitResult(outcome: .failed, sentDetails: sentDetails, detail: "not authorized")
        }
        switch error.status {
        case KS_FPRINT_CANCELLED:
            return PolkitResult(outcome: .appCancel, sentDetails: sentDetails, detail: "cancelled; the dialog was withdrawn")
        case KS_FPRINT_VERIFY_TIMED_OUT:
            return PolkitResult(outcome: .systemCancel, sentDetails: sentDetails,
                                detail: "no answer within \(Int(configuration.answerTimeout)) s; the dialog was withdrawn")
        case KS_FPRINT_NO_DAEMON:
            return PolkitResult(outcome: .notAvailable, sentDetails: sentDetails,
                                detail: "polkit (org.freedesktop.PolicyKit1) is not on the bus: install polkitd (apt-get install polkitd)")
        default:
            var text = message(error)
            let refused = text.contains("org.freedesktop.PolicyKit1.Error.NotAuthorized") && text.contains("details")
            if text.contains("not registered") {
                text += ": install Keystone's polkit action at \(actionFilePath) (`keystone install-polkit`)"
            }
            return PolkitResult(outcome: .notAvailable, sentDetails: sentDetails, detail: text, refusedDetails: refused)
        }
    }

    /// The action file (`.policy`, polkit's XML) Keystone's installer writes to ``actionFilePath``.
    ///
    /// `auth_self` for every kind of session (active, inactive, remote): the person proves they are the user the
    /// program runs as, every time (not `auth_self_keep`: LAContext's reuse duration decides what is remembered).
    /// `owners` (user names) become the `org.freedesktop.policykit.owner` annotation, so those users' programs may
    /// send the program's name and the reason (see ``PolkitAuthentication``'s Important note).
    public static func actionFileContents(owners: [String] = []) -> String {
        func escape(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
        }
        let owner = owners.isEmpty ? "" : """

                <annotate key="org.freedesktop.policykit.owner">\(escape(owners.map { "unix-user:\($0)" }.joined(separator: " ")))</annotate>
            """
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE policyconfig PUBLIC "-//freedesktop//DTD PolicyKit Policy Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/PolicyKit/1/policyconfig.dtd">
            <!-- Keystone: LocalAuthentication's device-owner authentication through the desktop's polkit agent. -->
            <policyconfig>
              <vendor>Keystone</vendor>
              <action id="\(PolkitConfiguration.defaultActionID)">
                <description>Authenticate to use a protected keychain item</description>
                <message>A program asks you to authenticate to use a protected keychain item</message>
                <icon_name>dialog-password</icon_name>
                <defaults>
                  <allow_any>auth_self</allow_any>
                  <allow_inactive>auth_self</allow_inactive>
                  <allow_active>auth_self</allow_active>
                </defaults>\(owner)
              </action>
            </policyconfig>

            """
    }

    /// This process's start time in clock ticks since boot (`/proc/self/stat`, field 22), as polkit identifies a
    /// `unix-process` subject.
    static func processStartTime() -> UInt64? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // Fields after the command name start at field 3 (state); the start time is field 22.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19 else { return nil }
        return UInt64(fields[19])
    }

    private static func message(_ error: ks_fprint_error) -> String {
        let name = error.name.map { String(cString: $0) }
        let text = error.message.map { String(cString: $0) } ?? "unknown error"
        return name.map { "\($0): \(text)" } ?? text
    }
}

/// The connection handle as the cancellation handler (any thread) sees it: only `ks_fprint_cancel`, documented as
/// callable from any thread, is called through it, under the lock, before the handle is closed.
private struct PolkitHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}
