// Seed 000's signing-key provider, verbatim (its "SigningKeyProvider Protocol with SE/Software Implementations"
// section): a Secure Enclave key where the device has one, a software key where it has none. Nothing here knows about
// Keystone: on Linux `import CryptoKit` is Keystone's CryptoKit product (swift-crypto plus SecureEnclave on the TPM)
// and `import Security` its Security product, exactly as for a user's code.
//
// The seed's snippet shows only `import CryptoKit`; as a file of an app it also needs Foundation (`Data`) and
// Security (`errSecUnimplemented`), imported here. The types stay internal, as the seed declares them: the tests use
// `@testable import`.
import Foundation
import CryptoKit
import Security

protocol SigningKeyProvider {
    func sign(_ data: Data) throws -> Data
    func publicKeyData() -> Data
}

final class SecureEnclaveSigningKey: SigningKeyProvider {
    private let key: SecureEnclave.P256.Signing.PrivateKey

    init() throws {
        guard SecureEnclave.isAvailable else {
            throw KeychainError.unhandledError(status: errSecUnimplemented)
        }
        self.key = try SecureEnclave.P256.Signing.PrivateKey()
    }

    func sign(_ data: Data) throws -> Data {
        try key.signature(for: data).derRepresentation
    }

    func publicKeyData() -> Data { key.publicKey.derRepresentation }
}

final class SoftwareSigningKey: SigningKeyProvider {
    private let key = P256.Signing.PrivateKey()

    func sign(_ data: Data) throws -> Data {
        try key.signature(for: data).derRepresentation
    }

    func publicKeyData() -> Data { key.publicKey.derRepresentation }
}

struct SigningKeyFactory {
    static func make() -> SigningKeyProvider {
        if SecureEnclave.isAvailable,
           let seKey = try? SecureEnclaveSigningKey() {
            return seKey
        }
        return SoftwareSigningKey()
    }
}
