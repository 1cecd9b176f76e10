// Linux-only: these tests use KeychainServices' own API (the default engine, SecItemBridge), which Apple
// platforms replace with the Security framework. AppleStyleCode.swift compiles on both.
#if !canImport(Darwin)
import DefaultKeychainLock
import Foundation
import KeychainEngine
import KeychainServices
import Testing

// Tests that touch no keychain: value conversion, constants, status codes, messages, error bridging.
// They run in parallel with everything else, so they never call a SecItem function or LAContext's evaluations:
// those use the process-wide default keychain (LAContext: its authenticator), which only suites marked
// `.ownsDefaultKeychain` set.

@Suite("Values passed in SecItem dictionaries")
struct ValueConversionTests {
    /// A value to convert, made inside the test (values typed `Any` cannot be test arguments).
    struct Sample: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let expected: KeychainValue?
        let make: @Sendable () -> Any
        init(_ name: String, _ expected: KeychainValue?, _ make: @escaping @Sendable () -> Any) {
            testDescription = name
            self.expected = expected
            self.make = make
        }
    }

    @Test("Booleans stay Booleans and numbers stay numbers, even NSNumber 0 and 1", arguments: [
        Sample("true", .bool(true)) { true },
        Sample("false", .bool(false)) { false },
        Sample("kCFBooleanTrue", .bool(true)) { kCFBooleanTrue as Any },
        Sample("kCFBooleanFalse", .bool(false)) { kCFBooleanFalse as Any },
        Sample("NSNumber(value: true)", .bool(true)) { NSNumber(value: true) },
        Sample("NSNumber(value: 1)", .number(1)) { NSNumber(value: 1) },
        Sample("NSNumber(value: 0)", .number(0)) { NSNumber(value: 0) },
        Sample("1 as AnyObject", .number(1)) { 1 as AnyObject },
        Sample("1", .number(1)) { 1 },
        Sample("0", .number(0)) { 0 },
        Sample("Int32(443)", .number(443)) { Int32(443) },
        Sample("UInt16(8080)", .number(8080)) { UInt16(8080) },
        Sample("UInt(7)", .number(7)) { UInt(7) },
        Sample("Int64.min", .number(Int64.min)) { Int64.min },
        Sample("NSNumber(value: Int8(1))", .number(1)) { NSNumber(value: Int8(1)) },
        Sample("2.0", .number(2)) { 2.0 },
        Sample("1.5", .double(1.5)) { 1.5 },
        Sample("Float(0.25)", .double(0.25)) { Float(0.25) },
    ])
    func numbers(_ sample: Sample) {
        #expect(SecItemBridge.keychainValue(sample.make()) == sample.expected)
    }

    @Test("strings, bytes and dates in their Swift and Foundation forms")
    func objects() {
        let date = Date(timeIntervalSinceReferenceDate: 700_000_000)
        #expect(SecItemBridge.keychainValue("acct") == .string("acct"))
        #expect(SecItemBridge.keychainValue(NSString(string: "acct")) == .string("acct"))
        #expect(SecItemBridge.keychainValue("xacct".dropFirst()) == .string("acct"))
        #expect(SecItemBridge.keychainValue(Data([1, 2])) == .data(Data([1, 2])))
        #expect(SecItemBridge.keychainValue(NSData(data: Data([1, 2]))) == .data(Data([1, 2])))
        #expect(SecItemBridge.keychainValue([UInt8]([1, 2])) == .data(Data([1, 2])))
        #expect(SecItemBridge.keychainValue(date) == .date(date))
        #expect(SecItemBridge.keychainValue(NSDate(timeIntervalSinceReferenceDate: 700_000_000)) == .date(date))
    }

    @Test("types no attribute has are refused", arguments: [
        Sample("NSNull()", nil) { NSNull() },
        Sample("NSObject()", nil) { NSObject() },
        Sample("[1, 2]", nil) { [1, 2] },
        Sample("[\"a\": 1]", nil) { ["a": 1] },
        Sample("UInt64.max", nil) { UInt64.max },
        Sample("URL", nil) { URL(fileURLWithPath: "/") },
        Sample("Optional<String>.none", nil) { Optional<String>.none as Any },
    ])
    func refused(_ sample: Sample) {
        #expect(SecItemBridge.keychainValue(sample.make()) == nil)
    }

    @Test("dictionaries keyed by String, CFString or NSString convert; other keys are errSecParam")
    func keys() throws {
        let cf: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrPort: 1]
        #expect(try SecItemBridge.query(cf as CFDictionary) == ["class": .string("genp"), "port": .number(1)])
        let objects: [String: AnyObject] = [kSecClass as String: kSecClassGenericPassword as NSString, kSecReturnData as String: kCFBooleanTrue]
        #expect(try SecItemBridge.query(objects as CFDictionary) == ["class": .string("genp"), "r_Data": .bool(true)])
        let ns: [AnyHashable: Any] = [NSString(string: "svce"): "s"]
        #expect(try SecItemBridge.query(ns) == ["svce": .string("s")])
        let numeric: [AnyHashable: Any] = [kSecClass: kSecClassGenericPassword, 42: "x"]
        #expect(throws: EngineError.self) { try SecItemBridge.query(numeric) }
    }

    @Test("results come back as Foundation objects that Apple-style casts accept")
    func results() throws {
        let array = SecItemBridge.object(.array([.attributes(["acct": .string("a"), "v_Data": .data(Data([7])), "port": .number(443),
                                                              "sync": .bool(false), "cdat": .date(Date(timeIntervalSinceReferenceDate: 0))])]))
        let items = try #require(array as? [[String: Any]])
        #expect(items[0][kSecAttrAccount as String] as? String == "a")
        #expect(items[0][kSecValueData as String] as? Data == Data([7]))
        #expect(items[0][kSecAttrPort as String] as? Int == 443)
        #expect(items[0][kSecAttrSynchronizable as String] as? Bool == false)
        #expect(items[0][kSecAttrCreationDate as String] as? Date == Date(timeIntervalSinceReferenceDate: 0))
        #expect(SecItemBridge.object(ItemResult.data(Data([1]))) is NSData)
        #expect((SecItemBridge.object(.array([.data(Data([1])), .data(Data([2]))])) as? [Data]) == [Data([1]), Data([2])])
        // A number read back converts to the same typed value: it is not mistaken for a Boolean.
        #expect(SecItemBridge.keychainValue(SecItemBridge.object(KeychainValue.number(1))) == .number(1))
        #expect(SecItemBridge.keychainValue(SecItemBridge.object(KeychainValue.bool(true))) == .bool(true))
    }
}

