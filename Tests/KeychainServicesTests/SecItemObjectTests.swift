// Linux-only: keys, certificates and identities as keychain items through the SecItem functions.
#if !canImport(Darwin)
import Crypto
import Foundation
import KeychainEngine
import KeychainServices
#if NIO
import KeychainPKCS12
#endif
import Testing

func newKey(tag: String? = nil, permanent: Bool = false, bits: Int = 256) -> SecKey? {
    var parameters: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: bits]
    var privateAttributes: [String: Any] = [kSecAttrIsPermanent as String: permanent]
    if let tag { privateAttributes[kSecAttrApplicationTag as String] = Data(tag.utf8) }
    parameters[kSecPrivateKeyAttrs as String] = privateAttributes
    return SecKeyCreateRandomKey(parameters as CFDictionary, nil)
}

func signs(_ privateKey: SecKey, verifiedBy publicKey: SecKey) -> Bool {
    let message = Data("message".utf8) as CFData
    guard let signature = SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageX962SHA256, message, nil) else { return false }
    return SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, message, signature, nil)
}

extension KeychainServicesTests {
    /// Apple's keychain stores a SecKey given in kSecValueRef as a key item with the attributes SecKey.c gives it
    /// (`kcls`, `klbl` = SHA-1 of the public key, `type`, `bsiz`…), and kSecReturnRef gives SecKey objects back.
    @Suite("Keys as keychain items")
    struct KeyItems {
        @Test("a permanent key from SecKeyCreateRandomKey comes back by its tag, as Data or String, and signs for the original's public key",
              arguments: SecItemStorage.allCases)
        func permanentKey(storage: SecItemStorage) throws {
            try withKeychain(storage) {
                let created = try #require(newKey(tag: "com.example.signing", permanent: true))
                let publicKey = try #require(SecKeyCopyPublicKey(created))
                for tag in [Data("com.example.signing".utf8) as Any, "com.example.signing" as Any] {
                    let (status, result) = copyItem([kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                                                     kSecReturnRef as String: true])
                    #expect(status == errSecSuccess)
                    let loaded = try #require(result as? SecKey)
                    #expect(signs(loaded, verifiedBy: publicKey))
                }
                // The primary key is enforced: the same key again is a duplicate.
                #expect(SecItemAdd([kSecValueRef as String: created] as CFDictionary, nil) == errSecDuplicateItem)
            }
        }

        @Test("a key added with kSecValueRef carries Apple's key attributes, and kSecReturnRef with attributes gives both, without the data",
              arguments: SecItemStorage.allCases)
        func keyAttributes(storage: SecItemStorage) throws {
            try withKeychain(storage) {
                let key = try #require(newKey())
                #expect(SecItemAdd([kSecValueRef as String: key, kSecAttrLabel as String: "mine"] as CFDictionary, nil) == errSecSuccess)
                let (status, result) = copyItem([kSecClass as String: kSecClassKey, kSecAttrLabel as String: "mine",
                                                 kSecReturnRef as String: true, kSecReturnAttributes as String: true])
                #expect(status == errSecSuccess)
                let attributes = try #require(result as? [String: Any])
                #expect(attributes[kSecValueRef as String] is SecKey)
                #expect(attributes[kSecValueData as String] == nil)
                #expect((attributes[kSecAttrKeyClass as String] as? NSNumber)?.intValue == 1)
                #expect((attributes[kSecAttrKeyType as String] as? NSNumber)?.intValue == 73)
                #expect((attributes[kSecAttrKeySizeInBits as String] as? NSNumber)?.intValue == 256)
                let publicKey = try #require(SecKeyCopyPublicKey(key))
                let publicBytes = try #require(SecKeyCopyExternalRepresentation(publicKey, nil)) as Data
                #expect(attributes[kSecAttrApplicationLabel as String] as? Data == Data(Insecure.SHA1.hash(data: publicBytes)))
                // The key given as the query finds its item; deleting by it removes it.
                #expect(SecItemDelete([kSecValueRef as String: key] as CFDictionary) == errSecSuccess)
                #expect(copyItem([kSecClass as String: kSecClassKey]).0 == errSecItemNotFound)
            }
        }

