// Linux-only: SecKey as KeychainServices declares it on Linux.
#if !canImport(Darwin)
import Crypto
import CryptoExtras
import Foundation
import KeychainServices
import Testing

// Interoperability: signatures, keys and ECDH secrets exchanged with the real `openssl` binary, and ECIES
// ciphertexts made by Apple's Security framework.

/// Runs `/usr/bin/openssl` in a temporary directory holding `files`; returns its exit status and the files after.
struct OpenSSL {
    static let path = "/usr/bin/openssl"
    static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: path) }

    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-openssl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    func write(_ name: String, _ data: Data) throws { try data.write(to: directory.appendingPathComponent(name)) }
    func write(_ name: String, _ text: String) throws { try write(name, Data(text.utf8)) }
    func read(_ name: String) throws -> Data { try Data(contentsOf: directory.appendingPathComponent(name)) }

    /// Runs openssl with `arguments` in the directory; returns the exit status and what it printed.
    @discardableResult
    func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: OpenSSL.path)
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }
}

/// The SubjectPublicKeyInfo PEM of a Keystone public key (converted with swift-crypto).
func spkiPEM(_ key: SecKey) throws -> String {
    let data = externalRepresentation(key)
    switch data.count {
    case 65: return try P256.Signing.PublicKey(x963Representation: data).pemRepresentation
    case 97: return try P384.Signing.PublicKey(x963Representation: data).pemRepresentation
    case 133: return try P521.Signing.PublicKey(x963Representation: data).pemRepresentation
    default: return try _RSA.Signing.PublicKey(unsafeDERRepresentation: data).pemRepresentation
    }
}

@Suite("SecKey interoperability with openssl", .enabled(if: OpenSSL.isAvailable, "/usr/bin/openssl is not installed (Debian package openssl)"))
struct SecKeyOpenSSLTests {
    let message = Data("signed by one, verified by the other\n".utf8)

