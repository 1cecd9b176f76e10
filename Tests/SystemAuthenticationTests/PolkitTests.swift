#if canImport(Glibc) && !canImport(Darwin)
import DefaultKeychainLock
import Foundation
import Glibc
import KeychainEngine
import KeychainServices
import SystemAuthentication
import Testing

/// Issue 31, item 4: with no terminal, LAContext asks through polkit. polkit's D-Bus interface is python3-dbusmock's
/// polkitd template on a private system-type bus (the same fixture as fprintd's, without fprintd): the tests check the
/// call Keystone makes (action, subject, details) and how polkit's answers map to LAError.
@Suite("polkit: LAContext without a terminal asks polkit's agent (python3-dbusmock polkitd)", .serialized, .ownsDefaultKeychain,
       .enabled(if: FprintdFixture.unavailableReason == nil,
                Comment(rawValue: FprintdFixture.unavailableReason ?? "dbus-daemon and python3-dbusmock are installed")))
final class PolkitMockTests {
    let previous: any Authenticator

    init() {
        previous = KeychainServicesDefaults.authenticator
        KeychainServicesDefaults.useMemoryKeychain()
    }

    deinit {
        KeychainServicesDefaults.useAuthenticator(previous)
        KeychainServicesDefaults.setEngine(nil)
    }

    /// No terminal (a prompter nobody answers), no reader, polkit on the fixture's bus whatever the environment.
    static func use(_ fixture: FprintdFixture, prompter: ScriptedPrompter = ScriptedPrompter([], interactive: false)) {
        KeychainServicesDefaults.useSystemAuthentication(SystemAuthenticationConfiguration(
            fingerprint: nil, prompter: prompter,
            polkit: PolkitConfiguration(busAddress: fixture.busAddress, activation: .always)))
    }

    static func evaluate(_ context: LAContext, _ policy: LAPolicy = .deviceOwnerAuthentication) -> LAError.Code? {
        let done = DispatchSemaphore(value: 0)
        let outcome = Locked<LAError.Code??>(nil)
        context.evaluatePolicy(policy, localizedReason: "Unlock the vault") { success, error in
            outcome.withLock { $0 = .some(success ? nil : ((error as? LAError)?.code ?? .systemCancel)) }
            done.signal()
        }
        done.wait()
        return outcome.current ?? .systemCancel
    }

    @Test("allowed: the evaluation succeeds; the call names Keystone's action, this process as subject, the program and the reason")
    func allowed() async throws {
        try await withFixture(daemon: false) { fixture in
            try fixture.startPolkitMock()
            try fixture.polkitMock("SetAllowed", "['\(PolkitConfiguration.defaultActionID)']")
            let prompter = ScriptedPrompter([], interactive: false)
            Self.use(fixture, prompter: prompter)
            var error: NSError?
            #expect(LAContext().canEvaluatePolicy(.deviceOwnerAuthentication, error: &error), "\(String(describing: error))")
            #expect(Self.evaluate(LAContext()) == nil)
            #expect(prompter.messages.isEmpty, "the terminal prompter was not used")
            let calls = try fixture.polkitMock("GetMethodCalls", "CheckAuthorization")
            #expect(calls.contains("'\(PolkitConfiguration.defaultActionID)'"), "\(calls)")
            #expect(calls.contains("'unix-process'"), "\(calls)")
            #expect(calls.contains("'pid': <uint32 \(getpid())>"), "\(calls)")
            #expect(calls.contains("'uid': <\(getuid())>") || calls.contains("'uid': <int32 \(getuid())>"), "\(calls)")
            // Root may pass details: the message names the program and carries the reason.
            #expect(calls.contains("'polkit.message': '\(RequestingProgram.headline(reason: "Unlock the vault"))'"), "\(calls)")
            #expect(calls.contains("'program': '\(RequestingProgram.name)'"), "\(calls)")
            #expect(calls.contains("'reason': 'Unlock the vault'"), "\(calls)")
            // AllowUserInteraction (flags 1).
            #expect(calls.contains("uint32 1"), "\(calls)")
        }
    }

    @Test("denied: LAError.authenticationFailed")
    func denied() async throws {
        try await withFixture(daemon: false) { fixture in
            try fixture.startPolkitMock()
            Self.use(fixture)
            #expect(Self.evaluate(LAContext()) == .authenticationFailed)
        }
    }

    @Test("the person dismissing the dialog (polkit.dismissed) is LAError.userCancel, not authenticationFailed")
    func dismissed() async throws {
        try await withFixture(daemon: false) { fixture in
            try fixture.startPolkitMock()
            // What polkitd answers when the agent reports a Cancel button (a GUI agent's BeginAuthentication error).
            try fixture.polkitMock("AddMethod", "org.freedesktop.PolicyKit1.Authority", "CheckAuthorization",
                                   "(sa{sv})sa{ss}us", "(bba{ss})", "ret = (False, False, {'polkit.dismissed': 'true'})")
            Self.use(fixture)
            #expect(Self.evaluate(LAContext()) == .userCancel)
        }
    }

