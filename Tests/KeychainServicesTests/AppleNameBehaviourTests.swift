// Linux-only: KeychainServices' own declarations of SecRandom, CFError, LocalAuthentication and SecBase names.
#if !canImport(Darwin)
import Foundation
import KeychainEngine
import KeychainServices
import Testing

// Tests that touch no keychain run in parallel; those that evaluate an LAContext extend the serialized
// `KeychainServicesTests` suite, which owns the process-wide default keychain.

@Suite("SecRandomCopyBytes")
struct SecRandomTests {
    func random(_ count: Int) -> (OSStatus, [UInt8]) {
        var bytes = [UInt8](repeating: 0, count: count)
        let status = bytes.withUnsafeMutableBytes { SecRandomCopyBytes(kSecRandomDefault, count, $0.baseAddress!) }
        return (status, bytes)
    }

    @Test("fills the buffer with bytes that differ from call to call and are not all zero")
    func fills() {
        let (first, a) = random(64)
        let (second, b) = random(64)
        #expect(first == errSecSuccess && second == errSecSuccess)
        #expect(a.contains { $0 != 0 })
        #expect(a != b)
    }

    @Test("zero bytes succeed and write nothing")
    func zeroBytes() {
        var byte: UInt8 = 0xA5
        #expect(SecRandomCopyBytes(kSecRandomDefault, 0, &byte) == errSecSuccess)
        #expect(byte == 0xA5)
        #expect(SecRandomCopyBytes(nil, 0, &byte) == errSecSuccess)
    }

    @Test("a request larger than one getrandom call returns is filled to the end")
    func beyondOneCall() {
        // getrandom(2) returns at most 32 MiB - 1 bytes a call: the rest needs further calls.
        let count = 32 * 1024 * 1024 + 4096
        let (status, bytes) = random(count)
        #expect(status == errSecSuccess)
        #expect(bytes[(count - 64)...].contains { $0 != 0 })
    }

    @Test("a negative count or another generator is errSecParam and writes nothing")
    func refused() {
        var byte: UInt8 = 7
        #expect(SecRandomCopyBytes(kSecRandomDefault, -1, &byte) == errSecParam)
        #expect(SecRandomCopyBytes(OpaquePointer(bitPattern: 0x10), 1, &byte) == errSecParam)
        #expect(byte == 7)
    }
}

@Suite("CFError functions")
struct CFErrorTests {
    @Test("an errSec status as an NSError gives its domain, code, user info and description")
    func statusError() throws {
        let message = try #require(SecCopyErrorMessageString(errSecItemNotFound, nil))
        let error: CFError = NSError(domain: NSOSStatusErrorDomain, code: Int(errSecItemNotFound),
                                     userInfo: [NSLocalizedDescriptionKey: message])
        #expect(CFErrorGetDomain(error) == kCFErrorDomainOSStatus)
        #expect(CFErrorGetCode(error) == -25300)
        let userInfo = try #require(CFErrorCopyUserInfo(error) as? [String: Any])
        #expect(userInfo[kCFErrorLocalizedDescriptionKey as String] as? String == message)
        #expect(CFErrorCopyDescription(error) == "The specified item could not be found in the keychain.")
        #expect(CFErrorCopyFailureReason(error) == nil)
        #expect(CFErrorCopyRecoverySuggestion(error) == nil)
    }

    @Test("the error SecAccessControlCreateWithFlags reports reads as errSecParam in the OSStatus domain")
    func accessControlError() throws {
        var unmanaged: Unmanaged<CFError>?
        #expect(SecAccessControlCreateWithFlags(kCFAllocatorDefault, "never", .userPresence, &unmanaged) == nil)
        let error = try #require(unmanaged?.takeRetainedValue())
        #expect(CFErrorGetDomain(error) == kCFErrorDomainOSStatus)
        #expect(CFErrorGetCode(error) == CFIndex(errSecParam))
        #expect(CFErrorCopyDescription(error).isEmpty == false)
    }

    @Test("an error without user info has an empty dictionary and a description built from domain and code")
    func bareError() {
        let error = CFErrorCreate(nil, "com.example.store", 2, nil)
        #expect(CFErrorGetDomain(error) == "com.example.store")
        #expect(CFErrorGetCode(error) == 2)
        #expect(CFErrorCopyUserInfo(error).isEmpty)
        #expect(CFErrorCopyDescription(error).contains("com.example.store error 2"))
    }

