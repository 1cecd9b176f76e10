#if !canImport(Darwin)
import Foundation
import KeychainEngine

// SecItemAdd, SecItemCopyMatching, SecItemUpdate, SecItemDelete and SecCopyErrorMessageString over the
// process-wide default keychain (`KeychainServicesDefaults.currentEngine()`), with Apple's semantics (the engine's).

/// Adds an item. With return keys, `result` receives what `SecItemCopyMatching` would return for it.
///
/// - Returns: `errSecSuccess`, or `errSecDuplicateItem`, `errSecParam`, `errSecNoSuchAttr`,
///   `errSecInteractionNotAllowed`, `errSecMissingEntitlement`…
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    SecItemBridge.run(result) { try KeychainServicesDefaults.currentEngine().add(try SecItemBridge.query(attributes)) }
}

/// Finds items; `result` receives nil, the bare data, a dictionary or an array as the return keys ask.
///
/// - Returns: `errSecSuccess`, or `errSecItemNotFound`, `errSecParam` (also for return keys with a nil
///   `result`), `errSecInteractionNotAllowed`, `errSecUserCanceled`, `errSecAuthFailed`, `errSecDecode`…
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    SecItemBridge.run(result) {
        let typed = try SecItemBridge.query(query)
        if result == nil, SecItemBridge.returnKeys.contains(where: { typed[$0]?.boolValue == true }) {
            throw EngineError.param("return keys need a result pointer (errSecReturnMissingPointer)")
        }
        return try KeychainServicesDefaults.currentEngine().copyMatching(typed)
    }
}

/// Changes every item that matches `query`.
///
/// - Returns: `errSecSuccess`, or `errSecItemNotFound`, `errSecDuplicateItem`, `errSecParam`…
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    SecItemBridge.run(nil) {
        try KeychainServicesDefaults.currentEngine().update(try SecItemBridge.query(query), with: try SecItemBridge.query(attributesToUpdate))
        return nil
    }
}

/// Deletes every item that matches `query`.
///
/// - Returns: `errSecSuccess`, or `errSecItemNotFound`, `errSecParam`, `errSecInteractionNotAllowed`…
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    SecItemBridge.run(nil) {
        try KeychainServicesDefaults.currentEngine().delete(try SecItemBridge.query(query))
        return nil
    }
}

/// Apple's message for a status code; `OSStatus <code>` for codes it has none for.
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    Status.message(for: status)
}

/// Conversions between Apple-style dictionaries and the engine's typed values.
public enum SecItemBridge {
    static let returnKeys = [Key.returnData, Key.returnAttributes, Key.returnRef, Key.returnPersistentRef]

    static func run(_ result: UnsafeMutablePointer<CFTypeRef?>?, _ body: () throws -> ItemResult?) -> OSStatus {
        do {
            let value = try body()
            result?.pointee = value.map(object(_:))
            return errSecSuccess
        } catch let error as EngineError {
            return error.status
        } catch {
            return errSecInternalError
        }
    }

    /// The typed form of a dictionary of `Any` values.
    ///
    /// - Throws: `errSecParam` for a key that is not a string or a value of a type no keychain attribute has.
    public static func query(_ dictionary: CFDictionary) throws -> KeychainQuery {
        var query: KeychainQuery = [:]
        query.reserveCapacity(dictionary.count)
        for (key, value) in dictionary {
            guard let name = key.base as? String else { throw EngineError.param("dictionary keys must be strings") }
            guard let typed = keychainValue(value) else {
                throw EngineError.param("the value for '\(name)' has an unsupported type \(type(of: value))")
            }
            query[name] = typed
        }
        return query
    }

    /// The typed form of one value.
    public static func keychainValue(_ value: Any) -> KeychainValue? {
        switch value {
        case let string as String: return .string(string)
        case let data as Data: return .data(data)
        case let bool as Bool: return .bool(bool)  // Swift Bool and kCFBooleanTrue/False, never other numbers
        case let number as NSNumber:
            let type = String(cString: number.objCType)
            if type == "d" || type == "f" {
                let double = number.doubleValue
                return double.rounded() == double && abs(double) < 9.2e18 ? .number(Int64(double)) : .double(double)
            }
            if type == "Q" || type == "L" || type == "I" { return .number(Int64(truncatingIfNeeded: number.uint64Value)) }
            return .number(number.int64Value)
        case let date as Date: return .date(date)
        case let bytes as [UInt8]: return .data(Data(bytes))
        case let substring as Substring: return .string(String(substring))
        case let accessControl as SecAccessControl: return .accessControl(accessControl.accessControl)
        case let laContext as LAContext: return .authenticationContext(laContext.context)
        case let context as AuthenticationContext: return .authenticationContext(context)
        default: return nil
        }
    }

    /// A result as the Foundation objects Apple hands back.
    public static func object(_ result: ItemResult) -> AnyObject {
        switch result {
        case .data(let data): return NSData(data: data)
        case .array(let items): return NSArray(array: items.map(object(_:)))
        case .attributes(let attributes):
            let dictionary = NSMutableDictionary(capacity: attributes.count)
            for (key, value) in attributes { dictionary[NSString(string: key)] = object(value) }
            return dictionary
        }
    }

    /// One value as the Foundation object Apple hands back.
    public static func object(_ value: KeychainValue) -> AnyObject {
        switch value {
        case .string(let s): return NSString(string: s)
        case .data(let d): return NSData(data: d)
        case .number(let n): return NSNumber(value: n)
        case .double(let d): return NSNumber(value: d)
        case .bool(let b): return NSNumber(value: b)
        case .date(let d): return NSDate(timeIntervalSinceReferenceDate: d.timeIntervalSinceReferenceDate)
        case .accessControl(let ac): return SecAccessControl(ac)
        case .authenticationContext(let c): return c
        }
    }
}
#endif
