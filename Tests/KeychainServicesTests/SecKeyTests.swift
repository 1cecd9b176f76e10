// Linux-only: SecKey as KeychainServices declares it on Linux (on Apple platforms it is Security's).
#if !canImport(Darwin)
import Crypto
import CryptoExtras
import Foundation
import KeychainServices
import Testing

// SecKey tests that touch no keychain: keys live in memory, so these suites run in parallel with everything else.

/// The key types the tests create, one key each (made once: RSA generation is slow).
enum KeySpec: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case p256 = "EC P-256", p384 = "EC P-384", p521 = "EC P-521", rsa2048 = "RSA 2048"

    var testDescription: String { rawValue }
    var isEC: Bool { self != .rsa2048 }
    var bits: Int {
        switch self {
        case .p256: 256
        case .p384: 384
        case .p521: 521
        case .rsa2048: 2048
        }
    }
    var parameters: [String: Any] {
        [kSecAttrKeyType as String: isEC ? kSecAttrKeyTypeECSECPrimeRandom : kSecAttrKeyTypeRSA,
         kSecAttrKeySizeInBits as String: bits]
    }

    /// The private key of this type, shared by the tests.
    var privateKey: SecKey { KeySpec.keys[self]! }
    var publicKey: SecKey { SecKeyCopyPublicKey(privateKey)! }

    static let keys: [KeySpec: SecKey] = Dictionary(uniqueKeysWithValues: allCases.map { spec in
        var error: Unmanaged<CFError>?
        return (spec, SecKeyCreateRandomKey(spec.parameters as CFDictionary, &error)!)
    })
}

/// A call's result and its CFError, as Apple-style code reads them.
struct SecKeyCall<T> {
    let value: T?
    let error: NSError?
    var status: Int? { error?.code }
}

func call<T>(_ body: (UnsafeMutablePointer<Unmanaged<CFError>?>) -> T?) -> SecKeyCall<T> {
    var error: Unmanaged<CFError>?
    let value = body(&error)
    return SecKeyCall(value: value, error: error?.takeRetainedValue())
}

func sign(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ data: Data) -> SecKeyCall<Data> {
    call { SecKeyCreateSignature(key, algorithm, data as CFData, $0).map { Data(referencing: $0) } }
}

func verify(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ data: Data, _ signature: Data) -> SecKeyCall<Bool> {
    call { SecKeyVerifySignature(key, algorithm, data as CFData, signature as CFData, $0) ? true : nil }
}

func encrypt(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ data: Data) -> SecKeyCall<Data> {
    call { SecKeyCreateEncryptedData(key, algorithm, data as CFData, $0).map { Data(referencing: $0) } }
}

func decrypt(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ data: Data) -> SecKeyCall<Data> {
    call { SecKeyCreateDecryptedData(key, algorithm, data as CFData, $0).map { Data(referencing: $0) } }
}

func exchange(_ mine: SecKey, _ algorithm: SecKeyAlgorithm, _ theirs: SecKey, _ parameters: [String: Any] = [:]) -> SecKeyCall<Data> {
    call { SecKeyCopyKeyExchangeResult(mine, algorithm, theirs, parameters as CFDictionary, $0).map { Data(referencing: $0) } }
}

func externalRepresentation(_ key: SecKey) -> Data {
    var error: Unmanaged<CFError>?
    return Data(referencing: SecKeyCopyExternalRepresentation(key, &error)!)
}

func createKey(_ data: Data, type: CFString, keyClass: CFString) -> SecKeyCall<SecKey> {
    call { SecKeyCreateWithData(data as CFData, [kSecAttrKeyType as String: type, kSecAttrKeyClass as String: keyClass] as CFDictionary, $0) }
}

/// The digest a `…Digest…` algorithm expects for `message`.
func digest(_ message: Data, _ hash: String) -> Data {
    switch hash {
    case "SHA1": Data(Insecure.SHA1.hash(data: message))
    case "SHA256": Data(SHA256.hash(data: message))
    case "SHA384": Data(SHA384.hash(data: message))
    case "SHA512": Data(SHA512.hash(data: message))
    default: Data(repeating: 0xA5, count: 28)  // SHA-224's size: any bytes are a digest to sign
    }
}

