import Crypto
import Foundation
import Keystone
import KeychainEngine
import KeystoneTesting
import Testing

/// What the emulated enclave adds to the token contract (which SecureEnclaveTokenContractTests checks): the device
/// profiles, its controls and counters, and how its blobs are bound to the instance, usage and public key.
@Suite("Emulated Secure Enclave")
struct EmulatedSecureEnclaveTests {
    let digest = Data(SHA256.hash(data: Data("message".utf8)))

    @Test("A device InMemoryKeychain has its own emulated enclave; a simulator has none, also after switching profile")
    func profiles() throws {
        let device = InMemoryKeychain(profile: .device)
        #expect(device.secureEnclave as? EmulatedSecureEnclave === device.emulatedSecureEnclave)
        #expect(InMemoryKeychain(profile: .simulator).secureEnclave == nil)
        // Through the protocol (what Keystone's factory sees), not only the concrete type.
        let store: any KeychainStore = device
        #expect(store.secureEnclave != nil)
        device.profile = .simulator
        #expect(store.secureEnclave == nil)
        device.profile = .device
        #expect(store.secureEnclave as? EmulatedSecureEnclave === device.emulatedSecureEnclave)

        // Two devices: two enclaves, each refusing the other's keys.
        let other = InMemoryKeychain(profile: .device)
        #expect(other.emulatedSecureEnclave !== device.emulatedSecureEnclave)
        let key = try device.emulatedSecureEnclave.createKey(.signing)
        #expect(throws: EngineError.self) { try other.emulatedSecureEnclave.key(dataRepresentation: key.dataRepresentation) }
    }

    @Test("makeUnavailable fails every use with the given status until makeAvailable; keys made before work again")
    func availabilityControl() throws {
        let enclave = EmulatedSecureEnclave()
        #expect(enclave.isAvailable)
        let key = try enclave.createKey(.general)
        enclave.makeUnavailable(status: Status.unimplemented, reason: "no Secure Enclave on this model")
        #expect(!enclave.isAvailable)
        #expect(enclave.availability()?.status == Status.unimplemented)
        #expect(enclave.availability()?.reason == "no Secure Enclave on this model")
        #expect(throws: EngineError(Status.unimplemented, "no Secure Enclave on this model")) { try enclave.createKey(.signing) }
        #expect(throws: EngineError.self) { try enclave.signature(digest: digest, with: key.dataRepresentation) }
        #expect(throws: EngineError.self) {
            try enclave.sharedSecret(peerX963: P256.KeyAgreement.PrivateKey().publicKey.x963Representation, with: key.dataRepresentation)
        }
        // Reading a blob needs no hardware, as with a TPM.
        #expect(try enclave.key(dataRepresentation: key.dataRepresentation).publicKeyX963 == key.publicKeyX963)

