#if !canImport(Darwin)
import ArgumentParser
import Foundation
import KeychainEngine
import KeychainServices
import SwiftASN1

// `security`'s `find-identity` verb. Formats and rules follow Apple's SecurityTool sources
// (apple-open-source/macos, Security/SecurityTool/macOS/): identity_find.m.

struct FindIdentity: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-identity",
        abstract: "Find identities (certificates with their private keys).",
        discussion: """
        Lists each identity as `  1) <SHA-1 of the certificate> "<subject summary>"`, then `N identities found` \
        and, for the valid ones, `N valid identities found`. Keystone does not evaluate trust: a valid identity is \
        one whose certificate is within its validity dates now; others show (CSSMERR_TP_CERT_EXPIRED) or \
        (CSSMERR_TP_CERT_NOT_VALID_YET). -p only names the policy printed; -s keeps identities whose common \
        name, subject summary or email address contains the string.
        """)
    @Option(name: .customShort("p"), help: "Policy: ssl-client, ssl-server, smime, eap, ipsec, ichat, codesigning, basic (default), macappstore, appleID.") var policies: [String] = []
    @Option(name: .customShort("s"), help: "Policy-specific string (a host name or email address): kept when a name contains it.") var string: String?
    @Flag(name: .customShort("v"), help: "Show valid identities only.") var validOnly = false
    @Argument(help: "Keychains to search (default: the search list).") var keychains: [String] = []

    static let policyNames: [String: String] = [
        "ssl-client": "SSL (client)", "ssl-server": "SSL (server)", "smime": "S/MIME", "eap": "EAP", "ipsec": "IPsec",
        "ichat": "iChat", "codesigning": "Code Signing", "basic": "X.509 Basic", "macappstore": "Mac App Store Receipt",
        "appleID": "AppleID Sharing",
    ]

    func validate() throws {
        for policy in policies where Self.policyNames[policy] == nil {
            throw ValidationError("unknown policy \(policy): -p takes \(Self.policyNames.keys.sorted().joined(separator: ", "))")
        }
    }

    mutating func run() throws {
        let identities = try Self.identities(in: CertificateStore.paths(keychains)).filter { stored in
            guard let string else { return true }
            let names = [stored.commonName, stored.subjectSummary].compactMap { $0 } + stored.emailAddresses
            return names.contains { $0.range(of: string, options: .caseInsensitive) != nil }
        }
        var text = ""
        if let string { text += "Looking for identities matching \"\(string)\"\n" }
        let order = ["ssl-client", "ssl-server", "smime", "eap", "ipsec", "ichat", "codesigning", "basic", "appleID", "macappstore"]
        let chosen = policies.isEmpty ? ["basic"] : order.filter { policies.contains($0) }
        for policy in chosen {
            if !validOnly {
                text += "\nPolicy: \(Self.policyNames[policy]!)\n  Matching identities\n"
                for (index, stored) in identities.enumerated() { text += Self.line(index + 1, stored) }
                text += "     \(identities.count) identities found\n\n  Valid identities only\n"
            }
            let valid = identities.filter(\.isWithinValidity)
            for (index, stored) in valid.enumerated() { text += Self.line(index + 1, stored) }
            text += "     \(valid.count) valid identities found\n"
        }
        writeOut(text)
    }

    /// `printIdentity` (identity_find.m): `%3d) ` the SHA-1 in upper-case hex, the label in quotes, and the
    /// trust result in parentheses when it is not valid.
    static func line(_ ordinal: Int, _ stored: StoredCertificate) -> String {
        var line = String(format: "%3d) ", ordinal) + upperHex(stored.sha1) + " \"\(stored.subjectSummary ?? "<unknown>")\""
        if let validity = stored.validity, !stored.isWithinValidity {
            line += validity.notAfter < Date() ? " (CSSMERR_TP_CERT_EXPIRED)" : " (CSSMERR_TP_CERT_NOT_VALID_YET)"
        }
        return line + "\n"
    }

    /// The certificates that have a private key (`klbl` = the certificate's `pkhh`) in the same keychain.
    static func identities(in paths: [String]) throws -> [StoredCertificate] {
        var found: [StoredCertificate] = []
        for path in paths {
            let engine = KeychainEngine(storage: try openStorage(path))
            let query: KeychainQuery = [Key.class: .string(ItemClass.identity.rawValue), Key.matchLimit: .string(Key.matchLimitAll),
                                        Key.returnData: .bool(true)]
            let result: ItemResult?
            do { result = try engine.copyMatching(query) } catch let error as EngineError where error.status == Status.itemNotFound {
                continue
            } catch let error as EngineError {
                throw ToolFailure(function: "SecIdentitySearchCopyNext", status: error.status, reason: error.reason)
            }
            let identityCertificates = Set((result?.array ?? []).compactMap(\.data))
            found += try CertificateStore.certificates(in: [path]).filter { identityCertificates.contains($0.der) }
        }
        return found
    }
}
#endif
