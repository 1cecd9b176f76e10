#if !canImport(Darwin)
import Crypto
import Foundation
import SwiftASN1
import X509

// SecCertificate on Linux. X.509 parsing is swift-certificates' (`X509`); the raw pieces Apple's functions
// return byte for byte (the serial's INTEGER content, the names' contents, the public key's BIT STRING content)
// are read from swift-asn1's node tree (`DER.parse`), never by hand.
//
// The rules below follow Apple's SecCertificate.c (Security framework, the open-source `OSX/sec/Security/
// SecCertificate.c`, read 2019-era): each function's documentation names the Apple function whose rule it keeps.

/// An X.509 certificate (`SecCertificateRef`): the DER bytes and their parsed form.
///
/// Create one with ``SecCertificateCreateWithData(_:_:)``. Two certificates are equal when their DER bytes are
/// equal (Apple's `SecCertificateEqual`).
public final class SecCertificate: NSObject, Sendable {
    /// The certificate's DER bytes, exactly as given.
    let derData: Data
    /// The certificate as swift-certificates parses it.
    let certificate: Certificate
    /// The X.509 version as Apple counts it for `kSecAttrCertificateType`: 1, 2 or 3.
    let version: Int
    /// The serial number's INTEGER content (no tag and length), leading `00` included when the DER has one.
    let serialNumberContent: Data
    /// The subject's and issuer's attributes, in encoded order.
    let subjectAttributes: [NameAttribute]
    let issuerAttributes: [NameAttribute]
    /// The subject's and issuer's RDN sequences normalized as Apple's `createNormalizedX501Name` does, as
    /// contents (the SEQUENCE's tag and length left off); nil where Apple's normalization fails (an empty RDN).
    let normalizedSubjectContent: Data?
    let normalizedIssuerContent: Data?
    /// The DER `SubjectPublicKeyInfo`, exactly as in the certificate.
    let publicKeySPKI: Data
    /// The SubjectPublicKeyInfo's BIT STRING content, Apple's `_pubKeyDER`: for an EC key the point (`04‖X‖Y`),
    /// for an RSA key the PKCS#1 `RSAPublicKey` DER. `SecCertificateCopyKey` builds its key from these bytes.
    let publicKeyBytes: Data

    /// Parses one DER certificate; nil for anything else (see ``SecCertificateCreateWithData(_:_:)``).
    init?(der: Data) {
        let bytes = [UInt8](der)
        guard !bytes.isEmpty,
              let certificate = try? Certificate(derEncoded: bytes),
              let fields = try? Fields(certificateDER: bytes)
        else { return nil }
        // Apple's SecCertificateParse accepts versions 1 to 3 only, and serial numbers of 1 to 37 octets.
        guard (1...3).contains(fields.version), (1...37).contains(fields.serialNumber.count) else { return nil }
        self.derData = Data(bytes)
        self.certificate = certificate
        self.version = fields.version
        self.serialNumberContent = Data(fields.serialNumber)
        self.subjectAttributes = fields.subject.flatMap { $0 }
        self.issuerAttributes = fields.issuer.flatMap { $0 }
        self.normalizedSubjectContent = NameAttribute.normalizedContent(of: fields.subject).map { Data($0) }
        self.normalizedIssuerContent = NameAttribute.normalizedContent(of: fields.issuer).map { Data($0) }
        self.publicKeySPKI = Data(fields.spki)
        self.publicKeyBytes = Data(fields.publicKeyBits)
        super.init()
    }

    /// Equal when the DER bytes are equal.
    public override func isEqual(_ object: Any?) -> Bool {
        (object as? SecCertificate)?.derData == derData
    }

    /// A hash of the DER bytes.
    public override var hash: Int { derData.hashValue }

    /// Apple's form: `<cert(0x…) s: subject summary i: issuer summary>`.
    public override var description: String {
        let address = Unmanaged.passUnretained(self).toOpaque()
        return "<cert(\(address)) s: \(subjectSummary ?? "(null)") i: \(Self.summary(of: issuerAttributes) ?? "(null)")>"
    }
}

// MARK: - What the functions read

extension SecCertificate {
    /// Apple's `SecCertificateCopySubjectSummary` (SecCertificate.c, `obtainSummaryFromX501Name`):
    ///
    /// 1. Of the subject's attributes, the most desired kind wins: common name, else organizational unit, else
    ///    organization, else any other attribute (an `emailAddress` or a country among them).
    /// 2. Every value of that kind is listed, in reverse encoded order, joined by `", "`.
    /// 3. When the winner is the common name and the subject has `description` attributes, these follow in
    ///    parentheses: `CN (description)`.
    /// 4. With no usable subject attribute, the first email address (SAN `rfc822Name`s, then the subject's
    ///    `emailAddress`), else the first SAN `dNSName`; else nil.
    var subjectSummary: String? {
        Self.summary(of: subjectAttributes) ?? emailAddresses.first ?? subjectAlternativeDNSNames.first
    }

