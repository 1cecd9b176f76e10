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

enum SecItemReferences {
    /// The object for a stored item, from what the engine returns for `kSecReturnRef` (the class, the attributes,
    /// the persistent reference under `v_Ref`, and the data unless reading it needs an authentication).
    ///
    /// Decision: a key whose data needs an authentication (an access control with `.userPresence`…) is read,
    /// with its prompt, when its object is made; Apple's keychain prompts when the key is used. nil when the
    /// item is not the object it claims to be (damaged data).
    ///
    /// - Throws: the keychain's error when a protected key's data cannot be read (`errSecUserCanceled`,
    ///   `errSecAuthFailed`, `errSecInteractionNotAllowed`).
    static func makeObject(_ material: KeychainQuery) throws -> AnyObject? {
        guard let itemClass = material[Key.class]?.stringValue.flatMap(ItemClass.init(rawValue:)) else { return nil }
        switch itemClass {
        case .key:
            guard let data = try material[Key.valueData]?.dataValue ?? fetchData(material[Key.valueRef]) else { return nil }
            return try? SecKey.make(attributes: foundationAttributes(material), data: data)
        case .certificate:
            return material[Key.valueData]?.dataValue.flatMap { SecCertificateCreateWithData(nil, NSData(data: $0)) }
        case .identity:
            guard let der = material[KeychainEngine.identityCertificateData]?.dataValue,
                  let certificate = SecCertificateCreateWithData(nil, NSData(data: der)),
                  let keyData = try material[KeychainEngine.identityKeyData]?.dataValue ?? fetchData(material[KeychainEngine.identityKeyReference]),
                  let key = try? SecKey.make(attributes: foundationAttributes(material), data: keyData) else { return nil }
            return SecIdentity(certificate: certificate, privateKey: key)
        case .genericPassword, .internetPassword:
            return nil
        }
    }

    /// The data of the item a persistent reference names, read with the keychain's rules (authentication included).
    private static func fetchData(_ reference: KeychainValue?) throws -> Data? {
        guard let reference else { return nil }
        return try KeychainServicesDefaults.currentEngine().copyMatching([Key.valuePersistentRef: reference, Key.returnData: .bool(true)])?.data
    }

    private static func foundationAttributes(_ material: KeychainQuery) -> CFDictionary {
        var attributes: CFDictionary = [:]
        for (key, value) in material { attributes[key] = SecItemBridge.object(value) }
        return attributes
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
    ///
    /// - Throws: `errSecDecode` when an item's stored data is not the key, certificate or identity its class says
    ///   (damaged bytes): with several results that item is left out, as damaged rows are; alone, or when every
    ///   item is damaged, the call fails. A wrong object is never handed back.
    static func object(for result: ItemResult, query: KeychainQuery) throws -> AnyObject {
        guard query[Key.returnRef]?.boolValue == true else { return SecItemBridge.object(result) }
        switch result {
        case .array(let items):
            var objects: [AnyObject] = []
            var firstFailure: (any Error)?
            for item in items {
                // A damaged item is left out; an authentication that failed or was cancelled fails the call.
                do { objects.append(try object(for: item, query: query)) } catch let error as EngineError where error.status == Status.decode {
                    firstFailure = firstFailure ?? error
                }
            }
            if objects.isEmpty, let firstFailure { throw firstFailure }
            return NSArray(array: objects)
        case .data: return SecItemBridge.object(result)
        case .attributes(let material):
            guard material[Key.valueRef] != nil else { return SecItemBridge.object(result) }
            let wantsData = query[Key.returnData]?.boolValue == true
            let wantsAttributes = query[Key.returnAttributes]?.boolValue == true
            let wantsPersistentRef = query[Key.returnPersistentRef]?.boolValue == true
            guard let reference = try makeObject(material) else {
                let itemClass = material[Key.class]?.stringValue ?? "?"
                KeystoneLog.logger.warning("a keychain item's data is not the object its class says", metadata: ["class": "\(itemClass)"])
                throw EngineError(Status.decode, "the stored \(itemClass == "cert" ? "certificate" : itemClass == "keys" ? "key" : "identity") is damaged: its data is not one")
            }
            if !wantsData && !wantsAttributes && !wantsPersistentRef { return reference }
            var kept: KeychainQuery = [:]
            for (key, value) in material {
                switch key {
                case Key.valueRef: continue
                case Key.valueData: if wantsData { kept[key] = value }
                case Key.valuePersistentRef: if wantsPersistentRef { kept[key] = value }
                case KeychainEngine.identityCertificateData, KeychainEngine.identityKeyData, KeychainEngine.identityKeyReference: continue
                default: if wantsAttributes { kept[key] = value }
                }
            }
            let dictionary = SecItemBridge.object(.attributes(kept)) as! NSMutableDictionary
            dictionary[NSString(string: Key.valueRef)] = reference
            return dictionary
        }
    }
}

// MARK: - The objects

extension SecKey: SecItemReference {
    func keychainItem() throws -> KeychainQuery {
        var item = try SecItemBridge.query(keychainAttributes)
        item[Key.class] = .string(ItemClass.key.rawValue)
        item[Key.valueData] = .data(keyData)
        return item
    }

