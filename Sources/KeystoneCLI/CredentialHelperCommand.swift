import ArgumentParser
import Foundation
import KeychainEngine
import KeychainFile
import KeystoneCredentialHelpers
#if !canImport(Darwin)
import KeychainSecretService
#endif
#if NIO && !canImport(Darwin)
import KeychainEtcd
#endif
#if canImport(Glibc)
import Glibc
#endif

// `keystone credential-helper git|docker VERB`: git's and docker's credential-helper protocols on any keychain
// keystone opens (a keychain file, sealed or not, the Secret Service, etcd), and `install` / `--uninstall`.
// `git-credential-keystone` and `docker-credential-keystone` serve an unlocked keychain file themselves and hand every
// other case to these commands (KeystoneCredentialHelpers' CredentialHelperMain).

/// `keystone credential-helper`.
struct CredentialHelper: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "credential-helper",
        abstract: "git's and docker's credential helpers on a keystone keychain.",
        discussion: """
        git runs `git-credential-keystone` for `credential.helper keystone`, and docker runs \
        `docker-credential-keystone` for `"credsStore": "keystone"`; both end here for anything but an unlocked \
        keychain file. The keychain is --keychain (`credential.helper "keystone --keychain secret-service:"`), else \
        the default keychain (KEYSTONE_KEYCHAIN, KEYSTONE_BACKEND, `default-keychain -s`, the login keychain). A locked \
        keychain is unlocked with its password typed on the terminal (never echoed) when there is one and \
        GIT_TERMINAL_PROMPT is not 0; without one the helper says so on standard error at once and answers \
        "no credential" (git: nothing printed, exit 0; docker: "credentials not found in native keychain", exit 1).
        """,
        subcommands: [GitHelper.self, DockerHelper.self, InstallHelper.self])

    struct GitHelper: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "git", abstract: "git's credential-helper protocol: get, store or erase (the request on standard input).")
        @Option(help: "Keychain name, path, secret-service:[COLLECTION] or etcd://host:port,…/NAME (default: the default keychain).") var keychain: String?
        @Argument(help: "get, store or erase.") var verb: String

        mutating func run() throws {
            guard ["get", "store", "erase"].contains(verb) else { return }   // git's rule: ignore unknown verbs
            let spec = keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain
            let request: GitCredential
            do {
                request = try GitCredential.parse(FileHandle.standardInput.readDataToEndOfFile())
            } catch let error as CredentialHelperError {
                throw MessageFailure(message: error.message, exitCode: 1)
            }
            if request.quit { return }
            let verb = verb
            do {
                #if !canImport(Darwin)
                if KeychainSpec.isSecretService(spec) {
                    let service = try CredentialSecretService(spec: spec)
                    switch verb {
                    case "get": writeOut(try service.gitGet(request))
                    case "store": try service.gitStore(request)
                    default: try service.gitErase(request)
                    }
                    return
                }
                #endif
                let output = try CredentialHelperRun.unlocking(spec, creating: verb == "store") { engine -> String in
                    switch verb {
                    case "get": return try GitCredentialStore.get(request, engine: engine)
                    case "store": try GitCredentialStore.store(request, engine: engine)
                    default: try GitCredentialStore.erase(request, engine: engine)
                    }
                    return ""
                }
                writeOut(output ?? "")
            } catch let failure as CredentialHelperRun.Failure {
                // git: nothing on standard output is "no credential"; git then asks its next helper or the user.
                writeErr(failure.message + "\n")
                if verb != "get" { throw ExitCode(1) }
            } catch let error as CredentialHelperError {
                writeErr(Redaction.redacted(error.message) + "\n")
                if verb != "get" { throw ExitCode(1) }
            }
        }
    }

    struct DockerHelper: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "docker", abstract: "docker's credential-helper protocol: store, get, erase, list or version.")
        @Option(help: "Keychain name, path, secret-service:[COLLECTION] or etcd://host:port,…/NAME (default: the default keychain).") var keychain: String?
        @Argument(help: "store, get, erase, list or version.") var verb: String

        mutating func run() throws {
            guard let verb = DockerCredentialStore.Verb(rawValue: verb) else {
                writeOut("unknown credential action `\(self.verb)`\n")
                throw ExitCode(1)
            }
            if verb == .version { return writeOut("docker-credential-keystone (keystone) \(DockerCredentialStore.version)\n") }
            let spec = keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain
            let input = verb == .list ? Data() : FileHandle.standardInput.readDataToEndOfFile()
            var outcome = DockerCredentialStore.Outcome.notFound
            do {
                #if !canImport(Darwin)
                if KeychainSpec.isSecretService(spec) {
                    outcome = try CredentialSecretService(spec: spec).docker(verb, input: input)
                    writeOut(outcome.output)
                    if outcome.status != 0 { throw ExitCode(outcome.status) }
                    return
                }
                #endif
                outcome = try CredentialHelperRun.unlocking(spec, creating: verb == .store) { engine in
                    try DockerCredentialStore.run(verb, input: input, engine: engine)
                } ?? (verb == .list ? .init("{}\n") : .notFound)
            } catch let failure as CredentialHelperRun.Failure {
                // docker reads errors on standard output; "not found" lets it go on without a credential.
                writeErr(failure.message + "\n")
                outcome = verb == .get ? .notFound : .init(failure.message + "\n", 1)
            } catch let error as CredentialHelperError {
                let message = Redaction.redacted(error.message)
                writeErr(message + "\n")
                outcome = verb == .get ? .notFound : .init(message + "\n", 1)
            }
            writeOut(outcome.output)
            if outcome.status != 0 { throw ExitCode(outcome.status) }
        }
    }
}

