// Linux-only: a private PKI made by the openssl binary (`openssl ca`, every date fixed), for the trust policy tests.
#if !canImport(Darwin)
import Foundation
@testable import KeychainServices
import Testing

/// A root CA and an intermediate CA made by `openssl ca`, and leaves with the extensions a test asks for.
///
/// Every date is given (`-startdate`/`-enddate`), so nothing depends on today's date: evaluate at a fixed date.
struct OpenSSLPKI {
    enum KeyType {
        case p256
        case rsa(bits: Int)

        var arguments: [String] {
            switch self {
            case .p256: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]
            case .rsa(let bits): ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:\(bits)"]
            }
        }
    }

    /// The extensions of a CA certificate.
    static let caExtensions = ["basicConstraints=critical,CA:TRUE", "keyUsage=critical,keyCertSign,cRLSign"]

    let workspace: OpenSSLWorkspace
    let keyType: KeyType
    private(set) var counter = 0

    /// A root "OpenSSL Test Root CA" and an intermediate under it, valid 2015 to 2040.
    ///
    /// - Parameter intermediateExtensions: The intermediate's extensions (a CA's by default).
    init(keyType: KeyType = .p256, intermediateExtensions: [String] = OpenSSLPKI.caExtensions) throws {
        workspace = try OpenSSLWorkspace()
        self.keyType = keyType
        try workspace.write("ca.cnf", """
            [ca]
            default_ca = test_ca
            [test_ca]
            database = index.txt
            new_certs_dir = .
            serial = serial
            default_md = sha256
            policy = anything
            unique_subject = no
            copy_extensions = none
            email_in_dn = no
            [anything]
            commonName = supplied

            """)
        try workspace.write("index.txt", "")
        try workspace.write("serial", "01\n")
        try makeKey("root")
        try request("root", subject: "OpenSSL Test Root CA")
        try sign("root", issuer: nil, extensions: Self.caExtensions, from: "20150101000000Z", to: "20400101000000Z", digest: "sha256")
        try makeKey("intermediate")
        try request("intermediate", subject: "OpenSSL Test Intermediate CA")
        try sign("intermediate", issuer: "root", extensions: intermediateExtensions, from: "20150101000000Z", to: "20400101000000Z", digest: "sha256")
    }

    var root: SecCertificate { get throws { try certificate("root") } }
    var intermediate: SecCertificate { get throws { try certificate("intermediate") } }

    /// A leaf issued by the intermediate (or by `issuer`), subject CN `commonName`, with `extensions` (openssl's
    /// x509v3 configuration lines), valid from `from` to `to` (openssl's `YYYYMMDDHHMMSSZ`).
    mutating func leaf(_ commonName: String = "localhost", extensions: [String], from: String = "20250101000000Z",
                       to: String = "20270101000000Z", digest: String = "sha256", issuer: String = "intermediate",
                       keyType: KeyType? = nil) throws -> SecCertificate {
        counter += 1
        let name = "leaf\(counter)"
        try makeKey(name, keyType: keyType)
        try request(name, subject: commonName)
        try sign(name, issuer: issuer, extensions: extensions, from: from, to: to, digest: digest)
        return try certificate(name)
    }

    /// The DER of `name`.pem.
    func der(_ name: String) throws -> Data {
        try OpenSSL.run(["x509", "-in", "\(name).pem", "-outform", "DER"], in: workspace.directory)
    }

    func certificate(_ name: String) throws -> SecCertificate {
        try #require(SecCertificateCreateWithData(nil, try der(name) as NSData), "\(name).pem is not a certificate SecCertificate can hold")
    }

    func makeKey(_ name: String, keyType: KeyType? = nil) throws {
        try OpenSSL.run(["genpkey"] + (keyType ?? self.keyType).arguments + ["-out", "\(name).key"], in: workspace.directory)
    }

    func request(_ name: String, subject: String) throws {
        try OpenSSL.run(["req", "-new", "-key", "\(name).key", "-subj", "/CN=\(subject)", "-out", "\(name).csr"], in: workspace.directory)
    }

    /// `openssl ca`: signs `request`.csr (`name`.csr by default) with `issuer`'s key (the request's own key when
    /// nil: self-signed), writing `name`.pem.
    func sign(_ name: String, issuer: String?, extensions: [String], from: String, to: String, digest: String,
              request: String? = nil) throws {
        let request = request ?? name
        try workspace.write("\(name).ext", extensions.joined(separator: "\n") + "\n")
        var arguments = ["ca", "-batch", "-config", "ca.cnf", "-in", "\(request).csr", "-out", "\(name).pem", "-notext",
                         "-startdate", from, "-enddate", to, "-extfile", "\(name).ext", "-md", digest]
        if let issuer {
            arguments += ["-cert", "\(issuer).pem", "-keyfile", "\(issuer).key"]
        } else {
            arguments += ["-selfsign", "-keyfile", "\(request).key"]
        }
        try OpenSSL.run(arguments, in: workspace.directory)
    }

    func remove() { workspace.remove() }
}
#endif
