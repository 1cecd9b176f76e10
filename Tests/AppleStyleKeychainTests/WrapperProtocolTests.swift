// Linux only: on Apple platforms the SDK's LAContext is used, whose reply's sendability is Apple's.
#if !canImport(Darwin)
import AppleStyleKeychain
import DefaultKeychainLock
import Foundation
import KeychainEngine
import KeychainServices
import Testing

/// An LAContext wrapper protocol, exactly as apps declare it: the reply is not `@Sendable`. `LAContext` must conform
/// with an empty extension in the Swift 6 language mode (this file is compiled in it).
protocol BiometricAuthContext {
    func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool
    func evaluatePolicy(_ policy: LAPolicy, localizedReason: String, reply: @escaping (Bool, (any Error)?) -> Void)
}

extension LAContext: BiometricAuthContext {}

/// The same protocol with a `@Sendable` reply, as other wrappers declare it: `LAContext` conforms to both.
protocol SendableReplyContext {
    func evaluatePolicy(_ policy: LAPolicy, localizedReason: String, reply: @escaping @Sendable (Bool, (any Error)?) -> Void)
}

extension LAContext: SendableReplyContext {}

@Suite("App wrapper protocols against LAContext on Linux", .serialized, .ownsDefaultKeychain)
struct WrapperProtocolTests {
    @Test("an app's LAContext wrapper protocol is satisfied by LAContext, and its reply arrives with the authenticator's outcome")
    func wrapperProtocol() async throws {
        KeychainServicesDefaults.setEngine(KeychainEngine(authenticator: FixedAuthenticator(.userCancel)))
        defer { KeychainServicesDefaults.setEngine(nil) }
        let context: any BiometricAuthContext = LAContext()
        var error: NSError?
        #expect(context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        let code = await withCheckedContinuation { (continuation: CheckedContinuation<LAError.Code?, Never>) in
            context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Unlock") { success, error in
                continuation.resume(returning: success ? nil : (error as? LAError)?.code)
            }
        }
        #expect(code == .userCancel)
    }

    @Test("an app's biometric type: none without biometry, as on a device without Touch ID or Face ID")
    func biometricType() {
        KeychainServicesDefaults.setEngine(KeychainEngine(authenticator: FixedAuthenticator(.success)))
        defer { KeychainServicesDefaults.setEngine(nil) }
        #expect(AppBiometricType.current() == .none)
    }
}
#endif
