// `import CryptoKit` on Linux: swift-crypto's `Crypto` (the same API as Apple's CryptoKit) and CryptoKit's
// `SecureEnclave`, whose keys live in the TPM 2.0 (KeychainServicesDefaults.secureEnclave), so code written for
// Apple platforms builds unchanged.
//
// Depend on the `CryptoKit` product only on non-Apple platforms:
// `.product(name: "CryptoKit", package: "keystone", condition: .when(platforms: [.linux]))`.
// On Apple platforms `import CryptoKit` is the SDK's framework, and this module is empty.
#if !canImport(Darwin)
@_exported import Crypto
#endif
