#if os(Linux)
import Foundation
import Swtpm
import Testing

extension Sandbox {
    /// The sandbox's environment with the TPM at `tcti` (tpm2-tss's own error logging silenced).
    func environment(tcti: String) -> [String: String] {
        var env = environment
        env["KEYSTONE_TPM_TCTI"] = tcti
        env["KEYSTONE_SECURE_ENCLAVE"] = nil
        env["TPM2TOOLS_TCTI"] = nil
        env["TCTI"] = nil
        env["TSS2_LOG"] = "all+NONE"
        return env
    }

    /// Runs keystone with the TPM at `tcti`.
    func run(tcti: String, _ arguments: String..., input: String? = nil) throws -> Run {
        try Run.launch(try #require(Self.binary, "the keystone binary is built by `swift build`"), arguments,
                       environment: environment(tcti: tcti), input: input.map { Data($0.utf8) })
    }

    func keychainPath(_ name: String) -> String { root.appendingPathComponent("data/keystone/\(name).keychain-db").path }
}

/// The bytes of a keychain file and its write-ahead log: what "the file was not modified" compares.
func keychainDigest(_ path: String) -> Data {
    var bytes = (try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data()
    bytes.append((try? Data(contentsOf: URL(fileURLWithPath: path + "-wal"))) ?? Data())
    return bytes
}

/// `keystone create-keychain --tpm` and `keystone doctor`'s TPM section against a REAL software TPM (a fresh swtpm per
/// test). The keystone children connect to swtpm one after the other (swtpm serves one connection at a time); the
/// tests run them on a thread of their own (withSwtpm).
@Suite("keystone CLI: keychains sealed to the TPM, doctor's TPM section (swtpm)",
       .enabled(if: SwtpmFixture.unavailableReason == nil,
                Comment(rawValue: SwtpmFixture.unavailableReason ?? "swtpm, tpm2-tools and openssl are installed")))
struct TPMCLITests {
    @Test("create-keychain --tpm warns first, then add and find -w work with no password; no TPM object is left loaded")
    func createAddFind() async throws {
        try await withSwtpm { fixture in
            let sandbox = Sandbox()
            defer { try? FileManager.default.removeItem(at: sandbox.root) }
            let path = sandbox.keychainPath("sealed")
            let created = try sandbox.run(tcti: fixture.tcti, "create-keychain", "--tpm", "sealed")
            #expect(created.status == 0, "\(created.stderr)")
            #expect(created.stderr.contains("WARNING: \(path) will be sealed to this machine's TPM"))
            #expect(created.stderr.contains("loses this keychain and everything in it, with no recovery"))
            #expect(!created.stderr.contains("password for new keychain"), "no password is asked for")
            // No input at all: a prompt for a password would fail at the end of input.
            let added = try sandbox.run(tcti: fixture.tcti, "add-generic-password", "-a", "alice", "-s", "vault", "-w", "s3cret-tpm", path)
            #expect(added.status == 0, "\(added.stderr)")
            let found = try sandbox.run(tcti: fixture.tcti, "find-generic-password", "-a", "alice", "-s", "vault", "-w", path)
            #expect(found.status == 0, "\(found.stderr)")
            #expect(found.stdout == "s3cret-tpm\n")
            let doctor = try sandbox.run(tcti: fixture.tcti, "doctor", path)
            #expect(doctor.status == 0, "\(doctor.stdout)\(doctor.stderr)")
            #expect(doctor.stdout.contains("format 4 (sealed to a TPM)"))
            #expect(doctor.stdout.contains("sealed to this machine's TPM: it opens without a password here"))
            #expect(doctor.stdout.contains("1 item readable"))
            // Each run flushed what it loaded (swtpm has no resource manager to do it): none is left behind.
            let handles = try fixture.run(SwtpmFixture.getcapPath, ["-T", fixture.tcti, "handles-transient"])
            #expect(handles.status == 0, "\(handles.output)")
            #expect(!handles.output.contains("0x80"), "transient objects left: \(handles.output)")
        }
    }

    @Test("another TPM: find fails with errSecDecode (exit 93) saying it is sealed to another TPM; the file's bytes unchanged")
    func anotherTPM() async throws {
        try await withSwtpm { fixture in
            let sandbox = Sandbox()
            defer { try? FileManager.default.removeItem(at: sandbox.root) }
            let path = sandbox.keychainPath("sealed")
            #expect(try sandbox.run(tcti: fixture.tcti, "create-keychain", "--tpm", path).status == 0)
            #expect(try sandbox.run(tcti: fixture.tcti, "add-generic-password", "-a", "a", "-s", "s", "-w", "w", path).status == 0)
            let digest = keychainDigest(path)
            let other = try SwtpmFixture.start()
            defer { other.stop() }
            let found = try sandbox.run(tcti: other.tcti, "find-generic-password", "-a", "a", "-s", "s", "-w", path)
            #expect(found.status == 93, "\(found.stderr)")
            #expect(found.stdout.isEmpty)
            #expect(found.stderr.contains("sealed to another TPM; the keychain cannot be opened here"))
            #expect(keychainDigest(path) == digest)
            // Killed: errSecNotAvailable (exit 53), the file unchanged.
            try fixture.killTPM()
            let unreachable = try sandbox.run(tcti: fixture.tcti, "find-generic-password", "-a", "a", "-s", "s", "-w", path)
            #expect(unreachable.status == 53, "\(unreachable.stderr)")
            #expect(unreachable.stderr.contains("cannot be reached"))
            #expect(keychainDigest(path) == digest)
        }
    }

    @Test("a TPM-only keychain: unlock-keychain needs no password, -p is a usage error; set-keychain-password refuses; a recovery password unlocks it on another TPM")
    func passwords() async throws {
        try await withSwtpm { fixture in
            let sandbox = Sandbox()
            defer { try? FileManager.default.removeItem(at: sandbox.root) }
            let path = sandbox.keychainPath("sealed")
            #expect(try sandbox.run(tcti: fixture.tcti, "create-keychain", "--tpm", path).status == 0)
            #expect(try sandbox.run(tcti: fixture.tcti, "lock-keychain", path).status == 0)
            let unlocked = try sandbox.run(tcti: fixture.tcti, "unlock-keychain", path)
            #expect(unlocked.status == 0, "\(unlocked.stderr)")
            let withPassword = try sandbox.run(tcti: fixture.tcti, "unlock-keychain", "-p", "guess", path)
            #expect(withPassword.status == 2)
            #expect(withPassword.stderr.contains("has no password: run `keystone unlock-keychain \(path)` without -p"))
            let digest = keychainDigest(path)
            let change = try sandbox.run(tcti: fixture.tcti, "set-keychain-password", "-o", "", "-p", "new", path)
            #expect(change.status == Int32(UInt8(truncatingIfNeeded: Int32(-50))), "\(change.stderr)")
            #expect(change.stderr.contains("has no password to change"))
            #expect(keychainDigest(path) == digest)

            let recoverable = sandbox.keychainPath("recoverable")
            let created = try sandbox.run(tcti: fixture.tcti, "create-keychain", "--tpm", "-p", "recovery words", recoverable)
            #expect(created.status == 0, "\(created.stderr)")
            #expect(created.stderr.contains("unless you have its recovery password"))
            #expect(try sandbox.run(tcti: fixture.tcti, "add-generic-password", "-a", "a", "-s", "s", "-w", "kept", recoverable).status == 0)
            let other = try SwtpmFixture.start()
            defer { other.stop() }
            let refused = try sandbox.run(tcti: other.tcti, "unlock-keychain", recoverable)
            #expect(refused.status == 93, "\(refused.stderr)")
            #expect(refused.stderr.contains("It has a recovery password"))
            let recovered = try sandbox.run(tcti: other.tcti, "unlock-keychain", "-p", "recovery words", recoverable)
            #expect(recovered.status == 0, "\(recovered.stderr)")
        }
    }

    @Test("doctor with a swtpm's TCTI: the manufacturer line is what tpm2_getcap properties-fixed reports")
    func doctorManufacturer() async throws {
        try await withSwtpm { fixture in
            let sandbox = Sandbox()
            defer { try? FileManager.default.removeItem(at: sandbox.root) }
            // Before doctor connects: swtpm serves one connection at a time.
            let getcap = try fixture.run(SwtpmFixture.getcapPath, ["-T", fixture.tcti, "properties-fixed"])
            #expect(getcap.status == 0, "tpm2_getcap: \(getcap.output)")
            let lines = getcap.output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            let start = try #require(lines.firstIndex(of: "TPM2_PT_MANUFACTURER:"))
            let value = try #require(lines[(start + 1)...].prefix(2).first { $0.hasPrefix("value:") })
            let manufacturer = value.dropFirst("value:".count).trimmingCharacters(in: CharacterSet(charactersIn: " \""))

            let doctor = try sandbox.run(tcti: fixture.tcti, "doctor")
            #expect(doctor.stdout.contains("TPM 2.0 (Secure Enclave keys, sealed keychains):\n"))
            let reported = doctor.stdout.split(separator: "\n").first { $0.contains(" manufacturer: ") }
            #expect(reported.map { $0.hasSuffix("manufacturer: \(manufacturer)") && $0.hasPrefix("  ok ") } == true,
                    "doctor: \(doctor.stdout)")
            #expect(doctor.stdout.contains("tcti: \(fixture.tcti) (from KEYSTONE_TPM_TCTI)"))
            let json = try sandbox.run(tcti: fixture.tcti, "doctor", "--json")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
            let tpm = try #require(object["tpm"] as? [String: Any])
            #expect(tpm["available"] as? Bool == true)
            #expect(tpm["manufacturer"] as? String == manufacturer)
            #expect(tpm["tctiSource"] as? String == "KEYSTONE_TPM_TCTI")
        }
    }
}

