// Linux-only: Secure Enclave SecKeys (kSecAttrTokenIDSecureEnclave) on a real software TPM (swtpm).
#if !canImport(Darwin)
import Crypto
import DefaultKeychainLock
import Foundation
import KeychainEngine
import KeychainServices
import Swtpm
import Testing
#if os(Linux)
import KeychainTPM
#endif

// MARK: - Test doubles and helpers

/// An authenticator that records every request and answers with scripted outcomes (success when none is left), with
/// a biometry domain state a test can change.
final class RecordingAuthenticator: Authenticator {
    let outcomes = Locked<[AuthenticationOutcome]>([])
    let requests = Locked<[AuthenticationRequest]>([])
    let domainState = Locked<Data?>(nil)

    func authenticate(_ request: AuthenticationRequest) -> AuthenticationOutcome {
        requests.withLock { $0.append(request) }
        return outcomes.withLock { $0.isEmpty ? .success : $0.removeFirst() }
    }

    var biometryDomainState: Data? { domainState.current }
    var count: Int { requests.current.count }
}

/// A token that makes nothing and counts every call: proves that a refused creation never reached the token.
final class CountingToken: SecureEnclaveToken {
    let calls = Locked(0)
    var name: String { "counting test token" }
    private func called() -> EngineError {
        calls.withLock { $0 += 1 }
        return EngineError(Status.notAvailable, "the counting test token makes and uses no key")
    }
    func availability() -> EngineError? { called() }
    func createKey(_ usage: SecureEnclaveKeyUsage) throws(EngineError) -> SecureEnclaveKey { throw called() }
    func key(dataRepresentation: Data) throws(EngineError) -> SecureEnclaveKey { throw called() }
    func signature(digest: Data, with dataRepresentation: Data) throws(EngineError) -> Data { throw called() }
    func sharedSecret(peerX963: Data, with dataRepresentation: Data) throws(EngineError) -> Data { throw called() }
}

/// A clock the tests move (LAContext reuse windows).
final class TestClock: Sendable {
    let date = Locked(Date(timeIntervalSinceReferenceDate: 800_000_000))
    func advance(_ seconds: TimeInterval) { date.withLock { $0 += seconds } }
}

/// What a test runs with: a fresh memory keychain made by KeychainServicesDefaults, its authenticator and clock.
struct EnclaveHarness {
    let engine: KeychainEngine
    let authenticator: RecordingAuthenticator
    let clock: TestClock
}

/// Runs `body` with `token` as the Secure Enclave and a fresh memory keychain (a recording authenticator, a test
/// clock); restores the process's Secure Enclave and gives the next suite a fresh keychain after.
func withSecureEnclave<T>(_ token: (any SecureEnclaveToken)?, _ body: (EnclaveHarness) throws -> T) throws -> T {
    let saved = KeychainServicesDefaults.secureEnclave
    defer {
        KeychainServicesDefaults.useSecureEnclave(saved)
        KeychainServicesDefaults.useMemoryKeychain()
    }
    KeychainServicesDefaults.useSecureEnclave(token)
    let engine = KeychainServicesDefaults.useMemoryKeychain()
    let authenticator = RecordingAuthenticator()
    engine.authenticator = authenticator
    let clock = TestClock()
    engine.configuration.now = { clock.date.current }
    return try body(EnclaveHarness(engine: engine, authenticator: authenticator, clock: clock))
}

/// SecKeyCreateRandomKey's parameters for a 256-bit EC key in the Secure Enclave.
func enclaveParameters(tag: String, permanent: Bool = true, privateAttributes: [String: Any] = [:],
                       topLevel: [String: Any] = [:]) -> [String: Any] {
    var own: [String: Any] = [kSecAttrIsPermanent as String: permanent, kSecAttrApplicationTag as String: Data(tag.utf8)]
    own.merge(privateAttributes) { $1 }
    var parameters: [String: Any] = [
        kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
        kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave, kSecPrivateKeyAttrs as String: own,
    ]
    parameters.merge(topLevel) { $1 }
    return parameters
}

func createRandomKey(_ parameters: [String: Any]) -> SecKeyCall<SecKey> {
    call { SecKeyCreateRandomKey(parameters as CFDictionary, $0) }
}

