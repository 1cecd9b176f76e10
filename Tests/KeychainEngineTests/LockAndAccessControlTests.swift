import Foundation
import Testing
import KeychainEngine

@Suite("Lock state and accessibility")
struct LockStateTests {
    func item(_ account: String, _ accessibility: Accessibility) -> KeychainQuery {
        genp("svc", account, [Key.valueData: secret("s-\(account)"), Key.accessible: .string(accessibility.rawValue)])
    }

    @Test("which accessibility classes each lock state makes available", arguments: [
        (LockState.unlocked, Accessibility.whenUnlocked, true), (.unlocked, .afterFirstUnlock, true), (.unlocked, .always, true),
        (.unlocked, .whenPasscodeSetThisDeviceOnly, true),
        (.lockedAfterFirstUnlock, .whenUnlocked, false), (.lockedAfterFirstUnlock, .whenUnlockedThisDeviceOnly, false),
        (.lockedAfterFirstUnlock, .afterFirstUnlock, true), (.lockedAfterFirstUnlock, .afterFirstUnlockThisDeviceOnly, true),
        (.lockedAfterFirstUnlock, .always, true), (.lockedAfterFirstUnlock, .whenPasscodeSetThisDeviceOnly, false),
        (.locked, .whenUnlocked, false), (.locked, .afterFirstUnlock, false), (.locked, .always, false),
        (.locked, .alwaysThisDeviceOnly, false),
    ] as [(LockState, Accessibility, Bool)])
    func availability(_ state: LockState, _ accessibility: Accessibility, _ available: Bool) throws {
        let f = Fixture()
        try f.engine.add(item("x", accessibility))
        f.storage.lockState = state
        let readStatus = status { _ = try f.engine.copyMatching(genp("svc", "x", [Key.returnData: .bool(true)])) }
        #expect(readStatus == (available ? Status.success : Status.interactionNotAllowed))
        let writeStatus = status { try f.engine.update(genp("svc", "x"), with: [Key.valueData: secret("new")]) }
        #expect(writeStatus == (available ? Status.success : Status.interactionNotAllowed))
    }

    @Test("a locked item answers errSecInteractionNotAllowed to copy, update and delete, and is intact after unlocking")
    func lockedItemIsUntouched() throws {
        let f = Fixture()
        try f.engine.add(item("token", .whenUnlocked))
        f.storage.lockState = .locked
        #expect(status { _ = try f.engine.copyMatching(genp("svc", "token", [Key.returnData: .bool(true)])) } == Status.interactionNotAllowed)
        #expect(status { _ = try f.engine.copyMatching(genp("svc", "token", [Key.returnAttributes: .bool(true)])) } == Status.interactionNotAllowed)
        #expect(status { try f.engine.update(genp("svc", "token"), with: [Key.valueData: secret("x")]) } == Status.interactionNotAllowed)
        #expect(status { try f.engine.delete(genp("svc", "token")) } == Status.interactionNotAllowed)
        #expect(status { try f.engine.delete(genp("svc")) } == Status.interactionNotAllowed)
        f.storage.lockState = .unlocked
        #expect(try f.engine.secretString(genp("svc", "token")) == "s-token")
    }

    @Test("a delete that matches one locked item deletes nothing at all")
    func deleteIsAllOrNothing() throws {
        let f = Fixture()
        try f.engine.add(item("bg", .afterFirstUnlock))
        try f.engine.add(item("ui", .whenUnlocked))
        f.storage.lockState = .lockedAfterFirstUnlock
        #expect(status { try f.engine.delete(genp("svc")) } == Status.interactionNotAllowed)
        #expect(try f.engine.secretString(genp("svc", "bg")) == "s-bg")
        f.storage.lockState = .unlocked
        #expect(try f.engine.secretString(genp("svc", "ui")) == "s-ui")
    }

