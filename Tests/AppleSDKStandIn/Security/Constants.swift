// Stand-in for the Security framework's Swift interface: keychain item constants (SecItem.h), with Apple's
// types (`CFString`) and values. Apple imports them as `var kSecClass: CFString { get }`; so do these.
//
// The names and values of Sources/KeychainServices/Constants.swift. Apple's deprecations are repeated, so
// code checked against the stand-in does not use what Apple deprecated (the check treats warnings as errors).
import Foundation

public var kSecClass: CFString { "class" }
public var kSecClassGenericPassword: CFString { "genp" }
public var kSecClassInternetPassword: CFString { "inet" }
public var kSecClassCertificate: CFString { "cert" }
public var kSecClassKey: CFString { "keys" }
public var kSecClassIdentity: CFString { "idnt" }
public var kSecAttrAccessible: CFString { "pdmn" }
public var kSecAttrAccessControl: CFString { "accc" }
public var kSecAttrAccessGroup: CFString { "agrp" }
public var kSecAttrCreationDate: CFString { "cdat" }
public var kSecAttrModificationDate: CFString { "mdat" }
public var kSecAttrDescription: CFString { "desc" }
public var kSecAttrComment: CFString { "icmt" }
public var kSecAttrCreator: CFString { "crtr" }
public var kSecAttrType: CFString { "type" }
public var kSecAttrLabel: CFString { "labl" }
public var kSecAttrIsInvisible: CFString { "invi" }
public var kSecAttrIsNegative: CFString { "nega" }
public var kSecAttrAccount: CFString { "acct" }
public var kSecAttrService: CFString { "svce" }
public var kSecAttrGeneric: CFString { "gena" }
public var kSecAttrSynchronizable: CFString { "sync" }
public var kSecAttrSynchronizableAny: CFString { "syna" }
public var kSecAttrServer: CFString { "srvr" }
public var kSecAttrProtocol: CFString { "ptcl" }
public var kSecAttrPort: CFString { "port" }
public var kSecAttrPath: CFString { "path" }
public var kSecAttrSecurityDomain: CFString { "sdmn" }
public var kSecAttrAuthenticationType: CFString { "atyp" }
public var kSecAttrApplicationTag: CFString { "atag" }
public var kSecAttrApplicationLabel: CFString { "klbl" }
public var kSecAttrKeyClass: CFString { "kcls" }
public var kSecAttrKeyType: CFString { "type" }
public var kSecAttrKeySizeInBits: CFString { "bsiz" }
public var kSecAttrEffectiveKeySize: CFString { "esiz" }
public var kSecAttrTokenID: CFString { "tkid" }
public var kSecAttrPersistentReference: CFString { "persistref" }
public var kSecAttrPersistantReference: CFString { "persistref" }
public var kSecAttrSubject: CFString { "subj" }
public var kSecAttrIssuer: CFString { "issr" }
public var kSecAttrSerialNumber: CFString { "slnr" }
public var kSecAttrSubjectKeyID: CFString { "skid" }
public var kSecAttrPublicKeyHash: CFString { "pkhh" }
public var kSecAttrCertificateType: CFString { "ctyp" }
public var kSecAttrCertificateEncoding: CFString { "cenc" }
public var kSecAttrIsPermanent: CFString { "perm" }
public var kSecAttrIsSensitive: CFString { "sens" }
public var kSecAttrIsExtractable: CFString { "extr" }
public var kSecAttrCanEncrypt: CFString { "encr" }
public var kSecAttrCanDecrypt: CFString { "decr" }
public var kSecAttrCanDerive: CFString { "drve" }
public var kSecAttrCanSign: CFString { "sign" }
public var kSecAttrCanVerify: CFString { "vrfy" }
public var kSecAttrCanWrap: CFString { "wrap" }
public var kSecAttrCanUnwrap: CFString { "unwp" }
public var kSecAttrStartDate: CFString { "sdat" }
public var kSecAttrEndDate: CFString { "edat" }
public var kSecAttrTokenIDSecureEnclave: CFString { "com.apple.setoken" }
public var kSecAttrAccessGroupToken: CFString { "com.apple.token" }
public var kSecAttrAccessibleWhenUnlocked: CFString { "ak" }
public var kSecAttrAccessibleAfterFirstUnlock: CFString { "ck" }
@available(*, deprecated, message: "Apple: use an accessibility that is not Always")
public var kSecAttrAccessibleAlways: CFString { "dk" }
public var kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString { "aku" }
public var kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString { "cku" }
@available(*, deprecated, message: "Apple: use an accessibility that is not Always")
public var kSecAttrAccessibleAlwaysThisDeviceOnly: CFString { "dku" }
public var kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString { "akpu" }
public var kSecAttrKeyClassPublic: CFString { "0" }
public var kSecAttrKeyClassPrivate: CFString { "1" }
public var kSecAttrKeyClassSymmetric: CFString { "2" }
public var kSecAttrKeyTypeRSA: CFString { "42" }
public var kSecAttrKeyTypeEC: CFString { "73" }
public var kSecAttrKeyTypeECSECPrimeRandom: CFString { "73" }
public var kSecMatchLimit: CFString { "m_Limit" }
public var kSecMatchLimitOne: CFString { "m_LimitOne" }
public var kSecMatchLimitAll: CFString { "m_LimitAll" }
public var kSecMatchCaseInsensitive: CFString { "m_CaseInsensitive" }
public var kSecMatchPolicy: CFString { "m_Policy" }
public var kSecMatchItemList: CFString { "m_ItemList" }
public var kSecMatchSearchList: CFString { "m_SearchList" }
public var kSecMatchIssuers: CFString { "m_Issuers" }
public var kSecMatchEmailAddressIfPresent: CFString { "m_EmailAddressIfPresent" }
public var kSecMatchSubjectContains: CFString { "m_SubjectContains" }
public var kSecMatchTrustedOnly: CFString { "m_TrustedOnly" }
public var kSecMatchValidOnDate: CFString { "m_ValidOnDate" }
public var kSecReturnData: CFString { "r_Data" }
public var kSecReturnAttributes: CFString { "r_Attributes" }
public var kSecReturnRef: CFString { "r_Ref" }
public var kSecReturnPersistentRef: CFString { "r_PersistentRef" }
public var kSecValueData: CFString { "v_Data" }
public var kSecValueRef: CFString { "v_Ref" }
public var kSecValuePersistentRef: CFString { "v_PersistentRef" }
public var kSecUseDataProtectionKeychain: CFString { "nleg" }
public var kSecUseAuthenticationUI: CFString { "u_AuthUI" }
@available(*, deprecated, message: "Apple: use kSecUseAuthenticationContext and LAContext.interactionNotAllowed")
public var kSecUseAuthenticationUIAllow: CFString { "u_AuthUIA" }
@available(*, deprecated, message: "Apple: use kSecUseAuthenticationContext and LAContext.interactionNotAllowed")
public var kSecUseAuthenticationUIFail: CFString { "u_AuthUIF" }
public var kSecUseAuthenticationUISkip: CFString { "u_AuthUIS" }
public var kSecUseAuthenticationContext: CFString { "u_AuthCtx" }
@available(*, deprecated, message: "Apple: use kSecUseAuthenticationContext and LAContext.localizedReason")
public var kSecUseOperationPrompt: CFString { "u_OpPrompt" }
public var kSecUseItemList: CFString { "u_ItemList" }
@available(*, deprecated, message: "Apple: use kSecUseAuthenticationUI")
public var kSecUseNoAuthenticationUI: CFString { "u_NoAuth" }
public var kSecAttrProtocolFTP: CFString { "ftp " }
public var kSecAttrProtocolFTPAccount: CFString { "ftpa" }
public var kSecAttrProtocolHTTP: CFString { "http" }
public var kSecAttrProtocolIRC: CFString { "irc " }
public var kSecAttrProtocolNNTP: CFString { "nntp" }
public var kSecAttrProtocolPOP3: CFString { "pop3" }
public var kSecAttrProtocolSMTP: CFString { "smtp" }
public var kSecAttrProtocolSOCKS: CFString { "sox " }
public var kSecAttrProtocolIMAP: CFString { "imap" }
public var kSecAttrProtocolLDAP: CFString { "ldap" }
public var kSecAttrProtocolAppleTalk: CFString { "atlk" }
public var kSecAttrProtocolAFP: CFString { "afp " }
public var kSecAttrProtocolTelnet: CFString { "teln" }
public var kSecAttrProtocolSSH: CFString { "ssh " }
public var kSecAttrProtocolFTPS: CFString { "ftps" }
public var kSecAttrProtocolHTTPS: CFString { "htps" }
public var kSecAttrProtocolHTTPProxy: CFString { "htpx" }
public var kSecAttrProtocolHTTPSProxy: CFString { "htsx" }
public var kSecAttrProtocolFTPProxy: CFString { "ftpx" }
public var kSecAttrProtocolSMB: CFString { "smb " }
public var kSecAttrProtocolRTSP: CFString { "rtsp" }
public var kSecAttrProtocolRTSPProxy: CFString { "rtsx" }
public var kSecAttrProtocolDAAP: CFString { "daap" }
public var kSecAttrProtocolEPPC: CFString { "eppc" }
public var kSecAttrProtocolIPP: CFString { "ipp " }
public var kSecAttrProtocolNNTPS: CFString { "ntps" }
public var kSecAttrProtocolLDAPS: CFString { "ldps" }
public var kSecAttrProtocolTelnetS: CFString { "tels" }
public var kSecAttrProtocolIMAPS: CFString { "imps" }
public var kSecAttrProtocolIRCS: CFString { "ircs" }
public var kSecAttrProtocolPOP3S: CFString { "pops" }
public var kSecAttrAuthenticationTypeNTLM: CFString { "ntlm" }
public var kSecAttrAuthenticationTypeMSN: CFString { "msna" }
public var kSecAttrAuthenticationTypeDPA: CFString { "dpaa" }
public var kSecAttrAuthenticationTypeRPA: CFString { "rpaa" }
public var kSecAttrAuthenticationTypeHTTPBasic: CFString { "http" }
public var kSecAttrAuthenticationTypeHTTPDigest: CFString { "httd" }
public var kSecAttrAuthenticationTypeHTMLForm: CFString { "form" }
public var kSecAttrAuthenticationTypeDefault: CFString { "dflt" }
