import Foundation
import KeychainEngine
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Where keychain files live by default, and what to tell a user whose home cannot hold them (a daemon's user whose
// HOME is /nonexistent, a read-only home in a container).
extension KeychainFile {
    /// The environment variable naming the keychain directory itself (`KEYSTONE_KEYCHAIN_DIR=/var/lib/keystone`):
    /// the login keychain and every keychain named without a `/` live there. For a service, point it at its state
    /// directory (`StateDirectory=keystone` and `Environment=KEYSTONE_KEYCHAIN_DIR=%S/keystone` in the unit).
    public static let keychainDirectoryVariable = "KEYSTONE_KEYCHAIN_DIR"

    /// The keychain directory: `$KEYSTONE_KEYCHAIN_DIR`; else `$XDG_DATA_HOME/keystone`; else
    /// `~/.local/share/keystone` (`$HOME`, else the account's home directory).
    ///
    /// Decision: `KEYSTONE_KEYCHAIN_DIR` wins over `XDG_DATA_HOME`: it names Keystone's directory on purpose (a
    /// service's state directory, a container's volume), while `XDG_DATA_HOME` is shared by every program. It is used
    /// as given, as `KEYSTONE_KEYCHAIN` is (a relative value is relative to the working directory).
    public static var keychainDirectory: String { keychainDirectory(ProcessInfo.processInfo.environment) }

    /// ``keychainDirectory`` for a given environment.
    static func keychainDirectory(_ env: [String: String]) -> String {
        if let directory = env[keychainDirectoryVariable], !directory.isEmpty { return directory }
        if let xdg = env["XDG_DATA_HOME"], !xdg.isEmpty { return xdg + "/keystone" }
        let home = env["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return home + "/.local/share/keystone"
    }

    /// The default (login) keychain: `$KEYSTONE_KEYCHAIN`, else `<keychainDirectory>/login.keychain-db`.
    public static var defaultPath: String {
        if let path = ProcessInfo.processInfo.environment["KEYSTONE_KEYCHAIN"], !path.isEmpty { return path }
        return keychainDirectory + "/login.keychain-db"
    }

    /// What to do when the keychain directory cannot be made or written: a sentence naming
    /// `KEYSTONE_KEYCHAIN_DIR` and the systemd recipe, or nil when `path` is not in the keychain directory
    /// (a keychain the user named by its path: the user chose that place).
    ///
    /// - Parameters:
    ///   - path: the keychain file (or directory) that could not be created.
    ///   - environment: the variables that chose the keychain directory (the process's by default).
    public static func unwritableDirectoryFix(for path: String,
                                              environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        let directory = keychainDirectory(environment)
        guard path == directory || path.hasPrefix(directory + "/") || directory.hasPrefix(path + "/") else { return nil }
        let source: String
        if let value = environment[keychainDirectoryVariable], !value.isEmpty {
            source = "\(keychainDirectoryVariable)=\(value) names it"
        } else if let xdg = environment["XDG_DATA_HOME"], !xdg.isEmpty {
            source = "it comes from XDG_DATA_HOME"
        } else {
            source = "it is under the home directory, \(environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory())"
        }
        return "the keychain directory \(directory) cannot be written (\(source)): set \(keychainDirectoryVariable) to a directory this user owns and can write"
            + " (for a systemd service: StateDirectory=keystone and Environment=\(keychainDirectoryVariable)=%S/keystone; in a container: a mounted volume),"
            + " or KEYSTONE_KEYCHAIN to a keychain file"
    }

    /// `error` with ``unwritableDirectoryFix(for:environment:)`` added when it is a write failure (`errSecWrPerm`,
    /// `errSecDiskFull` excluded: a full disk is not a wrong place) in the keychain directory.
    public static func addingDirectoryFix(to error: EngineError, path: String) -> EngineError {
        guard error.status == Status.wrPerm, !error.reason.contains(keychainDirectoryVariable),
              let fix = unwritableDirectoryFix(for: path) else { return error }
        return EngineError(error.status, (error.reason.isEmpty ? "" : error.reason + ": ") + fix)
    }
}

extension KeychainFile {
    /// The variables that choose where the default keychain is, checked by ``checkLocationEncoding()``.
    static let locationVariables = ["KEYSTONE_KEYCHAIN", keychainDirectoryVariable, "XDG_DATA_HOME", "HOME"]

    /// Refuses a location variable whose bytes are not UTF-8.
    ///
    /// Decision: Keystone's paths are Swift strings, and the process environment is decoded with replacement
    /// characters: `KEYSTONE_KEYCHAIN_DIR=/srv/k\xff` would silently become `/srv/k\u{FFFD}`, another directory, and two
    /// such names would be the same one. The default keychain is refused instead (`errSecParam`), naming the variable
    /// and the fix, whatever `LANG` says (`LANG=C` does not make the bytes text).
    /// - Throws: `EngineError` with `errSecParam`.
    static func checkLocationEncoding() throws {
        for name in locationVariables {
            guard let raw = getenv(name) else { continue }
            if String(validatingCString: raw) == nil {
                throw EngineError(Status.param, "\(name) is not valid UTF-8: Keystone's keychain paths are UTF-8 text. Rename the directory to a UTF-8 name (convmv, mv) or set \(name) to another path")
            }
        }
    }
}
