import Foundation
import KeychainEngine
import KeychainFile
#if !canImport(Darwin)
import KeychainSecretService
#endif
#if NIO && !canImport(Darwin)
import KeychainEtcd
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failure the tool reports as `keystone: <function>: <message>` and exits with the status's low byte.
///
/// The first line is `security`'s: the function and Apple's message. When Keystone knows more (which file, its
/// owner and mode, what to run), a second line says it; it never holds a secret: a keychain argument in either line
/// is shown with any credential masked (``Redaction``).
struct ToolFailure: Error {
    let function: String
    let status: Int32
    var reason: String = ""
    var exitCode: Int32 { Int32(UInt8(truncatingIfNeeded: status)) }
    var message: String {
        let first = "keystone: \(function): \(Status.message(for: status))"
        return Redaction.redacted(reason.isEmpty ? first : first + "\nkeystone: " + reason)
    }
}

/// A failure `security` reports in its own words with its own exit status (not an OSStatus's low byte).
struct MessageFailure: Error {
    let message: String
    let exitCode: Int32

    /// The message with any credential of a URL in it masked (``Redaction``).
    init(message: String, exitCode: Int32) {
        self.message = Redaction.redacted(message)
        self.exitCode = exitCode
    }
}

/// A usage problem found after parsing (exit status 2, as other usage errors).
struct UsageFailure: Error {
    let message: String

    /// The message with any credential of a URL in it masked (``Redaction``).
    init(message: String) { self.message = Redaction.redacted(message) }
}

/// A reason with, for a locked Secret Service collection or etcd keychain, how to unlock it.
func withUnlockHint(_ reason: String, status: Int32, keychain: String) -> String {
    guard status == Status.interactionNotAllowed, !reason.contains("unlock-keychain") else { return reason }
    if KeychainSpec.isEtcd(keychain) {
        return (reason.isEmpty ? "" : reason + ". ") + "Unlock it on this machine with `keystone unlock-keychain \(keychain)` (the keychain password, on standard input or at the prompt)."
    }
    guard KeychainSpec.isSecretService(keychain) else { return reason }
    return (reason.isEmpty ? "" : reason + ". ") + "Unlock it with `keystone unlock-keychain \(keychain)` (the Secret Service shows its own prompt), in Seahorse, or by logging in to the desktop."
}

/// Runs a keychain call, turning an `EngineError` into a ``ToolFailure`` naming `function` (as `security` does).
///
/// A write failure in the keychain directory gets the fix (``withDirectoryFix(_:)``).
func call<T>(_ function: String, _ body: () throws -> T) throws -> T {
    do { return try body() } catch let error as EngineError {
        let error = withDirectoryFix(error)
        throw ToolFailure(function: function, status: error.status, reason: error.reason)
    }
}

/// `error` with what to do added when it is `errSecWrPerm` for the keychain directory or one of its parents (a
/// daemon's user whose home is `/nonexistent`, a read-only home): `KEYSTONE_KEYCHAIN_DIR` and the systemd
/// `StateDirectory=` recipe (``KeychainFile/unwritableDirectoryFix(for:environment:)``).
func withDirectoryFix(_ error: EngineError) -> EngineError {
    guard error.status == Status.wrPerm else { return error }
    var candidate = KeychainFile.keychainDirectory
    if error.reason.contains(candidate + "/") { return KeychainFile.addingDirectoryFix(to: error, path: candidate) }
    while candidate.count > 1 {
        if error.reason.contains(candidate + ":") { return KeychainFile.addingDirectoryFix(to: error, path: candidate) }
        candidate = (candidate as NSString).deletingLastPathComponent
    }
    return error
}

func writeErr(_ text: String) { FileHandle.standardError.write(Data(text.utf8)) }
func writeOut(_ text: String) { FileHandle.standardOutput.write(Data(text.utf8)) }

// MARK: - Keychain locations

/// Where the tool keeps its search list and default keychain: `$XDG_CONFIG_HOME/keystone`, else `~/.config/keystone`.
enum ToolConfig {
    static var directory: String {
        let env = ProcessInfo.processInfo.environment
        if let xdg = env["XDG_CONFIG_HOME"], !xdg.isEmpty { return xdg + "/keystone" }
        return (env["HOME"] ?? NSHomeDirectory()) + "/.config/keystone"
    }

    /// A settings file's lines; none (with a warning on standard error, once) when it cannot be trusted: see
    /// ``SettingsFiles``.
    static func read(_ name: String) -> [String] {
        let (lines, warning) = SettingsFiles.load(name, in: directory)
        if let warning { SettingsFiles.warn(warning) }
        return lines
    }

