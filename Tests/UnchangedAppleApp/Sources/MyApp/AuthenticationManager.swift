// Code written for Apple platforms: part of an iOS app's keychain layer, copied unchanged, `import` lines included.
// This package exists to prove that such code builds and its tests pass on Linux against Keystone's `Security`,
// `LocalAuthentication` and `CryptoKit` products (scripts/check-unchanged-apple-code.sh). Never edit the copied code
// to make it build here: a failure is a Keystone bug.
//
// Business logic that depends on the keychain protocol only.
//
// Glue (not part of the copied code):
// - the copied code shows no `import` lines: the imports below are the ones it needs on Apple platforms too.
import Foundation

// ---- copied unchanged from here ----
final class AuthenticationManager {
    private let keychain: KeychainServiceProtocol

    init(keychain: KeychainServiceProtocol) {
        self.keychain = keychain
    }

    func storeToken(_ token: String) throws {
        guard let data = token.data(using: .utf8) else {
            throw KeychainError.unexpectedData
        }
        try keychain.save(data, forKey: "auth_token")
    }

    func retrieveToken() throws -> String? {
        guard let data = try keychain.read(forKey: "auth_token") else { return nil }
        return String(data: data, encoding: .utf8)
    }
}
// ---- end of the copied code ----
