#if NIO && !canImport(Darwin)
import Foundation
import KeychainServices
import NIOSSL

extension KeychainBackend {
    /// `SecPKCS12Import`'s reader on Linux: swift-nio-ssl's `NIOSSLPKCS12Bundle` (its vendored BoringSSL) opens the
    /// file; KeychainServices makes the `SecIdentity` and certificates.
    ///
    /// Install it at start-up: `KeychainServicesDefaults.bootstrap(.pkcs12)`. Needs the package's `NIO` trait.
    public static var pkcs12: KeychainBackend {
        KeychainBackend(name: "pkcs12", product: "KeychainPKCS12", pkcs12: { data, password in
            let bundle = try NIOSSLPKCS12Bundle(buffer: Array(data), passphrase: Array(password.utf8))
            let certificates = bundle.certificateChain.compactMap { try? Data($0.toDERBytes()) }
            return PKCS12Contents(privateKeyDER: Data(try bundle.privateKey.derBytes), certificates: certificates)
        })
    }
}
#endif
