// On Apple platforms KeychainServices is the Security framework itself: every other file of this module
// is compiled only where Security does not exist.
#if canImport(Darwin)
@_exported import Security
#if canImport(LocalAuthentication)
@_exported import LocalAuthentication
#endif
#endif