        enclave.makeAvailable()
        #expect(enclave.availability() == nil)
        let raw = try enclave.signature(digest: digest, with: key.dataRepresentation)
        let publicKey = try P256.Signing.PublicKey(x963Representation: key.publicKeyX963)
        #expect(publicKey.isValidSignature(try P256.Signing.ECDSASignature(rawRepresentation: raw), for: Data("message".utf8)))
    }

    @Test("The counters count what was made and used, and nothing for refused calls")
    func counters() throws {
        let enclave = EmulatedSecureEnclave()
        let signing = try enclave.createKey(.signing)
        let agreement = try enclave.createKey(.keyAgreement)
        _ = try enclave.signature(digest: digest, with: signing.dataRepresentation)
        _ = try enclave.signature(digest: digest, with: signing.dataRepresentation)
        _ = try enclave.sharedSecret(peerX963: P256.KeyAgreement.PrivateKey().publicKey.x963Representation, with: agreement.dataRepresentation)
        _ = try? enclave.signature(digest: digest, with: agreement.dataRepresentation)   // refused: usage
        _ = try? enclave.signature(digest: Data([1, 2, 3]), with: signing.dataRepresentation)  // refused: digest
        #expect(enclave.createdKeyCount == 2)
        #expect(enclave.signatureCount == 2)
        #expect(enclave.keyAgreementCount == 1)
    }

    @Test("refuseKeyUse fails signatures and key agreements with its status while the enclave stays available; allowKeyUse ends it")
    func refusalControl() throws {
        let enclave = EmulatedSecureEnclave()
        let signing = try enclave.createKey(.signing)
        let agreement = try enclave.createKey(.keyAgreement)
        let peer = P256.KeyAgreement.PrivateKey()
        #expect(!enclave.isRefusingKeyUse)
        enclave.refuseKeyUse(status: Status.internalComponent, reason: "out of memory for object contexts")
        #expect(enclave.isRefusingKeyUse)
        let refusal = EngineError(Status.internalComponent, "out of memory for object contexts")
        #expect(throws: refusal) { try enclave.signature(digest: digest, with: signing.dataRepresentation) }
        #expect(throws: refusal) { try enclave.sharedSecret(peerX963: peer.publicKey.x963Representation, with: agreement.dataRepresentation) }
        // Refused before the blob is read: even a key of another enclave gets the refusal, not errSecDecode.
        let foreign = try EmulatedSecureEnclave().createKey(.signing)
        #expect(throws: refusal) { try enclave.signature(digest: digest, with: foreign.dataRepresentation) }
        // Not unavailability: the enclave reports itself present, makes keys and reads blobs.
        #expect(enclave.isAvailable && enclave.availability() == nil)
        let madeWhileRefusing = try enclave.createKey(.signing)
        #expect(try enclave.key(dataRepresentation: signing.dataRepresentation).publicKeyX963 == signing.publicKeyX963)
        // Unavailability wins over a refusal.
        enclave.makeUnavailable()
        #expect(throws: EngineError(Status.notAvailable, "the emulated Secure Enclave was made unavailable")) {
            try enclave.signature(digest: digest, with: signing.dataRepresentation)
        }
        enclave.makeAvailable()
        // Nothing refused was counted; after allowKeyUse every key works, the one made while refusing too.
        #expect(enclave.signatureCount == 0 && enclave.keyAgreementCount == 0)
        enclave.allowKeyUse()
        #expect(!enclave.isRefusingKeyUse)
        let raw = try enclave.signature(digest: digest, with: madeWhileRefusing.dataRepresentation)
        let publicKey = try P256.Signing.PublicKey(x963Representation: madeWhileRefusing.publicKeyX963)
        #expect(publicKey.isValidSignature(try P256.Signing.ECDSASignature(rawRepresentation: raw), for: Data("message".utf8)))
        let secret = try enclave.sharedSecret(peerX963: peer.publicKey.x963Representation, with: agreement.dataRepresentation)
        let expected = try peer.sharedSecretFromKeyAgreement(with: P256.KeyAgreement.PublicKey(x963Representation: agreement.publicKeyX963))
        #expect(secret == expected.withUnsafeBytes { Data($0) })
        #expect(enclave.signatureCount == 1 && enclave.keyAgreementCount == 1)
        // The default status: errSecInternalComponent.
        enclave.refuseKeyUse()
        #expect(enclave.availability() == nil)
        do {
            _ = try enclave.signature(digest: digest, with: signing.dataRepresentation)
            Issue.record("a refused signature was returned")
        } catch {
            #expect(error.status == Status.internalComponent)
        }
    }

    @Test("keyShape decides whether new keys have a compact representation; the default makes both kinds, as hardware does")
    func keyShapes() throws {
        func compact(_ key: SecureEnclaveKey) throws -> Bool {
            try P256.Signing.PublicKey(x963Representation: key.publicKeyX963).compactRepresentation != nil
        }
        let without = EmulatedSecureEnclave(keyShape: .withoutCompactRepresentation)
        #expect(without.keyShape == .withoutCompactRepresentation)
        for _ in 0..<16 { #expect(try !compact(without.createKey(.signing))) }
        #expect(without.createdKeyCount == 16, "one key per call, however many were drawn")
        let compactOnly = EmulatedSecureEnclave(keyShape: .compactRepresentable)
        for _ in 0..<16 { #expect(try compact(compactOnly.createKey(.keyAgreement))) }

        // Set later: keys from then on follow it; keys made before still work.
        let enclave = EmulatedSecureEnclave()
        #expect(enclave.keyShape == .any)
        var shapes = Set<Bool>()
        // Each draw is compact with probability 1/2: 128 draws of one kind only happen once in 2^127 runs.
        for _ in 0..<128 { shapes.insert(try compact(enclave.createKey(.signing))) }
        #expect(shapes == [true, false])
        let before = try enclave.createKey(.signing)
        enclave.keyShape = .withoutCompactRepresentation
        for _ in 0..<16 { #expect(try !compact(enclave.createKey(.general))) }
        #expect(try enclave.signature(digest: digest, with: before.dataRepresentation).count == 64)
        #expect(enclave.description == "EmulatedSecureEnclave(\"emulated Secure Enclave\", available, keyShape: withoutCompactRepresentation)")
    }

    @Test("A blob's usage and public key are authenticated: changing either, or grafting another key's, is errSecDecode")
    func blobBinding() throws {
        let enclave = EmulatedSecureEnclave()
        let signing = try enclave.createKey(.signing)
        let other = try enclave.createKey(.signing)
        // The layout the emulation documents: "KSEE", version, usage, 65-byte public key, then the sealed scalar.
        #expect(signing.dataRepresentation.prefix(4) == Data("KSEE".utf8))
        #expect(Data(signing.dataRepresentation[6..<71]) == signing.publicKeyX963)

        var upgraded = signing.dataRepresentation
        upgraded[5] = 3  // signing → general: would let a signing key agree keys
        #expect(throws: EngineError(Status.decode, "the key was made by another emulated Secure Enclave, or is damaged")) {
            try enclave.key(dataRepresentation: upgraded)
        }
        #expect(throws: EngineError.self) {
            try enclave.sharedSecret(peerX963: P256.KeyAgreement.PrivateKey().publicKey.x963Representation, with: upgraded)
        }

        // Another key's public key with this key's sealed scalar, and the other way round.
        let grafted = signing.dataRepresentation.prefix(6) + other.publicKeyX963 + signing.dataRepresentation.suffix(from: 71)
        let decode = EngineError(Status.decode, "the key was made by another emulated Secure Enclave, or is damaged")
        #expect(throws: decode) { try enclave.key(dataRepresentation: grafted) }
        let swapped = signing.dataRepresentation.prefix(71) + other.dataRepresentation.suffix(from: 71)
        #expect(throws: decode) { try enclave.key(dataRepresentation: swapped) }
        #expect(throws: decode) { try enclave.signature(digest: digest, with: swapped) }
    }

    @Test("Nothing the enclave shows about itself holds key material: description, reflection, dump")
    func noKeyMaterialShown() throws {
        let enclave = EmulatedSecureEnclave(name: "test enclave")
        let key = try enclave.createKey(.signing)
        #expect(enclave.description == "EmulatedSecureEnclave(\"test enclave\", available)")
        #expect(Mirror(reflecting: enclave).children.isEmpty)
        var dumped = ""
        dump(enclave, to: &dumped)
        #expect(!dumped.contains("wrappingKey") && !dumped.contains("SymmetricKey"), "\(dumped)")
        enclave.makeUnavailable()
        #expect(enclave.description == "EmulatedSecureEnclave(\"test enclave\", unavailable: -25291)")
        enclave.refuseKeyUse(reason: "a reason")
        #expect(enclave.description == "EmulatedSecureEnclave(\"test enclave\", unavailable: -25291, refusing key use: -2070)")
        #expect(enclave.name == "test enclave")
        _ = key
    }

    @Test("The HardwareSigningKeys article's test runs as written: hardware on the device profile, software on the simulator")
    func articleExample() throws {
        for profile in InMemoryKeychain.DeviceProfile.allCases {
            let memory = InMemoryKeychain(profile: profile)
            let result = try Keychain(store: memory).signingKey(tag: "com.example.device-key")
            #expect(result.key.kind == (profile == .device ? .hardware : .software))
            let signature = try result.key.signature(for: Data("payload".utf8))
            #expect(result.key.publicKey.isValidSignature(signature, for: Data("payload".utf8)))
        }
    }

    @Test("Keystone signs with the device profile's enclave and falls back on the simulator profile")
    func keystoneOnProfiles() throws {
        let device = InMemoryKeychain(profile: .device)
        let hardware = try Keychain(store: device).signingKey(tag: "com.example.key")
        #expect(hardware.key.kind == .hardware)
        _ = try hardware.key.signature(for: Data("x".utf8))
        #expect(device.emulatedSecureEnclave.signatureCount == 1)

        let simulator = InMemoryKeychain(profile: .simulator)
        let software = try Keychain(store: simulator).signingKey(tag: "com.example.key")
        #expect(software.key.kind == .software)
        #expect(software.fallbackReason == .noSecureEnclave)
        #expect(simulator.emulatedSecureEnclave.createdKeyCount == 0)
    }
}