    /// Writes a settings file: mode 0600 whatever the umask, atomically, in a directory only this user can write.
    ///
    /// - Throws: ``ToolFailure`` with errSecWrPerm for `function`, saying why and what to run.
    static func write(_ name: String, _ lines: [String], function: String) throws {
        do {
            try SettingsFiles.store(name, lines, in: directory)
        } catch {
            throw ToolFailure(function: function, status: Status.wrPerm, reason: error.reason)
        }
    }

    /// Updates the search list after a keychain was created or deleted; a failure is a warning (the keychain
    /// itself was created or deleted).
    static func updateSearchList(_ lines: [String]) {
        do {
            try SettingsFiles.store("search-list", lines, in: directory)
        } catch {
            // A daemon's user has no home to keep settings in: the keychain still works by name (KEYSTONE_KEYCHAIN_DIR).
            SettingsFiles.warn("the search list was not updated: \(error.reason) (the keychain works all the same when named; set XDG_CONFIG_HOME to a directory this user can write to keep settings)")
        }
    }

    /// The storage `KEYSTONE_BACKEND` asks for: `file` (or unset) for keychain files, `secret-service` or
    /// `secret-service:COLLECTION` for the Secret Service, an `etcd://` or `etcds://` URL for an etcd keychain; nil
    /// when it is unset or empty.
    enum Backend: Equatable {
        case file
        /// A canonical `secret-service:[COLLECTION]` keychain argument.
        case secretService(String)
        /// An `etcd://…/NAME` or `etcds://…/NAME` keychain argument.
        case etcd(String)
    }

    /// `KEYSTONE_BACKEND`, parsed.
    ///
    /// - Throws: ``UsageFailure`` for any other value, naming the accepted ones.
    static func backend(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Backend? {
        guard let value = environment["KEYSTONE_BACKEND"], !value.isEmpty else { return nil }
        if value == "file" { return .file }
        if KeychainSpec.isSecretService(value) { return .secretService(KeychainSpec.canonical(value)) }
        if KeychainSpec.isEtcd(value) { return .etcd(value) }
        throw UsageFailure(message: "keystone: KEYSTONE_BACKEND=\(value) is not a storage: use file (keychain files), secret-service[:COLLECTION] (the freedesktop Secret Service) or etcd://host:port,…/NAME (an etcd keychain), or unset it")
    }

    /// Why a keychain is the one used: how `doctor` explains its choice.
    enum Reason: String {
        case argument
        case keychainVariable = "KEYSTONE_KEYCHAIN"
        case backendVariable = "KEYSTONE_BACKEND"
        case setting = "default-keychain"
        case fallback = "default"

        var sentence: String {
            switch self {
            case .argument: "named on the command line"
            case .keychainVariable: "set by KEYSTONE_KEYCHAIN"
            case .backendVariable: "selected by KEYSTONE_BACKEND"
            case .setting: "set with `keystone default-keychain -s`"
            case .fallback: "the default (no KEYSTONE_KEYCHAIN, KEYSTONE_BACKEND or default-keychain setting)"
            }
        }
    }

    /// The default keychain and why: `$KEYSTONE_KEYCHAIN`; else `KEYSTONE_BACKEND=secret-service[:COLLECTION]`;
    /// else (`KEYSTONE_BACKEND` `file` or unset) the one set with `default-keychain -s` (a Secret Service one only
    /// when `KEYSTONE_BACKEND` is unset), else the login keychain file. An invalid `KEYSTONE_BACKEND` counts as
    /// unset here: `main` refuses it before any verb runs.
    static var defaultSelection: (spec: String, reason: Reason) {
        let environment = ProcessInfo.processInfo.environment
        if let env = environment["KEYSTONE_KEYCHAIN"], !env.isEmpty {
            return (KeychainSpec.isSecretService(env) ? KeychainSpec.canonical(env) : env, .keychainVariable)
        }
        let backend = (try? Self.backend(environment)) ?? nil
        if case .secretService(let spec) = backend { return (spec, .backendVariable) }
        if case .etcd(let spec) = backend { return (spec, .backendVariable) }
        if let setting = read("default-keychain").first, !(backend == .file && KeychainSpec.isRemote(setting)) {
            return (setting, .setting)
        }
        return (KeychainFile.defaultPath, backend == .file ? .backendVariable : .fallback)
    }

    /// The default keychain: see ``defaultSelection``.
    static var defaultKeychain: String { defaultSelection.spec }

    /// The keychain file used when the default keychain is a file: the `default-keychain -s` setting when it is a
    /// file, else the login keychain.
    static var defaultFile: String {
        if let env = ProcessInfo.processInfo.environment["KEYSTONE_KEYCHAIN"], !env.isEmpty, !KeychainSpec.isRemote(env) { return env }
        if let setting = read("default-keychain").first, !KeychainSpec.isRemote(setting) { return setting }
        return KeychainFile.defaultPath
    }

    /// The search list: set with `list-keychains -s`, else the default keychain alone.
    static var searchList: [String] {
        let list = read("search-list")
        return list.isEmpty ? [defaultKeychain] : list
    }
}

/// Keychain arguments naming the Secret Service: `secret-service:` (its default collection), `secret-service:COLLECTION`
/// (an alias, a label or an object path), or `secret-service` alone. They are kept as they are, never made paths.
enum KeychainSpec {
    static let prefix = "secret-service:"

