// Linux-only: SecCertificate against certificates made, and read, by the real openssl.
#if !canImport(Darwin)
import Foundation
@testable import KeychainServices
import Testing

/// A certificate to make with `openssl req -x509`.
struct CertificateSpec: Sendable, CustomTestStringConvertible {
    enum Key: Sendable { case ec, rsa }

    let testDescription: String
    let key: Key
    /// openssl's `string_mask`: `utf8only` (UTF8String) or `default` (PrintableString where it can, else T61String).
    let stringMask: String
    /// `-subj`, `/`-separated; `+` joins the attributes of one multi-valued RDN.
    let subject: String
    let subjectAltName: String?
    let serial: String
    /// What Apple's rule makes of the subject (also computed from openssl's output in the test).
    let summary: String

    static let all: [CertificateSpec] = [
        .init(testDescription: "EC, one common name, small serial", key: .ec, stringMask: "utf8only",
              subject: "/CN=Simple Example", subjectAltName: nil, serial: "0x01", summary: "Simple Example"),
        .init(testDescription: "RSA, emailAddress and SAN emails, 20-octet serial with the high bit set", key: .rsa,
              stringMask: "utf8only", subject: "/C=US/O=Example Org/CN=Alice/emailAddress=alice@example.com",
              subjectAltName: "email:alice.work@example.com,DNS:alice.example.com,email:alice.home@example.com",
              serial: "0x8F0102030405060708090A0B0C0D0E0F10111213", summary: "Alice"),
        .init(testDescription: "EC, PrintableStrings, a multi-valued RDN, two CNs, a T61String Zoë", key: .ec,
              stringMask: "default", subject: "/C=us/O=  acme   corp /CN=Zoë+OU=unit/CN=second/emailAddress=subj@example.com",
              subjectAltName: "email:san@example.com", serial: "0xC0FFEE", summary: "second, Zoë"),
        .init(testDescription: "EC, UTF-8 common name Zoë", key: .ec, stringMask: "utf8only",
              subject: "/O=Ünïcödé GmbH/CN=Zoë", subjectAltName: nil, serial: "0x7F", summary: "Zoë"),
        .init(testDescription: "RSA, no common name: the organizational units", key: .rsa, stringMask: "default",
              subject: "/C=DE/O=Org One/OU=Unit A/OU=Unit B", subjectAltName: nil, serial: "0x1234", summary: "Unit B, Unit A"),
        .init(testDescription: "EC, only a country and an emailAddress", key: .ec, stringMask: "default",
              subject: "/C=FR/emailAddress=only@example.com", subjectAltName: nil, serial: "0x80", summary: "only@example.com, FR"),
        .init(testDescription: "EC, empty subject: the SAN email", key: .ec, stringMask: "utf8only",
              subject: "/", subjectAltName: "DNS:host.example.com,email:only.san@example.com", serial: "0x02",
              summary: "only.san@example.com"),
    ]
}

/// A certificate openssl made, with what openssl prints of it.
struct OpenSSLCertificate: Sendable {
    let spec: CertificateSpec
    let der: Data
    /// The subject's attributes in encoded order, as `(short name, UTF-8 value)`.
    let attributes: [[String]]
    /// `-serial`'s hex digits.
    let serialHex: String
    /// `-email`'s lines (openssl lists the subject's before the SAN's).
    let emails: [String]
    /// The DER SubjectPublicKeyInfo (`x509 -pubkey | pkey -pubin -outform DER`).
    let spki: Data
    /// The key bits Apple hashes for `kSecAttrPublicKeyHash`: the EC point, or the PKCS#1 RSAPublicKey DER.
    let keyBits: Data
    /// SHA-1 of `keyBits` (`openssl dgst -sha1 -binary`).
    let keyBitsSHA1: Data
    /// The SubjectKeyIdentifier extension's octets (`-ext subjectKeyIdentifier`).
    let subjectKeyID: Data?
    /// The subject's DER (tag, length and content), cut from `openssl asn1parse`'s offsets.
    let subjectDER: Data
    /// The X.509 version, 1 or 3: whether the TBSCertificate starts with `[0] version`.
    let version: Int