        @Test("a key item whose stored bytes are not a key is errSecDecode alone, and left out among others, never a wrong key")
        func damagedKeyData() throws {
            try withKeychain(.memory) {
                #expect(addItem([kSecClass as String: kSecClassKey, kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                                 kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecAttrApplicationTag as String: "broken",
                                 kSecValueData as String: Data([0x04, 0x01, 0x02])]) == errSecSuccess)
                let (status, result) = copyItem([kSecClass as String: kSecClassKey, kSecReturnRef as String: true])
                #expect(status == errSecDecode)
                #expect(result == nil)
                let good = try #require(newKey(tag: "good"))
                #expect(SecItemAdd([kSecValueRef as String: good] as CFDictionary, nil) == errSecSuccess)
                let (allStatus, all) = copyItem([kSecClass as String: kSecClassKey, kSecReturnRef as String: true,
                                                 kSecMatchLimit as String: kSecMatchLimitAll])
                #expect(allStatus == errSecSuccess)
                let keys = try #require(all as? [SecKey])
                #expect(keys.count == 1 && keys.first == good)
                // Its attributes are still readable, and it can be deleted.
                #expect(attributesOf([kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: "broken"]) != nil)
            }
        }
    }

    /// A SecCertificate given in kSecValueRef is stored with the attributes SecCertificate.c's
    /// `SecCertificateCopyAttributeDictionary` gives it, the label inferred as SecItem.c's `infer_cert_label` does.
    @Suite("Certificates as keychain items")
    struct CertificateItems {
        @Test("a certificate is stored with its issuer, serial and key hash, found again as a SecCertificate, and is a duplicate the second time",
              arguments: SecItemStorage.allCases)
        func certificateItem(storage: SecItemStorage) throws {
            try withKeychain(storage) {
                let certificate = try #require(makeCertificate(fixtureCertificate))
                #expect(SecItemAdd([kSecValueRef as String: certificate] as CFDictionary, nil) == errSecSuccess)
                #expect(SecItemAdd([kSecValueRef as String: certificate] as CFDictionary, nil) == errSecDuplicateItem)
                let (status, result) = copyItem([kSecClass as String: kSecClassCertificate, kSecReturnRef as String: true,
                                                 kSecReturnAttributes as String: true])
                #expect(status == errSecSuccess)
                let attributes = try #require(result as? [String: Any])
                let loaded = try #require(attributes[kSecValueRef as String] as? SecCertificate)
                #expect(SecCertificateCopyData(loaded) as Data == fixtureCertificate)
                #expect(attributes[kSecAttrLabel as String] as? String == SecCertificateCopySubjectSummary(certificate) as String?)
                #expect(attributes[kSecAttrSerialNumber as String] as? Data == SecCertificateCopySerialNumberData(certificate, nil) as Data?)
                #expect(attributes[kSecAttrPublicKeyHash as String] is Data)
                // Found by the certificate itself.
                #expect(copyItem([kSecValueRef as String: certificate, kSecReturnData as String: true]).1 as? Data == fixtureCertificate)
            }
        }
    }

    /// Identities: a certificate and the private key whose `klbl` is the certificate's `pkhh`.
    @Suite("Identities from a stored certificate and private key", .enabled(if: OpenSSL.isAvailable, OpenSSL.missing))
    struct IdentityItems {
        /// An EC key made by openssl, in Apple's format, and a self-signed certificate for it.
        static func openSSLIdentity() throws -> (key: SecKey, certificate: SecCertificate) {
            let work = try OpenSSLWorkspace()
            defer { work.remove() }
            _ = try work.run(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "key.pem"])
            _ = try work.run(["req", "-x509", "-new", "-key", "key.pem", "-subj", "/CN=Identity Test", "-days", "2",
                              "-outform", "DER", "-out", "cert.der"])
            let pem = String(decoding: try work.read("key.pem"), as: UTF8.self)
            let x963 = try P256.Signing.PrivateKey(pemRepresentation: pem).x963Representation
            let key = try #require(SecKeyCreateWithData(x963 as CFData, [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                                                                          kSecAttrKeyClass as String: kSecAttrKeyClassPrivate] as CFDictionary, nil))
            let certificate = try #require(SecCertificateCreateWithData(nil, try work.read("cert.der") as CFData))
            return (key, certificate)
        }

        @Test("adding the certificate and its private key makes an identity whose key signs for the certificate's key",
              arguments: SecItemStorage.allCases)
        func identityFromParts(storage: SecItemStorage) throws {
            try withKeychain(storage) {
                let (key, certificate) = try Self.openSSLIdentity()
                #expect(SecItemAdd([kSecValueRef as String: certificate] as CFDictionary, nil) == errSecSuccess)
                #expect(copyItem([kSecClass as String: kSecClassIdentity]).0 == errSecItemNotFound)  // no key yet
                #expect(SecItemAdd([kSecValueRef as String: key] as CFDictionary, nil) == errSecSuccess)
                let (status, result) = copyItem([kSecClass as String: kSecClassIdentity, kSecReturnRef as String: true])
                #expect(status == errSecSuccess)
                let identity = try #require(result as? SecIdentity)
                var privateKey: SecKey?
                var identityCertificate: SecCertificate?
                #expect(SecIdentityCopyPrivateKey(identity, &privateKey) == errSecSuccess)
                #expect(SecIdentityCopyCertificate(identity, &identityCertificate) == errSecSuccess)
                let storedCertificate = try #require(identityCertificate)
                let certificateKey = try #require(SecCertificateCopyKey(storedCertificate))
                let storedKey = try #require(privateKey)
                #expect(signs(storedKey, verifiedBy: certificateKey))
            }
        }

        @Test("SecItemAdd of a SecIdentity stores both parts; deleting the identity removes both")
        func identityAddAndDelete() throws {
            try withKeychain(.memory) {
                let (key, certificate) = try Self.openSSLIdentity()
                #expect(SecItemAdd([kSecValueRef as String: certificate] as CFDictionary, nil) == errSecSuccess)
                #expect(SecItemAdd([kSecValueRef as String: key] as CFDictionary, nil) == errSecSuccess)
                let identity = try #require(copyItem([kSecClass as String: kSecClassIdentity, kSecReturnRef as String: true]).1 as? SecIdentity)
                #expect(SecItemDelete([kSecClass as String: kSecClassIdentity] as CFDictionary) == errSecSuccess)
                #expect(copyItem([kSecClass as String: kSecClassKey]).0 == errSecItemNotFound)
                #expect(copyItem([kSecClass as String: kSecClassCertificate]).0 == errSecItemNotFound)
                #expect(SecItemAdd([kSecValueRef as String: identity, kSecAttrLabel as String: "both"] as CFDictionary, nil) == errSecSuccess)
                #expect(copyItem([kSecClass as String: kSecClassKey, kSecAttrLabel as String: "both"]).0 == errSecSuccess)
                #expect(copyItem([kSecClass as String: kSecClassCertificate, kSecAttrLabel as String: "both"]).0 == errSecSuccess)
                #expect(SecItemAdd([kSecValueRef as String: identity] as CFDictionary, nil) == errSecDuplicateItem)
            }
        }
    }
}
#endif