    static func isSecretService(_ argument: String) -> Bool {
        argument == "secret-service" || argument.hasPrefix(prefix)
    }

    /// `secret-service:` or `secret-service:COLLECTION`.
    static func canonical(_ argument: String) -> String {
        argument == "secret-service" ? prefix : argument
    }

    /// An etcd keychain: `etcd://host:port,…/NAME[?…]` or `etcds://…` (kept as given, never made a path).
    static func isEtcd(_ argument: String) -> Bool {
        let lowered = argument.prefix(8).lowercased()
        return lowered.hasPrefix("etcd://") || lowered.hasPrefix("etcds://")
    }

    /// A keychain that is not a file: the Secret Service or an etcd keychain.
    static func isRemote(_ argument: String) -> Bool { isSecretService(argument) || isEtcd(argument) }

    /// What a keychain argument names, for messages: "the freedesktop Secret Service" or "an etcd keychain".
    static func kind(_ argument: String) -> String { isEtcd(argument) ? "an etcd keychain" : "the freedesktop Secret Service" }

    /// The keychain file a verb that works on files only is given (`argument` resolved, else the default keychain).
    ///
    /// - Throws: ``UsageFailure`` when that is the Secret Service, saying why the verb does not apply (`what`).
    static func file(_ argument: String?, verb: String, what: String) throws -> String {
        if let argument {
            let spec = resolveKeychain(argument)
            guard isRemote(spec) else { return spec }
            throw UsageFailure(message: "keystone: \(verb): \(spec) is \(kind(spec)), not a keychain file: \(what). Name a keychain file.")
        }
        let (spec, reason) = ToolConfig.defaultSelection
        guard isRemote(spec) else { return spec }
        throw UsageFailure(message: "keystone: \(verb): the default keychain is \(kind(spec)) (\(spec), \(reason.sentence)), not a keychain file: \(what). Name a keychain file.")
    }
}

/// A keychain argument as a path: a name without `/` lives in the keychain directory (`.keychain-db` added
/// when it has no keychain extension); anything with a `/` is a path. A Secret Service argument
/// (`secret-service:[COLLECTION]`) stays as it is.
func resolveKeychain(_ argument: String) -> String {
    if KeychainSpec.isSecretService(argument) { return KeychainSpec.canonical(argument) }
    if KeychainSpec.isEtcd(argument) { return argument }
    if argument.contains("/") { return URL(fileURLWithPath: argument).standardizedFileURL.path }
    let name = argument.hasSuffix(".keychain-db") || argument.hasSuffix(".keychain") ? argument : argument + ".keychain-db"
    return KeychainFile.keychainDirectory + "/" + name
}

/// Opens a keychain file; the login keychain is created on first use (with a one-time note about its empty
/// password).
///
/// Decision: a keychain `KEYSTONE_KEYCHAIN` names is never created here (a typo would otherwise make a new keychain
/// with an empty password and keep secrets there): errSecNoSuchKeychain says to run `create-keychain`, unless
/// `KEYSTONE_KEYCHAIN_CREATE=1` asks for it, as the library does (`KeychainServicesDefaults.environmentEngine`).
func openKeychain(_ path: String, function: String = "SecKeychainOpen") throws -> KeychainFile {
    let environment = ProcessInfo.processInfo.environment
    if let variable = environment["KEYSTONE_KEYCHAIN"], !variable.isEmpty, path == variable,
       environment["KEYSTONE_KEYCHAIN_CREATE"] != "1", !FileManager.default.fileExists(atPath: path) {
        throw ToolFailure(function: function, status: Status.noSuchKeychain,
                          reason: "KEYSTONE_KEYCHAIN names \(path), which does not exist: create it with `keystone create-keychain \(path)`, correct KEYSTONE_KEYCHAIN, or set KEYSTONE_KEYCHAIN_CREATE=1 to have it created with an empty password")
    }
    if path == ToolConfig.defaultKeychain && path == KeychainFile.defaultPath {
        let (file, created) = try call(function) { try KeychainFile.openDefault(secureEnclave: toolSecureEnclave) }
        if created {
            writeErr("keystone: created the default keychain \"\(path)\" with an empty password: it is protected only by its file permissions. Set a password with `keystone set-keychain-password`.\n")
        }
        return file
    }
    return try call(function) { try KeychainFile.open(at: path, secureEnclave: toolSecureEnclave) }
}

#if !canImport(Darwin)
/// Connects to the Secret Service collection a `secret-service:[COLLECTION]` argument names.
func openSecretService(_ spec: String, function: String = "SecKeychainOpen") throws -> SecretServiceStorage {
    guard let options = SecretServiceStorage.Options(argument: spec) else {
        throw UsageFailure(message: "keystone: \(spec) does not name a Secret Service collection")
    }
    return try call(function) { try SecretServiceStorage(options: options) }
}
#endif

#if NIO && !canImport(Darwin)
/// The cluster and keychain an `etcd://` / `etcds://` argument names (the etcd password from
/// `KEYSTONE_ETCD_PASSWORD`, never from an argument).
///
/// - Throws: ``ToolFailure`` (`errSecParam`) naming what is wrong with the URL.
func etcdConfiguration(_ spec: String, function: String) throws -> EtcdConfiguration {
    try call(function) { try EtcdConfiguration(url: spec) }
}

/// Opens the etcd keychain an `etcd://` / `etcds://` argument names: never created here; locked unless this user
/// unlocked it on this machine (the unlock cache).
///
/// - Throws: ``ToolFailure``: `errSecNoSuchKeychain`, `errSecNotAvailable` (the cluster does not answer), …
func openEtcd(_ spec: String, function: String = "SecKeychainOpen") throws -> EtcdKeychain {
    let configuration = try etcdConfiguration(spec, function: function)
    return try call(function) { try EtcdKeychain.open(configuration) }
}
#endif

/// The failure of a verb given an etcd keychain by a keystone built without the NIO trait (no etcd keychains).
func etcdUnsupported(_ spec: String, function: String) -> ToolFailure {
    ToolFailure(function: function, status: Status.notAvailable,
                reason: "this keystone was built without etcd support (the package's NIO trait); \(spec) cannot be opened")
}

/// Opens the storage a keychain argument names (resolved with ``resolveKeychain(_:)``): a keychain file, the
/// Secret Service for `secret-service:[COLLECTION]`, or an etcd keychain for `etcd://…` / `etcds://…`.
func openStorage(_ spec: String, function: String = "SecKeychainOpen") throws -> any KeychainStorage {
    if KeychainSpec.isEtcd(spec) {
        #if NIO && !canImport(Darwin)
        return try openEtcd(spec, function: function)
        #else
        throw etcdUnsupported(spec, function: function)
        #endif
    }
    guard KeychainSpec.isSecretService(spec) else { return try openKeychain(spec, function: function) }
    #if !canImport(Darwin)
    return try openSecretService(spec, function: function)
    #else
    throw ToolFailure(function: function, status: Status.notAvailable,
                      reason: "this keystone was built without the Secret Service (the KeychainSecretService backend); \(spec) cannot be opened")
    #endif
}

// MARK: - Secrets from the terminal, a headless source or standard input

/// Where a keychain password comes from when there is nobody to type it (a service, a container, CI).
///
/// Decision: the password itself never comes from an environment variable (any process of the user can read
/// `/proc/PID/environ` of its own processes, and environments end up in logs and `docker inspect`); only the *path*
/// of a file does. The sources, in order:
/// 1. the systemd credential ``credentialName`` in `$CREDENTIALS_DIRECTORY` (`LoadCredential=` /
///    `LoadCredentialEncrypted=` / `SetCredentialEncrypted=` in the unit: systemd decrypts it, possibly with the TPM,
///    into a directory only the service can read);
/// 2. the file `$KEYSTONE_PASSWORD_FILE` names (a container secret, `/run/secrets/…`);
/// 3. one line of standard input when it is not a terminal;
/// 4. else the command fails at once, naming these options: it never waits for input that cannot come.
///
/// A file gives its first line (what `echo pw > file` writes is `pw`), as standard input does.
enum HeadlessPassword {
    /// The credential `unlock-keychain` and `create-keychain` read: `LoadCredential=keystone.keychain-password:…`.
    static let credentialName = "keystone.keychain-password"
    /// The variable naming a password file (a path, never the password).
    static let fileVariable = "KEYSTONE_PASSWORD_FILE"
    /// The largest password file read.
    static let maximumSize = 64 * 1024

