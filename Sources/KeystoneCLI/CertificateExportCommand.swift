#if !canImport(Darwin)
import ArgumentParser
import Foundation
import KeychainEngine
import KeychainServices
import SwiftASN1

// `security`'s `export` verb. Formats and rules follow Apple's SecurityTool sources
// (apple-open-source/macos, Security/SecurityTool/macOS/): keychain_export.m.

struct ExportItems: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export certificates and keys from a keychain as PEM (or DER).",
        discussion: """
        -t certs (the default), pubKeys, privKeys, identities, allKeys or all. Private keys are exported only with \
        -t privKeys or identities, as PKCS#8 PEM (`PRIVATE KEY`); allKeys and all export public keys instead \
        (SPKI PEM, `PUBLIC KEY`). Certificates are PEM, or DER with -f x509 (one certificate, without -p). \
        -o FILE is created with mode 0600 (never through a symbolic link); without -o the output goes to \
        standard output. Not supported (errSecUnimplemented): -f pkcs12 and other formats, wrapped keys (-w, -P).
        """)
    @Option(name: .customShort("k"), help: "Keychain to export from (default: the search list).") var keychain: String?
    @Option(name: .customShort("t"), help: "certs, pubKeys, privKeys, identities, allKeys or all.") var type: String = "certs"
    @Option(name: .customShort("f"), help: "pemseq, x509, openssl or pkcs8.") var format: String?
    @Flag(name: .customShort("p"), help: "PEM armour (the default, except for -f x509).") var pem = false
    @Flag(name: .customShort("w"), help: "Wrap private keys (not supported).") var wrapped = false
    @Option(name: .customShort("P"), help: "Passphrase for wrapping (not supported).") var passphrase: String?
    @Option(name: .customShort("o"), help: "Output file (mode 0600); default: standard output.") var output: String?

    func validate() throws {
        guard ["certs", "pubKeys", "privKeys", "identities", "allKeys", "all"].contains(type) else {
            throw ValidationError("-t takes certs, pubKeys, privKeys, identities, allKeys or all")
        }
    }

    mutating func run() throws {
        let function = "SecItemExport"
        if let format, !["pemseq", "x509", "openssl", "pkcs8"].contains(format) {
            throw ToolFailure(function: function, status: Status.unimplemented, reason: "the format \(format) is not supported (PKCS#12 export is not: import only): use pemseq, x509, openssl or pkcs8")
        }
        if wrapped || passphrase != nil {
            throw ToolFailure(function: function, status: Status.unimplemented, reason: "wrapped (passphrase-protected) export is not supported; the key is exported as plain PKCS#8: protect the file")
        }
        let paths = CertificateStore.paths(keychain.map { [$0] } ?? [])
        var pieces: [String] = []
        var derCertificates: [Data] = []
        if type == "certs" || type == "all" {
            for stored in try CertificateStore.certificates(in: paths, function: function) {
                derCertificates.append(stored.der)
                pieces.append(pemBlock("CERTIFICATE", stored.der))
            }
        }
        if type == "pubKeys" || type == "allKeys" || type == "all" {
            for (keyType, data) in try keys(in: paths, keyClass: 0) {
                guard let text = KeyCodec.spkiPEM(type: keyType, data: data) else { continue }
                pieces.append(text.hasSuffix("\n") ? text : text + "\n")
            }
        }
        if type == "privKeys" {
            for (keyType, data) in try keys(in: paths, keyClass: 1) {
                guard let text = KeyCodec.pkcs8PEM(type: keyType, data: data) else { continue }
                pieces.append(text.hasSuffix("\n") ? text : text + "\n")
            }
        }
        if type == "identities" {
            for path in paths {
                let engine = KeychainEngine(storage: try openStorage(path))
                for stored in try CertificateStore.certificates(in: [path], function: function) {
                    guard let hash = stored.attributes[Key.publicKeyHash]?.dataValue else { continue }
                    let query: KeychainQuery = [Key.class: .string(ItemClass.key.rawValue), Key.applicationLabel: .data(hash),
                                                Key.keyClass: .number(1), Key.returnAttributes: .bool(true), Key.returnData: .bool(true)]
                    guard let key = try? engine.copyMatching(query)?.attributes, let data = key[Key.valueData]?.dataValue,
                          let keyType = keyTypeText(key[Key.keyType]), let text = KeyCodec.pkcs8PEM(type: keyType, data: data) else { continue }
                    derCertificates.append(stored.der)
                    pieces.append(pemBlock("CERTIFICATE", stored.der))
                    pieces.append(text.hasSuffix("\n") ? text : text + "\n")
                }
            }
        }
        guard !pieces.isEmpty else {
            throw ToolFailure(function: function, status: Status.itemNotFound, reason: "nothing of type \(type) to export")
        }
        if type == "allKeys" || type == "all" {
            writeErr("keystone: private keys are exported only with -t privKeys or -t identities\n")
        }
        if format == "x509" && !pem {
            guard type == "certs", derCertificates.count == 1 else {
                throw ToolFailure(function: function, status: Status.param, reason: "-f x509 without -p writes one DER certificate: \(derCertificates.count) certificates match; use -p or -f pemseq")
            }
            try writeOutput(derCertificates[0], to: output)
            return
        }
        try writeOutput(Data(pieces.joined().utf8), to: output)
    }

    /// The key items of one class (0 public, 1 private): their type and Apple-format bytes.
    func keys(in paths: [String], keyClass: Int64) throws -> [(String, Data)] {
        var found: [(String, Data)] = []
        for path in paths {
            let engine = KeychainEngine(storage: try openStorage(path))
            let query: KeychainQuery = [Key.class: .string(ItemClass.key.rawValue), Key.keyClass: .number(keyClass),
                                        Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true), Key.returnData: .bool(true)]
            let result: ItemResult?
            do { result = try engine.copyMatching(query) } catch let error as EngineError where error.status == Status.itemNotFound {
                continue
            } catch let error as EngineError {
                throw ToolFailure(function: "SecItemExport", status: error.status, reason: error.reason)
            }
            for item in result?.array ?? [] {
                guard let attributes = item.attributes, let data = attributes[Key.valueData]?.dataValue,
                      let keyType = keyTypeText(attributes[Key.keyType]) else { continue }
                found.append((keyType, data))
            }
        }
        return found
    }
}
#endif
