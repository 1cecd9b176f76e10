#if !canImport(Darwin)
// SecKey.h: the algorithm identifiers of SecKeyCreateSignature, SecKeyCreateEncryptedData and
// SecKeyCopyKeyExchangeResult. The raw values are Apple's (Security's SecKeyAdaptors.m, apple-oss-distributions);
// Swift code names them through the static members, as Apple's `CF_STRING_ENUM` import does. Which of them Keystone
// can perform is `SecKeyIsAlgorithmSupported`'s answer (see SecKeyOperations.swift).

/// An algorithm for a key operation: a string such as `"algid:sign:ECDSA:message-X962:SHA256"`.
public struct SecKeyAlgorithm: RawRepresentable, Hashable, Sendable {
    /// The algorithm's identifier string.
    public let rawValue: CFString
    /// An algorithm from its identifier string.
    public init(rawValue: CFString) { self.rawValue = rawValue }
    /// An algorithm from its identifier string.
    public init(_ rawValue: CFString) { self.rawValue = rawValue }

    /// `"algid:sign:RSA:raw"`.
    public static let rsaSignatureRaw = SecKeyAlgorithm("algid:sign:RSA:raw")
    /// `"algid:sign:RSA:digest-PKCS1v15"`.
    public static let rsaSignatureDigestPKCS1v15Raw = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15")
    /// `"algid:sign:RSA:digest-PKCS1v15:SHA1"`.
    public static let rsaSignatureDigestPKCS1v15SHA1 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA1")
    /// `"algid:sign:RSA:digest-PKCS1v15:SHA224"`.
    public static let rsaSignatureDigestPKCS1v15SHA224 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA224")
    /// `"algid:sign:RSA:digest-PKCS1v15:SHA256"`.
    public static let rsaSignatureDigestPKCS1v15SHA256 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA256")
    /// `"algid:sign:RSA:digest-PKCS1v15:SHA384"`.
    public static let rsaSignatureDigestPKCS1v15SHA384 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA384")
    /// `"algid:sign:RSA:digest-PKCS1v15:SHA512"`.
    public static let rsaSignatureDigestPKCS1v15SHA512 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA512")
    /// `"algid:sign:RSA:message-PKCS1v15:SHA1"`.
    public static let rsaSignatureMessagePKCS1v15SHA1 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA1")
    /// `"algid:sign:RSA:message-PKCS1v15:SHA224"`.
    public static let rsaSignatureMessagePKCS1v15SHA224 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA224")
    /// `"algid:sign:RSA:message-PKCS1v15:SHA256"`.
    public static let rsaSignatureMessagePKCS1v15SHA256 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA256")
    /// `"algid:sign:RSA:message-PKCS1v15:SHA384"`.
    public static let rsaSignatureMessagePKCS1v15SHA384 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA384")
    /// `"algid:sign:RSA:message-PKCS1v15:SHA512"`.
    public static let rsaSignatureMessagePKCS1v15SHA512 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA512")
    /// `"algid:sign:RSA:digest-PSS:SHA1:SHA1:20"`.
    public static let rsaSignatureDigestPSSSHA1 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA1:SHA1:20")
    /// `"algid:sign:RSA:digest-PSS:SHA224:SHA224:28"`.
    public static let rsaSignatureDigestPSSSHA224 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA224:SHA224:28")
    /// `"algid:sign:RSA:digest-PSS:SHA256:SHA256:32"`.
    public static let rsaSignatureDigestPSSSHA256 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA256:SHA256:32")
    /// `"algid:sign:RSA:digest-PSS:SHA384:SHA384:48"`.
    public static let rsaSignatureDigestPSSSHA384 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA384:SHA384:48")
    /// `"algid:sign:RSA:digest-PSS:SHA512:SHA512:64"`.
    public static let rsaSignatureDigestPSSSHA512 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA512:SHA512:64")
    /// `"algid:sign:RSA:message-PSS:SHA1:SHA1:20"`.
    public static let rsaSignatureMessagePSSSHA1 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA1:SHA1:20")
    /// `"algid:sign:RSA:message-PSS:SHA224:SHA224:28"`.
    public static let rsaSignatureMessagePSSSHA224 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA224:SHA224:28")
    /// `"algid:sign:RSA:message-PSS:SHA256:SHA256:32"`.
    public static let rsaSignatureMessagePSSSHA256 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA256:SHA256:32")
    /// `"algid:sign:RSA:message-PSS:SHA384:SHA384:48"`.
    public static let rsaSignatureMessagePSSSHA384 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA384:SHA384:48")
    /// `"algid:sign:RSA:message-PSS:SHA512:SHA512:64"`.
    public static let rsaSignatureMessagePSSSHA512 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA512:SHA512:64")
    /// `"algid:sign:ECDSA:RFC4754"`.
    public static let ecdsaSignatureRFC4754 = SecKeyAlgorithm("algid:sign:ECDSA:RFC4754")
    /// `"algid:sign:ECDSA:digest-X962"`.
    public static let ecdsaSignatureDigestX962 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962")
    /// `"algid:sign:ECDSA:digest-X962:SHA1"`.
    public static let ecdsaSignatureDigestX962SHA1 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA1")
    /// `"algid:sign:ECDSA:digest-X962:SHA224"`.
    public static let ecdsaSignatureDigestX962SHA224 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA224")
    /// `"algid:sign:ECDSA:digest-X962:SHA256"`.
    public static let ecdsaSignatureDigestX962SHA256 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA256")
    /// `"algid:sign:ECDSA:digest-X962:SHA384"`.
    public static let ecdsaSignatureDigestX962SHA384 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA384")
    /// `"algid:sign:ECDSA:digest-X962:SHA512"`.
    public static let ecdsaSignatureDigestX962SHA512 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA512")
    /// `"algid:sign:ECDSA:message-X962:SHA1"`.
    public static let ecdsaSignatureMessageX962SHA1 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA1")
    /// `"algid:sign:ECDSA:message-X962:SHA224"`.
    public static let ecdsaSignatureMessageX962SHA224 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA224")
    /// `"algid:sign:ECDSA:message-X962:SHA256"`.
    public static let ecdsaSignatureMessageX962SHA256 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA256")
    /// `"algid:sign:ECDSA:message-X962:SHA384"`.
    public static let ecdsaSignatureMessageX962SHA384 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA384")
    /// `"algid:sign:ECDSA:message-X962:SHA512"`.
    public static let ecdsaSignatureMessageX962SHA512 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA512")
    /// `"algid:encrypt:RSA:raw"`.
    public static let rsaEncryptionRaw = SecKeyAlgorithm("algid:encrypt:RSA:raw")
    /// `"algid:encrypt:RSA:PKCS1"`.
    public static let rsaEncryptionPKCS1 = SecKeyAlgorithm("algid:encrypt:RSA:PKCS1")
    /// `"algid:encrypt:RSA:OAEP:SHA1"`.
    public static let rsaEncryptionOAEPSHA1 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA1")
    /// `"algid:encrypt:RSA:OAEP:SHA224"`.
    public static let rsaEncryptionOAEPSHA224 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA224")
    /// `"algid:encrypt:RSA:OAEP:SHA256"`.
    public static let rsaEncryptionOAEPSHA256 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA256")
    /// `"algid:encrypt:RSA:OAEP:SHA384"`.
    public static let rsaEncryptionOAEPSHA384 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA384")
    /// `"algid:encrypt:RSA:OAEP:SHA512"`.
    public static let rsaEncryptionOAEPSHA512 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA512")
    /// `"algid:encrypt:RSA:OAEP:SHA1:AESGCM"`.
    public static let rsaEncryptionOAEPSHA1AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA1:AESGCM")
    /// `"algid:encrypt:RSA:OAEP:SHA224:AESGCM"`.
    public static let rsaEncryptionOAEPSHA224AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA224:AESGCM")
    /// `"algid:encrypt:RSA:OAEP:SHA256:AESGCM"`.
    public static let rsaEncryptionOAEPSHA256AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA256:AESGCM")
    /// `"algid:encrypt:RSA:OAEP:SHA384:AESGCM"`.
    public static let rsaEncryptionOAEPSHA384AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA384:AESGCM")
    /// `"algid:encrypt:RSA:OAEP:SHA512:AESGCM"`.
    public static let rsaEncryptionOAEPSHA512AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA512:AESGCM")
    /// `"algid:encrypt:ECIES:ECDH:KDFX963:SHA1:AESGCM"`.
    public static let eciesEncryptionStandardX963SHA1AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDH:KDFX963:SHA1:AESGCM")
    /// `"algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM"`.
    public static let eciesEncryptionStandardX963SHA224AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM")
    /// `"algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM"`.
    public static let eciesEncryptionStandardX963SHA256AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM")
    /// `"algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM"`.
    public static let eciesEncryptionStandardX963SHA384AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM")
    /// `"algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM"`.
    public static let eciesEncryptionStandardX963SHA512AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM")
    /// `"algid:encrypt:ECIES:ECDHC:KDFX963:SHA1:AESGCM"`.
    public static let eciesEncryptionCofactorX963SHA1AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDHC:KDFX963:SHA1:AESGCM")
    /// `"algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM"`.
    public static let eciesEncryptionCofactorX963SHA224AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM")
    /// `"algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM"`.
    public static let eciesEncryptionCofactorX963SHA256AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM")
    /// `"algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM"`.
    public static let eciesEncryptionCofactorX963SHA384AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM")
    /// `"algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM"`.
    public static let eciesEncryptionCofactorX963SHA512AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM")
    /// `"algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM-KDFIV"`.
    public static let eciesEncryptionStandardVariableIVX963SHA224AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM-KDFIV")
    /// `"algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM-KDFIV"`.
    public static let eciesEncryptionStandardVariableIVX963SHA256AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM-KDFIV")
    /// `"algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM-KDFIV"`.
    public static let eciesEncryptionStandardVariableIVX963SHA384AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM-KDFIV")
    /// `"algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM-KDFIV"`.
    public static let eciesEncryptionStandardVariableIVX963SHA512AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM-KDFIV")
    /// `"algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM-KDFIV"`.
    public static let eciesEncryptionCofactorVariableIVX963SHA224AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM-KDFIV")
    /// `"algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM-KDFIV"`.
    public static let eciesEncryptionCofactorVariableIVX963SHA256AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM-KDFIV")
    /// `"algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM-KDFIV"`.
    public static let eciesEncryptionCofactorVariableIVX963SHA384AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM-KDFIV")
    /// `"algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM-KDFIV"`.
    public static let eciesEncryptionCofactorVariableIVX963SHA512AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM-KDFIV")
    /// `"algid:keyexchange:ECDH"`.
    public static let ecdhKeyExchangeStandard = SecKeyAlgorithm("algid:keyexchange:ECDH")
    /// `"algid:keyexchange:ECDH:KDFX963:SHA1"`.
    public static let ecdhKeyExchangeStandardX963SHA1 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA1")
    /// `"algid:keyexchange:ECDH:KDFX963:SHA224"`.
    public static let ecdhKeyExchangeStandardX963SHA224 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA224")
    /// `"algid:keyexchange:ECDH:KDFX963:SHA256"`.
    public static let ecdhKeyExchangeStandardX963SHA256 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA256")
    /// `"algid:keyexchange:ECDH:KDFX963:SHA384"`.
    public static let ecdhKeyExchangeStandardX963SHA384 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA384")
    /// `"algid:keyexchange:ECDH:KDFX963:SHA512"`.
    public static let ecdhKeyExchangeStandardX963SHA512 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA512")
    /// `"algid:keyexchange:ECDHC"`.
    public static let ecdhKeyExchangeCofactor = SecKeyAlgorithm("algid:keyexchange:ECDHC")
    /// `"algid:keyexchange:ECDHC:KDFX963:SHA1"`.
    public static let ecdhKeyExchangeCofactorX963SHA1 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA1")
    /// `"algid:keyexchange:ECDHC:KDFX963:SHA224"`.
    public static let ecdhKeyExchangeCofactorX963SHA224 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA224")
    /// `"algid:keyexchange:ECDHC:KDFX963:SHA256"`.
    public static let ecdhKeyExchangeCofactorX963SHA256 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA256")
    /// `"algid:keyexchange:ECDHC:KDFX963:SHA384"`.
    public static let ecdhKeyExchangeCofactorX963SHA384 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA384")
    /// `"algid:keyexchange:ECDHC:KDFX963:SHA512"`.
    public static let ecdhKeyExchangeCofactorX963SHA512 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA512")
}

