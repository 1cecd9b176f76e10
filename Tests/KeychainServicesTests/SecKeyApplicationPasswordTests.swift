// Linux-only: `.applicationPassword` Secure Enclave SecKeys whose password the TPM (a real swtpm) enforces.
#if !canImport(Darwin)
import Crypto
import Foundation
import KeychainEngine
import KeychainServices
import Swtpm
import Testing
#if os(Linux)
import KeychainTPM
#endif

/// An `LAContext` carrying `password` as its application password (nil: none).
func passwordContext(_ password: String?) -> LAContext {
    let context = LAContext()
    if let password { #expect(context.setCredential(Data(password.utf8), type: .applicationPassword)) }
    return context
}

/// `SecKeyCreateRandomKey` / `SecKeyCreateSignature` with `.applicationPassword` on a real swtpm: the password of the
/// `kSecUseAuthenticationContext` (`LAContext.setCredential(_:type: .applicationPassword)`) is the key's TPM
/// authorization value, so the TPM itself refuses a wrong one and counts it.
@Suite("SecKey .applicationPassword enforced by swtpm", .serialized, .ownsDefaultKeychain)
struct SecKeyApplicationPasswordTests {
    let message = Data("signed with a TPM-enforced application password".utf8)

    #if os(Linux)
    @Test("The right password signs; a wrong one is refused by the TPM (errSecAuthFailed, its failure counter +1); none is errSecAuthFailed, or errSecInteractionNotAllowed without UI, and never reaches the TPM",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func rightWrongAndNoPassword() async throws {
        let message = self.message
        try await withSwtpm { fixture in
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            try withSecureEnclave(token) { harness in
                let access = accessControl([.privateKeyUsage, .applicationPassword])
                let created = createRandomKey(enclaveParameters(
                    tag: "se.password", privateAttributes: [kSecAttrAccessControl as String: access],
                    topLevel: [kSecUseAuthenticationContext as String: passwordContext("correct horse")]))
                let made = try #require(created.value, "\(String(describing: created.error))")
                let publicKey = try #require(SecKeyCopyPublicKey(made))
                // The TPM binds the key: its blob needs an authorization value, and the TPM refuses it without one.
                let blob = try #require(storedData(tag: "se.password"))
                #expect(try token.requiresAuthorization(blob))
                let digest = Data(SHA256.hash(data: message))
                #expect(throws: EngineError.self) { try token.signature(digest: digest, with: blob) }
                _ = try token.signature(digest: digest, with: blob, authorization: Data("correct horse".utf8))
                let askedBefore = harness.authenticator.count  // kSecReturnData of a protected item asks the gate

                // The creation's context signs.
                let signature = try #require(sign(made, .ecdsaSignatureMessageX962SHA256, message).value)
                #expect(verify(publicKey, .ecdsaSignatureMessageX962SHA256, message, signature).value == true)

                // A lookup with the right password signs; with a wrong one the TPM refuses and counts the failure.
                let (status, right) = lookUpKey(tag: "se.password", [kSecUseAuthenticationContext as String: passwordContext("correct horse")])
                #expect(status == errSecSuccess)
                let rightKey = try #require(right)
                let rightSignature = try #require(sign(rightKey, .ecdsaSignatureMessageX962SHA256, message).value)
                #expect(verify(publicKey, .ecdsaSignatureMessageX962SHA256, message, rightSignature).value == true)

                let before = try token.lockoutState().failedTries
                let wrong = try #require(lookUpKey(tag: "se.password", [kSecUseAuthenticationContext as String: passwordContext("battery staple")]).1)
                let refused = sign(wrong, .ecdsaSignatureMessageX962SHA256, message)
                #expect(refused.value == nil)
                #expect(refused.status == Int(errSecAuthFailed), "\(String(describing: refused.error))")
                #expect(refused.error?.localizedDescription.contains("battery") == false)
                #expect(try token.lockoutState().failedTries == before + 1)

                // No password: refused before the TPM (the counter does not move), as Decision in SecKeyToken.swift.
                let none = try #require(lookUpKey(tag: "se.password", [kSecUseAuthenticationContext as String: LAContext()]).1)
                let noPassword = sign(none, .ecdsaSignatureMessageX962SHA256, message)
                #expect(noPassword.status == Int(errSecAuthFailed))
                #expect(noPassword.error?.localizedDescription.contains("setCredential") == true)
                let bare = try #require(lookUpKey(tag: "se.password").1)
                #expect(sign(bare, .ecdsaSignatureMessageX962SHA256, message).status == Int(errSecAuthFailed))
                let noUI = try #require(lookUpKey(tag: "se.password", [kSecUseAuthenticationContext as String: LAContext(),
                                                                      kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail]).1)
                #expect(sign(noUI, .ecdsaSignatureMessageX962SHA256, message).status == Int(errSecInteractionNotAllowed))
                // An invalidated context's password is gone.
                let invalidated = passwordContext("correct horse")
                let later = try #require(lookUpKey(tag: "se.password", [kSecUseAuthenticationContext as String: invalidated]).1)
                invalidated.invalidate()
                #expect(sign(later, .ecdsaSignatureMessageX962SHA256, message).status == Int(errSecAuthFailed))
                #expect(try token.lockoutState().failedTries == before + 1)
                // The gate asked nobody: the password is the TPM's to check.
                #expect(harness.authenticator.count == askedBefore)
            }
        }
    }

    @Test("Making an .applicationPassword key without a password fails with errSecAuthFailed and stores nothing; a key without the flag needs no password and has no TPM authorization",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func creationAndKeysWithoutPassword() async throws {
        let message = self.message
        try await withSwtpm { fixture in
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            try withSecureEnclave(token) { _ in
                let refused = createRandomKey(enclaveParameters(
                    tag: "se.nopassword", privateAttributes: [kSecAttrAccessControl as String: accessControl([.privateKeyUsage, .applicationPassword])]))
                #expect(refused.value == nil)
                #expect(refused.status == Int(errSecAuthFailed))
                #expect(lookUpKey(tag: "se.nopassword").0 == errSecItemNotFound)

                let plain = try #require(createRandomKey(enclaveParameters(
                    tag: "se.plain", privateAttributes: [kSecAttrAccessControl as String: accessControl([.privateKeyUsage])])).value)
                #expect(try token.requiresAuthorization(try #require(storedData(tag: "se.plain"))) == false)
                #expect(sign(plain, .ecdsaSignatureMessageX962SHA256, message).value != nil)
                // A password on the context of a key without the flag is not sent (the key has none to check).
                let found = try #require(lookUpKey(tag: "se.plain", [kSecUseAuthenticationContext as String: passwordContext("unused")]).1)
                #expect(sign(found, .ecdsaSignatureMessageX962SHA256, message).value != nil)
            }
        }
    }
    #endif

    @Test("A token that cannot enforce an authorization value refuses an .applicationPassword key (errSecUnimplemented) without being asked to make one")
    func tokenWithoutAuthorization() throws {
        let token = CountingToken()
        try withSecureEnclave(token) { _ in
            let refused = createRandomKey(enclaveParameters(
                tag: "se.counting", permanent: false,
                privateAttributes: [kSecAttrAccessControl as String: accessControl([.privateKeyUsage, .applicationPassword])],
                topLevel: [kSecUseAuthenticationContext as String: passwordContext("pw")]))
            #expect(refused.status == Int(errSecUnimplemented))
            #expect(token.calls.current == 0)
        }
    }
}
#endif
