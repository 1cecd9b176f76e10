#if NIO
import Foundation

/// Where ``KeystoneSecretsService`` gets the keychain's password at start, from what the deployment provides.
///
/// The password is read only when the keychain is not unlocked already (a TPM-sealed file, the unlock cache of the
/// same user), and never logged. One trailing newline of a file or of standard input is dropped.
public enum KeychainPasswordSource: Sendable, Hashable {
    /// No password: a keychain file sealed to this machine's TPM (`KeychainFile.unlock()` through the TPM backend,
    /// `KeychainServicesDefaults.bootstrap(.tpm)`), or a keychain with an empty password.
    case secureEnclave
    /// systemd's credential `name`: the file `$CREDENTIALS_DIRECTORY/name` (`LoadCredential=name:/path` or
    /// `LoadCredentialEncrypted=` / `SetCredentialEncrypted=` in the unit). The recommended source under systemd.
    case systemdCredential(String)
    /// A file that holds the password (a container's secret file, `/run/secrets/keychain-password`): it should be
    /// readable by the service's user only.
    case file(String)
    /// One line of standard input (an operator or a pipe at start).
    case standardInput
    /// Nothing to read: the keychain is unlocked already (by another process of the same user through Keystone's
    /// unlock cache, or by the app). A locked keychain then fails the start with `.locked`.
    case alreadyUnlocked
    /// The environment variable `name`.
    ///
    /// - Important: Weaker than every other source: a process's environment is readable in `/proc/PID/environ` by
    ///   its user and root, is copied into child processes, shows in `docker inspect` and in crash reports. Use it
    ///   only when nothing else exists, and only by asking for it explicitly (no other source falls back to it).
    case environmentVariable(String)

    /// The password, or nil for ``secureEnclave`` and ``alreadyUnlocked`` (unlock without one).
    ///
    /// - Throws: ``KeystoneConfigurationError/Code/passwordSourceUnavailable`` naming what is missing (never a value).
    func password(keychain: String, environment: [String: String], standardInput: () -> String?) throws -> String? {
        func unavailable(_ message: String) -> KeystoneConfigurationError {
            KeystoneConfigurationError(.passwordSourceUnavailable, keychain: keychain, message: message)
        }
        switch self {
        case .secureEnclave, .alreadyUnlocked:
            return nil
        case .systemdCredential(let name):
            guard let folder = environment["CREDENTIALS_DIRECTORY"], !folder.isEmpty else {
                throw unavailable("the password of \(keychain) is systemd's credential \(name), but $CREDENTIALS_DIRECTORY is not set: add LoadCredential=\(name):/path/to/password-file (or LoadCredentialEncrypted=) to the service's unit")
            }
            return try Self.read(file: (folder as NSString).appendingPathComponent(name), keychain: keychain,
                                 what: "systemd's credential \(name)")
        case .file(let path):
            return try Self.read(file: path, keychain: keychain, what: "the password file")
        case .standardInput:
            guard let line = standardInput() else {
                throw unavailable("the password of \(keychain) was to come from standard input, which is closed or empty: pipe it in, or use a password file or a systemd credential")
            }
            return line
        case .environmentVariable(let name):
            guard let value = environment[name] else {
                throw unavailable("the password of \(keychain) was to come from the environment variable \(name), which is not set")
            }
            return value
        }
    }

    private static func read(file path: String, keychain: String, what: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw KeystoneConfigurationError(.passwordSourceUnavailable, keychain: keychain,
                                             message: "the password of \(keychain) is \(what) at \(path), which cannot be read (missing, or not readable by this user)")
        }
        var bytes = Array(data)
        if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard let password = String(validating: bytes, as: UTF8.self) else {
            throw KeystoneConfigurationError(.passwordSourceUnavailable, keychain: keychain,
                                             message: "\(what) at \(path) is not UTF-8 text")
        }
        return password
    }
}
#endif
