import ArgumentParser
import Foundation
import KeychainEngine
import Keystone

// `keystone seal` / `keystone unseal`: Keystone's protected files (the sealed format, ProtectedFiles in Keystone)
// from the command line, with the class keys in a keychain.
//
// Decisions: the sealed file's name is authenticated, so the sealed side is always a named file: `-` (standard
// input / output) is accepted only for the plaintext side (seal's INPUT, unseal's OUTPUT). Unsealing to a file is
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
func protectedFiles(_ keychain: String?, function: String) throws -> ProtectedFiles {
    let spec = keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain
    let engine = KeychainEngine(storage: try openStorage(spec, function: function))
    return try sealCall(function) { try ProtectedFiles(keychain: Keychain(store: engine)) }
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
        first use); OUTPUT's name is authenticated: renaming it makes it unreadable. OUTPUT is replaced atomically \
        and created with mode 0600. INPUT may be - (standard input). A locked keychain exits 36 and writes nothing.
        """)
    @Option(name: .customShort("k"), help: "The keychain holding the class keys (default: the default keychain).") var keychain: String?
    @Option(help: "When the file can be read: complete, complete-unless-open (can be sealed while locked after the first unlock), complete-until-first-user-authentication.")
    var protection: ProtectionArgument = .complete
    @Argument(help: "The file to protect, or - for standard input.") var input: String
    @Argument(help: "The protected file to write (not -: its name is authenticated).") var output: String

    mutating func run() throws {
        guard output != "-" else { throw UsageFailure(message: "keystone: seal: OUTPUT must be a file: a protected file's name is authenticated") }
        let files = try protectedFiles(keychain, function: "seal")
        let target = URL(fileURLWithPath: output)
        try sealCall("seal") {
            if input == "-" {
                try files.write(from: FileHandle.standardInput, to: target, protection: protection.protection)
            } else {
                try files.write(contentsOf: URL(fileURLWithPath: input), to: target, protection: protection.protection)
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
        output: on a failure (non-zero exit) discard what was printed. A tampered, truncated, renamed file or one \
        sealed under another keychain's key fails with errSecDecode; a locked keychain exits 36 and changes nothing.
        """)
    @Option(name: .customShort("k"), help: "The keychain holding the class keys (default: the default keychain).") var keychain: String?
    @Argument(help: "The protected file.") var input: String
    @Argument(help: "Where to write the plaintext, or - for standard output.") var output: String

    mutating func run() throws {
        guard input != "-" else { throw UsageFailure(message: "keystone: unseal: INPUT must be a file: a protected file's name is authenticated") }
        let files = try protectedFiles(keychain, function: "unseal")
        let source = URL(fileURLWithPath: input)
        try sealCall("unseal") {
            if output == "-" {
                try files.read(at: source, into: FileHandle.standardOutput)
            } else {
                try files.read(at: source, to: URL(fileURLWithPath: output))
            }
        }
    }
}