    @Test("a search naming kSecAttrAccessible matches only that class, so the available class lists while another is locked")
    func searchByAccessibility() throws {
        let f = Fixture()
        try f.engine.add(item("bg", .afterFirstUnlock))
        try f.engine.add(item("ui", .whenUnlocked))
        let attributes: KeychainQuery = [Key.returnAttributes: .bool(true), Key.matchLimit: .string(Key.matchLimitAll)]
        f.storage.lockState = .lockedAfterFirstUnlock
        #expect(status { _ = try f.engine.copyMatching(genp("svc", nil, attributes)) } == Status.interactionNotAllowed)
        let background = try f.engine.copyMatching(genp("svc", nil, attributes.merging([Key.accessible: .string(Accessibility.afterFirstUnlock.rawValue)]) { $1 }))
        guard case .array(let rows)? = background else { Issue.record("expected an array, got \(String(describing: background))"); return }
        #expect(rows.count == 1)
        // A class with no item of the service is not found, not locked.
        #expect(status { _ = try f.engine.copyMatching(genp("svc", nil, attributes.merging([Key.accessible: .string(Accessibility.alwaysThisDeviceOnly.rawValue)]) { $1 })) } == Status.itemNotFound)
        #expect(status { _ = try f.engine.copyMatching(genp("svc", nil, attributes.merging([Key.accessible: .string(Accessibility.whenUnlocked.rawValue)]) { $1 })) } == Status.interactionNotAllowed)
    }

    @Test("before the first unlock no item can be added, always ones included; after it afterFirstUnlock and always ones can")
    func addWhileLocked() throws {
        let f = Fixture()
        f.storage.lockState = .locked
        for accessibility in [Accessibility.whenUnlocked, .afterFirstUnlock, .always, .alwaysThisDeviceOnly] {
            #expect(status { try f.engine.add(item(accessibility.rawValue, accessibility)) } == Status.interactionNotAllowed)
        }
        #expect(f.storage.count == 0)
        f.storage.lockState = .lockedAfterFirstUnlock
        #expect(status { try f.engine.add(item("a", .whenUnlocked)) } == Status.interactionNotAllowed)
        try f.engine.add(item("b", .afterFirstUnlock))
        try f.engine.add(item("c", .always))
        #expect(f.storage.count == 2)
    }

    @Test("whenPasscodeSetThisDeviceOnly needs a passcode")
    func passcodeRequired() {
        let f = Fixture { $0.passcodeSet = false }
        #expect(status { try f.engine.add(item("a", .whenPasscodeSetThisDeviceOnly)) } == Status.authFailed)
        #expect(f.storage.count == 0)
    }
}

@Suite("Access control and authentication")
struct AccessControlTests {
    static let biometric = AccessControl(accessibility: .whenPasscodeSetThisDeviceOnly, flags: .biometryAny)

    func protected(_ fixture: Fixture, _ account: String = "bio", flags: AccessControlFlags = .biometryAny) throws {
        try fixture.engine.add(genp("svc", account, [
            Key.valueData: secret("guarded"),
            Key.accessControl: .accessControl(AccessControl(accessibility: .whenPasscodeSetThisDeviceOnly, flags: flags)),
        ]))
    }

    @Test("reading the secret asks the authenticator once, with the operation prompt")
    func readPrompts() throws {
        let f = Fixture()
        try protected(f)
        #expect(try f.engine.secretString(genp("svc", "bio", [Key.useOperationPrompt: .string("Unlock your notes")])) == "guarded")
        #expect(f.auth.prompts == 1)
        #expect(f.auth.requests.first?.operationPrompt == "Unlock your notes")
        #expect(f.auth.requests.first?.flags == .biometryAny)
    }

    @Test("attributes-only queries, existence checks and deletes never prompt")
    func noPromptWithoutSecret() throws {
        let f = Fixture(otherwise: .failed)
        try protected(f)
        let attributes = try f.engine.copyMatching(genp("svc", "bio", [Key.returnAttributes: .bool(true)]))?.attributes
        #expect(attributes?[Key.accessControl] == .accessControl(Self.biometric))
        #expect(try f.engine.copyMatching(genp("svc", "bio")) == nil)
        try f.engine.update(genp("svc", "bio"), with: [Key.label: .string("renamed")])
        try f.engine.delete(genp("svc", "bio"))
        #expect(f.auth.prompts == 0)
    }

