import Crypto
import Foundation
import Keystone
import KeychainEngine
import KeystoneTesting
import Testing
#if !canImport(Darwin)
import KeychainFile
#endif

/// The stores CryptoKit keys are tested on: the test double, and the encrypted keychain file (Linux's default storage).
enum KeyBackend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case inMemoryKeychain
    #if !canImport(Darwin)
    case keychainFile
    #endif

    var testDescription: String { rawValue }
}

/// A keychain over one ``KeyBackend`` with a hand-moved clock, a lock switch and a recorder of the store calls.
final class KeyFixture {
    let clock = TestClock()
    let engine: KeychainEngine
    let recorder: RecordingStore
    let keychain: Keychain
    let memory: InMemoryKeychain?
    private let lockStorage: () -> Void
    private let unlockStorage: () throws -> Void
    private let directory: URL?

    init(_ backend: KeyBackend) throws {
        let store: any KeychainStore
        switch backend {
        case .inMemoryKeychain:
            let memory = InMemoryKeychain()
            self.memory = memory
            engine = memory.engine
            store = memory
            directory = nil
            lockStorage = { memory.lockState = .locked }
            unlockStorage = { memory.lockState = .unlocked }
        #if !canImport(Darwin)
        case .keychainFile:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-keys-\(UUID().uuidString)")
            let file = try KeychainFile.create(at: directory.appendingPathComponent("keys.keychain-db").path, password: "pw")
            self.directory = directory
            memory = nil
            engine = KeychainEngine(storage: file)
            store = engine
            lockStorage = { file.lock() }
            unlockStorage = { try file.unlock(password: "pw") }
        #endif
        }
        let clock = self.clock
        engine.configuration.now = { clock.now }
        recorder = RecordingStore(store)
        keychain = Keychain(store: recorder)
    }

    deinit {
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    func lock() { lockStorage() }
    func unlock() throws { try unlockStorage() }

    /// The one item of `query` (class and identifying attributes), read straight from the engine with its attributes.
    func storedAttributes(_ query: KeychainQuery) throws -> KeychainQuery {
        var query = query
        query[Key.returnAttributes] = .bool(true)
        query[Key.matchLimit] = .string(Key.matchLimitOne)
        guard case .attributes(let attributes)? = try engine.copyMatching(query) else {
            throw KeychainError(code: .unexpectedResult, reason: "no attributes")
        }
        return attributes
    }

    /// The stored data of the item of `query`, straight from the engine.
    func storedData(_ query: KeychainQuery) throws -> Data {
        var query = query
        query[Key.returnData] = .bool(true)
        guard case .data(let data)? = try engine.copyMatching(query) else {
            throw KeychainError(code: .unexpectedResult, reason: "no data")
        }
        return data
    }
}

/// One supported key type, with what the tests need to make, place and compare its keys.
protocol KeySpec: Sendable {
    associatedtype StoredKey: KeychainStorableKey
    /// A fresh random key.
    func generate() throws -> StoredKey
    /// The item named `name` for this key type.
    func item(_ name: String) throws -> CryptoKeyItem<StoredKey>
    /// Expects `loaded` to be `original`: same public key (or bytes), and it works with the original's public half.
    func expectSame(_ loaded: StoredKey, _ original: StoredKey) throws
}

struct Spec<StoredKey: KeychainStorableKey>: KeySpec {
    let make: @Sendable () throws -> StoredKey
    let place: @Sendable (String) throws -> CryptoKeyItem<StoredKey>
    let same: @Sendable (StoredKey, StoredKey) throws -> Void
    func generate() throws -> StoredKey { try make() }
    func item(_ name: String) throws -> CryptoKeyItem<StoredKey> { try place(name) }
    func expectSame(_ loaded: StoredKey, _ original: StoredKey) throws { try same(loaded, original) }
}

let message = Data("a message to sign".utf8)

func bytes(_ secret: SharedSecret) -> Data { secret.withUnsafeBytes { Data($0) } }

/// Every key type Keystone stores.
enum KeyFamily: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case symmetric, p256Signing, p256KeyAgreement, p384Signing, p384KeyAgreement, p521Signing, p521KeyAgreement
    case curve25519Signing, curve25519KeyAgreement, mlkem768, mldsa65

    var testDescription: String { rawValue }

    /// Stored as a key item (NIST curves) rather than a generic password.
    var isNIST: Bool { rawValue.hasPrefix("p") }

