#if !canImport(Darwin)
import Foundation
import KeychainEngine
import KeychainServices

/// What `SecureEnclave` keys throw on Linux: an `OSStatus` (one of the `errSec…` codes), why, and what to do.
///
/// Decision: Apple's CryptoKit reports Secure Enclave failures as errors of other frameworks (CryptoTokenKit's and
/// LocalAuthentication's `NSError`s, `CryptoKitError`), whose codes are not documented for these calls, so code
/// written for Apple platforms catches them as `any Error`. On Linux the failure keeps the keychain's status, as
/// SecKey's errors do: it bridges to an `NSError` in `NSOSStatusErrorDomain` whose code is ``status``, so
/// `(error as NSError).code == Int(errSecUserCanceled)` works, and `localizedDescription` says what to do.
///
/// The statuses:
/// - `errSecUnimplemented`: this process has no Secure Enclave (no TPM 2.0, `KEYSTONE_SECURE_ENCLAVE=none`, a build
///   without the TPM backend installed, `KeychainServicesDefaults.bootstrap(.tpm)`): check `SecureEnclave.isAvailable` and fall back to a software key.
/// - `errSecNotAvailable`: there is a TPM but it cannot be reached now, or it went away during the call.
/// - `errSecDecode`: the `dataRepresentation` is not a key of this Secure Enclave (damaged, not Keystone's, or made
///   by another TPM).
/// - `errSecParam`: a wrong argument (a key-agreement key's `dataRepresentation` given to the signing type, an
///   access control this platform cannot honour, an invalid peer key).
/// - `errSecAuthFailed`, `errSecUserCanceled`, `errSecInteractionNotAllowed`: the authentication a key's access
///   control asks for failed, was cancelled, or could not be shown.
/// - `errSecInternalComponent`: the Secure Enclave answered something it should not have.
///
/// The reason never contains key material.
public struct SecureEnclaveError: Error, CustomNSError, LocalizedError, CustomStringConvertible, Sendable, Hashable {
    /// The `OSStatus`: `errSecUnimplemented`, `errSecNotAvailable`, `errSecDecode`, `errSecParam`,
    /// `errSecAuthFailed`, `errSecUserCanceled`, `errSecInteractionNotAllowed` or `errSecInternalComponent`.
    public let status: OSStatus
    /// What went wrong (from the Secure Enclave token or the authentication), for logs and developers.
    public let reason: String

    /// An error with a status and a reason.
    public init(status: OSStatus, reason: String) {
        self.status = status
        self.reason = reason
    }

    init(_ error: EngineError) {
        self.init(status: error.status, reason: error.reason)
    }

    /// `NSOSStatusErrorDomain`, as SecKey's errors.
    public static var errorDomain: String { NSOSStatusErrorDomain }
    /// The ``status``.
    public var errorCode: Int { Int(status) }
    /// The ``message`` as `NSLocalizedDescriptionKey`.
    public var errorUserInfo: [String: Any] { [NSLocalizedDescriptionKey: message] }
    /// The ``message``.
    public var errorDescription: String? { message }

    /// The status's name and code, the reason, and what to do.
    public var message: String {
        let name = Status.name(for: status) ?? "OSStatus"
        let because = reason.isEmpty ? Status.message(for: status) : reason
        return "\(name) (\(status)): \(because). \(advice)"
    }

    public var description: String { "SecureEnclaveError(\(message))" }

    /// What to do about it.
    private var advice: String {
        switch status {
        case Status.unimplemented:
            return "This process has no Secure Enclave (no TPM 2.0, KEYSTONE_SECURE_ENCLAVE=none, or the TPM backend not installed: product KeychainTPM, KeychainServicesDefaults.bootstrap(.tpm)): check SecureEnclave.isAvailable and fall back to a software key."
        case Status.notAvailable:
            return "The TPM cannot be reached: check that /dev/tpmrm0 exists and is readable and writable by this user (group tss), or what KEYSTONE_TPM_TCTI names, then try again."
        case Status.decode:
            return "A key works only with the TPM that made it and with the bytes its dataRepresentation gave: on another machine, after the TPM was cleared, or from damaged bytes, make a new key."
        case Status.param:
            return "Check the arguments."
        case Status.authFailed:
            return "The user could not be authenticated (or the context was invalidated): authenticate again with a new LAContext."
        case Status.userCanceled:
            return "The authentication was cancelled: ask again when the user wants to go on."
        case Status.interactionNotAllowed:
            return "The key needs an authentication and no prompt may be shown: evaluate a policy on the LAContext first (with a reuse duration), or allow interaction."
        default:
            return "Report this with the reason above."
        }
    }

    /// `catch errSecUserCanceled`-style matching on the status.
    public static func ~= (status: OSStatus, error: SecureEnclaveError) -> Bool { error.status == status }
}
#endif
