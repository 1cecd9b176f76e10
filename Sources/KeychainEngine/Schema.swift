import Foundation

/// The type of one attribute's values.
public enum AttributeType: Sendable, Hashable {
    case string
    case data
    case number
    case bool
    case date

    /// The value a primary-key attribute missing at add time is stored as.
    public var emptyValue: AttributeValue {
        switch self {
        case .string: return .string("")
        case .data: return .data(Data())
        case .number: return .number(0)
        case .bool: return .bool(false)
        case .date: return .date(Date(timeIntervalSinceReferenceDate: 0))
        }
    }
}

/// One column of a class table.
public struct AttributeSchema: Sendable, Hashable {
    public let key: String
    public let type: AttributeType
    public let isPrimaryKey: Bool
}

/// The table of one item class: its columns and its primary key.
///
/// The columns and keys follow Apple's SecItemSchema: see `reference/keychain-semantics.md` §3.
public struct ClassSchema: Sendable {
    public let itemClass: ItemClass
    /// Every attribute the class knows, by key.
    public let attributes: [String: AttributeSchema]
    /// The primary-key attributes in a fixed order (the UNIQUE constraint).
    public let primaryKey: [String]

    init(_ itemClass: ItemClass, _ columns: [(String, AttributeType)], primaryKey: [String]) {
        self.itemClass = itemClass
        self.primaryKey = primaryKey
        var attributes: [String: AttributeSchema] = [:]
        for (key, type) in columns {
            attributes[key] = AttributeSchema(key: key, type: type, isPrimaryKey: primaryKey.contains(key))
        }
        self.attributes = attributes
    }

    /// The schema of `itemClass`.
    public static func of(_ itemClass: ItemClass) -> ClassSchema {
        switch itemClass {
        case .genericPassword: return genericPassword
        case .internetPassword: return internetPassword
        case .certificate: return certificate
        case .key: return key
        case .identity: return identity
        }
    }

    /// The primary-key values of `attributes` in ``primaryKey`` order (missing ones as empty values).
    public func primaryKeyValues(of attributes: [String: AttributeValue]) -> [AttributeValue] {
        primaryKey.map { attributes[$0] ?? self.attributes[$0]!.type.emptyValue }
    }

    private static let common: [(String, AttributeType)] = [
        (Key.accessible, .string), (Key.accessGroup, .string), (Key.creationDate, .date),
        (Key.modificationDate, .date), (Key.synchronizable, .bool), (Key.tokenID, .string),
        (Key.label, .string),
    ]

    private static let passwordColumns: [(String, AttributeType)] = common + [
        (Key.description, .string), (Key.comment, .string), (Key.creator, .number), (Key.type, .number),
        (Key.isInvisible, .bool), (Key.isNegative, .bool), (Key.account, .string),
    ]

    static let genericPassword = ClassSchema(
        .genericPassword,
        passwordColumns + [(Key.service, .string), (Key.generic, .data)],
        primaryKey: [Key.account, Key.service, Key.accessGroup, Key.synchronizable])

    static let internetPassword = ClassSchema(
        .internetPassword,
        passwordColumns + [
            (Key.securityDomain, .string), (Key.server, .string), (Key.protocol, .string),
            (Key.authenticationType, .string), (Key.port, .number), (Key.path, .string),
        ],
        primaryKey: [Key.account, Key.securityDomain, Key.server, Key.protocol, Key.authenticationType,
                     Key.port, Key.path, Key.accessGroup, Key.synchronizable])

    private static let certificateColumns: [(String, AttributeType)] = [
        (Key.certificateType, .number), (Key.certificateEncoding, .number), (Key.subject, .data),
        (Key.issuer, .data), (Key.serialNumber, .data), (Key.subjectKeyID, .data), (Key.publicKeyHash, .data),
    ]

    static let certificate = ClassSchema(
        .certificate, common + certificateColumns,
        primaryKey: [Key.certificateType, Key.issuer, Key.serialNumber, Key.accessGroup, Key.synchronizable])

    private static let keyColumns: [(String, AttributeType)] = [
        (Key.keyClass, .number), (Key.applicationLabel, .data), (Key.applicationTag, .data),
        (Key.creator, .number), (Key.keyType, .number), (Key.keySizeInBits, .number),
        (Key.effectiveKeySize, .number), (Key.startDate, .date), (Key.endDate, .date),
        (Key.isPermanent, .bool), (Key.isSensitive, .bool), (Key.isExtractable, .bool),
        (Key.canEncrypt, .bool), (Key.canDecrypt, .bool), (Key.canDerive, .bool), (Key.canSign, .bool),
        (Key.canVerify, .bool), (Key.canWrap, .bool), (Key.canUnwrap, .bool),
    ]

    static let key = ClassSchema(
        .key, common + keyColumns,
        primaryKey: [Key.keyClass, Key.applicationLabel, Key.applicationTag, Key.creator, Key.keyType,
                     Key.keySizeInBits, Key.effectiveKeySize, Key.startDate, Key.endDate,
                     Key.accessGroup, Key.synchronizable])

    static let identity = ClassSchema(
        .identity, common + certificateColumns + keyColumns.filter { $0.0 != Key.creator },
        primaryKey: [Key.certificateType, Key.issuer, Key.serialNumber, Key.accessGroup, Key.synchronizable])
}
