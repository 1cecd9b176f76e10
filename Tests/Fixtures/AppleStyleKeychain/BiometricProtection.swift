// Items only the enrolled biometry (or the passcode) can read, and the LocalAuthentication checks around them,
// as iOS apps write them.
import Foundation
import LocalAuthentication
import Security

/// Whether biometric authentication can be used, and why not.
public struct BiometryStatus: Equatable, Sendable {
    public let isAvailable: Bool
    /// `LAError.Code` raw value of the reason, when not available.
    public let errorCode: Int?
}

/// Biometric checks and biometry-protected secrets.
public enum BiometricVault {
    /// Asks LocalAuthentication whether biometry can be evaluated.
    public static func biometryStatus() -> BiometryStatus {
        let context = LAContext()
        var error: NSError?
        let available = context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error)
        return BiometryStatus(isAvailable: available, errorCode: error?.code)
    }

    /// Authenticates the device owner (biometry or passcode); `completion` runs on a private queue.
    public static func authenticate(reason: String, completion: @escaping @Sendable (Bool, (any Error)?) -> Void) {
        let context = LAContext()
        context.localizedCancelTitle = "Not Now"
        var error: NSError?
        guard context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error) else {
            completion(false, error)
            return
        }
        context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: reason) { success, evaluationError in
            completion(success, evaluationError)
        }
    }

    /// `authenticate(reason:completion:)` with async/await; a cancel is false, other failures throw.
    public static func authenticate(reason: String) async throws -> Bool {
        let context = LAContext()
        do {
            return try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: reason)
        } catch let error as LAError where error.code == .userCancel || error.code == .appCancel {
            return false
        }
    }

    /// An access control for items readable after authenticating with the biometry enrolled now.
    public static func biometryAccessControl(protection: CFString = kSecAttrAccessibleWhenUnlockedThisDeviceOnly)
        throws -> SecAccessControl {
        var error: Unmanaged<CFError>?
        guard let access = SecAccessControlCreateWithFlags(kCFAllocatorDefault, protection, .biometryCurrentSet, &error) else {
            let reason = error.map { $0.takeRetainedValue().localizedDescription } ?? "unknown"
            throw KeychainHelperError.accessControl(reason)
        }
        return access
    }

    /// Stores `secret` so that reading it needs the current biometry (or `flags`' other factor).
    public static func store(_ secret: Data, service: String, account: String,
                             flags: SecAccessControlCreateFlags = .userPresence) throws {
        var error: Unmanaged<CFError>?
        guard let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, flags, &error) else {
            throw error!.takeRetainedValue() as any Error
        }
        let attributes: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: account,
            kSecAttrAccessControl as String: access,
            kSecValueData as String: secret,
        ]
        let status = SecItemAdd(attributes as CFDictionary, nil)
        guard status == errSecSuccess else { throw KeychainHelperError(status: status) }
    }

    /// Reads a protected secret; the prompt shows `reason`. With `context`, an earlier successful evaluation
    /// of that context is reused.
    public static func read(service: String, account: String, reason: String, context: LAContext = LAContext()) throws -> Data {
        context.localizedReason = reason
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: account,
            kSecReturnData as String: true,
            kSecUseAuthenticationContext as String: context,
        ]
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        guard status == errSecSuccess else { throw KeychainHelperError(status: status) }
        guard let data = result as? Data else { throw KeychainHelperError.unexpectedResult }
        return data
    }

    /// Reads the secret's item without the secret: never prompts, and works while authentication is refused.
    public static func exists(service: String, account: String) -> Bool {
        let context = LAContext()
        context.interactionNotAllowed = true
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: account,
            kSecReturnAttributes as String: true,
            kSecUseAuthenticationContext as String: context,
        ]
        var result: CFTypeRef?
        return SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess
    }
}
