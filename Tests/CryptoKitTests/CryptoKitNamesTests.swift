#if !canImport(Darwin)
import CryptoKit
import Foundation
import Testing

/// `import CryptoKit` alone (no Crypto, no Keystone module) keeps swift-crypto's names: app code's simulator-safe
/// CryptoKit round trips, unchanged but for Swift Testing's assertions.
@Suite("import CryptoKit: swift-crypto's names")
struct CryptoKitNamesTests {
    @Test("AES-GCM seals and opens with the key, and refuses another key")
    func aesGCM() throws {
        let key = SymmetricKey(size: .bits256)
        let plaintext = "Sensitive credentials".data(using: .utf8)!
        let sealedBox = try AES.GCM.seal(plaintext, using: key)
        let ciphertext = sealedBox.combined!
        #expect(ciphertext != plaintext)
        let reopened = try AES.GCM.SealedBox(combined: ciphertext)
        #expect(try AES.GCM.open(reopened, using: key) == plaintext)
        #expect(throws: (any Error).self) { try AES.GCM.open(reopened, using: SymmetricKey(size: .bits256)) }
    }

    @Test("P-256 signatures verify for the message and not for a tampered one; ChaChaPoly and Curve25519 agree")
    func signAndAgree() throws {
        let privateKey = P256.Signing.PrivateKey()
        let data = "Message to authenticate".data(using: .utf8)!
        let signature = try privateKey.signature(for: data)
        #expect(privateKey.publicKey.isValidSignature(signature, for: data))
        #expect(!privateKey.publicKey.isValidSignature(signature, for: "Tampered message".data(using: .utf8)!))

        let alice = Curve25519.KeyAgreement.PrivateKey()
        let bob = Curve25519.KeyAgreement.PrivateKey()
        let aliceKey = try alice.sharedSecretFromKeyAgreement(with: bob.publicKey)
            .hkdfDerivedSymmetricKey(using: SHA256.self, salt: Data(), sharedInfo: Data(), outputByteCount: 32)
        let bobKey = try bob.sharedSecretFromKeyAgreement(with: alice.publicKey)
            .hkdfDerivedSymmetricKey(using: SHA256.self, salt: Data(), sharedInfo: Data(), outputByteCount: 32)
        let sealed = try ChaChaPoly.seal("test".data(using: .utf8)!, using: aliceKey)
        #expect(try ChaChaPoly.open(sealed, using: bobKey) == "test".data(using: .utf8)!)
        #expect(SHA256.hash(data: data).description.hasPrefix("SHA256 digest: "))
    }
}
#endif