    static func make(_ spec: CertificateSpec, in directory: URL) throws -> OpenSSLCertificate {
        let name = UUID().uuidString
        let config = "\(name).cnf", certificate = "\(name).der", key = "\(name).key", spkiFile = "\(name).spki"
        try Data("[req]\ndistinguished_name = dn\nstring_mask = \(spec.stringMask)\n[dn]\n".utf8)
            .write(to: directory.appendingPathComponent(config))
        var arguments = ["req", "-x509", "-nodes", "-days", "2", "-config", config, "-utf8", "-multivalue-rdn",
                         "-subj", spec.subject, "-set_serial", spec.serial, "-keyout", key, "-out", certificate, "-outform", "DER"]
        switch spec.key {
        case .ec: arguments += ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
        case .rsa: arguments += ["-newkey", "rsa:2048"]
        }
        if let san = spec.subjectAltName { arguments += ["-addext", "subjectAltName=\(san)"] }
        try OpenSSL.run(arguments, in: directory)
        let x509 = ["x509", "-inform", "DER", "-in", certificate, "-noout"]

        // `sep_multiline` prints one RDN a line, in encoded order; `utf8` prints every string type as UTF-8.
        let subjectText = try OpenSSL.text(x509 + ["-subject", "-nameopt", "utf8,sep_multiline,sname"], in: directory)
        let attributes = subjectText.split(separator: "\n", omittingEmptySubsequences: false).dropFirst()
            .filter { $0.hasPrefix("    ") && $0.count > 4 }
            .flatMap { $0.dropFirst(4).components(separatedBy: " + ") }
            .map { pair -> [String] in
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                return [String(parts[0]), String(parts[1])]
            }
        let serialHex = try OpenSSL.text(x509 + ["-serial"], in: directory)
            .trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "serial=", with: "")
        let emails = try OpenSSL.text(x509 + ["-email"], in: directory).split(separator: "\n").map(String.init)

        try OpenSSL.run(["x509", "-inform", "DER", "-in", certificate, "-noout", "-pubkey", "-out", "\(spkiFile).pem"], in: directory)
        let spki = try OpenSSL.run(["pkey", "-pubin", "-in", "\(spkiFile).pem", "-outform", "DER"], in: directory)
        let keyBits: Data
        switch spec.key {
        case .ec: keyBits = spki.suffix(65)  // a P-256 SPKI ends with its 65-octet uncompressed point
        case .rsa: keyBits = try OpenSSL.run(["rsa", "-pubin", "-in", "\(spkiFile).pem", "-RSAPublicKey_out", "-outform", "DER"], in: directory)
        }
        try keyBits.write(to: directory.appendingPathComponent("\(name).bits"))
        let keyBitsSHA1 = try OpenSSL.run(["dgst", "-sha1", "-binary", "\(name).bits"], in: directory)

        let extensionText = try OpenSSL.text(x509 + ["-ext", "subjectKeyIdentifier"], in: directory)
        let subjectKeyID = extensionText.split(separator: "\n").dropFirst().first.map { line in
            Data(line.trimmingCharacters(in: .whitespaces).split(separator: ":").map { UInt8($0, radix: 16)! })
        }

        // The TBSCertificate's children are the `d=2` lines: [0] version, serial, signature, issuer, validity, subject.
        let der = try Data(contentsOf: directory.appendingPathComponent(certificate))
        let structure = try OpenSSL.text(["asn1parse", "-inform", "DER", "-in", certificate], in: directory)
        let depthTwo = structure.split(separator: "\n").filter { $0.contains(":d=2 ") }
        let version = depthTwo[0].contains("cont [ 0 ]") ? 3 : 1  // openssl makes v1 without extensions, v3 with
        let subjectLine = depthTwo[version == 3 ? 5 : 4]
        let numbers = subjectLine.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        // "  197:d=2  hl=2 l= 115 cons: SEQUENCE": offset, depth, header length, content length.
        let (offset, header, length) = (numbers[0], numbers[2], numbers[3])
        let subjectDER = der[offset..<(offset + header + length)]