#if NIO && !canImport(Darwin)
/// SecPKCS12Import (SecImportExport.h) on files made by the real `openssl pkcs12 -export`: on iOS the identity and
/// the chain come back and nothing is stored; a wrong password is errSecAuthFailed.
@Suite("SecPKCS12Import reads what openssl pkcs12 writes", .enabled(if: OpenSSL.isAvailable, OpenSSL.missing))
struct PKCS12Tests {
    /// The PKCS#12 reader, as an app installs it (product KeychainPKCS12).
    init() { KeychainServicesDefaults.bootstrap(.pkcs12) }

    /// A key of `algorithm` (openssl's `-algorithm` / `-pkeyopt`), a self-signed certificate and a PKCS#12 of both.
    static func pkcs12(_ keyArguments: [String], password: String) throws -> (p12: Data, certificate: Data) {
        let work = try OpenSSLWorkspace()
        defer { work.remove() }
        _ = try work.run(["genpkey"] + keyArguments + ["-out", "key.pem"])
        _ = try work.run(["req", "-x509", "-new", "-key", "key.pem", "-subj", "/CN=PKCS12 Test", "-days", "2", "-out", "cert.pem"])
        let export = try work.run(["pkcs12", "-export", "-inkey", "key.pem", "-in", "cert.pem", "-passout", "pass:\(password)", "-out", "id.p12"])
        #expect(export.status == 0, "\(export.output)")
        _ = try work.run(["x509", "-in", "cert.pem", "-outform", "DER", "-out", "cert.der"])
        return (try work.read("id.p12"), try work.read("cert.der"))
    }

    static let keyKinds: [[String]] = [
        ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
        ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"],
        ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
    ]

