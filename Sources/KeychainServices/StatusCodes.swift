#if !canImport(Darwin)
import KeychainEngine

// Apple's errSec* result codes (SecBase.h).

/// `noErr` (0, MacTypes.h): success, the same value as `errSecSuccess`.
public var noErr: OSStatus { 0 }
/// `errSecSuccess` (0).
public let errSecSuccess: OSStatus = 0
/// `errSecUnimplemented` (-4).
public let errSecUnimplemented: OSStatus = -4
/// `errSecDiskFull` (-34).
public let errSecDiskFull: OSStatus = -34
/// `errSecDskFull` (-34): the older name of `errSecDiskFull`.
public let errSecDskFull: OSStatus = -34
/// `errSecIO` (-36).
public let errSecIO: OSStatus = -36
/// `errSecOpWr` (-49): the file is already open with write permission.
public let errSecOpWr: OSStatus = -49
/// `errSecParam` (-50).
public let errSecParam: OSStatus = -50
/// `errSecWrPerm` (-61).
public let errSecWrPerm: OSStatus = -61
/// `errSecAllocate` (-108).
public let errSecAllocate: OSStatus = -108
/// `errSecUserCanceled` (-128).
public let errSecUserCanceled: OSStatus = -128
/// `errSecBadReq` (-909).
public let errSecBadReq: OSStatus = -909
/// `errSecInternalComponent` (-2070).
public let errSecInternalComponent: OSStatus = -2070
/// `errSecCoreFoundationUnknown` (-4960).
public let errSecCoreFoundationUnknown: OSStatus = -4960
/// `errSecNotAvailable` (-25291).
public let errSecNotAvailable: OSStatus = -25291
/// `errSecReadOnly` (-25292).
public let errSecReadOnly: OSStatus = -25292
/// `errSecAuthFailed` (-25293).
public let errSecAuthFailed: OSStatus = -25293
/// `errSecNoSuchKeychain` (-25294).
public let errSecNoSuchKeychain: OSStatus = -25294
/// `errSecInvalidKeychain` (-25295).
public let errSecInvalidKeychain: OSStatus = -25295
/// `errSecDuplicateKeychain` (-25296).
public let errSecDuplicateKeychain: OSStatus = -25296
/// `errSecDuplicateCallback` (-25297).
public let errSecDuplicateCallback: OSStatus = -25297
/// `errSecInvalidCallback` (-25298).
public let errSecInvalidCallback: OSStatus = -25298
/// `errSecDuplicateItem` (-25299).
public let errSecDuplicateItem: OSStatus = -25299
/// `errSecItemNotFound` (-25300).
public let errSecItemNotFound: OSStatus = -25300
/// `errSecBufferTooSmall` (-25301).
public let errSecBufferTooSmall: OSStatus = -25301
/// `errSecDataTooLarge` (-25302).
public let errSecDataTooLarge: OSStatus = -25302
/// `errSecNoSuchAttr` (-25303).
public let errSecNoSuchAttr: OSStatus = -25303
/// `errSecInvalidItemRef` (-25304).
public let errSecInvalidItemRef: OSStatus = -25304
/// `errSecInvalidSearchRef` (-25305).
public let errSecInvalidSearchRef: OSStatus = -25305
/// `errSecNoSuchClass` (-25306).
public let errSecNoSuchClass: OSStatus = -25306
/// `errSecNoDefaultKeychain` (-25307).
public let errSecNoDefaultKeychain: OSStatus = -25307
/// `errSecInteractionNotAllowed` (-25308).
public let errSecInteractionNotAllowed: OSStatus = -25308
/// `errSecReadOnlyAttr` (-25309).
public let errSecReadOnlyAttr: OSStatus = -25309
/// `errSecWrongSecVersion` (-25310).
public let errSecWrongSecVersion: OSStatus = -25310
/// `errSecKeySizeNotAllowed` (-25311).
public let errSecKeySizeNotAllowed: OSStatus = -25311
/// `errSecNoStorageModule` (-25312).
public let errSecNoStorageModule: OSStatus = -25312
/// `errSecNoCertificateModule` (-25313).
public let errSecNoCertificateModule: OSStatus = -25313
/// `errSecNoPolicyModule` (-25314).
public let errSecNoPolicyModule: OSStatus = -25314
/// `errSecInteractionRequired` (-25315).
public let errSecInteractionRequired: OSStatus = -25315
/// `errSecDataNotAvailable` (-25316).
public let errSecDataNotAvailable: OSStatus = -25316
/// `errSecDataNotModifiable` (-25317).
public let errSecDataNotModifiable: OSStatus = -25317
/// `errSecCreateChainFailed` (-25318).
public let errSecCreateChainFailed: OSStatus = -25318
/// `errSecInvalidPrefsDomain` (-25319).
public let errSecInvalidPrefsDomain: OSStatus = -25319
/// `errSecInDarkWake` (-25320).
public let errSecInDarkWake: OSStatus = -25320
/// `errSecACLNotSimple` (-25240).
public let errSecACLNotSimple: OSStatus = -25240
/// `errSecPolicyNotFound` (-25241).
public let errSecPolicyNotFound: OSStatus = -25241
/// `errSecInvalidTrustSetting` (-25242).
public let errSecInvalidTrustSetting: OSStatus = -25242
/// `errSecNoAccessForItem` (-25243).
public let errSecNoAccessForItem: OSStatus = -25243
/// `errSecInvalidOwnerEdit` (-25244).
public let errSecInvalidOwnerEdit: OSStatus = -25244
/// `errSecTrustNotAvailable` (-25245).
public let errSecTrustNotAvailable: OSStatus = -25245
/// `errSecUnsupportedFormat` (-25256).
public let errSecUnsupportedFormat: OSStatus = -25256
/// `errSecUnknownFormat` (-25257).
public let errSecUnknownFormat: OSStatus = -25257
/// `errSecKeyIsSensitive` (-25258).
public let errSecKeyIsSensitive: OSStatus = -25258
/// `errSecMultiplePrivKeys` (-25259).
public let errSecMultiplePrivKeys: OSStatus = -25259
/// `errSecPassphraseRequired` (-25260).
public let errSecPassphraseRequired: OSStatus = -25260
/// `errSecInvalidPasswordRef` (-25261).
public let errSecInvalidPasswordRef: OSStatus = -25261
/// `errSecInvalidTrustSettings` (-25262).
public let errSecInvalidTrustSettings: OSStatus = -25262
/// `errSecNoTrustSettings` (-25263).
public let errSecNoTrustSettings: OSStatus = -25263
/// `errSecPkcs12VerifyFailure` (-25264).
public let errSecPkcs12VerifyFailure: OSStatus = -25264
/// `errSecNotSigner` (-26267).
public let errSecNotSigner: OSStatus = -26267
/// `errSecDecode` (-26275).
public let errSecDecode: OSStatus = -26275
/// `errSecInternal` (-26276): `SecCertificateCopyCommonName`'s status for a subject without a common name.
public let errSecInternal: OSStatus = -26276
/// `errSecServiceNotAvailable` (-67585).
public let errSecServiceNotAvailable: OSStatus = -67585
/// `errSecInsufficientClientID` (-67586).
public let errSecInsufficientClientID: OSStatus = -67586
/// `errSecDeviceReset` (-67587).
public let errSecDeviceReset: OSStatus = -67587
/// `errSecDeviceFailed` (-67588).
public let errSecDeviceFailed: OSStatus = -67588
/// `errSecInternalError` (-67671).
public let errSecInternalError: OSStatus = -67671
/// `errSecQuotaExceeded` (-67596).
public let errSecQuotaExceeded: OSStatus = -67596
/// `errSecInvalidData` (-67673).
public let errSecInvalidData: OSStatus = -67673
/// `errSecMissingEntitlement` (-34018).
public let errSecMissingEntitlement: OSStatus = -34018
/// `errSecInvalidEncoding` (-67853).
public let errSecInvalidEncoding: OSStatus = -67853
/// `errSecInvalidKey` (-67712).
public let errSecInvalidKey: OSStatus = -67712
/// `errSecUnsupportedOperation` (-67721).
public let errSecUnsupportedOperation: OSStatus = -67721
/// `errSecPolicyDenied` (-67723).
public let errSecPolicyDenied: OSStatus = -67723
/// `errSecWaitForCallback` (-67730).
public let errSecWaitForCallback: OSStatus = -67730
/// `errSecRestrictedAPI` (-34020).
public let errSecRestrictedAPI: OSStatus = -34020

