import Crypto
import Foundation
import Keystone
import KeychainEngine
import KeystoneTesting
import Testing

@Suite("CryptoKit keys in the keychain")
struct CryptoKeyTests {
    @Test("Every key type saved is loaded back as the same key", arguments: KeyBackend.allCases, KeyFamily.allCases)
    func roundTrip(backend: KeyBackend, family: KeyFamily) throws {
        let f = try KeyFixture(backend)
        try family.spec.roundTrip("alpha", in: f.keychain)
    }

    @Test("A missing key loads as nil and deletes as not there", arguments: KeyBackend.allCases, KeyFamily.allCases)
    func missingKey(backend: KeyBackend, family: KeyFamily) throws {
        let f = try KeyFixture(backend)
        #expect(try family.spec.load("absent", in: f.keychain) == false)
        #expect(try family.spec.delete("absent", in: f.keychain) == false)
    }

    @Test("Keys under different names are different items", arguments: KeyBackend.allCases, KeyFamily.allCases)
    func namesAreSeparate(backend: KeyBackend, family: KeyFamily) throws {
        let f = try KeyFixture(backend)
        try family.spec.roundTrip("alpha", in: f.keychain)
        try family.spec.roundTrip("beta", in: f.keychain)
        #expect(try family.spec.delete("alpha", in: f.keychain))
        #expect(try family.spec.load("alpha", in: f.keychain) == false)
        #expect(try family.spec.load("beta", in: f.keychain))
    }

    @Test("Saving again replaces the key in place: no delete, creation date kept", arguments: KeyBackend.allCases, KeyFamily.allCases)
    func saveAgainReplaces(backend: KeyBackend, family: KeyFamily) throws {
        let f = try KeyFixture(backend)
        try family.spec.saveNew("alpha", in: f.keychain)
        let before = try f.storedAttributes(family.locatingQuery("alpha"))
        f.clock.advance(60)
        try family.spec.replace("alpha", in: f.keychain)
        let after = try f.storedAttributes(family.locatingQuery("alpha"))

        #expect(after[Key.creationDate] == before[Key.creationDate])
        #expect(after[Key.modificationDate] != before[Key.modificationDate])
        #expect(f.recorder.entries(.delete).isEmpty)
        #expect(f.recorder.log.map(\.operation).filter { $0 != .copy } == [.add, .add, .update])
    }

    @Test("Loading with another key type of the same storage is a typed mismatch, and changes nothing",
          arguments: KeyBackend.allCases, KeyFamily.allCases)
    func wrongKeyTypeLoad(backend: KeyBackend, family: KeyFamily) throws {
        let f = try KeyFixture(backend)
        try family.spec.saveNew("alpha", in: f.keychain)
        #expect(throws: KeychainError.keyTypeMismatch) { try family.sibling.spec.load("alpha", in: f.keychain) }
        #expect(try family.spec.load("alpha", in: f.keychain))
    }

    @Test("Saving a key where another key type lives is a typed mismatch; the stored key is untouched",
          arguments: KeyBackend.allCases, KeyFamily.allCases)
    func wrongKeyTypeSave(backend: KeyBackend, family: KeyFamily) throws {
        let f = try KeyFixture(backend)
        try family.spec.saveNew("alpha", in: f.keychain)
        let stored = try f.storedData(family.locatingQuery("alpha"))
        let sibling = family.sibling
        if family.isNIST && sibling.keySizeInBits != family.keySizeInBits {
            // Another curve under the same tag is another item (the size is part of a key item's identity).
            try sibling.spec.saveNew("alpha", in: f.keychain)
        } else {
            #expect(throws: KeychainError.keyTypeMismatch) { try sibling.spec.saveNew("alpha", in: f.keychain) }
            // Deleting as the wrong type deletes nothing.
            #expect(try sibling.spec.delete("alpha", in: f.keychain) == false)
        }
        #expect(try f.storedData(family.locatingQuery("alpha")) == stored)
        #expect(try family.spec.load("alpha", in: f.keychain))
    }

    @Test("A password is never loaded as a key nor overwritten by one", arguments: KeyBackend.allCases, KeyFamily.genericPassword)
    func passwordIsNotAKey(backend: KeyBackend, family: KeyFamily) throws {
        let f = try KeyFixture(backend)
        let password = try GenericPassword(service: KeyFamily.service, account: "alpha")
        try f.keychain.save("hunter2", for: password)
        #expect(throws: KeychainError.keyTypeMismatch) { try family.spec.load("alpha", in: f.keychain) }
        #expect(throws: KeychainError.keyTypeMismatch) { try family.spec.saveNew("alpha", in: f.keychain) }
        #expect(try family.spec.delete("alpha", in: f.keychain) == false)
        #expect(try f.keychain.string(for: password) == "hunter2")
    }

