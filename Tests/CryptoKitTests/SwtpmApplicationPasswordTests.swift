#if os(Linux)
import CryptoKit
import Foundation
import KeychainEngine
import KeychainServices
import KeychainTPM
import Swtpm
import Testing

/// CryptoKit's `SecureEnclave` keys with `.applicationPassword` on a REAL swtpm: the `authenticationContext`'s
/// application password (`LAContext.setCredential(_:type: .applicationPassword)`) is the key's TPM authorization value.
@Suite("SecureEnclave .applicationPassword enforced by swtpm", .serialized, .ownsDefaultKeychain,
       .enabled(if: SwtpmFixture.unavailableReason == nil,
                Comment(rawValue: SwtpmFixture.unavailableReason ?? "swtpm, tpm2-tools and openssl are installed")))
struct SwtpmApplicationPasswordTests {
    static let message = Data("CryptoKit, a TPM-enforced application password".utf8)

    static func context(_ password: String?) -> LAContext {
        let context = LAContext()
        if let password { _ = context.setCredential(Data(password.utf8), type: .applicationPassword) }
        return context
    }

    @Test("Signing: the right password signs (also after dataRepresentation round trip); a wrong one is errSecAuthFailed from the TPM (failure counter +1); none is errSecAuthFailed, or errSecInteractionNotAllowed with interactionNotAllowed, not counted")
    func signing() async throws {
        try await withSwtpm { fixture in
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            let authenticator = CountingAuthenticator(.success)
            try inEnclave(token, authenticator: authenticator) {
                let message = Self.message
                let key = try SecureEnclave.P256.Signing.PrivateKey(
                    accessControl: access([.privateKeyUsage, .applicationPassword]), authenticationContext: Self.context("2468"))
                #expect(key.publicKey.isValidSignature(try key.signature(for: message), for: message))
                let bytes = key.dataRepresentation

                let right = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: bytes, authenticationContext: Self.context("2468"))
                #expect(key.publicKey.isValidSignature(try right.signature(for: message), for: message))

                // Loading needs no password (the load check is skipped for bound keys): the use is refused.
                let before = try token.lockoutState().failedTries
                let wrong = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: bytes, authenticationContext: Self.context("1357"))
                #expect(enclaveError { _ = try wrong.signature(for: message) }?.status == errSecAuthFailed)
                #expect(try token.lockoutState().failedTries == before + 1)

                let none = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: bytes)
                let missing = enclaveError { _ = try none.signature(for: message) }
                #expect(missing?.status == errSecAuthFailed)
                #expect(missing?.reason.contains("setCredential") == true)
                let quiet = Self.context(nil)
                quiet.interactionNotAllowed = true
                let noUI = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: bytes, authenticationContext: quiet)
                #expect(enclaveError { _ = try noUI.signature(for: message) }?.status == errSecInteractionNotAllowed)
                #expect(try token.lockoutState().failedTries == before + 1)
                #expect(!"\(right)".contains("2468"))
                // The password is the TPM's to check: the authenticator was not asked.
                #expect(authenticator.count == 0)

                // Making such a key without a password is refused before the TPM.
                #expect(enclaveError {
                    _ = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access([.privateKeyUsage, .applicationPassword]))
                }?.status == errSecAuthFailed)
                // A key without the flag still signs with no password.
                let plain = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access([.privateKeyUsage]))
                #expect(plain.publicKey.isValidSignature(try plain.signature(for: message), for: message))
            }
        }
    }

    @Test("Key agreement: the right password agrees with a software peer; a wrong one is errSecAuthFailed")
    func keyAgreement() async throws {
        try await withSwtpm { fixture in
            try inEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) {
                let key = try SecureEnclave.P256.KeyAgreement.PrivateKey(
                    accessControl: access([.privateKeyUsage, .applicationPassword]), authenticationContext: Self.context("agree"))
                let peer = P256.KeyAgreement.PrivateKey()
                let ours = try key.sharedSecretFromKeyAgreement(with: peer.publicKey)
                let theirs = try peer.sharedSecretFromKeyAgreement(with: key.publicKey)
                #expect(ours == theirs)
                let wrong = try SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation: key.dataRepresentation,
                                                                           authenticationContext: Self.context("disagree"))
                #expect(enclaveError { _ = try wrong.sharedSecretFromKeyAgreement(with: peer.publicKey) }?.status == errSecAuthFailed)
            }
        }
    }
}
#endif
