// Linux-only: KeychainServices' own SecCertificate, SecIdentity and SecPKCS12Import.
#if !canImport(Darwin)
import Foundation
@testable import KeychainServices
#if NIO
import KeychainPKCS12
#endif
import Testing

// Tests that need no openssl: a fixed certificate, and inputs that are not one DER certificate.

/// An EC P-256 certificate made by `openssl req -x509` (O=Keystone, CN=Keystone Fixture, SAN
/// email:fixture@example.com, serial 0xC0FFEE, SubjectKeyIdentifier), valid until 2126.
let fixtureCertificate = Data(base64Encoded: """
    MIIBkTCCATegAwIBAgIEAMD/7jAKBggqhkjOPQQDAjAuMREwDwYDVQQKDAhLZXlzdG9uZTEZMBcG\
    A1UEAwwQS2V5c3RvbmUgRml4dHVyZTAgFw0yNjExMjUwMjM3MDVaGA8yMTI2MTEwMTAyMzcwNVow\
    LjERMA8GA1UECgwIS2V5c3RvbmUxGTAXBgNVBAMMEEtleXN0b25lIEZpeHR1cmUwWTATBgcqhkjO\
    PQIBBggqhkjOPQMBBwNCAAQVr+oW5DqoIxx5PRL/n9cA3+iydHxO0mhJxaIPPN2aSmPdhfXq7iip\
    yvhzM+hwMTM72aKc7CSVgs7Se57/wDDno0EwPzAeBgNVHREEFzAVgRNmaXh0dXJlQGV4YW1wbGUu\
    Y29tMB0GA1UdDgQWBBT97Cm0Xx+iPgYcn5snuAsMN2xclDAKBggqhkjOPQQDAgNIADBFAiBmafR8\
    SvowR4yiB6UbC5aGsRuYbPhmfMJ5PPPWkKS8KwIhAJJsU5fQ8MUsXo+IdpVVOge2486BnukysfLA\
    dKt7wcB2
    """)!

/// The fixture as PEM text.
let fixturePEM = "-----BEGIN CERTIFICATE-----\n" + fixtureCertificate.base64EncodedString(options: .lineLength64Characters)
    + "\n-----END CERTIFICATE-----\n"

func makeCertificate(_ bytes: Data) -> SecCertificate? {
    SecCertificateCreateWithData(nil, bytes as NSData as CFData)
}

@Suite("SecCertificate of a fixed certificate")
struct SecCertificateFixtureTests {
    let certificate = makeCertificate(fixtureCertificate)!

    @Test("gives back the DER byte for byte")
    func roundTrips() {
        #expect(SecCertificateCopyData(certificate) as Data == fixtureCertificate)
    }

    @Test("reads the common name, the summary, the email and the serial number with its leading 00")
    func readsNames() {
        var commonName: CFString?
        #expect(SecCertificateCopyCommonName(certificate, &commonName) == errSecSuccess)
        #expect(commonName == "Keystone Fixture")
        #expect(SecCertificateCopySubjectSummary(certificate) == "Keystone Fixture")
        var emails: CFArray?
        #expect(SecCertificateCopyEmailAddresses(certificate, &emails) == errSecSuccess)
        #expect(emails as? [String] == ["fixture@example.com"])
        #expect(SecCertificateCopySerialNumberData(certificate, nil) as Data? == Data([0x00, 0xC0, 0xFF, 0xEE]))
    }

    @Test("is equal to another certificate of the same bytes, and describes itself as Apple does")
    func equality() {
        let other = makeCertificate(fixtureCertificate)!
        #expect(certificate == other)
        #expect(certificate.hash == other.hash)
        #expect(certificate.description.hasSuffix(" s: Keystone Fixture i: Keystone Fixture>"))
    }

    @Test("keychain attributes: Apple's keys, version 3, DER encoding, serial, hashes and the DER")
    func keychainAttributes() throws {
        let attributes = try #require(certificate.keychainAttributes)
        #expect(attributes[kSecClass] as? String == kSecClassCertificate)
        #expect(attributes[kSecAttrCertificateType] as? NSNumber == 3)
        #expect(attributes[kSecAttrCertificateEncoding] as? NSNumber == 3)
        #expect(attributes[kSecAttrSerialNumber] as? Data == Data([0x00, 0xC0, 0xFF, 0xEE]))
        #expect(attributes[kSecAttrLabel] as? String == "Keystone Fixture")
        #expect(attributes[kSecValueData] as? Data == fixtureCertificate)
        #expect((attributes[kSecAttrPublicKeyHash] as? Data)?.count == 20)
        #expect(attributes[kSecAttrSubjectKeyID] as? Data == Data([
            0xFD, 0xEC, 0x29, 0xB4, 0x5F, 0x1F, 0xA2, 0x3E, 0x06, 0x1C, 0x9F, 0x9B, 0x27, 0xB8, 0x0B, 0x0C, 0x37, 0x6C, 0x5C, 0x94,
        ]))
        // The names are the normalized sequences' contents: no outer SEQUENCE tag and length.
        let subject = try #require(SecCertificateCopyNormalizedSubjectSequence(certificate) as Data?)
        #expect(attributes[kSecAttrSubject] as? Data == subject.dropFirst(2))
        #expect(attributes[kSecAttrIssuer] as? Data == subject.dropFirst(2))
        #expect(attributes["alis"] == nil)
        #expect(Set(attributes.keys) == ["class", "ctyp", "cenc", "labl", "subj", "issr", "slnr", "skid", "pkhh", "v_Data"])
    }

    @Test("the public key: the SPKI's BIT STRING holds the uncompressed EC point")
    func publicKey() {
        #expect(certificate.publicKeySPKI.count == 91)
        #expect(certificate.publicKeyBytes.count == 65)
        #expect(certificate.publicKeyBytes.first == 0x04)
        #expect(certificate.publicKeySPKI.suffix(65) == certificate.publicKeyBytes)
    }
}

