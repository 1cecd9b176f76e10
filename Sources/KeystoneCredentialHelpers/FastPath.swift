import Foundation
import KeychainEngine
import KeychainFile
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The entry point of `git-credential-keystone` and `docker-credential-keystone`.
///
/// Decision: two small executables (this module, KeychainEngine and KeychainFile only) rather than `keystone`
/// reached through a symbolic link (argv[0]): `keystone` links every backend (libsecret and GLib, tpm2-tss, PAM,
/// AsyncHTTPClient, swift-certificates) and takes several times longer to start, and git runs a helper once per
/// credential. The small binaries serve the common case themselves: an **unlocked keychain file** (the default keychain,
/// `KEYSTONE_KEYCHAIN`, or `--keychain NAME|PATH`). Anything else is handed, before standard input is read, to
/// `keystone credential-helper git|docker ARGS` by `exec` (the `keystone` next to this binary, else on `PATH`): a
/// locked keychain (it asks for the password on the terminal, or fails at once without one), the Secret Service,
/// etcd, a keychain sealed to the TPM, a `default-keychain` setting or `KEYSTONE_BACKEND`.
public enum CredentialHelperMain {
    public enum Kind: String, Sendable { case git, docker }

    /// Runs the helper with the process's arguments and exits.
    public static func main(_ kind: Kind) -> Never {
        // As the keystone tool: the helper reports problems itself; the operator log shows errors only, unless
        // KEYSTONE_LOG_LEVEL asks for more (a library warning must not reach git's or docker's user as noise).
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = ProcessInfo.processInfo.environment["KEYSTONE_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .error
            return handler
        }
        let arguments = Array(CommandLine.arguments.dropFirst())
        var keychain: String?
        var verb: String?
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--keychain", index + 1 < arguments.count {
                keychain = arguments[index + 1]
                index += 2
                continue
            }
            if argument.hasPrefix("--keychain=") { keychain = String(argument.dropFirst("--keychain=".count)) }
            else if argument.hasPrefix("-") { delegate(kind, arguments) }   // --help and the like: keystone answers
            else { verb = argument }
            index += 1
        }
        guard let verb else { delegate(kind, arguments) }
        switch kind {
        case .git:
            guard ["get", "store", "erase"].contains(verb) else { exit(0) }   // git's rule: unknown verbs are ignored
        case .docker:
            guard let dockerVerb = DockerCredentialStore.Verb(rawValue: verb) else { delegate(kind, arguments) }
            if dockerVerb == .version { printDockerVersion() }
        }
        guard let path = fastKeychainPath(keychain) else { delegate(kind, arguments) }
        let reads = verb != "store"
        guard FileManager.default.fileExists(atPath: path) else {
            // No keychain yet: nothing to find; a store is keystone's (it creates the default keychain and says so).
            guard reads else { delegate(kind, arguments) }
            if kind == .docker { finish(verb == "list" ? .init("{}\n") : .notFound) }
            exit(0)
        }
        guard let file = try? KeychainFile.open(at: path), file.lockState == .unlocked else { delegate(kind, arguments) }
        let engine = KeychainEngine(storage: file)
        let input = FileHandle.standardInput.readDataToEndOfFile()
        do {
            switch kind {
            case .git:
                let request = try GitCredential.parse(input)
                switch verb {
                case "get": FileHandle.standardOutput.write(Data(try GitCredentialStore.get(request, engine: engine).utf8))
                case "store": try GitCredentialStore.store(request, engine: engine)
                default: try GitCredentialStore.erase(request, engine: engine)
                }
                exit(0)
            case .docker:
                finish(try DockerCredentialStore.run(DockerCredentialStore.Verb(rawValue: verb)!, input: input, engine: engine))
            }
        } catch let error as CredentialHelperError {
            fail(kind, verb: verb, message: error.message)
        } catch let error as EngineError {
            // Locked between the check and the call (another process's lock-keychain, the timeout): standard input is
            // read, so keystone cannot take over; no credential.
            fail(kind, verb: verb, message: "keystone: \(path): \(error.reason.isEmpty ? "OSStatus \(error.status)" : error.reason)"
                 + (error.status == Status.interactionNotAllowed ? ". Unlock it with `keystone unlock-keychain \(path)`." : ""))
        } catch {
            fail(kind, verb: verb, message: "keystone: \(error)")
        }
    }

    static func printDockerVersion() -> Never {
        FileHandle.standardOutput.write(Data(DockerCredentialStore.run(version: ()).utf8))
        exit(0)
    }

    static func finish(_ outcome: DockerCredentialStore.Outcome) -> Never {
        FileHandle.standardOutput.write(Data(outcome.output.utf8))
        exit(outcome.status)
    }

    /// Reports a failure as each protocol expects: git gets nothing on standard output (no credential) and the
    /// message on standard error; docker gets the message on standard output (where the docker CLI reads it), and
    /// for `get` the "not found" text so that docker goes on without a credential.
    static func fail(_ kind: Kind, verb: String, message: String) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        switch kind {
        case .git: exit(verb == "get" ? 0 : 1)
        case .docker: finish(verb == "get" ? .notFound : .init(message + "\n", 1))
        }
    }

    /// The keychain file this binary may serve itself, or nil when keystone must decide (see the type's decision).
    static func fastKeychainPath(_ argument: String?) -> String? {
        let environment = ProcessInfo.processInfo.environment
        func isRemote(_ spec: String) -> Bool {
            spec == "secret-service" || spec.hasPrefix("secret-service:") || spec.lowercased().hasPrefix("etcd://") || spec.lowercased().hasPrefix("etcds://")
        }
        if let argument {
            if isRemote(argument) { return nil }
            if argument.contains("/") { return URL(fileURLWithPath: argument).standardizedFileURL.path }
            let name = argument.hasSuffix(".keychain-db") || argument.hasSuffix(".keychain") ? argument : argument + ".keychain-db"
            return KeychainFile.keychainDirectory + "/" + name
        }
        if let variable = environment["KEYSTONE_KEYCHAIN"], !variable.isEmpty {
            return isRemote(variable) || !FileManager.default.fileExists(atPath: variable) ? nil : variable
        }
        if let backend = environment["KEYSTONE_BACKEND"], !backend.isEmpty, backend != "file" { return nil }
        // A `default-keychain -s` setting: keystone reads it (with its ownership and mode checks).
        let configuration = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 + "/keystone" }
            ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.config/keystone"
        if FileManager.default.fileExists(atPath: configuration + "/default-keychain") { return nil }
        return KeychainFile.defaultPath
    }

    /// Replaces this process with `keystone credential-helper KIND ARGS` (standard input untouched).
    static func delegate(_ kind: Kind, _ arguments: [String]) -> Never {
        guard let keystone = keystoneExecutable() else {
            let message = "keystone: \(kind.rawValue)-credential-keystone needs the `keystone` tool for this keychain, and found it neither next to this program nor on PATH: install keystone beside it"
            fail(kind, verb: arguments.last ?? "", message: message)
        }
        let argv = [keystone, "credential-helper", kind.rawValue] + arguments
        var cArguments = argv.map { strdup($0) } + [nil]
        execv(keystone, &cArguments)
        fail(kind, verb: arguments.last ?? "", message: "keystone: could not run \(keystone): \(String(cString: strerror(errno)))")
    }

    /// `keystone` next to this executable (symbolic links resolved), else the first on `PATH`.
    static func keystoneExecutable() -> String? {
        var candidates: [String] = []
        if let me = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append(URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("keystone").path)
        }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") where !directory.isEmpty {
            candidates.append(String(directory) + "/keystone")
        }
        return candidates.first { access($0, X_OK) == 0 }
    }
}

extension DockerCredentialStore {
    /// What `version` prints.
    static func run(version: Void) -> String { "docker-credential-keystone (keystone) \(self.version)\n" }
}
