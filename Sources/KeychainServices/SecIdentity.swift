#if !canImport(Darwin)
import Foundation

/// An identity (`SecIdentityRef`): a certificate and the private key that belongs to it.
///
/// Keystone's SecKey is written separately: until it is integrated, the private key is held as any object
/// (`any AnyObject & Sendable`), which the integration narrows to `SecKey` when it adds `SecIdentityCreate` and
/// `SecIdentityCopyPrivateKey`. Two identities are equal when their certificates are equal and their keys are the
/// same object.
public final class SecIdentity: NSObject, Sendable {
    /// The identity's certificate.
    let certificate: SecCertificate
    /// The identity's private key (to become `SecKey`).
    let privateKey: any AnyObject & Sendable

    /// An identity of a certificate and its private key. The caller checks that they belong together.
    init(certificate: SecCertificate, privateKey: any AnyObject & Sendable) {
        self.certificate = certificate
        self.privateKey = privateKey
    }

    /// Equal when the certificates are equal and the private keys are the same object.
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? SecIdentity else { return false }
        return other.certificate.isEqual(certificate) && other.privateKey === privateKey
    }

    /// The certificate's hash.
    public override var hash: Int { certificate.hash }

    /// The certificate's description, as Apple prints an identity.
    public override var description: String {
        "<SecIdentity certificate: \(certificate.description)>"
    }
}

/// Copies the identity's certificate.
///
/// - Returns: `errSecSuccess`.
public func SecIdentityCopyCertificate(_ identityRef: SecIdentity,
                                       _ certificateRef: UnsafeMutablePointer<SecCertificate?>) -> OSStatus {
    certificateRef.pointee = identityRef.certificate
    return errSecSuccess
}
#endif
