import Foundation

/// The four SecItem operations (named to stay clear of Foundation's `Operation`).
public enum KeychainOperation: String, Sendable, Hashable, CaseIterable {
    case add, copy, update, delete
}

/// A SecItem dictionary after validation: the class, the typed attributes and the search, return and use options.
struct ParsedQuery {
    enum Limit: Equatable { case one, all, count(Int) }
    enum AuthUI { case allow, fail, skip }

    var itemClass: ItemClass
    /// Class attributes, coerced to their schema types (never `sync`; see `sync`).
    var attributes: [String: AttributeValue] = [:]
    /// `kSecAttrSynchronizable`: nil when absent, `.some(nil)` for `kSecAttrSynchronizableAny`.
    var sync: Bool?? = nil
    var limit: Limit = .one
    var limitGiven = false
    var returnData = false
    var returnAttributes = false
    var returnRef = false
    var returnPersistentRef = false
    var valueData: Data?
    var persistentReference: PersistentReference?
    var accessControl: AccessControl?
    var accessibility: Accessibility?
    var authUI: AuthUI = .allow
    var context: AuthenticationContext?
    var prompt: String?
    var caseInsensitive = false

    var hasReturnKeys: Bool { returnData || returnAttributes || returnRef || returnPersistentRef }

    /// Parses and validates `query` for `operation`.
    ///
    /// - Throws: `errSecParam` for a missing or unknown class, a malformed value or limit;
    ///   `errSecNoSuchAttr` for an attribute the class does not have.
    init(_ query: KeychainQuery, for operation: KeychainOperation) throws {
        let cls: ItemClass
        if let value = query[Key.class] {
            guard let raw = value.stringValue else { throw EngineError.param("kSecClass must be a class constant") }
            guard let parsed = ItemClass(rawValue: raw) else { throw EngineError.param("unknown kSecClass '\(raw)'") }
            cls = parsed
        } else if let ref = query[Key.valuePersistentRef]?.dataValue, let parsed = PersistentReference(data: ref), operation != .add {
            cls = parsed.itemClass
        } else {
            throw EngineError.param("the query has no kSecClass")
        }
        itemClass = cls
        let schema = ClassSchema.of(cls)

        for (key, value) in query {
            // Most keys are plain attributes: take them straight to the schema.
            if key.utf8.count == 4, let column = schema.attributes[key], !Self.specialAttributes.contains(key) {
                attributes[key] = try Self.coerce(value, to: column.type, key: key)
                continue
            }
            switch key {
            case Key.class:
                continue
            case Key.matchLimit:
                limitGiven = true
                if let s = value.stringValue {
                    switch s {
                    case Key.matchLimitOne: limit = .one
                    case Key.matchLimitAll: limit = .all
                    default: throw EngineError.param("kSecMatchLimit must be kSecMatchLimitOne, kSecMatchLimitAll or a positive number")
                    }
                } else if let n = value.integerValue, n > 0 {
                    limit = n == 1 ? .one : .count(Int(min(n, Int64(Int.max))))
                } else {
                    throw EngineError.param("kSecMatchLimit must be kSecMatchLimitOne, kSecMatchLimitAll or a positive number")
                }
            case Key.matchCaseInsensitive:
                guard let b = value.boolValue else { throw EngineError.param("kSecMatchCaseInsensitive must be a Boolean") }
                caseInsensitive = b
            case Key.returnData, Key.returnAttributes, Key.returnRef, Key.returnPersistentRef:
                guard let b = value.boolValue else { throw EngineError.param("\(key) must be a Boolean") }
                switch key {
                case Key.returnData: returnData = b
                case Key.returnAttributes: returnAttributes = b
                case Key.returnRef: returnRef = b
                default: returnPersistentRef = b
                }
            case Key.valueData:
                guard let d = value.dataValue else { throw EngineError.param("kSecValueData must be Data") }
                valueData = d
            case Key.valuePersistentRef:
                guard operation != .add else { throw EngineError.param("kSecValuePersistentRef cannot be added") }
                guard let d = value.dataValue, let ref = PersistentReference(data: d) else {
                    throw EngineError.param("kSecValuePersistentRef is not a persistent reference")
                }
                persistentReference = ref
            case Key.valueRef:
                throw EngineError.param("kSecValueRef is not supported by this keychain; use kSecValueData")
            case Key.useDataProtectionKeychain:
                guard value.boolValue != nil else { throw EngineError.param("kSecUseDataProtectionKeychain must be a Boolean") }
            case Key.useAuthenticationUI:
                switch value.stringValue {
                case Key.useAuthenticationUIAllow?: authUI = .allow
                case Key.useAuthenticationUIFail?: authUI = .fail
                case Key.useAuthenticationUISkip?: authUI = .skip
                default: throw EngineError.param("kSecUseAuthenticationUI must be Allow, Fail or Skip")
                }
            case Key.useAuthenticationContext:
                guard case .authenticationContext(let c) = value else {
                    throw EngineError.param("kSecUseAuthenticationContext must be an authentication context")
                }
                context = c
            case Key.useOperationPrompt:
                guard let s = value.stringValue else { throw EngineError.param("kSecUseOperationPrompt must be a string") }
                prompt = s
            case Key.accessControl:
                guard case .accessControl(let ac) = value else { throw EngineError.param("kSecAttrAccessControl must be a SecAccessControl") }
                accessControl = ac
            case Key.accessible:
                guard let s = value.stringValue, let a = Accessibility(rawValue: s) else {
                    throw EngineError.param("kSecAttrAccessible must be one of the kSecAttrAccessible constants")
                }
                accessibility = a
            case Key.synchronizable:
                if value.stringValue == Key.synchronizableAny {
                    sync = .some(nil)
                } else if let b = value.boolValue {
                    sync = .some(b)
                } else {
                    throw EngineError.param("kSecAttrSynchronizable must be a Boolean or kSecAttrSynchronizableAny")
                }
            case Key.persistentReferenceAttribute:
                continue
            default:
                if key.hasPrefix("m_") || key.hasPrefix("u_") {
                    // Search and use keys this engine does not implement (policies, item lists, tombstones…)
                    // are ignored, as Apple's server ignores keys that do not apply.
                    continue
                }
                // As Apple's query parser: four-character keys are attributes (errSecNoSuchAttr when the class
                // lacks them); other unknown keys are malformed (errSecParam).
                guard key.utf8.count == 4 else { throw EngineError.param("unknown key '\(key)'") }
                guard let column = schema.attributes[key] else {
                    throw EngineError(Status.noSuchAttr, "attribute '\(key)' does not belong to class '\(cls.rawValue)'")
                }
                attributes[key] = try Self.coerce(value, to: column.type, key: key)
            }
        }
        // Apple makes references (SecKey, SecCertificate, SecIdentity) for keys, certificates and identities
        // only: for passwords kSecReturnRef adds nothing to the result (SecItem.c,
        // SecItemCreateFromAttributeDictionary has no password case), so alone it asks for nothing.
        if returnRef && (cls == .genericPassword || cls == .internetPassword) { returnRef = false }
        if let ref = persistentReference, ref.itemClass != cls {
            throw EngineError.param("kSecValuePersistentRef refers to another class")
        }
    }