    @Test("A damaged stored key is a typed decoding error, never a crash or another key",
          arguments: KeyBackend.allCases, KeyFamily.allCases)
    func damagedKey(backend: KeyBackend, family: KeyFamily) throws {
        let f = try KeyFixture(backend)
        try family.spec.saveNew("alpha", in: f.keychain)
        let stored = try f.storedData(family.locatingQuery("alpha"))
        // Any non-empty length is a valid symmetric key: only empty bytes are damage there.
        let damaged = family == .symmetric ? Data() : stored.prefix(stored.count / 2)
        try f.engine.update(family.locatingQuery("alpha"), with: [Key.valueData: .data(Data(damaged))])

        let error = try #require(throws: KeychainError.self) { try family.spec.load("alpha", in: f.keychain) }
        #expect(error == .decodingFailed)
        #expect(!error.description.contains(stored.base64EncodedString()))
        #expect(!error.reason.contains(Data(damaged).base64EncodedString()) || damaged.isEmpty)
    }

    @Test("A NIST key is a key-class item: private EC key, curve size, X9.63 data, application tag",
          arguments: KeyBackend.allCases, KeyFamily.nist)
    func nistItemAttributes(backend: KeyBackend, family: KeyFamily) throws {
        let f = try KeyFixture(backend)
        try family.spec.saveNew("alpha", in: f.keychain)
        let attributes = try f.storedAttributes([
            Key.class: .string(ItemClass.key.rawValue),
            Key.applicationTag: .string(KeyFamily.tag("alpha")),   // a blob: the string matches the stored bytes
        ])
        #expect(attributes[Key.class] == .string("keys"))
        #expect(attributes[Key.keyClass]?.integerValue == 1)          // kSecAttrKeyClassPrivate
        #expect(attributes[Key.keyType]?.integerValue == 73)          // kSecAttrKeyTypeECSECPrimeRandom
        #expect(attributes[Key.keySizeInBits]?.integerValue == family.keySizeInBits)
        #expect(attributes[Key.applicationTag] == .data(Data(KeyFamily.tag("alpha").utf8)))
        let signing = family.rawValue.hasSuffix("Signing")
        #expect(attributes[Key.canSign]?.boolValue == signing)
        #expect(attributes[Key.canDerive]?.boolValue == !signing)
        #expect(attributes[Key.valueData] == nil)

        // X9.63: 04 ‖ X ‖ Y ‖ K, each coordinate and the scalar ⌈bits / 8⌉ bytes.
        let data = try f.storedData(family.locatingQuery("alpha"))
        let coordinate = (Int(family.keySizeInBits!) + 7) / 8
        #expect(data.first == 0x04)
        #expect(data.count == 1 + 3 * coordinate)
    }

    @Test("A key stored as a generic password carries its type's marker in kSecAttrGeneric",
          arguments: KeyBackend.allCases, KeyFamily.genericPassword)
    func genericPasswordMarker(backend: KeyBackend, family: KeyFamily) throws {
        let f = try KeyFixture(backend)
        try family.spec.saveNew("alpha", in: f.keychain)
        let attributes = try f.storedAttributes(family.locatingQuery("alpha"))
        #expect(attributes[Key.generic] == .data(Data(family.marker!.utf8)))
    }

    @Test("Markers of the generic-password key types are distinct")
    func markersDistinct() {
        let markers = [SymmetricKey.keychainMarker, Curve25519.Signing.PrivateKey.keychainMarker,
                       Curve25519.KeyAgreement.PrivateKey.keychainMarker, MLKEM768.PrivateKey.keychainMarker,
                       MLDSA65.PrivateKey.keychainMarker]
        #expect(Set(markers).count == markers.count)
        #expect(Curve25519.Signing.PrivateKey.keychainMarker == "keystone.curve25519.signing")
    }