/// The public key of a fresh software EC key.
func softwarePublicKey(bits: Int = 256) -> SecKey? { newKey(bits: bits).flatMap(SecKeyCopyPublicKey) }

func accessControl(_ flags: SecAccessControlCreateFlags) -> SecAccessControl {
    SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, flags, nil)!
}

/// The key item found by `tag`, as an object (kSecReturnRef), with `extra` in the query.
func lookUpKey(tag: String, _ extra: [String: Any] = [:]) -> (OSStatus, SecKey?) {
    var query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data(tag.utf8),
                                kSecReturnRef as String: true]
    query.merge(extra) { $1 }
    let (status, result) = copyItem(query)
    return (status, result as? SecKey)
}

/// The stored item's data (kSecReturnData) for `tag`.
func storedData(tag: String) -> Data? {
    copyItem([kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data(tag.utf8),
              kSecReturnData as String: true]).1 as? Data
}

let swtpmMissing = Comment(rawValue: SwtpmFixture.unavailableReason ?? "swtpm is installed")
#if os(Linux)
let canUseSwtpm = SwtpmFixture.unavailableReason == nil
#else
let canUseSwtpm = false
#endif

// MARK: - The tests

/// `SecKeyCreateRandomKey` with `kSecAttrTokenID: kSecAttrTokenIDSecureEnclave` on Linux: a P-256 key made and used
/// inside a TPM (a fresh swtpm per test), stored as a key item with `tkid`, checked with tools no one here wrote
/// (swift-crypto, `openssl dgst -verify`). Blocking work (the TPM, prompts) runs on threads of its own.
@Suite("SecKey on the Secure Enclave token", .serialized, .ownsDefaultKeychain)
struct SecKeySecureEnclaveTests {
    let message = Data("Signed inside the TPM, verified outside it.\n".utf8)

    #if os(Linux)
    @Test("A permanent key is a key item with tkid whose data is the token's blob, never a private key; its export fails with errSecUnimplemented",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func permanentKeyItem() async throws {
        try await withSwtpm { fixture in
            try withSecureEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) { _ in
                let created = createRandomKey(enclaveParameters(tag: "se.item", privateAttributes: [kSecAttrLabel as String: "Enclave"]))
                let key = try #require(created.value, "\(String(describing: created.error))")
                let publicKey = try #require(SecKeyCopyPublicKey(key))

                let item = try #require(attributesOf([kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data("se.item".utf8),
                                                      kSecReturnData as String: true]))
                #expect(item[kSecAttrTokenID as String] as? String == kSecAttrTokenIDSecureEnclave as String)
                #expect(item[kSecAttrLabel as String] as? String == "Enclave")
                let data = try #require(item[kSecValueData as String] as? Data)
                // Not a private key in any form Apple or swift-crypto knows, and not a bare scalar.
                #expect(data.count != 32 && data.count != 97)
                #expect(createKey(data, type: kSecAttrKeyTypeECSECPrimeRandom, keyClass: kSecAttrKeyClassPrivate).value == nil)
                #expect((try? P256.Signing.PrivateKey(x963Representation: data)) == nil)
                #expect((try? P256.Signing.PrivateKey(derRepresentation: data)) == nil)

                let export = call { SecKeyCopyExternalRepresentation(key, $0) }
                #expect(export.value == nil)
                #expect(export.status == Int(errSecUnimplemented))
                #expect(export.error?.localizedDescription.contains("export not implemented for key <SecKeyRef:('com.apple.setoken')") == true)