/// A signature algorithm and whether its input is a digest (of which hash) or the message.
struct SignatureCase: Sendable, CustomTestStringConvertible {
    let spec: KeySpec
    let algorithm: SecKeyAlgorithm
    let digestHash: String?  // nil: message form
    var testDescription: String { "\(spec.rawValue) \(algorithm.rawValue)" }

    func input(_ message: Data) -> Data { digestHash.map { digest(message, $0) } ?? message }

    static let all: [SignatureCase] = {
        var cases: [SignatureCase] = []
        for spec in KeySpec.allCases where spec.isEC {
            for (algorithm, hash) in [(SecKeyAlgorithm.ecdsaSignatureMessageX962SHA1, nil), (.ecdsaSignatureMessageX962SHA256, nil),
                                      (.ecdsaSignatureMessageX962SHA384, nil), (.ecdsaSignatureMessageX962SHA512, nil),
                                      (.ecdsaSignatureDigestX962SHA1, "SHA1"), (.ecdsaSignatureDigestX962SHA224, "SHA224"),
                                      (.ecdsaSignatureDigestX962SHA256, "SHA256"), (.ecdsaSignatureDigestX962SHA384, "SHA384"),
                                      (.ecdsaSignatureDigestX962SHA512, "SHA512"), (.ecdsaSignatureDigestX962, "SHA256"),
                                      (.ecdsaSignatureRFC4754, "SHA256")] as [(SecKeyAlgorithm, String?)] {
                cases.append(SignatureCase(spec: spec, algorithm: algorithm, digestHash: hash))
            }
        }
        for (algorithm, hash) in [(SecKeyAlgorithm.rsaSignatureMessagePKCS1v15SHA1, nil), (.rsaSignatureMessagePKCS1v15SHA256, nil),
                                  (.rsaSignatureMessagePKCS1v15SHA384, nil), (.rsaSignatureMessagePKCS1v15SHA512, nil),
                                  (.rsaSignatureDigestPKCS1v15SHA1, "SHA1"), (.rsaSignatureDigestPKCS1v15SHA256, "SHA256"),
                                  (.rsaSignatureDigestPKCS1v15SHA384, "SHA384"), (.rsaSignatureDigestPKCS1v15SHA512, "SHA512"),
                                  (.rsaSignatureMessagePSSSHA1, nil), (.rsaSignatureMessagePSSSHA256, nil),
                                  (.rsaSignatureMessagePSSSHA384, nil), (.rsaSignatureMessagePSSSHA512, nil),
                                  (.rsaSignatureDigestPSSSHA1, "SHA1"), (.rsaSignatureDigestPSSSHA256, "SHA256"),
                                  (.rsaSignatureDigestPSSSHA384, "SHA384"), (.rsaSignatureDigestPSSSHA512, "SHA512")] as [(SecKeyAlgorithm, String?)] {
            cases.append(SignatureCase(spec: .rsa2048, algorithm: algorithm, digestHash: hash))
        }
        return cases
    }()
}

@Suite("SecKey signatures")
struct SecKeySignatureTests {
    let message = Data("The quick brown fox jumps over the lazy dog".utf8)

    @Test("Every signature algorithm signs with the private key and verifies with the public key", arguments: SignatureCase.all)
    func roundTrip(_ test: SignatureCase) throws {
        let input = test.input(message)
        #expect(SecKeyIsAlgorithmSupported(test.spec.privateKey, .sign, test.algorithm))
        #expect(SecKeyIsAlgorithmSupported(test.spec.publicKey, .verify, test.algorithm))
        let signature = try #require(sign(test.spec.privateKey, test.algorithm, input).value)
        #expect(verify(test.spec.publicKey, test.algorithm, input, signature).value == true)

        var tampered = signature
        tampered[tampered.count / 2] ^= 0x01
        let bad = verify(test.spec.publicKey, test.algorithm, input, tampered)
        #expect(bad.value == nil)
        #expect(bad.error?.domain == NSOSStatusErrorDomain)
        #expect(bad.status == Int(errSecVerifyFailed))
    }

