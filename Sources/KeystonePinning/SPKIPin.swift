import Crypto
import Foundation
import SwiftASN1
import X509

/// A public-key pin: the SHA-256 digest of a certificate's DER-encoded SubjectPublicKeyInfo.
///
/// This is the pin HPKP (RFC 7469) and OkHttp write, `sha256/` followed by the digest in base64, and what
/// `openssl x509 -pubkey -noout -in cert.pem | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64`
/// prints. A pin names a key, not a certificate: it survives the certificate's renewal with the same key.
public struct SPKIPin: Hashable, Sendable, CustomStringConvertible {
    /// The 32 bytes of the SHA-256 digest.
    public let digest: Data

    /// A pin from its base64 text, with or without the `sha256/` prefix.
    ///
    /// - Throws: ``PinningError/malformedPin(host:pin:reason:)`` (with an empty host) when the text is not base64 or
    ///   does not decode to 32 bytes.
    public init(_ text: String) throws {
        try self.init(text, host: "")
    }

    init(_ text: String, host: String) throws {
        var body = Substring(text.trimmingCharacters(in: .whitespaces))
        if body.lowercased().hasPrefix("sha256/") { body = body.dropFirst("sha256/".count) }
        guard let bytes = Data(base64Encoded: String(body)) else {
            throw PinningError.malformedPin(host: host, pin: text, reason: "not base64")
        }
        guard bytes.count == SHA256.byteCount else {
            throw PinningError.malformedPin(host: host, pin: text, reason: "\(bytes.count) bytes, a SHA-256 pin has 32")
        }
        digest = bytes
    }

    /// The pin of a DER-encoded SubjectPublicKeyInfo.
    public init(subjectPublicKeyInfo der: some DataProtocol) {
        digest = Data(SHA256.hash(data: Data(der)))
    }

    /// The pin of a certificate's public key.
    public init(certificate: Certificate) {
        var serializer = DER.Serializer()
        // Serializing a parsed public key cannot fail: it re-emits the SubjectPublicKeyInfo it was parsed from.
        try! serializer.serialize(certificate.publicKey)
        self.init(subjectPublicKeyInfo: serializer.serializedBytes)
    }

    /// The pin of a DER-encoded certificate's public key.
    ///
    /// - Throws: swift-asn1's `ASN1Error` when the bytes are not a DER X.509 certificate.
    public init(certificateDER der: some DataProtocol) throws {
        self.init(certificate: try Certificate(derEncoded: Array(der)))
    }

    /// The digest in base64, as HPKP and OkHttp write it (without the `sha256/` prefix).
    public var base64: String { digest.base64EncodedString() }

    /// `sha256/` followed by the base64 digest.
    public var description: String { "sha256/" + base64 }
}
