#if !canImport(Darwin)
import Foundation
import KeychainEngine

// References in SecItem dictionaries: the objects that stand for keychain items (SecKey, SecCertificate,
// SecIdentity) as `kSecValueRef` takes them and `kSecReturnRef` hands them back. Generic and internet passwords
// have none (the engine drops kSecReturnRef for them, as Apple's client makes no object for them).

/// An object that stands for a keychain item: how SecItem stores it and finds it.
///
/// Keystone's own protocol (Apple's objects are CF types with no such surface).
protocol SecItemReference: AnyObject {
    /// The item `SecItemAdd` stores for the object: its class, attributes and `v_Data`.
    func keychainItem() throws -> KeychainQuery
    /// What finds the object's item in a query: its class and primary-key attributes.
    func keychainIdentity() throws -> KeychainQuery
}

/// Makes the object for a stored item from what the engine returns for `kSecReturnRef`: the class, the
/// attributes, the persistent reference (`v_Ref`) and, unless reading it needs an authentication, the data.
typealias SecItemReferenceMaker = @Sendable (_ material: KeychainQuery) -> AnyObject?

enum SecItemReferences {
    /// The object makers by class. Classes without one answer `kSecReturnRef` with the persistent reference.
    nonisolated(unsafe) private static var makers: [ItemClass: SecItemReferenceMaker] = [:]
    private static let lock = NSLock()

    /// Registers how objects of `itemClass` are made from their stored items.
    static func register(_ itemClass: ItemClass, _ maker: @escaping SecItemReferenceMaker) {
        lock.withLock { makers[itemClass] = maker }
    }

    static func maker(for itemClass: ItemClass) -> SecItemReferenceMaker? {
        lock.withLock { makers[itemClass] }
    }

    /// `dictionary` with a `kSecValueRef` object replaced by its item (for an add) or its identity (for a
    /// query); the caller's own attributes win over the object's.
    ///
    /// - Throws: `errSecParam` when `kSecValueRef` holds something that is no keychain object, or the
    ///   dictionary names another class than the object's.
    static func expanding(_ dictionary: CFDictionary, forAdd: Bool) throws -> CFDictionary {
        guard let entry = dictionary.first(where: { ($0.key.base as? String) == Key.valueRef }) else { return dictionary }
        let value = entry.value
        guard let reference = value as? any SecItemReference else {
            throw EngineError.param("kSecValueRef must be a SecKey, SecCertificate or SecIdentity")
        }
        let item = try forAdd ? reference.keychainItem() : reference.keychainIdentity()
        if let given = dictionary.first(where: { ($0.key.base as? String) == Key.class })?.value as? String, let own = item[Key.class]?.stringValue, given != own {
            throw EngineError.param("kSecValueRef holds an item of class '\(own)', not '\(given)'")
        }
        var expanded = dictionary
        expanded[entry.key] = nil
        let given = Set(expanded.keys.compactMap { $0.base as? String })
        for (key, value) in item where !given.contains(key) { expanded[key] = SecItemBridge.object(value) }
        return expanded
    }

    /// The Foundation object for an engine result, with references made for `kSecReturnRef` and only what
    /// the query asked for left in each dictionary.
    static func object(for result: ItemResult, query: KeychainQuery) -> AnyObject {
        guard query[Key.returnRef]?.boolValue == true else { return SecItemBridge.object(result) }
        switch result {
        case .array(let items): return NSArray(array: items.map { object(for: $0, query: query) })
        case .data: return SecItemBridge.object(result)
        case .attributes(let material):
            guard material[Key.valueRef] != nil else { return SecItemBridge.object(result) }
            let wantsData = query[Key.returnData]?.boolValue == true
            let wantsAttributes = query[Key.returnAttributes]?.boolValue == true
            let wantsPersistentRef = query[Key.returnPersistentRef]?.boolValue == true
            let itemClass = material[Key.class]?.stringValue.flatMap(ItemClass.init(rawValue:))
            let reference: AnyObject = itemClass.flatMap(maker(for:)).flatMap { $0(material) }
                ?? SecItemBridge.object(material[Key.valueRef]!)
            if !wantsData && !wantsAttributes && !wantsPersistentRef { return reference }
            var kept: KeychainQuery = [:]
            for (key, value) in material {
                switch key {
                case Key.valueRef: continue
                case Key.valueData: if wantsData { kept[key] = value }
                case Key.valuePersistentRef: if wantsPersistentRef { kept[key] = value }
                default: if wantsAttributes { kept[key] = value }
                }
            }
            let dictionary = SecItemBridge.object(.attributes(kept)) as! NSMutableDictionary
            dictionary[NSString(string: Key.valueRef)] = reference
            return dictionary
        }
    }
}
#endif
