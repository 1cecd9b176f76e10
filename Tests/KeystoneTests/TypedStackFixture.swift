#if !canImport(Darwin)
import Foundation
import KeychainEngine
import KeychainFile
import KeychainServices
import Keystone
import KeystoneTesting
import Testing

/// The stacks the typed API's core behaviours run on, with the same expectations.
enum TypedStack: String, CaseIterable, CustomTestStringConvertible, Sendable {
    /// `InMemoryKeychain` (the test double; the engine over `MemoryStorage`, compiled save path).
    case inMemoryKeychain
    /// The bare engine over `MemoryStorage` (compiled save path).
    case engine
    /// The production stack: `Keychain()` → `SystemKeychain` → `SecItem*` → the process's default keychain, here a
    /// fresh keychain file in a temporary folder (never the user's), installed with `setEngine`.
    case keychainFileThroughSecItem

    var testDescription: String { rawValue }
}

/// One stack, fresh: the keychain the typed API uses and the engine underneath (for its clock).
struct TypedStackFixture {
    let keychain: Keychain
    let engine: KeychainEngine
    /// Answers the engine's prompts (success, counted).
    let authenticator: ScriptedAuthenticator
    let clock = TestClock()
    private let directory: URL?

    /// Installs `stack`. For ``TypedStack/keychainFileThroughSecItem`` it replaces the process's default keychain:
    /// only suites with `.ownsDefaultKeychain` may make one.
    init(_ stack: TypedStack) throws {
        switch stack {
        case .inMemoryKeychain:
            let memory = InMemoryKeychain()
            keychain = Keychain(store: memory)
            engine = memory.engine
            authenticator = memory.authenticator
            directory = nil
        case .engine:
            authenticator = ScriptedAuthenticator(defaultOutcome: .success)
            engine = KeychainEngine(storage: MemoryStorage(), authenticator: authenticator)
            keychain = Keychain(store: engine)
            directory = nil
        case .keychainFileThroughSecItem:
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-typed-\(UUID().uuidString)")
            engine = try KeychainServicesDefaults.fileEngine(at: folder.appendingPathComponent("login.keychain-db").path)
            authenticator = ScriptedAuthenticator(defaultOutcome: .success)
            engine.authenticator = authenticator
            KeychainServicesDefaults.setEngine(engine)
            keychain = Keychain()
            directory = folder
        }
        let clock = self.clock
        engine.configuration.now = { clock.now }
    }

    /// Locks the storage as `state` says: `MemoryStorage`'s lock state, or the keychain file's `lock()` /
    /// `lockAfterFirstUnlock()`.
    func lock(_ state: LockState) {
        if let file = engine.storage as? KeychainFile {
            if state == .lockedAfterFirstUnlock { file.lockAfterFirstUnlock() } else { file.lock() }
        } else if let memory = engine.storage as? MemoryStorage {
            memory.lockState = state
        }
    }

    /// A keychain on the same store with other default options.
    func keychain(options: ItemOptions) -> Keychain { Keychain(store: keychain.store, options: options) }

    /// Puts a memory keychain back as the default (when this fixture replaced it) and removes the file.
    func remove() {
        guard let directory else { return }
        KeychainServicesDefaults.useMemoryKeychain()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs `body` over a fresh `stack`, then removes it.
    static func with(_ stack: TypedStack, _ body: (TypedStackFixture) throws -> Void) throws {
        let fixture = try TypedStackFixture(stack)
        defer { fixture.remove() }
        try body(fixture)
    }
}
#endif
