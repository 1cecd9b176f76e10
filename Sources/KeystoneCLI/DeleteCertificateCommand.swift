#if !canImport(Darwin)
import ArgumentParser
import Foundation
import KeychainEngine
import KeychainServices
import SwiftASN1

// `security`'s `delete-certificate` verb. Formats and rules follow Apple's SecurityTool sources
// (apple-open-source/macos, Security/SecurityTool/macOS/): keychain_delete.c.

/// The options both delete verbs share (keychain_delete.c: `c:Z:t`).
struct DeleteCertificateOptions: ParsableArguments {
    @Option(name: .customShort("c"), help: "Name of the certificate (a substring of its common name).") var name: String?
    @Option(name: .customShort("Z"), help: "SHA-1 (or SHA-256) hash of the certificate, in hexadecimal.") var hash: String?
    @Flag(name: .customShort("t"), help: "Also delete user trust settings (accepted: Keystone keeps no trust settings).") var trust = false
    @Argument(help: "Keychains to search (default: the search list).") var keychains: [String] = []

    func validate() throws {
        if name == nil && hash == nil { throw ValidationError("give -c name or -Z hash") }
    }

    /// Deletes the unique matching certificate; with `withKey`, its private key first (none is no error).
    func delete(withKey: Bool) throws {
        let stored = try CertificateStore.unique(in: CertificateStore.paths(keychains), name: name, hash: hash)
        let engine = KeychainEngine(storage: try openStorage(stored.keychain))
        if withKey, let hash = stored.attributes[Key.publicKeyHash]?.dataValue {
            do {
                try engine.delete([Key.class: .string(ItemClass.key.rawValue), Key.applicationLabel: .data(hash), Key.keyClass: .number(1)])
            } catch let error as EngineError where error.status == Status.itemNotFound {
                // No private key: deleting the certificate is still a success (as security does).
            } catch let error as EngineError {
                throw ToolFailure(function: "SecKeychainItemDelete", status: error.status, reason: error.reason)
            }
        }
        try call("SecKeychainItemDelete") {
            try engine.delete([Key.class: .string(ItemClass.certificate.rawValue), Key.valuePersistentRef: .data(stored.reference)])
        }
    }
}

struct DeleteCertificate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-certificate",
        abstract: "Delete a certificate.",
        discussion: """
        The certificate is found by -Z hash, else by -c name (a case-insensitive substring of the common name, an \
        exact match preferred); a name matching several certificates is refused (exit 1), nothing found exits 44. \
        Its private key stays (delete-identity deletes both).
        """)
    @OptionGroup var options: DeleteCertificateOptions

    mutating func run() throws { try options.delete(withKey: false) }
}
#endif