/// Inputs that are not exactly one DER certificate.
struct NotACertificate: Sendable, CustomTestStringConvertible {
    let testDescription: String
    let bytes: Data

    static let all: [NotACertificate] = [
        .init(testDescription: "empty", bytes: Data()),
        .init(testDescription: "PEM text", bytes: Data(fixturePEM.utf8)),
        .init(testDescription: "garbage", bytes: Data((0..<512).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) })),
        .init(testDescription: "a SEQUENCE claiming 64 KiB", bytes: Data([0x30, 0x83, 0x01, 0x00, 0x00, 0x02, 0x01, 0x00])),
        .init(testDescription: "an empty SEQUENCE", bytes: Data([0x30, 0x00])),
        .init(testDescription: "truncated by one byte", bytes: fixtureCertificate.dropLast()),
        .init(testDescription: "the first half", bytes: fixtureCertificate.prefix(fixtureCertificate.count / 2)),
        .init(testDescription: "one trailing zero byte", bytes: fixtureCertificate + [0x00]),
        .init(testDescription: "two certificates in a row", bytes: fixtureCertificate + fixtureCertificate),
        .init(testDescription: "the TBSCertificate alone", bytes: tbsCertificate),
    ]

    /// The fixture's TBSCertificate (the first element of its outer SEQUENCE: header 4 bytes, then 0x30 0x82 …).
    static var tbsCertificate: Data {
        let bytes = [UInt8](fixtureCertificate)
        let length = Int(bytes[6]) << 8 | Int(bytes[7])
        return Data(bytes[4..<(8 + length)])
    }
}

@Suite("SecCertificateCreateWithData refuses what is not one DER certificate")
struct SecCertificateRefusalTests {
    @Test("gives nil", arguments: NotACertificate.all)
    func refuses(_ input: NotACertificate) {
        #expect(makeCertificate(input.bytes) == nil)
    }

    @Test("gives nil for every truncation of a certificate")
    func everyPrefix() {
        let accepted = (0..<fixtureCertificate.count).filter { makeCertificate(fixtureCertificate.prefix($0)) != nil }
        #expect(accepted.isEmpty)
    }

    @Test("never crashes on a certificate with any one byte flipped")
    func everyByteFlipped() {
        for index in fixtureCertificate.indices {
            var corrupted = fixtureCertificate
            corrupted[index] ^= 0xFF
            if let certificate = makeCertificate(corrupted) {
                // Whatever parses must answer every function.
                _ = SecCertificateCopySubjectSummary(certificate)
                var commonName: CFString?
                _ = SecCertificateCopyCommonName(certificate, &commonName)
                var emails: CFArray?
                _ = SecCertificateCopyEmailAddresses(certificate, &emails)
                _ = SecCertificateCopyNormalizedIssuerSequence(certificate)
                _ = certificate.keychainAttributes
            }
        }
    }
}

/// A private EC key, to pair with a certificate.
func newPrivateKey() -> SecKey {
    SecKeyCreateRandomKey([kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256], nil)!
}

@Suite("SecIdentity and SecPKCS12Import")
struct SecIdentityTests {
    #if NIO
    /// The PKCS#12 reader, as an app installs it (product KeychainPKCS12).
    init() { KeychainServicesDefaults.bootstrap(.pkcs12) }
    #endif

    @Test("SecIdentityCopyCertificate and SecIdentityCopyPrivateKey give the identity's parts")
    func copiesParts() {
        let certificate = makeCertificate(fixtureCertificate)!
        let key = newPrivateKey()
        let identity = SecIdentity(certificate: certificate, privateKey: key)
        var copied: SecCertificate?
        #expect(SecIdentityCopyCertificate(identity, &copied) == errSecSuccess)
        #expect(copied === certificate)
        var copiedKey: SecKey?
        #expect(SecIdentityCopyPrivateKey(identity, &copiedKey) == errSecSuccess)
        #expect(copiedKey === key)
        #expect(identity == SecIdentity(certificate: makeCertificate(fixtureCertificate)!, privateKey: key))
        #expect(identity != SecIdentity(certificate: certificate, privateKey: newPrivateKey()))
    }

    #if NIO
    @Test("SecPKCS12Import refuses garbage with errSecDecode and leaves the items alone; the keys have Apple's values")
    func pkcs12Garbage() {
        var items: CFArray?
        let options: [String: Any] = [kSecImportExportPassphrase: "secret"]
        #expect(SecPKCS12Import(Data([0x30, 0x00]) as NSData, options, &items) == errSecDecode)
        #expect(SecPKCS12Import(Data("not a file".utf8) as NSData, options, &items) == errSecDecode)
        #expect(SecPKCS12Import(Data() as NSData, [:], &items) == errSecDecode)
        #expect(SecPKCS12Import(Data([0x30, 0x03, 0x02, 0x01, 0x03]) as NSData, [kSecImportExportPassphrase: 42], &items) == errSecParam)
        #expect(items == nil)
        #expect([kSecImportExportPassphrase, kSecImportItemIdentity, kSecImportItemCertChain, kSecImportItemTrust,
                 kSecImportItemLabel, kSecImportItemKeyID] == ["passphrase", "identity", "chain", "trust", "label", "keyid"])
        #expect(errSecInternal == -26276)
    }
    #endif
}
#endif