    @Test("A digest-form signature verifies with the message form of the same hash, and the other way round", arguments: [
        (KeySpec.p256, SecKeyAlgorithm.ecdsaSignatureDigestX962SHA256, SecKeyAlgorithm.ecdsaSignatureMessageX962SHA256, "SHA256"),
        (KeySpec.p384, .ecdsaSignatureDigestX962SHA384, .ecdsaSignatureMessageX962SHA384, "SHA384"),
        (KeySpec.p521, .ecdsaSignatureDigestX962SHA512, .ecdsaSignatureMessageX962SHA512, "SHA512"),
        (KeySpec.rsa2048, .rsaSignatureDigestPKCS1v15SHA256, .rsaSignatureMessagePKCS1v15SHA256, "SHA256"),
        (KeySpec.rsa2048, .rsaSignatureDigestPSSSHA512, .rsaSignatureMessagePSSSHA512, "SHA512"),
    ])
    func digestAndMessageForms(_ spec: KeySpec, _ digestForm: SecKeyAlgorithm, _ messageForm: SecKeyAlgorithm, _ hash: String) throws {
        let fromDigest = try #require(sign(spec.privateKey, digestForm, digest(message, hash)).value)
        #expect(verify(spec.publicKey, messageForm, message, fromDigest).value == true)
        let fromMessage = try #require(sign(spec.privateKey, messageForm, message).value)
        #expect(verify(spec.publicKey, digestForm, digest(message, hash), fromMessage).value == true)
    }

    @Test("A digest of the wrong size fails with errSecParam", arguments: [
        (KeySpec.p256, SecKeyAlgorithm.ecdsaSignatureDigestX962SHA256), (.rsa2048, .rsaSignatureDigestPKCS1v15SHA256),
        (.rsa2048, .rsaSignatureDigestPSSSHA256),
    ])
    func wrongDigestSize(_ spec: KeySpec, _ algorithm: SecKeyAlgorithm) {
        let result = sign(spec.privateKey, algorithm, Data(repeating: 1, count: 31))
        #expect(result.value == nil)
        #expect(result.status == Int(errSecParam))
    }

    @Test("ECDSA X9.62 signatures are DER, RFC 4754 signatures are r ‖ s")
    func signatureFormats() throws {
        let der = try #require(sign(KeySpec.p256.privateKey, .ecdsaSignatureMessageX962SHA256, message).value)
        #expect(der.first == 0x30)
        #expect((try? P256.Signing.ECDSASignature(derRepresentation: der)) != nil)
        let raw = try #require(sign(KeySpec.p256.privateKey, .ecdsaSignatureRFC4754, digest(message, "SHA256")).value)
        #expect(raw.count == 64)
    }
}

/// An encryption algorithm for a key type.
struct EncryptionCase: Sendable, CustomTestStringConvertible {
    let spec: KeySpec
    let algorithm: SecKeyAlgorithm
    var testDescription: String { "\(spec.rawValue) \(algorithm.rawValue)" }

    static let all: [EncryptionCase] = {
        var cases = [SecKeyAlgorithm.rsaEncryptionPKCS1, .rsaEncryptionOAEPSHA1, .rsaEncryptionOAEPSHA256].map {
            EncryptionCase(spec: .rsa2048, algorithm: $0)
        }
        let ecies: [SecKeyAlgorithm] = [
            .eciesEncryptionStandardVariableIVX963SHA256AESGCM, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM,
            .eciesEncryptionStandardVariableIVX963SHA384AESGCM, .eciesEncryptionCofactorVariableIVX963SHA512AESGCM,
            .eciesEncryptionStandardX963SHA1AESGCM, .eciesEncryptionStandardX963SHA256AESGCM,
            .eciesEncryptionCofactorX963SHA256AESGCM, .eciesEncryptionCofactorX963SHA512AESGCM,
        ]
        for spec in KeySpec.allCases where spec.isEC {
            cases += ecies.map { EncryptionCase(spec: spec, algorithm: $0) }
        }
        return cases
    }()
}

