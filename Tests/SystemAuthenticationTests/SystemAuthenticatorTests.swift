#if canImport(Glibc)
import Dispatch
import Foundation
import Glibc
import KeychainEngine
import SystemAuthentication
import Testing

/// A clock the test moves.
final class TestClock: Sendable {
    private let now = Locked(Date(timeIntervalSince1970: 1_800_000_000))
    var read: @Sendable () -> Date { { [now] in now.current } }
    func advance(_ seconds: TimeInterval) { now.withLock { $0 += seconds } }
}

/// The system authenticator (PAM with a real test account) behind the keychain engine's access-controlled items.
@Suite("System authenticator: the keychain engine asks the person through PAM")
struct SystemAuthenticatorTests {
    static let unix = "auth required pam_unix.so nodelay\n"
    static let needsUser = PAMFixture.canCreateUsers

    /// An engine whose authenticator checks the test user's password through a private `keystone` service.
    struct Setup {
        let engine: KeychainEngine
        let clock = TestClock()
        let directory: PAMFixture.ServiceDirectory

        init(prompter: any AuthenticationPrompter, stack: String = SystemAuthenticatorTests.unix) throws {
            let user = try PAMFixture.user()
            directory = try PAMFixture.ServiceDirectory(["keystone": stack])
            let pam = try PAMConfiguration(user: user.name, configurationDirectory: directory.path, maximumAttempts: 1)
            let authenticator = SystemAuthenticator(configuration: SystemAuthenticationConfiguration(pam: pam, fingerprint: nil, prompter: prompter, polkit: nil))
            var configuration = EngineConfiguration()
            configuration.now = clock.read
            engine = KeychainEngine(storage: MemoryStorage(), configuration: configuration, authenticator: authenticator)
        }

        func add(_ flags: AccessControlFlags, account: String = "alice", secret: String = "s3cret") throws {
            _ = try engine.add([
                Key.`class`: .string(ItemClass.genericPassword.rawValue), Key.service: .string("example.com"),
                Key.account: .string(account), Key.valueData: .data(Data(secret.utf8)),
                Key.accessControl: .accessControl(AccessControl(accessibility: .whenUnlocked, flags: flags)),
            ])
        }

        /// Reads the secret on a thread of its own (the authenticator blocks), with `context` if given.
        func read(account: String = "alice", context: AuthenticationContext? = nil) async -> Result<String, EngineError> {
            var query: KeychainQuery = [
                Key.`class`: .string(ItemClass.genericPassword.rawValue), Key.service: .string("example.com"),
                Key.account: .string(account), Key.returnData: .bool(true),
                Key.useOperationPrompt: .string("Read the example.com password"),
            ]
            if let context { query[Key.useAuthenticationContext] = .authenticationContext(context) }
            let engine = engine, frozen = query
            return await PAMFixture.onThread {
                do {
                    guard case .data(let data)? = try engine.copyMatching(frozen) else { return .failure(EngineError(Status.decode, "no data")) }
                    return .success(String(decoding: data, as: UTF8.self))
                } catch let error as EngineError {
                    return .failure(error)
                } catch {
                    return .failure(EngineError(Status.internalComponent, "\(error)"))
                }
            }
        }
    }

    @Test("a .userPresence read without a reader asks the password once; within the reuse duration a second read does not",
          .enabled(if: needsUser, "needs root and useradd to create a test user"))
    func reuseWithinDuration() async throws {
        let user = try PAMFixture.user()
        let prompter = ScriptedPrompter([user.password])
        let setup = try Setup(prompter: prompter)
        defer { setup.directory.remove() }
        try setup.add(.userPresence)
        let context = AuthenticationContext(reuseDuration: 10)
        #expect(try await setup.read(context: context).get() == "s3cret")
        #expect(prompter.secretPrompts.count == 1)
        #expect(prompter.messages.first == AuthenticationMessage(.info, RequestingProgram.headline(reason: "Read the example.com password")))
        setup.clock.advance(9)
        #expect(try await setup.read(context: context).get() == "s3cret")
        #expect(prompter.secretPrompts.count == 1, "the second read within 10 s must not prompt")
        // Past the window the person is asked again; the script is used up, so that is a cancel.
        setup.clock.advance(2)
        #expect(await setup.read(context: context).statusOrNil == Status.userCanceled)
        #expect(prompter.secretPrompts.count == 2)
    }

