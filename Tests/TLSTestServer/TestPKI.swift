import Crypto
import Foundation
import SwiftASN1
import X509

/// A private PKI made in the test: a root CA, an intermediate CA and leaves, all P-256, with fixed dates (no
/// dependency on today's date: evaluate at ``TestPKI/verifyDate``).
public struct TestPKI: Sendable {
    /// A certificate and its private key.
    public struct Identity: Sendable {
        public let certificate: Certificate
        public let key: P256.Signing.PrivateKey

        /// The certificate, DER.
        public var der: Data {
            var serializer = DER.Serializer()
            try! serializer.serialize(certificate)
            return Data(serializer.serializedBytes)
        }

        /// The certificate, PEM.
        public var pem: String { try! certificate.serializeAsPEM().pemString }
    }

    /// Certificates are valid from 2025-01-01 to 2035-01-01; evaluate at this date (2030-01-01).
    public static let verifyDate = Date(timeIntervalSince1970: 1_893_456_000)
    public static let notBefore = Date(timeIntervalSince1970: 1_735_689_600)
    public static let notAfter = Date(timeIntervalSince1970: 2_051_222_400)

    public let root: Identity
    public let intermediate: Identity

    /// A root "Keystone Test Root CA <name>" and an intermediate under it.
    public init(name: String = "") throws {
        root = try Self.issue(subject: "Keystone Test Root CA \(name)", isCA: true, issuer: nil)
        intermediate = try Self.issue(subject: "Keystone Test Intermediate CA \(name)", isCA: true, issuer: root)
    }

    /// A server certificate for `hosts` from the intermediate (a new key unless `key` is given).
    ///
    /// - Parameters:
    ///   - notAfter: The end of validity (before ``verifyDate`` for an expired leaf).
    public func leaf(hosts: [String], key: P256.Signing.PrivateKey = .init(), notAfter: Date = TestPKI.notAfter) throws -> Identity {
        try Self.issue(subject: hosts.first ?? "leaf", isCA: false, issuer: intermediate, hosts: hosts, key: key, notAfter: notAfter)
    }

    /// The chain a server presents: the leaf and the intermediate (not the root).
    public func chain(for leaf: Identity) -> [Identity] { [leaf, intermediate] }

    static func issue(
        subject: String, isCA: Bool, issuer: Identity?, hosts: [String] = [], key: P256.Signing.PrivateKey = .init(),
        notAfter: Date = TestPKI.notAfter
    ) throws -> Identity {
        let name = try DistinguishedName { CommonName(subject); OrganizationName("Keystone tests") }
        let extensions = try Certificate.Extensions {
            if isCA {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            } else {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(hosts.map { .dnsName($0) })
            }
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: TestPKI.notBefore,
            notValidAfter: notAfter,
            issuer: issuer?.certificate.subject ?? name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: Certificate.PrivateKey(issuer?.key ?? key)
        )
        return Identity(certificate: certificate, key: key)
    }
}
