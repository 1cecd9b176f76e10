/// Apple's `OSStatus` result codes the engine produces, and their messages.
///
/// The values and messages are those of Security's SecBase.h and `SecCopyErrorMessageString`. An ``EngineError``
/// carries one as its ``EngineError/status``, typed as ``EngineError/Code``; ``name(for:)`` and ``message(for:)``
/// spell them out.
public enum Status {
    /// `errSecSuccess` (0).
    public static let success: Int32 = 0
    /// `errSecUnimplemented` (-4).
    public static let unimplemented: Int32 = -4
    /// `errSecDiskFull` (-34).
    public static let diskFull: Int32 = -34
    /// `errSecIO` (-36).
    public static let io: Int32 = -36
    /// `errSecParam` (-50).
    public static let param: Int32 = -50
    /// `errSecWrPerm` (-61).
    public static let wrPerm: Int32 = -61
    /// `errSecAllocate` (-108).
    public static let allocate: Int32 = -108
    /// `errSecUserCanceled` (-128).
    public static let userCanceled: Int32 = -128
    /// `errSecBadReq` (-909).
    public static let badReq: Int32 = -909
    /// `errSecInternalComponent` (-2070).
    public static let internalComponent: Int32 = -2070
    /// `errSecNotAvailable` (-25291).
    public static let notAvailable: Int32 = -25291
    /// `errSecReadOnly` (-25292).
    public static let readOnly: Int32 = -25292
    /// `errSecAuthFailed` (-25293).
    public static let authFailed: Int32 = -25293
    /// `errSecNoSuchKeychain` (-25294).
    public static let noSuchKeychain: Int32 = -25294
    /// `errSecInvalidKeychain` (-25295).
    public static let invalidKeychain: Int32 = -25295
    /// `errSecDuplicateKeychain` (-25296).
    public static let duplicateKeychain: Int32 = -25296
    /// `errSecDuplicateCallback` (-25297).
    public static let duplicateCallback: Int32 = -25297
    /// `errSecInvalidCallback` (-25298).
    public static let invalidCallback: Int32 = -25298
    /// `errSecDuplicateItem` (-25299).
    public static let duplicateItem: Int32 = -25299
    /// `errSecItemNotFound` (-25300).
    public static let itemNotFound: Int32 = -25300
    /// `errSecBufferTooSmall` (-25301).
    public static let bufferTooSmall: Int32 = -25301
    /// `errSecDataTooLarge` (-25302).
    public static let dataTooLarge: Int32 = -25302
    /// `errSecNoSuchAttr` (-25303).
    public static let noSuchAttr: Int32 = -25303
    /// `errSecInvalidItemRef` (-25304).
    public static let invalidItemRef: Int32 = -25304
    /// `errSecInvalidSearchRef` (-25305).
    public static let invalidSearchRef: Int32 = -25305
    /// `errSecNoSuchClass` (-25306).
    public static let noSuchClass: Int32 = -25306
    /// `errSecNoDefaultKeychain` (-25307).
    public static let noDefaultKeychain: Int32 = -25307
    /// `errSecInteractionNotAllowed` (-25308).
    public static let interactionNotAllowed: Int32 = -25308
    /// `errSecReadOnlyAttr` (-25309).
    public static let readOnlyAttr: Int32 = -25309
    /// `errSecWrongSecVersion` (-25310).
    public static let wrongSecVersion: Int32 = -25310
    /// `errSecKeySizeNotAllowed` (-25311).
    public static let keySizeNotAllowed: Int32 = -25311
    /// `errSecNoStorageModule` (-25312).
    public static let noStorageModule: Int32 = -25312
    /// `errSecNoCertificateModule` (-25313).
    public static let noCertificateModule: Int32 = -25313
    /// `errSecNoPolicyModule` (-25314).
    public static let noPolicyModule: Int32 = -25314
    /// `errSecInteractionRequired` (-25315).
    public static let interactionRequired: Int32 = -25315
    /// `errSecDataNotAvailable` (-25316).
    public static let dataNotAvailable: Int32 = -25316
    /// `errSecDataNotModifiable` (-25317).
    public static let dataNotModifiable: Int32 = -25317
    /// `errSecCreateChainFailed` (-25318).
    public static let createChainFailed: Int32 = -25318
    /// `errSecInvalidPrefsDomain` (-25319).
    public static let invalidPrefsDomain: Int32 = -25319
    /// `errSecInDarkWake` (-25320).
    public static let inDarkWake: Int32 = -25320
    /// `errSecACLNotSimple` (-25240).
    public static let aclNotSimple: Int32 = -25240
    /// `errSecPolicyNotFound` (-25241).
    public static let policyNotFound: Int32 = -25241
    /// `errSecInvalidTrustSetting` (-25242).
    public static let invalidTrustSetting: Int32 = -25242
    /// `errSecNoAccessForItem` (-25243).
    public static let noAccessForItem: Int32 = -25243
    /// `errSecInvalidOwnerEdit` (-25244).
    public static let invalidOwnerEdit: Int32 = -25244
    /// `errSecTrustNotAvailable` (-25245).
    public static let trustNotAvailable: Int32 = -25245
    /// `errSecUnsupportedFormat` (-25256).
    public static let unsupportedFormat: Int32 = -25256
    /// `errSecUnknownFormat` (-25257).
    public static let unknownFormat: Int32 = -25257
    /// `errSecKeyIsSensitive` (-25258).
    public static let keyIsSensitive: Int32 = -25258
    /// `errSecMultiplePrivKeys` (-25259).
    public static let multiplePrivKeys: Int32 = -25259
    /// `errSecPassphraseRequired` (-25260).
    public static let passphraseRequired: Int32 = -25260
    /// `errSecInvalidPasswordRef` (-25261).
    public static let invalidPasswordRef: Int32 = -25261
    /// `errSecInvalidTrustSettings` (-25262).
    public static let invalidTrustSettings: Int32 = -25262
    /// `errSecNoTrustSettings` (-25263).
    public static let noTrustSettings: Int32 = -25263
    /// `errSecPkcs12VerifyFailure` (-25264).
    public static let pkcs12VerifyFailure: Int32 = -25264
    /// `errSecNotSigner` (-26267).
    public static let notSigner: Int32 = -26267
    /// `errSecDecode` (-26275).
    public static let decode: Int32 = -26275
    /// `errSecServiceNotAvailable` (-67585).
    public static let serviceNotAvailable: Int32 = -67585
    /// `errSecInsufficientClientID` (-67586).
    public static let insufficientClientID: Int32 = -67586
    /// `errSecDeviceReset` (-67587).
    public static let deviceReset: Int32 = -67587
    /// `errSecDeviceFailed` (-67588).
    public static let deviceFailed: Int32 = -67588
    /// `errSecInternalError` (-67671).
    public static let internalError: Int32 = -67671
    /// `errSecQuotaExceeded` (-67596).
    public static let quotaExceeded: Int32 = -67596
    /// `errSecInvalidData` (-67673).
    public static let invalidData: Int32 = -67673
    /// `errSecMissingEntitlement` (-34018).
    public static let missingEntitlement: Int32 = -34018
    /// `errSecInvalidEncoding` (-67853).
    public static let invalidEncoding: Int32 = -67853
    /// `errSecInvalidKey` (-67712).
    public static let invalidKey: Int32 = -67712
    /// `errSecUnsupportedOperation` (-67721).
    public static let unsupportedOperation: Int32 = -67721
    /// `errSecPolicyDenied` (-67723).
    public static let policyDenied: Int32 = -67723
    /// `errSecWaitForCallback` (-67730).
    public static let waitForCallback: Int32 = -67730
    /// `errSecRestrictedAPI` (-34020).
    public static let restrictedAPI: Int32 = -34020
    // Trust evaluation (SecTrust's errors; SecBase.h).
    /// `errSecHostNameMismatch` (-67602).
    public static let hostNameMismatch: Int32 = -67602
    /// `errSecInvalidExtendedKeyUsage` (-67609).
    public static let invalidExtendedKeyUsage: Int32 = -67609
    /// `errSecUnsupportedKeySize` (-67735).
    public static let unsupportedKeySize: Int32 = -67735
    /// `errSecInvalidDigestAlgorithm` (-67815).
    public static let invalidDigestAlgorithm: Int32 = -67815
    /// `errSecCertificateExpired` (-67818).
    public static let certificateExpired: Int32 = -67818
    /// `errSecCertificateNotValidYet` (-67819).
    public static let certificateNotValidYet: Int32 = -67819
    /// `errSecNotTrusted` (-67843).
    public static let notTrusted: Int32 = -67843
    /// `errSecCertificateValidityPeriodTooLong` (-67901).
    public static let certificateValidityPeriodTooLong: Int32 = -67901