    /// The password from the systemd credential or `KEYSTONE_PASSWORD_FILE`; nil when neither is set.
    ///
    /// - Throws: ``MessageFailure`` (exit 1) when one is set but cannot be read, naming the file and why.
    static func fromFiles(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String? {
        if let directory = environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty {
            let path = directory + "/" + credentialName
            if FileManager.default.fileExists(atPath: path) {
                return try readPasswordFile(path, source: "the systemd credential \(credentialName)")
            }
        }
        if let path = environment[fileVariable], !path.isEmpty {
            return try readPasswordFile(path, source: fileVariable)
        }
        return nil
    }
}

/// The first line of the password file at `path` (without its newline).
///
/// The file is opened without following a FIFO's writer (`O_NONBLOCK`) and must be a regular file (a FIFO or a
/// terminal could make the command wait for ever) of at most 64 KiB. An empty file is refused: a secret that was
/// never written must not become an empty password.
/// - Parameter source: what named the file, for messages (`KEYSTONE_PASSWORD_FILE`, `--password-file`).
/// - Throws: ``MessageFailure`` (exit 1) saying why, never showing the file's content.
func readPasswordFile(_ path: String, source: String) throws -> String {
    func failure(_ why: String) -> MessageFailure {
        MessageFailure(message: "keystone: \(source): cannot read the password from \(path): \(why)", exitCode: 1)
    }
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
    guard fd >= 0 else { throw failure(String(cString: strerror(errno))) }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { throw failure("it is not a regular file") }
    guard info.st_size <= off_t(HeadlessPassword.maximumSize) else { throw failure("it is larger than \(HeadlessPassword.maximumSize) bytes") }
    var bytes = [UInt8](repeating: 0, count: HeadlessPassword.maximumSize + 1)
    var count = 0
    while count < bytes.count {
        let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
        if n < 0 && errno == EINTR { continue }
        if n < 0 { throw failure(String(cString: strerror(errno))) }
        if n == 0 { break }
        count += n
    }
    defer { for i in bytes.indices { bytes[i] = 0 } }
    guard count > 0 else { throw failure("it is empty (give an empty password explicitly with -p '')") }
    var line = bytes[..<count].prefix { $0 != UInt8(ascii: "\n") }
    if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
    return String(decoding: line, as: UTF8.self)
}

/// Whether a read of `option` with `prompt` is a keychain password that the headless sources give: the password
/// `create-keychain` and `unlock-keychain` ask for (`-p`).
///
/// Decision: item secrets (`-w`), import passphrases (`-P`), old passwords (`-o`), recovery passwords and the new
/// password of `set-keychain-password` never come from the credential or the password file: one file holds one
/// password, and using it for a change of password or an item's secret would silently store the wrong value.
func isHeadlessKeychainPassword(prompt: String, option: String) -> Bool {
    option == "-p" && (prompt.hasPrefix("password for new keychain") || prompt.hasPrefix("password to unlock"))
}

/// Reads a secret: from the terminal without echo when standard input is one; else, for a keychain password
/// (``isHeadlessKeychainPassword(prompt:option:)``), from the systemd credential or `KEYSTONE_PASSWORD_FILE`
/// (``HeadlessPassword``); else one line of standard input.
///
/// An empty line is an empty secret, given on purpose. The end of input is not: a script whose variable is
/// unset, or a job run with no input (standard input `/dev/null` or closed), must not create a keychain with an
/// empty password or store an empty secret. It fails at once as a usage error naming every way to give it.
/// - Throws: ``UsageFailure`` at the end of input; ``MessageFailure`` when a password file cannot be read.
func readSecret(prompt: String, option: String) throws -> String {
    try readSecret(prompt: prompt, option: option, headless: isHeadlessKeychainPassword(prompt: prompt, option: option))
}

/// ``readSecret(prompt:option:)``, saying whether the headless sources (the systemd credential,
/// `KEYSTONE_PASSWORD_FILE`) may give this secret.
func readSecret(prompt: String, option: String, headless: Bool) throws -> String {
    if isatty(STDIN_FILENO) == 1 {
        // Echo goes off before the prompt appears: a secret typed as soon as the prompt shows is never echoed.
        var saved = termios()
        tcgetattr(STDIN_FILENO, &saved)
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSANOW, &silent)
        writeErr(prompt)
        defer {
            tcsetattr(STDIN_FILENO, TCSANOW, &saved)
            writeErr("\n")
        }
        if let line = readLine(strippingNewline: true) { return line }
    } else {
        if headless, let password = try HeadlessPassword.fromFiles() { return password }
        // A closed standard input (fd 0 not open) reads as its end: readLine returns nil at once.
        if let line = readLine(strippingNewline: true) { return line }
    }
    let headlessSources = headless
        ? ", or, with no terminal, the systemd credential \(HeadlessPassword.credentialName) (LoadCredential= in the unit) or \(HeadlessPassword.fileVariable)=PATH (a file holding it, such as /run/secrets/NAME)"
        : ""
    throw UsageFailure(message: "keystone: no \(option): standard input ended before a line was read. Pipe it in (printf '%s\\n' \"$SECRET\" | keystone …), type it at the prompt\(headlessSources), or give an empty one explicitly with \(option) ''")
}

// MARK: - Printing items as `security` does

/// Bytes as `security` shows them: `"text"` when printable, else `0xHEX  "escaped"`.
func securityQuoted(_ data: Data) -> String {
    if let text = String(data: data, encoding: .utf8), isPrintable(data) { return "\"\(text)\"" }
    return "0x" + data.map { String(format: "%02X", $0) }.joined() + "  \"" + escaped(data) + "\""
}

/// Whether bytes are UTF-8 text a terminal shows as it is: no C0 control (below U+0020), no DEL, no C1 control
/// (U+0080…U+009F: U+009B is a CSI on terminals that honour 8-bit controls).
///
/// Decision: C1 controls count as unprintable, as C0 ones do, so a stored value can never drive the terminal.
func isPrintable(_ data: Data) -> Bool {
    guard let text = String(data: data, encoding: .utf8) else { return false }
    return text.unicodeScalars.allSatisfy { $0.value >= 0x20 && !(0x7F...0x9F).contains($0.value) }
}

func escaped(_ data: Data) -> String {
    data.map { byte -> String in
        if byte >= 0x20 && byte < 0x7F && byte != UInt8(ascii: "\\") && byte != UInt8(ascii: "\"") { return String(UnicodeScalar(byte)) }
        return String(format: "\\%03o", byte)
    }.joined()
}

/// The secret as `-w` prints it: the text, or lowercase hex when it is not printable.
func passwordForW(_ data: Data) -> String {
    isPrintable(data) ? String(decoding: data, as: UTF8.self) : data.map { String(format: "%02x", $0) }.joined()
}

// MARK: - Dates and numbers from a storage

/// What the text forms print for a date no calendar can show (`"cdat"<timedate>=<invalid date>`); `--json` prints
/// `null` instead.
let invalidDateMarker = "<invalid date>"

/// A date's fields in UTC, or nil when it cannot be shown: not finite, or outside the years 0001…9999.
///
/// Decision: a storage is read as it is, so a date may be anything a Double holds (a planted Secret Service item
/// holds 1e300 s, NaN or infinity as easily as today). Only the years 0001…9999 are shown: the range of ISO 8601
/// without expansion and of `security`'s `yyyyMMddHHmmssZ`; every other value is shown as invalid, never converted
/// to `time_t` (which traps out of range) nor passed to `gmtime_r` (which fails past its year range).
func utcFields(_ date: Date) -> (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int)? {
    let seconds = date.timeIntervalSince1970
    // 0001-01-01T00:00:00Z and 10000-01-01T00:00:00Z, in seconds since 1970.
    guard seconds.isFinite, seconds >= -62_135_596_800, seconds < 253_402_300_800 else { return nil }
    var time = time_t(seconds.rounded(.down))
    var parts = tm()
    guard gmtime_r(&time, &parts) != nil else { return nil }
    return (Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
}

/// `date` in UTC as `yyyyMMddHHmmss'Z'`, without a DateFormatter (making one per item made a dump of 100,000
/// items take most of a minute); nil when it cannot be shown (see ``utcFields(_:)``).
func compactUTC(_ date: Date) -> String? {
    guard let f = utcFields(date) else { return nil }
    return String(format: "%04d%02d%02d%02d%02d%02dZ", f.year, f.month, f.day, f.hour, f.minute, f.second)
}

/// `date` in UTC as ISO 8601 (`2026-11-24T16:30:00Z`), for `--json`; nil when it cannot be shown (JSON gets `null`).
func isoUTCIfValid(_ date: Date) -> String? {
    guard let f = utcFields(date) else { return nil }
    return String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ", f.year, f.month, f.day, f.hour, f.minute, f.second)
}

/// `date` in UTC as ISO 8601, or ``invalidDateMarker`` when it cannot be shown.
func isoUTC(_ date: Date) -> String { isoUTCIfValid(date) ?? invalidDateMarker }

/// `security`'s `<timedate>` value: the compact UTC text as hex and quoted, or ``invalidDateMarker``.
func timedate(_ date: Date) -> String {
    guard let text = compactUTC(date) else { return invalidDateMarker }
    let hex = (Array(text.utf8) + [0]).map { String(format: "%02X", $0) }.joined()
    return "0x\(hex)  \"\(text)\\000\""
}

/// A four-character code's bytes (the low 32 bits of `n`, big-endian), quoted as `security` quotes blobs: any
/// byte that is not printable is shown escaped, never sent to the terminal.
func fourCharCode(_ n: Int64) -> String {
    securityQuoted(Data((0..<4).map { UInt8(truncatingIfNeeded: n >> (24 - 8 * $0)) }))
}

/// A number of seconds from a storage (a lock timeout) as whole seconds; values no Int holds (NaN, infinity,
/// 1e300) as Swift prints the Double, never converted (which traps).
func wholeSeconds(_ seconds: TimeInterval) -> String {
    guard seconds.isFinite, abs(seconds) < 1e15 else { return "\(seconds)" }
    return String(Int64(seconds.rounded(.down)))
}

/// The attribute block `security find-*-password` prints.
func attributeBlock(_ attributes: KeychainQuery, keychain: String) -> String {
    let cls = attributes[Key.class]?.stringValue ?? "genp"
    func blob(_ key: String) -> String {
        switch attributes[key] {
        case .string(let s)?: return securityQuoted(Data(s.utf8))
        case .data(let d)?: return securityQuoted(d)
        default: return "<NULL>"
        }
    }
    func uint32(_ key: String, fourChar: Bool = false) -> String {
        // A number attribute given as a four-character string (older code does) is kept as that string.
        switch attributes[key] {
        case .string(let s)?: return securityQuoted(Data(s.utf8))
        case .data(let d)?: return securityQuoted(d)
        default: break
        }
        guard let n = attributes[key]?.integerValue, n != 0 || !fourChar else { return "<NULL>" }
        return fourChar ? fourCharCode(n) : String(format: "0x%08X ", UInt32(truncatingIfNeeded: n))
    }
    func sint32(_ key: String) -> String {
        guard let b = attributes[key]?.boolValue else { return "<NULL>" }
        return String(format: "0x%08X ", b ? 1 : 0)
    }
    func sint32Number(_ key: String) -> String {
        guard let n = attributes[key]?.integerValue else { return "<NULL>" }
        return String(format: "0x%08X ", UInt32(truncatingIfNeeded: n))
    }
    func date(_ key: String) -> String {
        if case .date(let d)? = attributes[key] { return timedate(d) }
        return "<NULL>"
    }
    var lines = ["keychain: \"\(keychain)\"", "version: 512", "class: \"\(cls)\"", "attributes:"]
    lines.append("    0x00000007 <blob>=\(blob(Key.label))")
    lines.append("    0x00000008 <blob>=<NULL>")
    lines.append("    \"acct\"<blob>=\(blob(Key.account))")
    if cls == "inet" {
        let atyp = uint32(Key.authenticationType, fourChar: true)
        lines.append("    \"atyp\"<blob>=\(atyp)")
    }
    lines.append("    \"cdat\"<timedate>=\(date(Key.creationDate))")
    lines.append("    \"crtr\"<uint32>=\(uint32(Key.creator, fourChar: true))")
    lines.append("    \"cusi\"<sint32>=\(sint32Number(Key.customIcon))")
    lines.append("    \"desc\"<blob>=\(blob(Key.description))")
    if cls == "genp" { lines.append("    \"gena\"<blob>=\(blob(Key.generic))") }
    lines.append("    \"icmt\"<blob>=\(blob(Key.comment))")
    lines.append("    \"invi\"<sint32>=\(sint32(Key.isInvisible))")
    lines.append("    \"mdat\"<timedate>=\(date(Key.modificationDate))")
    lines.append("    \"nega\"<sint32>=\(sint32(Key.isNegative))")
    if cls == "inet" {
        lines.append("    \"path\"<blob>=\(blob(Key.path))")
        lines.append("    \"port\"<uint32>=\(uint32(Key.port))")
    }
    lines.append("    \"prot\"<blob>=\(blob(Key.protection))")
    if cls == "inet" {
        let ptcl = uint32(Key.protocol, fourChar: true)
        lines.append("    \"ptcl\"<uint32>=\(ptcl)")
    }
    lines.append("    \"scrp\"<sint32>=\(sint32Number(Key.scriptCode))")
    if cls == "inet" {
        lines.append("    \"sdmn\"<blob>=\(blob(Key.securityDomain))")
        lines.append("    \"srvr\"<blob>=\(blob(Key.server))")
    } else {
        lines.append("    \"svce\"<blob>=\(blob(Key.service))")
    }
    lines.append("    \"type\"<uint32>=\(uint32(Key.type, fourChar: true))")
    return lines.joined(separator: "\n") + "\n"
}

/// The JSON form of an item (`--json`): attributes by their four-character names; the secret only when asked.
func jsonObject(_ attributes: KeychainQuery, keychain: String, secret: Data?) -> [String: Any] {
    var object: [String: Any] = ["keychain": keychain, "class": attributes[Key.class]?.stringValue ?? "genp"]
    var fields: [String: Any] = [:]
    for (key, value) in attributes where key != Key.valueData && key != Key.class && key != Key.valuePersistentRef {
        switch value {
        case .string(let s): fields[key] = s
        case .data(let d): fields[key] = isPrintable(d) ? String(decoding: d, as: UTF8.self) : d.base64EncodedString()
        case .number(let n): fields[key] = n
        case .double(let d): fields[key] = d.isFinite ? d as Any : NSNull()
        case .bool(let b): fields[key] = b
        // Decision: a date no calendar can show (see utcFields) is null, documented in dump-keychain's help.
        case .date(let d): fields[key] = isoUTCIfValid(d) ?? NSNull()
        case .accessControl(let ac): fields[key] = ["accessibility": ac.accessibility.rawValue, "flags": ac.flags.rawValue]
        case .authenticationContext: continue
        }
    }
    object["attributes"] = fields
    if let secret { object["password"] = isPrintable(secret) ? String(decoding: secret, as: UTF8.self) : secret.map { String(format: "%02x", $0) }.joined() }
    return object
}

/// Prints `value` as JSON (pretty, keys sorted).
///
/// Numbers JSON cannot hold (NaN, infinity) become `null`, and DEL and the C1 controls (U+007F…U+009F), which JSON
/// allows raw in strings, are written as `\u00XX` escapes, so a value from a storage never reaches the terminal as
/// a control. If the value still cannot be encoded, the tool says so and exits 1 rather than print nothing.
func printJSON(_ value: Any) {
    guard let data = try? JSONSerialization.data(withJSONObject: jsonSafe(value), options: [.prettyPrinted, .sortedKeys]) else {
        writeErr("keystone: the output could not be encoded as JSON\n")
        exit(1)
    }
    var text = ""
    for scalar in String(decoding: data, as: UTF8.self).unicodeScalars {
        if (0x7F...0x9F).contains(scalar.value) {
            text += String(format: "\\u%04x", scalar.value)
        } else {
            text.unicodeScalars.append(scalar)
        }
    }
    writeOut(text + "\n")
}

/// `value` with every number JSON cannot hold (NaN, ±infinity) replaced by `null`.
func jsonSafe(_ value: Any) -> Any {
    switch value {
    case let dictionary as [String: Any]: return dictionary.mapValues(jsonSafe)
    case let array as [Any]: return array.map(jsonSafe)
    case let double as Double where !double.isFinite: return NSNull()
    case let float as Float where !float.isFinite: return NSNull()
    default: return value
    }
}

// MARK: - Names that are not UTF-8

/// Exits with status 2 when an argument, or a variable naming a keychain location or a password file, is not
/// valid UTF-8.
///
/// Decision: the tool's names (keychain paths, services, accounts, labels) are Swift strings; an argument with other
/// bytes (a Latin-1 file name under `LANG=C`) would be decoded with replacement characters, so `kc-\xff` and
/// `kc-\xfe` would be the same keychain and `-a 'x\xff'` would find the item of `-a 'x\xfe'`. Such a name is refused
/// before anything runs, saying which argument and what to do; nothing is created under a name the user did not give.
func refuseNamesThatAreNotUTF8() {
    let fix = "Keystone's keychain paths, services and accounts are UTF-8 text (LANG=C does not change that): rename the file or directory to a UTF-8 name (convmv, mv) or give the name in UTF-8"
    for index in 1..<Int(CommandLine.argc) {
        guard let pointer = CommandLine.unsafeArgv[index] else { continue }
        if String(validatingCString: pointer) == nil {
            writeErr("keystone: argument \(index) is not valid UTF-8. \(fix).\n")
            exit(2)
        }
    }
    let variables = ["KEYSTONE_KEYCHAIN", KeychainFile.keychainDirectoryVariable, "XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME",
                     HeadlessPassword.fileVariable, "CREDENTIALS_DIRECTORY"]
    for name in variables {
        guard let raw = getenv(name) else { continue }
        if String(validatingCString: raw) == nil {
            writeErr("keystone: \(name) is not valid UTF-8. \(fix), or set \(name) to another path.\n")
            exit(2)
        }
    }
}
