import ArgumentParser
import Foundation
import KeychainEngine
#if !canImport(Darwin)
import SystemAuthentication
#endif
#if canImport(Glibc)
import Glibc
#endif

// The person behind LocalAuthentication on Linux: `install-pam` (the `keystone` PAM service), `authenticate` (try it),
// and doctor's authentication report.

/// The verbs of this file, present when this keystone has the SystemAuthentication backend (on Linux).
var authenticationVerbs: [any ParsableCommand.Type] {
    #if !canImport(Darwin)
    return [InstallPAM.self, Authenticate.self]
    #else
    return []
    #endif
}

#if !canImport(Darwin)
struct InstallPAM: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "install-pam",
        abstract: "Install the `keystone` PAM service, which checks the login password for LAContext and access-controlled items.",
        discussion: """
        Writes PAMDIR/keystone (default /etc/pam.d/keystone, mode 0644) including the system's own authentication \
        stack: `@include common-auth` on Debian and Ubuntu, `auth include system-auth` on Fedora and Arch. Without \
        this file PAM uses the `other` service, which on many systems denies everything. Needs root. An existing \
        file with other contents is left alone unless --force; the new file replaces it atomically. --print shows \
        the file and writes nothing.
        """)
    @Flag(help: "Print the service file instead of writing it.") var print = false
    @Flag(help: "Replace an existing service file with other contents.") var force = false
    @Option(name: .customLong("pam-dir"), help: "The PAM configuration directory.") var pamDirectory = "/etc/pam.d"

    mutating func run() throws {
        guard let contents = PAMAuthentication.serviceFileContents(pamDirectory: pamDirectory) else {
            throw MessageFailure(message: "keystone: install-pam: \(pamDirectory) has neither common-auth (Debian, Ubuntu) nor system-auth (Fedora, Arch): write \(pamDirectory)/keystone yourself with this system's auth stack", exitCode: 1)
        }
        if print { writeOut(contents); return }
        let path = pamDirectory + "/keystone"
        if let existing = try? String(contentsOfFile: path, encoding: .utf8) {
            if existing == contents { writeOut("\(path) is already installed\n"); return }
            guard force else {
                throw MessageFailure(message: "keystone: install-pam: \(path) exists with other contents; keep it, or replace it with --force", exitCode: 1)
            }
        }
        try installSystemFile(contents, at: path, in: pamDirectory, verb: "install-pam")
    }
}

struct Authenticate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "authenticate",
        abstract: "Ask the person at this terminal to authenticate, as LAContext does on Linux.",
        discussion: """
        --policy owner (default) asks a fingerprint and the login password at once where a reader can verify one \
        (the first to succeed wins; else the password alone: Apple's deviceOwnerAuthentication); biometrics asks a fingerprint only (deviceOwnerAuthenticationWithBiometrics); \
        password asks the login password only (devicePasscode). The password is read from the controlling \
        terminal without echo and goes to PAM only; with no terminal in a desktop session (DISPLAY or \
        WAYLAND_DISPLAY), the desktop's polkit agent asks instead (`keystone install-polkit` installs the action). Prints `authenticated` and exits 0, or prints LocalAuthentication's \
        error and exits 1.
        """)
    enum Policy: String, ExpressibleByArgument, CaseIterable { case owner, biometrics, password }
    @Option(help: "owner, biometrics or password.") var policy: Policy = .owner
    @Option(help: "The PAM service.") var service = "keystone"
    @Option(help: "Why, shown before the prompt.") var reason: String?

    mutating func run() throws {
        let pam: PAMConfiguration
        do { pam = try PAMConfiguration(service: service) } catch {
            throw UsageFailure(message: "keystone: authenticate: \(error)")
        }
        let authenticator = SystemAuthenticator(configuration: SystemAuthenticationConfiguration(pam: pam))
        let flags: AccessControlFlags = policy == .biometrics ? .biometryAny : policy == .password ? .devicePasscode : .userPresence
        let request = AuthenticationRequest(itemClass: .genericPassword, flags: flags, operationPrompt: reason, operation: "authenticate")
        // The prompt blocks: a thread of its own, never Swift's cooperative pool.
        let outcome = Locked<AuthenticationOutcome>(.systemCancel)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            outcome.withLock { $0 = authenticator.authenticate(request) }
            done.signal()
        }
        thread.start()
        done.wait()
        let result = outcome.current
        if result == .success { writeOut("authenticated\n"); return }
        throw MessageFailure(message: "keystone: authenticate: \(result.rawValue): \(Self.explain(result))", exitCode: 1)
    }

    static func explain(_ outcome: AuthenticationOutcome) -> String {
        switch outcome {
        case .success: return "authenticated"
        case .userCancel: return "cancelled"
        case .failed: return "the credentials were not recognized"
        case .notAvailable: return "no fingerprint reader (fprintd), or no PAM service that can check a password"
        case .notEnrolled: return "no fingerprint is enrolled (fprintd-enroll)"
        case .lockout: return "too many failed attempts"
        case .passcodeNotSet: return "this user has no login password PAM can check"
        case .userFallback: return "the user chose the password"
        case .appCancel, .systemCancel: return "cancelled by the system (the reader is busy or went away)"
        case .notInteractive: return "no terminal to ask on, and no desktop session whose polkit agent could ask"
        }
    }
}
#endif

