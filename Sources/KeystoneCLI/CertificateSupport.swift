import ArgumentParser
import Foundation
import KeychainEngine

// The certificate and key verbs are Linux-first: they build on KeychainServices' SecCertificate / SecKey (on Apple
// platforms `security` itself has them).
#if canImport(Darwin)
var certificateVerbs: [any ParsableCommand.Type] { [] }
#else
import Crypto
import CryptoExtras
import KeychainFile
import KeychainServices
import SwiftASN1
import X509

var certificateVerbs: [any ParsableCommand.Type] {
    [ImportItems.self, ExportItems.self, FindCertificate.self, FindIdentity.self, DeleteCertificate.self, DeleteIdentity.self]
}

// MARK: - Certificates stored in keychains

/// A certificate item found in a keychain: its attributes, the parsed certificate and its persistent reference.
struct StoredCertificate {
    let keychain: String
    let attributes: KeychainQuery
    let certificate: SecCertificate
    let der: Data
    let reference: Data

    var commonName: String? {
        var name: CFString?
        return SecCertificateCopyCommonName(certificate, &name) == errSecSuccess ? name : nil
    }

    var emailAddresses: [String] {
        var array: CFArray?
        guard SecCertificateCopyEmailAddresses(certificate, &array) == errSecSuccess, let array else { return [] }
        return array.compactMap { $0 as? String }
    }

    var subjectSummary: String? { SecCertificateCopySubjectSummary(certificate) }
    var sha1: Data { Data(Insecure.SHA1.hash(data: der)) }
    var sha256: Data { Data(SHA256.hash(data: der)) }

    /// `alis`, as Apple's file keychains show it: the first email address, else the common name.
    var alias: String? { emailAddresses.first ?? commonName }

    /// Apple's `-c` rule (keychain_find.c): a case-insensitive substring of the common name.
    func nameMatches(_ name: String) -> Bool {
        commonName?.range(of: name, options: [.caseInsensitive]) != nil
    }

    /// The validity dates, from the certificate (X509).
    var validity: (notBefore: Date, notAfter: Date)? {
        guard let parsed = try? Certificate(derEncoded: [UInt8](der)) else { return nil }
        return (parsed.notValidBefore, parsed.notValidAfter)
    }

    /// Keystone has no trust evaluation yet: "valid" means within the certificate's validity dates now.
    var isWithinValidity: Bool {
        guard let validity else { return false }
        let now = Date()
        return validity.notBefore <= now && now <= validity.notAfter
    }
}

enum CertificateStore {
    /// The keychains to search: the given ones, else the search list.
    static func paths(_ keychains: [String]) -> [String] {
        keychains.isEmpty ? ToolConfig.searchList : keychains.map(resolveKeychain)
    }

    /// Every certificate item in `paths`, keychain by keychain, in storage order.
    static func certificates(in paths: [String], function: String = "SecKeychainSearchCopyNext") throws -> [StoredCertificate] {
        var found: [StoredCertificate] = []
        for path in paths {
            let engine = KeychainEngine(storage: try openStorage(path))
            let query: KeychainQuery = [Key.class: .string(ItemClass.certificate.rawValue), Key.matchLimit: .string(Key.matchLimitAll),
                                        Key.returnAttributes: .bool(true), Key.returnData: .bool(true),
                                        Key.returnPersistentRef: .bool(true)]
            let result: ItemResult?
            do { result = try engine.copyMatching(query) } catch let error as EngineError where error.status == Status.itemNotFound {
                continue
            } catch let error as EngineError {
                throw ToolFailure(function: function, status: error.status, reason: error.reason)
            }
            for item in result?.array ?? [] {
                guard let attributes = item.attributes, let der = attributes[Key.valueData]?.dataValue,
                      let reference = attributes[Key.valuePersistentRef]?.dataValue,
                      let certificate = SecCertificateCreateWithData(nil, NSData(data: der)) else { continue }
                found.append(StoredCertificate(keychain: path, attributes: attributes, certificate: certificate, der: der, reference: reference))
            }
        }
        return found
    }

