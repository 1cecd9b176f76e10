// `import CryptoKit` on Linux: swift-crypto's `Crypto` (the same API as Apple's CryptoKit: SHA256, AES.GCM, P256…)
// and CryptoKit's `SecureEnclave` (SecureEnclave.swift), whose keys live in the TPM 2.0
// (KeychainServicesDefaults.secureEnclave), so code written for Apple platforms builds unchanged.
//
// Depend on the `CryptoKit` product only on non-Apple platforms:
// `.product(name: "CryptoKit", package: "keystone", condition: .when(platforms: [.linux]))`.
// On Apple platforms `import CryptoKit` is the SDK's framework, and this module is empty.
//
// Only Crypto is re-exported: code that passes a `SecAccessControl` or an `LAContext` imports Security and
// LocalAuthentication for them, as on Apple platforms.
#if !canImport(Darwin)
@_exported import Crypto
#endif