    @Test("CFErrorCreate keeps string keys, and the reason and suggestion keys are read back")
    func create() {
        let info: [AnyHashable: Any] = [kCFErrorLocalizedFailureReasonKey as String: "the disk is full",
                                        kCFErrorLocalizedRecoverySuggestionKey as String: "free space", "custom": 42, 7: "not a string key"]
        let error = CFErrorCreate(kCFAllocatorDefault, "com.example", -3, info as CFDictionary)
        #expect(CFErrorGetDomain(error) == "com.example")
        #expect(CFErrorGetCode(error) == -3)
        #expect(CFErrorCopyFailureReason(error) == "the disk is full")
        #expect(CFErrorCopyRecoverySuggestion(error) == "free space")
        let copied = CFErrorCopyUserInfo(error) as? [String: Any]
        #expect(copied?.count == 3)
        #expect(copied?["custom"] as? Int == 42)
    }

    @Test("the CFError domains and keys are Foundation's strings")
    func constants() {
        #expect([kCFErrorDomainPOSIX, kCFErrorDomainOSStatus, kCFErrorDomainMach, kCFErrorDomainCocoa]
                 == ["NSPOSIXErrorDomain", "NSOSStatusErrorDomain", "NSMachErrorDomain", "NSCocoaErrorDomain"])
        #expect([kCFErrorLocalizedDescriptionKey, kCFErrorLocalizedFailureReasonKey, kCFErrorLocalizedRecoverySuggestionKey,
                 kCFErrorUnderlyingErrorKey, kCFErrorURLKey, kCFErrorFilePathKey]
                 == ["NSLocalizedDescription", "NSLocalizedFailureReason", "NSLocalizedRecoverySuggestion", "NSUnderlyingError",
                     "NSURL", "NSFilePath"])
    }
}

@Suite("SecBase, CFBase and SecItem names added for Apple-platform code")
struct AddedBaseNameTests {
    @Test("noErr is errSecSuccess, and the older SecBase.h codes have Apple's values")
    func statusCodes() {
        #expect(noErr == errSecSuccess)
        #expect(noErr == 0)
        #expect(errSecDskFull == errSecDiskFull)
        #expect(errSecOpWr == -49)
        #expect(errSecCoreFoundationUnknown == -4960)
    }

    @Test("CFIndex and CFOptionFlags are Apple's Int and UInt")
    func typealiases() {
        #expect(CFIndex.self == Int.self)
        #expect(CFOptionFlags.self == UInt.self)
        #expect(CFErrorDomain.self == String.self)
    }

    @Test("the added kSec constants carry Apple's raw strings", arguments: [
        (kSecAttrSyncViewHint, "vwht"), (kSecAttrKeyTypeDSA, "43"), (kSecAttrKeyTypeAES, "2147483649"), (kSecAttrKeyTypeDES, "14"),
        (kSecAttrKeyType3DES, "17"), (kSecAttrKeyTypeRC4, "25"), (kSecAttrKeyTypeRC2, "23"), (kSecAttrKeyTypeCAST, "56"),
        (kSecAttrKeyTypeECDSA, "73"), (kSecMatchSubjectStartsWith, "m_SubjectStartsWith"), (kSecMatchSubjectEndsWith, "m_SubjectEndsWith"),
        (kSecMatchSubjectWholeString, "m_SubjectWholeString"), (kSecMatchDiacriticInsensitive, "m_DiacriticInsensitive"),
        (kSecMatchWidthInsensitive, "m_WidthInsensitive"), (kSecUseNoAuthenticationUI, "u_NoAuthUI"),
    ] as [(CFString, String)])
    func constants(_ constant: CFString, _ raw: String) {
        #expect(constant == raw)
    }
}

