#if !canImport(Darwin)
import ArgumentParser
import Foundation
import KeychainEngine
import KeychainServices
import SwiftASN1

// `security`'s certificate and key verbs. Formats and rules follow Apple's SecurityTool sources
// (apple-open-source/macos, Security/SecurityTool/macOS/): keychain_import.c, keychain_export.m, keychain_find.c,
// identity_find.m, keychain_delete.c.

// MARK: - import

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

// MARK: - export

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

// MARK: - find-certificate

struct FindCertificate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-certificate",
        abstract: "Find certificates.",
        discussion: """
        -c matches a case-insensitive substring of the common name, -e an email address. Without -a only the \
        first match is shown; nothing found exits 44 (with -a, nothing found prints nothing and exits 0, as \
        security does). -Z prints "SHA-256 hash: …" and "SHA-1 hash: …" before each certificate, -m its email \
        addresses, -p the certificate as PEM instead of its attributes.
        """)
    @Flag(name: .customShort("a"), help: "Find all matching certificates, not just the first one.") var all = false
    @Option(name: .customShort("c"), help: "Match on name (a substring of the common name).") var name: String?
    @Option(name: .customShort("e"), help: "Match on an email address.") var email: String?
    @Flag(name: .customShort("m"), help: "Show the email addresses in the certificate.") var showEmail = false
    @Flag(name: .customShort("p"), help: "Output the certificate in PEM format.") var pem = false
    @Flag(name: .customShort("Z"), help: "Print the SHA-256 and SHA-1 hashes of the certificate.") var hash = false
    @Flag(help: "Print JSON (an array with -a).") var json = false
    @Argument(help: "Keychains to search (default: the search list).") var keychains: [String] = []

    mutating func run() throws {
        var matches = try CertificateStore.certificates(in: CertificateStore.paths(keychains)).filter { stored in
            if let email, !stored.emailAddresses.contains(where: { $0.caseInsensitiveCompare(email) == .orderedSame }) { return false }
            if let name, email == nil, !stored.nameMatches(name) { return false }  // with -e, security ignores -c
            return true
        }
        if !all { matches = Array(matches.prefix(1)) }
        if matches.isEmpty && !all {
            throw ToolFailure(function: email == nil ? "SecKeychainSearchCopyNext" : "SecCertificateFindByEmail", status: Status.itemNotFound)
        }
        if json {
            let objects = matches.map { certificateJSON($0, pem: pem) }
            printJSON(all ? objects as Any : objects[0] as Any)
            return
        }
        for stored in matches {
            var text = ""
            if hash { text += "SHA-256 hash: \(upperHex(stored.sha256))\nSHA-1 hash: \(upperHex(stored.sha1))\n" }
            if showEmail { text += "email addresses: \(stored.emailAddresses.joined(separator: ", "))\n" }
            text += pem ? pemBlock("CERTIFICATE", stored.der) : certificateBlock(stored)
            writeOut(text)
        }
    }
}

// MARK: - find-identity