    @Test("A Keystone signature verifies with openssl dgst -verify", arguments: [
        (KeySpec.p256, SecKeyAlgorithm.ecdsaSignatureMessageX962SHA256, [String]()),
        (KeySpec.p384, .ecdsaSignatureMessageX962SHA256, []),
        (KeySpec.rsa2048, .rsaSignatureMessagePKCS1v15SHA256, []),
        (KeySpec.rsa2048, .rsaSignatureMessagePSSSHA256, ["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:32"]),
    ])
    func keystoneSignsOpenSSLVerifies(_ spec: KeySpec, _ algorithm: SecKeyAlgorithm, _ options: [String]) throws {
        let openssl = try OpenSSL()
        defer { openssl.remove() }
        let signature = try #require(sign(spec.privateKey, algorithm, message).value)
        try openssl.write("pub.pem", spkiPEM(spec.publicKey))
        try openssl.write("sig.der", signature)
        try openssl.write("file", message)
        let result = try openssl.run(["dgst", "-sha256", "-verify", "pub.pem", "-signature", "sig.der"] + options + ["file"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("Verified OK"))
    }

    @Test("An openssl signature verifies with SecKeyVerifySignature", arguments: [
        ("EC", SecKeyAlgorithm.ecdsaSignatureMessageX962SHA256, [String]()),
        ("RSA", .rsaSignatureMessagePKCS1v15SHA256, []),
        ("RSA", .rsaSignatureMessagePSSSHA256, ["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:32"]),
    ])
    func openSSLSignsKeystoneVerifies(_ type: String, _ algorithm: SecKeyAlgorithm, _ options: [String]) throws {
        let openssl = try OpenSSL()
        defer { openssl.remove() }
        let key = try OpenSSLKey.generate(type, in: openssl)
        try openssl.write("file", message)
        let result = try openssl.run(["dgst", "-sha256", "-sign", "key.pem"] + options + ["-out", "sig.der", "file"])
        #expect(result.status == 0, "\(result.output)")
        let signature = try openssl.read("sig.der")
        #expect(verify(SecKeyCopyPublicKey(key)!, algorithm, message, signature).value == true)
        #expect(verify(SecKeyCopyPublicKey(key)!, algorithm, message + Data([0]), signature).status == Int(errSecVerifyFailed))
    }

    @Test("Keys generated by openssl load with SecKeyCreateWithData in Apple's format", arguments: ["EC", "RSA"])
    func openSSLKeysLoad(_ type: String) throws {
        let openssl = try OpenSSL()
        defer { openssl.remove() }
        let key = try OpenSSLKey.generate(type, in: openssl)
        // openssl's own public key, as SPKI DER, is the public key of the loaded private key.
        let result = try openssl.run(["pkey", "-in", "key.pem", "-pubout", "-outform", "DER", "-out", "pub.der"])
        #expect(result.status == 0, "\(result.output)")
        let spki = try openssl.read("pub.der")
        let expected = type == "EC" ? try P256.Signing.PublicKey(derRepresentation: spki).x963Representation
                                    : try _RSA.Signing.PublicKey(derRepresentation: spki).pkcs1DERRepresentation
        #expect(externalRepresentation(SecKeyCopyPublicKey(key)!) == expected)
        #expect(SecKeyGetBlockSize(key) == (type == "EC" ? 32 : 256))
    }

    @Test("ECDH agrees with openssl pkeyutl -derive")
    func ecdhAgrees() throws {
        let openssl = try OpenSSL()
        defer { openssl.remove() }
        let theirs = try OpenSSLKey.generate("EC", in: openssl)
        try openssl.write("peer.pem", spkiPEM(KeySpec.p256.publicKey))
        let result = try openssl.run(["pkeyutl", "-derive", "-inkey", "key.pem", "-peerkey", "peer.pem", "-out", "secret.bin"])
        #expect(result.status == 0, "\(result.output)")
        let secret = try openssl.read("secret.bin")
        #expect(exchange(KeySpec.p256.privateKey, .ecdhKeyExchangeStandard, SecKeyCopyPublicKey(theirs)!).value == secret)
        #expect(exchange(KeySpec.p256.privateKey, .ecdhKeyExchangeCofactor, SecKeyCopyPublicKey(theirs)!).value == secret)
    }
}

/// Keys made by openssl and loaded into Keystone.
enum OpenSSLKey {
    /// Generates `key.pem` with openssl (`ecparam -genkey` for EC P-256, `genpkey -algorithm RSA` for RSA 2048) and
    /// loads it with SecKeyCreateWithData after conversion to Apple's format (EC: 04 ‖ X ‖ Y ‖ K through swift-crypto;
    /// RSA: openssl's own PKCS#1 `RSAPrivateKey` DER).
    static func generate(_ type: String, in openssl: OpenSSL) throws -> SecKey {
        if type == "EC" {
            let result = try openssl.run(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "key.pem"])
            try #require(result.status == 0, "\(result.output)")
            let pem = String(decoding: try openssl.read("key.pem"), as: UTF8.self)
            let apple = try P256.Signing.PrivateKey(pemRepresentation: pem).x963Representation
            return try #require(createKey(apple, type: kSecAttrKeyTypeECSECPrimeRandom, keyClass: kSecAttrKeyClassPrivate).value)
        }
        var result = try openssl.run(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "key.pem"])
        try #require(result.status == 0, "\(result.output)")
        result = try openssl.run(["rsa", "-in", "key.pem", "-traditional", "-outform", "DER", "-out", "key.der"])
        try #require(result.status == 0, "\(result.output)")
        return try #require(createKey(try openssl.read("key.der"), type: kSecAttrKeyTypeRSA, keyClass: kSecAttrKeyClassPrivate).value)
    }
}

/// A ciphertext made by Apple's `SecKeyCreateEncryptedData` on an Apple device.
struct ECIESVector: Sendable, CustomTestStringConvertible {
    let name: String
    let algorithm: SecKeyAlgorithm
    let key: String         // SEC1 `ECPrivateKey` DER, base64
    let ciphertext: String  // base64; the plaintext is `name` in UTF-8
    var testDescription: String { "\(name) \(algorithm.rawValue)" }