    @Test("each outcome of the prompt gives its status", arguments: [
        (AuthenticationOutcome.userCancel, Status.userCanceled), (.failed, Status.authFailed),
        (.notAvailable, Status.authFailed), (.lockout, Status.authFailed), (.success, Status.success),
    ] as [(AuthenticationOutcome, Int32)])
    func outcomes(_ outcome: AuthenticationOutcome, _ expected: Int32) throws {
        let f = Fixture(otherwise: outcome)
        try protected(f)
        #expect(status { _ = try f.engine.copyMatching(genp("svc", "bio", [Key.returnData: .bool(true)])) } == expected)
        #expect(f.storage.count == 1)
    }

    @Test("kSecUseAuthenticationUI Fail turns the prompt into errSecInteractionNotAllowed; Skip leaves the item out")
    func authenticationUI() throws {
        let f = Fixture()
        try protected(f)
        try f.engine.add(genp("svc", "plain", [Key.valueData: secret("open")]))
        #expect(status { _ = try f.engine.copyMatching(genp("svc", "bio", [
            Key.returnData: .bool(true), Key.useAuthenticationUI: .string(Key.useAuthenticationUIFail),
        ])) } == Status.interactionNotAllowed)
        #expect(status { _ = try f.engine.copyMatching(genp("svc", "bio", [
            Key.returnData: .bool(true), Key.useAuthenticationUI: .string(Key.useAuthenticationUISkip),
        ])) } == Status.itemNotFound)
        let rest = try f.engine.copyMatching(genp("svc", nil, [
            Key.returnData: .bool(true), Key.matchLimit: .string(Key.matchLimitAll),
            Key.useAuthenticationUI: .string(Key.useAuthenticationUISkip),
        ]))
        #expect(rest == .array([.data(Data("open".utf8))]))
        #expect(f.auth.prompts == 0)
    }

    @Test("an authentication context reuses a success within its window, and prompts again after it")
    func contextReuse() throws {
        let f = Fixture()
        try protected(f)
        let context = AuthenticationContext(reuseDuration: 10)
        let query = genp("svc", "bio", [Key.returnData: .bool(true), Key.useAuthenticationContext: .authenticationContext(context)])
        _ = try f.engine.copyMatching(query)
        f.clock.advance(5)
        _ = try f.engine.copyMatching(query)
        #expect(f.auth.prompts == 1)
        f.clock.advance(6)
        _ = try f.engine.copyMatching(query)
        #expect(f.auth.prompts == 2)
        context.invalidate()
        #expect(status { _ = try f.engine.copyMatching(query) } == Status.authFailed)
    }

    @Test("a context that does not allow interaction fails instead of prompting")
    func contextWithoutInteraction() throws {
        let f = Fixture()
        try protected(f)
        let context = AuthenticationContext(interactionNotAllowed: true)
        #expect(status { _ = try f.engine.copyMatching(genp("svc", "bio", [
            Key.returnData: .bool(true), Key.useAuthenticationContext: .authenticationContext(context),
        ])) } == Status.interactionNotAllowed)
        #expect(f.auth.prompts == 0)
    }

    @Test("changing the secret of an access-controlled item needs an authentication; a cancel leaves it unchanged")
    func updateNeedsAuthentication() throws {
        let f = Fixture(outcomes: [.userCancel, .success, .success])
        try protected(f)
        #expect(status { try f.engine.update(genp("svc", "bio"), with: [Key.valueData: secret("changed")]) } == Status.userCanceled)
        #expect(try f.engine.secretString(genp("svc", "bio")) == "guarded")
        try f.engine.update(genp("svc", "bio"), with: [Key.valueData: secret("changed")])
        #expect(try f.engine.secretString(genp("svc", "bio")) == "changed")
    }

    @Test("biometryCurrentSet items become unreadable after the enrolled biometry changes; biometryAny items do not")
    func enrollmentChange() throws {
        let f = Fixture()
        try protected(f, "current", flags: .biometryCurrentSet)
        try protected(f, "any", flags: .biometryAny)
        f.engine.changeBiometryEnrollment()
        #expect(status { _ = try f.engine.copyMatching(genp("svc", "current", [Key.returnData: .bool(true)])) } == Status.authFailed)
        #expect(try f.engine.secretString(genp("svc", "any")) == "guarded")
    }

    @Test("with enforcement off (a simulator), access-controlled items come back without a prompt")
    func simulatorSkipsPrompt() throws {
        let f = Fixture(otherwise: .failed) { $0.enforcesAccessControl = false }
        try protected(f)
        #expect(try f.engine.secretString(genp("svc", "bio")) == "guarded")
        #expect(f.auth.prompts == 0)
    }

    @Test("Secure Enclave keys cannot be added where there is no Secure Enclave")
    func secureEnclave() throws {
        let key: KeychainQuery = [Key.class: .string("keys"), Key.tokenID: .string(Key.tokenIDSecureEnclave), Key.applicationTag: .data(Data("k".utf8))]
        #expect(status { try Fixture().engine.add(key) } == Status.unimplemented)
        try Fixture { $0.secureEnclaveAvailable = true }.engine.add(key)
    }

    @Test("the authenticator is never called while a storage transaction is open")
    func authenticationOutsideTransaction() throws {
        /// A storage that knows when one of its transactions is open.
        final class Observed: KeychainStorage {
            let inner = MemoryStorage()
            let open = Locked(0)
            var lockState: LockState { inner.lockState }
            func read<T>(_ body: (any StorageReader) throws -> T) throws -> T {
                open.withLock { $0 += 1 }; defer { open.withLock { $0 -= 1 } }
                return try inner.read(body)
            }
            func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
                open.withLock { $0 += 1 }; defer { open.withLock { $0 -= 1 } }
                return try inner.write(body)
            }
        }
        struct Checking: Authenticator {
            let storage: Observed
            func authenticate(_ request: AuthenticationRequest) -> AuthenticationOutcome {
                storage.open.current == 0 ? .success : .failed
            }
        }
        let storage = Observed()
        let engine = KeychainEngine(storage: storage, authenticator: Checking(storage: storage))
        try engine.add(genp("svc", "bio", [Key.valueData: secret("g"), Key.accessControl: .accessControl(Self.biometric)]))
        #expect(try engine.secretString(genp("svc", "bio")) == "g")
        try engine.update(genp("svc", "bio"), with: [Key.valueData: secret("h")])
        #expect(try engine.secretString(genp("svc", "bio")) == "h")
    }
}

