#if !canImport(Darwin)
import Crypto
import _CryptoExtras
import Foundation

// SecImportExport.h: PKCS#12 import. The file is read by the PKCS#12 reader the program installed
// (`KeychainServicesDefaults.bootstrap(.pkcs12)`, product KeychainPKCS12: swift-nio-ssl's NIOSSLPKCS12Bundle), so
// that a program that never imports PKCS#12 builds no TLS library.

/// `kSecImportExportPassphrase`: `"passphrase"`, the options key of the file's password.
public let kSecImportExportPassphrase: CFString = "passphrase"
/// `kSecImportItemIdentity`: `"identity"`, the result key of the imported `SecIdentity`.
public let kSecImportItemIdentity: CFString = "identity"
/// `kSecImportItemCertChain`: `"chain"`, the result key of the certificate chain.
public let kSecImportItemCertChain: CFString = "chain"
/// `kSecImportItemTrust`: `"trust"`, the result key of the trust object.
public let kSecImportItemTrust: CFString = "trust"
/// `kSecImportItemLabel`: `"label"`, the result key of the item's label.
public let kSecImportItemLabel: CFString = "label"
/// `kSecImportItemKeyID`: `"keyid"`, the result key of the key's identifier.
public let kSecImportItemKeyID: CFString = "keyid"

/// Imports the identity and certificates of a PKCS#12 file (`.p12`, `.pfx`), as on iOS: the items are returned,
/// not added to a keychain (add the identity with `SecItemAdd` and `kSecValueRef`).
///
/// - Parameters:
///   - pkcs12_data: the file's bytes.
///   - options: ``kSecImportExportPassphrase``, the file's password (a String); none means an empty one.
///   - items: set to an array of one dictionary: ``kSecImportItemIdentity`` (a `SecIdentity`: the private key and the
///     certificate whose public key it has), ``kSecImportItemCertChain`` (the certificates, the identity's first),
///     ``kSecImportItemKeyID`` (the key's `klbl`, SHA-1 of its public key) and ``kSecImportItemLabel`` (the
///     certificate's subject summary). No ``kSecImportItemTrust``: Keystone has no SecTrust yet.
/// - Returns: `errSecSuccess`; `errSecUnimplemented` when no PKCS#12 reader is installed (add the product
///   `KeychainPKCS12`, with the package's `NIO` trait, and call `KeychainServicesDefaults.bootstrap(.pkcs12)` at
///   start-up; the reason is logged once); `errSecAuthFailed` when the passphrase does not open the file (Apple's status for a
///   wrong password); `errSecDecode` when the bytes are not a PKCS#12 file, or hold a key Keystone's SecKey does not
///   have (EC P-256/384/521, RSA) or no certificate for the key; `errSecParam` for a passphrase that is not a String.
///
/// - Important: Decision: a file whose key matches none of its certificates is `errSecDecode`, not a partial result.
public func SecPKCS12Import(_ pkcs12_data: CFData, _ options: CFDictionary,
                            _ items: UnsafeMutablePointer<CFArray?>) -> OSStatus {
    let passphraseValue = options.first { ($0.key.base as? String) == kSecImportExportPassphrase }?.value
    if passphraseValue != nil, !(passphraseValue is String) { return errSecParam }
    let passphrase = passphraseValue as? String ?? ""
    guard let reader = KeychainServicesDefaults.pkcs12Reader() else {
        KeychainServicesDefaults.reportMissing(KeychainBackend.Missing.pkcs12)
        return errSecUnimplemented
    }
    let contents: PKCS12Contents
    do {
        contents = try reader(Data(referencing: pkcs12_data), passphrase)
    } catch {
        // BoringSSL reports a wrong password and a malformed file alike; a file that opens with no password
        // cannot be told from one with another password, so try the structure without the password.
        return PKCS12Structure.looksLikePKCS12(Data(referencing: pkcs12_data)) ? errSecAuthFailed : errSecDecode
    }
    guard let key = PKCS12Structure.secKey(fromDER: contents.privateKeyDER) else {
        return errSecDecode
    }
    let certificates = contents.certificates.compactMap { der -> SecCertificate? in
        SecCertificateCreateWithData(nil, NSData(data: der))
    }
    guard let publicKey = SecKeyCopyPublicKey(key) else { return errSecDecode }
    let publicBytes = publicKey.publicKeyBytes
    guard let leaf = certificates.first(where: { $0.publicKeyBytes == publicBytes }) else { return errSecDecode }
    let chain = [leaf] + certificates.filter { $0 !== leaf }
    let item = NSMutableDictionary()
    item[NSString(string: kSecImportItemIdentity)] = SecIdentity(certificate: leaf, privateKey: key)
    item[NSString(string: kSecImportItemCertChain)] = NSArray(array: chain)
    item[NSString(string: kSecImportItemKeyID)] = NSData(data: key.applicationLabel)
    if let label = SecCertificateCopySubjectSummary(leaf) { item[NSString(string: kSecImportItemLabel)] = NSString(string: label) }
    items.pointee = NSArray(array: [item])
    return errSecSuccess
}

/// What SecPKCS12Import needs besides the reader: telling a wrong password from garbage, and the key as a SecKey.
enum PKCS12Structure {
    /// Whether `data` has PKCS#12's outer shape: a DER SEQUENCE whose first element is INTEGER 3 (the version).
    static func looksLikePKCS12(_ data: Data) -> Bool {
        let bytes = [UInt8](data.prefix(16))
        guard bytes.count >= 5, bytes[0] == 0x30 else { return false }
        var index = 2
        if bytes[1] & 0x80 != 0 { index += Int(bytes[1] & 0x7F) }
        return index + 2 < bytes.count && bytes[index] == 0x02 && bytes[index + 1] == 0x01 && bytes[index + 2] == 0x03
    }

    /// The private key in DER (SEC1, PKCS#1 or PKCS#8) as a SecKey, through swift-crypto.
    static func secKey(fromDER der: Data) -> SecKey? {
        let ec: Data? = (try? P256.Signing.PrivateKey(derRepresentation: der).x963Representation)
            ?? (try? P384.Signing.PrivateKey(derRepresentation: der).x963Representation)
            ?? (try? P521.Signing.PrivateKey(derRepresentation: der).x963Representation)
        if let ec {
            return SecKeyCreateWithData(NSData(data: ec), [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom,
                                                           kSecAttrKeyClass: kSecAttrKeyClassPrivate], nil)
        }
        guard let rsa = try? _RSA.Signing.PrivateKey(derRepresentation: der) else { return nil }
        // swift-crypto's DER of an RSA private key is PKCS#1 `RSAPrivateKey`, Apple's external representation.
        return SecKeyCreateWithData(NSData(data: rsa.derRepresentation), [kSecAttrKeyType: kSecAttrKeyTypeRSA,
                                                                          kSecAttrKeyClass: kSecAttrKeyClassPrivate], nil)
    }
}
#endif
