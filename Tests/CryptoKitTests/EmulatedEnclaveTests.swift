#if !canImport(Darwin)
@testable import AppleStyleCryptoKit
import CryptoKit
import DefaultKeychainLock
import Foundation
import KeychainEngine
import KeychainServices
import KeystoneTesting
import Swtpm
import Testing
#if os(Linux)
import KeychainTPM
#endif

/// CryptoKit's SecureEnclave API over KeystoneTesting's emulated enclave (in software, counting its calls), a
/// scripted authenticator and a hand-moved clock: the CryptoKit layer's own rules (access control, envelopes, compact keys, errors, the
/// software fallback of app code), everywhere, with or without swtpm. The TPM itself: SwtpmEnclaveTests.
///
/// The Secure Enclave, the authenticator and the clock are process-wide: the suite owns them (`.ownsDefaultKeychain`)
/// and restores them after each test.
@Suite("SecureEnclave on the emulated enclave", .serialized, .ownsDefaultKeychain)
struct EmulatedEnclaveTests {
    let message = Data("Keystone signs with CryptoKit's SecureEnclave API on Linux.".utf8)

    // MARK: Availability

    @Test("isAvailable is true with a token and false without; making a key without one is errSecUnimplemented, and nothing else was asked")
    func availability() async throws {
        let token = EmulatedSecureEnclave()
        try await withEnclave(token) {
            #expect(SecureEnclave.isAvailable)
        }
        try await withEnclave(nil) {
            #expect(!SecureEnclave.isAvailable)
            let signing = enclaveError { _ = try SecureEnclave.P256.Signing.PrivateKey() }
            #expect(signing?.status == errSecUnimplemented)
            #expect((signing.map { $0 as NSError })?.code == Int(errSecUnimplemented))
            let agreement = enclaveError { _ = try SecureEnclave.P256.KeyAgreement.PrivateKey() }
            #expect(agreement?.status == errSecUnimplemented)
        }
        #expect(token.createdKeyCount == 0)
    }

    @Test("A key keeps the token it was made with: it signs after the process's Secure Enclave is switched off")
    func keyKeepsItsToken() async throws {
        let token = EmulatedSecureEnclave()
        let key = try await withEnclave(token) { try SecureEnclave.P256.Signing.PrivateKey() }
        try await withEnclave(nil) {
            let signature = try key.signature(for: message)
            #expect(key.publicKey.isValidSignature(signature, for: message))
        }
        #expect(token.signatureCount == 1)
    }

    // MARK: Signing

    @Test("Signatures over data and over SHA-256, SHA-384, SHA-512 and SHA-1 digests verify with swift-crypto, and not for other data")
    func signatures() async throws {
        try await withEnclave(EmulatedSecureEnclave()) {
            let key = try SecureEnclave.P256.Signing.PrivateKey()
            let other = Data("another message".utf8)
            let overData = try key.signature(for: message)
            #expect(key.publicKey.isValidSignature(overData, for: message))
            #expect(!key.publicKey.isValidSignature(overData, for: other))
            let sha256 = SHA256.hash(data: message)
            #expect(key.publicKey.isValidSignature(try key.signature(for: sha256), for: sha256))
            #expect(key.publicKey.isValidSignature(try key.signature(for: sha256), for: message))
            let sha384 = SHA384.hash(data: message)
            let over384 = try key.signature(for: sha384)
            #expect(key.publicKey.isValidSignature(over384, for: sha384))
            #expect(!key.publicKey.isValidSignature(over384, for: SHA384.hash(data: other)))
            let sha512 = SHA512.hash(data: message)
            #expect(key.publicKey.isValidSignature(try key.signature(for: sha512), for: sha512))
            let sha1 = Insecure.SHA1.hash(data: message)
            #expect(key.publicKey.isValidSignature(try key.signature(for: sha1), for: sha1))
            // Another key's public key rejects it.
            let second = try SecureEnclave.P256.Signing.PrivateKey()
            #expect(!second.publicKey.isValidSignature(overData, for: message))
        }
    }

