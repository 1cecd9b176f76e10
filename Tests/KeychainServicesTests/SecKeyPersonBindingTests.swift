// Linux-only: `.userPresence` / biometry / `.devicePasscode` Secure Enclave SecKeys bound in a real swtpm through a
// random secret the keychain releases after the evaluation (SecureEnclaveKeySecrets.swift).
#if !canImport(Darwin)
import Crypto
import Foundation
import KeychainEngine
import KeychainServices
import Swtpm
import Testing
#if os(Linux)
import KeychainTPM

/// A TPM token that counts the uses the layers above send it (with or without an authorization value).
final class ObservedTPMToken: SecureEnclaveToken {
    let tpm: TPMSecureEnclaveToken
    let uses = Locked(0)

    init(_ tpm: TPMSecureEnclaveToken) { self.tpm = tpm }

    var name: String { tpm.name }
    func availability() -> EngineError? { tpm.availability() }
    func createKey(_ usage: SecureEnclaveKeyUsage) throws(EngineError) -> SecureEnclaveKey { try tpm.createKey(usage) }
    func key(dataRepresentation: Data) throws(EngineError) -> SecureEnclaveKey { try tpm.key(dataRepresentation: dataRepresentation) }
    func signature(digest: Data, with dataRepresentation: Data) throws(EngineError) -> Data {
        uses.withLock { $0 += 1 }
        return try tpm.signature(digest: digest, with: dataRepresentation)
    }
    func sharedSecret(peerX963: Data, with dataRepresentation: Data) throws(EngineError) -> Data {
        uses.withLock { $0 += 1 }
        return try tpm.sharedSecret(peerX963: peerX963, with: dataRepresentation)
    }
    func createKey(_ usage: SecureEnclaveKeyUsage, authorization: Data) throws(EngineError) -> SecureEnclaveKey {
        try tpm.createKey(usage, authorization: authorization)
    }
    func requiresAuthorization(_ dataRepresentation: Data) throws(EngineError) -> Bool { try tpm.requiresAuthorization(dataRepresentation) }
    func signature(digest: Data, with dataRepresentation: Data, authorization: Data?) throws(EngineError) -> Data {
        uses.withLock { $0 += 1 }
        return try tpm.signature(digest: digest, with: dataRepresentation, authorization: authorization)
    }
    func sharedSecret(peerX963: Data, with dataRepresentation: Data, authorization: Data?) throws(EngineError) -> Data {
        uses.withLock { $0 += 1 }
        return try tpm.sharedSecret(peerX963: peerX963, with: dataRepresentation, authorization: authorization)
    }
    var enforcesAuthorization: Bool { tpm.enforcesAuthorization }
    func createKey(_ usage: SecureEnclaveKeyUsage, authorization: Data,
                   binding: SecureEnclaveKeyBinding) throws(EngineError) -> SecureEnclaveKey {
        try tpm.createKey(usage, authorization: authorization, binding: binding)
    }
    func binding(of dataRepresentation: Data) throws(EngineError) -> SecureEnclaveKeyBinding { try tpm.binding(of: dataRepresentation) }
}

/// The secret items of service "Keystone TPM key authorization" in the default keychain (attributes only).
func personSecretItems() -> [[String: Any]] {
    let (status, result) = copyItem([kSecClass as String: kSecClassGenericPassword,
                                     kSecAttrService as String: SecureEnclaveKeySecrets.service,
                                     kSecReturnAttributes as String: true, kSecMatchLimit as String: kSecMatchLimitAll])
    guard status == errSecSuccess else { return [] }
    return (result as? [[String: Any]]) ?? []
}

#endif

/// A Secure Enclave SecKey with `.userPresence` (or biometry, `.devicePasscode`) and `.privateKeyUsage`, on a real swtpm:
/// its TPM authorization value is a random secret the keychain holds under the key's own access control and releases
/// only after the key's evaluation, so a copy of the blob used through the TPM directly does not sign.
@Suite("SecKey person flags bound in swtpm", .serialized, .ownsDefaultKeychain)
struct SecKeyPersonBindingTests {
    let message = Data("signed after the person was asked".utf8)