        return OpenSSLCertificate(spec: spec, der: der, attributes: attributes, serialHex: serialHex, emails: emails,
                                  spki: spki, keyBits: keyBits, keyBitsSHA1: keyBitsSHA1, subjectKeyID: subjectKeyID,
                                  subjectDER: Data(subjectDER), version: version)
    }

    /// The values of one attribute type, in encoded order.
    func values(_ type: String) -> [String] {
        attributes.filter { $0[0] == type }.map { $0[1] }
    }
}

/// The certificates of `CertificateSpec.all`, made once per test run.
let openSSLCertificates: Result<[String: OpenSSLCertificate], any Error> = Result {
    guard OpenSSL.isAvailable else { return [:] }
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-certificates-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    var made: [String: OpenSSLCertificate] = [:]
    for spec in CertificateSpec.all { made[spec.testDescription] = try OpenSSLCertificate.make(spec, in: directory) }
    return made
}

func openSSLCertificate(_ spec: CertificateSpec) throws -> (OpenSSLCertificate, SecCertificate) {
    let made = try #require(try openSSLCertificates.get()[spec.testDescription])
    let certificate = try #require(makeCertificate(made.der), "SecCertificateCreateWithData refused openssl's certificate")
    return (made, certificate)
}

@Suite("SecCertificate reads what openssl makes as openssl reads it", .enabled(if: OpenSSL.isAvailable, OpenSSL.missing))
struct SecCertificateOpenSSLTests {
    @Test("parses and gives back the DER byte for byte", arguments: CertificateSpec.all)
    func roundTrips(_ spec: CertificateSpec) throws {
        let (made, certificate) = try openSSLCertificate(spec)
        #expect(SecCertificateCopyData(certificate) as Data == made.der)
    }

    @Test("the common name is the last CN openssl prints in encoded order; none gives errSecInternal",
          arguments: CertificateSpec.all)
    func commonName(_ spec: CertificateSpec) throws {
        let (made, certificate) = try openSSLCertificate(spec)
        var commonName: CFString? = "untouched"
        let status = SecCertificateCopyCommonName(certificate, &commonName)
        if let last = made.values("CN").last {
            #expect(status == errSecSuccess)
            #expect(commonName == last)
        } else {
            #expect(status == errSecInternal)
            #expect(commonName == "untouched")
        }
    }

    @Test("the serial number is openssl's, with a leading 00 when the high bit is set", arguments: CertificateSpec.all)
    func serialNumber(_ spec: CertificateSpec) throws {
        let (made, certificate) = try openSSLCertificate(spec)
        let hex = made.serialHex.count % 2 == 0 ? made.serialHex : "0" + made.serialHex
        var expected = stride(from: 0, to: hex.count, by: 2).map {
            UInt8(hex.dropFirst($0).prefix(2), radix: 16)!
        }
        if expected[0] & 0x80 != 0 { expected.insert(0, at: 0) }
        #expect(SecCertificateCopySerialNumberData(certificate, nil) as Data? == Data(expected))
    }

    @Test("the email addresses are openssl's, the SAN's first, then the subject's", arguments: CertificateSpec.all)
    func emailAddresses(_ spec: CertificateSpec) throws {
        let (made, certificate) = try openSSLCertificate(spec)
        var emails: CFArray?
        #expect(SecCertificateCopyEmailAddresses(certificate, &emails) == errSecSuccess)
        let addresses = try #require(emails as? [String])
        #expect(addresses.sorted() == made.emails.sorted())
        let fromSAN = (spec.subjectAltName ?? "").split(separator: ",").filter { $0.hasPrefix("email:") }.map { String($0.dropFirst(6)) }
        #expect(addresses == fromSAN + made.values("emailAddress"))
    }

