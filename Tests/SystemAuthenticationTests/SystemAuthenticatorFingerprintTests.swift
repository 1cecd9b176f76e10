#if canImport(Glibc) && !canImport(Darwin)
import Foundation
import KeychainEngine
import SystemAuthentication
import Testing

/// What the person does when asked for the password.
enum Typing: Sendable {
    /// Types this at once.
    case type(String)
    /// Runs the closure (waits for something the test watches), then types, unless the prompt was withdrawn
    /// meanwhile (then nothing is typed and the answer stays unused).
    case after(@Sendable () -> Void, String)
    /// Runs the closure, then waits until the prompt is withdrawn (its cancellation fires), and answers nil.
    case waitUntilWithdrawn(@Sendable () -> Void)
}

/// The person at the reader and the keyboard: touches the reader with the next finger of `scans` when told to, and
/// answers the next password prompt as `typing` says. Records what was shown and how many password prompts were
/// withdrawn; nil answers and missing scans end the conversation, so no test can wait for ever.
final class PersonPrompter: AuthenticationPrompter {
    private let state: Locked<(scans: [String], typing: [Typing], messages: [AuthenticationMessage], failures: [String], withdrawn: Int)>
    private let fixture: FprintdFixture

    init(fixture: FprintdFixture, scans: [String], answers: [String] = []) {
        self.fixture = fixture
        state = Locked((scans, answers.map { Typing.type($0) }, [], [], 0))
    }

    init(fixture: FprintdFixture, scans: [String], typing: [Typing]) {
        self.fixture = fixture
        state = Locked((scans, typing, [], [], 0))
    }

    var isInteractive: Bool { true }
    var messages: [AuthenticationMessage] { state.current.messages }
    var failures: [String] { state.current.failures }
    var secretPrompts: Int { messages.filter { $0.style == .secret }.count }
    var scansLeft: Int { state.current.scans.count }
    /// Password prompts withdrawn while they waited (their cancellation fired).
    var withdrawn: Int { state.current.withdrawn }

    func prompt(_ message: AuthenticationMessage, cancellation: AuthenticationCancellation) -> String? {
        state.withLock { $0.messages.append(message) }
        if message.expectsAnswer {
            guard let typing: Typing = state.withLock({ $0.typing.isEmpty ? nil : $0.typing.first }) else { return nil }
            switch typing {
            case .type(let answer):
                state.withLock { _ = $0.typing.removeFirst() }
                return answer
            case .after(let wait, let answer):
                wait()
                if cancellation.isCancelled {
                    state.withLock { $0.withdrawn += 1 }
                    return nil
                }
                state.withLock { _ = $0.typing.removeFirst() }
                return answer
            case .waitUntilWithdrawn(let action):
                state.withLock { _ = $0.typing.removeFirst() }
                let released = DispatchSemaphore(value: 0)
                let token = cancellation.onCancel { released.signal() }
                action()
                // Bounded, so a prompt that is never withdrawn fails the test instead of hanging it.
                let withdrawn = released.wait(timeout: .now() + FprintdFixture.deadline) == .success
                cancellation.removeHandler(token)
                state.withLock {
                    if withdrawn { $0.withdrawn += 1 } else { $0.failures.append("the password prompt was never withdrawn") }
                }
                return nil
            }
        }
        if message.style == .info, message.text.hasPrefix("Place your finger") || message.text.hasPrefix("Swipe your finger") {
            // No scan left: nobody touches the reader (the virtual reader then gives up on its own).
            guard let scan: String = state.withLock({ $0.scans.isEmpty ? nil : $0.scans.removeFirst() }) else { return nil }
            do { try fixture.send("SCAN \(scan)") } catch { state.withLock { $0.failures.append("\(error)") } }
        }
        return nil
    }
}

/// The system authenticator with the REAL fprintd (libfprint's virtual reader, private bus) and real PAM.
@Suite("System authenticator: fingerprints through fprintd, the password through PAM", .serialized,
       .enabled(if: FprintdFixture.unavailableReason == nil,
                Comment(rawValue: FprintdFixture.unavailableReason ?? "fprintd, dbus-daemon and python3-dbusmock are installed")))
