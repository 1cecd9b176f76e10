/// The raw strings behind Apple's `kSec*` dictionary keys and values (reference: Security's SecItemConstants.c).
///
/// `KeychainServices` publishes them under Apple's names; the engine and its storages use them directly.
public enum Key {
    // Class.
    public static let `class` = "class"

    // Attributes.
    public static let accessible = "pdmn"
    public static let accessControl = "accc"
    public static let accessGroup = "agrp"
    public static let creationDate = "cdat"
    public static let modificationDate = "mdat"
    public static let description = "desc"
    public static let comment = "icmt"
    public static let creator = "crtr"
    public static let type = "type"
    public static let label = "labl"
    /// `alis`: an alias (no public constant; Apple's schema has it for every class).
    public static let alias = "alis"
    /// `prot`: a protection blob of passwords (no public constant; kept as Apple's schema does).
    public static let protection = "prot"
    /// `cusi`: a password's custom-icon flag (no public constant).
    public static let customIcon = "cusi"
    /// `scrp`: a password's script code (no public constant).
    public static let scriptCode = "scrp"
    public static let isInvisible = "invi"
    public static let isNegative = "nega"
    public static let account = "acct"
    public static let service = "svce"
    public static let generic = "gena"
    public static let synchronizable = "sync"
    public static let server = "srvr"
    public static let `protocol` = "ptcl"
    public static let port = "port"
    public static let path = "path"
    public static let securityDomain = "sdmn"
    public static let authenticationType = "atyp"
    public static let applicationTag = "atag"
    public static let applicationLabel = "klbl"
    public static let keyClass = "kcls"
    public static let keyType = "type"
    public static let keySizeInBits = "bsiz"
    public static let effectiveKeySize = "esiz"
    public static let startDate = "sdat"
    public static let endDate = "edat"
    public static let isPermanent = "perm"
    public static let isSensitive = "sens"
    public static let isExtractable = "extr"
    public static let canEncrypt = "encr"
    public static let canDecrypt = "decr"
    public static let canDerive = "drve"
    public static let canSign = "sign"
    public static let canVerify = "vrfy"
    public static let canWrap = "wrap"
    public static let canUnwrap = "unwp"
    public static let tokenID = "tkid"
    public static let subject = "subj"
    public static let issuer = "issr"
    public static let serialNumber = "slnr"
    public static let subjectKeyID = "skid"
    public static let publicKeyHash = "pkhh"
    public static let certificateType = "ctyp"
    public static let certificateEncoding = "cenc"
    public static let persistentReferenceAttribute = "persistref"

    // Search keys.
    public static let matchLimit = "m_Limit"
    public static let matchLimitOne = "m_LimitOne"
    public static let matchLimitAll = "m_LimitAll"
    public static let matchCaseInsensitive = "m_CaseInsensitive"

    // Return keys.
    public static let returnData = "r_Data"
    public static let returnAttributes = "r_Attributes"
    public static let returnRef = "r_Ref"
    public static let returnPersistentRef = "r_PersistentRef"

    // Value keys.
    public static let valueData = "v_Data"
    public static let valueRef = "v_Ref"
    public static let valuePersistentRef = "v_PersistentRef"

    // Use keys.
    public static let useDataProtectionKeychain = "nleg"
    public static let useAuthenticationUI = "u_AuthUI"
    public static let useAuthenticationUIAllow = "u_AuthUIA"
    public static let useAuthenticationUIFail = "u_AuthUIF"
    public static let useAuthenticationUISkip = "u_AuthUIS"
    public static let useAuthenticationContext = "u_AuthCtx"
    public static let useOperationPrompt = "u_OpPrompt"

    // Values.
    public static let synchronizableAny = "syna"
    /// `kSecAttrTokenIDSecureEnclave`.
    public static let tokenIDSecureEnclave = "com.apple.setoken"
}
