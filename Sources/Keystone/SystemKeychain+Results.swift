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
            // A SecAccessControl cannot be read back into flags with public API: it is left out.
            if key == Key.accessControl { continue }
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
}