    @Test("the subject summary follows Apple's rule over the attributes openssl prints", arguments: CertificateSpec.all)
    func subjectSummary(_ spec: CertificateSpec) throws {
        let (made, certificate) = try openSSLCertificate(spec)
        // CN, else OU, else O, else any other attribute; all values of the kind, last first; else the first email.
        let kinds = made.attributes.map { ["CN": 4, "OU": 3, "O": 2][$0[0]] ?? 1 }
        let expected = kinds.max().map { best in
            zip(made.attributes, kinds).filter { $0.1 == best }.map { $0.0[1] }.reversed().joined(separator: ", ")
        } ?? made.emails.first
        #expect(SecCertificateCopySubjectSummary(certificate) == expected)
        #expect(SecCertificateCopySubjectSummary(certificate) == spec.summary)
    }

    @Test("the public key is openssl's SPKI, its bits the EC point or the PKCS#1 key, hashed into pkhh; ctyp is the version",
          arguments: CertificateSpec.all)
    func publicKey(_ spec: CertificateSpec) throws {
        let (made, certificate) = try openSSLCertificate(spec)
        #expect(certificate.publicKeySPKI == made.spki)
        #expect(certificate.publicKeyBytes == made.keyBits)
        let attributes = try #require(certificate.keychainAttributes)
        #expect(attributes[kSecAttrPublicKeyHash] as? Data == made.keyBitsSHA1)
        #expect(attributes[kSecAttrSubjectKeyID] as? Data == made.subjectKeyID)
        #expect(attributes[kSecAttrCertificateType] as? NSNumber == NSNumber(value: made.version))
        #expect(attributes[kSecAttrCertificateEncoding] as? NSNumber == 3)
    }

    @Test("the normalized subject: PrintableStrings upper-cased with their blanks collapsed, other strings kept")
    func normalizedNames() throws {
        let spec = CertificateSpec.all[2]
        let (_, certificate) = try openSSLCertificate(spec)
        // The same subject written already normalized, made by openssl in the same way.
        let twin = CertificateSpec(testDescription: "normalized twin", key: .ec, stringMask: "default",
                                   subject: "/C=US/O=ACME CORP/CN=Zoë+OU=UNIT/CN=SECOND/emailAddress=subj@example.com",
                                   subjectAltName: nil, serial: "0x01", summary: "")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-twin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let made = try OpenSSLCertificate.make(twin, in: directory)
        let normalized = try #require(SecCertificateCopyNormalizedSubjectSequence(certificate) as Data?)
        #expect(normalized == made.subjectDER)
        #expect(SecCertificateCopyNormalizedIssuerSequence(certificate) as Data? == made.subjectDER)
        // The T61String Zoë (Latin-1 0xEB) and the IA5String email are kept as they were.
        #expect(normalized.range(of: Data([0x14, 0x03, 0x5A, 0x6F, 0xEB])) != nil)
        #expect(normalized.range(of: Data("subj@example.com".utf8)) != nil)
        // An already normalized name, and a UTF8String name, stay as they are.
        let twinCertificate = try #require(makeCertificate(made.der))
        #expect(SecCertificateCopyNormalizedSubjectSequence(twinCertificate) as Data? == made.subjectDER)
        let (utf8Made, utf8Certificate) = try openSSLCertificate(CertificateSpec.all[1])
        #expect(SecCertificateCopyNormalizedSubjectSequence(utf8Certificate) as Data? == utf8Made.subjectDER)
        // The keychain's subj and issr are the normalized contents.
        let attributes = try #require(certificate.keychainAttributes)
        #expect(attributes[kSecAttrSubject] as? Data == normalized.dropFirst(2))
        #expect(attributes[kSecAttrIssuer] as? Data == normalized.dropFirst(2))
    }
}
#endif
