// CryptoKit code as apps on Apple platforms write it, in a file that imports CryptoKit and nothing else. On Apple
// platforms CryptoKit makes Foundation visible, and Apple's Foundation the Security names, so this file uses `Data`,
// `OSStatus`, `CFError`, `errSecUnimplemented`, `SecAccessControlCreateWithFlags` and
// `kSecAttrAccessibleWhenUnlockedThisDeviceOnly` through that one import. It must build unchanged against Keystone's
// CryptoKit product on Linux, which re-exports Foundation and the Security names for this reason
// (Sources/CryptoKit/CryptoKit.swift), and against the Apple SDK stand-in (Tests/AppleSDKStandIn/check.sh).
import CryptoKit

/// A signer whose key is in the Secure Enclave and asks for the user before each signature; on a device without a
/// Secure Enclave, making one fails with `errSecUnimplemented`.
public struct PresenceSigner {
    /// Why a signer could not be made.
    public enum Failure: Error, Equatable {
        /// A Security status, such as `errSecUnimplemented` when the device has no Secure Enclave.
        case status(OSStatus)
    }

    private let key: SecureEnclave.P256.Signing.PrivateKey

    /// The access control of the signer's key: this device only, while unlocked, the user present for each use.
    public static func accessControl() throws -> SecAccessControl {
        var error: Unmanaged<CFError>?
        guard let access = SecAccessControlCreateWithFlags(kCFAllocatorDefault,
                                                           kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
                                                           [.privateKeyUsage, .userPresence], &error) else {
            throw error!.takeRetainedValue() as Error
        }
        return access
    }

    /// Makes a new key in the Secure Enclave.
    public init() throws {
        guard SecureEnclave.isAvailable else { throw Failure.status(errSecUnimplemented) }
        key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: Self.accessControl())
    }

    /// A DER signature of `message`.
    public func sign(_ message: Data) throws -> Data {
        try key.signature(for: message).derRepresentation
    }

    /// The public key, to verify the signer's signatures.
    public var publicKey: P256.Signing.PublicKey { key.publicKey }
}
