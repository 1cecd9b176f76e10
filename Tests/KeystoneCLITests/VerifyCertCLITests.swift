// Linux-only: `keystone verify-cert` over certificates made in the test with swift-certificates.
#if !canImport(Darwin)
import Crypto
import Foundation
import SwiftASN1
import Testing
import X509

/// A private CA, an intermediate and leaves, written as PEM files; every date fixed (verification dates are passed
/// with -d, and -attime to openssl).
struct VerifyCertFiles {
    let box = Sandbox()
    var work: URL { box.root.appendingPathComponent("work") }
    func path(_ name: String) -> String { work.appendingPathComponent(name).path }

    static func date(_ year: Int) -> Date {
        var components = DateComponents()
        (components.year, components.month, components.day) = (year, 6, 1)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.date(from: components)!
    }

    /// The date the valid leaf is valid at, in security's -d form and as openssl's -attime.
    static let verifyDate = "2026-06-01"
    static let attime = String(Int(date(2026).timeIntervalSince1970))

    init() throws {
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let rootKey = P256.Signing.PrivateKey(), intermediateKey = P256.Signing.PrivateKey()
        let rootName = try DistinguishedName { CommonName("CLI Test Root CA") }
        let intermediateName = try DistinguishedName { CommonName("CLI Test Intermediate CA") }
        func ca(_ subject: DistinguishedName, _ key: P256.Signing.PrivateKey, issuer: DistinguishedName, _ issuerKey: P256.Signing.PrivateKey) throws -> Certificate {
            try Certificate(version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
                            notValidBefore: Self.date(2020), notValidAfter: Self.date(2040), issuer: issuer, subject: subject,
                            signatureAlgorithm: .ecdsaWithSHA256,
                            extensions: try Certificate.Extensions {
                                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                            }, issuerPrivateKey: .init(issuerKey))
        }
        func leaf(_ host: String, from: Int, to: Int, usage: ExtendedKeyUsage.Usage = .serverAuth) throws -> Certificate {
            let key = P256.Signing.PrivateKey()
            return try Certificate(version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
                                   notValidBefore: Self.date(from), notValidAfter: Self.date(to), issuer: intermediateName,
                                   subject: try DistinguishedName { CommonName(host) }, signatureAlgorithm: .ecdsaWithSHA256,
                                   extensions: try Certificate.Extensions {
                                       Critical(BasicConstraints.notCertificateAuthority)
                                       Critical(KeyUsage(digitalSignature: true))
                                       try ExtendedKeyUsage([usage])
                                       SubjectAlternativeNames([.dnsName(host)])
                                   }, issuerPrivateKey: .init(intermediateKey))
        }
        try write("root.pem", ca(rootName, rootKey, issuer: rootName, rootKey))
        try write("intermediate.pem", ca(intermediateName, intermediateKey, issuer: rootName, rootKey))
        try write("leaf.pem", leaf("localhost", from: 2025, to: 2027))
        try write("expired.pem", leaf("localhost", from: 2021, to: 2022))
        try write("future.pem", leaf("localhost", from: 2090, to: 2091))
        try write("other.pem", leaf("other.example", from: 2025, to: 2027))
        try write("client.pem", leaf("localhost", from: 2025, to: 2027, usage: .clientAuth))
        var serializer = DER.Serializer()
        try serializer.serialize(try leaf("localhost", from: 2025, to: 2027))
        try Data(serializer.serializedBytes).write(to: work.appendingPathComponent("leaf.der"))
    }

    func write(_ name: String, _ certificate: Certificate) throws {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        let base64 = Data(serializer.serializedBytes).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        try Data("-----BEGIN CERTIFICATE-----\n\(base64)\n-----END CERTIFICATE-----\n".utf8).write(to: work.appendingPathComponent(name))
    }

    func verify(_ arguments: String...) throws -> Run {
        try box.run(["verify-cert"] + arguments)
    }
}

@Suite("keystone verify-cert: security verify-cert's options, output and exit codes")
struct VerifyCertCLITests {
    @Test("a valid chain for the host verifies: security's success line, exit 0; -q prints nothing")
    func success() throws {
        let files = try VerifyCertFiles()
        let run = try files.verify("-c", files.path("leaf.pem"), "-c", files.path("intermediate.pem"), "-r", files.path("root.pem"),
                                   "-p", "ssl", "-s", "localhost", "-d", VerifyCertFiles.verifyDate, "-L")
        #expect(run.status == 0 && run.stdout == "...certificate verification successful.\n" && run.stderr.isEmpty)
        let quiet = try files.verify("-q", "-c" + files.path("leaf.pem"), "-c", files.path("intermediate.pem"),
                                     "-r", files.path("root.pem"), "-d", VerifyCertFiles.verifyDate)
        #expect(quiet.status == 0 && quiet.stdout.isEmpty && quiet.stderr.isEmpty)
    }

