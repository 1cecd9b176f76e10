#if !canImport(Darwin)
import Foundation
import SwiftASN1
import X509

// The system's trusted roots on Linux, the anchors SecTrust uses unless SecTrustSetAnchorCertificates replaces
// them. Read once, on first use, and kept for the life of the process (as OpenSSL's default store).

enum TrustRoots {
    /// The bundle files distributions ship, in the order tried: Debian/Ubuntu, Fedora/RHEL, openSUSE, Alpine.
    static let bundleFiles = [
        "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem",
    ]

    /// The system's roots: `SSL_CERT_FILE` and `SSL_CERT_DIR` when set (as OpenSSL reads them), else the first
    /// bundle file that exists, else the PEM files of `/etc/ssl/certs`. Empty when none can be read: then only
    /// explicit anchors are trusted, never everything.
    static let system: [Certificate] = load(environment: ProcessInfo.processInfo.environment)

    static func load(environment: [String: String]) -> [Certificate] {
        var roots: [Certificate] = []
        let file = environment["SSL_CERT_FILE"].flatMap { $0.isEmpty ? nil : $0 }
        let directory = environment["SSL_CERT_DIR"].flatMap { $0.isEmpty ? nil : $0 }
        if let file { roots += certificates(inFile: file) }
        if let directory {
            for path in directory.split(separator: ":") { roots += certificates(inDirectory: String(path)) }
        }
        if file == nil, directory == nil {
            if let bundle = bundleFiles.first(where: { FileManager.default.isReadableFile(atPath: $0) }) {
                roots = certificates(inFile: bundle)
            } else {
                roots = certificates(inDirectory: "/etc/ssl/certs")
            }
        }
        var seen = Set<Certificate>()
        return roots.filter { seen.insert($0).inserted }
    }

    /// Every certificate of a PEM file (blocks that are not certificates, or do not parse, are skipped), or the one
    /// certificate of a DER file.
    static func certificates(inFile path: String) -> [Certificate] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        if let text = String(data: data, encoding: .utf8), text.contains("-----BEGIN") {
            return pemCertificates(text)
        }
        return (try? Certificate(derEncoded: [UInt8](data))).map { [$0] } ?? []
    }

    /// The certificates of a directory's files (OpenSSL's hashed links and `.pem`/`.crt` files alike).
    static func certificates(inDirectory path: String) -> [Certificate] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return [] }
        return names.sorted().flatMap { certificates(inFile: path + "/" + $0) }
    }

    /// The `CERTIFICATE` blocks of PEM text (also `TRUSTED CERTIFICATE`'s leading certificate is not read: OpenSSL
    /// trust settings are not modelled).
    static func pemCertificates(_ text: String) -> [Certificate] {
        var result: [Certificate] = []
        var block: [Substring]?
        for line in text.split(whereSeparator: \.isNewline) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed == "-----BEGIN CERTIFICATE-----" {
                block = []
            } else if trimmed == "-----END CERTIFICATE-----" {
                if let lines = block, let der = Data(base64Encoded: lines.joined()),
                   let certificate = try? Certificate(derEncoded: [UInt8](der)) {
                    result.append(certificate)
                }
                block = nil
            } else if block != nil {
                block?.append(Substring(trimmed))
            }
        }
        return result
    }
}

extension Certificate {
    /// The certificate's DER encoding.
    var derBytes: [UInt8] {
        var serializer = DER.Serializer()
        try? serializer.serialize(self)
        return serializer.serializedBytes
    }
}
#endif