@Suite("SecKey encryption and key exchange")
struct SecKeyEncryptionTests {
    let plaintext = Data("attack at dawn, bring the keys".utf8)

    @Test("Every encryption algorithm encrypts with the public key and decrypts with the private key", arguments: EncryptionCase.all)
    func roundTrip(_ test: EncryptionCase) throws {
        #expect(SecKeyIsAlgorithmSupported(test.spec.publicKey, .encrypt, test.algorithm))
        #expect(SecKeyIsAlgorithmSupported(test.spec.privateKey, .decrypt, test.algorithm))
        let ciphertext = try #require(encrypt(test.spec.publicKey, test.algorithm, plaintext).value)
        #expect(ciphertext != plaintext)
        #expect(decrypt(test.spec.privateKey, test.algorithm, ciphertext).value == plaintext)
        #expect(decrypt(test.spec.privateKey, test.algorithm, Data()).status == Int(errSecParam))
    }

    @Test("ECIES output is ephemeral public key ‖ ciphertext ‖ 16-byte tag, and tampering fails with errSecParam",
          arguments: [KeySpec.p256, .p384, .p521])
    func eciesLayout(_ spec: KeySpec) throws {
        let algorithm = SecKeyAlgorithm.eciesEncryptionCofactorVariableIVX963SHA256AESGCM
        let ciphertext = try #require(encrypt(spec.publicKey, algorithm, plaintext).value)
        let pointSize = 1 + 2 * SecKeyGetBlockSize(spec.publicKey)
        #expect(ciphertext.count == pointSize + plaintext.count + 16)
        #expect(ciphertext.first == 0x04)
        for index in [pointSize + 1, ciphertext.count - 1, 5] {
            var tampered = ciphertext
            tampered[index] ^= 0x80
            let result = decrypt(spec.privateKey, algorithm, tampered)
            #expect(result.value == nil)
            #expect(result.status == Int(errSecParam))
        }
    }

    @Test("RSA encryption of too much data fails with errSecParam", arguments: [
        SecKeyAlgorithm.rsaEncryptionPKCS1, .rsaEncryptionOAEPSHA1, .rsaEncryptionOAEPSHA256,
    ])
    func rsaTooLong(_ algorithm: SecKeyAlgorithm) {
        let result = encrypt(KeySpec.rsa2048.publicKey, algorithm, Data(repeating: 7, count: 256))
        #expect(result.value == nil)
        #expect(result.status == Int(errSecParam))
    }

    @Test("ECDH gives both parties the same result, raw and through the X9.63 KDF", arguments: [
        SecKeyAlgorithm.ecdhKeyExchangeStandard, .ecdhKeyExchangeCofactor, .ecdhKeyExchangeStandardX963SHA1,
        .ecdhKeyExchangeStandardX963SHA256, .ecdhKeyExchangeCofactorX963SHA256, .ecdhKeyExchangeStandardX963SHA384,
        .ecdhKeyExchangeCofactorX963SHA512,
    ])
    func keyExchange(_ algorithm: SecKeyAlgorithm) throws {
        var error: Unmanaged<CFError>?
        let other = try #require(SecKeyCreateRandomKey(KeySpec.p256.parameters as CFDictionary, &error))
        let parameters: [String: Any] = [SecKeyKeyExchangeParameter.requestedSize.rawValue: 48,
                                         SecKeyKeyExchangeParameter.sharedInfo.rawValue: Data("info".utf8)]
        let mine = try #require(exchange(KeySpec.p256.privateKey, algorithm, SecKeyCopyPublicKey(other)!, parameters).value)
        let theirs = try #require(exchange(other, algorithm, KeySpec.p256.publicKey, parameters).value)
        #expect(mine == theirs)
        let isRaw = algorithm == .ecdhKeyExchangeStandard || algorithm == .ecdhKeyExchangeCofactor
        #expect(mine.count == (isRaw ? 32 : 48))
    }

