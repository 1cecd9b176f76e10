#if os(Linux)
@testable import CryptoKit
import Foundation
import KeychainEngine
import KeychainServices
import KeychainTPM
import Swtpm
import Testing

/// CryptoKit's `SecureEnclave` keys with `.privateKeyUsage` and a person flag on a REAL swtpm: the TPM authorization
/// value is a random secret the keychain releases after the evaluation, and the `dataRepresentation` (envelope version
/// 2) names its keychain item, never the secret.
@Suite("SecureEnclave person flags bound in swtpm", .serialized, .ownsDefaultKeychain,
       .enabled(if: SwtpmFixture.unavailableReason == nil,
                Comment(rawValue: SwtpmFixture.unavailableReason ?? "swtpm, tpm2-tools and openssl are installed")))
struct SwtpmPersonBindingTests {
    static let message = Data("CryptoKit, the person bound in the TPM".utf8)

    /// The secret items' attributes in the default keychain.
    static func secretItems() -> [KeychainQuery] {
        guard let engine = try? KeychainServicesDefaults.currentEngine(),
              let found = try? engine.copyMatching([
                  Key.class: .string(ItemClass.genericPassword.rawValue), Key.service: .string(SecureEnclaveKeySecrets.service),
                  Key.returnAttributes: .bool(true), Key.matchLimit: .string(Key.matchLimitAll),
              ]) else { return [] }
        if case .array(let rows) = found {
            return rows.compactMap { if case .attributes(let a) = $0 { return a } else { return nil } }
        }
        return []
    }

    @Test("A .userPresence signing key: signs after the evaluation, also after a dataRepresentation round trip (version 2, naming the secret's item, not the secret); a cancelled evaluation is errSecUserCanceled; the blob alone is refused by the TPM")
    func signingRoundTrip() async throws {
        try await withSwtpm { fixture in
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            let authenticator = CountingAuthenticator(.success, .success, .userCancel, .success)
            try inEnclave(token, authenticator: authenticator) {
                let message = Self.message
                let key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access([.privateKeyUsage, .userPresence]))
                #expect(authenticator.count == 0)
                #expect(key.publicKey.isValidSignature(try key.signature(for: message), for: message))
                #expect(authenticator.count == 1)

                let bytes = key.dataRepresentation
                let envelope = try KeyEnvelope.decode(bytes)
                #expect(bytes[4] == 2)
                #expect(envelope.secretAccount == SecureEnclaveKeySecrets.account(publicKeyX963: key.publicKey.x963Representation))
                #expect(try token.binding(of: envelope.tokenBlob) == .releasedSecret)
                let items = Self.secretItems()
                #expect(items.count == 1)
                #expect(items.first?[Key.account]?.stringValue == envelope.secretAccount)

                // Loading asks nothing (no load check for a bound key); the use asks, as before.
                let loaded = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: bytes)
                #expect(authenticator.count == 1)
                #expect(key.publicKey.isValidSignature(try loaded.signature(for: message), for: message))
                #expect(authenticator.count == 2)
                #expect(enclaveError { _ = try loaded.signature(for: message) }?.status == errSecUserCanceled)
                #expect(Self.secretItems().count == 1)

                // The TPM blob alone: refused by the TPM itself, without counting toward its lockout (noDA).
                let before = try token.lockoutState().failedTries
                #expect(throws: EngineError.self) {
                    _ = try token.signature(digest: Data(SHA256.hash(data: message)), with: envelope.tokenBlob, authorization: nil)
                }
                #expect(try token.lockoutState().failedTries == before)

                // A version-2 envelope whose item is rewritten to another key's is refused when loaded.
                var forged = envelope
                forged.secretAccount = String(repeating: "0", count: 40)
                #expect(enclaveError { _ = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: forged.encoded()) }?.status == errSecDecode)
                // Flags rewritten in the envelope do not weaken the release: the secret item's own flags are asked.
                var weakened = envelope
                weakened.accessControl.flags = [.privateKeyUsage, .applicationPassword]
                let rewritten = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: weakened.encoded(),
                                                                          authenticationContext: {
                                                                              let c = LAContext()
                                                                              _ = c.setCredential(Data("x".utf8), type: .applicationPassword)
                                                                              return c
                                                                          }())
                let asked = authenticator.count
                _ = try? rewritten.signature(for: message)
                #expect(authenticator.count == asked + 1)
                #expect(authenticator.requests.last?.flags.contains(.userPresence) == true)
            }
        }
    }

    @Test("A .biometryAny key-agreement key agrees after the evaluation and after a round trip; without its secret item it fails with errSecAuthFailed")
    func keyAgreement() async throws {
        try await withSwtpm { fixture in
            try inEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti), authenticator: CountingAuthenticator(.success)) {
                let key = try SecureEnclave.P256.KeyAgreement.PrivateKey(accessControl: access([.privateKeyUsage, .biometryAny]))
                let peer = P256.KeyAgreement.PrivateKey()
                let theirs = try peer.sharedSecretFromKeyAgreement(with: key.publicKey)
                #expect(try key.sharedSecretFromKeyAgreement(with: peer.publicKey) == theirs)
                let loaded = try SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation: key.dataRepresentation)
                #expect(try loaded.sharedSecretFromKeyAgreement(with: peer.publicKey) == theirs)

                let account = try #require(Self.secretItems().first?[Key.account]?.stringValue)
                try KeychainServicesDefaults.currentEngine().delete([
                    Key.class: .string(ItemClass.genericPassword.rawValue), Key.service: .string(SecureEnclaveKeySecrets.service),
                    Key.account: .string(account),
                ])
                let missing = enclaveError { _ = try loaded.sharedSecretFromKeyAgreement(with: peer.publicKey) }
                #expect(missing?.status == errSecAuthFailed)
                #expect(missing?.reason.contains("not in the keychain") == true)
            }
        }
    }

    @Test("A version-1 dataRepresentation with .userPresence (made before the binding) still loads, asks and signs")
    func versionOneStillSigns() async throws {
        try await withSwtpm { fixture in
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            let authenticator = CountingAuthenticator(.success, .userCancel)
            try inEnclave(token, authenticator: authenticator) {
                let old = try token.createKey(.signing)
                let envelope = KeyEnvelope(kind: .signing,
                                           accessControl: AccessControl(accessibility: .whenUnlockedThisDeviceOnly,
                                                                        flags: [.privateKeyUsage, .userPresence]),
                                           tokenBlob: old.dataRepresentation)
                let bytes = envelope.encoded()
                #expect(bytes[4] == 1)
                let key = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: bytes)
                #expect(key.publicKey.isValidSignature(try key.signature(for: Self.message), for: Self.message))
                #expect(authenticator.count == 1)
                #expect(enclaveError { _ = try key.signature(for: Self.message) }?.status == errSecUserCanceled)
                #expect(Self.secretItems().isEmpty)
            }
        }
    }
}
#endif