struct SystemAuthenticatorFingerprintTests {
    static let enrolled = "1001"
    static let stranger = "2002"

    /// An authenticator on the fixture's reader, with PAM checking the test user's password (when one can be made).
    static func authenticator(_ fixture: FprintdFixture, _ prompter: any AuthenticationPrompter, pam directory: String? = nil,
                              attempts: Int = 1, lockout: Int = 5) throws -> SystemAuthenticator {
        var pam = PAMConfiguration.standard
        if let directory, PAMFixture.canCreateUsers {
            pam = try PAMConfiguration(user: try PAMFixture.user().name, configurationDirectory: directory, maximumAttempts: 1)
        }
        return SystemAuthenticator(configuration: SystemAuthenticationConfiguration(
            pam: pam, fingerprint: FingerprintConfiguration(busAddress: fixture.busAddress), prompter: prompter, polkit: nil,
            fingerprintAttempts: attempts, lockoutThreshold: lockout))
    }

    static func request(_ flags: AccessControlFlags) -> AuthenticationRequest {
        AuthenticationRequest(itemClass: .genericPassword, flags: flags, operationPrompt: "Unlock", operation: "copy")
    }

    static func item(_ engine: KeychainEngine, _ account: String, _ flags: AccessControlFlags) throws {
        _ = try engine.add([
            Key.`class`: .string(ItemClass.genericPassword.rawValue), Key.service: .string("vault"),
            Key.account: .string(account), Key.valueData: .data(Data("secret-\(account)".utf8)),
            Key.accessControl: .accessControl(AccessControl(accessibility: .whenUnlocked, flags: flags)),
        ])
    }

    static func read(_ engine: KeychainEngine, _ account: String) -> Int32 {
        do {
            let result = try engine.copyMatching([
                Key.`class`: .string(ItemClass.genericPassword.rawValue), Key.service: .string("vault"),
                Key.account: .string(account), Key.returnData: .bool(true),
            ])
            guard case .data(let data)? = result, data == Data("secret-\(account)".utf8) else { return Status.decode }
            return Status.success
        } catch let error as EngineError {
            return error.status
        } catch {
            return Status.internalComponent
        }
    }

