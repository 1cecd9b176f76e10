#if !canImport(Darwin)
import Foundation
import KeychainEngine

// SecItemBridge: Apple-style dictionaries and the engine's typed values, both ways (the queries the SecItem functions
// read, the Foundation objects they hand back), and the thread's last failure reason.

/// Conversions between Apple-style dictionaries and the engine's typed values.
public enum SecItemBridge {
    static let returnKeys = [Key.returnData, Key.returnAttributes, Key.returnRef, Key.returnPersistentRef]

    /// Runs a SecItem call: `body` returns the engine's result and the typed query it answered.
    static func run(_ result: UnsafeMutablePointer<CFTypeRef?>?, laContext: LAContext? = nil,
                    _ body: () throws -> (ItemResult?, KeychainQuery)) -> OSStatus {
        do {
            lastFailureReason = nil
            let (value, query) = try body()
            result?.pointee = try value.map { try SecItemReferences.object(for: $0, query: query, laContext: laContext) }
            return errSecSuccess
        } catch let error as EngineError {
            lastFailureReason = error.reason.isEmpty ? nil : error.reason
            return error.status
        } catch {
            lastFailureReason = "\(type(of: error))"
            return errSecInternalError
        }
    }

    /// Why the last SecItem call on this thread failed (the engine's reason: what went wrong and what fixes it,
    /// never secret bytes), for the typed API's errors; nil after a success or a failure without a reason.
    ///
    /// Apple's functions return a bare `OSStatus`; on Linux the engine knows more (a keychain directory that
    /// cannot be written names `KEYSTONE_KEYCHAIN_DIR`), and ``SystemKeychain`` in Keystone passes it on.
    ///
    /// Kept in a pthread-specific box, made on a thread's first failure: clearing it on every call costs one
    /// `pthread_getspecific` (no Foundation thread dictionary on the SecItem path).
    package static var lastFailureReason: String? {
        get { FailureReasonBox.existing?.reason }
        set {
            if let box = FailureReasonBox.existing { box.reason = newValue }
            else if let newValue { FailureReasonBox.make().reason = newValue }
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

    /// The typed form of one value: nil (so `errSecParam`) for a type no keychain attribute has.
    ///
    /// Strings (`String`, `NSString`, `Substring`), bytes (`Data`, `NSData`, `[UInt8]`), Booleans (`Bool`,
    /// `kCFBooleanTrue`/`kCFBooleanFalse`, `NSNumber(value: true)`), numbers (every Swift integer and
    /// floating-point type, other `NSNumber`s), dates (`Date`, `NSDate`), `SecAccessControl` and `LAContext`.
    ///
    /// - Important: Swift on Linux lets any `NSNumber` holding 0 or 1 cast to `Bool`, so Booleans are told
    ///   from numbers by the number's class (the Boolean singleton class), never with `as? Bool`:
    ///   `NSNumber(value: 1)` for `kSecAttrPort` stays the number 1.
    public static func keychainValue(_ value: Any) -> KeychainValue? {
        switch value {
        case let string as String: return .string(string)
        case let data as Data: return .data(data)
        case let accessControl as SecAccessControl: return .accessControl(accessControl.accessControl)
        case let laContext as LAContext: return .authenticationContext(laContext.context)
        case let context as AuthenticationContext: return .authenticationContext(context)
        case let date as Date: return .date(date)
        case let number as NSNumber: return numberValue(number)
        case let bytes as [UInt8]: return .data(Data(bytes))
        case let substring as Substring: return .string(String(substring))
        default: return nil
        }
    }

    /// The class of `NSNumber(value: true)` (`kCFBooleanTrue`), distinct from other numbers' class.
    private static let booleanClass = ObjectIdentifier(type(of: NSNumber(value: true)))

    /// A Boolean, an integer or a floating-point number; nil for an unsigned value beyond `Int64.max`.
    static func numberValue(_ number: NSNumber) -> KeychainValue? {
        if ObjectIdentifier(type(of: number)) == booleanClass { return .bool(number.boolValue) }
        switch String(cString: number.objCType) {
        case "d", "f":
            let double = number.doubleValue
            return double.rounded() == double && abs(double) < 9.2e18 ? .number(Int64(double)) : .double(double)
        case "Q", "L", "I", "S", "C":
            let unsigned = number.uint64Value
            return unsigned <= UInt64(Int64.max) ? .number(Int64(unsigned)) : nil
        default:
            return .number(number.int64Value)
        }
    }

    /// A result as the Foundation objects Apple hands back.
    public static func object(_ result: ItemResult) -> AnyObject {
        switch result {
        case .data(let data): return SecItemData(copying: data)
        case .array(let items): return NSArray(array: items.map(object(_:)))
        case .attributes(let attributes): return dictionary(attributes)
        }
    }

    /// An item's attributes as the dictionary Apple hands back, made in one call from buffers of keys and objects on
    /// the stack: setting each key through the subscript converts it to AnyHashable and back (a third of a
    /// kSecReturnAttributes read, measured), and arrays are two more allocations.
    static func dictionary(_ attributes: KeychainQuery) -> NSMutableDictionary {
        let count = attributes.count
        guard count > 0 else { return NSMutableDictionary() }
        return withUnsafeTemporaryAllocation(of: NSObject.self, capacity: count) { keys in
            withUnsafeTemporaryAllocation(of: AnyObject.self, capacity: count) { objects in
                var made = 0
                for (key, value) in attributes {
                    keys.initializeElement(at: made, to: keyObject(key))
                    objects.initializeElement(at: made, to: object(value))
                    made += 1
                }
                defer {
                    keys.baseAddress!.deinitialize(count: made)
                    objects.baseAddress!.deinitialize(count: made)
                }
                return NSMutableDictionary(objects: UnsafePointer(objects.baseAddress!), forKeys: UnsafePointer(keys.baseAddress!), count: made)
            }
        }
    }

    /// The key object of an attribute name: one shared, immutable `NSString` for each name the engine returns
    /// (a new one for a name it does not know).
    ///
    /// Why: a result dictionary of ten attributes made ten `NSString`s per call (about 70 ns each, measured); the
    /// dictionary copies its keys, and an immutable `NSString`'s copy is itself, so sharing them is safe.
    static func keyObject(_ name: String) -> NSString {
        keyObjects[name] ?? NSString(string: name)
    }

    // Unchecked: the table and its strings are never mutated after it is made (NSString is immutable; NSString is not
    // marked Sendable on Linux), and Swift initializes a static once, thread-safely.
    nonisolated(unsafe) private static let keyObjects: [String: NSString] = {
        var names: Set<String> = [Key.class, Key.valueData, Key.valuePersistentRef]
        for itemClass in ItemClass.allCases { names.formUnion(ClassSchema.of(itemClass).attributes.keys) }
        return Dictionary(uniqueKeysWithValues: names.map { ($0, NSString(string: $0)) })
    }()

    /// One value as the Foundation object Apple hands back.
    public static func object(_ value: KeychainValue) -> AnyObject {
        switch value {
        case .string(let s): return NSString(string: s)
        case .data(let d): return SecItemData(copying: d)
        case .number(let n): return NSNumber(value: n)
        case .double(let d): return NSNumber(value: d)
        case .bool(let b): return NSNumber(value: b)
        case .date(let d): return NSDate(timeIntervalSinceReferenceDate: d.timeIntervalSinceReferenceDate)
        case .accessControl(let ac): return SecAccessControl(ac)
        case .authenticationContext(let c): return c
        }
    }
}
/// This thread's last SecItem failure reason (``SecItemBridge/lastFailureReason``): one box per thread that failed,
/// released with the thread.
private final class FailureReasonBox {
    var reason: String?

    /// The key; its destructor releases a thread's box when the thread ends.
    static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            if let pointer { Unmanaged<FailureReasonBox>.fromOpaque(pointer).release() }
        }
        return key
    }()

    /// This thread's box, if it has one.
    static var existing: FailureReasonBox? {
        pthread_getspecific(key).map { Unmanaged<FailureReasonBox>.fromOpaque($0).takeUnretainedValue() }
    }

    /// A new box for this thread (it has none).
    static func make() -> FailureReasonBox {
        let box = FailureReasonBox()
        pthread_setspecific(key, Unmanaged.passRetained(box).toOpaque())
        return box
    }
}
#endif