/// Running a helper's verb on a keychain, unlocking it once on the terminal when it is locked.
enum CredentialHelperRun {
    /// A verb that could not run: the keychain is locked with nobody to ask, could not be opened, or failed.
    struct Failure: Error {
        let message: String
        init(_ message: String) { self.message = Redaction.redacted(message) }
    }

    /// Runs `body` on the keychain `spec` names; nil when the keychain does not exist and `creating` is false (nothing
    /// to find). When the keychain is locked, asks once for its password on the terminal (``promptForPassword``),
    /// unlocks it and runs `body` again; without a terminal fails at once.
    ///
    /// Decision: the Secret Service is never unlocked from here: its unlock is its own (graphical) prompt, which would
    /// wait for ever over SSH or in CI; the message says how to unlock it.
    /// - Throws: ``Failure``, never holding a secret.
    static func unlocking<T>(_ spec: String, creating: Bool, _ body: (KeychainEngine) throws -> T) throws -> T? {
        if !creating && !KeychainSpec.isRemote(spec) && !FileManager.default.fileExists(atPath: spec) { return nil }
        let storage: any KeychainStorage
        do {
            storage = try openStorage(spec, function: "credential-helper")
        } catch let failure as ToolFailure {
            throw Failure(failure.message)
        } catch let failure as UsageFailure {
            throw Failure(failure.message)
        }
        let engine = KeychainEngine(storage: storage)
        do {
            return try body(engine)
        } catch let error as EngineError where error.status == Status.interactionNotAllowed {
            try unlock(storage, spec: spec)
            do { return try body(engine) } catch let error as EngineError { throw failure(error, spec: spec) }
        } catch let error as EngineError {
            throw failure(error, spec: spec)
        }
    }

    static func failure(_ error: EngineError, spec: String) -> Failure {
        Failure(ToolFailure(function: "credential-helper (\(spec))", status: error.status,
                            reason: withUnlockHint(error.reason, status: error.status, keychain: spec)).message)
    }

    /// Unlocks a locked keychain with its password from the terminal.
    ///
    /// - Throws: ``Failure`` at once when there is no terminal (or GIT_TERMINAL_PROMPT=0, or the Secret Service), or
    ///   when the password is wrong.
    static func unlock(_ storage: any KeychainStorage, spec: String) throws {
        let headless = "keystone: credential-helper: the keychain \(spec) is locked"
        if KeychainSpec.isSecretService(spec) {
            throw Failure(headless + ": unlock it with `keystone unlock-keychain \(spec)` (the Secret Service shows its own prompt), in Seahorse, or by logging in to the desktop")
        }
        let fix = "unlock it first with `keystone unlock-keychain \(spec)` (the password on standard input), or use a keychain sealed to the TPM"
        guard let password = try promptForPassword(spec: spec) else {
            throw Failure(headless + " and there is no terminal to ask for its password: " + fix)
        }
        do {
            if let file = storage as? KeychainFile {
                if file.isSealedToSecureEnclave && password.isEmpty { try file.unlock() } else { try file.unlock(password: password) }
                return
            }
            #if NIO && !canImport(Darwin)
            if let keychain = storage as? EtcdKeychain {
                try keychain.unlock(password: password)
                return
            }
            #endif
        } catch let error as EngineError {
            throw failure(error, spec: spec)
        }
        throw Failure(headless + ": " + fix)
    }

    /// The keychain password typed on the controlling terminal, without echo (``readSecret(prompt:option:)`` on the
    /// terminal made standard input: the protocol's input was read already); nil when there is no terminal or
    /// `GIT_TERMINAL_PROMPT=0` forbids prompting.
    static func promptForPassword(spec: String) throws -> String? {
        if ProcessInfo.processInfo.environment["GIT_TERMINAL_PROMPT"] == "0" { return nil }
        let terminal = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard terminal >= 0 else { return nil }
        defer { close(terminal) }
        guard isatty(terminal) == 1, dup2(terminal, STDIN_FILENO) >= 0 else { return nil }
        do {
            return try readSecret(prompt: "keystone: password to unlock \(spec): ", option: "keychain password")
        } catch let failure as UsageFailure {
            throw Failure(failure.message)
        }
    }
}