    /// The summary rule (steps 1 to 3 of ``subjectSummary``) over one name's attributes.
    static func summary(of attributes: [NameAttribute]) -> String? {
        var best = SummaryKind.none
        var summary: String?
        var descriptions: String?
        for attribute in attributes {
            var kind: SummaryKind
            var text: String?
            switch attribute.type {
            case NameAttribute.commonName: kind = .commonName
            case NameAttribute.organizationalUnit: kind = .organizationalUnit
            case NameAttribute.organization: kind = .organization
            case NameAttribute.description:
                text = attribute.text
                kind = .none
                if let text {
                    descriptions = descriptions.map { "\(text), \($0)" } ?? text
                    kind = .other
                }
            default: kind = .other
            }
            guard best <= kind, let text = text ?? attribute.text else { continue }
            if best == kind {
                summary = summary.map { "\(text), \($0)" } ?? text
            } else {
                best = kind
                summary = text
            }
        }
        if let descriptions, best == .commonName, let name = summary {
            summary = "\(name) (\(descriptions))"
        }
        return summary
    }

    /// The kinds of attribute the summary prefers, least desired first (Apple's `enum SummaryType`).
    enum SummaryKind: Int, Comparable {
        case none, other, organization, organizationalUnit, commonName
        static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// The subject's common names in encoded order; nil when one of them cannot be read (Apple's
    /// `SecCertificateCopyCommonNames`).
    var commonNames: [String]? {
        var names: [String] = []
        for attribute in subjectAttributes where attribute.type == NameAttribute.commonName {
            guard let text = attribute.text else { return nil }
            names.append(text)
        }
        return names
    }

    /// Apple's `SecCertificateCopyRFC822Names`: the SAN's `rfc822Name`s in order, then the subject's
    /// `emailAddress` values in encoded order; empty when the SAN cannot be parsed or a value cannot be read.
    var emailAddresses: [String] {
        var names: [String] = []
        do {
            if let alternativeNames = try certificate.extensions.subjectAlternativeNames {
                for case .rfc822Name(let address) in alternativeNames { names.append(address) }
            }
        } catch {
            return []
        }
        for attribute in subjectAttributes where attribute.type == NameAttribute.emailAddress {
            guard let text = attribute.text else { return [] }
            names.append(text)
        }
        return names
    }

    /// The SAN's `dNSName`s in order (the start of Apple's `SecCertificateCopyDNSNames`).
    var subjectAlternativeDNSNames: [String] {
        guard let names = try? certificate.extensions.subjectAlternativeNames else { return [] }
        return names.compactMap { if case .dnsName(let name) = $0 { name } else { nil } }
    }

    /// The SubjectKeyIdentifier extension's key identifier, when the certificate has a readable one.
    var subjectKeyIdentifier: Data? {
        (try? certificate.extensions.subjectKeyIdentifier).flatMap { $0 }.map { Data($0.keyIdentifier) }
    }

    /// SHA-1 of `publicKeyBytes`: Apple's `kSecAttrPublicKeyHash` for a certificate item.
    var publicKeyHash: Data {
        Data(Insecure.SHA1.hash(data: publicKeyBytes))
    }

