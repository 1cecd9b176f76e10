// CryptoKit Secure Enclave code as iOS apps write it: Apple's initialisers with their default arguments, an access
// control from SecAccessControlCreateWithFlags, an LAContext. It checks the API's shape: it must build unchanged
// against Keystone's CryptoKit, Security and LocalAuthentication products (only Apple's module names imported).
import Foundation
import CryptoKit
import LocalAuthentication
import Security

/// A device-bound signing key that asks for the user (biometry or passcode) before each signature.
public struct DeviceSigningKey {
    private let key: SecureEnclave.P256.Signing.PrivateKey

    /// Makes a new key in the Secure Enclave.
    public init(context: LAContext? = nil) throws {
        var error: Unmanaged<CFError>?
        guard let access = SecAccessControlCreateWithFlags(kCFAllocatorDefault,
                                                           kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
                                                           [.privateKeyUsage, .userPresence], &error) else {
            throw error!.takeRetainedValue() as Error
        }
        key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access, authenticationContext: context)
    }

    /// Restores a key the app stored.
    public init(restoring stored: Data, context: LAContext) throws {
        key = try .init(dataRepresentation: stored, authenticationContext: context)
    }

    /// What the app stores (in the keychain).
    public var stored: Data { key.dataRepresentation }

    /// The public key, X9.63, as the server enrolls it.
    public var publicKey: Data { key.publicKey.x963Representation }

    /// A DER signature of the server's challenge.
    public func sign(_ challenge: Data) throws -> Data {
        try key.signature(for: challenge).derRepresentation
    }
}

/// An ephemeral Secure Enclave key agreeing a message key with a peer.
public enum EnclaveKeyAgreement {
    /// The symmetric key for `peer`, and the public key to send it.
    public static func messageKey(for peer: P256.KeyAgreement.PublicKey) throws -> (key: SymmetricKey, publicKey: P256.KeyAgreement.PublicKey) {
        let ephemeral = try SecureEnclave.P256.KeyAgreement.PrivateKey(compactRepresentable: false)
        let secret = try ephemeral.sharedSecretFromKeyAgreement(with: peer)
        let key = secret.hkdfDerivedSymmetricKey(using: SHA256.self, salt: Data(), sharedInfo: Data("messages".utf8),
                                                 outputByteCount: 32)
        return (key, ephemeral.publicKey)
    }
}
