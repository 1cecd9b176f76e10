import ArgumentParser
import Foundation
import Logging

// The tool reports problems itself (with the reason on a second line); the operator log shows errors only,
// unless KEYSTONE_LOG_LEVEL (trace, debug, info, notice, warning, error, critical) asks for more.
LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = ProcessInfo.processInfo.environment["KEYSTONE_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .error
    return handler
}
// The backends, as an app installs them (Backends.swift).
bootstrapBackends()

/// `keystone`: macOS `security`'s keychain verbs over Keystone's encrypted keychain files.
struct KeystoneTool: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keystone",
        abstract: "Manage keychains, their passwords, certificates and keys, with the verbs of macOS `security`.",
        discussion: """
        Keychains are files: a name without '/' means $KEYSTONE_KEYCHAIN_DIR/NAME.keychain-db (else \
        $XDG_DATA_HOME/keystone, else ~/.local/share/keystone); `secret-service:` (or secret-service:COLLECTION) \
        names the freedesktop Secret Service instead, and etcd://host:port,…/NAME[?user=U] (etcds://…?ca=&cert=&key= \
        for TLS; the etcd password in KEYSTONE_ETCD_PASSWORD) a keychain kept in an etcd cluster, end-to-end \
        encrypted and shared by every machine that reaches it. The default keychain is $KEYSTONE_KEYCHAIN (a file \
        that must exist, unless KEYSTONE_KEYCHAIN_CREATE=1); else the \
        Secret Service or etcd keychain KEYSTONE_BACKEND names; else (KEYSTONE_BACKEND file or \
        unset) the one set with `default-keychain -s`, else login.keychain-db, created on first use. \
        `keystone doctor` says which is in use and why. \
        Errors print `keystone: <function>: <message>` and exit with the low byte of the OSStatus \
        (item not found: 44, duplicate item: 45, keychain locked: 36); usage errors exit 2. \
        Headless (no terminal): keychain passwords come from --password-file, the systemd credential \
        keystone.keychain-password, KEYSTONE_PASSWORD_FILE or standard input, never from the environment; where the \
        kernel keyring is refused (containers), unlock-keychain starts `keystone agent` so later commands see the unlock.
        """,
        subcommands: [
            CreateKeychain.self, DeleteKeychain.self, LockKeychain.self, UnlockKeychain.self, EnrollMachine.self, SetKeychainSettings.self,
            SetKeychainPassword.self, ShowKeychainInfo.self, ListKeychains.self, DefaultKeychain.self, DumpKeychain.self,
            AddPassword<GenericAttributes>.self, FindPassword<GenericAttributes>.self, DeletePassword<GenericAttributes>.self,
            AddPassword<InternetAttributes>.self, FindPassword<InternetAttributes>.self, DeletePassword<InternetAttributes>.self,
            Doctor.self, Seal.self, Unseal.self, Agent.self,
            CredentialHelper.self, Audit.self,
        ] + certificateVerbs + authenticationVerbs + polkitVerbs + trustVerbs + pinVerbs + tpmKeyVerbs + etcdHistoryVerbs + etcdGroupVerbs)
}

/// Per verb: the single-letter options that take a value, and those that prompt when given last without one.
let optionTable: [String: (values: Set<Character>, prompts: Set<Character>)] = [
    "create-keychain": (["p"], ["p"]),
    "unlock-keychain": (["p"], ["p"]),
    "set-keychain-settings": (["t"], []),
    "set-keychain-password": (["o", "p"], ["p"]),
    "list-keychains": (["d"], []),
    "default-keychain": (["d", "s"], []),
    "add-generic-password": (["a", "s", "w", "X", "l", "j", "D", "G", "c", "C", "T"], ["w"]),
    "find-generic-password": (["a", "s", "l", "j", "D", "G", "c", "C"], []),
    "delete-generic-password": (["a", "s", "l", "j", "D", "G", "c", "C"], []),
    "add-internet-password": (["a", "s", "w", "X", "l", "j", "D", "c", "C", "r", "P", "p", "d", "t", "T"], ["w"]),
    "find-internet-password": (["a", "s", "l", "j", "D", "c", "C", "r", "P", "p", "d", "t"], []),
    "delete-internet-password": (["a", "s", "l", "j", "D", "c", "C", "r", "P", "p", "d", "t"], []),
    "import": (["k", "t", "f", "P", "T"], []),
    "export": (["k", "t", "f", "P", "o"], []),
    "export-tpm-key": (["o"], []),
    "import-tpm-key": (["o"], []),
    "find-certificate": (["c", "e"], []),
    "find-identity": (["p", "s"], []),
    "delete-certificate": (["c", "Z"], []),
    "delete-identity": (["c", "Z"], []),
    "verify-cert": (["c", "r", "p", "s", "d"], []),
]

// Names that are not UTF-8 would be changed silently by decoding (Support.swift): refused first.
refuseNamesThatAreNotUTF8()
var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.isEmpty {
    writeErr(KeystoneTool.helpMessage(for: KeystoneTool.self) + "\n")
    exit(2)
}
if let verb = arguments.first, let spec = optionTable[verb] {
    arguments = [verb] + normalize(Array(arguments.dropFirst()), valueOptions: spec.values, promptOptions: spec.prompts)
}

do {
    var command = try KeystoneTool.parseAsRoot(arguments)
    _ = try ToolConfig.backend()  // an unknown KEYSTONE_BACKEND is a usage error, whatever the verb
    try command.run()
} catch let failure as ToolFailure {
    writeErr(failure.message + "\n")
    exit(failure.exitCode)
} catch let failure as MessageFailure {
    writeErr(failure.message + "\n")
    exit(failure.exitCode)
} catch let failure as UsageFailure {
    writeErr(failure.message + "\n")
    exit(2)
} catch let code as ExitCode {
    exit(code.rawValue)
} catch {
    if KeystoneTool.exitCode(for: error) == .success { KeystoneTool.exit(withError: error) }  // --help
    writeErr(KeystoneTool.fullMessage(for: error) + "\n")
    exit(2)
}