    /// Keystone's own: the attributes Apple's keychain stores for this certificate as an item (`SecItemAdd` with
    /// `kSecValueRef`), keyed by the `kSecAttr…` strings; nil where Apple's dictionary is NULL (the issuer's
    /// normalization failed).
    ///
    /// From Apple's `SecCertificateCopyAttributeDictionary` (SecCertificate.c):
    /// - `class` (`kSecClass`): `kSecClassCertificate`.
    /// - `ctyp` (`kSecAttrCertificateType`): the X.509 version, 1, 2 or 3 (`CSSM_CERT_X_509v1`…`v3`).
    /// - `cenc` (`kSecAttrCertificateEncoding`): 3 (`CSSM_CERT_ENCODING_DER`).
    /// - `subj` (`kSecAttrSubject`): the subject's *normalized* content (see
    ///   ``SecCertificateCopyNormalizedSubjectSequence(_:)``, without the outer SEQUENCE tag and length); left out
    ///   when the normalization fails.
    /// - `issr` (`kSecAttrIssuer`): the issuer's normalized content, likewise.
    /// - `slnr` (`kSecAttrSerialNumber`): the serial number's INTEGER content, leading `00` kept.
    /// - `skid` (`kSecAttrSubjectKeyID`): the SubjectKeyIdentifier extension's octets, when present.
    /// - `pkhh` (`kSecAttrPublicKeyHash`): SHA-1 of the public key's BIT STRING content (`publicKeyBytes`).
    /// - `v_Data` (`kSecValueData`): the DER.
    ///
    /// And from Apple's SecItem.c (`infer_cert_label`): `labl` (`kSecAttrLabel`) is the subject summary, which
    /// `SecItemAdd` sets only when the caller gave no label (the integrator keeps that rule). Apple leaves `alis`
    /// (the email addresses) and the label out of the dictionary itself (`#if 0` in the function), so
    /// `alis` is not set.
    public var keychainAttributes: [String: Any]? {
        guard let issuer = normalizedIssuerContent else { return nil }
        var attributes: [String: Any] = [
            kSecClass: kSecClassCertificate,
            kSecAttrCertificateType: NSNumber(value: Int32(version)),
            kSecAttrCertificateEncoding: NSNumber(value: Int32(3)),
            kSecAttrIssuer: issuer,
            kSecAttrSerialNumber: serialNumberContent,
            kSecAttrPublicKeyHash: publicKeyHash,
            kSecValueData: derData,
        ]
        if let subject = normalizedSubjectContent { attributes[kSecAttrSubject] = subject }
        if let keyID = subjectKeyIdentifier { attributes[kSecAttrSubjectKeyID] = keyID }
        if let label = subjectSummary { attributes[kSecAttrLabel] = label }
        return attributes
    }
}

// MARK: - The functions

/// Creates a certificate from its DER bytes.
///
/// - Returns: nil, never a crash, for anything that is not exactly one DER certificate: PEM text, a truncated or
///   corrupted certificate, trailing bytes after it, an empty buffer, an X.509 version above 3 or a serial number
///   longer than 37 octets (Apple's `SecCertificateParse` limits). Certificates swift-certificates cannot parse
///   are refused too; Apple's own parser is more lenient about some of them (a public key algorithm
///   swift-certificates does not know, such as DSA, makes the certificate unparseable here).
public func SecCertificateCreateWithData(_ allocator: CFAllocator?, _ data: CFData) -> SecCertificate? {
    SecCertificate(der: Data(referencing: data))
}

/// The certificate's DER bytes, exactly as given to ``SecCertificateCreateWithData(_:_:)``.
public func SecCertificateCopyData(_ certificate: SecCertificate) -> CFData {
    NSData(data: certificate.derData)
}

/// A human-readable summary of the subject, as Apple builds it: the common name(s), else the organizational
/// unit(s), else the organization(s), else the other subject attributes, else the first email address, else the
/// first SAN DNS name. Several values of the chosen kind are listed last first, joined by `", "`; a common name
/// is followed by the subject's `description` in parentheses when there is one.
///
/// - Returns: nil when nothing in the certificate can name its subject.
public func SecCertificateCopySubjectSummary(_ certificate: SecCertificate) -> CFString? {
    certificate.subjectSummary
}

/// Copies the subject's common name: the last `CN` attribute in encoded order (for a name printed in RFC 2253
/// order, the first), as Apple's `SecCertificateCopyCommonName`.
///
/// - Returns: `errSecSuccess`; `errSecInternal` (Apple's code) when the subject has no common name, with
///   `commonName` untouched.
public func SecCertificateCopyCommonName(_ certificate: SecCertificate,
                                         _ commonName: UnsafeMutablePointer<CFString?>) -> OSStatus {
    guard let names = certificate.commonNames, let last = names.last else { return errSecInternal }
    commonName.pointee = last
    return errSecSuccess
}

/// Copies the certificate's email addresses: the subject alternative name's `rfc822Name`s first, then the
/// subject's `emailAddress` attributes, as Apple's `SecCertificateCopyEmailAddresses`.
///
/// - Returns: `errSecSuccess`, with an empty array when the certificate has none.
public func SecCertificateCopyEmailAddresses(_ certificate: SecCertificate,
                                             _ emailAddresses: UnsafeMutablePointer<CFArray?>) -> OSStatus {
    emailAddresses.pointee = certificate.emailAddresses as NSArray
    return errSecSuccess
}

/// The serial number: the content of its DER INTEGER, without tag and length. Apple returns the content as
/// encoded, so a serial whose high bit is set keeps its leading `00` octet.
///
/// `error` is never set: every certificate has a serial number.
public func SecCertificateCopySerialNumberData(_ certificate: SecCertificate,
                                               _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    NSData(data: certificate.serialNumberContent)
}

/// The issuer's name normalized as Apple's keychain compares it, as a DER SEQUENCE.
///
/// Apple's rule (`createNormalizedX501Name`, after RFC 5280's PrintableString comparison): every PrintableString
/// value is upper-cased (`a`–`z` only), its leading and trailing spaces and tabs removed and each inner run of them
/// replaced by one space; the lengths are re-encoded. Values of every other string type (UTF8String, IA5String,
/// T61String, BMPString…) and the attribute types are kept byte for byte; nothing is re-encoded as UTF8String.
///
/// - Returns: nil when the name has an empty RDN, which Apple's normalization refuses.
public func SecCertificateCopyNormalizedIssuerSequence(_ certificate: SecCertificate) -> CFData? {
    certificate.normalizedIssuerContent.map { NSData(data: NameAttribute.sequence(wrapping: $0)) }
}

/// The subject's name normalized as Apple's keychain compares it, as a DER SEQUENCE (the rule of
/// ``SecCertificateCopyNormalizedIssuerSequence(_:)``).
public func SecCertificateCopyNormalizedSubjectSequence(_ certificate: SecCertificate) -> CFData? {
    certificate.normalizedSubjectContent.map { NSData(data: NameAttribute.sequence(wrapping: $0)) }
}

// MARK: - Reading the DER

/// One attribute of a distinguished name: its type and its value's tag and content.
struct NameAttribute: Sendable {
    let type: ASN1ObjectIdentifier
    /// The value's node (tag, content and encoded bytes).
    let value: ASN1Node
    /// The attribute type's encoded bytes (the OBJECT IDENTIFIER with tag and length).
    let typeEncoding: ArraySlice<UInt8>

