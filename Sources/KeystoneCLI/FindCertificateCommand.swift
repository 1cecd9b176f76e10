#if !canImport(Darwin)
import ArgumentParser
import Foundation
import KeychainEngine
import KeychainServices
import SwiftASN1

// `security`'s `find-certificate` verb. Formats and rules follow Apple's SecurityTool sources
// (apple-open-source/macos, Security/SecurityTool/macOS/): keychain_find.c.

struct FindCertificate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-certificate",
        abstract: "Find certificates.",
        discussion: """
        -c matches a case-insensitive substring of the common name, -e an email address. Without -a only the \
        first match is shown; nothing found exits 44 (with -a, nothing found prints nothing and exits 0, as \
        security does). -Z prints "SHA-256 hash: …" and "SHA-1 hash: …" before each certificate, -m its email \
        addresses, -p the certificate as PEM instead of its attributes.
        """)
    @Flag(name: .customShort("a"), help: "Find all matching certificates, not just the first one.") var all = false
    @Option(name: .customShort("c"), help: "Match on name (a substring of the common name).") var name: String?
    @Option(name: .customShort("e"), help: "Match on an email address.") var email: String?
    @Flag(name: .customShort("m"), help: "Show the email addresses in the certificate.") var showEmail = false
    @Flag(name: .customShort("p"), help: "Output the certificate in PEM format.") var pem = false
    @Flag(name: .customShort("Z"), help: "Print the SHA-256 and SHA-1 hashes of the certificate.") var hash = false
    @Flag(help: "Print JSON (an array with -a).") var json = false
    @Argument(help: "Keychains to search (default: the search list).") var keychains: [String] = []

    mutating func run() throws {
        var matches = try CertificateStore.certificates(in: CertificateStore.paths(keychains)).filter { stored in
            if let email, !stored.emailAddresses.contains(where: { $0.caseInsensitiveCompare(email) == .orderedSame }) { return false }
            if let name, email == nil, !stored.nameMatches(name) { return false }  // with -e, security ignores -c
            return true
        }
        if !all { matches = Array(matches.prefix(1)) }
        if matches.isEmpty && !all {
            throw ToolFailure(function: email == nil ? "SecKeychainSearchCopyNext" : "SecCertificateFindByEmail", status: Status.itemNotFound)
        }
        if json {
            let objects = matches.map { certificateJSON($0, pem: pem) }
            printJSON(all ? objects as Any : objects[0] as Any)
            return
        }
        for stored in matches {
            var text = ""
            if hash { text += "SHA-256 hash: \(upperHex(stored.sha256))\nSHA-1 hash: \(upperHex(stored.sha1))\n" }
            if showEmail { text += "email addresses: \(stored.emailAddresses.joined(separator: ", "))\n" }
            text += pem ? pemBlock("CERTIFICATE", stored.der) : certificateBlock(stored)
            writeOut(text)
        }
    }
}
#endif