    @Test("The X9.63 KDF result is swift-crypto's X9.63 KDF of the raw secret with the shared info")
    func keyExchangeKDF() throws {
        var error: Unmanaged<CFError>?
        let other = try #require(SecKeyCreateRandomKey(KeySpec.p256.parameters as CFDictionary, &error))
        let raw = try #require(exchange(KeySpec.p256.privateKey, .ecdhKeyExchangeStandard, SecKeyCopyPublicKey(other)!).value)
        let info = Data("shared".utf8)
        let derived = try #require(exchange(KeySpec.p256.privateKey, .ecdhKeyExchangeStandardX963SHA256, SecKeyCopyPublicKey(other)!,
                                            [kSecKeyKeyExchangeParameterRequestedSize as String: 40,
                                             kSecKeyKeyExchangeParameterSharedInfo as String: info]).value)
        // X9.63: SHA-256(Z ‖ counter ‖ info) for counters 1, 2, … (computed here with swift-crypto's SHA-256).
        var expected = Data()
        for counter: UInt8 in 1...2 {
            var block = raw
            block.append(contentsOf: [0, 0, 0, counter])
            block.append(info)
            expected.append(contentsOf: SHA256.hash(data: block))
        }
        #expect(derived == expected.prefix(40))
    }

    @Test("An X9.63 key exchange without requestedSize fails with errSecParam")
    func keyExchangeWithoutSize() {
        let result = exchange(KeySpec.p256.privateKey, .ecdhKeyExchangeStandardX963SHA256, KeySpec.p384.publicKey)
        #expect(result.value == nil)
        #expect(result.status == Int(errSecParam))
        let sameCurve = exchange(KeySpec.p256.privateKey, .ecdhKeyExchangeStandardX963SHA256, KeySpec.p256.publicKey)
        #expect(sameCurve.status == Int(errSecParam))
    }
}

@Suite("SecKey wrong algorithms")
struct SecKeyWrongAlgorithmTests {
    @Test("An algorithm the key cannot perform gives nil and errSecParam, 'algorithm not supported by the key'", arguments: [
        (KeySpec.p256, SecKeyAlgorithm.rsaSignatureMessagePKCS1v15SHA256, SecKeyOperationType.sign),
        (KeySpec.rsa2048, .ecdsaSignatureMessageX962SHA256, .sign),
        (KeySpec.p256, .rsaEncryptionOAEPSHA256, .encrypt),
        (KeySpec.rsa2048, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM, .encrypt),
        (KeySpec.rsa2048, .ecdhKeyExchangeStandard, .keyExchange),
        (KeySpec.p256, .ecdsaSignatureMessageX962SHA224, .sign),   // SHA-224 is not available (swift-crypto)
        (KeySpec.rsa2048, .rsaEncryptionOAEPSHA512, .encrypt),     // OAEP is SHA-1 and SHA-256 only
        (KeySpec.p256, SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:message-X962:SHA999"), .sign),
    ])
    func wrongAlgorithm(_ spec: KeySpec, _ algorithm: SecKeyAlgorithm, _ operation: SecKeyOperationType) {
        let key = operation == .encrypt ? spec.publicKey : spec.privateKey
        #expect(!SecKeyIsAlgorithmSupported(key, operation, algorithm))
        let data = Data(repeating: 3, count: 32)
        let result: SecKeyCall<Data> = switch operation {
        case .sign: sign(key, algorithm, data)
        case .encrypt: encrypt(key, algorithm, data)
        default: exchange(key, algorithm, spec.publicKey)
        }
        #expect(result.value == nil)
        #expect(result.error?.domain == NSOSStatusErrorDomain)
        #expect(result.status == Int(errSecParam))
        #expect((result.error?.userInfo["NSDescription"] as? String)?.contains("algorithm not supported by the key") == true)
    }

    @Test("Private keys do not verify or encrypt, public keys do not sign or decrypt", arguments: KeySpec.allCases)
    func wrongKeyClass(_ spec: KeySpec) {
        let signing: SecKeyAlgorithm = spec.isEC ? .ecdsaSignatureMessageX962SHA256 : .rsaSignatureMessagePSSSHA256
        let encryption: SecKeyAlgorithm = spec.isEC ? .eciesEncryptionCofactorVariableIVX963SHA256AESGCM : .rsaEncryptionOAEPSHA256
        #expect(!SecKeyIsAlgorithmSupported(spec.publicKey, .sign, signing))
        #expect(!SecKeyIsAlgorithmSupported(spec.privateKey, .verify, signing))
        #expect(!SecKeyIsAlgorithmSupported(spec.privateKey, .encrypt, encryption))
        #expect(!SecKeyIsAlgorithmSupported(spec.publicKey, .decrypt, encryption))
        #expect(sign(spec.publicKey, signing, Data([1])).status == Int(errSecParam))
        #expect(decrypt(spec.publicKey, encryption, Data([1])).status == Int(errSecParam))
    }
}

@Suite("SecKey creation, attributes and external representation")
struct SecKeyRepresentationTests {
    @Test("External representations are Apple's formats and round-trip through SecKeyCreateWithData", arguments: KeySpec.allCases)
    func externalRepresentationRoundTrip(_ spec: KeySpec) throws {
        let privateData = externalRepresentation(spec.privateKey)
        let publicData = externalRepresentation(spec.publicKey)
        let type = spec.isEC ? kSecAttrKeyTypeECSECPrimeRandom : kSecAttrKeyTypeRSA
        if spec.isEC {
            let size = (spec.bits + 7) / 8
            #expect(publicData.count == 1 + 2 * size)
            #expect(privateData.count == 1 + 3 * size)
            #expect(publicData.first == 0x04)
            #expect(privateData.prefix(publicData.count) == publicData)
        } else {
            #expect((try? _RSAPublicKeyCheck(publicData)) == 2048)
            #expect(privateData.first == 0x30)
        }
        let privateKey = try #require(createKey(privateData, type: type, keyClass: kSecAttrKeyClassPrivate).value)
        let publicKey = try #require(createKey(publicData, type: type, keyClass: kSecAttrKeyClassPublic).value)
        #expect(externalRepresentation(privateKey) == privateData)
        #expect(externalRepresentation(publicKey) == publicData)
        #expect(privateKey == spec.privateKey)
        #expect(SecKeyCopyPublicKey(privateKey) == publicKey)
    }

