#if os(Linux)
import CTPM
import Foundation
import KeychainEngine
import KeychainServices

extension KeychainBackend {
    /// The TPM 2.0 as this process's Secure Enclave: `kSecAttrTokenIDSecureEnclave` keys, CryptoKit's
    /// `SecureEnclave` keys and keychain files sealed to the TPM (`keystone create-keychain --tpm`). The TPM is the
    /// one `KEYSTONE_TPM_TCTI` (or tpm2-tools' `TPM2TOOLS_TCTI` / `TCTI`) names, else `/dev/tpmrm0`; none when
    /// `KEYSTONE_SECURE_ENCLAVE=none`. Nothing is opened until a key is made or used.
    ///
    /// Install it at start-up: `KeychainServicesDefaults.bootstrap(.tpm)`.
    public static var tpm: KeychainBackend {
        // tpm2-tss's own logging to standard error stays off unless TSS2_LOG or KEYSTONE_LOG_LEVEL=debug asks for it:
        // set here, at start-up, before threads read the environment (see ks_tpm_quiet_logging).
        ks_tpm_quiet_logging()
        return KeychainBackend(name: "tpm", product: "KeychainTPM", secureEnclave: { environment in
            TPMSecureEnclaveToken.standard(environment: environment)
        })
    }
}

extension TPMSecureEnclaveToken {
    /// The token the environment selects: the TPM `KEYSTONE_TPM_TCTI` (or `TPM2TOOLS_TCTI` / `TCTI`) names, else
    /// `/dev/tpmrm0`; nil when `KEYSTONE_SECURE_ENCLAVE=none`.
    public static func standard(environment: [String: String] = ProcessInfo.processInfo.environment) -> TPMSecureEnclaveToken? {
        if environment["KEYSTONE_SECURE_ENCLAVE"] == "none" { return nil }
        return TPMSecureEnclaveToken(tcti: TPMDevice.defaultTCTI(environment: environment))
    }
}
#endif