/// Doctor's authentication report: the PAM service, the terminal, the fingerprint reader. Notes and warnings only:
/// authentication never blocks the storage.
struct AuthenticationReport {
    var findings: [DoctorFinding] = []
    var json: [String: Any] = [:]

    static func examine(pamDirectory: String = "/etc/pam.d") -> AuthenticationReport {
        var report = AuthenticationReport()
        #if !canImport(Darwin)
        let service = pamDirectory + "/keystone"
        let hasService = FileManager.default.fileExists(atPath: service)
        let hasOther = FileManager.default.fileExists(atPath: pamDirectory + "/other")
        report.json["pamService"] = hasService ? service : NSNull()
        report.json["pamFallback"] = hasService ? NSNull() : (hasOther ? pamDirectory + "/other" : NSNull())
        if hasService {
            report.findings.append(DoctorFinding(severity: .ok, check: "PAM", detail: "the keystone service is \(service)", fix: nil))
        } else {
            report.findings.append(DoctorFinding(severity: .note, check: "PAM",
                detail: "no \(service): PAM uses the `other` service\(hasOther ? "" : ", which is missing too"), which may deny every password",
                fix: "sudo keystone install-pam"))
        }
        let terminal = TerminalPrompter()
        report.json["terminal"] = terminal.isInteractive
        report.findings.append(terminal.isInteractive
            ? DoctorFinding(severity: .ok, check: "terminal", detail: "prompts are shown on the controlling terminal", fix: nil)
            : DoctorFinding(severity: .note, check: "terminal", detail: "no controlling terminal: LAContext evaluations and access-controlled reads end with notInteractive (errSecInteractionNotAllowed)",
                            fix: "run from a terminal, or give the app's own prompter with KeychainServicesDefaults.useSystemAuthentication"))
        let reader = FingerprintReader()
        switch reader.availability() {
        case .ready(let device, let fingers):
            report.json["fingerprint"] = ["state": "ready", "device": device, "enrolledFingers": fingers] as [String: Any]
            report.findings.append(DoctorFinding(severity: .ok, check: "fingerprint", detail: "\(device): \(fingers.count) enrolled finger(s) (\(fingers.joined(separator: ", ")))", fix: nil))
        case .notEnrolled(let device):
            report.json["fingerprint"] = ["state": "not-enrolled", "device": device] as [String: Any]
            report.findings.append(DoctorFinding(severity: .note, check: "fingerprint", detail: "\(device): no enrolled finger (biometry: biometryNotEnrolled)", fix: "fprintd-enroll"))
        case .noDevice:
            report.json["fingerprint"] = ["state": "no-device"] as [String: Any]
            report.findings.append(DoctorFinding(severity: .note, check: "fingerprint", detail: "fprintd runs but sees no reader (biometry: biometryNotAvailable)", fix: nil))
        case .noDaemon(let reason):
            report.json["fingerprint"] = ["state": "no-daemon", "reason": reason] as [String: Any]
            report.findings.append(DoctorFinding(severity: .note, check: "fingerprint", detail: "no fprintd: \(reason) (biometry: biometryNotAvailable)", fix: "install fprintd for a fingerprint reader"))
        }
        #else
        report.json["available"] = false
        report.findings.append(DoctorFinding(severity: .note, check: "authentication", detail: "this keystone was built without the SystemAuthentication backend: nothing can authenticate a person", fix: nil))
        #endif
        return report
    }
}
