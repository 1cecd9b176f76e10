import Foundation
import KeychainServices
// As in SystemKeychain.swift: Apple's modules imported as Apple code does, `canImport(Darwin)` rather than
// `canImport(Security)` (on Linux this package has a `Security` module Keystone does not depend on).
#if canImport(Darwin)
import Security
#endif

// SecItem's results (`Data`, `[String: Any]`, arrays of them) → SystemKeychain's typed `ItemResult`.
extension SystemKeychain {
    // MARK: - Results → ItemResult

    static func itemClass(of query: KeychainQuery) -> ItemClass? {
        query[Key.class]?.stringValue.flatMap(ItemClass.init(rawValue:))
    }

    static func itemResult(_ result: CFTypeRef?, itemClass: ItemClass?) throws -> ItemResult? {
        guard let result else { return nil }
        return try convert(result as Any, itemClass: itemClass)
    }

    private static func convert(_ value: Any, itemClass: ItemClass?) throws -> ItemResult {
        if let data = value as? Data { return .data(data) }
        if let dictionary = value as? [String: Any] { return .attributes(attributes(dictionary, itemClass: itemClass)) }
        if let array = value as? [Any] { return .array(try array.map { try convert($0, itemClass: itemClass) }) }
        throw KeychainError(code: .unexpectedResult, reason: "Keychain Services returned a \(type(of: value))")
    }

    private static func attributes(_ dictionary: [String: Any], itemClass: ItemClass?) -> KeychainQuery {
        let cls = (dictionary[Key.class] as? String).flatMap(ItemClass.init(rawValue:)) ?? itemClass
        let schema = cls.map(ClassSchema.of)
        var query: KeychainQuery = [:]
        for (key, value) in dictionary {
            if key == Key.accessControl {
                if let control = accessControl(value, protection: dictionary[Key.accessible] as? String) { query[key] = control }
                continue
            }
            let type = schema?.attributes[key]?.type
            switch value {
            case let string as String: query[key] = .string(string)
            case let data as Data: query[key] = .data(data)
            case let date as Date: query[key] = .date(date)
            case let number as NSNumber:
                query[key] = (type == .bool || key == Key.synchronizable) ? .bool(number.boolValue) : .number(number.int64Value)
            case let bool as Bool: query[key] = .bool(bool)
            case let int as Int: query[key] = .number(Int64(int))
            default: continue
            }
        }
        if let cls { query[Key.class] = .string(cls.rawValue) }
        return query
    }

    /// The `kSecAttrAccessControl` of a result as a typed value, or nil when the value is not a `SecAccessControl`.
    ///
    /// Every item of a data protection keychain carries one in its attributes, on Apple platforms (Security's
    /// `SecDbItemCopyAccessControl`: the item's own, else one made from its protection class alone) and on Linux (the
    /// engine's, with no flags for an item added with `kSecAttrAccessible` only). So its presence says nothing:
    /// what tells a protected item is whether it has constraints.
    ///
    /// - Linux: KeychainServices' `SecAccessControl` holds the `AccessControl` itself: `.accessControl` with the
    ///   item's exact protection class and flags.
    /// - Apple platforms: a `SecAccessControl` is opaque (no public API reads its flags). Decision: one equal
    ///   (`CFEqual`) to `SecAccessControlCreateWithFlags(protection, [], nil)`, the protection class alone, is
    ///   `.accessControl` with no flags; any other has constraints (user presence, biometry, passcode, private-key
    ///   usage…) whose flags cannot be known, and is `.bool(true)`: "an access control that needs more than the
    ///   protection class". A `.bool(true)` is never passed back to SecItem as an access control. Without a
    ///   protection class to compare with, it also counts as protected: reading a protected secret by mistake
    ///   prompts the user, skipping an unprotected one does not.
    ///
    /// ``ItemAttributes/hasAccessControl`` is true for both forms of "constraints".
    static func accessControl(_ value: Any, protection: String?) -> KeychainValue? {
        #if canImport(Darwin)
        let object = value as AnyObject
        guard CFGetTypeID(object) == SecAccessControlGetTypeID() else { return nil }
        if let accessibility = protection.flatMap(Accessibility.init(rawValue:)),
           let protectionOnly = SecAccessControlCreateWithFlags(kCFAllocatorDefault, accessibility.rawValue as CFString, [], nil),
           CFEqual(object, protectionOnly) {
            return .accessControl(AccessControl(accessibility: accessibility, flags: []))
        }
        return .bool(true)
        #else
        guard let control = value as? SecAccessControl else { return nil }
        return .accessControl(control.accessControl)
        #endif
    }
}
