#if os(Linux)
import Crypto
import Foundation
import KeychainEngine
import KeychainTPM
import Swtpm
import Testing

/// Where tpm2-openssl's provider is, or nil.
let tpm2OpenSSLProvider: String? = {
    for path in ["/usr/lib/x86_64-linux-gnu/ossl-modules/tpm2.so", "/usr/lib/aarch64-linux-gnu/ossl-modules/tpm2.so",
                 "/usr/lib64/ossl-modules/tpm2.so", "/usr/lib/ossl-modules/tpm2.so"]
    where FileManager.default.fileExists(atPath: path) { return path }
    return nil
}()

let tss2InteropUnavailable: String? = SwtpmFixture.unavailableReason
    ?? (tpm2OpenSSLProvider == nil ? "tpm2-openssl not installed (apt-get install tpm2-openssl)" : nil)

extension SwtpmFixture {
    /// Runs openssl with tpm2-openssl talking to this swtpm.
    func openssl(_ arguments: [String]) throws -> (status: Int32, output: String) {
        var environment = ProcessInfo.processInfo.environment
        environment["TPM2OPENSSL_TCTI"] = tcti
        environment["TSS2_LOG"] = "all+NONE"
        return try run(SwtpmFixture.opensslPath, arguments, environment: environment)
    }
}

/// "TSS2 PRIVATE KEY" PEM interop with tpm2-openssl (Debian's `tpm2-openssl` provider) on ONE real swtpm. The
/// Keystone device is released before openssl runs: swtpm has 3 object slots and no resource manager.
@Suite("tpm2-openssl: TSS2 PRIVATE KEY interop on swtpm",
       .enabled(if: tss2InteropUnavailable == nil,
                Comment(rawValue: tss2InteropUnavailable ?? "swtpm, tpm2-tools, openssl and tpm2-openssl are installed")))
struct TSS2InteropTests {
    @Test("A Keystone key exported as TSS2 PEM signs through openssl pkeyutl -provider tpm2, and the signature verifies with Keystone's public key")
    func keystoneKeySignsThroughOpenSSL() async throws {
        try await withSwtpm { fixture in
            let key: TPMKey = try {
                let device = try TPMDevice(tcti: fixture.tcti)
                return try device.createKey(.signing)
            }()
            let pem = try key.tss2PEMRepresentation()
            #expect(pem.hasPrefix("-----BEGIN TSS2 PRIVATE KEY-----"))
            let directory = fixture.directory
            try pem.write(toFile: "\(directory)/key.pem", atomically: true, encoding: .utf8)
            let message = Data("signed by tpm2-openssl with a key Keystone made".utf8)
            try Data(SHA256.hash(data: message)).write(to: URL(fileURLWithPath: "\(directory)/digest"))
            let signed = try fixture.openssl(["pkeyutl", "-provider", "tpm2", "-provider", "default", "-sign",
                                              "-inkey", "\(directory)/key.pem", "-in", "\(directory)/digest",
                                              "-out", "\(directory)/sig.der"])
            #expect(signed.status == 0, "openssl: \(signed.output)")
            let der = try Data(contentsOf: URL(fileURLWithPath: "\(directory)/sig.der"))
            let signature = try P256.Signing.ECDSASignature(derRepresentation: der)
            #expect(key.signingPublicKey.isValidSignature(signature, for: message))
            #expect(!key.signingPublicKey.isValidSignature(signature, for: Data("another".utf8)))
            // openssl reads the same public key out of the PEM.
            let exported = try fixture.openssl(["pkey", "-provider", "tpm2", "-provider", "default", "-in",
                                                "\(directory)/key.pem", "-pubout"])
            #expect(exported.status == 0, "openssl: \(exported.output)")
            #expect(exported.output.contains(key.signingPublicKey.pemRepresentation), "openssl: \(exported.output)")
        }
    }