    static let commonName: ASN1ObjectIdentifier = [2, 5, 4, 3]
    static let organizationalUnit: ASN1ObjectIdentifier = [2, 5, 4, 11]
    static let organization: ASN1ObjectIdentifier = [2, 5, 4, 10]
    static let description: ASN1ObjectIdentifier = [2, 5, 4, 13]
    static let emailAddress: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 9, 1]

    /// The value as Apple's `copyDERThingDescription` reads a name's value: strings decoded by their ASN.1 type
    /// (PrintableString and IA5String as ASCII; UTF8String, GeneralString and — as Apple does — UniversalString as
    /// UTF-8; T61String, VideotexString and VisibleString as ISO Latin-1; BMPString as UTF-16 big-endian), one
    /// trailing NUL dropped (except for BMPString), bytes that do not decode shown as spaced hex (`"C3 28"`);
    /// INTEGER and BOOLEAN values as decimal up to 8 octets, hex beyond.
    ///
    /// nil for other value types, where Apple writes a localized description ("Byte string; 4 bytes; …"), which
    /// Keystone does not reproduce.
    var text: String? {
        guard case .primitive(let content) = value.content else { return nil }
        switch value.identifier {
        case .printableString, .ia5String:
            return Self.string(content) { bytes in bytes.allSatisfy { $0 < 0x80 } ? String(decoding: bytes, as: UTF8.self) : nil }
        case .utf8String, .generalString, .universalString:
            return Self.string(content) { String(validating: $0, as: UTF8.self) }
        case .teletexString, .videotexString, .visibleString:
            return Self.string(content) { bytes in String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) })) }
        case .bmpString:
            guard content.count % 2 == 0 else { return Self.hex(content) }
            let units = stride(from: content.startIndex, to: content.endIndex, by: 2).map {
                UInt16(content[$0]) << 8 | UInt16(content[$0 + 1])
            }
            return String(validating: units, as: UTF16.self) ?? Self.hex(content)
        case .integer, .boolean:
            guard (1...8).contains(content.count) else { return Self.hex(content) }
            return String(content.reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        default:
            return nil
        }
    }

    /// A string value with Apple's trailing-NUL rule and its hex fallback.
    private static func string(_ content: ArraySlice<UInt8>, _ decode: (ArraySlice<UInt8>) -> String?) -> String {
        let trimmed = content.last == 0 ? content.dropLast() : content
        return decode(trimmed) ?? hex(content)
    }

    /// Apple's `copyHexDescription`: upper-case hex octets separated by spaces.
    private static func hex(_ bytes: ArraySlice<UInt8>) -> String {
        bytes.map { String(format: "%02X", $0) }.joined(separator: " ")
    }

    /// The normalized content of a name given as RDNs of attributes (see
    /// ``SecCertificateCopyNormalizedIssuerSequence(_:)``); nil when an RDN is empty.
    static func normalizedContent(of rdns: [[NameAttribute]]) -> [UInt8]? {
        guard rdns.allSatisfy({ !$0.isEmpty }) else { return nil }
        var serializer = DER.Serializer()
        for rdn in rdns {
            serializer.appendConstructedNode(identifier: .set) { set in
                for attribute in rdn {
                    set.appendConstructedNode(identifier: .sequence) { sequence in
                        sequence.serializeRawBytes(attribute.typeEncoding)
                        if attribute.value.identifier == .printableString, case .primitive(let content) = attribute.value.content {
                            sequence.appendPrimitiveNode(identifier: .printableString) { $0.append(contentsOf: normalized(content)) }
                        } else {
                            sequence.serializeRawBytes(attribute.value.encodedBytes)
                        }
                    }
                }
            }
        }
        return serializer.serializedBytes
    }

    /// A PrintableString's content normalized: `a`–`z` upper-cased, blanks (space, tab) trimmed and collapsed.
    static func normalized(_ content: ArraySlice<UInt8>) -> [UInt8] {
        let isBlank = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        let words = content.split(whereSeparator: isBlank)
        return Array(words.map { word in word.map { (0x61...0x7A).contains($0) ? $0 - 0x20 : $0 } }.joined(separator: [0x20]))
    }

    /// A name's content wrapped in its SEQUENCE tag and length.
    static func sequence(wrapping content: Data) -> Data {
        var serializer = DER.Serializer()
        serializer.appendConstructedNode(identifier: .sequence) { $0.serializeRawBytes(content) }
        return Data(serializer.serializedBytes)
    }
}