@Suite("Hooks")
struct HookTests {
    final class Recorder: EngineHook {
        let log = Locked<[(KeychainOperation, Int32)]>([])
        let failNext = Locked<Int32?>(nil)
        func willPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?) throws {
            if let status = failNext.withLock({ s -> Int32? in defer { s = nil }; return s }) { throw EngineError(status, "injected") }
        }
        func didPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?, status: Int32) {
            log.withLock { $0.append((operation, status)) }
        }
    }

    @Test("a hook sees every operation with its status and can fail one without touching storage")
    func hookObservesAndInjects() throws {
        let f = Fixture()
        let recorder = Recorder()
        f.engine.addHook(recorder)
        try f.engine.add(genp("svc", "a"))
        recorder.failNext.withLock { $0 = Status.missingEntitlement }
        #expect(status { try f.engine.add(genp("svc", "b")) } == Status.missingEntitlement)
        #expect(status { _ = try f.engine.copyMatching(genp("svc", "b")) } == Status.itemNotFound)
        #expect(recorder.log.current.map(\.0) == [.add, .add, .copy])
        #expect(recorder.log.current.map(\.1) == [0, Status.missingEntitlement, Status.itemNotFound])
        #expect(f.storage.count == 1)
    }

    @Test("error descriptions name the code and never carry the secret")
    func errorDescriptions() throws {
        let f = Fixture()
        try f.engine.add(genp("svc", "a", [Key.valueData: secret("hunter2")]))
        do {
            try f.engine.add(genp("svc", "a", [Key.valueData: secret("hunter2")]))
            Issue.record("expected a duplicate")
        } catch let error as EngineError {
            #expect(error.description.contains("errSecDuplicateItem (-25299)"))
            #expect(!error.description.contains("hunter2"))
        }
        #expect(Status.message(for: -1234) == "OSStatus -1234")
        #expect(Status.message(for: Status.interactionNotAllowed) == "User interaction is not allowed.")
    }
}