    /// The curve size of a NIST family.
    var keySizeInBits: Int64? {
        switch self {
        case .p256Signing, .p256KeyAgreement: 256
        case .p384Signing, .p384KeyAgreement: 384
        case .p521Signing, .p521KeyAgreement: 521
        default: nil
        }
    }

    /// The `kSecAttrGeneric` marker of a generic-password family.
    var marker: String? {
        switch self {
        case .symmetric: "keystone.symmetric"
        case .curve25519Signing: "keystone.curve25519.signing"
        case .curve25519KeyAgreement: "keystone.curve25519.keyagreement"
        case .mlkem768: "keystone.mlkem768"
        case .mldsa65: "keystone.mldsa65"
        default: nil
        }
    }

    static var nist: [KeyFamily] { allCases.filter(\.isNIST) }
    static var genericPassword: [KeyFamily] { allCases.filter { !$0.isNIST } }

    /// Where items of this family named `name` live: tag for NIST keys, service + account for the others.
    static let service = "com.example.keys"
    static func tag(_ name: String) -> String { "com.example.keys.\(name)" }

    /// The engine query of the item named `name` (class and identifying attributes, no marker).
    func locatingQuery(_ name: String) -> KeychainQuery {
        if isNIST {
            return [Key.class: .string(ItemClass.key.rawValue), Key.applicationTag: .data(Data(Self.tag(name).utf8)),
                    Key.keySizeInBits: .number(keySizeInBits!)]
        }
        return [Key.class: .string(ItemClass.genericPassword.rawValue), Key.service: .string(Self.service), Key.account: .string(name)]
    }

