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
    ///
    /// A Secure Enclave key (`tkid` = ``kSecAttrTokenIDSecureEnclave``) is different: making its object never
    /// prompts, as on Apple platforms; each use of the key authenticates instead, with `use` (the lookup's
    /// `kSecUseAuthenticationContext`, `kSecUseOperationPrompt`, `kSecUseAuthenticationUI`). It is bound to
    /// ``KeychainServicesDefaults/secureEnclave``; it throws `errSecUnimplemented` when none is configured and
    /// `errSecDecode` when its data is not a key of that token's kind.
    static func makeObject(_ material: KeychainQuery, use: SecKeyTokenUse = SecKeyTokenUse()) throws -> AnyObject? {
        guard let itemClass = material[Key.class]?.stringValue.flatMap(ItemClass.init(rawValue:)) else { return nil }
        let isTokenKey = material[Key.tokenID]?.stringValue == Key.tokenIDSecureEnclave
        switch itemClass {
        case .key:
            if isTokenKey {
                guard let data = try material[Key.valueData]?.dataValue ?? fetchTokenKeyData(material[Key.valueRef]) else { return nil }
                return try tokenKey(material, data: data, use: use)
            }
            guard let data = try material[Key.valueData]?.dataValue ?? fetchData(material[Key.valueRef]) else { return nil }
            return try? SecKey.make(attributes: foundationAttributes(material), data: data)
        case .certificate:
            return material[Key.valueData]?.dataValue.flatMap { SecCertificateCreateWithData(nil, NSData(data: $0)) }
        case .identity:
            guard let der = material[KeychainEngine.identityCertificateData]?.dataValue,
                  let certificate = SecCertificateCreateWithData(nil, NSData(data: der)) else { return nil }
            let key: SecKey
            if isTokenKey {
                guard let keyData = try material[KeychainEngine.identityKeyData]?.dataValue
                        ?? fetchTokenKeyData(material[KeychainEngine.identityKeyReference]) else { return nil }
                key = try tokenKey(material, data: keyData, use: use)
            } else {
                guard let keyData = try material[KeychainEngine.identityKeyData]?.dataValue ?? fetchData(material[KeychainEngine.identityKeyReference]),
                      let made = try? SecKey.make(attributes: foundationAttributes(material), data: keyData) else { return nil }
                key = made
            }
            return SecIdentity(certificate: certificate, privateKey: key)
        case .genericPassword, .internetPassword:
            return nil
        }
    }

    /// A Secure Enclave key's object; its failures as the keychain's errors (status kept).
    private static func tokenKey(_ material: KeychainQuery, data: Data, use: SecKeyTokenUse) throws -> SecKey {
        do {
            return try SecKeyTokenKey.storedKey(attributes: foundationAttributes(material), data: data, use: use)
        } catch let failure as SecKeyFailure {
            throw EngineError(failure.status, failure.message)
        }
    }

    /// The data of the item a persistent reference names, read with the keychain's rules (authentication included).
    private static func fetchData(_ reference: KeychainValue?) throws -> Data? {
        guard let reference else { return nil }
        return try KeychainServicesDefaults.currentEngine().copyMatching([Key.valuePersistentRef: reference, Key.returnData: .bool(true)])?.data
    }

    /// The data of a Secure Enclave key item: the token's blob, read without the prompt its access control asks
    /// for the item's data.
    ///
    /// Decision: the blob is no secret (it is useless without the token that made it, and the private key never
    /// leaves the token); what the access control guards is each use of the key, which ``SecKeyTokenKey`` asks
    /// before it signs, agrees or decrypts. Apple's keychain likewise hands out a Secure Enclave key's object without
    /// a prompt. So the read carries a context that counts as authenticated for this one call (it is made here and
    /// dropped after). The keychain's other rules still apply: a `.biometryCurrentSet` key whose enrollment changed
    /// fails (errSecAuthFailed), a locked keychain fails (errSecInteractionNotAllowed).
    private static func fetchTokenKeyData(_ reference: KeychainValue?) throws -> Data? {
        guard let reference else { return nil }
        let engine = try KeychainServicesDefaults.currentEngine()
        let read = AuthenticationContext(reuseDuration: 300)
        read.recordSuccess(at: engine.configuration.now())
        defer { read.invalidate() }
        return try engine.copyMatching([Key.valuePersistentRef: reference, Key.returnData: .bool(true),
                                        Key.useAuthenticationContext: .authenticationContext(read)])?.data
    }

    /// How a Secure Enclave key found by `query` authenticates its uses: the query's `kSecUseAuthenticationContext`
    /// (`laContext` when the caller passed an `LAContext`, whose `localizedReason` is the prompt when the query has no
    /// `kSecUseOperationPrompt`), `kSecUseOperationPrompt` and `kSecUseAuthenticationUI`.
    static func tokenKeyUse(_ query: KeychainQuery, laContext: LAContext?) -> SecKeyTokenUse {
        SecKeyTokenUse { name in
            if name == kSecUseAuthenticationContext, let laContext { return laContext }
            guard let value = query[name] else { return nil }
            return value.stringValue ?? SecItemBridge.object(value)
        }
    }

    /// The `LAContext` a caller's dictionary passes as `kSecUseAuthenticationContext`, if any.
    static func laContext(in dictionary: CFDictionary) -> LAContext? {
        dictionary.first(where: { ($0.key.base as? String) == Key.useAuthenticationContext })?.value as? LAContext
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
    ///
    /// A Secure Enclave key that cannot be bound (no Secure Enclave configured: `errSecUnimplemented`) is left out of
    /// several results as a damaged item is; alone, the call fails with that status.
    static func object(for result: ItemResult, query: KeychainQuery, laContext: LAContext? = nil) throws -> AnyObject {
        guard query[Key.returnRef]?.boolValue == true else { return SecItemBridge.object(result) }
        switch result {
        case .array(let items):
            var objects: [AnyObject] = []
            var firstFailure: (any Error)?
            for item in items {
                // A damaged item is left out; an authentication that failed or was cancelled fails the call.
                do { objects.append(try object(for: item, query: query, laContext: laContext)) }
                catch let error as EngineError where error.status == Status.decode || error.status == Status.unimplemented {
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
            guard let reference = try makeObject(material, use: tokenKeyUse(query, laContext: laContext)) else {
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