@Suite("LocalAuthentication names added for Apple-platform code")
struct AddedLocalAuthenticationNameTests {
    @Test("every LAError code has LAError.h's raw value, and its kLAError number agrees", arguments: [
        (LAError.Code.authenticationFailed, -1, kLAErrorAuthenticationFailed), (.userCancel, -2, kLAErrorUserCancel),
        (.userFallback, -3, kLAErrorUserFallback), (.systemCancel, -4, kLAErrorSystemCancel), (.passcodeNotSet, -5, kLAErrorPasscodeNotSet),
        (.biometryNotAvailable, -6, kLAErrorBiometryNotAvailable), (.biometryNotEnrolled, -7, kLAErrorBiometryNotEnrolled),
        (.biometryLockout, -8, kLAErrorBiometryLockout), (.appCancel, -9, kLAErrorAppCancel), (.invalidContext, -10, kLAErrorInvalidContext),
        (.companionNotAvailable, -11, kLAErrorCompanionNotAvailable), (.biometryNotPaired, -12, kLAErrorBiometryNotPaired),
        (.biometryDisconnected, -13, kLAErrorBiometryDisconnected), (.invalidDimensions, -14, kLAErrorInvalidDimensions),
        (.notInteractive, -1004, kLAErrorNotInteractive),
    ] as [(LAError.Code, Int, Int32)])
    func codes(_ code: LAError.Code, _ raw: Int, _ number: Int32) {
        #expect(code.rawValue == raw)
        #expect(Int(number) == raw)
        #expect(LAError.Code(rawValue: raw) == code)
        let error = LAError(code) as NSError
        #expect(error.domain == LAErrorDomain && error.code == raw)
    }

    @Test("the older kLAError names equal their newer twins, and the domains agree")
    func aliases() {
        #expect(kLAErrorTouchIDNotAvailable == kLAErrorBiometryNotAvailable)
        #expect(kLAErrorTouchIDNotEnrolled == kLAErrorBiometryNotEnrolled)
        #expect(kLAErrorTouchIDLockout == kLAErrorBiometryLockout)
        #expect(kLAErrorWatchNotAvailable == kLAErrorCompanionNotAvailable)
        #expect(LAErrorDomain == "com.apple.LocalAuthentication")
        #expect(LAError.errorDomain == LAErrorDomain && kLAErrorDomain == LAErrorDomain)
    }

    @Test("catch LAError patterns match the new codes")
    func patterns() {
        let error: any Error = LAError(.biometryNotPaired)
        switch error {
        case LAError.biometryDisconnected, LAError.invalidDimensions, LAError.companionNotAvailable: Issue.record("matched the wrong code")
        case LAError.biometryNotPaired: break
        default: Issue.record("matched nothing")
        }
    }

    @Test("policy, credential, operation and biometry numbers are LAPublicDefines.h's")
    func publicDefines() {
        #expect(Int(kLAPolicyDeviceOwnerAuthenticationWithBiometrics) == LAPolicy.deviceOwnerAuthenticationWithBiometrics.rawValue)
        #expect(Int(kLAPolicyDeviceOwnerAuthentication) == LAPolicy.deviceOwnerAuthentication.rawValue)
        #expect(LACredentialType.applicationPassword.rawValue == 0 && Int(kLACredentialTypeApplicationPassword) == 0)
        #expect(LACredentialType.smartCardPIN.rawValue == -3 && Int(kLACredentialSmartCardPIN) == -3)
        let operations: [LAAccessControlOperation] = [.createItem, .useItem, .createKey, .useKeySign, .useKeyDecrypt, .useKeyKeyExchange]
        #expect(operations.map(\.rawValue) == [0, 1, 2, 3, 4, 5])
        #expect([kLAAccessControlOperationCreateItem, kLAAccessControlOperationUseItem, kLAAccessControlOperationCreateKey,
                 kLAAccessControlOperationUseKeySign, kLAAccessControlOperationUseKeyDecrypt, kLAAccessControlOperationUseKeyKeyExchange]
                 == [0, 1, 2, 3, 4, 5])
        #expect([kLABiometryTypeNone, kLABiometryTypeTouchID, kLABiometryTypeFaceID, kLABiometryTypeOpticID].map(Int.init)
                 == [LABiometryType.none, .touchID, .faceID, .opticID].map(\.rawValue))
    }

    @Test("a context carries an application password (set, removed, dropped by invalidate), never a smart card PIN, and has no biometry domain state")
    func credentials() {
        let context = LAContext()
        #expect(context.setCredential(Data("app password".utf8), type: .applicationPassword))
        #expect(context.isCredentialSet(.applicationPassword))
        #expect(!"\(context)".contains("app password"))
        #expect(context.setCredential(nil, type: .applicationPassword))
        #expect(!context.isCredentialSet(.applicationPassword))
        #expect(!context.setCredential(Data("1234".utf8), type: .smartCardPIN))
        #expect(!context.isCredentialSet(.smartCardPIN))
        #expect(context.setCredential(Data("app password".utf8), type: .applicationPassword))
        context.invalidate()
        #expect(!context.isCredentialSet(.applicationPassword))
        #expect(!context.setCredential(Data("again".utf8), type: .applicationPassword))
        #expect(context.evaluatedPolicyDomainState == nil)
    }
}