    /// The four-character keys with rules of their own.
    static let specialAttributes: Set<String> = [Key.accessible, Key.accessControl, Key.synchronizable, Key.useDataProtectionKeychain]

    /// Converts a dictionary value to the attribute's type, with the conversions Apple's server makes
    /// (SecDbItem.c: `copyBlob`, `copyString`, `copyData`, `copyNumber`, `copyDate`; the table on ``AttributeType``).
    static func coerce(_ value: KeychainValue, to type: AttributeType, key: String) throws -> AttributeValue {
        switch type {
        case .blob:
            // copyBlob: Data and String are kept as given; so is a number (a CFBoolean is not a CFNumber).
            switch value {
            case .string(let s): return .string(s)
            case .data(let d): return .data(d)
            case .number, .double: if let n = value.integerValue { return .number(n) }
            default: break
            }
        case .string:
            // copyString: a String, or Data holding UTF-8.
            if let s = value.stringValue { return .string(s) }
            if let d = value.dataValue, let s = String(data: d, encoding: .utf8) { return .string(s) }
        case .data:
            // copyData: Data, a String's UTF-8, or a number's 32-bit little-endian bytes.
            switch value {
            case .data(let d): return .data(d)
            case .string(let s): return .data(Data(s.utf8))
            case .number, .double:
                if let n = value.integerValue {
                    return .data(withUnsafeBytes(of: Int32(truncatingIfNeeded: n).littleEndian) { Data($0) })
                }
            default: break
            }
        case .number:
            if let n = value.integerValue { return .number(n) }
            if let s = value.stringValue {
                // copyNumber: a string that prints back as the 32-bit integer it parses to is that number;
                // any other string (a four-character code such as "aapl") is kept as the string.
                if let n = Int32(s), String(n) == s { return .number(Int64(n)) }
                return .string(s)
            }
        case .bool:
            if let b = value.boolValue { return .bool(b) }
        case .date:
            if case .date(let d) = value { return .date(d) }
        }
        throw EngineError.param("attribute '\(key)' has a value of the wrong type")
    }
}