    @Test("invalidate() while polkit's agent waits: LAError.appCancel, and polkit is told CancelCheckAuthorization")
    func invalidateWhileWaiting() async throws {
        try await withFixture(daemon: false) { fixture in
            try fixture.startPolkitMock()
            try fixture.polkitMock("SimulateHang", "true")
            let signals = try fixture.polkitMonitor()
            defer { signals.stop() }
            let methods = try fixture.methodMonitor(interface: "org.freedesktop.PolicyKit1.Authority")
            defer { methods.stop() }
            Self.use(fixture)
            let context = LAContext()
            let outcome = Locked<LAError.Code??>(nil)
            let done = DispatchSemaphore(value: 0)
            context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Unlock the vault") { success, error in
                outcome.withLock { $0 = .some(success ? nil : ((error as? LAError)?.code ?? .systemCancel)) }
                done.signal()
            }
            _ = try signals.waitFor("MethodCalled")
            context.invalidate()
            done.wait()
            #expect(outcome.current == .some(.appCancel))
            _ = try methods.waitFor("member=CancelCheckAuthorization")
        }
    }

    @Test("biometry-only without a terminal is still notInteractive: polkit is not asked")
    func biometryOnly() async throws {
        try await withFixture(daemon: false) { fixture in
            try fixture.startPolkitMock()
            try fixture.polkitMock("SetAllowed", "['\(PolkitConfiguration.defaultActionID)']")
            Self.use(fixture)
            #expect(Self.evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) == .notInteractive)
            let calls = try fixture.polkitMock("GetMethodCalls", "CheckAuthorization")
            #expect(!calls.contains("unix-process"), "\(calls)")
        }
    }

    @Test("no polkit on the bus: notAvailable, with a reason naming polkitd")
    func noPolkit() async throws {
        try await withFixture(daemon: false) { fixture in
            let result = PolkitAuthentication.authenticate(PolkitConfiguration(busAddress: fixture.busAddress, activation: .always),
                                                           reason: "x", cancellation: AuthenticationCancellation())
            #expect(result.outcome == .notAvailable)
            #expect(result.detail?.contains("polkitd") == true, "\(result)")
        }
    }
}

@Suite("Desktop prompt: the polkit action file, desktop detection, the program's name")
struct PolkitConfigurationTests {
    @Test("a desktop session is DISPLAY or WAYLAND_DISPLAY, not empty")
    func desktopSession() {
        #expect(PolkitConfiguration.isDesktopSession(environment: ["DISPLAY": ":0"]))
        #expect(PolkitConfiguration.isDesktopSession(environment: ["WAYLAND_DISPLAY": "wayland-0"]))
        #expect(!PolkitConfiguration.isDesktopSession(environment: ["DISPLAY": ""]))
        #expect(!PolkitConfiguration.isDesktopSession(environment: ["TERM": "xterm"]))
    }

    @Test("without a terminal and outside a desktop session nobody is asked: notInteractive")
    func outsideDesktop() {
        let authenticator = SystemAuthenticator(configuration: SystemAuthenticationConfiguration(
            fingerprint: nil, prompter: ScriptedPrompter([], interactive: false),
            polkit: PolkitConfiguration(busAddress: "unix:path=/nonexistent", activation: .desktopSession)))
        // The test environment has no DISPLAY; a desktop session would make this nil.
        let desktop = PolkitConfiguration.isDesktopSession()
        #expect(authenticator.availability(for: .userPresence) == (desktop ? nil : .notInteractive))
    }

    @Test("the action file: auth_self everywhere, Keystone's id, owners only when given and escaped")
    func actionFile() {
        let plain = PolkitAuthentication.actionFileContents()
        #expect(plain.contains("<action id=\"io.github.keystone.authenticate\">"))
        #expect(plain.components(separatedBy: ">auth_self<").count == 4)
        #expect(!plain.contains("policykit.owner"))
        let owned = PolkitAuthentication.actionFileContents(owners: ["alice", "b<b"])
        #expect(owned.contains("<annotate key=\"org.freedesktop.policykit.owner\">unix-user:alice unix-user:b&lt;b</annotate>"))
    }

    @Test("keystone install-polkit writes the action file (0644, owners annotated) and leaves an identical one alone",
          .enabled(if: PolkitDaemon.keystone != nil, "the keystone executable is not built next to the tests"))
    func installVerb() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-polkit-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func keystone(_ arguments: [String]) throws -> (Int32, String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: PolkitDaemon.keystone!)
            process.arguments = arguments
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            try process.run()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: data, as: UTF8.self))
        }
        let first = try keystone(["install-polkit", "--action-dir", directory, "--owner", "alice"])
        #expect(first.0 == 0 && first.1.contains("installed"), "\(first)")
        let path = "\(directory)/\(PolkitConfiguration.defaultActionID).policy"
        #expect(try String(contentsOfFile: path, encoding: .utf8) == PolkitAuthentication.actionFileContents(owners: ["alice"]))
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o644)
        let again = try keystone(["install-polkit", "--action-dir", directory, "--owner", "alice"])
        #expect(again.0 == 0 && again.1.contains("already installed"), "\(again)")
        let bad = try keystone(["install-polkit", "--action-dir", directory, "--owner", "a b"])
        #expect(bad.0 != 0, "\(bad)")
    }

    @Test("the headline names the executable and the reason")
    func headline() {
        let name = URL(fileURLWithPath: CommandLine.arguments[0]).lastPathComponent
        #expect(RequestingProgram.name == name)
        #expect(RequestingProgram.headline(reason: "Open the vault") == "Authentication requested by \(name): Open the vault")
        #expect(RequestingProgram.headline(reason: "  ") == "Authentication requested by \(name).")
        #expect(RequestingProgram.headline(reason: nil) == "Authentication requested by \(name).")
    }
}
#endif