    func keychainIdentity() throws -> KeychainQuery {
        [Key.class: .string(ItemClass.key.rawValue), Key.applicationLabel: .data(applicationLabel),
         Key.keyClass: .number(isPrivate ? 1 : 0)]
    }
}

extension SecCertificate: SecItemReference {
    func keychainItem() throws -> KeychainQuery {
        guard let attributes = keychainAttributes else {
            throw EngineError.param("the certificate's issuer name cannot be normalized, so it cannot be stored")
        }
        return try SecItemBridge.query(attributes)
    }

    func keychainIdentity() throws -> KeychainQuery {
        let item = try keychainItem()
        var identity: KeychainQuery = [Key.class: .string(ItemClass.certificate.rawValue)]
        for key in [Key.certificateType, Key.issuer, Key.serialNumber] { identity[key] = item[key] }
        return identity
    }
}

extension SecIdentity: SecItemReference {
    /// An identity is stored as its certificate and its private key: ``SecItemReferences/addIdentity(_:_:)``.
    func keychainItem() throws -> KeychainQuery { try certificate.keychainItem() }

    func keychainIdentity() throws -> KeychainQuery {
        var identity = try certificate.keychainIdentity()
        identity[Key.class] = .string(ItemClass.identity.rawValue)
        return identity
    }
}

extension SecItemReferences {
    /// SecItemAdd of a SecIdentity, as Apple's client does it (SecItem.c, `explode_identity`): the certificate is
    /// added (with the caller's other attributes), then the private key. A certificate already there is no error,
    /// nor a key already there when the certificate was new; both already there is `errSecDuplicateItem`.
    static func addIdentity(_ identity: SecIdentity, _ dictionary: CFDictionary) throws -> ItemResult? {
        let engine = try KeychainServicesDefaults.currentEngine()
        var attributes = dictionary
        for key in attributes.keys where [Key.valueRef, Key.class].contains(key.base as? String) { attributes[key] = nil }
        let given = try SecItemBridge.query(attributes)
        // The caller's attributes go to both adds, as Apple's client passes the same dictionary to both.
        let shared = given.filter { !$0.key.hasPrefix("r_") }
        let certificate = try identity.certificate.keychainItem().merging(shared) { $1 }
        var certificateIsNew = true
        do { try engine.add(certificate) } catch let error as EngineError where error.status == Status.duplicateItem {
            certificateIsNew = false
        }
        let key = try identity.privateKey.keychainItem().merging(shared) { $1 }
        do { try engine.add(key) } catch let error as EngineError where error.status == Status.duplicateItem && certificateIsNew {}
        let returns = given.filter { $0.key.hasPrefix("r_") }
        guard !returns.isEmpty else { return nil }
        var query = try identity.keychainIdentity()
        for (name, value) in returns { query[name] = value }
        return try engine.copyMatching(query)
    }
}
#endif
