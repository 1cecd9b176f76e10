#if !canImport(Darwin)
// LAPublicDefines.h: LocalAuthentication's raw numbers, which Swift code compares with
// `Int(kLAError…)` or an `NSError`'s code. Each equals the raw value of the matching Swift case.

/// `kLAPolicyDeviceOwnerAuthenticationWithBiometrics` (1).
public let kLAPolicyDeviceOwnerAuthenticationWithBiometrics: Int32 = 1
/// `kLAPolicyDeviceOwnerAuthentication` (2).
public let kLAPolicyDeviceOwnerAuthentication: Int32 = 2

/// `kLACredentialTypeApplicationPassword` (0).
public let kLACredentialTypeApplicationPassword: Int32 = 0
/// `kLACredentialSmartCardPIN` (-3).
public let kLACredentialSmartCardPIN: Int32 = -3

/// `kLAAccessControlOperationCreateItem` (0).
public let kLAAccessControlOperationCreateItem: Int32 = 0
/// `kLAAccessControlOperationUseItem` (1).
public let kLAAccessControlOperationUseItem: Int32 = 1
/// `kLAAccessControlOperationCreateKey` (2).
public let kLAAccessControlOperationCreateKey: Int32 = 2
/// `kLAAccessControlOperationUseKeySign` (3).
public let kLAAccessControlOperationUseKeySign: Int32 = 3
/// `kLAAccessControlOperationUseKeyDecrypt` (4).
public let kLAAccessControlOperationUseKeyDecrypt: Int32 = 4
/// `kLAAccessControlOperationUseKeyKeyExchange` (5).
public let kLAAccessControlOperationUseKeyKeyExchange: Int32 = 5

/// `kLABiometryTypeNone` (0).
public let kLABiometryTypeNone: Int32 = 0
/// `kLABiometryTypeTouchID` (1).
public let kLABiometryTypeTouchID: Int32 = 1
/// `kLABiometryTypeFaceID` (2).
public let kLABiometryTypeFaceID: Int32 = 2
/// `kLABiometryTypeOpticID` (4).
public let kLABiometryTypeOpticID: Int32 = 4

/// `kLAErrorAuthenticationFailed` (-1).
public let kLAErrorAuthenticationFailed: Int32 = -1
/// `kLAErrorUserCancel` (-2).
public let kLAErrorUserCancel: Int32 = -2
/// `kLAErrorUserFallback` (-3).
public let kLAErrorUserFallback: Int32 = -3
/// `kLAErrorSystemCancel` (-4).
public let kLAErrorSystemCancel: Int32 = -4
/// `kLAErrorPasscodeNotSet` (-5).
public let kLAErrorPasscodeNotSet: Int32 = -5
/// `kLAErrorTouchIDNotAvailable` (-6), the older name of `kLAErrorBiometryNotAvailable`.
public let kLAErrorTouchIDNotAvailable: Int32 = -6
/// `kLAErrorTouchIDNotEnrolled` (-7), the older name of `kLAErrorBiometryNotEnrolled`.
public let kLAErrorTouchIDNotEnrolled: Int32 = -7
/// `kLAErrorTouchIDLockout` (-8), the older name of `kLAErrorBiometryLockout`.
public let kLAErrorTouchIDLockout: Int32 = -8
/// `kLAErrorAppCancel` (-9).
public let kLAErrorAppCancel: Int32 = -9
/// `kLAErrorInvalidContext` (-10).
public let kLAErrorInvalidContext: Int32 = -10
/// `kLAErrorWatchNotAvailable` (-11), the older name of `kLAErrorCompanionNotAvailable`.
public let kLAErrorWatchNotAvailable: Int32 = -11
/// `kLAErrorCompanionNotAvailable` (-11).
public let kLAErrorCompanionNotAvailable: Int32 = -11
/// `kLAErrorBiometryNotPaired` (-12).
public let kLAErrorBiometryNotPaired: Int32 = -12
/// `kLAErrorBiometryDisconnected` (-13).
public let kLAErrorBiometryDisconnected: Int32 = -13
/// `kLAErrorInvalidDimensions` (-14).
public let kLAErrorInvalidDimensions: Int32 = -14
/// `kLAErrorNotInteractive` (-1004).
public let kLAErrorNotInteractive: Int32 = -1004
/// `kLAErrorBiometryNotAvailable` (-6).
public let kLAErrorBiometryNotAvailable: Int32 = -6
/// `kLAErrorBiometryNotEnrolled` (-7).
public let kLAErrorBiometryNotEnrolled: Int32 = -7
/// `kLAErrorBiometryLockout` (-8).
public let kLAErrorBiometryLockout: Int32 = -8

/// `kLAErrorDomain`: `"com.apple.LocalAuthentication"`, the same string as `LAErrorDomain`.
public let kLAErrorDomain: String = "com.apple.LocalAuthentication"
#endif
