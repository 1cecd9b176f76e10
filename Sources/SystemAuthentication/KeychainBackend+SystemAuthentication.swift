#if !canImport(Darwin)
import Foundation
import KeychainEngine
import KeychainServices

extension KeychainBackend {
    /// The person behind `LAContext` and access-controlled items on Linux: the login password through PAM
    /// (service `keystone`), fingerprints through fprintd, on the controlling terminal.
    ///
    /// Install it at start-up: `KeychainServicesDefaults.bootstrap(.systemAuthentication)`, or
    /// ``systemAuthentication(_:)`` for another PAM service, user or prompter.
    public static var systemAuthentication: KeychainBackend { systemAuthentication(SystemAuthenticationConfiguration()) }

    /// The system (PAM, fprintd) with `configuration`: another PAM service or user, another prompter (a GUI's), no
    /// fingerprint reader.
    public static func systemAuthentication(_ configuration: SystemAuthenticationConfiguration) -> KeychainBackend {
        KeychainBackend(name: "system-authentication", product: "SystemAuthentication", authenticator: {
            SystemAuthenticator(configuration: configuration)
        })
    }
}

extension KeychainServicesDefaults {
    /// Uses the system (PAM, fprintd) with `configuration` to authenticate the person from now on: another PAM
    /// service or user, another prompter (a GUI's), no fingerprint reader.
    public static func useSystemAuthentication(_ configuration: SystemAuthenticationConfiguration) {
        useAuthenticator(SystemAuthenticator(configuration: configuration))
    }
}
#endif
