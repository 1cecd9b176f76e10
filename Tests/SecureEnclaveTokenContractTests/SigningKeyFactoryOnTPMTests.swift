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

    @Test("With the TPM as the process's Secure Enclave the key is a TPM key: verifies with openssl, comes back, is a typed errSecDecode on another TPM and errSecNotAvailable with the TPM gone, never replaced")
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
            // (At most two tokens on one swtpm at a time: each holds its primary key in one of the TPM's three
            // transient object slots, and swtpm has no resource manager to swap them.)
            let relaunched = TPMSecureEnclaveToken(tcti: fixture.tcti)
            KeychainServicesDefaults.useSecureEnclave(relaunched)
            let again = try SigningKeyFactory(keychain: keychain, tag: "com.example.tpm-key").signingKey()
            findings.expect(!again.wasCreated && again.key.kind == .hardware, "\(again)")
            findings.expect(again.key.publicKey.x963Representation == key.publicKey.x963Representation, "another key came back")
            let againSignature = try again.key.signature(for: message)
            findings.expect(key.publicKey.isValidSignature(againSignature, for: message), "the reloaded key signs for another public key")

            // The keychain restored onto a machine with another TPM: the TPM reads the blob offline (the key loads),
            // refuses to sign with it; the factory proves the key at load, so it throws errSecDecode and keeps the item.
            let otherTPM = try SwtpmFixture.start()
            defer { otherTPM.stop() }
            let otherToken = TPMSecureEnclaveToken(tcti: otherTPM.tcti)
            let foreignKey = try SecureEnclaveSigningKey(dataRepresentation: key.dataRepresentation, token: otherToken)
            findings.expect(foreignKey.publicKey.x963Representation == key.publicKey.x963Representation, "the blob read as another key")
            do throws(KeychainError) {
                try foreignKey.checkUsable()
                findings.fail("another TPM signed with this TPM's key")
            } catch {
                findings.expect(error == .decode, "checkUsable on another TPM: \(error)")
            }
            KeychainServicesDefaults.useSecureEnclave(otherToken)
            do throws(KeychainError) {
                let foreign = try factory.signingKey()
                findings.fail("the factory returned a key another TPM cannot use: \(foreign)")
            } catch {
                findings.expect(error == .decode && error.reason.contains("left intact"), "loading on another TPM: \(error)")
            }
            // Still the original key for the original TPM: nothing was replaced.
            KeychainServicesDefaults.useSecureEnclave(relaunched)
            findings.expect(try factory.signingKey().key.publicKey.x963Representation == key.publicKey.x963Representation,
                            "the stored key was replaced")

            // The TPM goes away: the stored key is a typed, transient error (errSecNotAvailable), the item stays; a new
            // name falls back to software with the reason.
            try fixture.killTPM()
            do throws(KeychainError) {
                let stranded = try factory.signingKey()
                findings.fail("the factory returned a key with the TPM gone: \(stranded)")
            } catch {
                findings.expect(error == .notAvailable, "loading with the TPM gone: \(error)")
            }
            do throws(KeychainError) {
                _ = try key.signature(for: message)
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
