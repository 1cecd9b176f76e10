#if !canImport(Darwin)
import Foundation
import KeychainEngine

// The SecItem functions' compiled path: the dictionaries most Apple-style code passes (a generic password named by
// its service and account, maybe its access group and `kSecAttrSynchronizable`; `kSecValueData` to add or change;
// `kSecReturnData` to read) are read once into the few slots they can fill, and run through the engine's compiled
// operations (`compiledSecret`, `compiledAdd`, `compiledUpdate`, `compiledDelete`) with the same rules as the general
// operations, without building a `KeychainQuery`, parsing it again in the engine, or making a `StoredItem` per row.
// Any other key, value type or storage takes the general path (each function's caller falls back when these return
// nil), so the general path stays the one place where Apple's rules for the rare cases live.
//
// Where the time went (issue 32, measured with `keystone-benchmarks secitem` and perf): every call converted its
// dictionary to a `[String: KeychainValue]` (a cast per key and value, a hash per key), the engine parsed that into a
// `ParsedQuery` (more hashing), built `wanted` and `constraints` dictionaries, made a `StoredItem` (an attribute
// dictionary) for every candidate row, and built the result through `[String: KeychainValue]` lookups.

/// A SecItem dictionary of the shape the compiled path serves, read in one pass.
struct SecItemShape {
    /// The operation a dictionary is read for: which keys it may hold.
    enum Use { case add, copy, query, changes }

    var hasClass = false
    var service: AttributeValue?
    var account: AttributeValue?
    var group: String?
    var synchronizable = false
    var returnData = false
    var secret: Data?
    var accessibility: Accessibility?

    /// The item's compiled identity, when the dictionary names a generic password's service and account.
    var key: CompiledItemKey? {
        guard hasClass, let service, let account else { return nil }
        return CompiledItemKey(genericPasswordService: service, account: account)
    }

    /// Reads `dictionary` for `use`; nil when it holds a key, or a value of a type, the compiled path does not serve
    /// (the general path then validates it, and reports what is wrong).
    ///
    /// Keys are compared as small strings in one `switch` (no hashing); values are cast once, to the type their key
    /// takes. Served: `kSecClass` (`kSecClassGenericPassword` only), `kSecAttrService` and `kSecAttrAccount` (a string
    /// or data), `kSecAttrAccessGroup` (a string), `kSecAttrSynchronizable` (a Boolean; not
    /// `kSecAttrSynchronizableAny`), `kSecUseDataProtectionKeychain` (a Boolean, ignored as by the general path); for
    /// an add `kSecValueData` and `kSecAttrAccessible`; for a copy `kSecReturnData` true and `kSecMatchLimitOne`; for
    /// an update's changes `kSecValueData` alone.
    init?(_ dictionary: CFDictionary, for use: Use) {
        for (key, value) in dictionary {
            guard let name = key.base as? String else { return nil }
            switch (name, use) {
            case (Key.valueData, .add), (Key.valueData, .changes):
                guard let data = value as? Data else { return nil }
                secret = data
            case (_, .changes):
                return nil
            case (Key.class, _):
                guard let itemClass = value as? String, itemClass == ItemClass.genericPassword.rawValue else { return nil }
                hasClass = true
            case (Key.service, _):
                guard let text = Self.blob(value) else { return nil }
                service = text
            case (Key.account, _):
                guard let text = Self.blob(value) else { return nil }
                account = text
            case (Key.accessGroup, _):
                guard let text = value as? String else { return nil }
                group = text
            case (Key.synchronizable, _):
                guard let flag = Self.boolean(value) else { return nil }
                synchronizable = flag
            case (Key.useDataProtectionKeychain, _):
                guard Self.boolean(value) != nil else { return nil }
            case (Key.accessible, .add):
                guard let raw = value as? String, let parsed = Accessibility(rawValue: raw) else { return nil }
                accessibility = parsed
            case (Key.returnData, .copy):
                guard Self.boolean(value) == true else { return nil }
                returnData = true
            case (Key.matchLimit, .copy):
                guard let limit = value as? String, limit == Key.matchLimitOne else { return nil }
            default:
                return nil
            }
        }
    }

    /// A string or data value (`kSecAttrService`, `kSecAttrAccount`), kept as given, in the general path's order.
    private static func blob(_ value: Any) -> AttributeValue? {
        if let string = value as? String { return .string(string) }
        if let data = value as? Data { return .data(data) }
        return nil
    }

    /// A Boolean: Swift's `Bool`, or the Boolean objects (`kCFBooleanTrue`); nil for other numbers, which the general
    /// path reads by their value.
    private static func boolean(_ value: Any) -> Bool? {
        if type(of: value) == Bool.self { return value as? Bool }
        if let number = value as? NSNumber, case .bool(let flag)? = SecItemBridge.numberValue(number) { return flag }
        return nil
    }
}