    /// The readable names of the codes above, `errSec…` as Apple spells them.
    package static let names: [Int32: String] = [
        success: "errSecSuccess", unimplemented: "errSecUnimplemented", diskFull: "errSecDiskFull", io: "errSecIO",
        param: "errSecParam", wrPerm: "errSecWrPerm", allocate: "errSecAllocate", userCanceled: "errSecUserCanceled",
        badReq: "errSecBadReq", internalComponent: "errSecInternalComponent", notAvailable: "errSecNotAvailable",
        readOnly: "errSecReadOnly", authFailed: "errSecAuthFailed", noSuchKeychain: "errSecNoSuchKeychain",
        invalidKeychain: "errSecInvalidKeychain", duplicateKeychain: "errSecDuplicateKeychain",
        duplicateCallback: "errSecDuplicateCallback", invalidCallback: "errSecInvalidCallback",
        duplicateItem: "errSecDuplicateItem", itemNotFound: "errSecItemNotFound", bufferTooSmall: "errSecBufferTooSmall",
        dataTooLarge: "errSecDataTooLarge", noSuchAttr: "errSecNoSuchAttr", invalidItemRef: "errSecInvalidItemRef",
        invalidSearchRef: "errSecInvalidSearchRef", noSuchClass: "errSecNoSuchClass", noDefaultKeychain: "errSecNoDefaultKeychain",
        interactionNotAllowed: "errSecInteractionNotAllowed", readOnlyAttr: "errSecReadOnlyAttr",
        wrongSecVersion: "errSecWrongSecVersion", keySizeNotAllowed: "errSecKeySizeNotAllowed",
        noStorageModule: "errSecNoStorageModule", noCertificateModule: "errSecNoCertificateModule",
        noPolicyModule: "errSecNoPolicyModule", interactionRequired: "errSecInteractionRequired",
        dataNotAvailable: "errSecDataNotAvailable", dataNotModifiable: "errSecDataNotModifiable",
        createChainFailed: "errSecCreateChainFailed", invalidPrefsDomain: "errSecInvalidPrefsDomain",
        inDarkWake: "errSecInDarkWake", aclNotSimple: "errSecACLNotSimple", policyNotFound: "errSecPolicyNotFound",
        invalidTrustSetting: "errSecInvalidTrustSetting", noAccessForItem: "errSecNoAccessForItem",
        invalidOwnerEdit: "errSecInvalidOwnerEdit", trustNotAvailable: "errSecTrustNotAvailable",
        unsupportedFormat: "errSecUnsupportedFormat", unknownFormat: "errSecUnknownFormat",
        keyIsSensitive: "errSecKeyIsSensitive", multiplePrivKeys: "errSecMultiplePrivKeys",
        passphraseRequired: "errSecPassphraseRequired", invalidPasswordRef: "errSecInvalidPasswordRef",
        invalidTrustSettings: "errSecInvalidTrustSettings", noTrustSettings: "errSecNoTrustSettings",
        pkcs12VerifyFailure: "errSecPkcs12VerifyFailure", notSigner: "errSecNotSigner", decode: "errSecDecode",
        serviceNotAvailable: "errSecServiceNotAvailable", insufficientClientID: "errSecInsufficientClientID",
        deviceReset: "errSecDeviceReset", deviceFailed: "errSecDeviceFailed", internalError: "errSecInternalError",
        quotaExceeded: "errSecQuotaExceeded",
        invalidData: "errSecInvalidData", missingEntitlement: "errSecMissingEntitlement",
        invalidEncoding: "errSecInvalidEncoding", invalidKey: "errSecInvalidKey",
        unsupportedOperation: "errSecUnsupportedOperation", policyDenied: "errSecPolicyDenied",
        waitForCallback: "errSecWaitForCallback", restrictedAPI: "errSecRestrictedAPI",
        hostNameMismatch: "errSecHostNameMismatch", invalidExtendedKeyUsage: "errSecInvalidExtendedKeyUsage",
        unsupportedKeySize: "errSecUnsupportedKeySize", invalidDigestAlgorithm: "errSecInvalidDigestAlgorithm",
        certificateExpired: "errSecCertificateExpired", certificateNotValidYet: "errSecCertificateNotValidYet",
        notTrusted: "errSecNotTrusted", certificateValidityPeriodTooLong: "errSecCertificateValidityPeriodTooLong",
    ]

