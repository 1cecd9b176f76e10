import Foundation
import Keystone
import KeychainEngine

/// A keychain in memory with every real rule, and the controls tests need: lock state, device
/// profile, scripted authentication, injected failures, a call log, biometry changes, access groups.
///
/// It is a `KeychainStore` over a `KeychainEngine` on a `MemoryStorage`: duplicates, not-found,
/// update-matches-all, locked items, access control and `-34018` behave as on a device. Hand it to
/// `Keychain` (or to your own code through its store) in tests:
///
/// ```swift
/// let memory = InMemoryKeychain()
/// let keychain = Keychain(store: memory)
/// memory.lockState = .locked
/// #expect(throws: KeychainError.interactionNotAllowed) { try keychain.data(for: item) }
/// ```
///
/// Raw SecItem-style code can use ``engine`` directly. Operations throw `KeychainError`.
///
/// Thread safety: every control is behind a lock, and each change of the configuration (``profile``,
/// ``entitledAccessGroups``, ``passcodeSet``) is one atomic change of the engine's configuration: changes made at once
/// from several tasks are all kept. The type is `Sendable`.
public final class InMemoryKeychain: EngineBackedStore, Sendable {
    /// What kind of device the keychain plays.
    public enum DeviceProfile: String, Sendable, Hashable, CaseIterable {
        /// A device: access control is enforced (prompts happen) and the Secure Enclave is available: the
        /// keychain's ``InMemoryKeychain/secureEnclave`` is its ``InMemoryKeychain/emulatedSecureEnclave``.
        case device
        /// A simulator: access-controlled items come back without any authentication, and the Secure
        /// Enclave is not available (`errSecUnimplemented` for Secure Enclave keys, no
        /// ``InMemoryKeychain/secureEnclave``: `SecureEnclave.isAvailable` is false on every simulator).
        case simulator
    }

    /// The engine with Apple's rules, for tests of raw SecItem-style code.
    public let engine: KeychainEngine
    /// The rows.
    public let storage: MemoryStorage
    /// The scripted authenticator answering prompts.
    public let authenticator: ScriptedAuthenticator
    /// The device's Secure Enclave, an emulation of its own: what ``secureEnclave`` is with the
    /// ``DeviceProfile/device`` profile. Make it unavailable (``EmulatedSecureEnclave/makeUnavailable(status:reason:)``)
    /// to test fallbacks; its counters show the signatures made.
    public let emulatedSecureEnclave: EmulatedSecureEnclave
    private let log = CallLog()
    private let failures = FailureInjector()

    /// Creates an empty, unlocked keychain.
    ///
    /// The device plays an iPhone with Face ID, enrolled, with a passcode: change that through ``authenticator``
    /// (``ScriptedAuthenticator/biometryKind``, ``ScriptedAuthenticator/enrolled``, ``ScriptedAuthenticator/lockedOut``).
    ///
    /// - Parameters:
    ///   - profile: device (enforces access control) or simulator (does not). Default: device.
    ///   - lockState: the initial lock state. Default: unlocked.
    ///   - entitledAccessGroups: the app's `keychain-access-groups`; nil for unrestricted (items go to
    ///     the group `"default"`). Naming another group fails with `errSecMissingEntitlement` (-34018).
    ///   - authentication: how prompts end when nothing is queued. Default: success.
    public init(profile: DeviceProfile = .device, lockState: LockState = .unlocked,
                entitledAccessGroups: [String]? = nil, authentication: AuthenticationOutcome = .success) {
        storage = MemoryStorage(lockState: lockState)
        authenticator = ScriptedAuthenticator(defaultOutcome: authentication)
        var configuration = EngineConfiguration()
        if let entitledAccessGroups { configuration.accessGroups = .entitled(entitledAccessGroups) }
        engine = KeychainEngine(storage: storage, configuration: configuration, authenticator: authenticator)
        engine.addHook(failures)
        engine.addHook(log)
        emulatedSecureEnclave = EmulatedSecureEnclave(name: "emulated Secure Enclave (InMemoryKeychain)")
        self.profile = profile
    }

    /// The Secure Enclave of this keychain's device (`KeychainStore.secureEnclave`): ``emulatedSecureEnclave`` with
    /// the ``DeviceProfile/device`` profile, nil with ``DeviceProfile/simulator``. Hardware signing keys
    /// (`SigningKeyFactory`) made through this keychain live in it, and only it can use them.
    public var secureEnclave: (any SecureEnclaveToken)? {
        profile == .device ? emulatedSecureEnclave : nil
    }

    // MARK: - KeychainStore

    /// `SecItemAdd` with the engine's rules.
    ///
    /// - Throws: `KeychainError` (see `KeychainStore.add(_:)`), or an injected failure.
    public func add(_ attributes: KeychainQuery) throws -> ItemResult? {
        try convert { try engine.add(attributes) }
    }

    /// `SecItemCopyMatching` with the engine's rules.
    ///
    /// - Throws: `KeychainError` (see `KeychainStore.copyMatching(_:)`), or an injected failure.
    public func copyMatching(_ query: KeychainQuery) throws -> ItemResult? {
        try convert { try engine.copyMatching(query) }
    }

    /// `SecItemUpdate` with the engine's rules.
    ///
    /// - Throws: `KeychainError` (see `KeychainStore.update(_:with:)`), or an injected failure.
    public func update(_ query: KeychainQuery, with attributesToUpdate: KeychainQuery) throws {
        try convert { try engine.update(query, with: attributesToUpdate) }
    }

