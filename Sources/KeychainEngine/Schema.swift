import Foundation

/// The type of one attribute's values, with the conversions Apple's server makes when it parses a query
/// (SecDbItem.c: `copyString`, `copyData`, `copyBlob`, `copyNumber`, `copyDate`).
///
/// | type | accepts | stores | compared by |
/// |---|---|---|---|
/// | ``blob`` | String, Data, a number | the value as given | its bytes (a string's UTF-8); a number by value |
/// | ``string`` | String, Data holding UTF-8 | a String | its UTF-8 bytes |
/// | ``data`` | Data, String (its UTF-8), a number (4 bytes, little-endian, as `copyData`) | Data | its bytes |
/// | ``number`` | a number, a Boolean (0 or 1), a String | a number; a String that is not a plain decimal 32-bit integer stays a String | value and type |
/// | ``bool`` | a Boolean or a number | a Boolean (non-zero is true) | value |
/// | ``date`` | a Date | a Date | value |
///
/// Anything else is `errSecParam` (Apple: `errSecItemInvalidValue`, the same -50).
public enum AttributeType: Sendable, Hashable {
    /// Apple's `Blob` attributes (`acct`, `svce`, `gena`, `labl`, `alis`, `desc`, `icmt`, `prot`, `sdmn`, `srvr`,
    /// `atyp`, `path`, `atag`): a caller may give a String or Data, and the keychain keeps the type it was
    /// given and returns it. Apple's schema stores the SHA-1 digest of the value's bytes in the searchable
    /// column (flag `S` in SecItemSchema.c), so matching and the primary key's uniqueness go by bytes: an
    /// account given as `Data("alice".utf8)` finds, and collides with, the account `"alice"`. Missing at add
    /// time, a primary-key blob is stored as empty Data (Apple's default for blobs). A number is accepted and
    /// kept as a number, as Apple's `copyBlob` does; Keystone compares it with numbers only (Apple compares
    /// its 4-byte form with strings and data too: a case no real code relies on).
    case blob
    /// Text: stored as a String (Data holding UTF-8 is converted).
    case string
    /// Bytes: stored as Data.
    case data
    /// Apple's `Number` attributes. A String is accepted, as Apple's `copyNumber` does: a plain decimal
    /// 32-bit integer (`"42"`, `"-1"`) becomes that number; any other string (`"aapl"`, a four-character
    /// code as older code passes for `kSecAttrCreator` or `kSecAttrType`) is stored and returned as the
    /// String it was, and matches that String only.
    case number
    /// A Boolean.
    case bool
    /// A date (creation and modification dates, certificate validity).
    case date

    /// The value a primary-key attribute missing at add time is stored as.
    public var emptyValue: AttributeValue {
        switch self {
        case .string: return .string("")
        case .blob, .data: return .data(Data())
        case .number: return .number(0)
        case .bool: return .bool(false)
        case .date: return .date(Date(timeIntervalSinceReferenceDate: 0))
        }
    }
}

/// One column of a class table.
public struct AttributeSchema: Sendable, Hashable {
    /// The attribute's key (``Key``).
    public let key: String
    /// The type of its values.
    public let type: AttributeType
    /// Whether it is part of the class's primary key.
    public let isPrimaryKey: Bool
}

/// The table of one item class: its columns and its primary key.
///
/// The columns and keys follow Apple's SecItemSchema (SecItemSchema.c in Apple's open-source Security project).
public struct ClassSchema: Sendable {
    /// The class.
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

    // MARK: - A missing attribute: the one rule

    /// The value an item of this class holds for `key`, given `held`, what its attributes have for it: `held`, or
    /// when they have nothing, the empty value of the attribute's type (``AttributeType/emptyValue``).
    ///
    /// The rule, written here once: an add stores a missing primary-key attribute as its type's empty value, so
    /// every UNIQUE check, digest, index and comparison counts a missing attribute as that value (a row written
    /// without one, an attribute dictionary that leaves it out). Storages and the engine call this (or
    /// ``storedValue(of:in:)``, ``primaryKeyValue(_:of:)``, ``primaryKey(of:)``), never the rule themselves.
    ///
    /// - Returns: nil only when nothing is held for a key the class does not know.
    public func storedValue(_ held: AttributeValue?, of key: String) -> AttributeValue? {
        held ?? attributes[key]?.type.emptyValue
    }

