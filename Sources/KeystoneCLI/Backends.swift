#if !canImport(Darwin)
import KeychainServices
import KeychainSecretService
import KeychainTPM
import SystemAuthentication
#if NIO
import KeychainEtcd
import KeychainPKCS12
#endif

/// Installs every backend this build of the tool has, before any keychain call: the Secret Service
/// (`KEYSTONE_BACKEND=secret-service`), the TPM as the Secure Enclave (`create-keychain --tpm`, sealed files), PAM
/// and fprintd behind `LAContext`, and with the NIO trait etcd keychains and PKCS#12 import.
func bootstrapBackends() {
    var backends: [KeychainBackend] = [.secretService, .systemAuthentication]
    #if os(Linux)
    backends.append(.tpm)
    #endif
    #if NIO
    backends += [.etcd, .pkcs12]
    #endif
    KeychainServicesDefaults.bootstrap(backends: backends)
}
#else
func bootstrapBackends() {}
#endif