    // From github.com/jedda/ECIES, ecies_test.go, TestExternalDecryptSuccess (MIT licence): "These ciphertexts have
    // been created with SecKeyAlgorithms using Swift", keys made with `openssl ecparam -genkey -noout`; each plaintext
    // is the vector's name. (Its SHA-224 vectors are left out: swift-crypto has no SHA-224.)
    static let all: [ECIESVector] = [
        ECIESVector(name: "P256-SHA256-VIV", algorithm: .eciesEncryptionCofactorVariableIVX963SHA256AESGCM,
                    key: "MHcCAQEEIHGhxnpu3kG/nW5ozDZJ+TTFQvL6MynCcQWD6jHV4p0UoAoGCCqGSM49AwEHoUQDQgAEzgFYw3Rqc72IIYHV7JH6M245n/nLnxyre1A7sc5nOt31ZyfJQLXGs4dY0cggne28ueXHID5lKz1JNChY49NHYg==",
                    ciphertext: "BI6sBCGyf916GQSV3DHOvmFxOmzbV9pq08wcOdKaepP2/Qtepj9M71dYkzXf6OqIstDyyVIxfnAMfUpxZzoCHDbalYRzzwhqHwg7K6RNl1F29PVdLNtJH498yJSfloW/"),
        ECIESVector(name: "P384-SHA384-VIV", algorithm: .eciesEncryptionCofactorVariableIVX963SHA384AESGCM,
                    key: "MIGkAgEBBDC5Lt6wBRiiEC2O71i3lv8Jtgg+YP4Y3gCj7B7nOtdQO/5PQPRjpFPJ3ft0yjbzHEagBwYFK4EEACKhZANiAAToVnztZKN1KVhot+MoN3CiPDZ0PoCDXrdP1uHQ61nz4XVrNdxgxyNUJC6cd0gsbujme66wxrq28zqWYBKvrFtIlS4W+NkuyCi5nABkHno7alAWv/fD7aQ8A3ZmWZohsaU=",
                    ciphertext: "BM45TREbxELfwpTVBmltz+sB3vhkM85m/yiAsE8JSNmXVOeeUGzmxP5Z2jegApPxtOS8ilfhTN/m2XkOoJWGw3MKuekq5V5PcdvAi5xKcoOEynkS7uAKS3nhBH/+g+9/iNoTcRSrEpbgm8dOCGe+VRQ7hK8vI0ZRw74kernlNDw="),
        ECIESVector(name: "P384-SHA384-0IV", algorithm: .eciesEncryptionCofactorX963SHA384AESGCM,
                    key: "MIGkAgEBBDCveSReIMZa6hbWVgmESfu/jMpEqIldBHcx4nQ46zxJ+hvm4lnesKrn0P0BkFYZ0jSgBwYFK4EEACKhZANiAAT0ctzSPeNUinYOJdYtCafXAsTKHLGY4WPPRM8pYL5x1UrvnPN0G1yiF4QsTX2Pgyvh2qositdwRGxv3ruo1yR8TcztRXugZF4a5xmcZuQW8hcEmPuk+xS5XXUMzryiEQc=",
                    ciphertext: "BERkPl0YZUa9r7JV4W6n/rxsGBpzwdCpIgRaOKxRYuLHx3v5hGnTM1oGOEZzJQnpfvtperUyFfnPB5GP5ioxK4YkrqfjIlF0ip18v30o7TWReJ+MrKYWcC7/TGe/SxPagi/zX9uz4N0Jzp3GFarI5LUQ9mJNIna/3ajuBC9Du94="),
        ECIESVector(name: "P521-SHA512-0IV", algorithm: .eciesEncryptionCofactorX963SHA512AESGCM,
                    key: "MIHcAgEBBEIAqKpwdZ9JdC3JdVpM7gj1Bgkep3LNTkYWqEYqwNe5w7oyzDh1yU0LVZzefyZNdaagU6DGNdZ+5u9cHqnh9GrQ5gWgBwYFK4EEACOhgYkDgYYABAD+MDxfbvbe9ZRZcZgWyDBbpf3JxHii0iScjxNqNWClJWlehHfX8niGE6VNktRQ3lMIwDSvUy3Esiex3gu8RHZnwAGzPjwLm1/w2YbOfp2TCNTL8m6eYUfLU0SNW7B61koL+Sk50yTHoseP7+lmM2t8x6uKsyLdo+XCIevpW8IEh0s5wg==",
                    ciphertext: "BABqJoMa89aD0rRkZ+WrmWTeqUfcr3uvLmyk7KlbWPm45m0ptDeqsaxFtqeM0VR6IoBMQcvcCcW+hzlLPr7i15LJlADzKYe7al7Vp10fJBnnhM2K7Z12o/VtOynEEt+ed5IkP9BiopN/3swl79caHQqXxX+SWQijwosMh0rGFJZPjsPFcPpe8Aj9CiJ3y0hRH1D4fp+qtpx9LOBLyuXvRwdFi0Y="),
        ECIESVector(name: "P521-SHA512-VIV", algorithm: .eciesEncryptionCofactorVariableIVX963SHA512AESGCM,
                    key: "MIHcAgEBBEIAg0dkiDMo6frSBz50hC2luT3T0oMv/nPnu4nUR+x9PWuGic4cBHkrlrUOwyTBfGmug8fYxNy2ytJhBEyCGookSK+gBwYFK4EEACOhgYkDgYYABACAYs51q+pIrE2k92p2ltjs0iBHTe8Kj+w1+x5hfmXS1tX0aR+kabb5qe6Q83Bsvq/dmj3R59XWmIaTz6tJprSr2gDqS2i9wpWspmDND2dYvhKECXj099CQt19V94qYyUjbXMEDkpvq5ZWQ2DBOnR3XnuwWOYj+Pskg0lseKkok4CtJ4A==",
                    ciphertext: "BABIki+hjR7WmHUZz03yTelbH+eEwn0Dtpv8Fxwh7cyaue2ZceAytjlbQD2YA3FHC2Z0NMlk/B0C2Es8dZmPE9keEgBsUW0PjT4CyefgFIc2YEm5yDpcbJEKhj6FlGnOir1nJz8ZMTMdiY6vIrRCBLo6+Ek7iSfQIOGrdER3ESnE/gOdWsd4O3VmDQrwLboTIjKfngmBGlC5sdYUzSbQlsX2UUs="),
    ]

