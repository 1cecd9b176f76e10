#if os(Linux)
import Crypto
import DefaultKeychainLock
import Foundation
import KeychainEngine
import KeychainServices
import KeychainTPM
import Keystone
import Swtpm
import Testing

/// Keystone's signing-key factory with a REAL (software) TPM as the process's Secure Enclave
/// (`KeychainServicesDefaults.useSecureEnclave`), the way a Linux app gets hardware keys: a keychain whose store
/// does not choose a token itself (here a `KeychainEngine` in memory) uses the process's. The process-wide token is
/// shared state: the suite owns the default keychain while it runs, and restores the token after.
@Suite("SigningKeyFactory on a real TPM", .serialized, .ownsDefaultKeychain,
       .enabled(if: SwtpmFixture.unavailableReason == nil,
                Comment(rawValue: SwtpmFixture.unavailableReason ?? "swtpm, tpm2-tools and openssl are installed")))
struct SigningKeyFactoryOnTPMTests {
    struct CheckFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    @Test("With the TPM as the process's Secure Enclave the key is a TPM key: verifies with openssl, comes back, is refused by another TPM and fails typed when the TPM is gone")
    func factoryUsesTheTPM() async throws {
        let findings = Findings()
        try await withSwtpm { fixture in
            let previous = KeychainServicesDefaults.secureEnclave
            defer { KeychainServicesDefaults.useSecureEnclave(previous) }
            KeychainServicesDefaults.useSecureEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti))

            let keychain = Keychain(store: KeychainEngine(storage: MemoryStorage()))
            let factory = try SigningKeyFactory(keychain: keychain, tag: "com.example.tpm-key")
            let result = try factory.signingKey()
            findings.expect(result.key.kind == .hardware, "kind \(result.key.kind), reason \(String(describing: result.fallbackReason))")
            findings.expect(result.fallbackReason == nil && result.wasCreated, "\(result)")
            guard let key = result.key as? SecureEnclaveSigningKey else { throw CheckFailure("not a hardware key: \(result)") }
            findings.expect((key.token as? TPMSecureEnclaveToken)?.tcti == fixture.tcti, "the key is not in the fixture's TPM: \(key.token.name)")
            findings.expect(key.dataRepresentation.starts(with: Array("KSTK".utf8)), "the stored blob is not a TPM key")

            // A signature of the TPM, checked by a verifier no one here wrote.
            let message = Data("signed in the TPM through Keystone".utf8)
            let signature = try key.signature(for: message)
            findings.expect(key.publicKey.isValidSignature(signature, for: message), "swift-crypto does not verify the signature")
            let directory = fixture.directory
            try key.publicKey.pemRepresentation.write(toFile: "\(directory)/pub.pem", atomically: true, encoding: .utf8)
            try signature.derRepresentation.write(to: URL(fileURLWithPath: "\(directory)/sig.der"))
            try message.write(to: URL(fileURLWithPath: "\(directory)/msg"))
            let verified = try fixture.run(SwtpmFixture.opensslPath, [
                "dgst", "-sha256", "-verify", "\(directory)/pub.pem", "-signature", "\(directory)/sig.der", "\(directory)/msg",
            ])
            findings.expect(verified.status == 0 && verified.output.contains("Verified OK"), "openssl: \(verified.output)")

            // Next launch: a new token on the same TPM (a new process), a new factory: the same key, none made.
            KeychainServicesDefaults.useSecureEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti))
            let again = try SigningKeyFactory(keychain: keychain, tag: "com.example.tpm-key").signingKey()
            findings.expect(!again.wasCreated && again.key.kind == .hardware, "\(again)")
            findings.expect(again.key.publicKey.x963Representation == key.publicKey.x963Representation, "another key came back")
            let againSignature = try again.key.signature(for: message)
            findings.expect(key.publicKey.isValidSignature(againSignature, for: message), "the reloaded key signs for another public key")

            // The keychain restored onto a machine with another TPM: a TPM blob reads offline, so the key loads, and its
            // first signature is refused with errSecDecode; the item is never replaced.
            let otherTPM = try SwtpmFixture.start()
            defer { otherTPM.stop() }
            KeychainServicesDefaults.useSecureEnclave(TPMSecureEnclaveToken(tcti: otherTPM.tcti))
            let foreign = try factory.signingKey()
            findings.expect(!foreign.wasCreated && foreign.key.publicKey.x963Representation == key.publicKey.x963Representation, "\(foreign)")
            do throws(KeychainError) {
                _ = try foreign.key.signature(for: message)
                findings.fail("another TPM signed with this TPM's key")
            } catch {
                findings.expect(error == .decode, "signing on another TPM: \(error)")
            }
            findings.expect(try factory.signingKey().key.publicKey.x963Representation == key.publicKey.x963Representation,
                            "the stored key was replaced")

            // The TPM goes away: the stored key fails typed (errSecNotAvailable, transient); a new name falls back to
            // software with the reason.
            KeychainServicesDefaults.useSecureEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti))
            try fixture.killTPM()
            let stranded = try factory.signingKey()
            do throws(KeychainError) {
                _ = try stranded.key.signature(for: message)
                findings.fail("a killed TPM signed")
            } catch {
                findings.expect(error == .notAvailable, "signing with the TPM gone: \(error)")
            }
            let fallback = try SigningKeyFactory(keychain: keychain, tag: "com.example.other-key").signingKey()
            findings.expect(fallback.key.kind == .software, "\(fallback)")
            if case .secureEnclaveUnavailable(let error)? = fallback.fallbackReason {
                findings.expect(error == .notAvailable, "fallback status \(error)")
            } else {
                findings.fail("fallback reason \(String(describing: fallback.fallbackReason))")
            }
        }
        findings.report()
    }
}
#endif