    /// Apple's messages (`SecCopyErrorMessageString`) for the codes above.
    package static let messages: [Int32: String] = [
        success: "No error.",
        unimplemented: "Function or operation not implemented.",
        diskFull: "The disk is full.",
        io: "I/O error.",
        param: "One or more parameters passed to a function were not valid.",
        wrPerm: "Write permissions error.",
        allocate: "Failed to allocate memory.",
        userCanceled: "User canceled the operation.",
        badReq: "Bad parameter or invalid state for operation.",
        internalComponent: "An internal component failed.",
        notAvailable: "No keychain is available. You may need to restart your computer.",
        readOnly: "This keychain cannot be modified.",
        authFailed: "The user name or passphrase you entered is not correct.",
        noSuchKeychain: "The specified keychain could not be found.",
        invalidKeychain: "The specified keychain is not a valid keychain file.",
        duplicateKeychain: "A keychain with the same name already exists.",
        duplicateCallback: "The specified callback function is already installed.",
        invalidCallback: "The specified callback function is not valid.",
        duplicateItem: "The specified item already exists in the keychain.",
        itemNotFound: "The specified item could not be found in the keychain.",
        bufferTooSmall: "There is not enough memory available to use the specified item.",
        dataTooLarge: "This item contains information which is too large or in a format that cannot be displayed.",
        noSuchAttr: "The specified attribute does not exist.",
        invalidItemRef: "The specified item is no longer valid. It may have been deleted from the keychain.",
        invalidSearchRef: "Unable to search the current keychain.",
        noSuchClass: "The specified item does not appear to be a valid keychain item.",
        noDefaultKeychain: "A default keychain could not be found.",
        interactionNotAllowed: "User interaction is not allowed.",
        readOnlyAttr: "The specified attribute could not be modified.",
        wrongSecVersion: "This keychain was created by a different version of the system software and cannot be opened.",
        keySizeNotAllowed: "This item specifies a key size which is too large or too small.",
        noStorageModule: "A required component (data storage module) could not be loaded. You may need to restart your computer.",
        noCertificateModule: "A required component (certificate module) could not be loaded. You may need to restart your computer.",
        noPolicyModule: "A required component (policy module) could not be loaded. You may need to restart your computer.",
        interactionRequired: "User interaction is required, but is currently not allowed.",
        dataNotAvailable: "The contents of this item cannot be retrieved.",
        dataNotModifiable: "The contents of this item cannot be modified.",
        createChainFailed: "One or more certificates required to validate this certificate cannot be found.",
        invalidPrefsDomain: "The specified preferences domain is not valid.",
        inDarkWake: "In dark wake, no UI possible",
        aclNotSimple: "The specified access control list is not in standard (simple) form.",
        policyNotFound: "The specified policy cannot be found.",
        invalidTrustSetting: "The specified trust setting is invalid.",
        noAccessForItem: "The specified item has no access control.",
        invalidOwnerEdit: "Invalid attempt to change the owner of this item.",
        trustNotAvailable: "No trust results are available.",
        unsupportedFormat: "Import/Export format unsupported.",
        unknownFormat: "Unknown format in import.",
        keyIsSensitive: "Key material must be wrapped for export.",
        multiplePrivKeys: "An attempt was made to import multiple private keys.",
        passphraseRequired: "Passphrase is required for import/export.",
        invalidPasswordRef: "The password reference was invalid.",
        invalidTrustSettings: "The Trust Settings Record was corrupted.",
        noTrustSettings: "No Trust Settings were found.",
        pkcs12VerifyFailure: "MAC verification failed during PKCS12 Import.",
        notSigner: "A certificate was not signed by its proposed parent.",
        decode: "Unable to decode the provided data.",
        serviceNotAvailable: "The required service is not available.",
        insufficientClientID: "The client ID is not correct.",
        deviceReset: "A device reset has occurred.",
        deviceFailed: "A device failure has occurred.",
        internalError: "An internal error has occurred.",
        quotaExceeded: "The quota was exceeded.",
        invalidData: "The data is not valid.",
        missingEntitlement: "A required entitlement isn't present.",
        invalidEncoding: "The encoding is not valid.",
        invalidKey: "The key is not valid.",
        unsupportedOperation: "The operation is not supported.",
        policyDenied: "The policy was denied.",
        waitForCallback: "Wait for callback.",
        restrictedAPI: "Operation is restricted to Apple internal use.",
        hostNameMismatch: "A host name mismatch has occurred.",
        invalidExtendedKeyUsage: "The extended key usage is not valid.",
        unsupportedKeySize: "The key size is not supported.",
        invalidDigestAlgorithm: "An invalid digest algorithm was detected.",
        certificateExpired: "An expired certificate was detected.",
        certificateNotValidYet: "The certificate is not yet valid.",
        notTrusted: "The trust policy was not trusted.",
        certificateValidityPeriodTooLong: "The validity period in the certificate exceeds the maximum allowed.",
    ]

    /// Apple's message for `code`, or `OSStatus <code>` for a code Apple has no message for.
    public static func message(for code: Int32) -> String {
        messages[code] ?? "OSStatus \(code)"
    }

    /// The `errSec…` name of `code`, if it has one.
    public static func name(for code: Int32) -> String? { names[code] }
}