    /// `SecItemDelete` with the engine's rules.
    ///
    /// - Throws: `KeychainError` (see `KeychainStore.delete(_:)`), or an injected failure.
    public func delete(_ query: KeychainQuery) throws {
        try convert { try engine.delete(query) }
    }

    /// Add-or-update with the engine's rules: the call log and injected failures see an add, then (when the
    /// item exists) an update, as with separate calls.
    ///
    /// - Throws: `KeychainError` (see `KeychainStore.addOrUpdate(_:matching:with:)`), or an injected failure.
    public func addOrUpdate(_ attributes: KeychainQuery, matching query: KeychainQuery, with changes: KeychainQuery) throws {
        try convert { let _: KeychainEngine.SaveOutcome = try engine.addOrUpdate(attributes, matching: query, with: changes) }
    }

    private func convert<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch { throw KeychainError(converting: error) }
    }

    // MARK: - Controls

    /// The lock state: `.locked` (before the first unlock, or locked explicitly) makes every item fail with
    /// `errSecInteractionNotAllowed`, `always` ones included; `.lockedAfterFirstUnlock` keeps `afterFirstUnlock`
    /// and `always` items available. The same rule as every Keystone storage (`Accessibility.isAvailable(in:)`).
    public var lockState: LockState {
        get { storage.lockState }
        set { storage.lockState = newValue }
    }

    /// The device profile: ``DeviceProfile/simulator`` stops enforcing access control and has no Secure Enclave.
    public var profile: DeviceProfile {
        get { engine.configuration.enforcesAccessControl ? .device : .simulator }
        set {
            engine.updateConfiguration { configuration in
                configuration.enforcesAccessControl = newValue == .device
                configuration.secureEnclaveAvailable = newValue == .device
            }
        }
    }

    /// The entitled access groups, or nil when unrestricted. An empty list makes every operation fail
    /// with `errSecMissingEntitlement` (-34018), like an app without the keychain entitlement.
    public var entitledAccessGroups: [String]? {
        get {
            if case .entitled(let groups) = engine.configuration.accessGroups { return groups }
            return nil
        }
        set {
            engine.updateConfiguration { configuration in
                configuration.accessGroups = newValue.map { .entitled($0) } ?? .unrestricted(defaultGroup: "default")
            }
        }
    }

    /// Whether the device has a passcode (`whenPasscodeSetThisDeviceOnly` items need one; without one the
    /// authenticator reports `AuthenticationOutcome.passcodeNotSet` instead of prompting).
    public var passcodeSet: Bool {
        get { engine.configuration.passcodeSet }
        set {
            // The authenticator's copy is written under the configuration's lock too, so concurrent changes leave
            // both with the same (last) value.
            engine.updateConfiguration { configuration in
                configuration.passcodeSet = newValue
                authenticator.passcodeSet = newValue
            }
        }
    }

    /// Simulates a change of enrolled biometry (a finger or face added or removed): the authenticator's
    /// ``ScriptedAuthenticator/biometryDomainState`` changes (so does that of a ``ScriptedBiometricContext`` made
    /// from this keychain), and `.biometryCurrentSet` items added before become unreadable (`errSecAuthFailed`)
    /// while `.biometryAny` items still read.
    public func changeBiometryEnrollment() {
        authenticator.changeEnrollment()
        // For a device without biometry (no domain state), the engine's own counter decides.
        engine.changeBiometryEnrollment()
    }

    // MARK: Authentication

    /// Queues outcomes for the next prompts, in order (then ``defaultAuthenticationOutcome`` applies).
    public func enqueueAuthentication(_ outcomes: AuthenticationOutcome...) { authenticator.enqueue(outcomes) }

    /// How a prompt ends when no outcome is queued.
    public var defaultAuthenticationOutcome: AuthenticationOutcome {
        get { authenticator.defaultOutcome }
        set { authenticator.defaultOutcome = newValue }
    }

    /// How many authentication prompts were shown.
    public var promptCount: Int { authenticator.promptCount }

    /// The prompts shown, with their operation prompt text (`kSecUseOperationPrompt`).
    public var prompts: [AuthenticationRequest] { authenticator.requests }

    // MARK: Failures

    /// Makes operations fail with `status` (any `OSStatus`) before they touch the keychain.
    ///
    /// - Parameters:
    ///   - status: the `OSStatus`, for example `errSecMissingEntitlement` (-34018).
    ///   - operation: the operation to fail, or nil for every operation.
    ///   - schedule: once (the next matching call), on the Nth matching call, or always.
    /// - Returns: the injected failure's id, for ``removeFailure(_:)``.
    @discardableResult
    public func injectFailure(_ status: Int32, on operation: KeychainOperation? = nil,
                              _ schedule: FailureSchedule = .once) -> Int {
        failures.add(status: status, operation: operation, schedule: schedule)
    }

    /// Removes one injected failure.
    public func removeFailure(_ id: Int) { failures.remove(id) }

    /// Removes every injected failure.
    public func removeAllFailures() { failures.removeAll() }

    // MARK: Call log

    /// Every operation performed, in order, with its query (secret removed) and status.
    public var calls: [KeychainCall] { log.calls }

    /// The calls of one operation.
    public func calls(_ operation: KeychainOperation) -> [KeychainCall] { log.calls.filter { $0.operation == operation } }

    /// Forgets the logged calls.
    public func clearCalls() { log.clear() }

    // MARK: Inspection

    /// How many items the keychain holds (every class, every access group).
    public var itemCount: Int { storage.count }
}