    @Test("dataRepresentation round trip: a new key object has the same public key and signs for it")
    func roundTrip() async throws {
        let token = EmulatedSecureEnclave()
        try await withEnclave(token) {
            let key = try SecureEnclave.P256.Signing.PrivateKey()
            let loaded = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: key.dataRepresentation)
            #expect(loaded.publicKey.rawRepresentation == key.publicKey.rawRepresentation)
            #expect(loaded.dataRepresentation == key.dataRepresentation)
            let signature = try loaded.signature(for: message)
            #expect(key.publicKey.isValidSignature(signature, for: message))
            // Loading asked the token once (the check), the signature once more.
            #expect(token.signatureCount == 2)
        }
    }

    @Test("A key of another token is errSecDecode when loaded, before any use")
    func foreignToken() async throws {
        let first = try await withEnclave(EmulatedSecureEnclave()) { try SecureEnclave.P256.Signing.PrivateKey().dataRepresentation }
        let other = EmulatedSecureEnclave()
        try await withEnclave(other) {
            let error = enclaveError { _ = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: first) }
            #expect(error?.status == errSecDecode)
            #expect(error?.message.contains("make a new key") == true)
        }
        #expect(other.signatureCount == 0)
    }

    @Test("Description and dump show the kind, token and access control, never the key's bytes")
    func noKeyMaterialInDescriptions() async throws {
        try await withEnclave(EmulatedSecureEnclave()) {
            let key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access([.privateKeyUsage, .userPresence]))
            var dumped = ""
            dump(key, to: &dumped)
            let blobHex = key.dataRepresentation.suffix(32).map { String(format: "%02x", $0) }.joined()
            for text in [key.description, dumped, "\(key)"] {
                #expect(text.contains("SecureEnclave.P256.Signing.PrivateKey"))
                #expect(text.contains("flags: 0x40000001"))
                #expect(!text.contains(blobHex))
                #expect(!text.contains("bytes"))
            }
        }
    }

    // MARK: compactRepresentable

    @Test("compactRepresentable (the default) gives keys with a compact representation; false accepts any key")
    func compactKeys() async throws {
        try await withEnclave(EmulatedSecureEnclave()) {
            for _ in 0..<8 {
                let signing = try SecureEnclave.P256.Signing.PrivateKey()
                let agreement = try SecureEnclave.P256.KeyAgreement.PrivateKey()
                #expect(signing.publicKey.compactRepresentation != nil)
                #expect(agreement.publicKey.compactRepresentation != nil)
            }
        }
        let stubborn = EmulatedSecureEnclave(keyShape: .withoutCompactRepresentation)
        try await withEnclave(stubborn) {
            let key = try SecureEnclave.P256.Signing.PrivateKey(compactRepresentable: false)
            #expect(key.publicKey.compactRepresentation == nil)
            #expect(stubborn.createdKeyCount == 1)
        }
    }

    @Test("A token that only makes keys without a compact representation: 32 attempts, then errSecInternalComponent saying what to pass")
    func compactBound() async throws {
        let stubborn = EmulatedSecureEnclave(keyShape: .withoutCompactRepresentation)
        try await withEnclave(stubborn) {
            let error = enclaveError { _ = try SecureEnclave.P256.Signing.PrivateKey() }
            #expect(error?.status == errSecInternalComponent)
            #expect(error?.reason.contains("compactRepresentable: false") == true)
            #expect(stubborn.createdKeyCount == 32)
        }
    }

    // MARK: Key agreement

    @Test("Key agreement equals a software peer's shared secret, and HKDF and X9.63 keys derived from it agree")
    func keyAgreement() async throws {
        try await withEnclave(EmulatedSecureEnclave()) {
            let key = try SecureEnclave.P256.KeyAgreement.PrivateKey()
            for _ in 0..<4 {
                let peer = P256.KeyAgreement.PrivateKey()
                let ours = try key.sharedSecretFromKeyAgreement(with: peer.publicKey)
                let theirs = try peer.sharedSecretFromKeyAgreement(with: key.publicKey)
                #expect(ours == theirs)
                let salt = Data("salt".utf8), info = Data("info".utf8)
                #expect(ours.hkdfDerivedSymmetricKey(using: SHA256.self, salt: salt, sharedInfo: info, outputByteCount: 32)
                        == theirs.hkdfDerivedSymmetricKey(using: SHA256.self, salt: salt, sharedInfo: info, outputByteCount: 32))
                #expect(ours.x963DerivedSymmetricKey(using: SHA384.self, sharedInfo: info, outputByteCount: 48)
                        == theirs.x963DerivedSymmetricKey(using: SHA384.self, sharedInfo: info, outputByteCount: 48))
            }
            let loaded = try SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation: key.dataRepresentation)
            let peer = P256.KeyAgreement.PrivateKey()
            #expect(try loaded.sharedSecretFromKeyAgreement(with: peer.publicKey)
                    == (try peer.sharedSecretFromKeyAgreement(with: key.publicKey)))
        }
    }

    // MARK: Access control

    @Test("Authentication flags without .privateKeyUsage are refused with errSecParam before a key is made; Apple's default and .privateKeyUsage alone never ask")
    func accessControlWithoutPrivateKeyUsage() async throws {
        let token = EmulatedSecureEnclave()
        let authenticator = CountingAuthenticator(.success)
        try await withEnclave(token, authenticator: authenticator) {
            for flags: SecAccessControlCreateFlags in [[.userPresence], [.biometryAny], [.devicePasscode], [.biometryCurrentSet]] {
                let error = enclaveError { _ = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access(flags)) }
                #expect(error?.status == errSecParam)
                #expect(error?.reason.contains("add .privateKeyUsage") == true)
                let agreement = enclaveError { _ = try SecureEnclave.P256.KeyAgreement.PrivateKey(accessControl: access(flags)) }
                #expect(agreement?.status == errSecParam)
            }
            #expect(token.createdKeyCount == 0)
            let plain = try SecureEnclave.P256.Signing.PrivateKey()
            let usage = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access(.privateKeyUsage))
            _ = try plain.signature(for: message)
            _ = try usage.signature(for: message)
            #expect(authenticator.count == 0)
        }
    }

    @Test("With .privateKeyUsage and .userPresence every signature asks the authenticator once, for a key, to sign")
    func userPresenceEverySignature() async throws {
        let token = EmulatedSecureEnclave()
        let authenticator = CountingAuthenticator(.success)
        try await withEnclave(token, authenticator: authenticator) {
            let key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access([.privateKeyUsage, .userPresence]))
            #expect(authenticator.count == 0, "making the key asks nothing")
            for round in 1...3 {
                let signature = try key.signature(for: message)
                #expect(key.publicKey.isValidSignature(signature, for: message))
                #expect(authenticator.count == round)
            }
            let request = try #require(authenticator.requests.last)
            #expect(request.itemClass == .key)
            #expect(request.operation == "sign")
            #expect(request.flags.contains(.userPresence))
            #expect(request.operationPrompt?.isEmpty == false)
        }
    }

    @Test("Each key agreement of a .biometryAny key asks too (operation derive), and a failure gives no secret")
    func keyAgreementAsks() async throws {
        let token = EmulatedSecureEnclave()
        let authenticator = CountingAuthenticator(.success, .failed)
        try await withEnclave(token, authenticator: authenticator) {
            let key = try SecureEnclave.P256.KeyAgreement.PrivateKey(accessControl: access([.privateKeyUsage, .biometryAny]))
            let peer = P256.KeyAgreement.PrivateKey()
            _ = try key.sharedSecretFromKeyAgreement(with: peer.publicKey)
            #expect(authenticator.requests.last?.operation == "derive")
            let error = enclaveError { _ = try key.sharedSecretFromKeyAgreement(with: peer.publicKey) }
            #expect(error?.status == errSecAuthFailed)
            #expect(authenticator.count == 2)
        }
        #expect(token.keyAgreementCount == 1, "the refused agreement never reached the token")
    }

    @Test("A failed, cancelled or non-interactive authentication gives no signature and the matching status")
    func failedAuthentication() async throws {
        let cases: [(AuthenticationOutcome, OSStatus)] = [
            (.failed, errSecAuthFailed), (.lockout, errSecAuthFailed), (.userCancel, errSecUserCanceled),
            (.systemCancel, errSecUserCanceled), (.notInteractive, errSecInteractionNotAllowed),
        ]
        for (outcome, status) in cases {
            let token = EmulatedSecureEnclave()
            let authenticator = CountingAuthenticator(outcome)
            try await withEnclave(token, authenticator: authenticator) {
                let key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access([.privateKeyUsage, .userPresence]))
                let error = enclaveError { _ = try key.signature(for: message) }
                #expect(error?.status == status, "\(outcome)")
                #expect((error.map { $0 as NSError })?.code == Int(status))
                #expect(authenticator.count == 1)
            }
            #expect(token.signatureCount == 0, "\(outcome): the token was never asked to sign")
        }
    }

    @Test("An LAContext that evaluated a policy with a reuse duration covers the next signatures without asking, until the duration passes")
    func reuseDuration() async throws {
        let authenticator = CountingAuthenticator(.success)
        let clock = ManualClock()
        try await withEnclave(EmulatedSecureEnclave(), authenticator: authenticator, clock: clock) {
            let context = LAContext()
            context.touchIDAuthenticationAllowableReuseDuration = 30
            let key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access([.privateKeyUsage, .biometryAny]),
                                                               authenticationContext: context)
            let evaluated = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var outcome: (Bool, (any Error)?) = (false, nil)
            context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Sign in") { success, error in
                outcome = (success, error)
                evaluated.signal()
            }
            // The reply is the signal (LAContext always replies, on its own thread).
            evaluated.wait()
            #expect(outcome.0, "evaluatePolicy: \(String(describing: outcome.1))")
            #expect(authenticator.count == 1)
            for _ in 0..<3 {
                clock.advance(by: 5)
                #expect(key.publicKey.isValidSignature(try key.signature(for: message), for: message))
            }
            #expect(authenticator.count == 1, "covered by the evaluation")
            // A key loaded with the same context is covered too.
            let loaded = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: key.dataRepresentation,
                                                                  authenticationContext: context)
            _ = try loaded.signature(for: message)
            #expect(authenticator.count == 1)
            clock.advance(by: 16)  // 31 s after the evaluation
            _ = try key.signature(for: message)
            #expect(authenticator.count == 2, "the reuse duration passed: asked again")
        }
    }

    @Test("An invalidated LAContext fails with errSecAuthFailed without asking; interactionNotAllowed fails with errSecInteractionNotAllowed without asking")
    func invalidatedAndNonInteractiveContexts() async throws {
        let token = EmulatedSecureEnclave()
        let authenticator = CountingAuthenticator(.success)
        try await withEnclave(token, authenticator: authenticator) {
            let context = LAContext()
            let key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access([.privateKeyUsage, .userPresence]),
                                                               authenticationContext: context)
            _ = try key.signature(for: message)
            #expect(authenticator.count == 1)
            context.invalidate()
            let invalid = enclaveError { _ = try key.signature(for: message) }
            #expect(invalid?.status == errSecAuthFailed)
            let quiet = LAContext()
            quiet.interactionNotAllowed = true
            let reloaded = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: key.dataRepresentation,
                                                                    authenticationContext: quiet)
            let refused = enclaveError { _ = try reloaded.signature(for: message) }
            #expect(refused?.status == errSecInteractionNotAllowed)
            #expect(authenticator.count == 1)
        }
        #expect(token.signatureCount == 2, "one signature and the load check, none refused reached the token")
    }

    @Test("The access control survives dataRepresentation: a reloaded .userPresence key still asks before each signature")
    func accessControlRestored() async throws {
        let authenticator = CountingAuthenticator(.success)
        try await withEnclave(EmulatedSecureEnclave(), authenticator: authenticator) {
            let key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access([.privateKeyUsage, .userPresence], kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly))
            let loaded = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: key.dataRepresentation)
            #expect(authenticator.count == 0, "loading asks nothing")
            #expect(loaded.description.contains("accessibility: akpu"))
            _ = try loaded.signature(for: message)
            _ = try loaded.signature(for: message)
            #expect(authenticator.count == 2)
        }
    }

    @Test("A .biometryCurrentSet key is unusable (errSecAuthFailed, no prompt) once the enrolled biometry changes")
    func biometryCurrentSet() async throws {
        let authenticator = CountingAuthenticator(.success, domainState: Data("enrolled: right index".utf8))
        try await withEnclave(EmulatedSecureEnclave(), authenticator: authenticator) {
            let key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access([.privateKeyUsage, .biometryCurrentSet]))
            _ = try key.signature(for: message)
            #expect(authenticator.count == 1)
            authenticator.biometryDomainState = Data("enrolled: right index, left thumb".utf8)
            let error = enclaveError { _ = try key.signature(for: message) }
            #expect(error?.status == errSecAuthFailed)
            #expect(error?.reason.contains("enrolled biometry changed") == true)
            #expect(authenticator.count == 1, "no prompt for a key that can no longer be used")
            let reloaded = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: key.dataRepresentation)
            #expect(enclaveError { _ = try reloaded.signature(for: message) }?.status == errSecAuthFailed)
        }
    }

    // MARK: App code: a Secure Enclave key with a software fallback

    @Test("With no Secure Enclave, SecureEnclaveSigningKey throws errSecUnimplemented and the factory falls back to a software key that verifies")
    func factoryFallsBackWithoutEnclave() async throws {
        try await withEnclave(nil) {
            #expect(throws: KeychainError.unhandledError(status: errSecUnimplemented)) { _ = try SecureEnclaveSigningKey() }
            let signer = SigningKeyFactory.make()
            #expect(signer is SoftwareSigningKey)
            // The fallback's own check, as the app's tests write it: the software key's signature verifies.
            let data = "payload".data(using: .utf8)!
            let sigBytes = try signer.sign(data)
            #expect(!sigBytes.isEmpty)
            let publicKey = try P256.Signing.PublicKey(derRepresentation: signer.publicKeyData())
            let signature = try P256.Signing.ECDSASignature(derRepresentation: sigBytes)
            #expect(publicKey.isValidSignature(signature, for: data))
            #expect(!publicKey.isValidSignature(signature, for: Data("tampered".utf8)))
        }
    }

    @Test("With a Secure Enclave, the factory's provider is the Secure Enclave key, and its signatures verify")
    func factoryPicksEnclave() async throws {
        // Compact keys only: the factory's PrivateKey() asks for a compact-representable key, and an enclave making keys
        // of any shape would make a second key half the time (the retry has its own test).
        let token = EmulatedSecureEnclave(keyShape: .compactRepresentable)
        try await withEnclave(token) {
            let signer = SigningKeyFactory.make()
            #expect(signer is SecureEnclaveSigningKey)
            let data = "payload".data(using: .utf8)!
            let publicKey = try P256.Signing.PublicKey(derRepresentation: signer.publicKeyData())
            let signature = try P256.Signing.ECDSASignature(derRepresentation: try signer.sign(data))
            #expect(publicKey.isValidSignature(signature, for: data))
        }
        #expect(token.createdKeyCount == 1 && token.signatureCount == 1)
    }

    @Test("A file that imports CryptoKit alone builds and works: its access control is this-device-only while unlocked with user presence, its key asks per signature, and with no Secure Enclave it throws errSecUnimplemented")
    func cryptoKitImportOnly() async throws {
        let access = try PresenceSigner.accessControl()
        #expect(access.accessControl.accessibility == .whenUnlockedThisDeviceOnly)
        #expect(access.accessControl.flags == [.privateKeyUsage, .userPresence])
        let authenticator = CountingAuthenticator(.success)
        try await withEnclave(EmulatedSecureEnclave(), authenticator: authenticator) {
            let signer = try PresenceSigner()
            let signature = try P256.Signing.ECDSASignature(derRepresentation: try signer.sign(message))
            #expect(signer.publicKey.isValidSignature(signature, for: message))
            #expect(!signer.publicKey.isValidSignature(signature, for: Data("tampered".utf8)))
            #expect(authenticator.count == 1, "the key's .userPresence asked once, for the signature")
        }
        try await withEnclave(nil) {
            #expect(!SecureEnclave.isAvailable)
            #expect(throws: PresenceSigner.Failure.status(errSecUnimplemented)) { _ = try PresenceSigner() }
        }
    }

    @Test("App-style code (only Apple's modules imported): a .userPresence key asks per signature, and restores with an evaluated LAContext that covers its signatures")
    func appStyleCode() async throws {
        let authenticator = CountingAuthenticator(.success)
        try await withEnclave(EmulatedSecureEnclave(), authenticator: authenticator) {
            let key = try DeviceSigningKey()
            let publicKey = try P256.Signing.PublicKey(x963Representation: key.publicKey)
            let challenge = Data("challenge".utf8)
            let signature = try P256.Signing.ECDSASignature(derRepresentation: try key.sign(challenge))
            #expect(publicKey.isValidSignature(signature, for: challenge))
            #expect(authenticator.count == 1)

            let context = LAContext()
            context.touchIDAuthenticationAllowableReuseDuration = 60
            let done = DispatchSemaphore(value: 0)
            context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Sign in") { _, _ in done.signal() }
            done.wait()  // the reply is the signal (LAContext always replies, on its own thread)
            #expect(authenticator.count == 2)
            let restored = try DeviceSigningKey(restoring: key.stored, context: context)
            #expect(restored.publicKey == key.publicKey)
            _ = try restored.sign(challenge)
            _ = try restored.sign(challenge)
            #expect(authenticator.count == 2, "covered by the context's evaluation")

            let peer = P256.KeyAgreement.PrivateKey()
            let (messageKey, ephemeral) = try EnclaveKeyAgreement.messageKey(for: peer.publicKey)
            let peerKey = try peer.sharedSecretFromKeyAgreement(with: ephemeral)
                .hkdfDerivedSymmetricKey(using: SHA256.self, salt: Data(), sharedInfo: Data("messages".utf8), outputByteCount: 32)
            #expect(messageKey == peerKey)
        }
    }

    #if os(Linux)
    @Test("With a TPM configured but unreachable, isAvailable is false and the factory falls back to software")
    func factoryFallsBackWhenTPMUnreachable() async throws {
        let port = try #require(SwtpmFixture.freePortPair(), "a free port, on which no TPM listens")
        let token = TPMSecureEnclaveToken(tcti: "swtpm:host=127.0.0.1,port=\(port)")
        try await withEnclave(token) {
            #expect(!SecureEnclave.isAvailable)
            let error = enclaveError { _ = try SecureEnclave.P256.Signing.PrivateKey() }
            #expect(error?.status == errSecNotAvailable)
            #expect(error?.message.contains("KEYSTONE_TPM_TCTI") == true)
            #expect(SigningKeyFactory.make() is SoftwareSigningKey)
        }
    }
    #endif
}
#endif
