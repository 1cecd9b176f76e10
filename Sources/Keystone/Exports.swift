// Keystone's API speaks the engine's vocabulary (`KeychainQuery`, `ItemResult`, `Accessibility`,
// `AccessControl`, `AuthenticationContext`, `LockState`…): importing Keystone makes it available.
@_exported import KeychainEngine