    #if os(Linux)
    @Test("A .userPresence key signs after a successful evaluation; a cancelled or failed one fails with its status (errSecUserCanceled, errSecAuthFailed) and the TPM is never asked",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func signsOnlyAfterTheEvaluation() async throws {
        let message = self.message
        try await withSwtpm { fixture in
            let token = ObservedTPMToken(TPMSecureEnclaveToken(tcti: fixture.tcti))
            try withSecureEnclave(token) { harness in
                let auth = harness.authenticator
                let made = try #require(createRandomKey(enclaveParameters(tag: "se.presence", privateAttributes: [
                    kSecAttrAccessControl as String: accessControl([.privateKeyUsage, .userPresence]),
                ])).value)
                let publicKey = try #require(SecKeyCopyPublicKey(made))
                // The TPM binds the key to a released secret; the keychain holds that secret under the key's flags.
                let blob = try #require(storedData(tag: "se.presence"))
                #expect(try token.binding(of: blob) == .releasedSecret)
                let secrets = personSecretItems()
                #expect(secrets.count == 1)
                let asked = auth.count  // kSecReturnData of the protected key item asked the gate; nothing else did

                #expect(signs(made, verifiedBy: publicKey))
                #expect(auth.count == asked + 1)
                #expect(auth.requests.current.last?.operation == "useKeySign")
                #expect(token.uses.current == 1)