    @Test("A key made by openssl genpkey -provider tpm2 imports into Keystone, signs through it, and openssl verifies the signature")
    func openSSLKeySignsThroughKeystone() async throws {
        try await withSwtpm { fixture in
            let directory = fixture.directory
            let made = try fixture.openssl(["genpkey", "-provider", "tpm2", "-algorithm", "EC", "-pkeyopt",
                                            "group:P-256", "-out", "\(directory)/key.pem"])
            #expect(made.status == 0, "openssl: \(made.output)")
            let pem = try String(contentsOfFile: "\(directory)/key.pem", encoding: .utf8)
            let key = try TPMKey(tss2PEMRepresentation: pem)
            #expect(key.usage == .general)  // tpm2-openssl's EC keys sign and decrypt, scheme NULL
            #expect(!key.needsAuthorization)
            let publicKey = try fixture.openssl(["pkey", "-provider", "tpm2", "-provider", "default", "-in",
                                                 "\(directory)/key.pem", "-pubout", "-out", "\(directory)/pub.pem"])
            #expect(publicKey.status == 0, "openssl: \(publicKey.output)")
            let opensslPublic = try String(contentsOfFile: "\(directory)/pub.pem", encoding: .utf8)
            #expect(opensslPublic == key.signingPublicKey.pemRepresentation + "\n"
                || opensslPublic == key.signingPublicKey.pemRepresentation)

            let message = Data("signed by Keystone with a key tpm2-openssl made".utf8)
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            let imported = try token.importTSS2PEM(pem)
            #expect(imported.publicKeyX963 == key.x963Representation)
            let raw = try token.signature(digest: Data(SHA256.hash(data: message)), with: imported.dataRepresentation)
            let signature = try P256.Signing.ECDSASignature(rawRepresentation: raw)
            try signature.derRepresentation.write(to: URL(fileURLWithPath: "\(directory)/sig.der"))
            try message.write(to: URL(fileURLWithPath: "\(directory)/msg"))
            let verified = try fixture.openssl(["dgst", "-sha256", "-verify", "\(directory)/pub.pem", "-signature",
                                                "\(directory)/sig.der", "\(directory)/msg"])
            #expect(verified.status == 0 && verified.output.contains("Verified OK"), "openssl: \(verified.output)")
            // Export again: the same key, byte for byte in its TPM parts.
            let again = try TPMKey(tss2PEMRepresentation: try key.tss2PEMRepresentation())
            #expect(again.dataRepresentation == key.dataRepresentation)
        }
    }

    @Test("A Keystone key with a TPM-enforced PIN exports without emptyAuth: tpm2-openssl signs with -passin and the PIN, and the TPM refuses a wrong one")
    func pinKeyThroughOpenSSL() async throws {
        try await withSwtpm { fixture in
            let key: TPMKey = try {
                let device = try TPMDevice(tcti: fixture.tcti)
                return try device.createKey(.signing, authorization: TPMDevice.authorizationValue(pin: "2468"))
            }()
            let directory = fixture.directory
            let pem = try key.tss2PEMRepresentation()
            #expect(try TPMKey(tss2PEMRepresentation: pem).needsAuthorization)
            try pem.write(toFile: "\(directory)/key.pem", atomically: true, encoding: .utf8)
            let message = Data("signed by tpm2-openssl with a PIN the TPM checks".utf8)
            try Data(SHA256.hash(data: message)).write(to: URL(fileURLWithPath: "\(directory)/digest"))
            func sign(_ pin: String) throws -> (status: Int32, output: String) {
                try fixture.openssl(["pkeyutl", "-provider", "tpm2", "-provider", "default", "-sign", "-inkey",
                                     "\(directory)/key.pem", "-passin", "pass:\(pin)", "-in", "\(directory)/digest",
                                     "-out", "\(directory)/sig.der"])
            }
            let wrong = try sign("1357")
            #expect(wrong.status != 0, "openssl signed with a wrong PIN: \(wrong.output)")
            let right = try sign("2468")
            #expect(right.status == 0, "openssl: \(right.output)")
            let der = try Data(contentsOf: URL(fileURLWithPath: "\(directory)/sig.der"))
            #expect(key.signingPublicKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: der), for: message))
        }
    }

    @Test("A TSS2 key from another TPM imports as text but the token refuses it with errSecDecode (wrong TPM)")
    func otherTPMRefused() async throws {
        try await withSwtpm { fixture in
            let pem: String = try {
                let other = try SwtpmFixture.start()
                defer { other.stop() }
                let device = try TPMDevice(tcti: other.tcti)
                return try device.createKey(.signing).tss2PEMRepresentation()
            }()
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            #expect(throws: EngineError.self) { try token.importTSS2PEM(pem) }
            do {
                _ = try token.importTSS2PEM(pem)
            } catch let error as EngineError {
                #expect(error.status == Status.decode, "\(error)")
            }
        }
    }
}

