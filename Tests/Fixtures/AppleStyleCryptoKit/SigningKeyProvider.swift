// A signing-key provider as apps write it: a Secure Enclave key where the device has one, a software key where it
// has none. Nothing here knows about Keystone: on Linux `import CryptoKit` is Keystone's CryptoKit product
// (swift-crypto plus SecureEnclave on the TPM), exactly as for a user's code.
//
// The file imports CryptoKit alone, as such files do on Apple platforms, and uses Foundation's `Data` and Security's
// `errSecUnimplemented`: CryptoKit makes them visible, there and on Linux. The types stay internal, as apps declare
// them: the tests use `@testable import`.
import CryptoKit

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
