import Crypto
import Foundation
import Keystone
import KeychainEngine
import KeystoneTesting
import Testing

/// The "Secure Enclave with software fallback" pattern through Keystone: `SigningKeyFactory` on
/// `InMemoryKeychain`s playing a device (emulated enclave) and a simulator (none). Pure memory, no hardware.
@Suite("Signing keys: hardware with software fallback")
struct SigningKeyFactoryTests {
    let tag = "com.example.device-key"
    let message = Data("payload to authenticate".utf8)

    /// The rows of the keychain: class and data of every item.
    func rows(_ memory: InMemoryKeychain) throws -> [KeychainQuery] {
        var rows: [KeychainQuery] = []
        for itemClass in [ItemClass.genericPassword, .key] {
            do {
                let result = try memory.engine.copyMatching([
                    Key.class: .string(itemClass.rawValue), Key.returnAttributes: .bool(true), Key.returnData: .bool(true),
                    Key.matchLimit: .string(Key.matchLimitAll),
                ])
                if case .array(let items)? = result {
                    for case .attributes(let attributes) in items { rows.append(attributes) }
                }
            } catch let error where KeychainError.itemNotFound ~= error {
                continue
            }
        }
        return rows
    }

    // MARK: - Device: hardware

    @Test("On a device the key is a hardware key: made by the enclave, signatures verify, no fallback reason")
    func deviceMakesHardwareKey() throws {
        let memory = InMemoryKeychain(profile: .device)
        let result = try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag).signingKey()
        #expect(result.key.kind == .hardware)
        #expect(result.key is SecureEnclaveSigningKey)
        #expect(result.fallbackReason == nil)
        #expect(result.wasCreated)
        #expect(memory.emulatedSecureEnclave.createdKeyCount == 1)