/// The TSS2 PEM parser and writer, without a TPM.
@Suite("TSS2 PRIVATE KEY format")
struct TSS2FormatTests {
    /// A key tpm2-openssl 1.1.1 made (genpkey -algorithm EC -pkeyopt group:P-256): its emptyAuth is TRUE written as
    /// 0x01, not DER's 0xFF.
    static let opensslPEM = """
        -----BEGIN TSS2 PRIVATE KEY-----
        MIHwBgZngQUKAQOgAwEBAQIEQAAAAQRYAFYAIwALAAYAcgAAABAAEAADABAAICN9
        cVh6dUQB1C+cqDx2YMtmKF0cgq/JUJPEjbEMXR66ACDy9x3TPu0YG930yOnsutYg
        AewLmwNKiojRgDBBfkKMcgSBgAB+ACDvITld9P/NCdE1xebmtq58+vjczxnFtEp9
        dts8DG+1uwAQT2gKA4+Al4oOmBmzy0t/45xOUM+ZPjhGyPJN/N4VkWIJih4d/Y4i
        ZmGDdbh3WhBYDFMH6fLCUyRgoXpOGPxQ/X+6qoemOgAfOrXmJTMIU3QRE9vUFV4t
        JaLn
        -----END TSS2 PRIVATE KEY-----
        """

    @Test("tpm2-openssl's key parses: general usage, no PIN, and it writes back to the same TPM parts")
    func parsesOpenSSLKey() throws {
        let key = try TPMKey(tss2PEMRepresentation: Self.opensslPEM)
        #expect(key.usage == .general)
        #expect(!key.needsAuthorization)
        let again = try TPMKey(tss2PEMRepresentation: key.tss2PEMRepresentation())
        #expect(again == key)
    }

    @Test("Not a PEM, another PEM type, a parent other than the owner hierarchy, a policy: each refused with its kind")
    func refusals() throws {
        #expect(throws: TPMError.self) { try TPMKey(tss2PEMRepresentation: "hello") }
        let other = Self.opensslPEM.replacingOccurrences(of: "TSS2 PRIVATE KEY", with: "PRIVATE KEY")
        do { _ = try TPMKey(tss2PEMRepresentation: other); Issue.record("accepted") } catch {
            #expect(error.kind == .malformedBlob)
        }
        // Another parent instead of 0x40000001: byte 18 of the DER is the INTEGER's first byte.
        let der = try #require(Data(base64Encoded: Self.opensslPEM.split(separator: "\n").dropFirst().dropLast().joined()))
        var persistent = [UInt8](der)
        #expect(Array(persistent[16..<22]) == [0x02, 0x04, 0x40, 0x00, 0x00, 0x01])
        persistent[18] = 0x01  // 0x01000001: not the owner hierarchy
        do { _ = try TPMKey(tss2DER: persistent); Issue.record("accepted") } catch {
            #expect(error.kind == .unsupported, "\(error)")
            #expect(error.message.contains("0x01000001"))
        }
        // A [1] policy field in place of [0] emptyAuth.
        var policy = [UInt8](der)
        #expect(policy[11] == 0xA0)
        policy[11] = 0xA1
        do { _ = try TPMKey(tss2DER: policy); Issue.record("accepted") } catch {
            #expect(error.kind == .unsupported, "\(error)")
        }
        // Without emptyAuth, the key needs its PIN.
        var noEmptyAuth = [UInt8](der)
        noEmptyAuth.removeSubrange(11..<16)
        noEmptyAuth[2] -= 5  // the outer SEQUENCE's length (0x81 0xF0: long form, one byte)
        let pinKey = try TPMKey(tss2DER: Array(noEmptyAuth))
        #expect(pinKey.needsAuthorization)
    }
}
#endif
