// A biometric-type check, as an app writes it: this file imports LocalAuthentication only (which brings
// Foundation's NSError with it, as Apple's framework does).
import LocalAuthentication

/// The biometry an app shows in its settings screen.
public enum AppBiometricType: Equatable, Sendable {
    case faceID, touchID, none

    /// What a fresh `LAContext` reports after `canEvaluatePolicy`, which sets `biometryType`.
    public static func current() -> AppBiometricType {
        let context = LAContext()
        var error: NSError?
        guard context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error) else { return .none }
        switch context.biometryType {
        case .faceID: return .faceID
        case .touchID: return .touchID
        default: return .none
        }
    }
}