    @Test("without a context every read of a .devicePasscode item asks again",
          .enabled(if: needsUser, "needs root and useradd to create a test user"))
    func everyReadAsks() async throws {
        let user = try PAMFixture.user()
        let prompter = ScriptedPrompter([user.password, user.password])
        let setup = try Setup(prompter: prompter)
        defer { setup.directory.remove() }
        try setup.add(.devicePasscode)
        #expect(try await setup.read().get() == "s3cret")
        #expect(try await setup.read().get() == "s3cret")
        #expect(prompter.secretPrompts.count == 2)
    }

    @Test("a wrong password fails with errSecAuthFailed and the item is still there",
          .enabled(if: needsUser, "needs root and useradd to create a test user"))
    func wrongPassword() async throws {
        let user = try PAMFixture.user()
        let prompter = ScriptedPrompter([PAMFixture.wrongPassword(), user.password])
        let setup = try Setup(prompter: prompter)
        defer { setup.directory.remove() }
        try setup.add(.devicePasscode)
        #expect(await setup.read().statusOrNil == Status.authFailed)
        #expect(try await setup.read().get() == "s3cret")
        for message in prompter.messages { #expect(!message.text.contains(user.password)) }
    }

    @Test("with no one to ask, a protected read is errSecInteractionNotAllowed at once, and other items still read",
          .enabled(if: needsUser, "needs root and useradd to create a test user"))
    func notInteractive() async throws {
        let prompter = ScriptedPrompter([], interactive: false)
        let setup = try Setup(prompter: prompter)
        defer { setup.directory.remove() }
        try setup.add(.userPresence, account: "protected")
        try setup.add([], account: "plain", secret: "open")
        #expect(await setup.read(account: "protected").statusOrNil == Status.interactionNotAllowed)
        #expect(prompter.messages.isEmpty)
        #expect(try await setup.read(account: "plain").get() == "open")
        #expect(setup.engine.authenticator.availability(for: .userPresence) == .notInteractive)
    }

    @Test("invalidating the context while the password prompt waits ends the read with errSecUserCanceled",
          .enabled(if: needsUser, "needs root and useradd to create a test user"))
    func invalidateWhileWaiting() async throws {
        let prompter = BlockingPrompter()
        let setup = try Setup(prompter: prompter)
        defer { setup.directory.remove() }
        try setup.add(.userPresence)
        let context = AuthenticationContext(reuseDuration: 10)
        async let read = setup.read(context: context)
        await PAMFixture.onThread { prompter.waiting.wait() }
        context.invalidate()
        #expect(await read.statusOrNil == Status.userCanceled)
        // An invalidated context never authenticates again.
        #expect(await setup.read(context: context).statusOrNil == Status.authFailed)
    }

    @Test("biometry-only items without a fingerprint reader fail with errSecAuthFailed and ask nobody",
          .enabled(if: needsUser, "needs root and useradd to create a test user"))
    func biometryWithoutReader() async throws {
        let prompter = ScriptedPrompter(["unused"])
        let setup = try Setup(prompter: prompter)
        defer { setup.directory.remove() }
        try setup.add(.biometryAny)
        #expect(await setup.read().statusOrNil == Status.authFailed)
        #expect(prompter.messages.isEmpty)
        let authenticator = setup.engine.authenticator
        #expect(authenticator.biometryKind == .none)
        #expect(authenticator.availability(for: .biometryAny) == .notAvailable)
        #expect(authenticator.availability(for: .devicePasscode) == nil)
    }

    @Test("companion and application-password items are not available on Linux")
    func unsupportedFlags() {
        let authenticator = SystemAuthenticator(configuration: SystemAuthenticationConfiguration(fingerprint: nil, prompter: ScriptedPrompter([]), polkit: nil))
        #expect(authenticator.availability(for: .watch) == .notAvailable)
        #expect(authenticator.availability(for: .applicationPassword) == .notAvailable)
        #expect(authenticator.authenticate(AuthenticationRequest(itemClass: .genericPassword, flags: .watch, operationPrompt: nil, operation: "copy")) == .notAvailable)
        // With .or, the unsupported one is simply not offered.
        #expect(authenticator.availability(for: [.watch, .devicePasscode, .or]) == nil)
    }
}

extension Result where Failure == EngineError {
    /// The failure's status, nil on success.
    var statusOrNil: Int32? {
        if case .failure(let error) = self { return error.status }
        return nil
    }
}
#endif
