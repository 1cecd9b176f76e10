#if !canImport(Darwin)
// Apple's kSec* constants with the values of Security's SecItemConstants.c (reference §1, §7, §9).

/// `kSecClass`: `"class"`.
public let kSecClass: CFString = "class"
/// `kSecClassGenericPassword`: `"genp"`.
public let kSecClassGenericPassword: CFString = "genp"
/// `kSecClassInternetPassword`: `"inet"`.
public let kSecClassInternetPassword: CFString = "inet"
/// `kSecClassCertificate`: `"cert"`.
public let kSecClassCertificate: CFString = "cert"
/// `kSecClassKey`: `"keys"`.
public let kSecClassKey: CFString = "keys"
/// `kSecClassIdentity`: `"idnt"`.
public let kSecClassIdentity: CFString = "idnt"
/// `kSecAttrAccessible`: `"pdmn"`.
public let kSecAttrAccessible: CFString = "pdmn"
/// `kSecAttrAccessControl`: `"accc"`.
public let kSecAttrAccessControl: CFString = "accc"
/// `kSecAttrAccessGroup`: `"agrp"`.
public let kSecAttrAccessGroup: CFString = "agrp"
/// `kSecAttrCreationDate`: `"cdat"`.
public let kSecAttrCreationDate: CFString = "cdat"
/// `kSecAttrModificationDate`: `"mdat"`.
public let kSecAttrModificationDate: CFString = "mdat"
/// `kSecAttrDescription`: `"desc"`.
public let kSecAttrDescription: CFString = "desc"
/// `kSecAttrComment`: `"icmt"`.
public let kSecAttrComment: CFString = "icmt"
/// `kSecAttrCreator`: `"crtr"`.
public let kSecAttrCreator: CFString = "crtr"
/// `kSecAttrType`: `"type"`.
public let kSecAttrType: CFString = "type"
/// `kSecAttrLabel`: `"labl"`.
public let kSecAttrLabel: CFString = "labl"
/// `kSecAttrIsInvisible`: `"invi"`.
public let kSecAttrIsInvisible: CFString = "invi"
/// `kSecAttrIsNegative`: `"nega"`.
public let kSecAttrIsNegative: CFString = "nega"
/// `kSecAttrAccount`: `"acct"`.
public let kSecAttrAccount: CFString = "acct"
/// `kSecAttrService`: `"svce"`.
public let kSecAttrService: CFString = "svce"
/// `kSecAttrGeneric`: `"gena"`.
public let kSecAttrGeneric: CFString = "gena"
/// `kSecAttrSynchronizable`: `"sync"`.
public let kSecAttrSynchronizable: CFString = "sync"
/// `kSecAttrSynchronizableAny`: `"syna"`.
public let kSecAttrSynchronizableAny: CFString = "syna"
/// `kSecAttrServer`: `"srvr"`.
public let kSecAttrServer: CFString = "srvr"
/// `kSecAttrProtocol`: `"ptcl"`.
public let kSecAttrProtocol: CFString = "ptcl"
/// `kSecAttrPort`: `"port"`.
public let kSecAttrPort: CFString = "port"
/// `kSecAttrPath`: `"path"`.
public let kSecAttrPath: CFString = "path"
/// `kSecAttrSecurityDomain`: `"sdmn"`.
public let kSecAttrSecurityDomain: CFString = "sdmn"
/// `kSecAttrAuthenticationType`: `"atyp"`.
public let kSecAttrAuthenticationType: CFString = "atyp"
/// `kSecAttrApplicationTag`: `"atag"`.
public let kSecAttrApplicationTag: CFString = "atag"
/// `kSecAttrApplicationLabel`: `"klbl"`.
public let kSecAttrApplicationLabel: CFString = "klbl"
/// `kSecAttrKeyClass`: `"kcls"`.
public let kSecAttrKeyClass: CFString = "kcls"
/// `kSecAttrKeyType`: `"type"`.
public let kSecAttrKeyType: CFString = "type"
/// `kSecAttrKeySizeInBits`: `"bsiz"`.
public let kSecAttrKeySizeInBits: CFString = "bsiz"
/// `kSecAttrEffectiveKeySize`: `"esiz"`.
public let kSecAttrEffectiveKeySize: CFString = "esiz"
/// `kSecAttrTokenID`: `"tkid"`.
public let kSecAttrTokenID: CFString = "tkid"
/// `kSecAttrPersistentReference`: `"persistref"`.
public let kSecAttrPersistentReference: CFString = "persistref"
/// `kSecAttrPersistantReference`: `"persistref"` (Apple's misspelled twin of `kSecAttrPersistentReference`).
public let kSecAttrPersistantReference: CFString = "persistref"
/// `kSecAttrSubject`: `"subj"`.
public let kSecAttrSubject: CFString = "subj"
/// `kSecAttrIssuer`: `"issr"`.
public let kSecAttrIssuer: CFString = "issr"
/// `kSecAttrSerialNumber`: `"slnr"`.
public let kSecAttrSerialNumber: CFString = "slnr"
/// `kSecAttrSubjectKeyID`: `"skid"`.
public let kSecAttrSubjectKeyID: CFString = "skid"
/// `kSecAttrPublicKeyHash`: `"pkhh"`.
public let kSecAttrPublicKeyHash: CFString = "pkhh"
/// `kSecAttrCertificateType`: `"ctyp"`.
public let kSecAttrCertificateType: CFString = "ctyp"
/// `kSecAttrCertificateEncoding`: `"cenc"`.
public let kSecAttrCertificateEncoding: CFString = "cenc"
/// `kSecAttrIsPermanent`: `"perm"`.
public let kSecAttrIsPermanent: CFString = "perm"
/// `kSecAttrIsSensitive`: `"sens"`.
public let kSecAttrIsSensitive: CFString = "sens"
/// `kSecAttrIsExtractable`: `"extr"`.
public let kSecAttrIsExtractable: CFString = "extr"
/// `kSecAttrCanEncrypt`: `"encr"`.
public let kSecAttrCanEncrypt: CFString = "encr"
/// `kSecAttrCanDecrypt`: `"decr"`.
public let kSecAttrCanDecrypt: CFString = "decr"
/// `kSecAttrCanDerive`: `"drve"`.
public let kSecAttrCanDerive: CFString = "drve"
/// `kSecAttrCanSign`: `"sign"`.
public let kSecAttrCanSign: CFString = "sign"
/// `kSecAttrCanVerify`: `"vrfy"`.
public let kSecAttrCanVerify: CFString = "vrfy"
/// `kSecAttrCanWrap`: `"wrap"`.
public let kSecAttrCanWrap: CFString = "wrap"
/// `kSecAttrCanUnwrap`: `"unwp"`.
public let kSecAttrCanUnwrap: CFString = "unwp"
/// `kSecAttrStartDate`: `"sdat"`.
public let kSecAttrStartDate: CFString = "sdat"
/// `kSecAttrEndDate`: `"edat"`.
public let kSecAttrEndDate: CFString = "edat"
/// `kSecAttrSyncViewHint`: `"vwht"`.
///
/// Keystone's keychains have no sync views, so no item class has this attribute: an add or a query that
/// carries it fails with `errSecNoSuchAttr`, as for any attribute its class lacks.
public let kSecAttrSyncViewHint: CFString = "vwht"
/// `kSecAttrTokenIDSecureEnclave`: `"com.apple.setoken"`.
public let kSecAttrTokenIDSecureEnclave: CFString = "com.apple.setoken"
/// `kSecAttrAccessGroupToken`: `"com.apple.token"`.
public let kSecAttrAccessGroupToken: CFString = "com.apple.token"
/// `kSecAttrAccessibleWhenUnlocked`: `"ak"`.
public let kSecAttrAccessibleWhenUnlocked: CFString = "ak"
/// `kSecAttrAccessibleAfterFirstUnlock`: `"ck"`.
public let kSecAttrAccessibleAfterFirstUnlock: CFString = "ck"
/// `kSecAttrAccessibleAlways`: `"dk"`.
public let kSecAttrAccessibleAlways: CFString = "dk"
/// `kSecAttrAccessibleWhenUnlockedThisDeviceOnly`: `"aku"`.
public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = "aku"
/// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`: `"cku"`.
public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
/// `kSecAttrAccessibleAlwaysThisDeviceOnly`: `"dku"`.
public let kSecAttrAccessibleAlwaysThisDeviceOnly: CFString = "dku"
/// `kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly`: `"akpu"`.
public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = "akpu"
/// `kSecAttrKeyClassPublic`: `"0"`.
public let kSecAttrKeyClassPublic: CFString = "0"
/// `kSecAttrKeyClassPrivate`: `"1"`.
public let kSecAttrKeyClassPrivate: CFString = "1"
/// `kSecAttrKeyClassSymmetric`: `"2"`.
public let kSecAttrKeyClassSymmetric: CFString = "2"
/// `kSecAttrKeyTypeRSA`: `"42"`.
public let kSecAttrKeyTypeRSA: CFString = "42"
/// `kSecAttrKeyTypeEC`: `"73"`.
public let kSecAttrKeyTypeEC: CFString = "73"
/// `kSecAttrKeyTypeECSECPrimeRandom`: `"73"`.
public let kSecAttrKeyTypeECSECPrimeRandom: CFString = "73"
/// `kSecAttrKeyTypeDSA`: `"43"` (macOS).
public let kSecAttrKeyTypeDSA: CFString = "43"
/// `kSecAttrKeyTypeAES`: `"2147483649"` (macOS).
public let kSecAttrKeyTypeAES: CFString = "2147483649"
/// `kSecAttrKeyTypeDES`: `"14"` (macOS).
public let kSecAttrKeyTypeDES: CFString = "14"
/// `kSecAttrKeyType3DES`: `"17"` (macOS).
public let kSecAttrKeyType3DES: CFString = "17"
/// `kSecAttrKeyTypeRC4`: `"25"` (macOS).
public let kSecAttrKeyTypeRC4: CFString = "25"
/// `kSecAttrKeyTypeRC2`: `"23"` (macOS).
public let kSecAttrKeyTypeRC2: CFString = "23"
/// `kSecAttrKeyTypeCAST`: `"56"` (macOS).
public let kSecAttrKeyTypeCAST: CFString = "56"
/// `kSecAttrKeyTypeECDSA`: `"73"` (macOS; the same value as `kSecAttrKeyTypeECSECPrimeRandom`).
public let kSecAttrKeyTypeECDSA: CFString = "73"
/// `kSecMatchLimit`: `"m_Limit"`.
public let kSecMatchLimit: CFString = "m_Limit"
/// `kSecMatchLimitOne`: `"m_LimitOne"`.
public let kSecMatchLimitOne: CFString = "m_LimitOne"
/// `kSecMatchLimitAll`: `"m_LimitAll"`.
public let kSecMatchLimitAll: CFString = "m_LimitAll"
/// `kSecMatchCaseInsensitive`: `"m_CaseInsensitive"`.
public let kSecMatchCaseInsensitive: CFString = "m_CaseInsensitive"
/// `kSecMatchPolicy`: `"m_Policy"`.
public let kSecMatchPolicy: CFString = "m_Policy"
/// `kSecMatchItemList`: `"m_ItemList"`.
public let kSecMatchItemList: CFString = "m_ItemList"
/// `kSecMatchSearchList`: `"m_SearchList"`.
public let kSecMatchSearchList: CFString = "m_SearchList"
/// `kSecMatchIssuers`: `"m_Issuers"`.
public let kSecMatchIssuers: CFString = "m_Issuers"
/// `kSecMatchEmailAddressIfPresent`: `"m_EmailAddressIfPresent"`.
public let kSecMatchEmailAddressIfPresent: CFString = "m_EmailAddressIfPresent"
/// `kSecMatchSubjectContains`: `"m_SubjectContains"`.
public let kSecMatchSubjectContains: CFString = "m_SubjectContains"
/// `kSecMatchSubjectStartsWith`: `"m_SubjectStartsWith"` (macOS; certificate search, ignored by Keystone).
public let kSecMatchSubjectStartsWith: CFString = "m_SubjectStartsWith"
/// `kSecMatchSubjectEndsWith`: `"m_SubjectEndsWith"` (macOS; certificate search, ignored by Keystone).
public let kSecMatchSubjectEndsWith: CFString = "m_SubjectEndsWith"
/// `kSecMatchSubjectWholeString`: `"m_SubjectWholeString"` (macOS; certificate search, ignored by Keystone).
public let kSecMatchSubjectWholeString: CFString = "m_SubjectWholeString"
/// `kSecMatchDiacriticInsensitive`: `"m_DiacriticInsensitive"` (macOS file keychains; ignored by Keystone).
public let kSecMatchDiacriticInsensitive: CFString = "m_DiacriticInsensitive"
/// `kSecMatchWidthInsensitive`: `"m_WidthInsensitive"` (macOS file keychains; ignored by Keystone).
public let kSecMatchWidthInsensitive: CFString = "m_WidthInsensitive"
/// `kSecMatchTrustedOnly`: `"m_TrustedOnly"`.
public let kSecMatchTrustedOnly: CFString = "m_TrustedOnly"
/// `kSecMatchValidOnDate`: `"m_ValidOnDate"`.
public let kSecMatchValidOnDate: CFString = "m_ValidOnDate"
/// `kSecReturnData`: `"r_Data"`.
public let kSecReturnData: CFString = "r_Data"
/// `kSecReturnAttributes`: `"r_Attributes"`.
public let kSecReturnAttributes: CFString = "r_Attributes"
/// `kSecReturnRef`: `"r_Ref"`.
public let kSecReturnRef: CFString = "r_Ref"
/// `kSecReturnPersistentRef`: `"r_PersistentRef"`.
public let kSecReturnPersistentRef: CFString = "r_PersistentRef"
/// `kSecValueData`: `"v_Data"`.
public let kSecValueData: CFString = "v_Data"
/// `kSecValueRef`: `"v_Ref"`.
public let kSecValueRef: CFString = "v_Ref"
/// `kSecValuePersistentRef`: `"v_PersistentRef"`.
public let kSecValuePersistentRef: CFString = "v_PersistentRef"
/// `kSecUseDataProtectionKeychain`: `"nleg"`.
public let kSecUseDataProtectionKeychain: CFString = "nleg"
/// `kSecUseAuthenticationUI`: `"u_AuthUI"`.
public let kSecUseAuthenticationUI: CFString = "u_AuthUI"
/// `kSecUseAuthenticationUIAllow`: `"u_AuthUIA"`.
public let kSecUseAuthenticationUIAllow: CFString = "u_AuthUIA"
/// `kSecUseAuthenticationUIFail`: `"u_AuthUIF"`.
public let kSecUseAuthenticationUIFail: CFString = "u_AuthUIF"
/// `kSecUseAuthenticationUISkip`: `"u_AuthUIS"`.
public let kSecUseAuthenticationUISkip: CFString = "u_AuthUIS"
/// `kSecUseAuthenticationContext`: `"u_AuthCtx"`.
public let kSecUseAuthenticationContext: CFString = "u_AuthCtx"
/// `kSecUseOperationPrompt`: `"u_OpPrompt"`.
public let kSecUseOperationPrompt: CFString = "u_OpPrompt"
/// `kSecUseItemList`: `"u_ItemList"`.
public let kSecUseItemList: CFString = "u_ItemList"
/// `kSecUseNoAuthenticationUI`: `"u_NoAuthUI"` (deprecated by Apple for `kSecUseAuthenticationUI`).
public let kSecUseNoAuthenticationUI: CFString = "u_NoAuthUI"
/// `kSecAttrProtocolFTP`: `"ftp "`.
public let kSecAttrProtocolFTP: CFString = "ftp "
/// `kSecAttrProtocolFTPAccount`: `"ftpa"`.
public let kSecAttrProtocolFTPAccount: CFString = "ftpa"
/// `kSecAttrProtocolHTTP`: `"http"`.
public let kSecAttrProtocolHTTP: CFString = "http"
/// `kSecAttrProtocolIRC`: `"irc "`.
public let kSecAttrProtocolIRC: CFString = "irc "
/// `kSecAttrProtocolNNTP`: `"nntp"`.
public let kSecAttrProtocolNNTP: CFString = "nntp"
/// `kSecAttrProtocolPOP3`: `"pop3"`.
public let kSecAttrProtocolPOP3: CFString = "pop3"
/// `kSecAttrProtocolSMTP`: `"smtp"`.
public let kSecAttrProtocolSMTP: CFString = "smtp"
/// `kSecAttrProtocolSOCKS`: `"sox "`.
public let kSecAttrProtocolSOCKS: CFString = "sox "
/// `kSecAttrProtocolIMAP`: `"imap"`.
public let kSecAttrProtocolIMAP: CFString = "imap"
/// `kSecAttrProtocolLDAP`: `"ldap"`.
public let kSecAttrProtocolLDAP: CFString = "ldap"
/// `kSecAttrProtocolAppleTalk`: `"atlk"`.
public let kSecAttrProtocolAppleTalk: CFString = "atlk"
/// `kSecAttrProtocolAFP`: `"afp "`.
public let kSecAttrProtocolAFP: CFString = "afp "
/// `kSecAttrProtocolTelnet`: `"teln"`.
public let kSecAttrProtocolTelnet: CFString = "teln"
/// `kSecAttrProtocolSSH`: `"ssh "`.
public let kSecAttrProtocolSSH: CFString = "ssh "
/// `kSecAttrProtocolFTPS`: `"ftps"`.
public let kSecAttrProtocolFTPS: CFString = "ftps"
/// `kSecAttrProtocolHTTPS`: `"htps"`.
public let kSecAttrProtocolHTTPS: CFString = "htps"
/// `kSecAttrProtocolHTTPProxy`: `"htpx"`.
public let kSecAttrProtocolHTTPProxy: CFString = "htpx"
/// `kSecAttrProtocolHTTPSProxy`: `"htsx"`.
public let kSecAttrProtocolHTTPSProxy: CFString = "htsx"
/// `kSecAttrProtocolFTPProxy`: `"ftpx"`.
public let kSecAttrProtocolFTPProxy: CFString = "ftpx"
/// `kSecAttrProtocolSMB`: `"smb "`.
public let kSecAttrProtocolSMB: CFString = "smb "
/// `kSecAttrProtocolRTSP`: `"rtsp"`.
public let kSecAttrProtocolRTSP: CFString = "rtsp"
/// `kSecAttrProtocolRTSPProxy`: `"rtsx"`.
public let kSecAttrProtocolRTSPProxy: CFString = "rtsx"
/// `kSecAttrProtocolDAAP`: `"daap"`.
public let kSecAttrProtocolDAAP: CFString = "daap"
/// `kSecAttrProtocolEPPC`: `"eppc"`.
public let kSecAttrProtocolEPPC: CFString = "eppc"
/// `kSecAttrProtocolIPP`: `"ipp "`.
public let kSecAttrProtocolIPP: CFString = "ipp "
/// `kSecAttrProtocolNNTPS`: `"ntps"`.
public let kSecAttrProtocolNNTPS: CFString = "ntps"
/// `kSecAttrProtocolLDAPS`: `"ldps"`.
public let kSecAttrProtocolLDAPS: CFString = "ldps"
/// `kSecAttrProtocolTelnetS`: `"tels"`.
public let kSecAttrProtocolTelnetS: CFString = "tels"
/// `kSecAttrProtocolIMAPS`: `"imps"`.
public let kSecAttrProtocolIMAPS: CFString = "imps"
/// `kSecAttrProtocolIRCS`: `"ircs"`.
public let kSecAttrProtocolIRCS: CFString = "ircs"
/// `kSecAttrProtocolPOP3S`: `"pops"`.
public let kSecAttrProtocolPOP3S: CFString = "pops"
/// `kSecAttrAuthenticationTypeNTLM`: `"ntlm"`.
public let kSecAttrAuthenticationTypeNTLM: CFString = "ntlm"
/// `kSecAttrAuthenticationTypeMSN`: `"msna"`.
public let kSecAttrAuthenticationTypeMSN: CFString = "msna"
/// `kSecAttrAuthenticationTypeDPA`: `"dpaa"`.
public let kSecAttrAuthenticationTypeDPA: CFString = "dpaa"
/// `kSecAttrAuthenticationTypeRPA`: `"rpaa"`.
public let kSecAttrAuthenticationTypeRPA: CFString = "rpaa"
/// `kSecAttrAuthenticationTypeHTTPBasic`: `"http"`.
public let kSecAttrAuthenticationTypeHTTPBasic: CFString = "http"
/// `kSecAttrAuthenticationTypeHTTPDigest`: `"httd"`.
public let kSecAttrAuthenticationTypeHTTPDigest: CFString = "httd"
/// `kSecAttrAuthenticationTypeHTMLForm`: `"form"`.
public let kSecAttrAuthenticationTypeHTMLForm: CFString = "form"
/// `kSecAttrAuthenticationTypeDefault`: `"dflt"`.
public let kSecAttrAuthenticationTypeDefault: CFString = "dflt"
#endif