                auth.outcomes.withLock { $0 = [.userCancel, .failed] }
                let found = try #require(lookUpKey(tag: "se.presence").1)
                let cancelled = sign(found, .ecdsaSignatureMessageX962SHA256, message)
                #expect(cancelled.status == Int(errSecUserCanceled), "\(String(describing: cancelled.error))")
                let failed = sign(found, .ecdsaSignatureMessageX962SHA256, message)
                #expect(failed.status == Int(errSecAuthFailed), "\(String(describing: failed.error))")
                #expect(auth.count == asked + 3)
                #expect(token.uses.current == 1)
                // A failed evaluation deletes nothing: the secret is still there and the next success signs.
                #expect(personSecretItems().count == 1)
                #expect(signs(found, verifiedBy: publicKey))
                #expect(token.uses.current == 2)
            }
        }
    }

    @Test("The blob alone does not sign: the TPM refuses it without the secret or with a wrong one, and a refusal does not count toward its lockout (noDA)",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func blobAloneIsRefusedByTheTPM() async throws {
        let message = self.message
        try await withSwtpm { fixture in
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            try withSecureEnclave(token) { _ in
                _ = try #require(createRandomKey(enclaveParameters(tag: "se.copied", privateAttributes: [
                    kSecAttrAccessControl as String: accessControl([.privateKeyUsage, .biometryAny]),
                ])).value)
                let blob = try #require(storedData(tag: "se.copied"))
                let digest = Data(SHA256.hash(data: message))
                let before = try token.lockoutState().failedTries
                for authorization in [nil, Data(count: 32), Data("a guess".utf8)] {
                    do {
                        _ = try token.signature(digest: digest, with: blob, authorization: authorization)
                        Issue.record("the TPM signed without the key's secret")
                    } catch let error as EngineError {
                        #expect(error.status == Status.authFailed, "\(error)")
                    }
                }
                #expect(try token.lockoutState().failedTries == before)
            }
        }
    }

    @Test("A copied blob does not sign through tpm2-tools (tpm2_load + tpm2_sign: authorization failure); with the keychain's secret it does",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func copiedBlobWithTPM2Tools() async throws {
        let message = self.message
        try await withSwtpm { fixture in
            let directory = fixture.directory
            // Made and read through Keystone, whose TPM device is released before the tools run (3 object slots).
            let (pem, secret, publicX963): (String, Data, Data) = try {
                let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
                return try withSecureEnclave(token) { _ in
                    let made = try #require(createRandomKey(enclaveParameters(tag: "se.tools", privateAttributes: [
                        kSecAttrAccessControl as String: accessControl([.privateKeyUsage, .devicePasscode]),
                    ])).value)
                    let publicKey = try #require(SecKeyCopyPublicKey(made))
                    let x963 = try #require(SecKeyCopyExternalRepresentation(publicKey, nil) as Data?)
                    let blob = try #require(storedData(tag: "se.tools"))
                    // Whoever passes the key's evaluation (the recording authenticator says yes) reads the secret.
                    let account = try #require(personSecretItems().first?[kSecAttrAccount as String] as? String)
                    let (status, data) = copyItem([kSecClass as String: kSecClassGenericPassword,
                                                   kSecAttrService as String: SecureEnclaveKeySecrets.service,
                                                   kSecAttrAccount as String: account, kSecReturnData as String: true])
                    #expect(status == errSecSuccess)
                    return (try token.tss2PEM(dataRepresentation: blob), try #require(data as? Data), x963)
                }
            }()
            let key = try fixture.loadWithTools(pem: pem, digest: Data(SHA256.hash(data: message)))
            func sign(_ auth: String?) throws -> (status: Int32, output: String) { try key.sign(auth: auth) }
            let bare = try sign(nil)
            #expect(bare.status != 0)
            #expect(bare.output.contains("0x98e") || bare.output.lowercased().contains("authorization"), "\(bare.output)")
            #expect(try sign("").status != 0)
            let hex = secret.map { String(format: "%02x", $0) }.joined()
            let right = try sign("hex:\(hex)")
            #expect(right.status == 0, "\(right.output)")
            let raw = try Data(contentsOf: URL(fileURLWithPath: "\(directory)/sig.bin"))
            let signature = try P256.Signing.ECDSASignature(derRepresentation: raw)
            #expect(try P256.Signing.PublicKey(x963Representation: publicX963).isValidSignature(signature, for: message))
        }
    }

    @Test("SecItemDelete of the key deletes its secret item; a key whose secret is gone fails with errSecAuthFailed and is not deleted by the failure",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func deletingTheKeyDeletesTheSecret() async throws {
        let message = self.message
        try await withSwtpm { fixture in
            try withSecureEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) { _ in
                for tag in ["se.keep", "se.drop"] {
                    _ = try #require(createRandomKey(enclaveParameters(tag: tag, privateAttributes: [
                        kSecAttrAccessControl as String: accessControl([.privateKeyUsage, .userPresence]),
                    ])).value)
                }
                #expect(personSecretItems().count == 2)
                let status = SecItemDelete([kSecClass as String: kSecClassKey,
                                            kSecAttrApplicationTag as String: Data("se.drop".utf8)] as CFDictionary)
                #expect(status == errSecSuccess)
                #expect(lookUpKey(tag: "se.drop").0 == errSecItemNotFound)
                #expect(personSecretItems().count == 1)
                let kept = try #require(lookUpKey(tag: "se.keep").1)
                #expect(sign(kept, .ecdsaSignatureMessageX962SHA256, message).value != nil)

                // The secret deleted by hand: the key is refused (the TPM would refuse it), and stays.
                let account = try #require(personSecretItems().first?[kSecAttrAccount as String] as? String)
                #expect(SecItemDelete([kSecClass as String: kSecClassGenericPassword,
                                       kSecAttrService as String: SecureEnclaveKeySecrets.service,
                                       kSecAttrAccount as String: account] as CFDictionary) == errSecSuccess)
                let orphan = sign(kept, .ecdsaSignatureMessageX962SHA256, message)
                #expect(orphan.status == Int(errSecAuthFailed))
                #expect(orphan.error?.localizedDescription.contains("not in the keychain") == true, "\(String(describing: orphan.error))")
                #expect(lookUpKey(tag: "se.keep").0 == errSecSuccess)
            }
        }
    }

    @Test("A locked keychain does not release the secret: the use fails with errSecInteractionNotAllowed before the person or the TPM is asked; unlocked, it signs",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func lockedKeychainReleasesNothing() async throws {
        let message = self.message
        try await withSwtpm { fixture in
            let token = ObservedTPMToken(TPMSecureEnclaveToken(tcti: fixture.tcti))
            try withSecureEnclave(token) { harness in
                let made = try #require(createRandomKey(enclaveParameters(tag: "se.locked", privateAttributes: [
                    kSecAttrAccessControl as String: accessControl([.privateKeyUsage, .userPresence]),
                ])).value)
                let storage = try #require(harness.engine.storage as? MemoryStorage)
                storage.lockState = .locked
                let asked = harness.authenticator.count
                let refused = sign(made, .ecdsaSignatureMessageX962SHA256, message)
                #expect(refused.status == Int(errSecInteractionNotAllowed), "\(String(describing: refused.error))")
                #expect(harness.authenticator.count == asked)
                #expect(token.uses.current == 0)
                storage.lockState = .unlocked
                #expect(sign(made, .ecdsaSignatureMessageX962SHA256, message).value != nil)
                #expect(token.uses.current == 1)
            }
        }
    }

    @Test("A key that is not permanent is bound too, its secret held by the key object only (nothing in the keychain)",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func ephemeralKey() async throws {
        try await withSwtpm { fixture in
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            try withSecureEnclave(token) { harness in
                let made = try #require(createRandomKey(enclaveParameters(tag: "se.ephemeral", permanent: false, privateAttributes: [
                    kSecAttrAccessControl as String: accessControl([.privateKeyUsage, .userPresence]),
                ])).value)
                let attributes = try #require(SecKeyCopyAttributes(made) as? [String: Any])
                let blob = try #require(attributes["toid"] as? Data)
                #expect(try token.binding(of: blob) == .releasedSecret)
                #expect(personSecretItems().isEmpty)
                #expect(signs(made, verifiedBy: try #require(SecKeyCopyPublicKey(made))))
                #expect(harness.authenticator.count == 1)
                harness.authenticator.outcomes.withLock { $0 = [.userCancel] }
                #expect(sign(made, .ecdsaSignatureMessageX962SHA256, Data("m".utf8)).status == Int(errSecUserCanceled))
            }
        }
    }

    @Test(".applicationPassword with .userPresence needs both: the evaluation and the right password (a wrong one is refused by the TPM and counted)",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func passwordAndPresence() async throws {
        let message = self.message
        try await withSwtpm { fixture in
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            try withSecureEnclave(token) { harness in
                _ = try #require(createRandomKey(enclaveParameters(
                    tag: "se.both", privateAttributes: [kSecAttrAccessControl as String: accessControl([.privateKeyUsage, .userPresence, .applicationPassword])],
                    topLevel: [kSecUseAuthenticationContext as String: passwordContext("correct horse")])).value)
                let blob = try #require(storedData(tag: "se.both"))
                #expect(try token.binding(of: blob) == .releasedSecretAndPassword)
                let asked = harness.authenticator.count
                let right = try #require(lookUpKey(tag: "se.both", [kSecUseAuthenticationContext as String: passwordContext("correct horse")]).1)
                #expect(sign(right, .ecdsaSignatureMessageX962SHA256, message).value != nil)
                #expect(harness.authenticator.count == asked + 1)
                let before = try token.lockoutState().failedTries
                let wrong = try #require(lookUpKey(tag: "se.both", [kSecUseAuthenticationContext as String: passwordContext("battery staple")]).1)
                #expect(sign(wrong, .ecdsaSignatureMessageX962SHA256, message).status == Int(errSecAuthFailed))
                #expect(try token.lockoutState().failedTries == before + 1)
                // The password alone (as a PIN key's) is refused by the TPM: the secret is part of the value.
                #expect(throws: EngineError.self) {
                    try token.signature(digest: Data(SHA256.hash(data: message)), with: blob, authorization: Data("correct horse".utf8))
                }
            }
        }
    }

    @Test("A key stored before the binding (a version-1 blob, no authorization value) with .userPresence still signs after the evaluation, and still asks it",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func olderBlobStillSigns() async throws {
        try await withSwtpm { fixture in
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            try withSecureEnclave(token) { harness in
                // What an older Keystone stored: the token's plain blob, the key's access control on the item.
                let old = try token.createKey(.general)
                #expect(old.dataRepresentation[4] == 1)  // envelope version 1
                let status = SecItemAdd([
                    kSecClass as String: kSecClassKey, kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
                    kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                    kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave, kSecAttrApplicationTag as String: Data("se.old".utf8),
                    kSecAttrApplicationLabel as String: Data(Insecure.SHA1.hash(data: old.publicKeyX963)),
                    kSecAttrAccessControl as String: accessControl([.privateKeyUsage, .userPresence]),
                    kSecValueData as String: old.dataRepresentation,
                ] as CFDictionary, nil)
                try #require(status == errSecSuccess, "SecItemAdd: \(status)")
                let key = try #require(lookUpKey(tag: "se.old").1)
                let publicKey = try #require(SecKeyCopyPublicKey(key))
                #expect(SecKeyCopyExternalRepresentation(publicKey, nil) as Data? == old.publicKeyX963)
                #expect(signs(key, verifiedBy: publicKey))
                #expect(harness.authenticator.count == 1)
                harness.authenticator.outcomes.withLock { $0 = [.userCancel] }
                #expect(sign(key, .ecdsaSignatureMessageX962SHA256, Data("m".utf8)).status == Int(errSecUserCanceled))
            }
        }
    }
    #endif

    @Test("A token that cannot enforce an authorization value keeps a .userPresence key on the authentication gate (no secret item), as before the binding")
    func tokenWithoutAuthorizationKeepsTheGate() throws {
        let token = CountingToken()
        #expect(SecureEnclaveKeySecrets.binds([.privateKeyUsage, .userPresence], on: token) == false)
        #expect(token.enforcesAuthorization == false)
        #if os(Linux)
        let tpm = TPMSecureEnclaveToken(tcti: "swtpm:host=127.0.0.1,port=1")  // opens nothing
        #expect(SecureEnclaveKeySecrets.binds([.privateKeyUsage, .userPresence], on: tpm))
        #expect(SecureEnclaveKeySecrets.binds([.privateKeyUsage, .devicePasscode], on: tpm))
        #expect(SecureEnclaveKeySecrets.binds([.userPresence], on: tpm) == false)  // no private-key use to bind
        #expect(SecureEnclaveKeySecrets.binds([.privateKeyUsage, .applicationPassword], on: tpm) == false)
        #endif
    }
}
#endif
