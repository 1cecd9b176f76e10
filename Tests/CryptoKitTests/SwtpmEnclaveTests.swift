#if os(Linux) && os(Linux)
@testable import AppleStyleCryptoKit
import CryptoKit
import DefaultKeychainLock
import Foundation
import KeychainEngine
import KeychainServices
import KeychainTPM
import Swtpm
import Testing

/// CryptoKit's SecureEnclave API on a REAL software TPM (swtpm, a fresh one per test) as the process's Secure Enclave,
/// checked with swift-crypto. Every TPM call runs on a thread of its own (`withSwtpm`), never on Swift's cooperative
/// pool.
///
/// The Secure Enclave is process-wide: the suite owns it (`.ownsDefaultKeychain`) and restores it after each test.
@Suite("SecureEnclave on swtpm", .serialized, .ownsDefaultKeychain,
       .enabled(if: SwtpmFixture.unavailableReason == nil,
                Comment(rawValue: SwtpmFixture.unavailableReason ?? "swtpm, tpm2-tools and openssl are installed")))
struct SwtpmEnclaveTests {
    static let message = Data("A key the TPM never lets go of, through CryptoKit's API.".utf8)

    @Test("isAvailable with swtpm as the Secure Enclave; a signing key's signatures (data and digest) verify with swift-crypto and not for other data")
    func signing() async throws {
        try await withSwtpm { fixture in
            try inEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) {
                #expect(SecureEnclave.isAvailable)
                let key = try SecureEnclave.P256.Signing.PrivateKey()
                #expect(key.publicKey.compactRepresentation != nil, "compactRepresentable is the default")
                let message = Self.message
                let overData = try key.signature(for: message)
                #expect(key.publicKey.isValidSignature(overData, for: message))
                #expect(!key.publicKey.isValidSignature(overData, for: Data("another message".utf8)))
                let digest = SHA256.hash(data: message)
                let overDigest = try key.signature(for: digest)
                #expect(key.publicKey.isValidSignature(overDigest, for: digest))
                #expect(key.publicKey.isValidSignature(overDigest, for: message))
                let sha512 = SHA512.hash(data: message)
                #expect(key.publicKey.isValidSignature(try key.signature(for: sha512), for: sha512))
                // The DER form, as app code sends it, parses back and verifies.
                let der = try P256.Signing.ECDSASignature(derRepresentation: overData.derRepresentation)
                #expect(key.publicKey.isValidSignature(der, for: message))
            }
        }
    }

    @Test("dataRepresentation round trip on the same TPM: a new key object has the same public key and signs for it")
    func roundTrip() async throws {
        try await withSwtpm { fixture in
            try inEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) {
                let key = try SecureEnclave.P256.Signing.PrivateKey()
                let bytes = key.dataRepresentation
                #expect(bytes.starts(with: Array("KSSE".utf8)))
                let loaded = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: bytes)
                #expect(loaded.publicKey.x963Representation == key.publicKey.x963Representation)
                #expect(key.publicKey.isValidSignature(try loaded.signature(for: Self.message), for: Self.message))
            }
            // A new token on the same TPM (another process, the next launch) loads it too.
            let bytes = try inEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) {
                try SecureEnclave.P256.KeyAgreement.PrivateKey().dataRepresentation
            }
            try inEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) {
                _ = try SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation: bytes)
            }
        }
    }

    @Test("A key made by one swtpm is errSecDecode when loaded on another (signing and key agreement)")
    func anotherTPM() async throws {
        try await withSwtpm { first in
            let (signing, agreement) = try inEnclave(TPMSecureEnclaveToken(tcti: first.tcti)) {
                (try SecureEnclave.P256.Signing.PrivateKey().dataRepresentation,
                 try SecureEnclave.P256.KeyAgreement.PrivateKey().dataRepresentation)
            }
            let second = try SwtpmFixture.start()
            defer { second.stop() }
            try inEnclave(TPMSecureEnclaveToken(tcti: second.tcti)) {
                let error = enclaveError { _ = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: signing) }
                #expect(error?.status == errSecDecode, "\(String(describing: error))")
                #expect((error.map { $0 as NSError })?.domain == NSOSStatusErrorDomain)
                let other = enclaveError { _ = try SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation: agreement) }
                #expect(other?.status == errSecDecode, "\(String(describing: other))")
                // The TPM is fine: it makes and uses its own keys.
                let own = try SecureEnclave.P256.Signing.PrivateKey()
                #expect(own.publicKey.isValidSignature(try own.signature(for: Self.message), for: Self.message))
            }
        }
    }

    @Test("A damaged dataRepresentation (a byte of the TPM's blob flipped) is a typed error, never a signature")
    func damagedBlob() async throws {
        try await withSwtpm { fixture in
            try inEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) {
                var bytes = [UInt8](try SecureEnclave.P256.Signing.PrivateKey().dataRepresentation)
                bytes[bytes.count - 10] ^= 0x01
                let error = enclaveError { _ = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: Data(bytes)) }
                #expect(error?.status == errSecDecode, "\(String(describing: error))")
            }
        }
    }

    @Test("Key agreement in the TPM equals a software peer's shared secret; HKDF and X9.63 keys agree; a signing key's bytes are refused")
    func keyAgreement() async throws {
        try await withSwtpm { fixture in
            try inEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) {
                let key = try SecureEnclave.P256.KeyAgreement.PrivateKey()
                for _ in 0..<3 {
                    let peer = P256.KeyAgreement.PrivateKey()
                    let ours = try key.sharedSecretFromKeyAgreement(with: peer.publicKey)
                    let theirs = try peer.sharedSecretFromKeyAgreement(with: key.publicKey)
                    #expect(ours == theirs)
                    let salt = Data("salt".utf8), info = Data("Keystone".utf8)
                    #expect(ours.hkdfDerivedSymmetricKey(using: SHA256.self, salt: salt, sharedInfo: info, outputByteCount: 32)
                            == theirs.hkdfDerivedSymmetricKey(using: SHA256.self, salt: salt, sharedInfo: info, outputByteCount: 32))
                    #expect(ours.x963DerivedSymmetricKey(using: SHA256.self, sharedInfo: info, outputByteCount: 32)
                            == theirs.x963DerivedSymmetricKey(using: SHA256.self, sharedInfo: info, outputByteCount: 32))
                }
                let signing = try SecureEnclave.P256.Signing.PrivateKey()
                let wrongKind = enclaveError { _ = try SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation: signing.dataRepresentation) }
                #expect(wrongKind?.status == errSecParam)
                let back = enclaveError { _ = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: key.dataRepresentation) }
                #expect(back?.status == errSecParam)
            }
        }
    }

    @Test("swtpm killed: signing, loading and making keys throw errSecNotAvailable at once (no hang), and isAvailable turns false")
    func killedTPM() async throws {
        try await withSwtpm { fixture in
            try inEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) {
                let key = try SecureEnclave.P256.Signing.PrivateKey()
                _ = try key.signature(for: Self.message)
                try fixture.killTPM()
                let signing = enclaveError { _ = try key.signature(for: Self.message) }
                #expect(signing?.status == errSecNotAvailable, "\(String(describing: signing))")
                #expect(signing?.message.contains("/dev/tpmrm0") == true)
                let loading = enclaveError { _ = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: key.dataRepresentation) }
                #expect(loading?.status == errSecNotAvailable, "\(String(describing: loading))")
                let making = enclaveError { _ = try SecureEnclave.P256.KeyAgreement.PrivateKey() }
                #expect(making?.status == errSecNotAvailable, "\(String(describing: making))")
                #expect(!SecureEnclave.isAvailable)
            }
        }
    }

    @Test("On the TPM, a .privateKeyUsage + .userPresence key asks before every signature and signs nothing when cancelled")
    func userPresence() async throws {
        try await withSwtpm { fixture in
            let authenticator = CountingAuthenticator(.success, .success, .userCancel)
            try inEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti), authenticator: authenticator) {
                let key = try SecureEnclave.P256.Signing.PrivateKey(
                    accessControl: access([.privateKeyUsage, .userPresence]))
                #expect(key.publicKey.isValidSignature(try key.signature(for: Self.message), for: Self.message))
                let loaded = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: key.dataRepresentation)
                #expect(key.publicKey.isValidSignature(try loaded.signature(for: Self.message), for: Self.message))
                let cancelled = enclaveError { _ = try loaded.signature(for: Self.message) }
                #expect(cancelled?.status == errSecUserCanceled)
                #expect(authenticator.count == 3)
            }
        }
    }

    @Test("On swtpm the factory picks the Secure Enclave key, whose DER signatures verify with its public key and not for other data")
    func factoryPicksTPMKey() async throws {
        try await withSwtpm { fixture in
            try inEnclave(TPMSecureEnclaveToken(tcti: fixture.tcti)) {
                let direct = try SecureEnclaveSigningKey()
                let signer = SigningKeyFactory.make()
                #expect(signer is SecureEnclaveSigningKey)
                for provider in [direct, signer] as [any SigningKeyProvider] {
                    let data = "payload".data(using: .utf8)!
                    let sigBytes = try provider.sign(data)
                    #expect(!sigBytes.isEmpty)
                    let publicKey = try P256.Signing.PublicKey(derRepresentation: provider.publicKeyData())
                    let signature = try P256.Signing.ECDSASignature(derRepresentation: sigBytes)
                    #expect(publicKey.isValidSignature(signature, for: data))
                    #expect(!publicKey.isValidSignature(signature, for: Data("tampered".utf8)))
                }
                #expect(direct.publicKeyData() != signer.publicKeyData(), "two keys made in the TPM")
            }
        }
    }
}
#endif
