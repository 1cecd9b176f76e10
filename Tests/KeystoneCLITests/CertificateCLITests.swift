import Foundation
import Testing

/// The real openssl, which makes the certificates and keys and reads back what the CLI writes.
enum OpenSSL {
    static let path = "/usr/bin/openssl"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: path) }

    @discardableResult
    static func run(_ arguments: [String], in directory: URL, input: Data? = nil) throws -> Run {
        try Run.launch(path, arguments, in: directory, input: input)
    }
}

/// A sandbox with a keychain and a directory of openssl-made files.
struct CertificateBox {
    let box = Sandbox()
    var work: URL { box.root.appendingPathComponent("work") }
    var keychain: String { box.root.appendingPathComponent("data/keystone/certs.keychain-db").path }
    func file(_ name: String) -> String { work.appendingPathComponent(name).path }

    init() throws {
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        #expect(try box.run("create-keychain", "-p", "pw", "certs").status == 0)
    }

    /// A self-signed certificate and its key (`openssl req -x509`): NAME.pem and NAME.key.
    func makeIdentity(_ name: String, subject: String, key: [String] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]) throws {
        let made = try OpenSSL.run(["req", "-x509"] + key + ["-nodes", "-keyout", "\(name).key", "-out", "\(name).pem",
                                    "-days", "30", "-subj", subject], in: work)
        try #require(made.status == 0, "openssl req: \(made.stderr)")
    }

    func openssl(_ arguments: String...) throws -> Run { try OpenSSL.run(arguments, in: work) }
    func keystone(_ arguments: String...) throws -> Run { try box.run(arguments) }
    func keystone(_ arguments: [String], input: String) throws -> Run { try box.run(arguments, input: input) }
}

@Suite("keystone CLI: certificates and keys (import, export, find-certificate, find-identity, delete-*)",
       .enabled(if: OpenSSL.available, "needs /usr/bin/openssl to make and read certificates"))
struct CertificateCLITests {
    @Test("import a PEM certificate and key from openssl req -x509; find-certificate -p reads back the same subject and serial, -Z its SHA-1")
    func importAndFind() throws {
        let c = try CertificateBox()
        try c.makeIdentity("id", subject: "/CN=Keystone CLI Test/O=Example/emailAddress=dev@example.com")
        let cert = try c.keystone("import", c.file("id.pem"), "-k", c.keychain)
        #expect(cert.status == 0)
        #expect(cert.stdout == "1 certificate imported.\n")
        let key = try c.keystone("import", c.file("id.key"), "-k", c.keychain, "-t", "priv")
        #expect(key.status == 0)
        #expect(key.stdout == "1 key imported.\n")

        // -p: a PEM openssl reads, with the original's subject and serial number.
        let pem = try c.keystone("find-certificate", "-c", "cli test", "-p", c.keychain)
        #expect(pem.status == 0)
        try Data(pem.stdout.utf8).write(to: c.work.appendingPathComponent("back.pem"))
        let original = try c.openssl("x509", "-in", "id.pem", "-noout", "-subject", "-serial")
        let back = try c.openssl("x509", "-in", "back.pem", "-noout", "-subject", "-serial")
        #expect(back.status == 0)
        #expect(back.stdout == original.stdout && !original.stdout.isEmpty)

        // -Z: the SHA-1 openssl prints (openssl with colons, security without).
        let hashes = try c.keystone("find-certificate", "-Z", "-c", "Keystone", c.keychain)
        let fingerprint = try c.openssl("x509", "-in", "id.pem", "-noout", "-fingerprint", "-sha1").stdout
        let sha1 = fingerprint.split(separator: "=").last.map { $0.replacingOccurrences(of: ":", with: "").trimmingCharacters(in: .whitespacesAndNewlines) } ?? "?"
        #expect(hashes.stdout.contains("SHA-1 hash: \(sha1)\n"))
        #expect(hashes.stdout.hasPrefix("SHA-256 hash: "))

        // The attribute block, in security's layout.
        #expect(hashes.stdout.contains("class: 0x80001000 \nattributes:\n    \"alis\"<blob>=\"dev@example.com\"\n    \"cenc\"<uint32>=0x00000003 \n    \"ctyp\"<uint32>=0x00000003 \n"))
        #expect(hashes.stdout.contains("    \"labl\"<blob>=\"Keystone CLI Test\"\n"))
        #expect(hashes.stdout.contains("keychain: \"\(c.keychain)\"\nversion: 512\n"))
    }