    @Test("failures print security's Cert Verify Result line and exit 1", arguments: [
        ("other.pem", ["-p", "ssl", "-s", "localhost"], "CSSMERR_APPLETP_HOSTNAME_MISMATCH"),
        ("expired.pem", ["-p", "ssl", "-s", "localhost"], "CSSMERR_TP_CERT_EXPIRED"),
        // Apple's TemporalValidity check has one CSSM code for both.
        ("future.pem", ["-p", "basic"], "CSSMERR_TP_CERT_EXPIRED"),
        // A client certificate of the same CA is not a server's (Apple's SSL policy checks extended key usage).
        ("client.pem", ["-p", "ssl", "-s", "localhost"], "CSSMERR_APPLETP_INVALID_EXTENDED_KEY_USAGE"),
    ])
    func failures(leaf: String, policy: [String], result: String) throws {
        let files = try VerifyCertFiles()
        let run = try files.box.run(["verify-cert", "-c", files.path(leaf), "-c", files.path("intermediate.pem"),
                                     "-r", files.path("root.pem"), "-d", VerifyCertFiles.verifyDate] + policy)
        #expect(run.status == 1 && run.stdout.isEmpty)
        #expect(run.stderr == "Cert Verify Result: \(result)\n")
    }

    @Test("without the intermediate, or against another root, the chain is not trusted; -v adds SecTrust's message")
    func notTrusted() throws {
        let files = try VerifyCertFiles()
        let run = try files.verify("-v", "-c", files.path("leaf.pem"), "-r", files.path("root.pem"), "-d", VerifyCertFiles.verifyDate)
        #expect(run.status == 1)
        #expect(run.stderr == "Cert Verify Result: CSSMERR_TP_NOT_TRUSTED\n“localhost” certificate is not trusted\n")
        let wrongRoot = try files.verify("-c", files.path("leaf.pem"), "-c", files.path("intermediate.pem"),
                                         "-r", files.path("other.pem"), "-d", VerifyCertFiles.verifyDate)
        #expect(wrongRoot.status == 1 && wrongRoot.stderr == "Cert Verify Result: CSSMERR_TP_NOT_TRUSTED\n")
    }

    @Test("a DER leaf is read too; a root alone verifies itself; usage errors exit 2")
    func inputsAndUsage() throws {
        let files = try VerifyCertFiles()
        #expect(try files.verify("-c", files.path("leaf.der"), "-c", files.path("intermediate.pem"), "-r", files.path("root.pem"),
                                 "-d", "2026-06-01-12:00:00").status == 0)
        #expect(try files.verify("-r", files.path("root.pem"), "-d", "2026-06-01T00:00:00Z").status == 0)
        let none = try files.verify("-p", "ssl")
        #expect(none.status == 2 && none.stderr.contains("No certs specified"))
        #expect(try files.verify("-c", files.path("leaf.pem"), "-p", "smime").status == 2)
        #expect(try files.verify("-c", files.path("leaf.pem"), "-d", "yesterday").status == 2)
        let missing = try files.verify("-c", files.path("missing.pem"))
        #expect(missing.status == 1 && missing.stderr.contains("missing.pem"))
    }

    @Test("keystone and openssl verify -CAfile agree on the same files", .enabled(if: OpenSSL.available, "openssl is not installed"),
          arguments: ["leaf.pem", "expired.pem", "future.pem", "other.pem"])
    func agreesWithOpenSSL(leaf: String) throws {
        let files = try VerifyCertFiles()
        let keystone = try files.verify("-c", files.path(leaf), "-c", files.path("intermediate.pem"), "-r", files.path("root.pem"),
                                        "-p", "ssl", "-s", "localhost", "-d", VerifyCertFiles.verifyDate)
        let openssl = try OpenSSL.run(["verify", "-CAfile", "root.pem", "-untrusted", "intermediate.pem",
                                       "-attime", VerifyCertFiles.attime, "-verify_hostname", "localhost", leaf], in: files.work)
        #expect((keystone.status == 0) == (openssl.status == 0), "openssl: \(openssl.stdout) \(openssl.stderr)")
        #expect((keystone.status == 0) == (leaf == "leaf.pem"))
    }
}
#endif
