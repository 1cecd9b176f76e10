#if !canImport(Darwin)
import Foundation

/// An identity (`SecIdentityRef`): a certificate and the private key that belongs to it.
///
/// Two identities are equal when their certificates and their private keys are equal.
public final class SecIdentity: NSObject, Sendable {
    /// The identity's certificate.
    let certificate: SecCertificate
    /// The identity's private key.
    let privateKey: SecKey

    /// An identity of a certificate and its private key. The caller checks that they belong together.
    init(certificate: SecCertificate, privateKey: SecKey) {
        self.certificate = certificate
        self.privateKey = privateKey
    }

    /// Equal when the certificates are equal and the private keys are equal.
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? SecIdentity else { return false }
        return other.certificate.isEqual(certificate) && other.privateKey.isEqual(privateKey)
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

/// Copies the certificate's public key.
///
/// - Returns: nil when the key is of a kind Keystone's SecKey does not have (neither EC P-256/384/521 nor RSA).
public func SecCertificateCopyKey(_ certificate: SecCertificate) -> SecKey? {
    let bytes = certificate.publicKeyBytes
    let isEC = bytes.first == 0x04 && [65, 97, 133].contains(bytes.count)
    let attributes: [String: Any] = [kSecAttrKeyType: isEC ? kSecAttrKeyTypeECSECPrimeRandom : kSecAttrKeyTypeRSA,
                                     kSecAttrKeyClass: kSecAttrKeyClassPublic]
    return SecKeyCreateWithData(NSData(data: bytes), attributes, nil)
}

/// Copies the identity's private key.
///
/// - Returns: `errSecSuccess`.
public func SecIdentityCopyPrivateKey(_ identityRef: SecIdentity, _ privateKeyRef: UnsafeMutablePointer<SecKey?>) -> OSStatus {
    privateKeyRef.pointee = identityRef.privateKey
    return errSecSuccess
}
#endif
