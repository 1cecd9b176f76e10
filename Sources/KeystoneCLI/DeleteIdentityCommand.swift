#if !canImport(Darwin)
import ArgumentParser
import Foundation
import KeychainEngine
import KeychainServices
import SwiftASN1

// `security`'s `delete-identity` verb. Formats and rules follow Apple's SecurityTool sources
// (apple-open-source/macos, Security/SecurityTool/macOS/): keychain_delete.c.

struct DeleteIdentity: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-identity",
        abstract: "Delete a certificate and its private key.",
        discussion: "Found as delete-certificate finds it; a certificate without a private key is deleted alone.")
    @OptionGroup var options: DeleteCertificateOptions

    mutating func run() throws { try options.delete(withKey: true) }
}
#endif
