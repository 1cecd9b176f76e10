#if !canImport(Darwin)
import Foundation
import KeychainEngine
import KeychainFile

// Which keychain the environment selects, and the keychain files this type opens.
extension KeychainServicesDefaults {
    /// The engine the environment selects:
    /// - `KEYSTONE_KEYCHAIN` set: that keychain (an explicit keychain wins): a file path (a file that does not exist
    ///   is refused with `errSecNoSuchKeychain`, never created, unless `KEYSTONE_KEYCHAIN_CREATE=1`:
    ///   ``createKeychainVariable``), or an etcd keychain
    ///   (`etcd://host:port,host:port/NAME`, `etcds://…` for TLS, with the `.etcd` backend installed: opened, not
    ///   created; it must have been made with `keystone create-keychain` and is unlocked by the unlock cache or by
    ///   `useEtcd(_:password:configuration:)`);
    /// - else `KEYSTONE_BACKEND`: `file` or unset, the default keychain file; `memory`, a keychain in memory; any
    ///   other value, the storage of the installed backend that takes it: `secret-service` or
    ///   `secret-service:COLLECTION` with the `.secretService` backend, the Secret Service (with
    ///   `KEYSTONE_SECRET_SERVICE_COMPATIBILITY` and `KEYSTONE_SECRET_SERVICE_TIMEOUT`).
    ///
    /// - Throws: `EngineError`: `errSecParam` for a `KEYSTONE_BACKEND` no installed backend takes (the message names
    ///   the product to add when the value is a known backend's); `errSecNoSuchKeychain` when
    ///   `KEYSTONE_KEYCHAIN` names a file that does not exist (and `KEYSTONE_KEYCHAIN_CREATE` is not `1`); the storage's
    ///   own error when it cannot be opened (`errSecNotAvailable` when the Secret Service cannot be reached, with what to start).
    public static func environmentEngine(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> KeychainEngine {
        if let path = environment["KEYSTONE_KEYCHAIN"], !path.isEmpty {
            return try keychainVariableEngine(path, environment)
        }
        let backend = environment["KEYSTONE_BACKEND"] ?? ""
        switch backend {
        case "", "file": return try fileEngine()
        case "memory": return followingEngine(MemoryStorage())
        default:
            if let storage = try installedStorage(backend, environment) { return followingEngine(storage) }
            if let missing = KeychainBackend.Missing.forArgument(backend) {
                throw EngineError(Status.param, "KEYSTONE_BACKEND=\(redacted(backend)): " + missing.message)
            }
            let names = ["file", "memory"] + installedBackends.filter { $0.storage != nil }.map(\.name)
            throw EngineError(Status.param, "KEYSTONE_BACKEND=\(redacted(backend)) names no storage this program has: use \(names.joined(separator: ", "))")
        }
    }


    /// The environment variable that lets `KEYSTONE_KEYCHAIN` name a keychain file that does not exist yet: set to
    /// `1`, the file is created (with an empty password) on first use; otherwise a missing file is refused.
    public static let createKeychainVariable = "KEYSTONE_KEYCHAIN_CREATE"

    /// The engine of the keychain `KEYSTONE_KEYCHAIN` (`argument`) names: an etcd keychain, or a keychain file that
    /// must exist unless `environment[createKeychainVariable]` is `1`.
    ///
    /// Decision: a keychain named by the environment is never created silently. A typo in `KEYSTONE_KEYCHAIN` used
    /// to create a new keychain with an empty password, and the program then kept its secrets there, protected only
    /// by the file's permissions, while the keychain meant stayed unused; the `keystone` tool refuses it the same way.
    /// `KEYSTONE_KEYCHAIN_CREATE=1` (or ``fileEngine(at:createIfMissing:)`` in code) asks for the creation explicitly.
    private static func keychainVariableEngine(_ argument: String, _ environment: [String: String]) throws -> KeychainEngine {
        if let engine = try etcdEngine(argument, environment) { return engine }
        let create = environment[createKeychainVariable] == "1"
        guard create || FileManager.default.fileExists(atPath: argument) else {
            throw EngineError(Status.noSuchKeychain, "KEYSTONE_KEYCHAIN names \(redacted(argument)), which does not exist: create it with `keystone create-keychain \(redacted(argument))` (with a password), correct KEYSTONE_KEYCHAIN, or set \(createKeychainVariable)=1 to have it created with an empty password")
        }
        return try fileEngine(at: argument, createIfMissing: create)
    }

    /// `text` with the password of any `scheme://user:PASSWORD@` masked, for error messages.
    package static func redacted(_ text: String) -> String {
        guard let scheme = text.range(of: "://") else { return text }
        let rest = text[scheme.upperBound...]
        let end = rest.firstIndex { $0 == "?" || $0 == "#" } ?? rest.endIndex
        guard let at = rest[..<end].lastIndex(of: "@"), let colon = rest[..<at].firstIndex(of: ":") else { return text }
        return String(text[..<rest.index(after: colon)]) + "***" + String(rest[at...])
    }

    /// The engine of the etcd keychain `argument` names, nil when it is not an `etcd://` or `etcds://` URL.
    private static func etcdEngine(_ argument: String, _ environment: [String: String]) throws -> KeychainEngine? {
        guard argument.hasPrefix("etcd://") || argument.hasPrefix("etcds://") else { return nil }
        if let storage = try installedStorage(argument, environment) { return followingEngine(storage) }
        throw EngineError(Status.param, "\(argument.prefix { $0 != "/" })… names an etcd keychain: " + KeychainBackend.Missing.etcd.message)
    }


    /// An engine over a keychain file: by default the login keychain file (`login.keychain-db` in the keychain
    /// directory), created with an empty password on first use. A file sealed to the TPM
    /// (`keystone create-keychain --tpm`) is opened with ``secureEnclave``.
    ///
    /// With no `path` and `KEYSTONE_KEYCHAIN` set in the process's environment, that keychain is used as
    /// ``environmentEngine(_:)`` uses it: a missing file is refused unless `KEYSTONE_KEYCHAIN_CREATE=1`.
    ///
    /// - Parameters:
    ///   - path: the keychain file; nil: the default one.
    ///   - createIfMissing: whether a `path` that does not exist is created, with an empty password (the default:
    ///     the program named the file in its code).
    /// - Throws: `EngineError` when the file cannot be opened or created: `errSecNoSuchKeychain` for a missing file
    ///   not to be created; for a sealed file `errSecNotAvailable` when the TPM cannot be reached, `errSecDecode`
    ///   when it was sealed to another TPM.
    /// - Important: A keychain created here has an empty password: it is protected only by its file's permissions.
    public static func fileEngine(at path: String? = nil, createIfMissing: Bool = true) throws -> KeychainEngine {
        let token = secureEnclave
        guard let path else {
            let environment = ProcessInfo.processInfo.environment
            if let variable = environment["KEYSTONE_KEYCHAIN"], !variable.isEmpty {
                return try keychainVariableEngine(variable, environment)
            }
            return followingEngine(try KeychainFile.openDefault(secureEnclave: token).keychain)
        }
        if FileManager.default.fileExists(atPath: path) {
            return followingEngine(try KeychainFile.open(at: path, secureEnclave: token))
        }
        guard createIfMissing else {
            throw EngineError(Status.noSuchKeychain, "the keychain file \(path) does not exist")
        }
        do {
            return followingEngine(try KeychainFile.create(at: path, password: ""))
        } catch let error as EngineError where error.status == Status.duplicateKeychain {
            // another process created it first
            return followingEngine(try KeychainFile.open(at: path, secureEnclave: token))
        }
    }
}
#endif