    @Test("the identity's key signs for its certificate's key, the chain starts with that certificate, keyid is the key's klbl",
          arguments: keyKinds)
    func imports(_ keyArguments: [String]) throws {
        let (p12, certificateDER) = try Self.pkcs12(keyArguments, password: "s3cret")
        var items: CFArray?
        #expect(SecPKCS12Import(p12 as CFData, [kSecImportExportPassphrase as String: "s3cret"] as CFDictionary, &items) == errSecSuccess)
        let item = try #require((items as? [[String: Any]])?.first)
        let identity = try #require(item[kSecImportItemIdentity as String] as? SecIdentity)
        let chain = try #require(item[kSecImportItemCertChain as String] as? [SecCertificate])
        #expect(SecCertificateCopyData(try #require(chain.first)) as Data == certificateDER)
        #expect(item[kSecImportItemLabel as String] as? String == "PKCS12 Test")
        var key: SecKey?
        var certificate: SecCertificate?
        #expect(SecIdentityCopyPrivateKey(identity, &key) == errSecSuccess)
        #expect(SecIdentityCopyCertificate(identity, &certificate) == errSecSuccess)
        let privateKey = try #require(key)
        let certificateKey = try #require(certificate.flatMap(SecCertificateCopyKey))
        let algorithm: SecKeyAlgorithm = keyArguments.contains("RSA") ? .rsaSignatureMessagePKCS1v15SHA256 : .ecdsaSignatureMessageX962SHA256
        let message = Data("signed".utf8) as CFData
        let signature = try #require(SecKeyCreateSignature(privateKey, algorithm, message, nil))
        #expect(SecKeyVerifySignature(certificateKey, algorithm, message, signature, nil))
        let attributes = try #require(SecKeyCopyAttributes(privateKey) as? [String: Any])
        #expect(item[kSecImportItemKeyID as String] as? Data == attributes[kSecAttrApplicationLabel as String] as? Data)
    }

    @Test("a wrong passphrase is errSecAuthFailed and returns nothing")
    func wrongPassphrase() throws {
        let (p12, _) = try Self.pkcs12(Self.keyKinds[0], password: "right")
        var items: CFArray?
        #expect(SecPKCS12Import(p12 as CFData, [kSecImportExportPassphrase as String: "wrong"] as CFDictionary, &items) == errSecAuthFailed)
        #expect(SecPKCS12Import(p12 as CFData, [:] as CFDictionary, &items) == errSecAuthFailed)
        #expect(items == nil)
        // A damaged file is not a password problem.
        var damaged = p12
        damaged.removeLast(damaged.count / 2)
        #expect(SecPKCS12Import(damaged as CFData, [kSecImportExportPassphrase as String: "right"] as CFDictionary, &items) != errSecSuccess)
        #expect(items == nil)
    }
}

extension KeychainServicesTests {
    @Suite("A PKCS#12 identity in the keychain", .enabled(if: OpenSSL.isAvailable, OpenSSL.missing))
    struct PKCS12Keychain {
        @Test("an imported identity added with kSecValueRef is found as an identity", arguments: SecItemStorage.allCases)
        func addImported(storage: SecItemStorage) throws {
            try withKeychain(storage) {
                let (p12, _) = try PKCS12Tests.pkcs12(PKCS12Tests.keyKinds[0], password: "pw")
                var items: CFArray?
                #expect(SecPKCS12Import(p12 as CFData, [kSecImportExportPassphrase as String: "pw"] as CFDictionary, &items) == errSecSuccess)
                let identity = try #require((items as? [[String: Any]])?.first?[kSecImportItemIdentity as String] as? SecIdentity)
                #expect(SecItemAdd([kSecValueRef as String: identity] as CFDictionary, nil) == errSecSuccess)
                let found = copyItem([kSecClass as String: kSecClassIdentity, kSecReturnRef as String: true]).1 as? SecIdentity
                #expect(found == identity)
            }
        }
    }
}
#endif

#if !canImport(Darwin)
extension KeychainServicesTests {
    /// A key whose item needs an authentication: its SecKey is made only after one (Keystone reads the key when the
    /// reference is made; Apple, when it is used), and a cancelled prompt is the caller's errSecUserCanceled.
    @Suite("Protected keys through kSecReturnRef")
    struct ProtectedKeys {
        @Test("a cancelled prompt is errSecUserCanceled, a successful one gives the key", arguments: [
            (AuthenticationOutcome.userCancel, errSecUserCanceled), (.success, errSecSuccess), (.failed, errSecAuthFailed),
        ])
        func prompt(outcome: AuthenticationOutcome, expected: OSStatus) throws {
            let engine = KeychainEngine(storage: MemoryStorage(), authenticator: FixedAuthenticator(outcome))
            KeychainServicesDefaults.setEngine(engine)
            defer { KeychainServicesDefaults.useMemoryKeychain() }
            let key = try #require(newKey())
            let control = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .userPresence, nil))
            #expect(SecItemAdd([kSecValueRef as String: key, kSecAttrAccessControl as String: control] as CFDictionary, nil) == errSecSuccess)
            // Attributes alone never prompt.
            #expect(copyItem([kSecClass as String: kSecClassKey, kSecReturnAttributes as String: true]).0 == errSecSuccess)
            let (status, result) = copyItem([kSecClass as String: kSecClassKey, kSecReturnRef as String: true])
            #expect(status == expected)
            if expected == errSecSuccess { #expect((result as? SecKey) == key) } else { #expect(result == nil) }
        }
    }
}
#endif
