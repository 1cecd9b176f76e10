#if canImport(Glibc)
import Dispatch
import Foundation
import Glibc
import KeychainEngine
import SystemAuthentication
import Testing

/// Real Linux-PAM (pam_unix, pam_faillock, pam_permit, pam_deny) against a throwaway account, with services in a
/// temporary configuration directory: nothing in /etc/pam.d is read or written.
@Suite("PAM authentication")
struct PAMTests {
    static let unix = "auth required pam_unix.so nodelay\n"

    /// Authenticates on a thread of its own with a service file `stack` named `keystone`.
    func authenticate(stack: String, user: String?, maximumAttempts: Int = 3, reason: String? = nil,
                      prompter: any AuthenticationPrompter,
                      cancellation: AuthenticationCancellation = AuthenticationCancellation()) async throws -> PAMResult {
        let directory = try PAMFixture.ServiceDirectory(["keystone": stack])
        defer { directory.remove() }
        let configuration = try PAMConfiguration(user: user, configurationDirectory: directory.path,
                                                 maximumAttempts: maximumAttempts)
        return await PAMFixture.onThread {
            PAMAuthentication.authenticate(configuration, reason: reason, prompter: prompter, cancellation: cancellation)
        }
    }

    // MARK: The password

    @Test("the right password authenticates", .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func rightPassword() async throws {
        let user = try PAMFixture.user()
        let prompter = ScriptedPrompter([user.password])
        let result = try await authenticate(stack: Self.unix, user: user.name, reason: "Unlock the keychain",
                                            prompter: prompter)
        #expect(result.outcome == .success, "\(result)")
        #expect(result.pamStatus == 0)
        #expect(result.pamStatusName == "PAM_SUCCESS")
        #expect(result.attempts == 1)
        #expect(prompter.messages.first == AuthenticationMessage(.info, "Unlock the keychain"))
        #expect(prompter.secretPrompts.count == 1)
        #expect(!result.description.contains(user.password))
    }

    @Test("a wrong password fails after maximumAttempts prompts, with a try-again message between them",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"),
          arguments: [1, 3])
    func wrongPassword(maximumAttempts: Int) async throws {
        let user = try PAMFixture.user()
        let wrong = PAMFixture.wrongPassword()
        let prompter = ScriptedPrompter(Array(repeating: wrong, count: maximumAttempts))
        let result = try await authenticate(stack: Self.unix, user: user.name, maximumAttempts: maximumAttempts,
                                            prompter: prompter)
        #expect(result.outcome == .failed, "\(result)")
        // pam_unix answers its third wrong password in one transaction with PAM_MAXTRIES: still a wrong password.
        #expect(["PAM_AUTH_ERR", "PAM_MAXTRIES"].contains(result.pamStatusName))
        #expect(result.attempts == maximumAttempts)
        #expect(prompter.secretPrompts.count == result.attempts)
        #expect(prompter.errors == Array(repeating: AuthenticationMessage(.error, PAMAuthentication.retryMessage),
                                         count: maximumAttempts - 1))
        #expect(!result.description.contains(wrong))
        #expect(!result.moduleMessages.contains { $0.text.contains(wrong) })
    }

    @Test("wrong, wrong, right with three attempts succeeds on the third",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func thirdTimeLucky() async throws {
        let user = try PAMFixture.user()
        let prompter = ScriptedPrompter([PAMFixture.wrongPassword(), PAMFixture.wrongPassword(), user.password])
        let result = try await authenticate(stack: Self.unix, user: user.name, prompter: prompter)
        #expect(result.outcome == .success, "\(result)")
        #expect(result.attempts == 3)
        #expect(prompter.secretPrompts.count == 3)
        #expect(prompter.errors.count == 2)
    }

    @Test("pam_faillock locks the account after three failures and its own message reaches the prompter",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func faillock() async throws {
        let user = try PAMFixture.user()
        let tallies = try PAMFixture.ServiceDirectory([:])  // pam_faillock's dir=: no global state
        defer { tallies.remove() }
        let options = "dir=\(tallies.path) deny=3 unlock_time=900 nodelay"
        let stack = """
            auth required pam_faillock.so preauth \(options)
            auth [success=1 default=bad] pam_unix.so nodelay
            auth [default=die] pam_faillock.so authfail \(options)
            auth sufficient pam_faillock.so authsucc \(options)

            """
        let wrong = ScriptedPrompter(Array(repeating: PAMFixture.wrongPassword(), count: 3))
        let first = try await authenticate(stack: stack, user: user.name, prompter: wrong)
        #expect(first.outcome == .failed, "\(first)")
        #expect(first.attempts == 3)

        let right = ScriptedPrompter([user.password])
        let second = try await authenticate(stack: stack, user: user.name, maximumAttempts: 1, prompter: right)
        #expect(second.outcome == .failed, "\(second)")
        #expect(second.pamStatusName == "PAM_AUTH_ERR")
        // pam_faillock's own words, as it sent them (Linux-PAM 1.5 sends them as info messages).
        let locked = try #require(second.moduleMessages.first { $0.text.hasPrefix("The account is locked") },
                                  "\(second.moduleMessages)")
        #expect(!locked.expectsAnswer)
        #expect(right.messages.contains(locked))
        #expect(right.secretPrompts.count == 1)  // the right password was asked for, typed, and refused
        #expect(!second.moduleMessages.contains { $0.text.contains(user.password) })
        #expect(!second.description.contains(user.password))
    }

    @Test("a user without an account has no usable password (passcodeNotSet)",
          .enabled(if: PAMFixture.canCreateUsers, "needs root: pam_unix checks another user's password only as root"))
    func unknownUser() async throws {
        let prompter = ScriptedPrompter(["anything"])
        let result = try await authenticate(stack: Self.unix, user: "kstnosuchuser", prompter: prompter)
        #expect(result.outcome == .passcodeNotSet, "\(result)")
        #expect(result.pamStatusName == "PAM_USER_UNKNOWN")
        #expect(result.attempts == 1)
    }

    // MARK: Cancellation and interaction

    @Test("a prompter that answers nil cancels (userCancel)",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func userCancel() async throws {
        let user = try PAMFixture.user()
        let prompter = ScriptedPrompter([])
        let result = try await authenticate(stack: Self.unix, user: user.name, prompter: prompter)
        #expect(result.outcome == .userCancel, "\(result)")
        #expect(result.attempts == 1)
        #expect(prompter.secretPrompts.count == 1)
    }

    @Test("the person cancelling through Debian's common-auth is still userCancel, not a wrong password",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func userCancelThroughPamDeny() async throws {
        let user = try PAMFixture.user()
        let stack = "auth [success=1 default=ignore] pam_unix.so nodelay\nauth requisite pam_deny.so\nauth required pam_permit.so\n"
        let result = try await authenticate(stack: stack, user: user.name, prompter: ScriptedPrompter([]))
        #expect(result.outcome == .userCancel, "\(result)")
        #expect(result.attempts == 1)
    }

    @Test("a non-interactive prompter is never asked and the outcome is notInteractive",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func notInteractive() async throws {
        let user = try PAMFixture.user()
        let prompter = ScriptedPrompter([user.password], interactive: false)
        let result = try await authenticate(stack: Self.unix, user: user.name, reason: "Unlock", prompter: prompter)
        #expect(result.outcome == .notInteractive, "\(result)")
        #expect(result.attempts == 1)
        #expect(prompter.messages.isEmpty)
    }

    @Test("a stack that asks nothing succeeds without a person", .enabled(if: PAMFixture.hasConfdir, "needs pam_start_confdir"))
    func permitWithoutPerson() async throws {
        let prompter = ScriptedPrompter([], interactive: false)
        let result = try await authenticate(stack: "auth required pam_permit.so\n", user: nil, prompter: prompter)
        #expect(result.outcome == .success, "\(result)")
        #expect(prompter.messages.isEmpty)
    }

    @Test("cancelling while the prompter waits ends with appCancel",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func cancelWhilePrompting() async throws {
        let user = try PAMFixture.user()
        let prompter = BlockingPrompter()
        let cancellation = AuthenticationCancellation()
        async let result = authenticate(stack: Self.unix, user: user.name, prompter: prompter, cancellation: cancellation)
        await PAMFixture.onThread {
            prompter.waiting.wait()
            cancellation.cancel()
        }
        let ended = try await result
        #expect(ended.outcome == .appCancel, "\(ended)")
        #expect(ended.attempts == 1)
    }

    @Test("cancelling before the start asks nothing and ends with appCancel", .enabled(if: PAMFixture.hasConfdir, "needs pam_start_confdir"))
    func cancelBeforeStart() async throws {
        let prompter = ScriptedPrompter(["x"])
        let cancellation = AuthenticationCancellation()
        cancellation.cancel()
        let result = try await authenticate(stack: "auth required pam_permit.so\n", user: nil, reason: "Unlock",
                                            prompter: prompter, cancellation: cancellation)
        #expect(result.outcome == .appCancel)
        #expect(result.attempts == 0)
        #expect(prompter.messages.isEmpty)
    }

    @Test("cancelling interrupts PAM's fail delay: PAM returns before the delay's 300 s minimum",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func cancelDuringFailDelay() async throws {
        let user = try PAMFixture.user()
        // pam_faildelay asks for 600 s after the wrong password; Linux-PAM waits between half and one and a half
        // times the largest delay asked (pam_delay.c, _pam_compute_delay): at least 300 s.
        let stack = "auth optional pam_faildelay.so delay=600000000\n" + Self.unix
        let prompter = ScriptedPrompter([PAMFixture.wrongPassword()])
        let cancellation = AuthenticationCancellation()
        let directory = try PAMFixture.ServiceDirectory(["keystone": stack])
        defer { directory.remove() }
        let configuration = try PAMConfiguration(user: user.name, configurationDirectory: directory.path)
        // Both moments are taken on threads of their own (never on Swift's cooperative pool, whose scheduling under
        // load says nothing about PAM): when the cancellation was made, and when PAM returned.
        let cancelledAt = Locked<ContinuousClock.Instant?>(nil)
        let authentication = PAMFixture.started {
            let result = PAMAuthentication.authenticate(configuration, reason: nil, prompter: prompter, cancellation: cancellation)
            return (result, ContinuousClock.now)
        }
        await PAMFixture.onThread {
            prompter.answered.wait()
            cancelledAt.withLock { $0 = ContinuousClock.now }
            cancellation.cancel()
        }
        let (ended, returnedAt) = await authentication.value
        #expect(ended.outcome == .appCancel, "\(ended)")
        #expect(ended.attempts == 1)
        // Time is the behaviour, measured against the delay's own minimum: PAM returned before 300 s had passed since
        // the cancellation, which only an interrupted wait does (a served one lasts 300 s at least).
        let waited = returnedAt - (cancelledAt.current ?? returnedAt)
        #expect(waited < .seconds(300), "PAM returned \(waited) after the cancellation: the delay was served")
    }

    // MARK: Services

    @Test("without a keystone service PAM falls back to other", .enabled(if: PAMFixture.hasConfdir, "needs pam_start_confdir"))
    func fallbackToOther() async throws {
        let directory = try PAMFixture.ServiceDirectory(["other": "auth required pam_permit.so\n"])
        defer { directory.remove() }
        let prompter = ScriptedPrompter([])
        let configuration = try PAMConfiguration(configurationDirectory: directory.path)
        let result = await PAMFixture.onThread {
            PAMAuthentication.authenticate(configuration, reason: nil, prompter: prompter,
                                           cancellation: AuthenticationCancellation())
        }
        #expect(result.outcome == .success, "\(result)")
        #expect(result.attempts == 1)
        #expect(prompter.messages.isEmpty)
    }

    @Test("other = pam_deny fails once, without a retry", .enabled(if: PAMFixture.hasConfdir, "needs pam_start_confdir"))
    func otherDenies() async throws {
        let directory = try PAMFixture.ServiceDirectory(["other": "auth required pam_deny.so\n"])
        defer { directory.remove() }
        let prompter = ScriptedPrompter([])
        let configuration = try PAMConfiguration(configurationDirectory: directory.path)
        let result = await PAMFixture.onThread {
            PAMAuthentication.authenticate(configuration, reason: nil, prompter: prompter,
                                           cancellation: AuthenticationCancellation())
        }
        #expect(result.outcome == .failed, "\(result)")
        #expect(result.pamStatusName == "PAM_AUTH_ERR")
        #expect(result.attempts == 1)
        #expect(prompter.messages.isEmpty)
    }

    @Test("a missing configuration directory is notAvailable, with the reason", .enabled(if: PAMFixture.hasConfdir, "needs pam_start_confdir"))
    func missingDirectory() async throws {
        let configuration = try PAMConfiguration(configurationDirectory: "/nonexistent/keystone-" + UUID().uuidString)
        let result = await PAMFixture.onThread {
            PAMAuthentication.authenticate(configuration, reason: nil, prompter: ScriptedPrompter([]),
                                           cancellation: AuthenticationCancellation())
        }
        #expect(result.outcome == .notAvailable)
        #expect(result.attempts == 0)
        #expect(result.description.contains("pam_start failed"), "\(result)")
    }

    @Test("maximumAttempts outside 1...10 is a typed error", arguments: [0, 11, -1])
    func attemptsOutOfRange(attempts: Int) throws {
        #expect(throws: PAMConfigurationError.maximumAttemptsOutOfRange(attempts)) {
            try PAMConfiguration(maximumAttempts: attempts)
        }
        var configuration = try PAMConfiguration()
        configuration.maximumAttempts = attempts
        #expect(throws: PAMConfigurationError.maximumAttemptsOutOfRange(attempts)) { try configuration.validate() }
        let result = PAMAuthentication.authenticate(configuration, reason: nil, prompter: ScriptedPrompter([]),
                                                    cancellation: AuthenticationCancellation())
        #expect(result.outcome == .notAvailable)
        #expect(result.attempts == 0)
    }

    @Test("the defaults: service keystone, the effective user, /etc/pam.d, three attempts; 1 and 10 are valid")
    func defaults() throws {
        let configuration = try PAMConfiguration()
        #expect(configuration.service == "keystone")
        #expect(configuration.user == nil)
        #expect(configuration.configurationDirectory == nil)
        #expect(configuration.maximumAttempts == 3)
        #expect(throws: Never.self) { try PAMConfiguration(maximumAttempts: 1) }
        #expect(throws: Never.self) { try PAMConfiguration(maximumAttempts: 10) }
        #expect(throws: PAMConfigurationError.self) { try PAMConfiguration(service: "../etc/passwd") }
        #expect(throws: PAMConfigurationError.self) { try PAMConfiguration(service: "") }
    }

    // MARK: The service file

    @Test("the service file includes common-auth, system-auth, or is nil")
    func serviceFile() throws {
        let debian = try PAMFixture.ServiceDirectory(["common-auth": "auth required pam_permit.so\n"])
        let fedora = try PAMFixture.ServiceDirectory(["system-auth": "auth required pam_permit.so\n"])
        let neither = try PAMFixture.ServiceDirectory(["login": "auth required pam_permit.so\n"])
        defer { debian.remove(); fedora.remove(); neither.remove() }

        let debianFile = try #require(PAMAuthentication.serviceFileContents(pamDirectory: debian.path))
        #expect(debianFile.split(separator: "\n").first?.hasPrefix("#") == true)
        #expect(debianFile.split(separator: "\n").dropFirst() == ["@include common-auth"])
        let fedoraFile = try #require(PAMAuthentication.serviceFileContents(pamDirectory: fedora.path))
        #expect(fedoraFile.split(separator: "\n").first?.hasPrefix("#") == true)
        #expect(fedoraFile.split(separator: "\n").dropFirst() == ["auth include system-auth"])
        #expect(PAMAuthentication.serviceFileContents(pamDirectory: neither.path) == nil)
    }

    @Test("the generated Debian service file authenticates with this system's common-auth",
          .enabled(if: PAMFixture.canCreateUsers && FileManager.default.fileExists(atPath: "/etc/pam.d/common-auth"),
                   "needs root, useradd and a Debian-style /etc/pam.d/common-auth"))
    func generatedDebianFileWorks() async throws {
        let user = try PAMFixture.user()
        let commonAuth = try String(contentsOfFile: "/etc/pam.d/common-auth", encoding: .utf8)
        let directory = try PAMFixture.ServiceDirectory(["common-auth": commonAuth])
        defer { directory.remove() }
        let contents = try #require(PAMAuthentication.serviceFileContents(pamDirectory: directory.path))
        try contents.write(toFile: directory.path + "/keystone", atomically: true, encoding: .utf8)
        let prompter = ScriptedPrompter([user.password])
        let configuration = try PAMConfiguration(user: user.name, configurationDirectory: directory.path)
        let result = await PAMFixture.onThread {
            PAMAuthentication.authenticate(configuration, reason: nil, prompter: prompter,
                                           cancellation: AuthenticationCancellation())
        }
        #expect(result.outcome == .success, "\(result)")
        #expect(prompter.secretPrompts.count == 1)
    }

    @Test("pamtester agrees with Keystone on the same generated service",
          .enabled(if: PAMFixture.canCreateUsers && PAMFixture.pamtester != nil && PAMFixture.pamWrapper != nil
                   && FileManager.default.fileExists(atPath: "/etc/pam.d/common-auth"),
                   "needs root, useradd, pamtester, libpam-wrapper and a Debian-style /etc/pam.d/common-auth"))
    func pamtesterInterop() async throws {
        let user = try PAMFixture.user()
        let commonAuth = try String(contentsOfFile: "/etc/pam.d/common-auth", encoding: .utf8)
        let directory = try PAMFixture.ServiceDirectory(["common-auth": commonAuth])
        defer { directory.remove() }
        let contents = try #require(PAMAuthentication.serviceFileContents(pamDirectory: directory.path))
        try contents.write(toFile: directory.path + "/keystone", atomically: true, encoding: .utf8)

        // pamtester reads the password on its standard input (never an argument); pam_wrapper makes its
        // pam_start read the service from the temporary directory instead of /etc/pam.d.
        let environment = ["LD_PRELOAD": PAMFixture.pamWrapper!, "PAM_WRAPPER": "1",
                           "PAM_WRAPPER_SERVICE_DIR": directory.path]
        let pamtester = [PAMFixture.pamtester!, "keystone", user.name, "authenticate"]
        let wrong = PAMFixture.wrongPassword()
        // Both wrong passwords wait common-auth's pam_unix fail delay (about 2 s): the two sides run side by side.
        async let theirs = PAMFixture.onThread {
            (PAMFixture.run(pamtester, standardInput: user.password + "\n", environment: environment),
             PAMFixture.run(pamtester, standardInput: wrong + "\n", environment: environment))
        }
        let configuration = try PAMConfiguration(user: user.name, configurationDirectory: directory.path,
                                                 maximumAttempts: 1)
        let (ours, oursWrong) = await PAMFixture.onThread {
            (PAMAuthentication.authenticate(configuration, reason: nil, prompter: ScriptedPrompter([user.password]),
                                            cancellation: AuthenticationCancellation()),
             PAMAuthentication.authenticate(configuration, reason: nil, prompter: ScriptedPrompter([wrong]),
                                            cancellation: AuthenticationCancellation()))
        }
        let (right, refused) = await theirs
        #expect(right == 0)
        #expect(refused != 0)
        #expect(ours.outcome == .success, "\(ours)")
        #expect(oursWrong.outcome == .failed, "\(oursWrong)")
    }

    @Test("PAM's fail delay is still waited after a wrong password",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func failDelayIsWaited() async throws {
        let user = try PAMFixture.user()
        // 0.4 s: Linux-PAM waits between half and one and a half times that (pam_delay.c): at least 200 ms.
        let stack = "auth optional pam_faildelay.so delay=400000\n" + Self.unix
        let start = ContinuousClock.now
        let result = try await authenticate(stack: stack, user: user.name, maximumAttempts: 1,
                                            prompter: ScriptedPrompter([PAMFixture.wrongPassword()]))
        #expect(result.outcome == .failed, "\(result)")
        // Time is the behaviour, measured against the delay's own minimum (a lower bound: no machine is too slow).
        #expect(ContinuousClock.now - start >= .milliseconds(200))
    }

    // MARK: On a terminal

    @Test("the right password typed on a terminal authenticates",
          .enabled(if: PAMFixture.canCreateUsers, "needs root and useradd to create a test user"))
    func terminalEndToEnd() async throws {
        let user = try PAMFixture.user()
        let terminal = try PseudoTerminal()
        let prompter = TerminalPrompter(path: terminal.slavePath)
        #expect(prompter.isInteractive)
        let directory = try PAMFixture.ServiceDirectory(["keystone": Self.unix])
        defer { directory.remove() }
        let configuration = try PAMConfiguration(user: user.name, configurationDirectory: directory.path)
        let cancellation = AuthenticationCancellation()
        let result = PAMFixture.started {
            PAMAuthentication.authenticate(configuration, reason: "Unlock the keychain", prompter: prompter,
                                           cancellation: cancellation)
        }
        let shown = await PAMFixture.onThread { () -> String? in
            // Never asked: end the authentication rather than type the password into a terminal that may echo.
            guard let shown = terminal.read(until: "assword:") else { cancellation.cancel(); return nil }
            terminal.type(user.password + "\n")
            return shown
        }
        let ended = await result.value
        #expect(ended.outcome == .success, "\(ended)")
        #expect(shown?.contains("Unlock the keychain") == true)
        #expect(!terminal.drain().contains(user.password))
    }
}
#endif
