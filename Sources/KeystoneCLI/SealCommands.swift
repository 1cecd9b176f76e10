import ArgumentParser
import Foundation
import KeychainEngine
import Keystone
import KeystoneProtectedFiles

// `keystone seal` / `keystone unseal`: Keystone's protected files (the sealed format, ProtectedFiles in Keystone)
// from the command line, with the class keys in a keychain.
//
// Decisions: the sealed file's full path (or --identifier) is authenticated, so the sealed side is always a named
// file: `-` (standard input / output) is accepted only for the plaintext side (seal's INPUT, unseal's OUTPUT). Unsealing to a file is
// atomic (the output appears only once the whole file verified); unsealing to standard output streams, and on a
// failure (non-zero exit) what was already printed must be discarded.

/// The `--protection` values.
enum ProtectionArgument: String, ExpressibleByArgument, CaseIterable {
    case complete
    case completeUnlessOpen = "complete-unless-open"
    case completeUntilFirstUserAuthentication = "complete-until-first-user-authentication"

    var protection: FileProtection {
        switch self {
        case .complete: return .complete
        case .completeUnlessOpen: return .completeUnlessOpen
        case .completeUntilFirstUserAuthentication: return .completeUntilFirstUserAuthentication
        }
    }
}

/// Protected files over the keychain `-k` names (or the default keychain).
func protectedFiles(_ keychain: String?, function: String, rollbackProtection: Bool = false,
                    readsFormatVersion1: Bool = false) throws -> ProtectedFiles {
    let spec = keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain
    let engine = KeychainEngine(storage: try openStorage(spec, function: function))
    return try sealCall(function) {
        try ProtectedFiles(keychain: Keychain(store: engine), rollbackProtection: rollbackProtection, readsFormatVersion1: readsFormatVersion1)
    }
}

/// The options seal and unseal share: what the file is bound to, and rollback protection.
struct BindingOptions: ParsableArguments {
    @Option(help: "Bind the file to this identifier instead of its full path (it then opens wherever it is moved, only with the same identifier).")
    var identifier: String?
    @Flag(help: "Record the file's version in the keychain when sealing, and refuse an older copy when unsealing (use it for both).")
    var rollbackProtection = false
}

/// Runs a protected-file call, turning a ``KeychainError`` into a ``ToolFailure`` (exit: the status's low byte).
func sealCall<T>(_ function: String, _ body: () throws -> T) throws -> T {
    do { return try body() } catch let error as KeychainError {
        throw ToolFailure(function: function, status: error.status, reason: error.reason)
    } catch let error as EngineError {
        throw ToolFailure(function: function, status: error.status, reason: error.reason)
    }
}

struct Seal: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seal",
        abstract: "Write INPUT as a protected file OUTPUT, sealed under a class key in the keychain.",
        discussion: """
        AES-256-GCM in 64 KiB chunks under a per-file key derived from the class key (created in the keychain on \
        first use); OUTPUT's full path (or --identifier) is authenticated: a copy, a moved or a renamed file does \
        not open. OUTPUT is replaced atomically and created with mode 0600; temporary files interrupted seals of \
        OUTPUT left are removed first. INPUT may be - (standard input). A locked keychain exits 36 and writes nothing.
        """)
    @Option(name: .customShort("k"), help: "The keychain holding the class keys (default: the default keychain).") var keychain: String?
    @Option(help: "When the file can be read: complete, complete-unless-open (can be sealed while locked after the first unlock), complete-until-first-user-authentication.")
    var protection: ProtectionArgument = .complete
    @OptionGroup var binding: BindingOptions
    @Argument(help: "The file to protect, or - for standard input.") var input: String
    @Argument(help: "The protected file to write (not -: its path is authenticated).") var output: String

    mutating func run() throws {
        guard output != "-" else { throw UsageFailure(message: "keystone: seal: OUTPUT must be a file: a protected file's path is authenticated") }
        let files = try protectedFiles(keychain, function: "seal", rollbackProtection: binding.rollbackProtection)
        let target = URL(fileURLWithPath: output)
        let identifier = binding.identifier
        try sealCall("seal") {
            if input == "-" {
                try files.write(from: FileHandle.standardInput, to: target, protection: protection.protection, identifier: identifier)
            } else {
                try files.write(contentsOf: URL(fileURLWithPath: input), to: target, protection: protection.protection, identifier: identifier)
            }
        }
    }
}

struct Unseal: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unseal",
        abstract: "Verify and decrypt the protected file INPUT into OUTPUT.",
        discussion: """
        OUTPUT (mode 0600) appears only when all of INPUT verified. With OUTPUT - the plaintext streams to standard \
        output: on a failure (non-zero exit) discard what was printed. A tampered or truncated file, a copy from \
        another path (or sealed with another --identifier), an older copy put back (with --rollback-protection), a \
        file of sealed format 1 (without --format-1) or one sealed under another keychain's key fails with \
        errSecDecode (exit 93); a locked keychain exits 36 and changes nothing.
        """)
    @Option(name: .customShort("k"), help: "The keychain holding the class keys (default: the default keychain).") var keychain: String?
    @OptionGroup var binding: BindingOptions
    @Flag(name: .customLong("format-1"), help: "Also read files of sealed format 1 (earlier Keystones; only the file's name is bound). Seal the output again to upgrade.")
    var formatVersion1 = false
    @Argument(help: "The protected file.") var input: String
    @Argument(help: "Where to write the plaintext, or - for standard output.") var output: String

    mutating func run() throws {
        guard input != "-" else { throw UsageFailure(message: "keystone: unseal: INPUT must be a file: a protected file's path is authenticated") }
        let files = try protectedFiles(keychain, function: "unseal", rollbackProtection: binding.rollbackProtection,
                                       readsFormatVersion1: formatVersion1)
        let source = URL(fileURLWithPath: input)
        let identifier = binding.identifier
        try sealCall("unseal") {
            if output == "-" {
                try files.read(at: source, identifier: identifier, into: FileHandle.standardOutput)
            } else {
                try files.read(at: source, identifier: identifier, to: URL(fileURLWithPath: output))
            }
        }
    }
}