extension KeychainServicesTests {
    @Suite("LAContext.evaluateAccessControl and kSecAttrSyncViewHint through the keychain")
    struct EvaluateAccessControlTests {
        let prompts = Prompts()
        /// The engine's clock, which LAContext's reuse window follows too: a test suspended for minutes on a loaded
        /// machine (its `await` waits for a free thread) still reads inside the window it set.
        let clock = Locked(Date(timeIntervalSinceReferenceDate: 800_000_000))
        init() {
            var configuration = EngineConfiguration()
            configuration.now = { [clock] in clock.current }
            KeychainServicesDefaults.useMemoryKeychain(configuration: configuration).authenticator = prompts
        }

        func accessControl(_ flags: SecAccessControlCreateFlags) throws -> SecAccessControl {
            try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, flags, nil))
        }

        @Test("evaluating for useItem asks once, and a keychain read with the context then reuses the success")
        func useItem() async throws {
            let access = try accessControl(.userPresence)
            #expect(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "eac", kSecAttrAccount as String: "a",
                                kSecAttrAccessControl as String: access, kSecValueData as String: Data("s".utf8)] as CFDictionary, nil) == errSecSuccess)
            let context = LAContext()
            context.touchIDAuthenticationAllowableReuseDuration = 30
            #expect(try await context.evaluateAccessControl(access, operation: .useItem, localizedReason: "Read the secret"))
            #expect(prompts.count.current == 1)
            var result: CFTypeRef?
            let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "eac",
                                        kSecReturnData as String: true, kSecUseAuthenticationContext as String: context]
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            #expect(result as? Data == Data("s".utf8))
            #expect(prompts.count.current == 1)
        }

        @Test("creation and access controls without authentication flags succeed without asking")
        func nothingToAsk() async throws {
            let context = LAContext()
            #expect(try await context.evaluateAccessControl(accessControl(.biometryCurrentSet), operation: .createItem, localizedReason: "Add"))
            #expect(try await context.evaluateAccessControl(accessControl(.privateKeyUsage), operation: .useKeySign, localizedReason: "Sign"))
            #expect(prompts.count.current == 0)
        }

        @Test("the reply form reports the outcome's LAError off the caller's thread")
        func reply() async throws {
            prompts.outcomes.withLock { $0 = [.notAvailable, .notAvailable, .userCancel] }
            let context = LAContext()
            for (flags, expected) in [(SecAccessControlCreateFlags.biometryCurrentSet, LAError.Code.biometryNotAvailable),
                                      (.devicePasscode, .passcodeNotSet), (.userPresence, .userCancel)] {
                let access = try accessControl(flags)
                let (success, error): (Bool, (any Error)?) = await withCheckedContinuation { continuation in
                    context.evaluateAccessControl(access, operation: .useItem, localizedReason: "Read") { success, error in
                        continuation.resume(returning: (success, error))
                    }
                }
                #expect(!success)
                #expect((error as? LAError)?.code == expected)
            }
        }

        @Test("a non-interactive or invalidated context fails without asking")
        func refused() async throws {
            let access = try accessControl(.userPresence)
            let quiet = LAContext()
            quiet.interactionNotAllowed = true
            await #expect(throws: LAError(.notInteractive)) {
                try await quiet.evaluateAccessControl(access, operation: .useItem, localizedReason: "Read")
            }
            let invalidated = LAContext()
            invalidated.invalidate()
            await #expect(throws: LAError(.invalidContext)) {
                try await invalidated.evaluateAccessControl(access, operation: .useItem, localizedReason: "Read")
            }
            #expect(prompts.count.current == 0)
        }

        @Test("kSecAttrSyncViewHint is an attribute no Keystone item class has: errSecNoSuchAttr")
        func syncViewHint() {
            let attributes: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "views",
                                             kSecAttrSyncViewHint as String: "Passwords", kSecValueData as String: Data("v".utf8)]
            #expect(SecItemAdd(attributes as CFDictionary, nil) == errSecNoSuchAttr)
        }
    }
}
#endif
