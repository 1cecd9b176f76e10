// `import LocalAuthentication` on Linux: `LAContext`, `LAPolicy`, `LABiometryType` and `LAError`, which
// KeychainServices declares
// (Sources/KeychainServices/LocalAuthentication.swift and LocalAuthenticationTypes.swift).
//
// It re-exports the whole of KeychainServices, not only those names (they stay KeychainServices' own types, the
// LAContext that `kSecUseAuthenticationContext` takes): on Linux `import LocalAuthentication` alone also makes the
// SecItem names visible, where Apple's LocalAuthentication does not. Code written for Apple platforms compiles
// the same either way.
//
// Depend on the `LocalAuthentication` product only on non-Apple platforms:
// `.product(name: "LocalAuthentication", package: "keystone", condition: .when(platforms: [.linux]))`.
// On Apple platforms `import LocalAuthentication` is the SDK's framework, and this module is empty.
//
// Like Apple's framework, whose header imports Foundation (LAContext is an NSObject, errors are NSErrors), it re-exports
// Foundation: `import LocalAuthentication` alone gives `NSError`, `Data` and `NSErrorPointer`'s pointee type.
#if !canImport(Darwin)
@_exported import Foundation
@_exported import KeychainServices
#endif
