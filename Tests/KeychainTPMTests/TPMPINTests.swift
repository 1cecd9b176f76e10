#if os(Linux)
import Crypto
import Foundation
import KeychainEngine
import KeychainTPM
import Swtpm
import Testing

/// TPM-enforced PINs on a REAL swtpm: the key's authorization value is the PIN, so the TPM itself refuses a wrong
/// one (proved with tpm2-tools, without Keystone) and counts it toward its dictionary-attack lockout.
@Suite("TPM-enforced PINs on swtpm",
       .enabled(if: SwtpmFixture.unavailableReason == nil,
                Comment(rawValue: SwtpmFixture.unavailableReason ?? "swtpm, tpm2-tools and openssl are installed")))
struct TPMPINTests {
    static let message = Data("a PIN-protected signature".utf8)
    let digest = Data(SHA256.hash(data: TPMPINTests.message))
    let message = TPMPINTests.message

    @Test("A key made with a PIN signs with it; the TPM refuses a wrong PIN and no PIN (authFailed), each failure counted")
    func rightAndWrongPIN() async throws {
        let digest = digest
        try await withSwtpm { fixture in
            let device = try TPMDevice(tcti: fixture.tcti)
            let pin = TPMDevice.authorizationValue(pin: "2468")
            let key = try device.createKey(.signing, authorization: pin)
            #expect(key.needsAuthorization)
            #expect(try TPMKey(dataRepresentation: key.dataRepresentation).needsAuthorization)
            #expect(key.dataRepresentation[4] == 2)  // envelope version 2: the PIN flag
            let signature = try device.signature(digest: digest, with: key.dataRepresentation, authorization: pin)
            #expect(key.signingPublicKey.isValidSignature(signature, for: TPMPINTests.message))
            let before = try device.lockoutState().failedTries
            for wrong in [TPMDevice.authorizationValue(pin: "1357"), nil] {
                do {
                    _ = try device.signature(digest: digest, with: key.dataRepresentation, authorization: wrong)
                    Issue.record("signed without the right PIN")
                } catch let error as TPMError {
                    #expect(error.kind == .authFailed, "\(error)")
                    #expect(error.description.contains("PIN"))
                    #expect(error.lockout != nil)
                }
            }
            #expect(try device.lockoutState().failedTries == before + 2)
            // The cached key does not keep the right PIN for the next caller.
            _ = try device.signature(digest: digest, with: key.dataRepresentation, authorization: pin)
            #expect(throws: TPMError.self) {
                try device.signature(digest: digest, with: key.dataRepresentation, authorization: nil)
            }
            // A key without a PIN is written as before (version 1) and needs none.
            let plain = try device.createKey(.signing)
            #expect(plain.dataRepresentation[4] == 1)
            #expect(!plain.needsAuthorization)
            _ = try device.signature(digest: digest, with: plain.dataRepresentation)
        }
    }

    @Test("Without Keystone: tpm2_load + tpm2_sign of the same key with a wrong -p fails, with the right -p succeeds")
    func tpmToolsAgree() async throws {
        let digest = digest
        try await withSwtpm { fixture in
            let key: TPMKey = try {
                let device = try TPMDevice(tcti: fixture.tcti)
                return try device.createKey(.signing, authorization: TPMDevice.authorizationValue(pin: "2468"))
            }()  // released: swtpm has 3 object slots
            let directory = fixture.directory
            // The TSS2 PEM's pubkey and privkey are what tpm2_load takes; no Keystone code runs from here.
            let loaded = try fixture.loadWithTools(pem: try key.tss2PEMRepresentation(), digest: digest)
            func sign(_ pin: String?) throws -> (status: Int32, output: String) { try loaded.sign(auth: pin) }
            let wrong = try sign("1357")
            #expect(wrong.status != 0)
            #expect(wrong.output.contains("0x98e") || wrong.output.lowercased().contains("authorization"),
                    "\(wrong.output)")
            #expect(try sign(nil).status != 0)
            let right = try sign("2468")
            #expect(right.status == 0, "\(right.output)")
            let raw = try Data(contentsOf: URL(fileURLWithPath: "\(directory)/sig.bin"))
            let signature = try P256.Signing.ECDSASignature(derRepresentation: raw)  // -f plain: DER for ECDSA
            #expect(key.signingPublicKey.isValidSignature(signature, for: TPMPINTests.message))
        }
    }

    @Test("Repeated wrong PINs lock the TPM out: the right PIN is then refused with lockout and the time to recovery; keys without a PIN still sign; after the owner clears the lockout the right PIN signs")
    func lockout() async throws {
        let digest = digest
        try await withSwtpm { fixture in
            let setup = try fixture.tpm2("tpm2_dictionarylockout", [
                "--setup-parameters", "--max-tries=3", "--recovery-time=600", "--lockout-recovery-time=900", "--clear-lockout",
            ])
            try #require(setup.status == 0, "\(setup.output)")
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            let key = try token.createKey(.signing, pin: "2468")
            let plain = try token.createKey(.signing)
            #expect(try token.needsPIN(key.dataRepresentation))
            #expect(try !token.needsPIN(plain.dataRepresentation))
            var reasons: [String] = []
            for _ in 0..<3 {
                do {
                    _ = try token.signature(digest: digest, with: key.dataRepresentation, pin: "0000")
                    Issue.record("a wrong PIN signed")
                } catch let error as EngineError {
                    #expect(error.status == Status.authFailed, "\(error)")
                    reasons.append(error.reason)
                }
            }
            #expect(reasons.first?.contains("2 more failures lock the TPM out") == true, "\(reasons)")
            let state = try token.lockoutState()
            #expect(state.isLockedOut && state.failedTries == 3 && state.maxTries == 3)
            #expect(state.timeToRecovery == .seconds(600))
            do {
                _ = try token.signature(digest: digest, with: key.dataRepresentation, pin: "2468")
                Issue.record("signed during the lockout")
            } catch let error as EngineError {
                #expect(error.status == Status.authFailed, "\(error)")
                #expect(error.reason.contains("lockout") && error.reason.contains("within 600 s"), "\(error.reason)")
            }
            do {
                let device = try TPMDevice(tcti: fixture.tcti)
                _ = try device.signature(digest: digest, with: key.dataRepresentation,
                                         authorization: TPMDevice.authorizationValue(pin: "2468"))
                Issue.record("signed during the lockout")
            } catch let error as TPMError {
                #expect(error.kind == .lockout)
                #expect(error.lockout?.timeToRecovery == .seconds(600))
            }
            // A key without a PIN is noDA: the lockout does not block it.
            let raw = try token.signature(digest: digest, with: plain.dataRepresentation)
            #expect(try P256.Signing.PublicKey(x963Representation: plain.publicKeyX963)
                .isValidSignature(P256.Signing.ECDSASignature(rawRepresentation: raw), for: TPMPINTests.message))
            let cleared = try fixture.tpm2("tpm2_dictionarylockout", ["--clear-lockout"])
            try #require(cleared.status == 0, "\(cleared.output)")
            let signed = try token.signature(digest: digest, with: key.dataRepresentation, pin: "2468")
            #expect(try P256.Signing.PublicKey(x963Representation: key.publicKeyX963)
                .isValidSignature(P256.Signing.ECDSASignature(rawRepresentation: signed), for: TPMPINTests.message))
        }
    }

    @Test("A PIN longer than 32 bytes becomes its SHA-256 digest; an empty PIN is refused")
    func longPIN() async throws {
        let digest = digest
        let long = String(repeating: "correct horse battery staple ", count: 3)
        #expect(TPMDevice.authorizationValue(pin: long) == Data(SHA256.hash(data: Data(long.utf8))))
        #expect(TPMDevice.authorizationValue(pin: "1234") == Data("1234".utf8))
        try await withSwtpm { fixture in
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            let key = try token.createKey(.signing, pin: long)
            _ = try token.signature(digest: digest, with: key.dataRepresentation, pin: long)
            #expect(throws: EngineError.self) { try token.signature(digest: digest, with: key.dataRepresentation, pin: long + "x") }
            #expect(throws: EngineError.self) { try token.createKey(.signing, pin: "") }
        }
    }
}
#endif