        let signature = try result.key.signature(for: message)
        #expect(result.key.publicKey.isValidSignature(signature, for: message))
        #expect(!result.key.publicKey.isValidSignature(signature, for: Data("tampered".utf8)))
        let viaDigest = try result.key.signature(for: SHA256.hash(data: message))
        #expect(result.key.publicKey.isValidSignature(viaDigest, for: message))
        // The enclave made both signatures: the key was not copied out into software.
        #expect(memory.emulatedSecureEnclave.signatureCount == 2)
    }

    @Test("A hardware key's private key is not in the keychain: one item holding the enclave's blob, useless to another enclave")
    func hardwareKeyNotExportable() throws {
        let memory = InMemoryKeychain(profile: .device)
        let key = try #require(try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag).signingKey().key as? SecureEnclaveSigningKey)
        let stored = try rows(memory)
        #expect(stored.count == 1)
        let row = try #require(stored.first)
        #expect(row[Key.class]?.stringValue == ItemClass.genericPassword.rawValue)
        #expect(row[Key.service]?.stringValue == tag)
        let blob = try #require(row[Key.valueData]?.dataValue)
        #expect(blob == key.dataRepresentation)
        // The blob holds no private scalar in the clear (no 32-byte window whose public key is the key's).
        let x963 = key.publicKey.x963Representation
        let bytes = [UInt8](blob)
        for offset in 0...(bytes.count - 32) {
            let candidate = try? P256.Signing.PrivateKey(rawRepresentation: bytes[offset..<offset + 32])
            #expect(candidate?.publicKey.x963Representation != x963, "the private key is in the stored item at \(offset)")
        }
        // Another enclave (another device) cannot use it.
        #expect(throws: KeychainError.decode) {
            try SecureEnclaveSigningKey(dataRepresentation: blob, token: EmulatedSecureEnclave())
        }
        // Nothing in the key's description or reflection is the blob.
        #expect(!"\(key)".contains(blob.base64EncodedString()))
    }

    @Test("A new launch (a new factory on the same keychain) loads the same hardware key and makes none")
    func hardwareKeyComesBack() throws {
        let memory = InMemoryKeychain(profile: .device)
        let first = try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag).signingKey()
        let second = try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag).signingKey()
        #expect(second.key.kind == .hardware)
        #expect(!second.wasCreated)
        #expect(second.fallbackReason == nil)
        #expect(second.key.publicKey.x963Representation == first.key.publicKey.x963Representation)
        #expect(memory.emulatedSecureEnclave.createdKeyCount == 1)
        // The reloaded key signs for the first one's public key.
        let signature = try second.key.signature(for: message)
        #expect(first.key.publicKey.isValidSignature(signature, for: message))
        // Another tag is another key.
        let other = try Keychain(store: memory).signingKey(tag: "com.example.other-key")
        #expect(other.key.publicKey.x963Representation != first.key.publicKey.x963Representation)
    }

    // MARK: - Simulator: software

    @Test("On a simulator the key is a software key with the reason, kept in the keychain, the same next launch")
    func simulatorFallsBack() throws {
        let memory = InMemoryKeychain(profile: .simulator)
        let factory = try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag)
        let result = try factory.signingKey()
        #expect(result.key.kind == .software)
        #expect(result.key is SoftwareSigningKey)
        #expect(result.fallbackReason == .noSecureEnclave)
        #expect(result.wasCreated)
        #expect("\(result.fallbackReason!)".contains("No Secure Enclave"))
        let signature = try result.key.signature(for: message)
        #expect(result.key.publicKey.isValidSignature(signature, for: message))
        #expect(memory.emulatedSecureEnclave.createdKeyCount == 0)

        // Persisted as a key item (a CryptoKit key in the keychain), loadable as such.
        let stored = try #require(try Keychain(store: memory).key(for: factory.softwareItem))
        #expect(stored.publicKey.x963Representation == result.key.publicKey.x963Representation)
        let again = try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag).signingKey()
        #expect(!again.wasCreated)
        #expect(again.key.kind == .software)
        #expect(again.fallbackReason == .noSecureEnclave)
        #expect(again.key.publicKey.x963Representation == result.key.publicKey.x963Representation)
    }

    @Test("An enclave that cannot be reached falls back with its status; when it is back the software key is kept until replaced")
    func unavailableEnclaveFallsBack() throws {
        let memory = InMemoryKeychain(profile: .device)
        memory.emulatedSecureEnclave.makeUnavailable(status: Status.notAvailable, reason: "the TPM does not answer")
        let factory = try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag)
        let result = try factory.signingKey()
        #expect(result.key.kind == .software)
        guard case .secureEnclaveUnavailable(let error)? = result.fallbackReason else {
            Issue.record("fallback reason \(String(describing: result.fallbackReason))")
            return
        }
        #expect(error == KeychainError.notAvailable)
        #expect("\(result.fallbackReason!)".contains("-25291"))
        #expect("\(result.fallbackReason!)".contains("the TPM does not answer"))

        // The enclave is back: the stored software key is kept (its public key is what others know).
        memory.emulatedSecureEnclave.makeAvailable()
        let kept = try factory.signingKey()
        #expect(kept.key.kind == .software)
        #expect(kept.fallbackReason == .softwareKeyStored)
        #expect(kept.key.publicKey.x963Representation == result.key.publicKey.x963Representation)
        #expect(memory.emulatedSecureEnclave.createdKeyCount == 0)

        // Replacing moves to hardware: a new public key, and the software item is gone.
        let replaced = try factory.replaceKey()
        #expect(replaced.key.kind == .hardware)
        #expect(replaced.wasCreated)
        #expect(replaced.key.publicKey.x963Representation != result.key.publicKey.x963Representation)
        #expect(try Keychain(store: memory).key(for: factory.softwareItem) == nil)
        #expect(try factory.signingKey().key.publicKey.x963Representation == replaced.key.publicKey.x963Representation)
    }

    @Test("An enclave that fails to make the key: software key, reason hardwareKeyCreationFailed with the status")
    func creationFailureFallsBack() throws {
        // Available when asked, failing when used: a token whose availability() is nil but createKey throws.
        let memory = InMemoryKeychain(profile: .device)
        let store = ForwardingStore(memory, token: FailingCreation(base: memory.emulatedSecureEnclave))
        let result = try SigningKeyFactory(keychain: Keychain(store: store), tag: tag).signingKey()
        #expect(result.key.kind == .software)
        #expect(result.fallbackReason == .hardwareKeyCreationFailed(KeychainError(status: Status.internalComponent)))
    }

    @Test("requireHardware never falls back: no enclave, an unreachable one, or a stored software key are errors, nothing stored")
    func requireHardware() throws {
        let simulator = InMemoryKeychain(profile: .simulator)
        #expect(throws: KeychainError.unimplemented) {
            try SigningKeyFactory(keychain: Keychain(store: simulator), tag: tag, policy: .requireHardware).signingKey()
        }
        #expect(simulator.itemCount == 0)

        let device = InMemoryKeychain(profile: .device)
        device.emulatedSecureEnclave.makeUnavailable()
        #expect(throws: KeychainError.notAvailable) {
            try SigningKeyFactory(keychain: Keychain(store: device), tag: tag, policy: .requireHardware).signingKey()
        }
        #expect(device.itemCount == 0)

        // A software key stored earlier is refused, not used, and left intact.
        _ = try SigningKeyFactory(keychain: Keychain(store: device), tag: tag).signingKey()
        device.emulatedSecureEnclave.makeAvailable()
        #expect(throws: KeychainError.keyTypeMismatch) {
            try SigningKeyFactory(keychain: Keychain(store: device), tag: tag, policy: .requireHardware).signingKey()
        }
        #expect(device.itemCount == 1)
        let hardware = try SigningKeyFactory(keychain: Keychain(store: device), tag: tag, policy: .requireHardware).replaceKey()
        #expect(hardware.key.kind == .hardware)
    }

    // MARK: - Failures never replace a key

    @Test("A stored hardware key another enclave made (a restored backup) is a typed errSecDecode; the item stays, no key is made")
    func foreignHardwareKeyIsAnError() throws {
        let memory = InMemoryKeychain(profile: .device)
        let original = try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag).signingKey()
        let before = try rows(memory)

        // The same rows, another device's enclave.
        let otherEnclave = EmulatedSecureEnclave(name: "another device")
        let restored = ForwardingStore(memory, token: otherEnclave)
        let factory = try SigningKeyFactory(keychain: Keychain(store: restored), tag: tag)
        memory.clearCalls()
        let error = #expect(throws: KeychainError.decode) { try factory.signingKey() }
        #expect(error?.reason.contains("left intact") == true, "\(String(describing: error))")
        #expect(error?.recoverySuggestion != nil)
        #expect(memory.calls(.add).isEmpty && memory.calls(.delete).isEmpty && memory.calls(.update).isEmpty)
        #expect(otherEnclave.createdKeyCount == 0)
        #expect(try rows(memory) == before)
        // The original device still has its key.
        #expect(try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag).signingKey().key.publicKey.x963Representation
                == original.key.publicKey.x963Representation)

        // A device without any enclave now: errSecUnimplemented, the item stays.
        memory.profile = .simulator
        #expect(throws: KeychainError.unimplemented) { try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag).signingKey() }
        #expect(try rows(memory) == before)
        memory.profile = .device

        // The explicit way out: replace.
        let replaced = try factory.replaceKey()
        #expect(replaced.key.kind == .hardware)
        #expect(otherEnclave.createdKeyCount == 1)
        #expect(replaced.key.publicKey.x963Representation != original.key.publicKey.x963Representation)
    }

    @Test("A locked keychain surfaces errSecInteractionNotAllowed: no key is made or replaced")
    func lockedKeychain() throws {
        let memory = InMemoryKeychain(profile: .device)
        let factory = try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag)
        let original = try factory.signingKey()
        memory.lockState = .locked
        memory.clearCalls()
        #expect(throws: KeychainError.interactionNotAllowed) { try factory.signingKey() }
        #expect(memory.calls(.add).isEmpty && memory.calls(.delete).isEmpty && memory.calls(.update).isEmpty)
        #expect(memory.emulatedSecureEnclave.createdKeyCount == 1)
        #expect(memory.itemCount == 1)
        #expect(throws: KeychainError.interactionNotAllowed) { try factory.replaceKey() }
        #expect(memory.itemCount == 1)

        memory.lockState = .unlocked
        #expect(try factory.signingKey().key.publicKey.x963Representation == original.key.publicKey.x963Representation)

        // Locked with nothing stored: the key cannot be stored, and the error says so (no key returned unsaved).
        let empty = InMemoryKeychain(profile: .simulator, lockState: .locked)
        #expect(throws: KeychainError.interactionNotAllowed) {
            try SigningKeyFactory(keychain: Keychain(store: empty), tag: tag).signingKey()
        }
        #expect(empty.itemCount == 0)
    }

    @Test("A failed authentication reading a protected key is surfaced and the key stays")
    func protectedKeyCanceled() throws {
        let memory = InMemoryKeychain(profile: .device)
        let keychain = Keychain(store: memory, options: ItemOptions(accessControlFlags: .userPresence))
        let factory = try SigningKeyFactory(keychain: keychain, tag: tag)
        let original = try factory.signingKey()
        #expect(memory.promptCount == 0)  // adding needs no authentication

        memory.enqueueAuthentication(.userCancel)
        #expect(throws: KeychainError.userCanceled) { try factory.signingKey() }
        #expect(memory.promptCount == 1)
        #expect(memory.itemCount == 1)
        let again = try factory.signingKey()
        #expect(memory.promptCount == 2)
        #expect(again.key.publicKey.x963Representation == original.key.publicKey.x963Representation)
    }

    @Test("Something else stored under the tag (a password with the hardware item's name) is a type mismatch, untouched")
    func somethingElseUnderTheTag() throws {
        let memory = InMemoryKeychain(profile: .device)
        let keychain = Keychain(store: memory)
        let password = try GenericPassword(service: tag, account: "secure-enclave-p256-signing")
        try keychain.save("not a key", for: password)
        #expect(throws: KeychainError.keyTypeMismatch) { try SigningKeyFactory(keychain: keychain, tag: tag).signingKey() }
        #expect(try keychain.string(for: password) == "not a key")
        #expect(memory.itemCount == 1)
    }

    @Test("Two callers racing to make the key both end with the one stored first")
    func raceKeepsFirstStoredKey() throws {
        let memory = InMemoryKeychain(profile: .device)
        // Between this caller's reads (nothing stored) and its add, another caller stores its key.
        let other = Locked<SigningKeyResult?>(nil)
        let store = ForwardingStore(memory, token: memory.emulatedSecureEnclave) { operation in
            guard operation == .add, other.current == nil else { return }
            other.withLock { $0 = try? SigningKeyFactory(keychain: Keychain(store: memory), tag: self.tag).signingKey() }
        }
        let result = try SigningKeyFactory(keychain: Keychain(store: store), tag: tag).signingKey()
        let winner = try #require(other.current)
        #expect(winner.wasCreated)
        #expect(!result.wasCreated)
        #expect(result.key.publicKey.x963Representation == winner.key.publicKey.x963Representation)
        #expect(memory.itemCount == 1)
        #expect(memory.emulatedSecureEnclave.createdKeyCount == 2)  // the loser's key was made and dropped
    }

    // MARK: - Storage rules

    @Test("The items are this-device-only and not synchronizable, whatever the keychain's options say")
    func itemsStayOnThisDevice() throws {
        for profile in InMemoryKeychain.DeviceProfile.allCases {
            let memory = InMemoryKeychain(profile: profile)
            let keychain = Keychain(store: memory, options: ItemOptions(accessibility: .afterFirstUnlock, synchronizable: true))
            _ = try SigningKeyFactory(keychain: keychain, tag: tag).signingKey()
            let row = try #require(try rows(memory).first)
            #expect(row[Key.accessible]?.stringValue == Accessibility.afterFirstUnlockThisDeviceOnly.rawValue, "\(profile)")
            #expect(row[Key.synchronizable]?.boolValue == false, "\(profile)")
            // And found again through a keychain with the same options.
            #expect(try !SigningKeyFactory(keychain: keychain, tag: tag).signingKey().wasCreated)
        }
    }

    @Test("deleteKey removes hardware and software items; replaceKey makes a new key")
    func deleteAndReplace() throws {
        let memory = InMemoryKeychain(profile: .device)
        memory.emulatedSecureEnclave.makeUnavailable()
        let factory = try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag)
        _ = try factory.signingKey()                 // software
        memory.emulatedSecureEnclave.makeAvailable()
        let hardware = try factory.replaceKey()      // hardware; the software item is deleted
        #expect(hardware.key.kind == .hardware)
        #expect(memory.itemCount == 1)
        #expect(try factory.deleteKey())
        #expect(memory.itemCount == 0)
        #expect(try !factory.deleteKey())
        let fresh = try factory.signingKey()
        #expect(fresh.wasCreated)
        #expect(fresh.key.publicKey.x963Representation != hardware.key.publicKey.x963Representation)
    }

    @Test("An empty tag or access group is refused before anything is stored")
    func invalidNames() throws {
        let memory = InMemoryKeychain()
        #expect(throws: KeychainError.invalidItem) { try SigningKeyFactory(keychain: Keychain(store: memory), tag: "") }
        #expect(throws: KeychainError.invalidItem) { try Keychain(store: memory).signingKey(tag: "") }
        #expect(throws: KeychainError.invalidItem) {
            try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag, accessGroup: "")
        }
        #expect(memory.itemCount == 0)
    }

    @Test("A key-agreement key in the enclave is not a signing key: keyTypeMismatch")
    func keyAgreementBlobRefused() throws {
        let enclave = EmulatedSecureEnclave()
        let agreement = try enclave.createKey(.keyAgreement)
        #expect(throws: KeychainError.keyTypeMismatch) {
            try SecureEnclaveSigningKey(dataRepresentation: agreement.dataRepresentation, token: enclave)
        }
        // A general key (a Secure Enclave SecKey's) signs.
        let general = try enclave.createKey(.general)
        let key = try SecureEnclaveSigningKey(dataRepresentation: general.dataRepresentation, token: enclave)
        #expect(key.publicKey.isValidSignature(try key.signature(for: message), for: message))
    }

    @Test("A hardware key whose enclave went away fails to sign and to load with errSecNotAvailable (transient); nothing replaced, it works when back")
    func enclaveLostMidWay() throws {
        let memory = InMemoryKeychain(profile: .device)
        let factory = try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag)
        let key = try factory.signingKey().key
        memory.emulatedSecureEnclave.makeUnavailable()
        #expect(throws: KeychainError.notAvailable) { try key.signature(for: message) }
        memory.clearCalls()
        #expect(throws: KeychainError.notAvailable) { try factory.signingKey() }
        #expect(memory.calls(.add).isEmpty && memory.calls(.delete).isEmpty)
        #expect(memory.itemCount == 1)
        memory.emulatedSecureEnclave.makeAvailable()
        #expect(key.publicKey.isValidSignature(try key.signature(for: message), for: message))
        #expect(try factory.signingKey().key.publicKey.x963Representation == key.publicKey.x963Representation)
    }

    @Test("A loaded hardware key is proven with one signature; a fresh one is not")
    func loadedKeyIsProven() throws {
        let memory = InMemoryKeychain(profile: .device)
        let factory = try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag)
        _ = try factory.signingKey()
        #expect(memory.emulatedSecureEnclave.signatureCount == 0)
        _ = try factory.signingKey()
        #expect(memory.emulatedSecureEnclave.signatureCount == 1)

        // A token that reads any blob (as Apple's Secure Enclave and a TPM do) but signs with another key: the proof
        // catches it as errSecDecode, and the item stays.
        let liar = ForwardingStore(memory, token: SignsWithAnotherKey(base: memory.emulatedSecureEnclave))
        #expect(throws: KeychainError.decode) { try SigningKeyFactory(keychain: Keychain(store: liar), tag: tag).signingKey() }
        #expect(memory.itemCount == 1)
    }

    @Test("Descriptions and reflection of keys and results hold no private key bytes")
    func noKeyBytesInText() throws {
        let memory = InMemoryKeychain(profile: .simulator)
        let factory = try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag)
        let result = try factory.signingKey()
        let privateKey = try #require(try Keychain(store: memory).key(for: factory.softwareItem))
        let scalar = privateKey.rawRepresentation
        var dumped = ""
        dump(result.key, to: &dumped)
        let texts = ["\(result)", "\(result.key)", String(reflecting: result.key), dumped, "\(result.fallbackReason!)"]
        let forms = [scalar.base64EncodedString(), scalar.map { String(format: "%02x", $0) }.joined(),
                     scalar.map { String(format: "%02X", $0) }.joined(), "\(Array(scalar))"]
        for text in texts {
            for form in forms { #expect(!text.contains(form), "\(text)") }
        }
        #expect("\(result)".contains("software key (created"))
    }

    @Test("The async form runs off the caller's actor and returns the same key")
    func asyncForm() async throws {
        let memory = InMemoryKeychain(profile: .device)
        let factory = try SigningKeyFactory(keychain: Keychain(store: memory), tag: tag)
        let created = try await factory.signingKey()
        let loaded = try await factory.signingKey()
        #expect(created.wasCreated && !loaded.wasCreated)
        #expect(loaded.key.publicKey.x963Representation == created.key.publicKey.x963Representation)
    }
}