    @Test("an EC key and its certificate are one identity; export -t privKeys -f pkcs8 gives the same key (file mode 0600); delete-identity removes both")
    func identityExportDelete() throws {
        let c = try CertificateBox()
        try c.makeIdentity("id", subject: "/CN=Identity Test")
        let both = c.file("both.pem")
        try (String(contentsOfFile: c.file("id.pem"), encoding: .utf8) + String(contentsOfFile: c.file("id.key"), encoding: .utf8))
            .write(toFile: both, atomically: true, encoding: .utf8)
        let imported = try c.keystone("import", both, "-k", c.keychain)
        #expect(imported.stdout == "1 key imported.\n1 certificate imported.\n")

        let fingerprint = try c.openssl("x509", "-in", "id.pem", "-noout", "-fingerprint", "-sha1").stdout
        let sha1 = fingerprint.split(separator: "=").last.map { $0.replacingOccurrences(of: ":", with: "").trimmingCharacters(in: .whitespacesAndNewlines) } ?? "?"
        let identities = try c.keystone("find-identity", c.keychain)
        #expect(identities.status == 0)
        #expect(identities.stdout == """

            Policy: X.509 Basic
              Matching identities
              1) \(sha1) "Identity Test"
                 1 identities found

              Valid identities only
              1) \(sha1) "Identity Test"
                 1 valid identities found

            """)
        let valid = try c.keystone("find-identity", "-v", "-p", "codesigning", c.keychain)
        #expect(valid.stdout == "  1) \(sha1) \"Identity Test\"\n     1 valid identities found\n")

        // Export: a PKCS#8 key openssl accepts, equal to the imported one; the file is private.
        let out = c.file("exported.pem")
        let export = try c.keystone("export", "-k", c.keychain, "-t", "privKeys", "-f", "pkcs8", "-o", out)
        #expect(export.status == 0)
        #expect(export.stdout.isEmpty && !export.stderr.contains("PRIVATE"))
        let mode = try FileManager.default.attributesOfItem(atPath: out)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try String(contentsOfFile: out, encoding: .utf8).hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        #expect(try c.openssl("pkey", "-in", "exported.pem", "-noout").status == 0)
        let exportedPublic = try c.openssl("pkey", "-in", "exported.pem", "-pubout")
        let originalPublic = try c.openssl("pkey", "-in", "id.key", "-pubout")
        #expect(exportedPublic.stdout == originalPublic.stdout && exportedPublic.stdout.contains("PUBLIC KEY"))
        // Certificates: PEM by default, DER with -f x509.
        let certs = try c.keystone("export", "-k", c.keychain, "-t", "certs")
        #expect(certs.stdout.hasPrefix("-----BEGIN CERTIFICATE-----\n"))
        #expect(try c.keystone("export", "-k", c.keychain, "-t", "certs", "-f", "x509", "-o", c.file("cert.der")).status == 0)
        #expect(try c.openssl("x509", "-inform", "DER", "-in", "cert.der", "-noout", "-fingerprint", "-sha1").stdout == fingerprint)
        // -t all: no private key.
        let all = try c.keystone("export", "-k", c.keychain, "-t", "all")
        #expect(all.status == 0 && !all.stdout.contains("PRIVATE KEY") && all.stdout.contains("PUBLIC KEY") == false)

        // delete-identity: the certificate and its key are gone.
        let delete = try c.keystone("delete-identity", "-c", "identity test", c.keychain)
        #expect(delete.status == 0)
        #expect(try c.keystone("find-identity", "-v", c.keychain).stdout == "     0 valid identities found\n")
        #expect(try c.keystone("find-certificate", "-c", "Identity", c.keychain).status == 44)
        #expect(try c.keystone("export", "-k", c.keychain, "-t", "privKeys").status == 44)
    }

    @Test("delete-certificate -Z deletes the certificate and keeps its key; an ambiguous -c is refused; not found exits 44")
    func deleteCertificate() throws {
        let c = try CertificateBox()
        try c.makeIdentity("a", subject: "/CN=Shared Name One")
        try c.makeIdentity("b", subject: "/CN=Shared Name Two")
        #expect(try c.keystone("import", c.file("a.pem"), "-k", c.keychain).status == 0)
        #expect(try c.keystone("import", c.file("b.pem"), "-k", c.keychain).status == 0)
        #expect(try c.keystone("import", c.file("a.key"), "-k", c.keychain).status == 0)

        let ambiguous = try c.keystone("delete-certificate", "-c", "shared name", c.keychain)
        #expect(ambiguous.status == 1)
        #expect(ambiguous.stderr.contains("\"shared name\" is ambiguous, matches more than one certificate"))
        #expect(try c.keystone("find-certificate", "-a", "-c", "Shared", c.keychain).stdout.components(separatedBy: "class: 0x80001000").count == 3)

        let missing = try c.keystone("delete-certificate", "-c", "no such name", c.keychain)
        #expect(missing.status == 44)
        #expect(missing.stderr.contains("Unable to delete certificate matching \"no such name\""))
        #expect(try c.keystone("delete-certificate", c.keychain).status == 2)  // neither -c nor -Z: usage

        let hash = try c.keystone("find-certificate", "-Z", "-c", "Shared Name One", c.keychain).stdout
            .split(separator: "\n").first { $0.hasPrefix("SHA-1 hash: ") }.map { String($0.dropFirst(12)) } ?? ""
        #expect(hash.count == 40)
        #expect(try c.keystone("delete-certificate", "-Z", hash, "-t", c.keychain).status == 0)
        #expect(try c.keystone("find-certificate", "-c", "Shared Name One", c.keychain).status == 44)
        #expect(try c.keystone("find-certificate", "-c", "Shared Name Two", c.keychain).status == 0)
        #expect(try c.keystone("export", "-k", c.keychain, "-t", "privKeys").stdout.contains("-----BEGIN PRIVATE KEY-----"))

        // find-certificate: nothing found exits 44; with -a it prints nothing and exits 0, as security does.
        #expect(try c.keystone("find-certificate", "-c", "absent", c.keychain).status == 44)
        let none = try c.keystone("find-certificate", "-a", "-c", "absent", c.keychain)
        #expect(none.status == 0 && none.stdout.isEmpty)
    }

    @Test("importing what is already there: errSecDuplicateItem (exit 45) only when nothing new was imported")
    func duplicates() throws {
        let c = try CertificateBox()
        try c.makeIdentity("id", subject: "/CN=Duplicate Test")
        #expect(try c.keystone("import", c.file("id.pem"), "-k", c.keychain).status == 0)
        let again = try c.keystone("import", c.file("id.pem"), "-k", c.keychain)
        #expect(again.status == 45)
        #expect(again.stderr.contains("The specified item already exists in the keychain."))
        #expect(again.stdout.isEmpty)
        // The certificate is there, the key is new: the key is imported and the import succeeds.
        let both = c.file("both.pem")
        try (String(contentsOfFile: c.file("id.pem"), encoding: .utf8) + String(contentsOfFile: c.file("id.key"), encoding: .utf8))
            .write(toFile: both, atomically: true, encoding: .utf8)
        let mixed = try c.keystone("import", both, "-k", c.keychain)
        #expect(mixed.status == 0)
        #expect(mixed.stdout == "1 key imported.\n")
        #expect(mixed.stderr.contains("1 item was already in the keychain"))
        #expect(try c.keystone("find-certificate", "-a", "-c", "Duplicate", c.keychain).stdout.components(separatedBy: "class: 0x80001000").count == 2)
    }

    @Test("key formats: PKCS#8, SEC1, PKCS#1 RSA and DER certificates import; each private key exports as the same key")
    func keyFormats() throws {
        let c = try CertificateBox()
        try c.makeIdentity("rsa", subject: "/CN=RSA Test", key: ["-newkey", "rsa:2048"])
        #expect(try c.openssl("rsa", "-in", "rsa.key", "-traditional", "-out", "rsa1.key").status == 0)
        #expect(try String(contentsOfFile: c.file("rsa1.key"), encoding: .utf8).hasPrefix("-----BEGIN RSA PRIVATE KEY-----"))
        #expect(try c.openssl("ecparam", "-name", "secp384r1", "-genkey", "-out", "sec1.key").status == 0)
        #expect(try String(contentsOfFile: c.file("sec1.key"), encoding: .utf8).contains("-----BEGIN EC PRIVATE KEY-----"))
        #expect(try c.openssl("x509", "-in", "rsa.pem", "-outform", "DER", "-out", "rsa.der").status == 0)

        #expect(try c.keystone("import", c.file("rsa1.key"), "-k", c.keychain).stdout == "1 key imported.\n")
        #expect(try c.keystone("import", c.file("sec1.key"), "-k", c.keychain).stdout == "1 key imported.\n")
        #expect(try c.keystone("import", c.file("rsa.der"), "-k", c.keychain, "-f", "x509").stdout == "1 certificate imported.\n")
        #expect(try c.keystone("find-identity", "-v", "-s", "rsa", c.keychain).stdout.hasSuffix("     1 valid identities found\n"))

        let exported = try c.keystone("export", "-k", c.keychain, "-t", "identities", "-o", c.file("identities.pem"))
        #expect(exported.status == 0)
        let text = try String(contentsOfFile: c.file("identities.pem"), encoding: .utf8)
        #expect(text.hasPrefix("-----BEGIN CERTIFICATE-----") && text.contains("-----BEGIN PRIVATE KEY-----"))
        #expect(try c.openssl("pkey", "-in", "identities.pem", "-pubout").stdout == c.openssl("pkey", "-in", "rsa.key", "-pubout").stdout)
        let keys = try c.keystone("export", "-k", c.keychain, "-t", "privKeys")
        #expect(keys.stdout.components(separatedBy: "-----BEGIN PRIVATE KEY-----").count == 3)
    }

    @Test("a PKCS#12 file from openssl pkcs12 -export imports as one identity, its passphrase read from standard input; a wrong one exits 51")
    func importPKCS12() throws {
        let c = try CertificateBox()
        try c.makeIdentity("id", subject: "/CN=PKCS12 CLI")
        #expect(try c.openssl("pkcs12", "-export", "-inkey", "id.key", "-in", "id.pem", "-passout", "pass:p12-secret", "-out", "id.p12").status == 0)
        let wrong = try c.keystone(["import", c.file("id.p12"), "-k", c.keychain], input: "not-it\n")
        #expect(wrong.status == 51)  // errSecAuthFailed -25293
        #expect(wrong.stderr.contains("passphrase does not open"))
        let imported = try c.keystone(["import", c.file("id.p12"), "-k", c.keychain], input: "p12-secret\n")
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout == "1 identity imported.\n")
        #expect(!imported.stdout.contains("p12-secret") && !imported.stderr.contains("p12-secret"))
        let identities = try c.keystone("find-identity", c.keychain)
        #expect(identities.stdout.contains("\"PKCS12 CLI\""))
        #expect(identities.stdout.contains("1 identities found") || identities.stdout.contains("1 identity found"))
        // Importing it again adds nothing: errSecDuplicateItem.
        #expect(try c.keystone(["import", c.file("id.p12"), "-k", c.keychain], input: "p12-secret\n").status == 45)
    }

    @Test("garbage, encrypted keys and PKCS#12 give a clear error and exit code, never a crash")
    func refusals() throws {
        let c = try CertificateBox()
        var generator = SystemRandomNumberGenerator()
        let junk = Data((0..<512).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try junk.write(to: c.work.appendingPathComponent("junk.bin"))
        let garbage = try c.keystone("import", c.file("junk.bin"), "-k", c.keychain)
        #expect(garbage.status == 87)  // errSecUnknownFormat -25257
        #expect(garbage.stderr.contains("keystone: SecKeychainItemImport: Unknown format in import."))
        try "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n".write(toFile: c.file("bad.pem"), atomically: true, encoding: .utf8)
        let badPEM = try c.keystone("import", c.file("bad.pem"), "-k", c.keychain)
        #expect(badPEM.status == 87 && badPEM.stderr.contains("not a valid X.509 certificate"))
        try "-----BEGIN CERTIFICATE-----\nMIIB\n".write(toFile: c.file("cut.pem"), atomically: true, encoding: .utf8)
        #expect(try c.keystone("import", c.file("cut.pem"), "-k", c.keychain).status == 87)
        try Data().write(to: c.work.appendingPathComponent("empty.der"))
        #expect(try c.keystone("import", c.file("empty.der"), "-k", c.keychain).status == 87)

        #expect(try c.openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-aes256", "-pass", "pass:secret", "-out", "enc.key").status == 0)
        let encrypted = try c.keystone("import", c.file("enc.key"), "-k", c.keychain)
        #expect(encrypted.status == 252)  // errSecUnimplemented -4
        #expect(encrypted.stderr.contains("encrypted private keys are not supported"))
        let pkcs12 = try c.keystone("import", c.file("junk.bin"), "-k", c.keychain, "-f", "pkcs12", "-P", "x")
        #expect(pkcs12.status == 93 && pkcs12.stderr.contains("not a PKCS#12 file"))  // errSecDecode -26275
        #expect(try c.keystone("export", "-k", c.keychain, "-f", "pkcs12").status == 252)
        #expect(try c.keystone("import", c.file("junk.bin"), "-t", "nonsense").status == 2)
        #expect(try c.keystone("import", c.file("missing.pem"), "-k", c.keychain).status != 0)
        // Nothing was stored by any of these.
        #expect(try c.keystone("export", "-k", c.keychain, "-t", "all").status == 44)
    }

    @Test("--json outputs parse as JSON")
    func json() throws {
        let c = try CertificateBox()
        try c.makeIdentity("id", subject: "/CN=JSON Test/emailAddress=json@example.com")
        let imported = try c.keystone("import", c.file("id.pem"), "-k", c.keychain, "--json")
        let counts = try #require(try JSONSerialization.jsonObject(with: Data(imported.stdout.utf8)) as? [String: Any])
        #expect(counts["certificates"] as? Int == 1 && counts["keys"] as? Int == 0)

        let one = try c.keystone("find-certificate", "-c", "json", "--json", "-p", c.keychain)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(one.stdout.utf8)) as? [String: Any])
        #expect(object["commonName"] as? String == "JSON Test")
        #expect(object["emailAddresses"] as? [String] == ["json@example.com"])
        #expect((object["pem"] as? String)?.hasPrefix("-----BEGIN CERTIFICATE-----") == true)
        #expect((object["sha1"] as? String)?.count == 40)

        let byEmail = try c.keystone("find-certificate", "-a", "-e", "JSON@example.com", "--json", c.keychain)
        let array = try #require(try JSONSerialization.jsonObject(with: Data(byEmail.stdout.utf8)) as? [[String: Any]])
        #expect(array.count == 1)
        let none = try c.keystone("find-certificate", "-a", "-c", "absent", "--json", c.keychain)
        #expect((try JSONSerialization.jsonObject(with: Data(none.stdout.utf8)) as? [Any])?.isEmpty == true)
    }

    @Test("getopt habits: -c name values and flag groups (-aZ, -Zp) normalise")
    func getopt() throws {
        let c = try CertificateBox()
        try c.makeIdentity("id", subject: "/CN=Getopt Test")
        #expect(try c.keystone("import", c.file("id.pem"), "-k" + c.keychain).status == 0)
        let grouped = try c.keystone("find-certificate", "-aZ", "-cGetopt", c.keychain)
        #expect(grouped.status == 0 && grouped.stdout.contains("SHA-1 hash: "))
        let pem = try c.keystone("find-certificate", "-Zpc", "getopt", c.keychain)
        #expect(pem.status == 0 && pem.stdout.contains("-----BEGIN CERTIFICATE-----"))
    }
}