    /// Apple's `find_unique_certificate` (keychain_find.c): by SHA-1 or SHA-256 hash (hex), else by name (a
    /// case-insensitive substring of the common name, an exact match preferred); several equally good matches
    /// are an error.
    static func unique(in paths: [String], name: String?, hash: String?) throws -> StoredCertificate {
        let candidates = try certificates(in: paths)
        let wanted = name ?? hash ?? ""
        let notFound = ToolFailure(function: "SecKeychainSearchCopyNext", status: Status.itemNotFound,
                                   reason: "Unable to delete certificate matching \"\(wanted)\"")
        if let hash {
            guard let digest = hexBytes(hash), digest.count == 20 || digest.count == 32 else {
                throw UsageFailure(message: "keystone: -Z takes a SHA-1 (40) or SHA-256 (64) hexadecimal hash")
            }
            guard let match = candidates.first(where: { (digest.count == 20 ? $0.sha1 : $0.sha256) == digest }) else { throw notFound }
            return match
        }
        guard let name else { throw UsageFailure(message: "keystone: give -c name or -Z hash") }
        var best: StoredCertificate?
        var bestIsExact = false
        for candidate in candidates {
            guard let commonName = candidate.commonName, candidate.nameMatches(name) else { continue }
            let isExact = commonName.caseInsensitiveCompare(name) == .orderedSame
            if let current = best {
                if bestIsExact && !isExact { continue }
                if bestIsExact == isExact {
                    if current.der == candidate.der { continue }
                    throw MessageFailure(message: "keystone: \"\(name)\" is ambiguous, matches more than one certificate\nkeystone: Unable to delete certificate matching \"\(name)\"; give -Z with its SHA-1 hash (find-certificate -a -Z -c …)", exitCode: 1)
                }
            }
            best = candidate
            bestIsExact = isExact
        }
        guard let best else { throw notFound }
        return best
    }
}

func hexBytes(_ text: String) -> Data? {
    let digits = Array(text.utf8)
    guard digits.count % 2 == 0 else { return nil }
    var bytes: [UInt8] = []
    for i in stride(from: 0, to: digits.count, by: 2) {
        guard let byte = UInt8(String(decoding: digits[i..<i + 2], as: UTF8.self), radix: 16) else { return nil }
        bytes.append(byte)
    }
    return Data(bytes)
}

func upperHex(_ data: Data) -> String { data.map { String(format: "%02X", $0) }.joined() }

/// PEM armour (64-column base64), as `print_buffer_pem` and openssl write it.
func pemBlock(_ type: String, _ der: Data) -> String {
    let base64 = der.base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
    return "-----BEGIN \(type)-----\n\(base64)\n-----END \(type)-----\n"
}

// MARK: - Printing certificates as `security` does

/// The attribute block `security find-certificate` prints for a certificate item (class `0x80001000`,
/// `CSSM_DL_DB_RECORD_X509_CERTIFICATE`), attributes in `security`'s order.
///
/// `issu` and `subj` hold what Keystone stores for `kSecAttrIssuer` / `kSecAttrSubject`: the normalized name's
/// content, as Apple's data-protection keychain stores them (a macOS file keychain shows the DER name).
func certificateBlock(_ stored: StoredCertificate) -> String {
    let attributes = stored.attributes
    func blob(_ key: String) -> String {
        switch attributes[key] {
        case .string(let s)?: return securityQuoted(Data(s.utf8))
        case .data(let d)?: return securityQuoted(d)
        default: return "<NULL>"
        }
    }
    func uint32(_ key: String) -> String {
        guard let n = attributes[key]?.integerValue else { return "<NULL>" }
        return String(format: "0x%08X ", UInt32(truncatingIfNeeded: n))
    }
    var lines = ["keychain: \"\(stored.keychain)\"", "version: 512", "class: 0x80001000 ", "attributes:"]
    lines.append("    \"alis\"<blob>=\(stored.alias.map { securityQuoted(Data($0.utf8)) } ?? "<NULL>")")
    lines.append("    \"cenc\"<uint32>=\(uint32(Key.certificateEncoding))")
    lines.append("    \"ctyp\"<uint32>=\(uint32(Key.certificateType))")
    lines.append("    \"hpky\"<blob>=\(blob(Key.publicKeyHash))")
    lines.append("    \"issu\"<blob>=\(blob(Key.issuer))")
    lines.append("    \"labl\"<blob>=\(blob(Key.label))")
    lines.append("    \"skid\"<blob>=\(blob(Key.subjectKeyID))")
    lines.append("    \"snbr\"<blob>=\(blob(Key.serialNumber))")
    lines.append("    \"subj\"<blob>=\(blob(Key.subject))")
    return lines.joined(separator: "\n") + "\n"
}

