#if os(Linux)
import Foundation
import Swtpm
import Testing

/// `keystone export-tpm-key`, `import-tpm-key` and `tpm-status` against a REAL swtpm and tpm2-openssl; and
/// `tpm-status` on a machine with no TPM at all (tctildr's default search finds nothing) writing nothing to
/// standard error.
@Suite("keystone CLI: TSS2 TPM keys with tpm2-openssl, tpm-status (swtpm)",
       .enabled(if: SwtpmFixture.unavailableReason == nil,
                Comment(rawValue: SwtpmFixture.unavailableReason ?? "swtpm, tpm2-tools and openssl are installed")))
struct TPMKeyCLITests {
    static let provider: String? = {
        for path in ["/usr/lib/x86_64-linux-gnu/ossl-modules/tpm2.so", "/usr/lib/aarch64-linux-gnu/ossl-modules/tpm2.so"]
        where FileManager.default.fileExists(atPath: path) { return path }
        return nil
    }()

    @Test("import-tpm-key adopts an openssl genpkey -provider tpm2 key; export-tpm-key gives it back as a PEM tpm2-openssl signs with")
    func importThenExport() async throws {
        try #require(Self.provider != nil, "tpm2-openssl not installed (apt-get install tpm2-openssl)")
        try await withSwtpm { fixture in
            let sandbox = Sandbox()
            defer { try? FileManager.default.removeItem(at: sandbox.root) }
            let directory = fixture.directory
            var openssl = ProcessInfo.processInfo.environment
            openssl["TPM2OPENSSL_TCTI"] = fixture.tcti
            openssl["TSS2_LOG"] = "all+NONE"
            let made = try fixture.run(SwtpmFixture.opensslPath, ["genpkey", "-provider", "tpm2", "-algorithm", "EC",
                                                                  "-pkeyopt", "group:P-256", "-out", "\(directory)/a.pem"],
                                       environment: openssl)
            #expect(made.status == 0, "\(made.output)")
            let imported = try sandbox.run(tcti: fixture.tcti, "import-tpm-key", "-o", "\(directory)/a.key", "\(directory)/a.pem")
            #expect(imported.status == 0, "\(imported.stderr)")
            #expect(imported.stdout.hasPrefix("-----BEGIN PUBLIC KEY-----"))
            let attributes = try FileManager.default.attributesOfItem(atPath: "\(directory)/a.key")
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
            let exported = try sandbox.run(tcti: fixture.tcti, "export-tpm-key", "-o", "\(directory)/b.pem", "\(directory)/a.key")
            #expect(exported.status == 0, "\(exported.stderr)")
            try Data("message".utf8).write(to: URL(fileURLWithPath: "\(directory)/msg"))
            let digest = try fixture.run(SwtpmFixture.opensslPath, ["dgst", "-sha256", "-binary", "-out", "\(directory)/digest",
                                                                    "\(directory)/msg"])
            #expect(digest.status == 0, "\(digest.output)")
            let signed = try fixture.run(SwtpmFixture.opensslPath, ["pkeyutl", "-provider", "tpm2", "-provider", "default",
                                                                    "-sign", "-inkey", "\(directory)/b.pem", "-in",
                                                                    "\(directory)/digest", "-out", "\(directory)/sig"],
                                         environment: openssl)
            #expect(signed.status == 0, "\(signed.output)")
            try imported.stdout.write(toFile: "\(directory)/pub.pem", atomically: true, encoding: .utf8)
            let verified = try fixture.run(SwtpmFixture.opensslPath, ["dgst", "-sha256", "-verify", "\(directory)/pub.pem",
                                                                      "-signature", "\(directory)/sig", "\(directory)/msg"])
            #expect(verified.output.contains("Verified OK"), "\(verified.output)")
            // Not a TSS2 key: refused with errSecDecode's exit status, nothing written.
            let refused = try sandbox.run(tcti: fixture.tcti, "import-tpm-key", "-o", "\(directory)/c.key", "\(directory)/msg")
            #expect(refused.status == Int32(UInt8(truncatingIfNeeded: -26275)), "\(refused.stderr)")
            #expect(!FileManager.default.fileExists(atPath: "\(directory)/c.key"))
        }
    }

    @Test("tpm-status with a TPM: available, and the dictionary-attack counter tpm2_dictionarylockout set up")
    func statusWithTPM() async throws {
        try await withSwtpm { fixture in
            let sandbox = Sandbox()
            defer { try? FileManager.default.removeItem(at: sandbox.root) }
            var tools = ProcessInfo.processInfo.environment
            tools["TPM2TOOLS_TCTI"] = fixture.tcti
            let setup = try fixture.run("/usr/bin/tpm2_dictionarylockout", ["--setup-parameters", "--max-tries=7",
                                                                             "--recovery-time=120", "--lockout-recovery-time=300"],
                                        environment: tools)
            try #require(setup.status == 0, "\(setup.output)")
            let status = try sandbox.run(tcti: fixture.tcti, "tpm-status")
            #expect(status.status == 0, "\(status.stdout)\(status.stderr)")
            #expect(status.stdout.contains("tpm: available"))
            #expect(status.stdout.contains("0 of 7 failed authorizations counted, one forgotten every 120 s"), "\(status.stdout)")
        }
    }

    @Test("tpm-status with no TPM device and no TCTI configured: exit 1, the reason on standard output, nothing on standard error (also with the tabrmd TCTI installed and no broker running)")
    func noTPMNothingOnStandardError() throws {
        try #require(!FileManager.default.fileExists(atPath: "/dev/tpmrm0") && !FileManager.default.fileExists(atPath: "/dev/tpm0"),
                     "this machine has a TPM device")
        let sandbox = Sandbox()
        defer { try? FileManager.default.removeItem(at: sandbox.root) }
        let keystone = try #require(Sandbox.binary, "the keystone binary is built by `swift build`")
        var environment = sandbox.environment
        for name in ["KEYSTONE_TPM_TCTI", "TPM2TOOLS_TCTI", "TCTI", "TSS2_LOG", "KEYSTONE_LOG_LEVEL", "KEYSTONE_SECURE_ENCLAVE"] {
            environment[name] = nil
        }
        let quiet = try Run.launch(keystone, ["tpm-status"], environment: environment)
        #expect(quiet.status == 1)
        #expect(quiet.stdout.hasPrefix("tpm: not available: "), "\(quiet.stdout)")
        #expect(quiet.stderr.isEmpty, "standard error: \(quiet.stderr)")
        // With tpm2-tss's logging asked for and a TCTI that fails, it does print: quiet is Keystone's doing.
        environment["TSS2_LOG"] = "all+ERROR"
        environment["KEYSTONE_TPM_TCTI"] = "device:\(sandbox.root.path)/no-such-tpm"
        let loud = try Run.launch(keystone, ["tpm-status"], environment: environment)
        #expect(loud.stderr.contains("ERROR:"), "\(loud.stderr)")
    }
}
#endif