    var spec: any KeySpec {
        switch self {
        case .symmetric:
            Spec(make: { SymmetricKey(size: .bits256) }, place: { try CryptoKeyItem(service: Self.service, account: $0) },
                 same: { loaded, original in #expect(loaded == original) })
        case .p256Signing:
            Spec(make: { P256.Signing.PrivateKey() }, place: { try CryptoKeyItem(tag: Self.tag($0)) }, same: { loaded, original in
                #expect(loaded.publicKey.x963Representation == original.publicKey.x963Representation)
                let signature = try loaded.signature(for: message)
                #expect(original.publicKey.isValidSignature(signature, for: message))
            })
        case .p256KeyAgreement:
            Spec(make: { P256.KeyAgreement.PrivateKey() }, place: { try CryptoKeyItem(tag: Self.tag($0)) }, same: { loaded, original in
                #expect(loaded.publicKey.x963Representation == original.publicKey.x963Representation)
                let peer = P256.KeyAgreement.PrivateKey()
                let ours = try loaded.sharedSecretFromKeyAgreement(with: peer.publicKey)
                let theirs = try peer.sharedSecretFromKeyAgreement(with: original.publicKey)
                #expect(bytes(ours) == bytes(theirs))
            })
        case .p384Signing:
            Spec(make: { P384.Signing.PrivateKey() }, place: { try CryptoKeyItem(tag: Self.tag($0)) }, same: { loaded, original in
                #expect(loaded.publicKey.x963Representation == original.publicKey.x963Representation)
                let signature = try loaded.signature(for: message)
                #expect(original.publicKey.isValidSignature(signature, for: message))
            })
        case .p384KeyAgreement:
            Spec(make: { P384.KeyAgreement.PrivateKey() }, place: { try CryptoKeyItem(tag: Self.tag($0)) }, same: { loaded, original in
                #expect(loaded.publicKey.x963Representation == original.publicKey.x963Representation)
                let peer = P384.KeyAgreement.PrivateKey()
                let ours = try loaded.sharedSecretFromKeyAgreement(with: peer.publicKey)
                let theirs = try peer.sharedSecretFromKeyAgreement(with: original.publicKey)
                #expect(bytes(ours) == bytes(theirs))
            })
        case .p521Signing:
            Spec(make: { P521.Signing.PrivateKey() }, place: { try CryptoKeyItem(tag: Self.tag($0)) }, same: { loaded, original in
                #expect(loaded.publicKey.x963Representation == original.publicKey.x963Representation)
                let signature = try loaded.signature(for: message)
                #expect(original.publicKey.isValidSignature(signature, for: message))
            })
        case .p521KeyAgreement:
            Spec(make: { P521.KeyAgreement.PrivateKey() }, place: { try CryptoKeyItem(tag: Self.tag($0)) }, same: { loaded, original in
                #expect(loaded.publicKey.x963Representation == original.publicKey.x963Representation)
                let peer = P521.KeyAgreement.PrivateKey()
                let ours = try loaded.sharedSecretFromKeyAgreement(with: peer.publicKey)
                let theirs = try peer.sharedSecretFromKeyAgreement(with: original.publicKey)
                #expect(bytes(ours) == bytes(theirs))
            })
        case .curve25519Signing:
            Spec(make: { Curve25519.Signing.PrivateKey() }, place: { try CryptoKeyItem(service: Self.service, account: $0) }, same: { loaded, original in
                #expect(loaded.publicKey.rawRepresentation == original.publicKey.rawRepresentation)
                let signature = try loaded.signature(for: message)
                #expect(original.publicKey.isValidSignature(signature, for: message))
            })
        case .curve25519KeyAgreement:
            Spec(make: { Curve25519.KeyAgreement.PrivateKey() }, place: { try CryptoKeyItem(service: Self.service, account: $0) }, same: { loaded, original in
                #expect(loaded.publicKey.rawRepresentation == original.publicKey.rawRepresentation)
                let peer = Curve25519.KeyAgreement.PrivateKey()
                let ours = try loaded.sharedSecretFromKeyAgreement(with: peer.publicKey)
                let theirs = try peer.sharedSecretFromKeyAgreement(with: original.publicKey)
                #expect(bytes(ours) == bytes(theirs))
            })
        case .mlkem768:
            Spec(make: { try MLKEM768.PrivateKey() }, place: { try CryptoKeyItem(service: Self.service, account: $0) }, same: { loaded, original in
                #expect(loaded.publicKey.rawRepresentation == original.publicKey.rawRepresentation)
                let sent = try original.publicKey.encapsulate()
                let received = try loaded.decapsulate(sent.encapsulated)
                #expect(received == sent.sharedSecret)
            })
        case .mldsa65:
            Spec(make: { try MLDSA65.PrivateKey() }, place: { try CryptoKeyItem(service: Self.service, account: $0) }, same: { loaded, original in
                #expect(loaded.publicKey.rawRepresentation == original.publicKey.rawRepresentation)
                let signature = try loaded.signature(for: message)
                #expect(original.publicKey.isValidSignature(signature, for: message))
            })
        }
    }

    /// Another family stored the same way (key item or generic password): loading it from this family's item is a
    /// type mismatch.
    var sibling: KeyFamily {
        let same = isNIST ? Self.nist : Self.genericPassword
        return same[(same.firstIndex(of: self)! + 1) % same.count]
    }
}

/// Generic helpers the parameterized tests call through `any KeySpec` (opened as its concrete type).
extension KeySpec {
    /// Generates a key, saves it as `name`, and returns it.
    @discardableResult
    func saveNew(_ name: String, in keychain: Keychain) throws -> StoredKey {
        let key = try generate()
        try keychain.save(key, for: item(name))
        return key
    }

    /// Saves a new key as `name`, then loads it and expects the same key.
    func roundTrip(_ name: String, in keychain: Keychain) throws {
        let original = try saveNew(name, in: keychain)
        let loaded = try #require(try keychain.key(for: item(name)))
        try expectSame(loaded, original)
    }

    /// Loads `name` as this key type: whether it was found.
    func load(_ name: String, in keychain: Keychain) throws -> Bool {
        try keychain.key(for: item(name)) != nil
    }

    /// Saves a new key as `name`, replacing the one there, and expects the loaded key to be the new one.
    func replace(_ name: String, in keychain: Keychain) throws {
        let replacement = try saveNew(name, in: keychain)
        let loaded = try #require(try keychain.key(for: item(name)))
        try expectSame(loaded, replacement)
    }

    /// Saves a new key as `name` asynchronously and loads it back the same way.
    func asyncRoundTrip(_ name: String, in keychain: Keychain) async throws {
        let original = try generate()
        try await keychain.save(original, for: item(name))
        let loaded = try #require(try await keychain.key(for: item(name)))
        try expectSame(loaded, original)
        #expect(try await keychain.delete(item(name)))
        #expect(try await keychain.key(for: item(name)) == nil)
    }

    func delete(_ name: String, in keychain: Keychain) throws -> Bool {
        try keychain.delete(item(name))
    }
}