/// The raw pieces of a certificate's TBSCertificate that Apple's functions return as encoded.
private struct Fields {
    var version = 1
    var serialNumber: ArraySlice<UInt8> = []
    var issuer: [[NameAttribute]] = []
    var subject: [[NameAttribute]] = []
    var spki: ArraySlice<UInt8> = []
    var publicKeyBits: ArraySlice<UInt8> = []

    struct Malformed: Error {}

    /// Reads a Certificate's TBSCertificate: `[0] version?, serialNumber, signature, issuer, validity, subject,
    /// subjectPublicKeyInfo, …` (RFC 5280 4.1). swift-certificates has already accepted the same bytes.
    init(certificateDER bytes: [UInt8]) throws {
        let root = try DER.parse(bytes)
        guard case .constructed(let certificateParts) = root.content,
              let tbs = certificateParts.first(where: { _ in true }),
              case .constructed(let tbsParts) = tbs.content
        else { throw Malformed() }
        var parts = Array(tbsParts)[...]
        if let first = parts.first, first.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) {
            guard case .constructed(let inner) = first.content, let integer = inner.first(where: { _ in true }) else { throw Malformed() }
            version = try Int(derEncoded: integer) + 1
            parts = parts.dropFirst()
        }
        let tbsFields = Array(parts)
        guard tbsFields.count >= 6, tbsFields[0].identifier == .integer, case .primitive(let serial) = tbsFields[0].content
        else { throw Malformed() }
        serialNumber = serial
        issuer = try Self.name(tbsFields[2])
        subject = try Self.name(tbsFields[4])
        let spkiNode = tbsFields[5]
        guard case .constructed(let spkiParts) = spkiNode.content, let bitString = Array(spkiParts).last else { throw Malformed() }
        spki = spkiNode.encodedBytes
        publicKeyBits = try ASN1BitString(derEncoded: bitString).bytes
    }

    /// A Name: a SEQUENCE of RDN SETs of `SEQUENCE { type OBJECT IDENTIFIER, value ANY }`.
    private static func name(_ node: ASN1Node) throws -> [[NameAttribute]] {
        guard node.identifier == .sequence, case .constructed(let rdns) = node.content else { throw Malformed() }
        return try rdns.map { rdn in
            guard rdn.identifier == .set, case .constructed(let attributes) = rdn.content else { throw Malformed() }
            return try attributes.map { attribute in
                guard attribute.identifier == .sequence, case .constructed(let pair) = attribute.content else { throw Malformed() }
                let nodes = Array(pair)
                guard nodes.count == 2 else { throw Malformed() }
                return NameAttribute(type: try ASN1ObjectIdentifier(derEncoded: nodes[0]), value: nodes[1],
                                     typeEncoding: nodes[0].encodedBytes)
            }
        }
    }
}
#endif