    /// The value `attributes` hold for `key`, a missing attribute of the class counting as its type's empty value
    /// (``storedValue(_:of:)``); nil for a key the class does not know that `attributes` do not hold.
    public func storedValue(of key: String, in attributes: [String: AttributeValue]) -> AttributeValue? {
        storedValue(attributes[key], of: key)
    }

    /// The value `attributes` hold for the primary-key attribute `key`, its type's empty value when they lack it
    /// (``storedValue(_:of:)``).
    ///
    /// - Precondition: `key` is an attribute of the class (every ``primaryKey`` attribute is).
    public func primaryKeyValue(_ key: String, of attributes: [String: AttributeValue]) -> AttributeValue {
        guard let value = storedValue(of: key, in: attributes) else {
            preconditionFailure("'\(key)' is not an attribute of the class \(itemClass.rawValue)")
        }
        return value
    }

    /// The primary key of `attributes` as constraints: each primary-key attribute with its value (missing ones as
    /// empty values, ``primaryKeyValue(_:of:)``), as a storage's UNIQUE check and lookups take it.
    public func primaryKey(of attributes: [String: AttributeValue]) -> [String: AttributeValue] {
        var key: [String: AttributeValue] = [:]
        for attribute in primaryKey { key[attribute] = primaryKeyValue(attribute, of: attributes) }
        return key
    }

    /// The primary key of the item a SecItem dictionary describes (an add's attributes, a search result's): each
    /// primary-key attribute with its value in `attributes`, a missing one as the empty value an add stores for it
    /// (``primaryKeyValue(_:of:)``); the other keys are left out. With `kSecClass`, the query naming exactly that item.
    public func primaryKeyQuery(of attributes: KeychainQuery) -> KeychainQuery {
        var key: KeychainQuery = [:]
        for attribute in primaryKey { key[attribute] = attributes[attribute] ?? KeychainValue(primaryKeyValue(attribute, of: [:])) }
        return key
    }

    /// The primary-key values of `attributes` in ``primaryKey`` order (missing ones as empty values).
    package func primaryKeyValues(of attributes: [String: AttributeValue]) -> [AttributeValue] {
        primaryKey.map { primaryKeyValue($0, of: attributes) }
    }

    // The column types follow Apple's SecItemSchema.c (see ``AttributeType`` for what each accepts).
    private static let common: [(String, AttributeType)] = [
        (Key.accessible, .string), (Key.accessGroup, .string), (Key.creationDate, .date),
        (Key.modificationDate, .date), (Key.synchronizable, .bool), (Key.tokenID, .string),
        (Key.label, .blob), (Key.alias, .blob),
    ]

    private static let passwordColumns: [(String, AttributeType)] = common + [
        (Key.description, .blob), (Key.comment, .blob), (Key.creator, .number), (Key.type, .number),
        (Key.isInvisible, .bool), (Key.isNegative, .bool), (Key.account, .blob), (Key.protection, .blob),
        (Key.customIcon, .number), (Key.scriptCode, .number),
    ]

    static let genericPassword = ClassSchema(
        .genericPassword,
        passwordColumns + [(Key.service, .blob), (Key.generic, .blob)],
        primaryKey: [Key.account, Key.service, Key.accessGroup, Key.synchronizable])

    static let internetPassword = ClassSchema(
        .internetPassword,
        passwordColumns + [
            (Key.securityDomain, .blob), (Key.server, .blob), (Key.protocol, .string),
            (Key.authenticationType, .blob), (Key.port, .number), (Key.path, .blob),
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
        (Key.keyClass, .number), (Key.applicationLabel, .data), (Key.applicationTag, .blob),
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