extension SecKeyAlgorithm {
    /// Every algorithm above (the plans of SecKeyOperations.swift are parsed once, from this list).
    static let allKnown: [SecKeyAlgorithm] = [
        .rsaSignatureRaw,
        .rsaSignatureDigestPKCS1v15Raw,
        .rsaSignatureDigestPKCS1v15SHA1,
        .rsaSignatureDigestPKCS1v15SHA224,
        .rsaSignatureDigestPKCS1v15SHA256,
        .rsaSignatureDigestPKCS1v15SHA384,
        .rsaSignatureDigestPKCS1v15SHA512,
        .rsaSignatureMessagePKCS1v15SHA1,
        .rsaSignatureMessagePKCS1v15SHA224,
        .rsaSignatureMessagePKCS1v15SHA256,
        .rsaSignatureMessagePKCS1v15SHA384,
        .rsaSignatureMessagePKCS1v15SHA512,
        .rsaSignatureDigestPSSSHA1,
        .rsaSignatureDigestPSSSHA224,
        .rsaSignatureDigestPSSSHA256,
        .rsaSignatureDigestPSSSHA384,
        .rsaSignatureDigestPSSSHA512,
        .rsaSignatureMessagePSSSHA1,
        .rsaSignatureMessagePSSSHA224,
        .rsaSignatureMessagePSSSHA256,
        .rsaSignatureMessagePSSSHA384,
        .rsaSignatureMessagePSSSHA512,
        .ecdsaSignatureRFC4754,
        .ecdsaSignatureDigestX962,
        .ecdsaSignatureDigestX962SHA1,
        .ecdsaSignatureDigestX962SHA224,
        .ecdsaSignatureDigestX962SHA256,
        .ecdsaSignatureDigestX962SHA384,
        .ecdsaSignatureDigestX962SHA512,
        .ecdsaSignatureMessageX962SHA1,
        .ecdsaSignatureMessageX962SHA224,
        .ecdsaSignatureMessageX962SHA256,
        .ecdsaSignatureMessageX962SHA384,
        .ecdsaSignatureMessageX962SHA512,
        .rsaEncryptionRaw,
        .rsaEncryptionPKCS1,
        .rsaEncryptionOAEPSHA1,
        .rsaEncryptionOAEPSHA224,
        .rsaEncryptionOAEPSHA256,
        .rsaEncryptionOAEPSHA384,
        .rsaEncryptionOAEPSHA512,
        .rsaEncryptionOAEPSHA1AESGCM,
        .rsaEncryptionOAEPSHA224AESGCM,
        .rsaEncryptionOAEPSHA256AESGCM,
        .rsaEncryptionOAEPSHA384AESGCM,
        .rsaEncryptionOAEPSHA512AESGCM,
        .eciesEncryptionStandardX963SHA1AESGCM,
        .eciesEncryptionStandardX963SHA224AESGCM,
        .eciesEncryptionStandardX963SHA256AESGCM,
        .eciesEncryptionStandardX963SHA384AESGCM,
        .eciesEncryptionStandardX963SHA512AESGCM,
        .eciesEncryptionCofactorX963SHA1AESGCM,
        .eciesEncryptionCofactorX963SHA224AESGCM,
        .eciesEncryptionCofactorX963SHA256AESGCM,
        .eciesEncryptionCofactorX963SHA384AESGCM,
        .eciesEncryptionCofactorX963SHA512AESGCM,
        .eciesEncryptionStandardVariableIVX963SHA224AESGCM,
        .eciesEncryptionStandardVariableIVX963SHA256AESGCM,
        .eciesEncryptionStandardVariableIVX963SHA384AESGCM,
        .eciesEncryptionStandardVariableIVX963SHA512AESGCM,
        .eciesEncryptionCofactorVariableIVX963SHA224AESGCM,
        .eciesEncryptionCofactorVariableIVX963SHA256AESGCM,
        .eciesEncryptionCofactorVariableIVX963SHA384AESGCM,
        .eciesEncryptionCofactorVariableIVX963SHA512AESGCM,
        .ecdhKeyExchangeStandard,
        .ecdhKeyExchangeStandardX963SHA1,
        .ecdhKeyExchangeStandardX963SHA224,
        .ecdhKeyExchangeStandardX963SHA256,
        .ecdhKeyExchangeStandardX963SHA384,
        .ecdhKeyExchangeStandardX963SHA512,
        .ecdhKeyExchangeCofactor,
        .ecdhKeyExchangeCofactorX963SHA1,
        .ecdhKeyExchangeCofactorX963SHA224,
        .ecdhKeyExchangeCofactorX963SHA256,
        .ecdhKeyExchangeCofactorX963SHA384,
        .ecdhKeyExchangeCofactorX963SHA512,
    ]
}