/// A `SecItemCopyMatching` dictionary read in one pass into the typed query the general path builds from it
/// (``SecItemBridge/query(_:)``, the same conversion of each value), for a dictionary the general path would not
/// change first: no `kSecValueRef` (expanded to its item's attributes), no `kSecReturnRef` (objects made from the
/// results), no `kSecUseAuthenticationContext` (an `LAContext` the objects keep). The general path scans such a
/// dictionary three times (its `LAContext`, its `kSecValueRef`, its values); this reads it once.
enum SecItemReadQuery {
    /// The typed query; nil when the dictionary holds one of those keys, a key that is not a string or a value of a
    /// type no keychain attribute has (the general path then reports what is wrong).
    static func typed(_ dictionary: CFDictionary) -> KeychainQuery? {
        var query: KeychainQuery = [:]
        query.reserveCapacity(dictionary.count)
        for (key, value) in dictionary {
            guard let name = key.base as? String else { return nil }
            switch name {
            case Key.valueRef, Key.returnRef, Key.useAuthenticationContext: return nil
            default:
                guard let typed = SecItemBridge.keychainValue(value) else { return nil }
                query[name] = typed
            }
        }
        return query
    }
}

/// The SecItem functions over the engine's compiled operations; each returns nil when the general path must run.
enum SecItemCompiledPath {
    /// `SecItemCopyMatching`: one generic password's data through the engine's compiled read; any other read without
    /// object references (attributes, data and attributes, limit All, internet passwords, persistent references, every
    /// storage) through the engine's general `copyMatching` with the typed query read in one pass
    /// (``SecItemReadQuery``), its result made by `SecItemBridge.object(_:)` as the general path makes it.
    static func copyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus? {
        guard let result, let engine = try? KeychainServicesDefaults.currentEngine() else { return nil }
        if let shape = SecItemShape(query, for: .copy), shape.returnData, let key = shape.key {
            let served = run {
                guard case .done(let data) = try engine.compiledSecret(for: key, accessGroup: shape.group, synchronizable: shape.synchronizable) else {
                    return false
                }
                result.pointee = SecItemData(copying: data)
                return true
            }
            if let served { return served }
        }
        guard let typed = SecItemReadQuery.typed(query) else { return nil }
        return run {
            // What the general path does for a query without kSecValueRef, kSecReturnRef or an LAContext: the same
            // engine call with the same typed query, the same result objects.
            let value = try engine.copyMatching(typed)
            result.pointee = value.map(SecItemBridge.object(_:))
            return true
        }
    }

    /// `SecItemAdd` of a generic password without return keys.
    static func add(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus? {
        guard let shape = SecItemShape(attributes, for: .add), let secret = shape.secret, let key = shape.key,
              let engine = try? KeychainServicesDefaults.currentEngine() else { return nil }
        return run {
            guard case .done = try engine.compiledAdd(secret, for: key, accessGroup: shape.group, synchronizable: shape.synchronizable,
                                                      accessibility: shape.accessibility) else { return false }
            result?.pointee = nil  // as the general path: an add without return keys hands back nil
            return true
        }
    }

    /// `SecItemUpdate` of generic passwords' data.
    static func update(_ query: CFDictionary, _ changes: CFDictionary) -> OSStatus? {
        guard let shape = SecItemShape(query, for: .query), let key = shape.key,
              let change = SecItemShape(changes, for: .changes), let secret = change.secret,
              let engine = try? KeychainServicesDefaults.currentEngine() else { return nil }
        return run {
            guard case .done = try engine.compiledUpdate(secret, for: key, accessGroup: shape.group, synchronizable: shape.synchronizable) else {
                return false
            }
            return true
        }
    }

    /// `SecItemDelete` of generic passwords.
    static func delete(_ query: CFDictionary) -> OSStatus? {
        guard let shape = SecItemShape(query, for: .query), let key = shape.key,
              let engine = try? KeychainServicesDefaults.currentEngine() else { return nil }
        return run {
            guard case .done = try engine.compiledDelete(key, accessGroup: shape.group, synchronizable: shape.synchronizable) else { return false }
            return true
        }
    }

    /// Runs a compiled operation as ``SecItemBridge`` runs a general one (the failure reason kept for the thread):
    /// `body` returns false when it did nothing and the general path must run (nil).
    private static func run(_ body: () throws -> Bool) -> OSStatus? {
        do {
            guard try body() else { return nil }
            SecItemBridge.lastFailureReason = nil
            return errSecSuccess
        } catch let error as EngineError {
            SecItemBridge.lastFailureReason = error.reason.isEmpty ? nil : error.reason
            return error.status
        } catch {
            SecItemBridge.lastFailureReason = "\(type(of: error))"
            return errSecInternalError
        }
    }
}
#endif
