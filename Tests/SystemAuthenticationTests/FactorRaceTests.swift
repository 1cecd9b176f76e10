#if canImport(Glibc) && !canImport(Darwin)
import DefaultKeychainLock
import Foundation
import Glibc
import KeychainEngine
import KeychainServices
import SystemAuthentication
import Testing

/// Issue 31, item 5: for `.deviceOwnerAuthentication` / `.userPresence` the finger and the password are asked at once
/// (the real fprintd with libfprint's virtual reader on a private bus, real PAM with a test account). Every signal is
/// deterministic: the test scans a finger or types the password only once the other side is seen waiting (the
/// password prompt is reached, fprintd emitted `VerifyFingerSelected`).
@Suite("fprintd and PAM at once: the first factor to succeed wins", .serialized, .ownsDefaultKeychain,
       .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"),
       .enabled(if: FprintdFixture.unavailableReason == nil,
                Comment(rawValue: FprintdFixture.unavailableReason ?? "fprintd, dbus-daemon and python3-dbusmock are installed")))
final class FactorRaceTests {
    static let enrolled = "1001"
    static let stranger = "2002"

    let directory: PAMFixture.ServiceDirectory
    let previous: any Authenticator

    init() throws {
        directory = try PAMFixture.ServiceDirectory(["keystone": "auth required pam_unix.so nodelay\n"])
        previous = KeychainServicesDefaults.authenticator
        KeychainServicesDefaults.useMemoryKeychain()
    }

    deinit {
        KeychainServicesDefaults.useAuthenticator(previous)
        KeychainServicesDefaults.setEngine(nil)
        directory.remove()
    }

    static func configuration(_ fixture: FprintdFixture, _ prompter: any AuthenticationPrompter,
                              directory: String) throws -> SystemAuthenticationConfiguration {
        let pam = try PAMConfiguration(user: try PAMFixture.user().name, configurationDirectory: directory, maximumAttempts: 1)
        return SystemAuthenticationConfiguration(pam: pam, fingerprint: FingerprintConfiguration(busAddress: fixture.busAddress),
                                                 prompter: prompter, polkit: nil, fingerprintAttempts: 1)
    }

    static func request(_ cancellation: AuthenticationCancellation? = nil) -> AuthenticationRequest {
        AuthenticationRequest(itemClass: .genericPassword, flags: .userPresence, operationPrompt: "Unlock the vault",
                              operation: "evaluatePolicy", cancellation: cancellation)
    }