struct FindIdentity: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-identity",
        abstract: "Find identities (certificates with their private keys).",
        discussion: """
        Lists each identity as `  1) <SHA-1 of the certificate> "<subject summary>"`, then `N identities found` \
        and, for the valid ones, `N valid identities found`. Keystone does not evaluate trust: a valid identity is \
        one whose certificate is within its validity dates now; others show (CSSMERR_TP_CERT_EXPIRED) or \
        (CSSMERR_TP_CERT_NOT_VALID_YET). -p only names the policy printed; -s keeps identities whose common \
        name, subject summary or email address contains the string.
        """)
    @Option(name: .customShort("p"), help: "Policy: ssl-client, ssl-server, smime, eap, ipsec, ichat, codesigning, basic (default), macappstore, appleID.") var policies: [String] = []
    @Option(name: .customShort("s"), help: "Policy-specific string (a host name or email address): kept when a name contains it.") var string: String?
    @Flag(name: .customShort("v"), help: "Show valid identities only.") var validOnly = false
    @Argument(help: "Keychains to search (default: the search list).") var keychains: [String] = []

    static let policyNames: [String: String] = [
        "ssl-client": "SSL (client)", "ssl-server": "SSL (server)", "smime": "S/MIME", "eap": "EAP", "ipsec": "IPsec",
        "ichat": "iChat", "codesigning": "Code Signing", "basic": "X.509 Basic", "macappstore": "Mac App Store Receipt",
        "appleID": "AppleID Sharing",
    ]

    func validate() throws {
        for policy in policies where Self.policyNames[policy] == nil {
            throw ValidationError("unknown policy \(policy): -p takes \(Self.policyNames.keys.sorted().joined(separator: ", "))")
        }
    }

    mutating func run() throws {
        let identities = try Self.identities(in: CertificateStore.paths(keychains)).filter { stored in
            guard let string else { return true }
            let names = [stored.commonName, stored.subjectSummary].compactMap { $0 } + stored.emailAddresses
            return names.contains { $0.range(of: string, options: .caseInsensitive) != nil }
        }
        var text = ""
        if let string { text += "Looking for identities matching \"\(string)\"\n" }
        let order = ["ssl-client", "ssl-server", "smime", "eap", "ipsec", "ichat", "codesigning", "basic", "appleID", "macappstore"]
        let chosen = policies.isEmpty ? ["basic"] : order.filter { policies.contains($0) }
        for policy in chosen {
            if !validOnly {
                text += "\nPolicy: \(Self.policyNames[policy]!)\n  Matching identities\n"
                for (index, stored) in identities.enumerated() { text += Self.line(index + 1, stored) }
                text += "     \(identities.count) identities found\n\n  Valid identities only\n"
            }
            let valid = identities.filter(\.isWithinValidity)
            for (index, stored) in valid.enumerated() { text += Self.line(index + 1, stored) }
            text += "     \(valid.count) valid identities found\n"
        }
        writeOut(text)
    }

    /// `printIdentity` (identity_find.m): `%3d) ` the SHA-1 in upper-case hex, the label in quotes, and the
    /// trust result in parentheses when it is not valid.
    static func line(_ ordinal: Int, _ stored: StoredCertificate) -> String {
        var line = String(format: "%3d) ", ordinal) + upperHex(stored.sha1) + " \"\(stored.subjectSummary ?? "<unknown>")\""
        if let validity = stored.validity, !stored.isWithinValidity {
            line += validity.notAfter < Date() ? " (CSSMERR_TP_CERT_EXPIRED)" : " (CSSMERR_TP_CERT_NOT_VALID_YET)"
        }
        return line + "\n"
    }

    /// The certificates that have a private key (`klbl` = the certificate's `pkhh`) in the same keychain.
    static func identities(in paths: [String]) throws -> [StoredCertificate] {
        var found: [StoredCertificate] = []
        for path in paths {
            let engine = KeychainEngine(storage: try openStorage(path))
            let query: KeychainQuery = [Key.class: .string(ItemClass.identity.rawValue), Key.matchLimit: .string(Key.matchLimitAll),
                                        Key.returnData: .bool(true)]
            let result: ItemResult?
            do { result = try engine.copyMatching(query) } catch let error as EngineError where error.status == Status.itemNotFound {
                continue
            } catch let error as EngineError {
                throw ToolFailure(function: "SecIdentitySearchCopyNext", status: error.status, reason: error.reason)
            }
            let identityCertificates = Set((result?.array ?? []).compactMap(\.data))
            found += try CertificateStore.certificates(in: [path]).filter { identityCertificates.contains($0.der) }
        }
        return found
    }
}

// MARK: - delete-certificate, delete-identity

/// The options both delete verbs share (keychain_delete.c: `c:Z:t`).
struct DeleteCertificateOptions: ParsableArguments {
    @Option(name: .customShort("c"), help: "Name of the certificate (a substring of its common name).") var name: String?
    @Option(name: .customShort("Z"), help: "SHA-1 (or SHA-256) hash of the certificate, in hexadecimal.") var hash: String?
    @Flag(name: .customShort("t"), help: "Also delete user trust settings (accepted: Keystone keeps no trust settings).") var trust = false
    @Argument(help: "Keychains to search (default: the search list).") var keychains: [String] = []

    func validate() throws {
        if name == nil && hash == nil { throw ValidationError("give -c name or -Z hash") }
    }

    /// Deletes the unique matching certificate; with `withKey`, its private key first (none is no error).
    func delete(withKey: Bool) throws {
        let stored = try CertificateStore.unique(in: CertificateStore.paths(keychains), name: name, hash: hash)
        let engine = KeychainEngine(storage: try openStorage(stored.keychain))
        if withKey, let hash = stored.attributes[Key.publicKeyHash]?.dataValue {
            do {
                try engine.delete([Key.class: .string(ItemClass.key.rawValue), Key.applicationLabel: .data(hash), Key.keyClass: .number(1)])
            } catch let error as EngineError where error.status == Status.itemNotFound {
                // No private key: deleting the certificate is still a success (as security does).
            } catch let error as EngineError {
                throw ToolFailure(function: "SecKeychainItemDelete", status: error.status, reason: error.reason)
            }
        }
        try call("SecKeychainItemDelete") {
            try engine.delete([Key.class: .string(ItemClass.certificate.rawValue), Key.valuePersistentRef: .data(stored.reference)])
        }
    }
}

struct DeleteCertificate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-certificate",
        abstract: "Delete a certificate.",
        discussion: """
        The certificate is found by -Z hash, else by -c name (a case-insensitive substring of the common name, an \
        exact match preferred); a name matching several certificates is refused (exit 1), nothing found exits 44. \
        Its private key stays (delete-identity deletes both).
        """)
    @OptionGroup var options: DeleteCertificateOptions

    mutating func run() throws { try options.delete(withKey: false) }
}

struct DeleteIdentity: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-identity",
        abstract: "Delete a certificate and its private key.",
        discussion: "Found as delete-certificate finds it; a certificate without a private key is deleted alone.")
    @OptionGroup var options: DeleteCertificateOptions

    mutating func run() throws { try options.delete(withKey: true) }
}
#endif