    @Test("A locked keychain gives errSecInteractionNotAllowed and deletes nothing", arguments: KeyBackend.allCases, KeyFamily.allCases)
    func lockedKeychain(backend: KeyBackend, family: KeyFamily) throws {
        let f = try KeyFixture(backend)
        let original = try family.spec.saveNew("alpha", in: f.keychain)
        _ = original
        f.lock()
        let load = try #require(throws: KeychainError.self) { try family.spec.load("alpha", in: f.keychain) }
        #expect(load == .interactionNotAllowed)
        #expect(load.isTransient)
        #expect(throws: KeychainError.interactionNotAllowed) { try family.spec.delete("alpha", in: f.keychain) }
        #expect(throws: KeychainError.interactionNotAllowed) { try family.spec.saveNew("alpha", in: f.keychain) }
        try f.unlock()
        #expect(try family.spec.load("alpha", in: f.keychain))
    }

    @Test("The async forms save, load and delete off the caller's actor", arguments: KeyFamily.allCases)
    func asyncRoundTrip(family: KeyFamily) async throws {
        let f = try KeyFixture(.inMemoryKeychain)
        try await family.spec.asyncRoundTrip("alpha", in: f.keychain)
    }

    @Test("Items cannot be built wrong: empty tag, empty service, empty access group")
    func invalidItems() {
        #expect(throws: KeychainError.invalidItem) { try CryptoKeyItem<P256.Signing.PrivateKey>(tag: "") }
        #expect(throws: KeychainError.invalidItem) { try CryptoKeyItem<SymmetricKey>(service: "", account: "a") }
        #expect(throws: KeychainError.invalidItem) { try CryptoKeyItem<Curve25519.Signing.PrivateKey>(service: "s", account: "a", accessGroup: "") }
        #expect(throws: KeychainError.invalidItem) { try CryptoKeyItem<P384.KeyAgreement.PrivateKey>(tag: "t", accessGroup: "") }
    }

    @Test("An item's description names where it lives and never holds key bytes")
    func itemDescription() throws {
        let nist = try CryptoKeyItem<P256.Signing.PrivateKey>(tag: "com.example.signing")
        #expect(nist.tag == "com.example.signing")
        #expect(nist.description == "keys tag=\"com.example.signing\" bits=256 purpose=signing")
        let generic = try CryptoKeyItem<Curve25519.Signing.PrivateKey>(service: "com.example", account: "alice", accessGroup: "group.x")
        #expect(generic.service == "com.example" && generic.account == "alice")
        #expect(generic.description == "genp service=\"com.example\" account=\"alice\" marker=\"keystone.curve25519.signing\" group=\"group.x\"")
    }
}

@Suite("CryptoKit keys through KeystoneTesting")
struct CryptoKeyTestDoubleTests {
    @Test("A NIST key saved through InMemoryKeychain is a key-class add in the call log, with the key's attributes")
    func inMemoryKeychainLogsKeyClassAdd() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        let key = P384.Signing.PrivateKey()
        try keychain.save(key, for: CryptoKeyItem(tag: "com.example.signing"))

        let adds = memory.calls(.add)
        #expect(adds.count == 1)
        let add = try #require(adds.first)
        #expect(add.succeeded)
        #expect(add.query[Key.class] == .string(ItemClass.key.rawValue))
        #expect(add.query[Key.keyClass] == .string("1"))
        #expect(add.query[Key.keyType] == .string("73"))
        #expect(add.query[Key.keySizeInBits] == .number(384))
        #expect(add.query[Key.applicationTag] == .data(Data("com.example.signing".utf8)))
        #expect(add.query[Key.valueData] == nil)                       // the log never holds the secret
        #expect(add.secretByteCount == key.x963Representation.count)
        #expect(memory.calls(.delete).isEmpty)
        #expect(memory.itemCount == 1)

        let stored = try #require(try keychain.key(for: CryptoKeyItem<P384.Signing.PrivateKey>(tag: "com.example.signing")))
        #expect(stored.publicKey.x963Representation == key.publicKey.x963Representation)
    }

    @Test("Saving a key over itself through InMemoryKeychain logs an add, then an update: never a delete")
    func inMemoryKeychainLogsUpdate() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        let item = try CryptoKeyItem<Curve25519.Signing.PrivateKey>(service: "com.example", account: "signing")
        try keychain.save(Curve25519.Signing.PrivateKey(), for: item)
        try keychain.save(Curve25519.Signing.PrivateKey(), for: item)
        #expect(memory.calls.map(\.operation) == [.add, .add, .update])
        #expect(memory.calls(.update).first?.query[Key.generic] == .data(Data("keystone.curve25519.signing".utf8)))
    }
}