/// A key operation, for ``SecKeyIsAlgorithmSupported(_:_:_:)``.
public enum SecKeyOperationType: CFIndex, Sendable {
    /// ``SecKeyCreateSignature(_:_:_:_:)``.
    case sign = 0
    /// ``SecKeyVerifySignature(_:_:_:_:_:)``.
    case verify = 1
    /// ``SecKeyCreateEncryptedData(_:_:_:_:)``.
    case encrypt = 2
    /// ``SecKeyCreateDecryptedData(_:_:_:_:)``.
    case decrypt = 3
    /// ``SecKeyCopyKeyExchangeResult(_:_:_:_:_:)``.
    case keyExchange = 4
}

/// A parameter of ``SecKeyCopyKeyExchangeResult(_:_:_:_:_:)``: `SecKeyKeyExchangeParameter.requestedSize.rawValue`.
public struct SecKeyKeyExchangeParameter: RawRepresentable, Hashable, Sendable {
    /// The parameter's key string.
    public let rawValue: CFString
    /// A parameter from its key string.
    public init(rawValue: CFString) { self.rawValue = rawValue }
    /// A parameter from its key string.
    public init(_ rawValue: CFString) { self.rawValue = rawValue }
    /// `"requestedSize"`: the number of bytes the KDF produces (required by the X9.63 KDF algorithms).
    public static let requestedSize = SecKeyKeyExchangeParameter("requestedSize")
    /// `"sharedInfo"`: the KDF's shared info (data; optional).
    public static let sharedInfo = SecKeyKeyExchangeParameter("sharedInfo")
}

/// `kSecKeyKeyExchangeParameterRequestedSize`: `"requestedSize"` (C name of ``SecKeyKeyExchangeParameter/requestedSize``).
public let kSecKeyKeyExchangeParameterRequestedSize: CFString = "requestedSize"
/// `kSecKeyKeyExchangeParameterSharedInfo`: `"sharedInfo"` (C name of ``SecKeyKeyExchangeParameter/sharedInfo``).
public let kSecKeyKeyExchangeParameterSharedInfo: CFString = "sharedInfo"
#endif