/// The JSON form of a certificate item (`--json`).
func certificateJSON(_ stored: StoredCertificate, pem: Bool) -> [String: Any] {
    var object: [String: Any] = [
        "keychain": stored.keychain,
        "class": "cert",
        "sha1": upperHex(stored.sha1),
        "sha256": upperHex(stored.sha256),
        "emailAddresses": stored.emailAddresses,
        "serialNumber": upperHex(stored.attributes[Key.serialNumber]?.dataValue ?? Data()),
        "publicKeyHash": upperHex(stored.attributes[Key.publicKeyHash]?.dataValue ?? Data()),
    ]
    if let label = stored.attributes[Key.label]?.textValue { object["label"] = label }
    if let commonName = stored.commonName { object["commonName"] = commonName }
    if let summary = stored.subjectSummary { object["subjectSummary"] = summary }
    if let keyID = stored.attributes[Key.subjectKeyID]?.dataValue { object["subjectKeyID"] = upperHex(keyID) }
    if let version = stored.attributes[Key.certificateType]?.integerValue { object["certificateType"] = version }
    if let validity = stored.validity {
        object["notValidBefore"] = isoUTC(validity.notBefore)
        object["notValidAfter"] = isoUTC(validity.notAfter)
    }
    if pem { object["pem"] = pemBlock("CERTIFICATE", stored.der) }
    return object
}

// MARK: - Keys: Apple's formats to and from PEM (swift-crypto does every conversion)

enum KeyCodec {
    /// Apple's key type strings (`kSecAttrKeyType`).
    static let ecType = kSecAttrKeyTypeECSECPrimeRandom
    static let rsaType = kSecAttrKeyTypeRSA

    /// A private key from PEM (PKCS#8 `PRIVATE KEY`, SEC1 `EC PRIVATE KEY`, PKCS#1 `RSA PRIVATE KEY`), in Apple's
    /// external representation (EC: 04‖X‖Y‖K; RSA: PKCS#1 DER).
    static func privateKey(pem: String) -> (type: String, data: Data)? {
        if let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) { return (ecType, key.x963Representation) }
        if let key = try? P384.Signing.PrivateKey(pemRepresentation: pem) { return (ecType, key.x963Representation) }
        if let key = try? P521.Signing.PrivateKey(pemRepresentation: pem) { return (ecType, key.x963Representation) }
        if let key = try? _RSA.Signing.PrivateKey(pemRepresentation: pem) { return (rsaType, key.derRepresentation) }
        return nil
    }

    /// A private key from DER (PKCS#8 or SEC1 / PKCS#1).
    static func privateKey(der: Data) -> (type: String, data: Data)? {
        let bytes = [UInt8](der)
        if let key = try? P256.Signing.PrivateKey(derRepresentation: bytes) { return (ecType, key.x963Representation) }
        if let key = try? P384.Signing.PrivateKey(derRepresentation: bytes) { return (ecType, key.x963Representation) }
        if let key = try? P521.Signing.PrivateKey(derRepresentation: bytes) { return (ecType, key.x963Representation) }
        if let key = try? _RSA.Signing.PrivateKey(derRepresentation: der) { return (rsaType, key.derRepresentation) }
        return nil
    }

    /// A public key from PEM (`PUBLIC KEY` SPKI, `RSA PUBLIC KEY` PKCS#1): EC 04‖X‖Y; RSA PKCS#1 DER.
    static func publicKey(pem: String) -> (type: String, data: Data)? {
        if let key = try? P256.Signing.PublicKey(pemRepresentation: pem) { return (ecType, key.x963Representation) }
        if let key = try? P384.Signing.PublicKey(pemRepresentation: pem) { return (ecType, key.x963Representation) }
        if let key = try? P521.Signing.PublicKey(pemRepresentation: pem) { return (ecType, key.x963Representation) }
        if let key = try? _RSA.Signing.PublicKey(pemRepresentation: pem) { return (rsaType, key.pkcs1DERRepresentation) }
        return nil
    }

    /// A public key from DER (SPKI).
    static func publicKey(der: Data) -> (type: String, data: Data)? {
        let bytes = [UInt8](der)
        if let key = try? P256.Signing.PublicKey(derRepresentation: bytes) { return (ecType, key.x963Representation) }
        if let key = try? P384.Signing.PublicKey(derRepresentation: bytes) { return (ecType, key.x963Representation) }
        if let key = try? P521.Signing.PublicKey(derRepresentation: bytes) { return (ecType, key.x963Representation) }
        if let key = try? _RSA.Signing.PublicKey(derRepresentation: der) { return (rsaType, key.pkcs1DERRepresentation) }
        return nil
    }

    /// A stored private key as PKCS#8 PEM (`PRIVATE KEY`); nil when the bytes are not a key of `type`.
    static func pkcs8PEM(type: String, data: Data) -> String? {
        if type == ecType {
            if let key = try? P256.Signing.PrivateKey(x963Representation: data) { return key.pemRepresentation }
            if let key = try? P384.Signing.PrivateKey(x963Representation: data) { return key.pemRepresentation }
            if let key = try? P521.Signing.PrivateKey(x963Representation: data) { return key.pemRepresentation }
        } else if type == rsaType {
            if let key = try? _RSA.Signing.PrivateKey(unsafeDERRepresentation: data) { return key.pkcs8PEMRepresentation }
        }
        return nil
    }

    /// A stored public key as SPKI PEM (`PUBLIC KEY`).
    static func spkiPEM(type: String, data: Data) -> String? {
        if type == ecType {
            if let key = try? P256.Signing.PublicKey(x963Representation: data) { return key.pemRepresentation }
            if let key = try? P384.Signing.PublicKey(x963Representation: data) { return key.pemRepresentation }
            if let key = try? P521.Signing.PublicKey(x963Representation: data) { return key.pemRepresentation }
        } else if type == rsaType {
            if let key = try? _RSA.Signing.PublicKey(unsafeDERRepresentation: data) { return key.pemRepresentation }
        }
        return nil
    }
}

