// `import Security` on Linux: KeychainServices under the name of Apple's framework, so keychain code written for
// Apple platforms builds unchanged (`SecItemAdd`, `kSec…`, `errSec…`, `SecAccessControlCreateWithFlags`, the CF names).
//
// Depend on the `Security` product only on non-Apple platforms:
// `.product(name: "Security", package: "keystone", condition: .when(platforms: [.linux]))`.
// On Apple platforms `import Security` is the SDK's framework, and this module is empty.
//
// KeychainServices also declares LocalAuthentication's names (`LAContext`, `LAPolicy`, `LAError`), so on Linux
// `import Security` makes them visible too, where Apple's Security does not; code written for Apple platforms
// imports LocalAuthentication for them anyway.
#if !canImport(Darwin)
@_exported import KeychainServices
#endif
