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
