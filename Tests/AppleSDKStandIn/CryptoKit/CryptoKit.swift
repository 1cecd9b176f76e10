// Stand-in for CryptoKit's Swift interface: swift-crypto's API (which is CryptoKit's, and which swift-crypto
// re-exports CryptoKit as on Apple platforms) plus `SecureEnclave`, with Apple's types and signatures.
// Only compiled by Tests/AppleSDKStandIn/check.sh, never run.
//
// As the real framework: `import CryptoKit` alone makes Foundation visible (CryptoKit's interface imports it), and
// through Apple's Foundation the Security names (`SecKey…`, `SecAccessControlCreateWithFlags`, `kSec…`, `errSec…`).
// The stand-in's Foundation is Linux Foundation, which has no Security: the stand-in Security is re-exported here in
// its place. LocalAuthentication is not: `LAContext` needs `import LocalAuthentication`, as on Apple platforms.
@_exported import Crypto
@_exported import Foundation
@_exported import Security
import LocalAuthentication

private func standIn() -> Never { fatalError("Apple SDK stand-in: compiled only, never run") }

/// `SecureEnclave`: P-256 keys in the Secure Enclave.
public enum SecureEnclave {
    /// False on every simulator and on Macs without a Secure Enclave.
    public static var isAvailable: Bool { standIn() }

    public enum P256 {
        public enum Signing {
            /// Apple's SDK declares no Sendable conformance for it here: the stricter assumption.
            public struct PrivateKey {
                public init(compactRepresentable: Bool = true,
                            accessControl: SecAccessControl = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .privateKeyUsage, nil)!,
                            authenticationContext: LAContext? = nil) throws { standIn() }
                public init(dataRepresentation: Data, authenticationContext: LAContext? = nil) throws { standIn() }
                public var publicKey: Crypto.P256.Signing.PublicKey { standIn() }
                public var dataRepresentation: Data { standIn() }
                public func signature<D: Digest>(for digest: D) throws -> Crypto.P256.Signing.ECDSASignature { standIn() }
                public func signature<D: DataProtocol>(for data: D) throws -> Crypto.P256.Signing.ECDSASignature { standIn() }
            }
        }

        public enum KeyAgreement {
            public struct PrivateKey {
                public init(compactRepresentable: Bool = true,
                            accessControl: SecAccessControl = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .privateKeyUsage, nil)!,
                            authenticationContext: LAContext? = nil) throws { standIn() }
                public init(dataRepresentation: Data, authenticationContext: LAContext? = nil) throws { standIn() }
                public var publicKey: Crypto.P256.KeyAgreement.PublicKey { standIn() }
                public var dataRepresentation: Data { standIn() }
                public func sharedSecretFromKeyAgreement(with publicKeyShare: Crypto.P256.KeyAgreement.PublicKey) throws -> SharedSecret { standIn() }
            }
        }
    }
}