/// A store over an `InMemoryKeychain`'s rows with another Secure Enclave (the same keychain restored onto another
/// device, or a token that misbehaves), and an optional hook before each operation.
final class ForwardingStore: KeychainStore {
    let base: InMemoryKeychain
    let token: (any SecureEnclaveToken)?
    let before: @Sendable (KeychainOperation) -> Void

    init(_ base: InMemoryKeychain, token: (any SecureEnclaveToken)?, before: @escaping @Sendable (KeychainOperation) -> Void = { _ in }) {
        self.base = base
        self.token = token
        self.before = before
    }

    var secureEnclave: (any SecureEnclaveToken)? { token }

    func add(_ attributes: KeychainQuery) throws -> ItemResult? {
        before(.add)
        return try base.add(attributes)
    }
    func copyMatching(_ query: KeychainQuery) throws -> ItemResult? {
        before(.copy)
        return try base.copyMatching(query)
    }
    func update(_ query: KeychainQuery, with: KeychainQuery) throws {
        before(.update)
        try base.update(query, with: with)
    }
    func delete(_ query: KeychainQuery) throws {
        before(.delete)
        try base.delete(query)
    }
}

/// A token that says it is available but fails to make keys.
struct FailingCreation: SecureEnclaveToken {
    let base: any SecureEnclaveToken
    var name: String { "failing creation" }
    func availability() -> EngineError? { nil }
    func createKey(_ usage: SecureEnclaveKeyUsage) throws(EngineError) -> SecureEnclaveKey {
        throw EngineError(Status.internalComponent, "the token failed to make a key")
    }
    func key(dataRepresentation: Data) throws(EngineError) -> SecureEnclaveKey { try base.key(dataRepresentation: dataRepresentation) }
    func signature(digest: Data, with dataRepresentation: Data) throws(EngineError) -> Data {
        try base.signature(digest: digest, with: dataRepresentation)
    }
    func sharedSecret(peerX963: Data, with dataRepresentation: Data) throws(EngineError) -> Data {
        try base.sharedSecret(peerX963: peerX963, with: dataRepresentation)
    }
}

/// A token that reads blobs as its base does but signs with a key of its own (a blob whose public key is not its
/// private key's).
struct SignsWithAnotherKey: SecureEnclaveToken {
    let base: EmulatedSecureEnclave
    let other: SecureEnclaveKey
    init(base: EmulatedSecureEnclave) {
        self.base = base
        other = try! base.createKey(.signing)
    }
    var name: String { "signs with another key" }
    func availability() -> EngineError? { nil }
    func createKey(_ usage: SecureEnclaveKeyUsage) throws(EngineError) -> SecureEnclaveKey { try base.createKey(usage) }
    func key(dataRepresentation: Data) throws(EngineError) -> SecureEnclaveKey { try base.key(dataRepresentation: dataRepresentation) }
    func signature(digest: Data, with dataRepresentation: Data) throws(EngineError) -> Data {
        try base.signature(digest: digest, with: other.dataRepresentation)
    }
    func sharedSecret(peerX963: Data, with dataRepresentation: Data) throws(EngineError) -> Data {
        try base.sharedSecret(peerX963: peerX963, with: dataRepresentation)
    }
}