    @Test("Attributes are Apple's: class, type, sizes, klbl = SHA-1 of the public key, usage flags", arguments: KeySpec.allCases)
    func attributes(_ spec: KeySpec) throws {
        let privateAttributes = try #require(SecKeyCopyAttributes(spec.privateKey) as? [String: Any])
        let publicAttributes = try #require(SecKeyCopyAttributes(spec.publicKey) as? [String: Any])
        #expect(privateAttributes[kSecAttrKeyClass as String] as? String == kSecAttrKeyClassPrivate as String)
        #expect(publicAttributes[kSecAttrKeyClass as String] as? String == kSecAttrKeyClassPublic as String)
        #expect(privateAttributes[kSecAttrKeyType as String] as? String == (spec.isEC ? "73" : "42"))
        #expect(privateAttributes[kSecAttrKeySizeInBits as String] as? Int == spec.bits)
        #expect(privateAttributes[kSecAttrEffectiveKeySize as String] as? Int == spec.bits)
        let label = Data(Insecure.SHA1.hash(data: externalRepresentation(spec.publicKey)))
        #expect(privateAttributes[kSecAttrApplicationLabel as String] as? Data == label)
        #expect(publicAttributes[kSecAttrApplicationLabel as String] as? Data == label)
        #expect(privateAttributes[kSecAttrCanSign as String] as? Bool == true)
        #expect(privateAttributes[kSecAttrCanVerify as String] as? Bool == false)
        #expect(privateAttributes[kSecAttrCanDecrypt as String] as? Bool == true)
        #expect(publicAttributes[kSecAttrCanVerify as String] as? Bool == true)
        #expect(publicAttributes[kSecAttrCanEncrypt as String] as? Bool == true)
        #expect(publicAttributes[kSecValueData as String] as? Data == externalRepresentation(spec.publicKey))
    }

