// `import CryptoKit` on Linux: swift-crypto's `Crypto` (the same API as Apple's CryptoKit: SHA256, AES.GCM, P256…)
// and CryptoKit's `SecureEnclave` (SecureEnclave.swift), whose keys live in the TPM 2.0
// (KeychainServicesDefaults.secureEnclave), so code written for Apple platforms builds unchanged.
//
// Depend on the `CryptoKit` product only on non-Apple platforms:
// `.product(name: "CryptoKit", package: "keystone", condition: .when(platforms: [.linux]))`.
// On Apple platforms `import CryptoKit` is the SDK's framework, and this module is empty.
//
// Decision: it re-exports Foundation and KeychainServices (the module behind Keystone's `Security` product) too, so
// that a file saying only `import CryptoKit` sees what it sees on Apple platforms. There, CryptoKit's interface
// imports Foundation, which makes `Data` visible; and Apple's Foundation brings Security's names along, which makes
// `SecKey…`, `SecAccessControlCreateWithFlags`, `kSec…` and `errSec…` visible. Linux Foundation has no Security, so
// the module exports it itself. Exporting KeychainServices rather than the `Security` module keeps this product off
// the Linux `Security` module (see the README's note on X509 and `Modules/Security.*`); they are the same names.
// On Linux `import CryptoKit` therefore also makes LocalAuthentication's names (`LAContext`, which KeychainServices
// declares) and `KeychainServicesDefaults` visible, where Apple's does not: code written for Apple platforms imports
// LocalAuthentication for `LAContext` anyway and compiles the same either way.
// Tested by Tests/Fixtures/AppleStyleCryptoKit/CryptoKitImportOnly.swift (a file with `import CryptoKit` alone),
// and, against the Apple SDK stand-in (Tests/AppleSDKStandIn/CryptoKit), by Tests/AppleSDKStandIn/check.sh.
#if !canImport(Darwin)
@_exported import Crypto
@_exported import Foundation
@_exported import KeychainServices
#endif