@Suite("Constants and status codes")
struct ConstantTests {
    @Test("kSec constants carry Apple's raw strings", arguments: [
        (kSecClass, "class"), (kSecClassGenericPassword, "genp"), (kSecClassInternetPassword, "inet"), (kSecClassCertificate, "cert"),
        (kSecClassKey, "keys"), (kSecClassIdentity, "idnt"), (kSecAttrAccessible, "pdmn"), (kSecAttrAccessControl, "accc"),
        (kSecAttrAccessGroup, "agrp"), (kSecAttrCreationDate, "cdat"), (kSecAttrModificationDate, "mdat"), (kSecAttrDescription, "desc"),
        (kSecAttrComment, "icmt"), (kSecAttrCreator, "crtr"), (kSecAttrType, "type"), (kSecAttrLabel, "labl"), (kSecAttrIsInvisible, "invi"),
        (kSecAttrIsNegative, "nega"), (kSecAttrAccount, "acct"), (kSecAttrService, "svce"), (kSecAttrGeneric, "gena"),
        (kSecAttrSynchronizable, "sync"), (kSecAttrSynchronizableAny, "syna"), (kSecAttrServer, "srvr"), (kSecAttrProtocol, "ptcl"),
        (kSecAttrPort, "port"), (kSecAttrPath, "path"), (kSecAttrSecurityDomain, "sdmn"), (kSecAttrAuthenticationType, "atyp"),
        (kSecAttrApplicationTag, "atag"), (kSecAttrApplicationLabel, "klbl"), (kSecAttrKeyClass, "kcls"), (kSecAttrKeyType, "type"),
        (kSecAttrKeySizeInBits, "bsiz"), (kSecAttrTokenID, "tkid"), (kSecAttrPersistentReference, "persistref"),
        (kSecAttrAccessibleWhenUnlocked, "ak"), (kSecAttrAccessibleAfterFirstUnlock, "ck"), (kSecAttrAccessibleAlways, "dk"),
        (kSecAttrAccessibleWhenUnlockedThisDeviceOnly, "aku"), (kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly, "cku"),
        (kSecAttrAccessibleAlwaysThisDeviceOnly, "dku"), (kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, "akpu"),
        (kSecMatchLimit, "m_Limit"), (kSecMatchLimitOne, "m_LimitOne"), (kSecMatchLimitAll, "m_LimitAll"), (kSecReturnData, "r_Data"),
        (kSecReturnAttributes, "r_Attributes"), (kSecReturnRef, "r_Ref"), (kSecReturnPersistentRef, "r_PersistentRef"),
        (kSecValueData, "v_Data"), (kSecValueRef, "v_Ref"), (kSecValuePersistentRef, "v_PersistentRef"),
        (kSecUseDataProtectionKeychain, "nleg"), (kSecUseAuthenticationUI, "u_AuthUI"), (kSecUseAuthenticationUIAllow, "u_AuthUIA"),
        (kSecUseAuthenticationUIFail, "u_AuthUIF"), (kSecUseAuthenticationUISkip, "u_AuthUIS"), (kSecUseAuthenticationContext, "u_AuthCtx"),
        (kSecUseOperationPrompt, "u_OpPrompt"), (kSecUseNoAuthenticationUI, "u_NoAuthUI"), (kSecAttrTokenIDSecureEnclave, "com.apple.setoken"),
        (kSecAttrSubject, "subj"), (kSecAttrIssuer, "issr"), (kSecAttrSerialNumber, "slnr"), (kSecAttrSubjectKeyID, "skid"),
        (kSecAttrPublicKeyHash, "pkhh"), (kSecAttrCertificateType, "ctyp"), (kSecAttrCertificateEncoding, "cenc"),
        (kSecAttrKeyClassPublic, "0"), (kSecAttrKeyClassPrivate, "1"), (kSecAttrKeyClassSymmetric, "2"), (kSecAttrKeyTypeRSA, "42"),
        (kSecAttrKeyTypeEC, "73"), (kSecAttrKeyTypeECSECPrimeRandom, "73"), (kSecAttrIsPermanent, "perm"), (kSecAttrEffectiveKeySize, "esiz"),
        (kSecAttrStartDate, "sdat"), (kSecAttrEndDate, "edat"), (kSecAttrCanSign, "sign"),
        (kSecAttrProtocolFTP, "ftp "), (kSecAttrProtocolFTPAccount, "ftpa"), (kSecAttrProtocolHTTP, "http"), (kSecAttrProtocolIRC, "irc "),
        (kSecAttrProtocolNNTP, "nntp"), (kSecAttrProtocolPOP3, "pop3"), (kSecAttrProtocolSMTP, "smtp"), (kSecAttrProtocolSOCKS, "sox "),
        (kSecAttrProtocolIMAP, "imap"), (kSecAttrProtocolLDAP, "ldap"), (kSecAttrProtocolAppleTalk, "atlk"), (kSecAttrProtocolAFP, "afp "),
        (kSecAttrProtocolTelnet, "teln"), (kSecAttrProtocolSSH, "ssh "), (kSecAttrProtocolFTPS, "ftps"), (kSecAttrProtocolHTTPS, "htps"),
        (kSecAttrProtocolHTTPProxy, "htpx"), (kSecAttrProtocolHTTPSProxy, "htsx"), (kSecAttrProtocolFTPProxy, "ftpx"),
        (kSecAttrProtocolSMB, "smb "), (kSecAttrProtocolRTSP, "rtsp"), (kSecAttrProtocolRTSPProxy, "rtsx"), (kSecAttrProtocolDAAP, "daap"),
        (kSecAttrProtocolEPPC, "eppc"), (kSecAttrProtocolIPP, "ipp "), (kSecAttrProtocolNNTPS, "ntps"), (kSecAttrProtocolLDAPS, "ldps"),
        (kSecAttrProtocolTelnetS, "tels"), (kSecAttrProtocolIMAPS, "imps"), (kSecAttrProtocolIRCS, "ircs"), (kSecAttrProtocolPOP3S, "pops"),
        (kSecAttrAuthenticationTypeNTLM, "ntlm"), (kSecAttrAuthenticationTypeMSN, "msna"), (kSecAttrAuthenticationTypeDPA, "dpaa"),
        (kSecAttrAuthenticationTypeRPA, "rpaa"), (kSecAttrAuthenticationTypeHTTPBasic, "http"),
        (kSecAttrAuthenticationTypeHTTPDigest, "httd"), (kSecAttrAuthenticationTypeHTMLForm, "form"),
        (kSecAttrAuthenticationTypeDefault, "dflt"),
    ] as [(CFString, String)])
    func constant(_ constant: CFString, _ raw: String) {
        #expect(constant == raw)
    }