    @Test("Block sizes are the field size for EC and the modulus size for RSA", arguments: KeySpec.allCases)
    func blockSize(_ spec: KeySpec) {
        let expected = spec.isEC ? (spec.bits + 7) / 8 : 256
        #expect(SecKeyGetBlockSize(spec.privateKey) == expected)
        #expect(SecKeyGetBlockSize(spec.publicKey) == expected)
    }

    @Test("Key type and size may be given as strings or numbers; tag, label and permanence come from kSecPrivateKeyAttrs")
    func creationParameters() throws {
        var error: Unmanaged<CFError>?
        let tag = Data("com.example.key".utf8)
        let parameters: [String: Any] = [
            kSecAttrKeyType as String: 73, kSecAttrKeySizeInBits as String: "384",
            kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: tag,
                                            kSecAttrLabel as String: "My key"] as [String: Any],
        ]
        let key = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
        #expect(SecKeyGetBlockSize(key) == 48)
        let attributes = try #require(SecKeyCopyAttributes(key) as? [String: Any])
        #expect(attributes[kSecAttrApplicationTag as String] as? Data == tag)
        #expect(attributes[kSecAttrLabel as String] as? String == "My key")
        #expect(attributes[kSecAttrIsPermanent as String] as? Bool == true)

        // Keystone's own: what a keychain stores, and the key built back from it.
        let stored = key.keychainAttributes
        #expect(stored[kSecAttrKeyClass as String] as? String == "1")
        #expect(stored[kSecAttrKeyType as String] as? String == "73")
        #expect(stored[kSecAttrKeySizeInBits as String] as? Int == 384)
        #expect(stored[kSecAttrApplicationTag as String] as? Data == tag)
        #expect(stored[kSecAttrIsPermanent as String] as? Bool == true)
        let rebuilt = try SecKey.make(attributes: stored, data: key.keyData)
        #expect(rebuilt == key)
        #expect(rebuilt.keychainAttributes[kSecAttrApplicationLabel as String] as? Data
                == stored[kSecAttrApplicationLabel as String] as? Data)
    }

    @Test("Unsupported key types and sizes fail with errSecParam", arguments: [
        [kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: 192],
        [kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits as String: 512],
        [kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits as String: 2050],
        [kSecAttrKeyType as String: kSecAttrKeyTypeAES, kSecAttrKeySizeInBits as String: 256],
        [kSecAttrKeySizeInBits as String: 256],
    ] as [[String: any Sendable]])
    func unsupportedParameters(_ parameters: [String: any Sendable]) {
        var dictionary: [String: Any] = [:]
        for (name, value) in parameters { dictionary[name] = value }
        let result = call { SecKeyCreateRandomKey(dictionary as CFDictionary, $0) }
        #expect(result.value == nil)
        #expect(result.status == Int(errSecParam))
    }

    @Test("Corrupt external representations fail with errSecParam and never crash", arguments: CorruptCase.all)
    func corrupt(_ test: CorruptCase) {
        let result = createKey(test.data(), type: test.type, keyClass: test.keyClass)
        #expect(result.value == nil)
        #expect(result.error?.domain == NSOSStatusErrorDomain)
        #expect(result.status == Int(errSecParam))
    }

    @Test("Apple-style code compiles and runs unchanged")
    func appleStyle() throws {
        let attributes: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
            kSecAttrKeySizeInBits as String: 256,
            kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent as String: false],
        ]
        var error: Unmanaged<CFError>?
        guard let privateKey = SecKeyCreateRandomKey(attributes as CFDictionary, &error) else {
            throw error!.takeRetainedValue() as any Error
        }
        let publicKey = try #require(SecKeyCopyPublicKey(privateKey))
        let algorithm: SecKeyAlgorithm = .ecdsaSignatureMessageX962SHA256
        guard SecKeyIsAlgorithmSupported(privateKey, .sign, algorithm) else { Issue.record("not supported"); return }
        let data = "hello".data(using: .utf8)!
        guard let signature = SecKeyCreateSignature(privateKey, algorithm, data as CFData, &error) as Data? else {
            throw error!.takeRetainedValue() as any Error
        }
        #expect(SecKeyVerifySignature(publicKey, algorithm, data as CFData, signature as CFData, &error))
        let exported = SecKeyCopyExternalRepresentation(publicKey, &error) as Data?
        #expect(exported?.count == 65)
    }
}

