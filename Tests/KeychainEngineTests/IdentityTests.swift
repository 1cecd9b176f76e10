import Foundation
import KeychainEngine
import Testing

/// Apple's keychain has no identity table: a kSecClassIdentity query pairs each certificate with the private key
/// whose application label (`klbl`) is the certificate's public key hash (`pkhh`) (SecItemServer.c joins the cert
/// and keys tables; SecItem.h: "an identity is a certificate paired with its associated private key").
@Suite("kSecClassIdentity: a certificate and its private key")
struct IdentityTests {
    static func certificate(_ name: String, hash: Data, label: String? = nil) -> KeychainQuery {
        var q: KeychainQuery = [
            Key.class: .string("cert"), Key.certificateType: .number(3), Key.issuer: .data(Data("issuer".utf8)),
            Key.serialNumber: .data(Data(name.utf8)), Key.publicKeyHash: .data(hash),
            Key.valueData: .data(Data("DER of \(name)".utf8)),
        ]
        if let label { q[Key.label] = .string(label) }
        return q
    }

    static func key(hash: Data, keyClass: Int64 = 1, tag: String = "t", secret: String = "private",
                    accessControl: AccessControl? = nil) -> KeychainQuery {
        var q: KeychainQuery = [
            Key.class: .string("keys"), Key.applicationLabel: .data(hash), Key.keyClass: .number(keyClass),
            Key.applicationTag: .string(tag), Key.keyType: .number(73), Key.keySizeInBits: .number(256),
            Key.valueData: .data(Data(secret.utf8)),
        ]
        if let accessControl { q[Key.accessControl] = .accessControl(accessControl) }
        return q
    }