    /// The private key in Apple's external representation (04 ‖ X ‖ Y ‖ K), converted from SEC1 with swift-crypto.
    func appleKey() throws -> Data {
        let der = try #require(Data(base64Encoded: key))
        if let key = try? P256.KeyAgreement.PrivateKey(derRepresentation: der) { return key.x963Representation }
        if let key = try? P384.KeyAgreement.PrivateKey(derRepresentation: der) { return key.x963Representation }
        return try P521.KeyAgreement.PrivateKey(derRepresentation: der).x963Representation
    }
}

@Suite("SecKey ECIES compatibility with Apple devices")
struct SecKeyECIESVectorTests {
    @Test("Ciphertexts made by Apple's SecKeyCreateEncryptedData decrypt to their plaintext", arguments: ECIESVector.all)
    func appleCiphertextsDecrypt(_ vector: ECIESVector) throws {
        let key = try #require(createKey(try vector.appleKey(), type: kSecAttrKeyTypeECSECPrimeRandom, keyClass: kSecAttrKeyClassPrivate).value)
        let ciphertext = try #require(Data(base64Encoded: vector.ciphertext))
        let plaintext = decrypt(key, vector.algorithm, ciphertext)
        #expect(plaintext.error == nil)
        #expect(plaintext.value == Data(vector.name.utf8))
        // The same key with the other IV mode fails authentication.
        let other: SecKeyAlgorithm = vector.name.hasSuffix("VIV") ? .eciesEncryptionCofactorX963SHA256AESGCM
                                                                  : .eciesEncryptionCofactorVariableIVX963SHA256AESGCM
        #expect(decrypt(key, other, ciphertext).status == Int(errSecParam))
    }
}
#endif