    @Test("a fingerprint reader with an enrolled finger is fingerprint biometry; the enrolled finger authenticates, another does not")
    func matchAndMiss() async throws {
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: Self.enrolled)
            let prompter = PersonPrompter(fixture: fixture, scans: [Self.enrolled, Self.stranger])
            let authenticator = try Self.authenticator(fixture, prompter)
            #expect(authenticator.biometryKind == .fingerprint)
            #expect(authenticator.availability(for: .biometryAny) == nil)
            #expect(authenticator.authenticate(Self.request(.biometryAny)) == .success)
            #expect(authenticator.authenticate(Self.request(.biometryAny)) == .failed)
            // Every prompt names the program and the reason first, then the reader's instruction.
            #expect(prompter.messages.first == AuthenticationMessage(.info, "Authentication requested by \(RequestingProgram.name): Unlock"))
            let instruction = prompter.messages.dropFirst().first?.text ?? ""
            #expect(instruction.hasPrefix("Place your finger on ") || instruction.hasPrefix("Swipe your finger across "), "\(prompter.messages)")
            #expect(prompter.failures.isEmpty, "\(prompter.failures)")
        }
    }

    @Test("no enrolled finger: biometry is notEnrolled, asked of nobody")
    func notEnrolled() async throws {
        try await withFixture { fixture in
            let prompter = PersonPrompter(fixture: fixture, scans: [])
            let authenticator = try Self.authenticator(fixture, prompter)
            #expect(authenticator.biometryKind == .fingerprint)
            #expect(authenticator.availability(for: .biometryCurrentSet) == .notEnrolled)
            #expect(authenticator.authenticate(Self.request(.biometryAny)) == .notEnrolled)
            #expect(prompter.messages.isEmpty)
            #expect(authenticator.biometryDomainState == nil)
        }
    }

    @Test("too many misses lock biometry out; the password unlocks it again",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func lockoutAndPasswordUnlock() async throws {
        let user = try PAMFixture.user()
        let directory = try PAMFixture.ServiceDirectory(["keystone": "auth required pam_unix.so nodelay\n"])
        defer { directory.remove() }
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: Self.enrolled)
            let prompter = PersonPrompter(fixture: fixture, scans: [Self.stranger, Self.stranger, Self.enrolled], answers: [user.password])
            let authenticator = try Self.authenticator(fixture, prompter, pam: directory.path, attempts: 1, lockout: 2)
            #expect(authenticator.authenticate(Self.request(.biometryAny)) == .failed)
            #expect(authenticator.authenticate(Self.request(.biometryAny)) == .lockout)
            #expect(authenticator.isBiometryLockedOut)
            #expect(authenticator.availability(for: .biometryAny) == .lockout)
            // Locked out: biometry-only asks nobody; the device-owner policy goes straight to the password.
            #expect(authenticator.authenticate(Self.request(.biometryAny)) == .lockout)
            #expect(prompter.scansLeft == 1)
            #expect(authenticator.authenticate(Self.request(.userPresence)) == .success)
            #expect(prompter.secretPrompts == 1)
            #expect(prompter.scansLeft == 1, "no scan while locked out")
            // The password unlocked biometry.
            #expect(authenticator.availability(for: .biometryAny) == nil)
            #expect(authenticator.authenticate(Self.request(.biometryAny)) == .success)
            #expect(prompter.messages.contains { $0.style == .error && $0.text.contains("locked") })
        }
    }

    @Test(".userPresence: fingers that miss do not end it, the password typed afterwards still authenticates",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func presenceFallsBack() async throws {
        let user = try PAMFixture.user()
        let directory = try PAMFixture.ServiceDirectory(["keystone": "auth required pam_unix.so nodelay\n"])
        defer { directory.remove() }
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: Self.enrolled)
            let monitor = try fixture.monitor()
            defer { monitor.stop() }
            // The password is typed once both scans have missed.
            let prompter = PersonPrompter(fixture: fixture, scans: [Self.stranger, Self.stranger, Self.stranger, Self.stranger],
                                          typing: [.after({ _ = try? monitor.waitFor("verify-no-match"); _ = try? monitor.waitFor("verify-no-match") },
                                                          user.password)])
            let authenticator = try Self.authenticator(fixture, prompter, pam: directory.path, attempts: 2)
            #expect(authenticator.authenticateReportingFactors(Self.request(.userPresence)) == AuthenticationResult(.success, factors: [.passcode]))
            #expect(prompter.scansLeft == 2)
            #expect(prompter.secretPrompts == 1)
            // .biometryAny alone never asks for the password.
            #expect(authenticator.authenticate(Self.request(.biometryAny)) == .failed)
            #expect(prompter.secretPrompts == 1)
        }
    }

    @Test("each success reports the factor the person used: the finger, the password after a miss, both for .and",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func reportsFactor() async throws {
        let user = try PAMFixture.user()
        let directory = try PAMFixture.ServiceDirectory(["keystone": "auth required pam_unix.so nodelay\n"])
        defer { directory.remove() }
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: Self.enrolled)
            let monitor = try fixture.monitor()
            defer { monitor.stop() }
            let prompter = PersonPrompter(fixture: fixture, scans: [Self.enrolled, Self.stranger, Self.enrolled], typing: [
                .waitUntilWithdrawn({}),                                                       // the finger wins
                .after({ _ = try? monitor.waitFor("verify-no-match") }, user.password),        // the finger missed
                .type(user.password),                                                          // .and: after the finger
            ])
            let authenticator = try Self.authenticator(fixture, prompter, pam: directory.path, attempts: 1)
            #expect(authenticator.authenticateReportingFactors(Self.request(.userPresence)) == AuthenticationResult(.success, factors: [.biometry]))
            #expect(prompter.withdrawn == 1, "the finger won: the waiting password prompt was withdrawn")
            #expect(authenticator.authenticateReportingFactors(Self.request(.userPresence)) == AuthenticationResult(.success, factors: [.passcode]),
                    "the finger missed: the password stood in")
            #expect(authenticator.authenticateReportingFactors(Self.request([.biometryAny, .devicePasscode, .and]))
                    == AuthenticationResult(.success, factors: [.biometry, .passcode]))
            #expect(authenticator.authenticateReportingFactors(Self.request(.devicePasscode)) == AuthenticationResult(.userCancel),
                    "the script is used up: no answer is a cancel, with no factor")
            #expect(prompter.failures.isEmpty, "\(prompter.failures)")
        }
    }

    @Test(".biometryCurrentSet items become unreadable after another finger is enrolled; .biometryAny items still read")
    func enrollmentChange() async throws {
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: Self.enrolled)
            let prompter = PersonPrompter(fixture: fixture, scans: [Self.enrolled, Self.enrolled, Self.enrolled])
            let engine = KeychainEngine(authenticator: try Self.authenticator(fixture, prompter))
            try Self.item(engine, "current", .biometryCurrentSet)
            try Self.item(engine, "any", .biometryAny)
            #expect(Self.read(engine, "current") == Status.success)
            try fixture.enroll(finger: "left-index-finger", scanID: "1003")
            #expect(Self.read(engine, "current") == Status.authFailed)
            #expect(prompter.scansLeft == 2, "an invalidated item asks nobody")
            #expect(Self.read(engine, "any") == Status.success)
            // The refused item is still there: nothing was deleted because a read failed.
            let attributes = try engine.copyMatching([
                Key.`class`: .string(ItemClass.genericPassword.rawValue), Key.service: .string("vault"),
                Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true),
            ])
            guard case .array(let items)? = attributes else { Issue.record("expected both items"); return }
            #expect(items.count == 2)
        }
    }

    @Test("a reader claimed by another process cancels the read (errSecUserCanceled) and deletes nothing")
    func claimedElsewhere() async throws {
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: Self.enrolled)
            let prompter = PersonPrompter(fixture: fixture, scans: [Self.enrolled])
            let engine = KeychainEngine(authenticator: try Self.authenticator(fixture, prompter))
            try Self.item(engine, "any", .biometryAny)
            let holder = try fixture.holdClaim()
            #expect(Self.read(engine, "any") == Status.userCanceled)
            holder.release()
            #expect(Self.read(engine, "any") == Status.success)
        }
    }

    @Test("invalidating the context while the reader waits cancels the verification")
    func cancelWhileWaiting() async throws {
        try await withFixture { fixture in
            try fixture.enroll(finger: "right-index-finger", scanID: Self.enrolled)
            let monitor = try fixture.monitor()
            defer { monitor.stop() }
            // The reader is told to wait (no scan comes); the test cancels once verification has started.
            final class Waiting: AuthenticationPrompter {
                let fixture: FprintdFixture
                init(_ fixture: FprintdFixture) { self.fixture = fixture }
                var isInteractive: Bool { true }
                func prompt(_ message: AuthenticationMessage, cancellation: AuthenticationCancellation) -> String? {
                    if message.text.hasPrefix("Place your finger") || message.text.hasPrefix("Swipe your finger") {
                        try? fixture.send("SLEEP 600000")
                    }
                    return nil
                }
            }
            let authenticator = try Self.authenticator(fixture, Waiting(fixture))
            let context = AuthenticationContext()
            let request = AuthenticationRequest(itemClass: .genericPassword, flags: .biometryAny, operationPrompt: nil,
                                                operation: "copy", cancellation: context.cancellation)
            let outcome = Locked<AuthenticationOutcome?>(nil)
            let done = DispatchSemaphore(value: 0)
            Thread { outcome.withLock { $0 = authenticator.authenticate(request) }; done.signal() }.start()
            _ = try monitor.waitFor("VerifyFingerSelected")
            context.invalidate()
            done.wait()
            #expect(outcome.current == .appCancel)
        }
    }
}
#endif