    static let identity: KeychainQuery = [Key.class: .string("idnt")]
    static func all(_ extra: KeychainQuery = [:]) -> KeychainQuery {
        identity.merging([Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true)]) { $1 }.merging(extra) { $1 }
    }

    @Test("a certificate pairs with the private key whose klbl is its pkhh, and with nothing else")
    func pairing() throws {
        let f = Fixture()
        let h1 = Data(repeating: 1, count: 20), h2 = Data(repeating: 2, count: 20), h3 = Data(repeating: 3, count: 20)
        try f.engine.add(Self.certificate("paired", hash: h1))
        try f.engine.add(Self.key(hash: h1))
        try f.engine.add(Self.certificate("public-key-only", hash: h2))
        try f.engine.add(Self.key(hash: h2, keyClass: 0))                 // a public key completes no identity
        try f.engine.add(Self.certificate("no-key", hash: h3))
        let found = try #require(try f.engine.copyMatching(Self.all())?.array)
        #expect(found.count == 1)
        let attributes = try #require(found.first?.attributes)
        #expect(attributes[Key.class] == .string("idnt"))
        #expect(attributes[Key.serialNumber] == .data(Data("paired".utf8)))
        #expect(attributes[Key.keyClass] == .number(1))
        // kSecReturnData gives the certificate's data.
        #expect(try f.engine.copyMatching(Self.identity.merging([Key.returnData: .bool(true)]) { $1 })?.data == Data("DER of paired".utf8))
    }

    @Test("certificate attributes narrow the certificate, key-only attributes the key")
    func narrowing() throws {
        let f = Fixture()
        let h1 = Data(repeating: 1, count: 20), h2 = Data(repeating: 2, count: 20)
        try f.engine.add(Self.certificate("a", hash: h1, label: "Alice"))
        try f.engine.add(Self.key(hash: h1, tag: "alice-key"))
        try f.engine.add(Self.certificate("b", hash: h2, label: "Bob"))
        try f.engine.add(Self.key(hash: h2, tag: "bob-key"))
        #expect(try f.engine.copyMatching(Self.all([Key.label: .string("Bob")]))?.array?.count == 1)
        let byTag = try #require(try f.engine.copyMatching(Self.all([Key.applicationTag: .data(Data("alice-key".utf8))]))?.array)
        #expect(byTag.count == 1 && byTag.first?.attributes?[Key.label] == .string("Alice"))
        #expect(status { _ = try f.engine.copyMatching(Self.all([Key.applicationTag: .string("nobody")])) } == Status.itemNotFound)
    }

    @Test("an identity's persistent reference finds it again")
    func persistentReference() throws {
        let f = Fixture()
        let h = Data(repeating: 9, count: 20)
        try f.engine.add(Self.certificate("c", hash: h))
        try f.engine.add(Self.key(hash: h))
        let ref = try #require(try f.engine.copyMatching(Self.identity.merging([Key.returnPersistentRef: .bool(true)]) { $1 })?.data)
        #expect(PersistentReference(data: ref)?.itemClass == .identity)
        let again = try f.engine.copyMatching([Key.valuePersistentRef: .data(ref), Key.returnAttributes: .bool(true)])
        #expect(again?.attributes?[Key.serialNumber] == .data(Data("c".utf8)))
    }

    @Test("kSecReturnRef brings the certificate's DER and the key's data, but not a protected key's")
    func referenceMaterial() throws {
        let f = Fixture()
        let h1 = Data(repeating: 1, count: 20), h2 = Data(repeating: 2, count: 20)
        try f.engine.add(Self.certificate("open", hash: h1))
        try f.engine.add(Self.key(hash: h1, secret: "open-key"))
        try f.engine.add(Self.certificate("guarded", hash: h2))
        try f.engine.add(Self.key(hash: h2, tag: "g", secret: "guarded-key", accessControl: AccessControl(accessibility: .whenUnlocked, flags: .userPresence)))
        let all = try #require(try f.engine.copyMatching(Self.identity.merging([Key.returnRef: .bool(true), Key.matchLimit: .string(Key.matchLimitAll)]) { $1 })?.array)
        let open = try #require(all.compactMap(\.attributes).first { $0[Key.serialNumber] == .data(Data("open".utf8)) })
        #expect(open[KeychainEngine.identityCertificateData] == .data(Data("DER of open".utf8)))
        #expect(open[KeychainEngine.identityKeyData] == .data(Data("open-key".utf8)))
        let guarded = try #require(all.compactMap(\.attributes).first { $0[Key.serialNumber] == .data(Data("guarded".utf8)) })
        #expect(guarded[KeychainEngine.identityKeyData] == nil)
        #expect(guarded[KeychainEngine.identityKeyReference] != nil)
        #expect(f.auth.prompts == 0)
    }

    @Test("deleting an identity removes its certificate and key, and leaves keys and certificates of no identity")
    func delete() throws {
        let f = Fixture()
        let h1 = Data(repeating: 1, count: 20), h2 = Data(repeating: 2, count: 20)
        try f.engine.add(Self.certificate("paired", hash: h1))
        try f.engine.add(Self.key(hash: h1))
        try f.engine.add(Self.certificate("lonely", hash: h2))
        try f.engine.add(Self.key(hash: Data(repeating: 7, count: 20), tag: "other"))
        try f.engine.delete(Self.identity)
        #expect(status { _ = try f.engine.copyMatching(Self.identity) } == Status.itemNotFound)
        #expect(try f.engine.copyMatching([Key.class: .string("cert"), Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true)])?.array?.count == 1)
        #expect(try f.engine.copyMatching([Key.class: .string("keys"), Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true)])?.array?.count == 1)
        #expect(status { try f.engine.delete(Self.identity) } == Status.itemNotFound)
    }

    @Test("updating an identity's label changes its certificate and key; its data cannot be set")
    func update() throws {
        let f = Fixture()
        let h = Data(repeating: 4, count: 20)
        try f.engine.add(Self.certificate("c", hash: h))
        try f.engine.add(Self.key(hash: h))
        try f.engine.update(Self.identity, with: [Key.label: .string("renamed")])
        #expect(try f.engine.copyMatching([Key.class: .string("cert"), Key.returnAttributes: .bool(true)])?.attributes?[Key.label] == .string("renamed"))
        #expect(try f.engine.copyMatching([Key.class: .string("keys"), Key.returnAttributes: .bool(true)])?.attributes?[Key.label] == .string("renamed"))
        #expect(status { try f.engine.update(Self.identity, with: [Key.valueData: .data(Data())]) } == Status.param)
    }

    @Test("an identity cannot be added as such: errSecParam, nothing stored")
    func addRefused() {
        let f = Fixture()
        #expect(status { try f.engine.add([Key.class: .string("idnt"), Key.valueData: .data(Data("x".utf8))]) } == Status.param)
        #expect(f.storage.count == 0)
    }
}