extension _RSA.Signing.PublicKey {
    /// PKCS#1 `RSAPublicKey` DER (Apple's format), through the SPKI swift-crypto writes: the SPKI's BIT STRING
    /// holds exactly these bytes, read with swift-asn1.
    var pkcs1DERRepresentation: Data {
        guard let spki = try? DER.parse([UInt8](derRepresentation)),
              case .constructed(let children) = spki.content else { return Data() }
        var iterator = children.makeIterator()
        _ = iterator.next()
        guard let bits = iterator.next(), let bitString = try? ASN1BitString(derEncoded: bits) else { return Data() }
        return Data(bitString.bytes)
    }
}

/// A key item's type attribute as text (`73`, `42`).
func keyTypeText(_ value: KeychainValue?) -> String? {
    switch value {
    case .string(let s)?: return s
    case .number(let n)?: return String(n)
    case .data(let d)?: return String(data: d, encoding: .utf8)
    default: return nil
    }
}

// MARK: - Output files

/// Writes `data` to `path`, created (or truncated) with mode 0600 and never through a symbolic link, so exported
/// keys are never readable by others; or to standard output when `path` is nil.
func writeOutput(_ data: Data, to path: String?) throws {
    guard let path else {
        FileHandle.standardOutput.write(data)
        return
    }
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else {
        throw ToolFailure(function: "SecItemExport", status: Status.wrPerm, reason: "cannot write \"\(path)\": \(String(cString: strerror(errno)))")
    }
    defer { close(fd) }
    // An existing file keeps its inode: make it private before anything is written.
    guard fchmod(fd, 0o600) == 0 else {
        throw ToolFailure(function: "SecItemExport", status: Status.wrPerm, reason: "cannot make \"\(path)\" private (mode 0600): \(String(cString: strerror(errno)))")
    }
    var offset = 0
    let bytes = [UInt8](data)
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written > 0 else {
            throw ToolFailure(function: "SecItemExport", status: Status.io, reason: "cannot write \"\(path)\": \(String(cString: strerror(errno)))")
        }
        offset += written
    }
}
#endif
