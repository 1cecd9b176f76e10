import ArgumentParser
import Foundation

// `keystone verify-cert`: macOS `security verify-cert` (SecurityTool's verify_cert.c) over KeychainServices'
// SecTrust. Linux-only, as the certificate verbs are (on Apple platforms `security` itself has it).
#if canImport(Darwin)
var trustVerbs: [any ParsableCommand.Type] { [] }
#else
import KeychainServices

var trustVerbs: [any ParsableCommand.Type] { [VerifyCertificate.self] }

struct VerifyCertificate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-cert",
        abstract: "Verify a certificate chain (PEM or DER files) against the system's roots or given anchors.",
        discussion: """
        As macOS `security verify-cert`: -c gives the leaf, then intermediates (repeatable; a PEM file may hold \
        several certificates, taken in order); -r gives anchors (repeatable), which then replace the system's roots \
        (the CA bundle of /etc/ssl/certs, or SSL_CERT_FILE / SSL_CERT_DIR); with -r alone and no -c, that one root \
        is verified. -p ssl checks the -s host name (a DNS name or an IP address); -p basic (the default) checks \
        the path only. -d sets the verification date (YYYY-MM-DD[-hh:mm:ss] in GMT, or ISO 8601). \
        On success prints `...certificate verification successful.` and exits 0; on failure prints \
        `Cert Verify Result: <CSSM error>` on standard error (CSSMERR_TP_NOT_TRUSTED, CSSMERR_TP_CERT_EXPIRED for an \
        expired or not yet valid certificate, CSSMERR_APPLETP_HOSTNAME_MISMATCH) and exits 1; -v adds SecTrust's message. \
        Usage errors exit 2. No revocation checking and no network: -L and -n are accepted and change nothing.
        """)

    @Option(name: .customShort("c"), help: "A certificate file: the leaf first, then intermediates (repeatable).") var certificateFiles: [String] = []
    @Option(name: .customShort("r"), help: "An anchor (root) certificate file (repeatable).") var rootFiles: [String] = []
    @Option(name: .customShort("p"), help: "The policy: ssl or basic (default basic).") var policy = "basic"
    @Option(name: .customShort("s"), help: "The SSL host name (with -p ssl).") var host: String?
    @Option(name: .customShort("d"), help: "The verification date: YYYY-MM-DD[-hh:mm:ss] (GMT) or ISO 8601.") var date: String?
    @Flag(name: .customShort("L"), help: "Local certificates only (accepted: nothing is fetched anyway).") var localOnly = false
    @Flag(name: .customShort("n"), help: "Search no keychains (accepted: keychains are never searched).") var noKeychains = false
    @Flag(name: .customShort("q"), help: "Quiet: print nothing, exit status only.") var quiet = false
    @Flag(name: .customShort("v"), help: "Verbose: also print SecTrust's message on failure.") var verbose = false

    mutating func run() throws {
        guard ["ssl", "basic"].contains(policy) else {
            throw UsageFailure(message: "keystone: verify-cert: unknown policy \"\(policy)\" (ssl or basic)")
        }
        var verifyDate: Date?
        if let date {
            guard let parsed = Self.parseDate(date) else {
                throw UsageFailure(message: "keystone: verify-cert: -d takes YYYY-MM-DD[-hh:mm:ss] (GMT) or an ISO 8601 date, not \"\(date)\"")
            }
            verifyDate = parsed
        }
        var certificates = try certificateFiles.flatMap(Self.readCertificates)
        let roots = try rootFiles.flatMap(Self.readCertificates)
        if certificates.isEmpty {
            // security: with no -c, exactly one -r is the certificate to verify (and its own anchor).
            guard !roots.isEmpty else { throw UsageFailure(message: "***No certs specified.") }
            guard roots.count == 1 else { throw UsageFailure(message: "***Multiple roots and no certs not allowed.") }
            certificates = roots
        }
        let secPolicy = policy == "ssl" ? SecPolicyCreateSSL(true, host as CFString?) : SecPolicyCreateBasicX509()
        var created: SecTrust?
        let status = SecTrustCreateWithCertificates(certificates as NSArray, secPolicy, &created)
        guard status == errSecSuccess, let trust = created else {
            throw MessageFailure(message: "SecTrustCreateWithCertificates: \(status)", exitCode: 1)
        }
        if !roots.isEmpty { _ = SecTrustSetAnchorCertificates(trust, roots as NSArray) }
        if let verifyDate { _ = SecTrustSetVerifyDate(trust, verifyDate as NSDate) }

        var error: CFError?
        if SecTrustEvaluateWithError(trust, &error) {
            if !quiet { writeOut("...certificate verification successful.\n") }
            return
        }
        if !quiet, let error {
            var text = "Cert Verify Result: \(Self.cssmName(error))\n"
            if verbose { text += CFErrorCopyDescription(error) + "\n" }
            writeErr(text)
        }
        throw ExitCode(1)
    }

    /// The CSSM result code name `security` prints (`cssmPerror`) for SecTrust's error.
    static func cssmName(_ error: CFError) -> String {
        switch OSStatus(CFErrorGetCode(error)) {
        // The CSSM codes of Apple's SecPolicyChecks.list: temporal validity (expired or not yet valid alike) is
        // CSSMERR_TP_CERT_EXPIRED; an untrusted root and a missing intermediate are both CSSMERR_TP_NOT_TRUSTED.
        case errSecCertificateExpired: return "CSSMERR_TP_CERT_EXPIRED"
        case errSecHostNameMismatch: return "CSSMERR_APPLETP_HOSTNAME_MISMATCH"
        case errSecNotTrusted, errSecCreateChainFailed: return "CSSMERR_TP_NOT_TRUSTED"
        case errSecInvalidExtendedKeyUsage: return "CSSMERR_APPLETP_INVALID_EXTENDED_KEY_USAGE"
        case errSecInvalidDigestAlgorithm: return "CSSMERR_CSP_ALGID_MISMATCH"
        case errSecCertificateValidityPeriodTooLong: return "CSSMERR_TP_CERT_SUSPENDED"
        default: return "CSSMERR_TP_INVALID_CERTIFICATE"
        }
    }

    /// The certificates of a PEM file (every CERTIFICATE block, in order) or a DER file.
    ///
    /// - Throws: ``MessageFailure`` (exit 1, as security's readCertFile failure) when the file cannot be read or
    ///   holds no certificate.
    static func readCertificates(_ path: String) throws -> [SecCertificate] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw MessageFailure(message: "keystone: verify-cert: \(path): cannot read the file", exitCode: 1)
        }
        var ders: [Data] = []
        if let text = String(data: data, encoding: .utf8), text.contains("-----BEGIN CERTIFICATE-----") {
            for block in text.components(separatedBy: "-----BEGIN CERTIFICATE-----").dropFirst() {
                guard let end = block.range(of: "-----END CERTIFICATE-----") else { continue }
                let base64 = block[..<end.lowerBound].filter { !$0.isWhitespace }
                if let der = Data(base64Encoded: String(base64)) { ders.append(der) }
            }
        } else {
            ders = [data]
        }
        let certificates = ders.compactMap { SecCertificateCreateWithData(nil, $0 as NSData) }
        guard !certificates.isEmpty, certificates.count == ders.count else {
            throw MessageFailure(message: "keystone: verify-cert: \(path): not a PEM or DER certificate", exitCode: 1)
        }
        return certificates
    }

    /// `security`'s -d form (YYYY-MM-DD or YYYY-MM-DD-hh:mm:ss, GMT), or an ISO 8601 date and time.
    static func parseDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        for format in ["yyyy-MM-dd-HH:mm:ss", "yyyy-MM-dd"] {
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return ISO8601DateFormatter().date(from: text)
    }
}
#endif