    /// LAContext's evaluation of the device-owner policy, waited for on this thread.
    static func evaluate(_ context: LAContext) -> LAError.Code? {
        let done = DispatchSemaphore(value: 0)
        let outcome = Locked<LAError.Code??>(nil)
        context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Unlock the vault") { success, error in
            outcome.withLock { $0 = .some(success ? nil : ((error as? LAError)?.code ?? .systemCancel)) }
            done.signal()
        }
        done.wait()
        return outcome.current ?? .systemCancel
    }

    @Test("the finger touched while the password prompt waits wins: the prompt is withdrawn, the factor is biometry")
    func fingerWins() async throws {
        let directory = self.directory.path
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: Self.enrolled)
            let devices = try fixture.methodMonitor()
            defer { devices.stop() }
            // Nobody touches the reader when told; the finger comes while the password prompt waits.
            let person = PersonPrompter(fixture: fixture, scans: [], typing: [.waitUntilWithdrawn({
                try? fixture.send("SCAN \(Self.enrolled)")
            })])
            let authenticator = SystemAuthenticator(configuration: try Self.configuration(fixture, person, directory: directory))
            #expect(authenticator.authenticateReportingFactors(Self.request()) == AuthenticationResult(.success, factors: [.biometry]))
            #expect(person.secretPrompts == 1, "the password prompt was shown")
            #expect(person.withdrawn == 1, "and withdrawn once the finger matched")
            // The reader was stopped and released like any verification.
            _ = try devices.waitFor("member=VerifyStop")
            _ = try devices.waitFor("member=Release")
        }
    }

    @Test("the password typed while the reader waits wins: fprintd gets VerifyStop and Release, the factor is the passcode")
    func passwordWins() async throws {
        let user = try PAMFixture.user()
        let directory = self.directory.path
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: Self.enrolled)
            let signals = try fixture.monitor()
            defer { signals.stop() }
            let devices = try fixture.methodMonitor()
            defer { devices.stop() }
            // Typed once the reader waits for a finger that never comes.
            let person = PersonPrompter(fixture: fixture, scans: [], typing: [
                .after({ _ = try? signals.waitFor("VerifyFingerSelected") }, user.password),
            ])
            let authenticator = SystemAuthenticator(configuration: try Self.configuration(fixture, person, directory: directory))
            #expect(authenticator.authenticateReportingFactors(Self.request()) == AuthenticationResult(.success, factors: [.passcode]))
            _ = try devices.waitFor("member=VerifyStart")
            _ = try devices.waitFor("member=VerifyStop")
            _ = try devices.waitFor("member=Release")
            // Released: another process can claim the reader at once.
            let holder = try fixture.holdClaim()
            holder.release()
            #expect(person.failures.isEmpty, "\(person.failures)")
        }
    }

    @Test("a finger that misses and a wrong password: LAError.authenticationFailed, after both failed")
    func bothFail() async throws {
        let directory = self.directory.path
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: Self.enrolled)
            let signals = try fixture.monitor()
            defer { signals.stop() }
            // The finger misses first; the wrong password is typed after that, so the evaluation waited for both.
            let person = PersonPrompter(fixture: fixture, scans: [Self.stranger], typing: [
                .after({ _ = try? signals.waitFor("verify-no-match") }, PAMFixture.wrongPassword()),
            ])
            KeychainServicesDefaults.useSystemAuthentication(try Self.configuration(fixture, person, directory: directory))
            #expect(Self.evaluate(LAContext()) == .authenticationFailed)
            #expect(person.scansLeft == 0 && person.secretPrompts == 1)
            #expect(person.withdrawn == 0, "the miss did not withdraw the password prompt")
        }
    }

    @Test("invalidate() while both wait: LAError.appCancel, the password prompt withdrawn and the reader stopped and released")
    func invalidateDuringBoth() async throws {
        let directory = self.directory.path
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: Self.enrolled)
            let signals = try fixture.monitor()
            defer { signals.stop() }
            let devices = try fixture.methodMonitor()
            defer { devices.stop() }
            let bothWaiting = DispatchSemaphore(value: 0)
            let person = PersonPrompter(fixture: fixture, scans: [], typing: [.waitUntilWithdrawn({ bothWaiting.signal() })])
            KeychainServicesDefaults.useSystemAuthentication(try Self.configuration(fixture, person, directory: directory))
            let context = LAContext()
            let outcome = Locked<LAError.Code??>(nil)
            let done = DispatchSemaphore(value: 0)
            context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Unlock the vault") { success, error in
                outcome.withLock { $0 = .some(success ? nil : ((error as? LAError)?.code ?? .systemCancel)) }
                done.signal()
            }
            bothWaiting.wait()
            _ = try signals.waitFor("VerifyFingerSelected")
            context.invalidate()
            done.wait()
            #expect(outcome.current == .some(.appCancel))
            #expect(person.withdrawn == 1)
            _ = try devices.waitFor("member=VerifyStop")
            _ = try devices.waitFor("member=Release")
        }
    }

    @Test("the person cancelling the password prompt ends both: LAError.userCancel, the reader released")
    func personCancels() async throws {
        let directory = self.directory.path
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: Self.enrolled)
            let signals = try fixture.monitor()
            defer { signals.stop() }
            let devices = try fixture.methodMonitor()
            defer { devices.stop() }
            // No answer (Ctrl-D) once the reader waits.
            final class Cancelling: AuthenticationPrompter {
                let signals: FprintdFixture.Monitor
                init(_ signals: FprintdFixture.Monitor) { self.signals = signals }
                var isInteractive: Bool { true }
                func prompt(_ message: AuthenticationMessage, cancellation: AuthenticationCancellation) -> String? {
                    if message.style == .secret { _ = try? signals.waitFor("VerifyFingerSelected") }
                    return nil
                }
            }
            let authenticator = SystemAuthenticator(configuration: try Self.configuration(fixture, Cancelling(signals), directory: directory))
            #expect(authenticator.authenticate(Self.request()) == .userCancel)
            _ = try devices.waitFor("member=VerifyStop")
            _ = try devices.waitFor("member=Release")
        }
    }
}

@Suite("Terminal: the prompt names the program and the reason (PAM)",
       .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
struct ProgramNamedOnTerminalTests {
    @Test("the terminal shows “Authentication requested by <executable>: <reason>” before the password prompt")
    func terminalHeadline() async throws {
        let user = try PAMFixture.user()
        let terminal = try PseudoTerminal()
        let directory = try PAMFixture.ServiceDirectory(["keystone": "auth required pam_unix.so nodelay\n"])
        defer { directory.remove() }
        let pam = try PAMConfiguration(user: user.name, configurationDirectory: directory.path, maximumAttempts: 1)
        let authenticator = SystemAuthenticator(configuration: SystemAuthenticationConfiguration(
            pam: pam, fingerprint: nil, prompter: TerminalPrompter(path: terminal.slavePath), polkit: nil))
        let cancellation = AuthenticationCancellation()
        let result = PAMFixture.started {
            authenticator.authenticate(AuthenticationRequest(itemClass: .genericPassword, flags: .devicePasscode,
                                                             operationPrompt: "Open the vault", operation: "copy",
                                                             cancellation: cancellation))
        }
        let shown = await PAMFixture.onThread { () -> String? in
            guard let shown = terminal.read(until: "assword:") else { cancellation.cancel(); return nil }
            terminal.type(user.password + "\n")
            return shown
        }
        #expect(await result.value == .success)
        // Named independently of RequestingProgram: the test binary's own file name.
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).lastPathComponent
        let headline = "Authentication requested by \(executable): Open the vault"
        #expect(shown?.contains(headline) == true, "\(shown ?? "nothing shown")")
        #expect(shown.map { $0.range(of: headline)!.lowerBound < $0.range(of: "assword:")!.lowerBound } == true)
    }
}
#endif