    @Test("the constants the engine names agree with the engine's keys")
    func engineKeys() {
        #expect([kSecClass, kSecAttrAccount, kSecAttrService, kSecAttrSynchronizable, kSecAttrSynchronizableAny, kSecValueData,
                  kSecReturnData, kSecMatchLimitAll, kSecUseAuthenticationContext, kSecAttrTokenIDSecureEnclave]
                 == [Key.class, Key.account, Key.service, Key.synchronizable, Key.synchronizableAny, Key.valueData,
                     Key.returnData, Key.matchLimitAll, Key.useAuthenticationContext, Key.tokenIDSecureEnclave])
    }

    @Test("errSec codes are Apple's and the engine's", arguments: [
        (errSecSuccess, Status.success), (errSecUnimplemented, Status.unimplemented), (errSecParam, Status.param),
        (errSecAllocate, Status.allocate), (errSecUserCanceled, Status.userCanceled), (errSecNotAvailable, Status.notAvailable),
        (errSecAuthFailed, Status.authFailed), (errSecNoSuchKeychain, Status.noSuchKeychain), (errSecDuplicateItem, Status.duplicateItem),
        (errSecItemNotFound, Status.itemNotFound), (errSecNoSuchAttr, Status.noSuchAttr),
        (errSecInteractionNotAllowed, Status.interactionNotAllowed), (errSecInteractionRequired, Status.interactionRequired),
        (errSecDecode, Status.decode), (errSecMissingEntitlement, Status.missingEntitlement),
        (errSecServiceNotAvailable, Status.serviceNotAvailable), (errSecInvalidKeychain, Status.invalidKeychain),
        (errSecWrongSecVersion, Status.wrongSecVersion), (errSecDuplicateKeychain, Status.duplicateKeychain),
    ] as [(OSStatus, Int32)])
    func codes(_ constant: OSStatus, _ engine: Int32) {
        #expect(constant == engine)
    }

    @Test("the SecItem-specific parameter errors are errSecParam, as in SecBase.h")
    func parameterAliases() {
        let aliases = [errSecItemInvalidKey, errSecItemInvalidKeyType, errSecItemInvalidValue, errSecItemClassMissing,
                       errSecItemMatchUnsupported, errSecItemIllegalQuery, errSecValueRefUnsupported, errSecValuePersistentRefUnsupported,
                       errSecReturnDataUnsupported, errSecReturnAttributesUnsupported, errSecReturnRefUnsupported,
                       errSecReturnPersistentRefUnsupported, errSecMatchLimitUnsupported, errSecReturnMissingPointer,
                       errSecUseItemListUnsupported, errSecUseKeychainUnsupported, errSecUseKeychainListUnsupported]
        #expect(aliases.allSatisfy { $0 == -50 })
        #expect(errSecInternalError == -67671 && errSecInvalidEncoding == -67853 && errSecDiskFull == -34)
    }

    @Test("SecCopyErrorMessageString gives Apple's messages, and OSStatus <code> for unknown codes", arguments: [
        (errSecSuccess, "No error."),
        (errSecUnimplemented, "Function or operation not implemented."),
        (errSecParam, "One or more parameters passed to a function were not valid."),
        (errSecAllocate, "Failed to allocate memory."),
        (errSecUserCanceled, "User canceled the operation."),
        (errSecNotAvailable, "No keychain is available. You may need to restart your computer."),
        (errSecAuthFailed, "The user name or passphrase you entered is not correct."),
        (errSecNoSuchKeychain, "The specified keychain could not be found."),
        (errSecDuplicateItem, "The specified item already exists in the keychain."),
        (errSecItemNotFound, "The specified item could not be found in the keychain."),
        (errSecNoSuchAttr, "The specified attribute does not exist."),
        (errSecInteractionNotAllowed, "User interaction is not allowed."),
        (errSecInteractionRequired, "User interaction is required, but is currently not allowed."),
        (errSecDecode, "Unable to decode the provided data."),
        (errSecMissingEntitlement, "A required entitlement isn't present."),
        (errSecServiceNotAvailable, "The required service is not available."),
        (errSecInvalidExtendedKeyUsage, "The extended key usage is not valid."),
        (errSecNotTrusted, "The trust policy was not trusted."),
        (errSecHostNameMismatch, "A host name mismatch has occurred."),
        (errSecCertificateExpired, "An expired certificate was detected."),
        (OSStatus(-99_999), "OSStatus -99999"),
        (OSStatus(12_345), "OSStatus 12345"),
    ] as [(OSStatus, String)])
    func messages(_ status: OSStatus, _ message: String) {
        #expect(SecCopyErrorMessageString(status, nil) as String? == message)
    }

    @Test("access-control flags have Apple's raw values")
    func flags() {
        #expect(SecAccessControlCreateFlags.userPresence.rawValue == 1)
        #expect(SecAccessControlCreateFlags.biometryAny.rawValue == 2)
        #expect(SecAccessControlCreateFlags.biometryCurrentSet.rawValue == 8)
        #expect(SecAccessControlCreateFlags.devicePasscode.rawValue == 16)
        #expect(SecAccessControlCreateFlags.companion.rawValue == 32)
        #expect(SecAccessControlCreateFlags.or.rawValue == 1 << 14)
        #expect(SecAccessControlCreateFlags.and.rawValue == 1 << 15)
        #expect(SecAccessControlCreateFlags.privateKeyUsage.rawValue == 1 << 30)
        #expect(SecAccessControlCreateFlags.applicationPassword.rawValue == 1 << 31)
        #expect(SecAccessControlCreateFlags.biometryAny.rawValue == AccessControlFlags.biometryAny.rawValue)
    }

    @Test("SecAccessControlCreateWithFlags takes every protection class and refuses anything else")
    func createAccessControl() throws {
        for protection in [kSecAttrAccessibleWhenUnlocked, kSecAttrAccessibleAfterFirstUnlock, kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
                           kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly] {
            var error: Unmanaged<CFError>?
            let access = try #require(SecAccessControlCreateWithFlags(kCFAllocatorDefault, protection, [.biometryAny, .or, .devicePasscode], &error))
            #expect(error == nil)
            #expect(access.accessControl.accessibility.rawValue == protection)
            #expect(access.accessControl.flags == [.biometryAny, .or, .devicePasscode])
        }
        var error: Unmanaged<CFError>?
        #expect(SecAccessControlCreateWithFlags(nil, kSecAttrAccessGroup, .userPresence, &error) == nil)
        let nsError = try #require(error?.takeRetainedValue())
        #expect(nsError.code == Int(errSecParam))
        #expect(SecAccessControlCreateWithFlags(nil, 42 as NSNumber, .userPresence, nil) == nil)
    }
}