                let publicBytes = externalRepresentation(publicKey)
                #expect(publicBytes.count == 65 && publicBytes.first == 0x04)
                let attributes = try #require(SecKeyCopyAttributes(key) as? [String: Any])
                #expect(attributes[kSecAttrTokenID as String] as? String == kSecAttrTokenIDSecureEnclave as String)
                #expect(attributes[kSecAttrKeyClass as String] as? String == kSecAttrKeyClassPrivate as String)
                #expect(attributes[kSecAttrKeySizeInBits as String] as? Int == 256)
                #expect(attributes[kSecAttrApplicationLabel as String] as? Data == Data(Insecure.SHA1.hash(data: publicBytes)))
                #expect(attributes[kSecAttrCanSign as String] as? Bool == true)
                #expect(attributes[kSecAttrCanDerive as String] as? Bool == true)
                #expect(attributes[kSecAttrCanDecrypt as String] as? Bool == true)
                #expect(attributes[kSecAttrIsExtractable as String] as? Bool == false)
                #expect(attributes[kSecValueData as String] == nil)
                #expect(attributes["toid"] as? Data == data)
                #expect(SecKeyGetBlockSize(key) == 32)
                #expect(key.description.hasPrefix("<SecKeyRef:('com.apple.setoken') 0x"))
                // The item is found by its application label too, as any key item is.
                #expect(attributesOf([kSecClass as String: kSecClassKey,
                                      kSecAttrApplicationLabel as String: Data(Insecure.SHA1.hash(data: publicBytes))]) != nil)
            }
        }
    }

    @Test("Signatures verify with SecKeyVerifySignature, swift-crypto and openssl dgst -verify; unsupported algorithms are refused",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func signatures() async throws {
        let message = self.message
        try await withSwtpm { fixture in
            try withSecureEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) { _ in
                let key = try #require(createRandomKey(enclaveParameters(tag: "se.sign", permanent: false)).value)
                let publicKey = try #require(SecKeyCopyPublicKey(key))
                let swiftCryptoKey = try P256.Signing.PublicKey(x963Representation: externalRepresentation(publicKey))

                let der = try #require(sign(key, .ecdsaSignatureMessageX962SHA256, message).value)
                #expect(verify(publicKey, .ecdsaSignatureMessageX962SHA256, message, der).value == true)
                #expect(swiftCryptoKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: der), for: message))
                #expect(verify(publicKey, .ecdsaSignatureMessageX962SHA256, Data("other".utf8), der).status == Int(errSecVerifyFailed))

                let directory = fixture.directory
                try swiftCryptoKey.pemRepresentation.write(toFile: "\(directory)/se.pem", atomically: true, encoding: .utf8)
                try der.write(to: URL(fileURLWithPath: "\(directory)/se.sig"))
                try message.write(to: URL(fileURLWithPath: "\(directory)/se.msg"))
                let verified = try fixture.run(SwtpmFixture.opensslPath, ["dgst", "-sha256", "-verify", "\(directory)/se.pem",
                                                                         "-signature", "\(directory)/se.sig", "\(directory)/se.msg"])
                #expect(verified.status == 0 && verified.output.contains("Verified OK"), "openssl: \(verified.output)")

                // The digest forms, another hash (cut to 256 bits as ECDSA does), and r || s.
                let digest256 = digest(message, "SHA256")
                for algorithm in [SecKeyAlgorithm.ecdsaSignatureDigestX962SHA256, .ecdsaSignatureDigestX962] {
                    let signature = try #require(sign(key, algorithm, digest256).value)
                    #expect(verify(publicKey, .ecdsaSignatureDigestX962SHA256, digest256, signature).value == true)
                }
                for (algorithm, hash) in [(SecKeyAlgorithm.ecdsaSignatureMessageX962SHA384, "SHA384"), (.ecdsaSignatureMessageX962SHA1, "SHA1"),
                                          (.ecdsaSignatureMessageX962SHA512, "SHA512")] {
                    let signature = try #require(sign(key, algorithm, message).value, "\(algorithm.rawValue)")
                    #expect(verify(publicKey, algorithm, message, signature).value == true, "\(algorithm.rawValue)")
                    #expect(verify(publicKey, SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:digest-X962:\(hash)" as CFString),
                                   digest(message, hash), signature).value == true, "\(algorithm.rawValue)")
                }
                let raw = try #require(sign(key, .ecdsaSignatureRFC4754, digest256).value)
                #expect(raw.count == 64)
                #expect(swiftCryptoKey.isValidSignature(try P256.Signing.ECDSASignature(rawRepresentation: raw), for: SHA256.hash(data: message)))
                #expect(sign(key, .ecdsaSignatureDigestX962SHA256, Data(count: 31)).status == Int(errSecParam))

                for algorithm in [SecKeyAlgorithm.rsaSignatureMessagePKCS1v15SHA256, .ecdsaSignatureMessageX962SHA224] {
                    #expect(!SecKeyIsAlgorithmSupported(key, .sign, algorithm))
                    #expect(sign(key, algorithm, message).status == Int(errSecParam))
                }
                #expect(SecKeyIsAlgorithmSupported(key, .sign, .ecdsaSignatureMessageX962SHA256))
                #expect(SecKeyIsAlgorithmSupported(key, .keyExchange, .ecdhKeyExchangeStandard))
                #expect(SecKeyIsAlgorithmSupported(key, .decrypt, .eciesEncryptionStandardX963SHA256AESGCM))
                #expect(!SecKeyIsAlgorithmSupported(key, .verify, .ecdsaSignatureMessageX962SHA256))
                #expect(!SecKeyIsAlgorithmSupported(key, .encrypt, .eciesEncryptionStandardX963SHA256AESGCM))
            }
        }
    }

    @Test("ECDH (standard, cofactor, X9.63 KDF) agrees with a software peer; ECIES encrypted in software decrypts with the enclave key",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func keyExchangeAndECIES() async throws {
        try await withSwtpm { fixture in
            try withSecureEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) { _ in
                let key = try #require(createRandomKey(enclaveParameters(tag: "se.ecdh", permanent: false)).value)
                let publicKey = try #require(SecKeyCopyPublicKey(key))
                let peer = try #require(newKey())
                let peerPublic = try #require(SecKeyCopyPublicKey(peer))

                let mine = try #require(exchange(key, .ecdhKeyExchangeStandard, peerPublic).value)
                let theirs = try #require(exchange(peer, .ecdhKeyExchangeStandard, publicKey).value)
                #expect(mine.count == 32)
                #expect(mine == theirs)
                let swiftCryptoPeer = try P256.KeyAgreement.PrivateKey(x963Representation: externalRepresentation(peer))
                let expected = try swiftCryptoPeer.sharedSecretFromKeyAgreement(
                    with: P256.KeyAgreement.PublicKey(x963Representation: externalRepresentation(publicKey)))
                #expect(mine == expected.withUnsafeBytes { Data($0) })
                #expect(exchange(key, .ecdhKeyExchangeCofactor, peerPublic).value == mine)

                let parameters: [String: Any] = [SecKeyKeyExchangeParameter.requestedSize.rawValue as String: 48,
                                                 SecKeyKeyExchangeParameter.sharedInfo.rawValue as String: Data("info".utf8)]
                let derived = try #require(exchange(key, .ecdhKeyExchangeStandardX963SHA256, peerPublic, parameters).value)
                #expect(derived.count == 48)
                #expect(derived == exchange(peer, .ecdhKeyExchangeStandardX963SHA256, publicKey, parameters).value)
                #expect(exchange(key, .ecdhKeyExchangeStandardX963SHA256, peerPublic).status == Int(errSecParam))
                let p384 = try #require(softwarePublicKey(bits: 384))
                #expect(exchange(key, .ecdhKeyExchangeStandard, p384).status == Int(errSecParam))

                let plaintext = Data("sealed for the key in the TPM".utf8)
                for algorithm in [SecKeyAlgorithm.eciesEncryptionStandardX963SHA256AESGCM, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM,
                                  .eciesEncryptionStandardVariableIVX963SHA512AESGCM] {
                    let ciphertext = try #require(encrypt(publicKey, algorithm, plaintext).value, "\(algorithm.rawValue)")
                    #expect(decrypt(key, algorithm, ciphertext).value == plaintext, "\(algorithm.rawValue)")
                    var tampered = ciphertext
                    tampered[tampered.endIndex - 1] ^= 0x01
                    #expect(decrypt(key, algorithm, tampered).status == Int(errSecParam), "\(algorithm.rawValue)")
                }
            }
        }
    }

    @Test("A lookup by tag (and by tkid) returns a key bound to the token that signs; kSecReturnData is the blob; deleting removes it",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func lookupAndDelete() async throws {
        try await withSwtpm { fixture in
            try withSecureEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) { _ in
                let created = try #require(createRandomKey(enclaveParameters(tag: "se.lookup")).value)
                let publicKey = try #require(SecKeyCopyPublicKey(created))
                let (status, found) = lookUpKey(tag: "se.lookup", [kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave])
                #expect(status == errSecSuccess)
                let key = try #require(found)
                #expect(key == created)
                #expect(signs(key, verifiedBy: publicKey))
                #expect(SecKeyCopyPublicKey(key) == publicKey)
                #expect(storedData(tag: "se.lookup") == (SecKeyCopyAttributes(key) as? [String: Any])?["toid"] as? Data)
                // Another token id, or none, does not find it.
                #expect(lookUpKey(tag: "se.lookup", [kSecAttrTokenID as String: "com.example.token"]).0 == errSecItemNotFound)
                // The same key again is a duplicate, as any key item.
                #expect(createRandomKey(enclaveParameters(tag: "se.lookup")).value != nil)  // another key, another label
                #expect(SecItemAdd([kSecValueRef as String: created] as CFDictionary, nil) == errSecDuplicateItem)

                #expect(SecItemDelete([kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data("se.lookup".utf8)] as CFDictionary) == errSecSuccess)
                #expect(lookUpKey(tag: "se.lookup").0 == errSecItemNotFound)
            }
        }
    }

    @Test("A stored key of another TPM fails with errSecDecode when used, and its item is left untouched",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func keyOfAnotherTPM() async throws {
        try await withSwtpm { fixture in
            let other = try SwtpmFixture.start()
            defer { other.stop() }
            let first = TPMSecureEnclaveToken(tcti: fixture.tcti)
            try withSecureEnclave(first) { _ in
                let created = try #require(createRandomKey(enclaveParameters(tag: "se.other")).value)
                let publicKey = try #require(SecKeyCopyPublicKey(created))
                let before = try #require(storedData(tag: "se.other"))

                KeychainServicesDefaults.useSecureEnclave(TPMSecureEnclaveToken(tcti: other.tcti))
                let key = try #require(lookUpKey(tag: "se.other").1)
                let signed = sign(key, .ecdsaSignatureMessageX962SHA256, Data("m".utf8))
                #expect(signed.value == nil)
                #expect(signed.status == Int(errSecDecode))
                #expect(signed.error?.localizedDescription.contains("another Secure Enclave") == true)
                let peer = try #require(softwarePublicKey())
                #expect(exchange(key, .ecdhKeyExchangeStandard, peer).status == Int(errSecDecode))
                #expect(storedData(tag: "se.other") == before)

                // With the token that made it, the same item works again.
                KeychainServicesDefaults.useSecureEnclave(first)
                #expect(signs(try #require(lookUpKey(tag: "se.other").1), verifiedBy: publicKey))
            }
        }
    }

    @Test("With .privateKeyUsage and .userPresence each use asks once, a lookup never asks, and a refusal keeps its status",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func accessControlPerUse() async throws {
        try await withSwtpm { fixture in
            try withSecureEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) { harness in
                let auth = harness.authenticator
                let created = try #require(createRandomKey(enclaveParameters(tag: "se.ac", privateAttributes: [
                    kSecAttrAccessControl as String: accessControl([.privateKeyUsage, .userPresence]),
                ], topLevel: [kSecUseOperationPrompt as String: "Sign the release"])).value)
                #expect(auth.count == 0)
                let publicKey = try #require(SecKeyCopyPublicKey(created))

                #expect(signs(created, verifiedBy: publicKey))
                #expect(auth.count == 1)
                #expect(auth.requests.current.last?.operation == "useKeySign")
                #expect(auth.requests.current.last?.operationPrompt == "Sign the release")
                #expect(auth.requests.current.last?.itemClass == .key)
                #expect(signs(created, verifiedBy: publicKey))
                #expect(auth.count == 2)

                // A lookup does not ask; its prompt is the one each use shows.
                let key = try #require(lookUpKey(tag: "se.ac", [kSecUseOperationPrompt as String: "Use the key"]).1)
                #expect(auth.count == 2)
                let peer = try #require(softwarePublicKey())
                #expect(exchange(key, .ecdhKeyExchangeStandard, peer).value != nil)
                #expect(auth.count == 3)
                #expect(auth.requests.current.last?.operation == "useKeyKeyExchange")
                #expect(auth.requests.current.last?.operationPrompt == "Use the key")
                let ciphertext = try #require(encrypt(publicKey, .eciesEncryptionStandardX963SHA256AESGCM, Data("x".utf8)).value)
                #expect(decrypt(key, .eciesEncryptionStandardX963SHA256AESGCM, ciphertext).value == Data("x".utf8))
                #expect(auth.count == 4)
                #expect(auth.requests.current.last?.operation == "useKeyDecrypt")
                // Bad input fails before anyone is asked.
                #expect(sign(key, .ecdsaSignatureDigestX962SHA256, Data(count: 5)).status == Int(errSecParam))
                #expect(auth.count == 4)

                auth.outcomes.withLock { $0 = [.userCancel, .failed] }
                let cancelled = sign(key, .ecdsaSignatureMessageX962SHA256, Data("m".utf8))
                #expect(cancelled.value == nil)
                #expect(cancelled.status == Int(errSecUserCanceled))
                #expect(sign(key, .ecdsaSignatureMessageX962SHA256, Data("m".utf8)).status == Int(errSecAuthFailed))
                #expect(auth.count == 6)

                // kSecUseAuthenticationUIFail: a use that needs a prompt fails without asking.
                let quiet = try #require(lookUpKey(tag: "se.ac", [kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail]).1)
                #expect(sign(quiet, .ecdsaSignatureMessageX962SHA256, Data("m".utf8)).status == Int(errSecInteractionNotAllowed))
                #expect(auth.count == 6)
            }
        }
    }

    @Test("An LAContext's reuse window covers uses after one authentication; its localizedReason is the prompt; an invalidated one fails",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func laContextReuseAndInvalidation() async throws {
        try await withSwtpm { fixture in
            try withSecureEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) { harness in
                let auth = harness.authenticator
                let creation = LAContext()
                let created = try #require(createRandomKey(enclaveParameters(tag: "se.reuse", privateAttributes: [
                    kSecAttrAccessControl as String: accessControl([.privateKeyUsage, .biometryAny]),
                    kSecUseAuthenticationContext as String: creation,
                ])).value)
                let publicKey = try #require(SecKeyCopyPublicKey(created))

                let context = LAContext()
                context.touchIDAuthenticationAllowableReuseDuration = 60
                context.localizedReason = "Approve the payment"
                let key = try #require(lookUpKey(tag: "se.reuse", [kSecUseAuthenticationContext as String: context]).1)
                #expect(signs(key, verifiedBy: publicKey))
                #expect(auth.count == 1)
                #expect(auth.requests.current.last?.operationPrompt == "Approve the payment")
                harness.clock.advance(30)
                #expect(signs(key, verifiedBy: publicKey))
                #expect(auth.count == 1)
                harness.clock.advance(31)
                #expect(signs(key, verifiedBy: publicKey))
                #expect(auth.count == 2)

                // The key made with a context keeps it: invalidating it fails every use, without asking.
                #expect(signs(created, verifiedBy: publicKey))
                #expect(auth.count == 3)
                creation.invalidate()
                let refused = sign(created, .ecdsaSignatureMessageX962SHA256, Data("m".utf8))
                #expect(refused.status == Int(errSecAuthFailed))
                #expect(auth.count == 3)
                context.invalidate()
                #expect(sign(key, .ecdsaSignatureMessageX962SHA256, Data("m".utf8)).status == Int(errSecAuthFailed))
                #expect(auth.count == 3)
            }
        }
    }

    @Test("Without .privateKeyUsage an authentication flag forbids private-key use; .privateKeyUsage alone asks nothing; .biometryCurrentSet follows the enrollment",
          .enabled(if: canUseSwtpm, swtpmMissing))
    func accessControlFlags() async throws {
        try await withSwtpm { fixture in
            try withSecureEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) { harness in
                let auth = harness.authenticator
                let guarded = try #require(createRandomKey(enclaveParameters(tag: "se.nousage", privateAttributes: [
                    kSecAttrAccessControl as String: accessControl([.userPresence]),
                ])).value)
                let refused = sign(guarded, .ecdsaSignatureMessageX962SHA256, Data("m".utf8))
                #expect(refused.status == Int(errSecAuthFailed))
                #expect(refused.error?.localizedDescription.contains(".privateKeyUsage") == true)
                #expect(auth.count == 0)

                let free = try #require(createRandomKey(enclaveParameters(tag: "se.usage", privateAttributes: [
                    kSecAttrAccessControl as String: accessControl([.privateKeyUsage]),
                ])).value)
                #expect(signs(free, verifiedBy: try #require(SecKeyCopyPublicKey(free))))
                #expect(auth.count == 0)

                auth.domainState.withLock { $0 = Data("one finger".utf8) }
                let bound = try #require(createRandomKey(enclaveParameters(tag: "se.bio", privateAttributes: [
                    kSecAttrAccessControl as String: accessControl([.privateKeyUsage, .biometryCurrentSet]),
                ])).value)
                let boundPublic = try #require(SecKeyCopyPublicKey(bound))
                #expect(signs(bound, verifiedBy: boundPublic))
                #expect(auth.count == 1)
                auth.domainState.withLock { $0 = Data("two fingers".utf8) }
                #expect(sign(bound, .ecdsaSignatureMessageX962SHA256, Data("m".utf8)).status == Int(errSecAuthFailed))
                #expect(auth.count == 1)
                // The stored key is refused too: the keychain does not hand it out after the enrollment changed.
                #expect(lookUpKey(tag: "se.bio").0 == errSecAuthFailed)
            }
        }
    }
    #endif

    @Test("With no Secure Enclave, creation fails with errSecUnimplemented and stores nothing")
    func noSecureEnclave() async throws {
        try await onThread {
            try withSecureEnclave(nil) { harness in
                #expect(!harness.engine.configuration.secureEnclaveAvailable)
                let created = createRandomKey(enclaveParameters(tag: "se.none"))
                #expect(created.value == nil)
                #expect(created.status == Int(errSecUnimplemented))
                #expect(created.error?.localizedDescription.contains("Key generation failed, error -4") == true)
                #expect(lookUpKey(tag: "se.none").0 == errSecItemNotFound)
                #expect(createRandomKey(enclaveParameters(tag: "se.none", permanent: false)).status == Int(errSecUnimplemented))
            }
        }
    }

    @Test("RSA, P-384, P-521 and unknown token ids are refused with errSecParam before the token is asked, and nothing is stored")
    func wrongKindsRefused() async throws {
        try await onThread {
            let token = CountingToken()
            try withSecureEnclave(token) { _ in
                let cases: [[String: Any]] = [
                    [kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits as String: 2048],
                    [kSecAttrKeySizeInBits as String: 384],
                    [kSecAttrKeySizeInBits as String: 521],
                    [kSecAttrTokenID as String: "com.example.token"],
                ]
                for topLevel in cases {
                    let created = createRandomKey(enclaveParameters(tag: "se.wrong", topLevel: topLevel))
                    #expect(created.value == nil)
                    #expect(created.status == Int(errSecParam), "\(topLevel)")
                }
                #expect(token.calls.current == 0)
                #expect(lookUpKey(tag: "se.wrong").0 == errSecItemNotFound)
                // A token that cannot make the key: its status, nothing stored.
                let unreachable = createRandomKey(enclaveParameters(tag: "se.wrong"))
                #expect(unreachable.status == Int(errSecNotAvailable))
                #expect(token.calls.current == 1)
                #expect(lookUpKey(tag: "se.wrong").0 == errSecItemNotFound)
            }
        }
    }

    @Test("Keychains made by KeychainServicesDefaults accept enclave keys while a token is configured, without touching it; an explicit configuration is kept")
    func enginesFollowTheToken() async throws {
        try await onThread {
            let token = CountingToken()
            try withSecureEnclave(token) { harness in
                #expect(harness.engine.configuration.secureEnclaveAvailable)
                KeychainServicesDefaults.useSecureEnclave(nil)
                #expect(!harness.engine.configuration.secureEnclaveAvailable)
                KeychainServicesDefaults.useSecureEnclave(token)
                #expect(harness.engine.configuration.secureEnclaveAvailable)
                let fromEnvironment = try KeychainServicesDefaults.environmentEngine(["KEYSTONE_BACKEND": "memory"])
                #expect(fromEnvironment.configuration.secureEnclaveAvailable)
                #expect(token.calls.current == 0)

                // A keychain that plays a device without a Secure Enclave refuses a permanent key before the token works.
                var simulator = EngineConfiguration()
                simulator.secureEnclaveAvailable = false
                let engine = KeychainServicesDefaults.useMemoryKeychain(configuration: simulator)
                KeychainServicesDefaults.useSecureEnclave(token)
                #expect(!engine.configuration.secureEnclaveAvailable)
                let created = createRandomKey(enclaveParameters(tag: "se.sim"))
                #expect(created.status == Int(errSecUnimplemented))
                #expect(token.calls.current == 0)
            }
        }
    }
}
#endif
