#if !canImport(Darwin)
import ArgumentParser
import Foundation
import KeychainEngine
import KeychainServices
import SwiftASN1

// `security`'s `import` verb: certificates, keys and identities (the other certificate and key verbs have files of
// their own). Formats and rules follow Apple's SecurityTool sources (apple-open-source/macos,
// Security/SecurityTool/macOS/): keychain_import.c.

/// One item read from an import file.
enum ImportedItem {
    case certificate(SecCertificate)
    case privateKey(type: String, data: Data)
    case publicKey(type: String, data: Data)
}

struct ImportItems: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import certificates and keys (PEM or DER) into a keychain.",
        discussion: """
        Reads PEM (one or several blocks: CERTIFICATE, PRIVATE KEY (PKCS#8), EC PRIVATE KEY (SEC1), RSA PRIVATE KEY \
        (PKCS#1), PUBLIC KEY), one DER certificate or key, or a PKCS#12 file (-f pkcs12, or a .p12/.pfx name; its \
        passphrase from -P, a prompt, or one line of standard input). Prints `1 identity imported.`, `N keys imported.` and `N certificates imported.` \
        as security does. A certificate's label is its subject summary; a key's is "Imported Private Key" or \
        "Imported Public Key", as macOS sets. Items already in the keychain are left as they are; when nothing new \
        was imported, the import fails with errSecDuplicateItem (exit 45). Not supported (errSecUnimplemented, \
        exit 252): encrypted PEM keys, wrapped keys (-w) and the other \
        formats of security's -f.

        With --from SOURCE it imports passwords instead (see <doc:Importing> in Keystone's documentation): from \
        keychain-swift, swift-keychain-wrapper, valet or keychain-access items in the keychain, secret-service[:COLLECTION], \
        pass[:DIR], csv:FILE or json:FILE. One line per item (add, unchanged, skip (exists), replace; names only, never \
        a secret) and a summary. Existing items are never overwritten without --replace; --dry-run changes nothing.
        """)
    @Argument(help: "The file to import (with --from: the source's file or directory, when not given in SOURCE).") var file: String?
    @OptionGroup var passwords: ImportSourceOptions
    @Option(name: .customShort("k"), help: "Keychain to import into (default: the default keychain).") var keychain: String?
    @Option(name: .customShort("t"), help: "Item type: cert, priv, pub or agg (default: whatever the file holds).") var type: String?
    @Option(name: .customShort("f"), help: "Format: pemseq, x509, openssl, pkcs8 or pkcs12 (the rest: not supported).") var format: String?
    @Option(name: .customShort("P"), help: "Passphrase of a PKCS#12 file (visible to other users in ps: prefer the prompt or standard input).") var passphrase: String?
    @Flag(name: .customShort("w"), help: "Wrapped key (not supported).") var wrapped = false
    @Flag(name: .customShort("x"), help: "Non-extractable (accepted; keys stay exportable here).") var nonExtractable = false
    @Flag(name: .customShort("A"), help: "Allow any application (accepted; the default here).") var anyApplication = false
    @Option(name: .customShort("T"), help: "An application allowed to use the item (accepted; Linux has no per-application ACL).") var applications: [String] = []
    @Flag(help: "Print the counts as JSON.") var json = false

    func validate() throws {
        if passwords.from != nil {
            guard type == nil, format == nil, passphrase == nil, !wrapped else { throw ValidationError("-t, -f, -P and -w import certificates and keys: not with --from") }
            return
        }
        if file == nil { throw ValidationError("Missing expected argument '<file>' (or --from SOURCE)") }
        if let type, !["cert", "priv", "pub", "agg"].contains(type) {
            throw ValidationError("-t takes cert, priv, pub or agg (session keys are not supported)")
        }
        let known = ["openssl", "openssh1", "openssh2", "bsafe", "raw", "pkcs7", "pkcs8", "pkcs12", "netscape", "x509", "pemseq"]
        if let format, !known.contains(format) { throw ValidationError("-f takes one of \(known.joined(separator: ", "))") }
    }

    mutating func run() throws {
        if passwords.from != nil { return try ImportFrom.run(passwords, file: file, keychainArgument: keychain) }
        let file = self.file ?? ""
        let function = "SecKeychainItemImport"
        let lowerName = file.lowercased()
        let isPKCS12 = format == "pkcs12" || (format == nil && (lowerName.hasSuffix(".p12") || lowerName.hasSuffix(".pfx")))
        if let format, !["pemseq", "x509", "openssl", "pkcs8", "pkcs12"].contains(format) {
            throw ToolFailure(function: function, status: Status.unimplemented, reason: "the format \(format) is not supported: use PEM or DER certificates and PKCS#8, SEC1 or PKCS#1 keys")
        }
        if wrapped {
            throw ToolFailure(function: function, status: Status.unimplemented, reason: "wrapped (encrypted) keys are not supported: decrypt the key first (openssl pkey -in FILE -out key.pem)")
        }
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ToolFailure(function: function, status: Status.io, reason: "cannot read \"\(file)\"")
        }
        var identities = 0
        var items: [ImportedItem]
        if isPKCS12 {
            // The passphrase: -P (as security takes it; visible in `ps`), else a prompt or one line of standard input.
            let secret = try passphrase ?? readSecret(prompt: "passphrase for \"\(file)\": ", option: "-P")
            items = try Self.parsePKCS12(data, passphrase: secret)
            identities = 1
        } else {
            items = try Self.parse(data)
        }
        switch type {
        case "cert": items = items.filter { if case .certificate = $0 { true } else { false } }
        case "priv": items = items.filter { if case .privateKey = $0 { true } else { false } }
        case "pub": items = items.filter { if case .publicKey = $0 { true } else { false } }
        default: break
        }
        guard !items.isEmpty else {
            throw ToolFailure(function: function, status: Status.unknownFormat, reason: "\"\(file)\" holds no item of type \(type ?? "cert, priv or pub")")
        }

        let path = keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain
        let engine = KeychainEngine(storage: try openStorage(path))
        var certificates = 0, keys = 0, duplicates = 0
        for item in items {
            let query = try Self.itemQuery(item)
            do {
                try engine.add(query)
                if case .certificate = item { certificates += 1 } else { keys += 1 }
            } catch let error as EngineError where error.status == Status.duplicateItem {
                duplicates += 1
            } catch let error as EngineError {
                throw ToolFailure(function: function, status: error.status, reason: error.reason)
            }
        }
        if certificates + keys == 0 {
            throw ToolFailure(function: function, status: Status.duplicateItem,
                              reason: "every item of \"\(file)\" is already in \"\(path)\"; nothing was imported")
        }
        if identities > 0 {
            // A PKCS#12 file's key and first certificate are its identity; its other certificates count as such.
            keys -= min(keys, 1)
            certificates -= min(certificates, 1)
        }
        if json {
            printJSON(["keychain": path, "certificates": certificates, "keys": keys, "identities": identities, "alreadyPresent": duplicates])
            return
        }
        if identities > 0 { writeOut("1 identity imported.\n") }
        if keys > 0 { writeOut("\(keys) \(keys > 1 ? "keys" : "key") imported.\n") }
        if certificates > 0 { writeOut("\(certificates) \(certificates > 1 ? "certificates" : "certificate") imported.\n") }
        if duplicates > 0 {
            writeErr("keystone: \(duplicates) item\(duplicates == 1 ? " was" : "s were") already in the keychain and left as \(duplicates == 1 ? "it was" : "they were").\n")
        }
    }

    /// The identity (the private key and its certificate) and the other certificates of a PKCS#12 file, read by
    /// `SecPKCS12Import`.
    ///
    /// - Throws: ``ToolFailure`` with errSecAuthFailed (wrong passphrase, exit 51) or errSecDecode (not a PKCS#12
    ///   file Keystone can read).
    static func parsePKCS12(_ data: Data, passphrase: String) throws -> [ImportedItem] {
        var result: CFArray?
        let status = SecPKCS12Import(NSData(data: data), [kSecImportExportPassphrase: passphrase], &result)
        guard status == errSecSuccess, let item = (result as? [[String: Any]])?.first,
              let identity = item[kSecImportItemIdentity] as? SecIdentity else {
            let reason = status == errSecAuthFailed ? "the passphrase does not open the PKCS#12 file"
                : "not a PKCS#12 file Keystone can read (an EC P-256/384/521 or RSA key and its certificate)"
            throw ToolFailure(function: "SecPKCS12Import", status: status == errSecSuccess ? Status.decode : status, reason: reason)
        }
        var key: SecKey?
        var certificate: SecCertificate?
        _ = SecIdentityCopyPrivateKey(identity, &key)
        _ = SecIdentityCopyCertificate(identity, &certificate)
        guard let key, let certificate, let attributes = SecKeyCopyAttributes(key) as? [String: Any],
              let type = attributes[kSecAttrKeyType] as? String,
              let keyData = SecKeyCopyExternalRepresentation(key, nil) else {
            throw ToolFailure(function: "SecPKCS12Import", status: Status.decode, reason: "the PKCS#12 file's identity is incomplete")
        }
        let chain = (item[kSecImportItemCertChain] as? [SecCertificate] ?? []).filter { $0 != certificate }
        return [.privateKey(type: type, data: Data(referencing: keyData)), .certificate(certificate)] + chain.map { .certificate($0) }
    }

    /// The items of a PEM or DER file. Never a crash on garbage: errSecUnknownFormat with what was wrong.
    static func parse(_ data: Data) throws -> [ImportedItem] {
        let function = "SecKeychainItemImport"
        if let text = String(data: data, encoding: .utf8), text.contains("-----BEGIN ") {
            if text.contains("Proc-Type: 4,ENCRYPTED") || text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
                throw ToolFailure(function: function, status: Status.unimplemented,
                                  reason: "encrypted private keys are not supported: decrypt first (openssl pkey -in FILE -out key.pem) and keep the result private")
            }
            var items: [ImportedItem] = []
            for (index, block) in pemBlocks(text).enumerated() {
                let where_ = "PEM block \(index + 1) (\(block.type))"
                switch block.type {
                case "CERTIFICATE", "X509 CERTIFICATE":
                    guard let document = try? PEMDocument(pemString: block.text),
                          let certificate = SecCertificateCreateWithData(nil, NSData(data: Data(document.derBytes))) else {
                        throw ToolFailure(function: function, status: Status.unknownFormat, reason: "\(where_) is not a valid X.509 certificate")
                    }
                    items.append(.certificate(certificate))
                case "PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY":
                    guard let key = KeyCodec.privateKey(pem: block.text) else {
                        throw ToolFailure(function: function, status: Status.unknownFormat,
                                          reason: "\(where_) is not a supported private key (EC P-256, P-384, P-521 or RSA of 2048 bits or more)")
                    }
                    items.append(.privateKey(type: key.type, data: key.data))
                case "PUBLIC KEY", "RSA PUBLIC KEY":
                    guard let key = KeyCodec.publicKey(pem: block.text) else {
                        throw ToolFailure(function: function, status: Status.unknownFormat, reason: "\(where_) is not a supported public key")
                    }
                    items.append(.publicKey(type: key.type, data: key.data))
                case "EC PARAMETERS":
                    continue  // `openssl ecparam -genkey` writes the curve before the key
                default:
                    throw ToolFailure(function: function, status: Status.unknownFormat, reason: "\(where_) is not supported")
                }
            }
            guard !items.isEmpty else {
                throw ToolFailure(function: function, status: Status.unknownFormat, reason: "no complete PEM block was found")
            }
            return items
        }
        if let certificate = SecCertificateCreateWithData(nil, NSData(data: data)) { return [.certificate(certificate)] }
        if let key = KeyCodec.privateKey(der: data) { return [.privateKey(type: key.type, data: key.data)] }
        if let key = KeyCodec.publicKey(der: data) { return [.publicKey(type: key.type, data: key.data)] }
        throw ToolFailure(function: function, status: Status.unknownFormat,
                          reason: "not a PEM file, nor one DER certificate or key (a PKCS#12 file needs -f pkcs12 or a .p12/.pfx name)")
    }

    /// The PEM blocks of `text`, each with its type and its text from BEGIN to END (headers and text between
    /// blocks, such as openssl's "Bag Attributes", are left out by the block boundaries).
    static func pemBlocks(_ text: String) -> [(type: String, text: String)] {
        var blocks: [(type: String, text: String)] = []
        var current: (type: String, lines: [String])?
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            let line = rawLine.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.hasPrefix("-----BEGIN "), line.hasSuffix("-----"), line.count > 16 {
                current = (String(line.dropFirst(11).dropLast(5)), [line])
            } else if let open = current {
                current?.lines.append(line)
                if line == "-----END \(open.type)-----" {
                    blocks.append((open.type, (current?.lines ?? []).joined(separator: "\n")))
                    current = nil
                }
            }
        }
        return blocks
    }

    /// The keychain item for one imported item, with the attributes Apple stores.
    static func itemQuery(_ item: ImportedItem) throws -> KeychainQuery {
        switch item {
        case .certificate(let certificate):
            guard let attributes = certificate.keychainAttributes else {
                throw ToolFailure(function: "SecKeychainItemImport", status: Status.param, reason: "the certificate's issuer name cannot be normalized, so it cannot be stored")
            }
            return try call("SecKeychainItemImport") { try SecItemBridge.query(attributes) }
        case .privateKey(let type, let data), .publicKey(let type, let data):
            let isPrivate: Bool = if case .privateKey = item { true } else { false }
            let parameters: [AnyHashable: Any] = [
                kSecAttrKeyType: type,
                kSecAttrKeyClass: isPrivate ? kSecAttrKeyClassPrivate : kSecAttrKeyClassPublic,
                kSecAttrIsPermanent: true,
                // What macOS's SecKeychainItemImport labels a key it imports.
                kSecAttrLabel: isPrivate ? "Imported Private Key" : "Imported Public Key",
            ]
            let key: SecKey
            do { key = try SecKey.make(attributes: parameters, data: data) } catch {
                throw ToolFailure(function: "SecKeychainItemImport", status: Status.unknownFormat, reason: "the key is not one Keystone supports")
            }
            var query = try call("SecKeychainItemImport") { try SecItemBridge.query(key.keychainAttributes) }
            query[Key.class] = .string(ItemClass.key.rawValue)
            query[Key.valueData] = .data(key.keyData)
            return query
        }
    }
}
#endif