// Apple defines these as errSecParam (-50).
/// `errSecItemInvalidKey` (= errSecParam, -50).
public let errSecItemInvalidKey: OSStatus = -50
/// `errSecItemInvalidKeyType` (= errSecParam, -50).
public let errSecItemInvalidKeyType: OSStatus = -50
/// `errSecItemInvalidValue` (= errSecParam, -50).
public let errSecItemInvalidValue: OSStatus = -50
/// `errSecItemClassMissing` (= errSecParam, -50).
public let errSecItemClassMissing: OSStatus = -50
/// `errSecItemMatchUnsupported` (= errSecParam, -50).
public let errSecItemMatchUnsupported: OSStatus = -50
/// `errSecItemIllegalQuery` (= errSecParam, -50).
public let errSecItemIllegalQuery: OSStatus = -50
/// `errSecValueRefUnsupported` (= errSecParam, -50).
public let errSecValueRefUnsupported: OSStatus = -50
/// `errSecValuePersistentRefUnsupported` (= errSecParam, -50).
public let errSecValuePersistentRefUnsupported: OSStatus = -50
/// `errSecReturnDataUnsupported` (= errSecParam, -50).
public let errSecReturnDataUnsupported: OSStatus = -50
/// `errSecReturnAttributesUnsupported` (= errSecParam, -50).
public let errSecReturnAttributesUnsupported: OSStatus = -50
/// `errSecReturnRefUnsupported` (= errSecParam, -50).
public let errSecReturnRefUnsupported: OSStatus = -50
/// `errSecReturnPersistentRefUnsupported` (= errSecParam, -50).
public let errSecReturnPersistentRefUnsupported: OSStatus = -50
/// `errSecMatchLimitUnsupported` (= errSecParam, -50).
public let errSecMatchLimitUnsupported: OSStatus = -50
/// `errSecReturnMissingPointer` (= errSecParam, -50).
public let errSecReturnMissingPointer: OSStatus = -50
/// `errSecUseItemListUnsupported` (= errSecParam, -50).
public let errSecUseItemListUnsupported: OSStatus = -50
/// `errSecUseKeychainUnsupported` (= errSecParam, -50).
public let errSecUseKeychainUnsupported: OSStatus = -50
/// `errSecUseKeychainListUnsupported` (= errSecParam, -50).
public let errSecUseKeychainListUnsupported: OSStatus = -50
/// `errSecHostNameMismatch` (-67602): an SSL policy's host name is not among the leaf certificate's names.
public let errSecHostNameMismatch: OSStatus = -67602
/// `errSecCertificateExpired` (-67818): a certificate of the chain is expired (or not yet valid, in SecTrust's
/// errors).
public let errSecCertificateExpired: OSStatus = -67818
/// `errSecCertificateNotValidYet` (-67819).
public let errSecCertificateNotValidYet: OSStatus = -67819
/// `errSecNotTrusted` (-67843): the chain ends at a root that is not a trusted anchor.
public let errSecNotTrusted: OSStatus = -67843
#endif