/// The TPM section and `--tpm` where no TPM answers (no swtpm needed).
@Suite("keystone CLI: no TPM at the TCTI")
struct UnreachableTPMCLITests {
    @Test("doctor with an unreachable TCTI says why the TPM cannot be used, as a note (the keychain in use does not need it)")
    func doctorUnreachable() throws {
        let sandbox = Sandbox()
        defer { try? FileManager.default.removeItem(at: sandbox.root) }
        let port = try #require(SwtpmFixture.freePortPair())
        let tcti = "swtpm:host=127.0.0.1,port=\(port)"
        let doctor = try sandbox.run(tcti: tcti, "doctor")
        let line = doctor.stdout.split(separator: "\n").first { $0.contains(" tpm: ") }.map(String.init) ?? ""
        #expect(line.hasPrefix("  note     tpm: cannot be used: "), "doctor: \(doctor.stdout)")
        #expect(line.contains("no TPM at \(tcti)"), "\(line)")
        #expect(doctor.stdout.contains("fix: check that a TPM answers at \(tcti)"))
        #expect(!doctor.stdout.contains(" manufacturer: "))
        let json = try sandbox.run(tcti: tcti, "doctor", "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let tpm = try #require(object["tpm"] as? [String: Any])
        #expect(tpm["available"] as? Bool == false)
        #expect(tpm["status"] as? Int == -25291)
        #expect((tpm["reason"] as? String)?.contains("no TPM at \(tcti)") == true)
    }

    @Test("no TPM device: doctor prints none of tpm2-tss's log lines; KEYSTONE_LOG_LEVEL=debug or TSS2_LOG bring them back")
    func noTPMIsQuiet() throws {
        let sandbox = Sandbox()
        defer { try? FileManager.default.removeItem(at: sandbox.root) }
        let keystone = try #require(Sandbox.binary, "the keystone binary is built by `swift build`")
        var environment = sandbox.environment
        environment["KEYSTONE_TPM_TCTI"] = "device:\(sandbox.root.path)/no-such-tpm"
        environment["TSS2_LOG"] = nil
        environment["KEYSTONE_LOG_LEVEL"] = nil
        let quiet = try Run.launch(keystone, ["doctor"], environment: environment)
        #expect(quiet.stdout.contains(" tpm: cannot be used: "), "\(quiet.stdout)")
        #expect(!quiet.stderr.contains("ERROR:") && !quiet.stderr.contains("WARNING:"), "\(quiet.stderr)")
        environment["KEYSTONE_LOG_LEVEL"] = "debug"
        let debug = try Run.launch(keystone, ["doctor"], environment: environment)
        #expect(debug.stderr.contains("ERROR:tcti:"), "\(debug.stderr)")
        environment["KEYSTONE_LOG_LEVEL"] = nil
        environment["TSS2_LOG"] = "tcti+ERROR"
        let asked = try Run.launch(keystone, ["doctor"], environment: environment)
        #expect(asked.stderr.contains("ERROR:tcti:"), "\(asked.stderr)")
    }

    @Test("create-keychain --tpm with no TPM answering: errSecNotAvailable (exit 53), nothing created, no warning")
    func createUnreachable() throws {
        let sandbox = Sandbox()
        defer { try? FileManager.default.removeItem(at: sandbox.root) }
        let port = try #require(SwtpmFixture.freePortPair())
        let created = try sandbox.run(tcti: "swtpm:host=127.0.0.1,port=\(port)", "create-keychain", "--tpm", "sealed")
        #expect(created.status == 53, "\(created.stderr)")
        #expect(created.stderr.contains("Nothing was created"))
        #expect(!created.stderr.contains("WARNING"))
        #expect(!FileManager.default.fileExists(atPath: sandbox.keychainPath("sealed")))
    }
}
#endif