@Suite("LocalAuthentication names", .serialized, .ownsDefaultKeychain)
struct LocalAuthenticationNameTests {
    @Test("LAError codes have Apple's raw values and bridge to NSError in LAErrorDomain", arguments: [
        (LAError.Code.authenticationFailed, -1), (.userCancel, -2), (.userFallback, -3), (.systemCancel, -4), (.passcodeNotSet, -5),
        (.biometryNotAvailable, -6), (.biometryNotEnrolled, -7), (.biometryLockout, -8), (.appCancel, -9), (.invalidContext, -10),
        (.notInteractive, -1004),
    ] as [(LAError.Code, Int)])
    func codes(_ code: LAError.Code, _ raw: Int) {
        #expect(code.rawValue == raw)
        let error = LAError(code) as NSError
        #expect(error.domain == "com.apple.LocalAuthentication")
        #expect(error.code == raw)
    }

    @Test("catch LAError.code patterns match only their code")
    func patterns() {
        let error: any Error = LAError(.userFallback)
        switch error {
        case LAError.userCancel: Issue.record("matched the wrong code")
        case LAError.userFallback: break
        default: Issue.record("matched nothing")
        }
    }

    @Test("the reuse duration is clamped to LATouchIDAuthenticationMaximumAllowableReuseDuration")
    func reuseDuration() {
        let context = LAContext()
        #expect(context.touchIDAuthenticationAllowableReuseDuration == 0)
        context.touchIDAuthenticationAllowableReuseDuration = 30
        #expect(context.touchIDAuthenticationAllowableReuseDuration == 30)
        context.touchIDAuthenticationAllowableReuseDuration = 10_000
        #expect(context.touchIDAuthenticationAllowableReuseDuration == LATouchIDAuthenticationMaximumAllowableReuseDuration)
        #expect(context.context.reuseDuration == 300)
    }

    @Test("texts are kept; biometry is none; canEvaluatePolicy reports through an NSError pointer")
    func properties() {
        // An engine whose authenticator has no biometry and accepts everyone: LAContext asks the current engine's.
        KeychainServicesDefaults.setEngine(KeychainEngine(authenticator: FixedAuthenticator(.success)))
        defer { KeychainServicesDefaults.setEngine(nil) }
        let context = LAContext()
        context.localizedReason = "Unlock your notes"
        context.localizedCancelTitle = "Not now"
        context.localizedFallbackTitle = "Use password"
        #expect(context.localizedReason == "Unlock your notes")
        #expect(context.localizedCancelTitle == "Not now")
        #expect(context.localizedFallbackTitle == "Use password")
        #expect(context.biometryType == .none)
        var error: NSError?
        #expect(!context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        #expect(error?.domain == LAError.errorDomain && error?.code == LAError.Code.biometryNotAvailable.rawValue)
        error = nil
        #expect(context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        #expect(error == nil)
        context.invalidate()
        #expect(!context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        #expect(error?.code == LAError.Code.invalidContext.rawValue)
    }
}
#endif