/// A corrupt external representation.
struct CorruptCase: Sendable, CustomTestStringConvertible {
    let testDescription: String
    let type: CFString
    let keyClass: CFString
    let data: @Sendable () -> Data

    static let all: [CorruptCase] = [
        CorruptCase(testDescription: "empty EC public key", type: kSecAttrKeyTypeEC, keyClass: kSecAttrKeyClassPublic) { Data() },
        CorruptCase(testDescription: "truncated EC public key", type: kSecAttrKeyTypeEC, keyClass: kSecAttrKeyClassPublic) {
            externalRepresentation(KeySpec.p256.publicKey).dropLast()
        },
        CorruptCase(testDescription: "EC point not on the curve", type: kSecAttrKeyTypeEC, keyClass: kSecAttrKeyClassPublic) {
            var data = externalRepresentation(KeySpec.p256.publicKey)
            data[40] ^= 0x01
            return data
        },
        CorruptCase(testDescription: "EC public key without the 04 prefix", type: kSecAttrKeyTypeEC, keyClass: kSecAttrKeyClassPublic) {
            var data = externalRepresentation(KeySpec.p256.publicKey)
            data[0] = 0x02
            return data
        },
        CorruptCase(testDescription: "truncated EC private key", type: kSecAttrKeyTypeEC, keyClass: kSecAttrKeyClassPrivate) {
            externalRepresentation(KeySpec.p384.privateKey).dropLast(3)
        },
        CorruptCase(testDescription: "EC private key with another key's point", type: kSecAttrKeyTypeEC, keyClass: kSecAttrKeyClassPrivate) {
            var data = externalRepresentation(KeySpec.p256.privateKey)
            var error: Unmanaged<CFError>?
            let other = SecKeyCreateRandomKey(KeySpec.p256.parameters as CFDictionary, &error)!
            data.replaceSubrange(0..<65, with: externalRepresentation(SecKeyCopyPublicKey(other)!))
            return data
        },
        CorruptCase(testDescription: "EC private key scalar of zero", type: kSecAttrKeyTypeEC, keyClass: kSecAttrKeyClassPrivate) {
            externalRepresentation(KeySpec.p256.publicKey) + Data(count: 32)
        },
        CorruptCase(testDescription: "garbage RSA public DER", type: kSecAttrKeyTypeRSA, keyClass: kSecAttrKeyClassPublic) {
            Data([0x30, 0x82, 0x01, 0x0A, 0x02, 0x82, 0x01, 0x01, 0x00, 0xFF])
        },
        CorruptCase(testDescription: "truncated RSA private DER", type: kSecAttrKeyTypeRSA, keyClass: kSecAttrKeyClassPrivate) {
            externalRepresentation(KeySpec.rsa2048.privateKey).prefix(600)
        },
        CorruptCase(testDescription: "random bytes as RSA private key", type: kSecAttrKeyTypeRSA, keyClass: kSecAttrKeyClassPrivate) {
            Data((0..<1200).map { UInt8(truncatingIfNeeded: $0 &* 7919) })
        },
        CorruptCase(testDescription: "EC public key given as RSA", type: kSecAttrKeyTypeRSA, keyClass: kSecAttrKeyClassPublic) {
            externalRepresentation(KeySpec.p256.publicKey)
        },
        CorruptCase(testDescription: "RSA public key given as EC", type: kSecAttrKeyTypeEC, keyClass: kSecAttrKeyClassPublic) {
            externalRepresentation(KeySpec.rsa2048.publicKey)
        },
    ]
}

/// The modulus size of a PKCS#1 RSAPublicKey DER (swift-crypto parses it).
func _RSAPublicKeyCheck(_ der: Data) throws -> Int {
    try _RSA.Signing.PublicKey(unsafeDERRepresentation: der).keySizeInBits
}
#endif
