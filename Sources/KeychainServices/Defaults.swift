#if !canImport(Darwin)
import Foundation
import KeychainEngine
import KeychainFile

/// The keychain the global `SecItem*` functions act on in this process.
///
/// By default the first SecItem call opens the default keychain file (`KeychainFile.openDefault()`:
/// `$KEYSTONE_KEYCHAIN`, else `~/.local/share/keystone/login.keychain-db`, created with an empty password
/// on first use). If it cannot be opened, SecItem calls return its error (`errSecInvalidKeychain`,
/// `errSecWrongSecVersion`…) rather than silently using another keychain. A program chooses another
/// keychain at startup — a memory keychain, a test's engine — with ``setEngine(_:)`` or ``makeDefaultEngine``.
///
/// - Important: Apple platforms have one keychain per device and no such switch; code that must run on both
///   should call these only in `#if !canImport(Darwin)` blocks.
public enum KeychainServicesDefaults {
    /// Held while the default engine is made, so two first calls do not open the keychain twice.
    private static let creation = Locked<Void>(())
    private static let state = Locked<(engine: KeychainEngine?, make: @Sendable () throws -> KeychainEngine)>((nil, { try fileEngine() }))

    /// How the default engine is made on first use (default: over the default keychain file).
    public static var makeDefaultEngine: @Sendable () throws -> KeychainEngine {
        get { state.current.make }
        set { state.withLock { $0.make = newValue } }
    }

    /// The engine behind the SecItem functions, made on first use.
    ///
    /// Concurrent first calls make one engine: creation is serialized, and the value is published under the lock.
    ///
    /// - Throws: `EngineError` when the default keychain cannot be opened or created (`errSecInvalidKeychain`,
    ///   `errSecWrongSecVersion`, `errSecIO`…).
    public static func currentEngine() throws -> KeychainEngine {
        if let engine = state.current.engine { return engine }
        return try creation.withLock { _ in
            if let engine = state.current.engine { return engine }
            let made = try state.current.make()
            return state.withLock { s in
                if let existing = s.engine { return existing }  // set with setEngine(_:) meanwhile
                s.engine = made
                return made
            }
        }
    }

    /// Replaces the engine; nil makes the next SecItem call make a new one with ``makeDefaultEngine``.
    public static func setEngine(_ engine: KeychainEngine?) { state.withLock { $0.engine = engine } }

    /// Uses a fresh keychain in memory from now on (tests, short-lived tools), and returns its engine.
    @discardableResult
    public static func useMemoryKeychain(configuration: EngineConfiguration = EngineConfiguration()) -> KeychainEngine {
        let engine = KeychainEngine(storage: MemoryStorage(), configuration: configuration)
        setEngine(engine)
        return engine
    }

    /// An engine over a keychain file: by default the default keychain file (`KeychainFile.defaultPath`),
    /// created with an empty password on first use.
    ///
    /// - Throws: `EngineError` when the file cannot be opened or created.
    public static func fileEngine(at path: String? = nil) throws -> KeychainEngine {
        guard let path else { return KeychainEngine(storage: try KeychainFile.openDefault().keychain) }
        if FileManager.default.fileExists(atPath: path) { return KeychainEngine(storage: try KeychainFile.open(at: path)) }
        do {
            return KeychainEngine(storage: try KeychainFile.create(at: path, password: ""))
        } catch let error as EngineError where error.status == Status.duplicateKeychain {
            return KeychainEngine(storage: try KeychainFile.open(at: path))  // another process created it first
        }
    }
}
#endif
