#if !canImport(Darwin)
import Foundation

// SecImportExport.h: PKCS#12 import. Keystone does not parse PKCS#12 yet (see `SecPKCS12Import`).

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

/// Imports the identities and certificates of a PKCS#12 file (`.p12`, `.pfx`).
///
/// > Note: Not implemented on this platform yet: always `errSecUnimplemented`, `items` untouched. Neither
/// > swift-certificates nor swift-asn1 reads PKCS#12 (its encrypted bags and password-based key derivation), and
/// > Keystone adds no system OpenSSL dependency. (swift-nio-ssl's `NIOSSLPKCS12Bundle`, over its vendored
/// > BoringSSL, could parse it: a candidate, not yet a dependency.) Read the certificate and key with other tools
/// > and create them with ``SecCertificateCreateWithData(_:_:)``.
public func SecPKCS12Import(_ pkcs12_data: CFData, _ options: CFDictionary,
                            _ items: UnsafeMutablePointer<CFArray?>) -> OSStatus {
    errSecUnimplemented
}
#endif
