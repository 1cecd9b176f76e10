import Foundation

/// How an engine behaves: its access groups, defaults and the device it plays.
public struct EngineConfiguration: Sendable {
    /// Which access groups the caller may use.
    public enum AccessGroups: Sendable, Hashable {
        /// Any group may be named; items added without one go to `defaultGroup`, and queries without one match every group.
        case unrestricted(defaultGroup: String)
        /// Only these groups (an app's `keychain-access-groups` entitlement). The first is the default for adds;
        /// queries without a group match items of these groups only; naming another group fails with
        /// `errSecMissingEntitlement` (-34018). An empty list makes every operation fail with -34018.
        case entitled([String])
    }

    /// The caller's access groups. Default: unrestricted, items go to the group `"default"`.
    public var accessGroups: AccessGroups = .unrestricted(defaultGroup: "default")
    /// The accessibility an item gets when the add names none. Default: `whenUnlocked` (`ak`), Apple's default
    /// for every class this engine stores (Apple gives certificates `dk`; Keystone keeps one rule for all).
    public var defaultAccessibility: Accessibility = .whenUnlocked
    /// Whether access-controlled items need an authentication. False plays a simulator, which returns them without one.
    public var enforcesAccessControl = true
    /// Whether keys can be created in the Secure Enclave (`kSecAttrTokenIDSecureEnclave`).
    public var secureEnclaveAvailable = false
    /// Whether the device has a passcode: `whenPasscodeSetThisDeviceOnly` items need one.
    public var passcodeSet = true
    /// The clock for creation and modification dates and authentication reuse.
    public var now: @Sendable () -> Date = { Date() }

    public init() {}
}

/// Observes or interrupts engine operations (call logs, injected failures).
public protocol EngineHook: Sendable {
    /// Called before `operation` runs; throwing an ``EngineError`` makes the operation fail with it, untouched.
    func willPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?) throws
    /// Called after `operation` ran, with its status.
    func didPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?, status: Int32)
}

/// The keychain: Apple's SecItem rules over a ``KeychainStorage``.
///
/// The contract, as in Apple's Keychain Services (reference `keychain-semantics.md` §3–§4):
///
/// - **add** inserts one item. It needs `kSecClass`; attributes foreign to the class fail with
///   `errSecNoSuchAttr`; missing primary-key attributes are stored as empty values; the access group,
///   accessibility, `sync = false`, creation and modification dates are filled in. An item whose primary
///   key exists fails with `errSecDuplicateItem`, whatever its other attributes. With return keys it
///   returns what a copy of the new item would.
/// - **copyMatching** finds items. Match limit One by default. No match is `errSecItemNotFound`, also with
///   limit All. Result shapes: no return key → nil; only data or only a persistent reference → the bare
///   value; attributes or several keys → a dictionary; a limit above one → an array, even of one.
/// - **update** changes every match (an explicit match limit, which Apple's server also honours, caps it); its attributes may not hold class, search, return or use
///   keys (`errSecParam`). A change that would give an item another item's primary key fails with
///   `errSecDuplicateItem` and changes nothing.
/// - **delete** removes every match; a match limit other than All is `errSecParam`.
/// - Queries without `kSecAttrSynchronizable` match only non-synchronizable items;
///   `kSecAttrSynchronizableAny` matches both.
/// - An item whose accessibility is not available in the storage's ``LockState`` makes any operation that
///   touches it fail with `errSecInteractionNotAllowed`; nothing is changed or deleted.
/// - Reading the secret of an item with an access control (or changing its secret) needs an authentication
///   from the ``Authenticator``, unless an ``AuthenticationContext`` covers it. `kSecUseAuthenticationUI`
///   Fail turns the prompt into `errSecInteractionNotAllowed`; Skip leaves such items out. Attributes-only
///   queries and deletes never authenticate.
///
/// Thread safety: every operation is one storage transaction; authentication happens outside it.
public final class KeychainEngine: Sendable {
    /// Where the rows live.
    public let storage: any KeychainStorage
    private let settings: Locked<EngineConfiguration>
    private let authenticatorBox: Locked<any Authenticator>
    private let hooks = Locked<[any EngineHook]>([])
    private let biometryEnrollment = Locked<Int64>(1)
    private let damagedItemsSkipped = Locked<Int>(0)

    /// How many damaged rows (failing their integrity check: `errSecDecode`) operations of this engine have
    /// skipped since it was made. Each one is also logged, with its class and row id.
    public var damagedItemsSeen: Int { damagedItemsSkipped.current }

    /// Creates an engine over `storage`.
    ///
    /// - Parameters:
    ///   - storage: the rows; a fresh ``MemoryStorage`` by default.
    ///   - configuration: access groups, defaults and device behaviour.
    ///   - authenticator: asked when an access-controlled secret is read. The default reports
    ///     `notAvailable`, so such reads fail with `errSecAuthFailed` until one is injected.
    public init(storage: any KeychainStorage = MemoryStorage(),
                configuration: EngineConfiguration = EngineConfiguration(),
                authenticator: any Authenticator = FixedAuthenticator(.notAvailable)) {
        self.storage = storage
        self.settings = Locked(configuration)
        self.authenticatorBox = Locked(authenticator)
    }

    /// The configuration in force; changes apply to the next operation.
    public var configuration: EngineConfiguration {
        get { settings.current }
        set { settings.withLock { $0 = newValue } }
    }

    /// The authenticator asked for access-controlled secrets.
    public var authenticator: any Authenticator {
        get { authenticatorBox.current }
        set { authenticatorBox.withLock { $0 = newValue } }
    }

    /// The storage's lock state.
    public var lockState: LockState { storage.lockState }

    /// Adds a hook that sees (and may fail) every operation.
    public func addHook(_ hook: any EngineHook) { hooks.withLock { $0.append(hook) } }

    /// Simulates a change of the enrolled biometry: `biometryCurrentSet` items added before become unreadable
    /// (`errSecAuthFailed`), as on a device after a fingerprint or face is added.
    public func changeBiometryEnrollment() { biometryEnrollment.withLock { $0 += 1 } }

    /// The internal attribute recording the biometry enrollment a `biometryCurrentSet` item was added under.
    static let enrollmentAttribute = "_bioset"

    // MARK: - The four operations

    /// `SecItemAdd`: inserts one item.
    ///
    /// - Returns: nil without return keys; otherwise what ``copyMatching(_:)`` would return for the new item.
    /// - Throws: ``EngineError`` with `errSecParam`, `errSecNoSuchAttr`, `errSecDuplicateItem`,
    ///   `errSecInteractionNotAllowed`, `errSecMissingEntitlement`, `errSecAuthFailed` (no passcode for
    ///   `akpu`), `errSecUnimplemented` (no Secure Enclave).
    @discardableResult
    public func add(_ attributes: KeychainQuery) throws -> ItemResult? {
        try perform(.add, attributes, nil) { try self.performAdd(attributes) }
    }

    /// `SecItemCopyMatching`: finds items and returns them in the shape the return keys ask for.
    ///
    /// - Throws: ``EngineError`` with `errSecItemNotFound`, `errSecParam`, `errSecNoSuchAttr`,
    ///   `errSecInteractionNotAllowed`, `errSecUserCanceled`, `errSecAuthFailed`, `errSecDecode`,
    ///   `errSecMissingEntitlement`.
    public func copyMatching(_ query: KeychainQuery) throws -> ItemResult? {
        try perform(.copy, query, nil) { try self.performCopy(query) }
    }

    /// `SecItemUpdate`: changes every item that matches `query`.
    ///
    /// - Throws: ``EngineError`` with `errSecItemNotFound`, `errSecDuplicateItem`, `errSecParam`,
    ///   `errSecNoSuchAttr`, `errSecInteractionNotAllowed`, `errSecUserCanceled`, `errSecAuthFailed`,
    ///   `errSecMissingEntitlement`.
    public func update(_ query: KeychainQuery, with attributesToUpdate: KeychainQuery) throws {
        try perform(.update, query, attributesToUpdate) { try self.performUpdate(query, attributesToUpdate) }
    }

    /// `SecItemDelete`: removes every item that matches `query`.
    ///
    /// - Throws: ``EngineError`` with `errSecItemNotFound`, `errSecParam`, `errSecNoSuchAttr`,
    ///   `errSecInteractionNotAllowed`, `errSecMissingEntitlement`.
    public func delete(_ query: KeychainQuery) throws {
        try perform(.delete, query, nil) { try self.performDelete(query) }
    }

    private func perform<T>(_ operation: KeychainOperation, _ query: KeychainQuery, _ update: KeychainQuery?, _ body: () throws -> T) throws -> T {
        let hooks = self.hooks.current
        do {
            for hook in hooks { try hook.willPerform(operation, query: query, attributesToUpdate: update) }
            let result = try body()
            for hook in hooks { hook.didPerform(operation, query: query, attributesToUpdate: update, status: Status.success) }
            return result
        } catch {
            let engineError = Self.engineError(error)
            for hook in hooks { hook.didPerform(operation, query: query, attributesToUpdate: update, status: engineError.status) }
            throw engineError
        }
    }

    static func engineError(_ error: any Error) -> EngineError {
        if let e = error as? EngineError { return e }
        return EngineError(Status.internalError, "storage failure: \(type(of: error))")
    }

    // MARK: - Add

    private func performAdd(_ input: KeychainQuery) throws -> ItemResult? {
        let config = configuration
        let q = try ParsedQuery(input, for: .add)
        guard q.persistentReference == nil else { throw EngineError.param("kSecValuePersistentRef cannot be added") }
        if q.accessControl != nil && q.accessibility != nil {
            throw EngineError.param("kSecAttrAccessible and kSecAttrAccessControl are mutually exclusive")
        }
        let accessibility = q.accessControl?.accessibility ?? q.accessibility ?? config.defaultAccessibility
        let synchronizable: Bool
        switch q.sync {
        case .none: synchronizable = false
        case .some(.none): throw EngineError.param("kSecAttrSynchronizableAny cannot be added; use true or false")
        case .some(.some(let b)): synchronizable = b
        }
        if synchronizable && accessibility.isThisDeviceOnly {
            throw EngineError.param("a synchronizable item cannot have a ThisDeviceOnly accessibility")
        }
        if accessibility == .whenPasscodeSetThisDeviceOnly && !config.passcodeSet {
            throw EngineError(Status.authFailed, "whenPasscodeSetThisDeviceOnly needs a device passcode")
        }
        if q.attributes[Key.tokenID]?.stringValue == Key.tokenIDSecureEnclave && !config.secureEnclaveAvailable {
            throw EngineError(Status.unimplemented, "the Secure Enclave is not available on this device")
        }
        let schema = ClassSchema.of(q.itemClass)
        var attributes = q.attributes
        attributes[Key.accessGroup] = .string(try resolveAccessGroup(q.attributes[Key.accessGroup]?.stringValue, config))
        attributes[Key.accessible] = .string(accessibility.rawValue)
        attributes[Key.synchronizable] = .bool(synchronizable)
        let now = config.now()
        attributes[Key.creationDate] = .date(now)
        attributes[Key.modificationDate] = .date(now)
        for key in schema.primaryKey where attributes[key] == nil {
            attributes[key] = schema.attributes[key]!.type.emptyValue
        }
        if let ac = q.accessControl, ac.flags.contains(.biometryCurrentSet) {
            attributes[Self.enrollmentAttribute] = .number(biometryEnrollment.current)
        }
        guard accessibility.isAvailable(in: storage.lockState) else {
            throw EngineError.interactionNotAllowed("the keychain is locked and the item's accessibility is '\(accessibility.rawValue)'")
        }
        var item = StoredItem(itemClass: q.itemClass, attributes: attributes, secret: q.valueData, accessControl: q.accessControl)
        let keyConstraints = Dictionary(uniqueKeysWithValues: schema.primaryKey.map { ($0, attributes[$0]!) })
        item.rowID = try storage.write { tx -> Int64 in
            if !(try tx.candidates(in: q.itemClass, matching: keyConstraints)).isEmpty {
                throw EngineError.duplicateItem("an item with the same primary key exists")
            }
            return try tx.insert(item)
        }
        guard q.hasReturnKeys else { return nil }
        return shape([result(for: item, q, data: item.secret)], q, limitOverride: .one)
    }

    private func resolveAccessGroup(_ requested: String?, _ config: EngineConfiguration) throws -> String {
        switch config.accessGroups {
        case .unrestricted(let defaultGroup):
            return requested ?? defaultGroup
        case .entitled(let groups):
            if let requested {
                guard groups.contains(requested) else {
                    throw EngineError(Status.missingEntitlement, "the access group is not among the caller's entitled groups")
                }
                return requested
            }
            guard let first = groups.first else {
                throw EngineError(Status.missingEntitlement, "the caller has no keychain access group")
            }
            return first
        }
    }

    // MARK: - Matching

    /// The rows that match `q`, sorted by row id; fails when a match is locked or unreadable.
    /// `stopAfter`: stop reading rows once that many matches are found (a match limit): the storage then never
    /// reads or decrypts the rows after them.
    private func matches(_ q: ParsedQuery, in reader: any StorageReader, config: EngineConfiguration,
                         stopAfter: Int? = nil) throws -> (items: [StoredItem], unreadable: [Candidate]) {
        if let group = q.attributes[Key.accessGroup]?.stringValue, case .entitled(let groups) = config.accessGroups, !groups.contains(group) {
            throw EngineError(Status.missingEntitlement, "the access group is not among the caller's entitled groups")
        }
        if case .entitled(let groups) = config.accessGroups, groups.isEmpty {
            throw EngineError(Status.missingEntitlement, "the caller has no keychain access group")
        }
        let schema = ClassSchema.of(q.itemClass)
        var wanted = q.attributes
        switch q.sync {
        // Apple's server adds sync = false to a query without kSecAttrSynchronizable, unless it names a
        // persistent reference (SecDbQuery.c, query_create_with_limit).
        case .none: if q.persistentReference == nil { wanted[Key.synchronizable] = .bool(false) }
        case .some(.none): break
        case .some(.some(let b)): wanted[Key.synchronizable] = .bool(b)
        }
        var constraints: [String: AttributeValue] = [:]
        for key in schema.primaryKey {
            guard let value = wanted[key] else { continue }
            if q.caseInsensitive, value.stringValue != nil { continue }
            constraints[key] = value
        }
        let lockState = storage.lockState
        var items: [StoredItem] = []
        var unreadable: [Candidate] = []
        /// Takes one row; false when enough matches are found.
        func visit(_ candidate: Candidate) throws -> Bool {
            switch candidate {
            case .item(let item):
                // Never trust the storage's filtering: a row that contradicts a constraint the storage claims to
                // have applied is an integrity failure (a tampered index), not a match and not a miss.
                if !Self.item(item, matches: constraints, except: [:], schema: schema, caseInsensitive: false, accessGroups: .unrestricted(defaultGroup: "")) {
                    KeystoneLog.logger.warning("storage returned a row that does not match its index", metadata: ["class": "\(item.itemClass.rawValue)", "row": "\(item.rowID)"])
                    unreadable.append(.unreadable(itemClass: item.itemClass, rowID: item.rowID, error: EngineError(Status.decode, "the item does not match its index")))
                    return true
                }
                guard Self.item(item, matches: wanted, except: [:], schema: schema, caseInsensitive: q.caseInsensitive, accessGroups: config.accessGroups) else { return true }
                guard item.accessibility.isAvailable(in: lockState) else {
                    throw EngineError.interactionNotAllowed("a matching item is not available while the keychain is \(lockState.rawValue)")
                }
                items.append(item)
                if let stopAfter, items.count >= stopAfter { return false }
            case .unreadable(_, _, let error):
                if error.status == Status.interactionNotAllowed { throw error }
                unreadable.append(candidate)
            }
            return true
        }
        if let ref = q.persistentReference {
            if let candidate = try reader.candidate(in: q.itemClass, rowID: ref.rowID) { _ = try visit(candidate) }
        } else {
            try reader.forEachCandidate(in: q.itemClass, matching: constraints, visit)
        }
        items.sort { $0.rowID < $1.rowID }
        if unreadable.isEmpty { return (items, []) }
        // Damaged rows (errSecDecode) are never acted on: which item a damaged row holds cannot be known, since its
        // index columns are not trustworthy once its sealed contents fail to open. Apple's query loop skips items
        // that fail to decode (and its insert path deletes a corrupt duplicate); Keystone skips them too, logs
        // each one, and never deletes or rewrites data it cannot read. When nothing readable matches, the
        // operation fails with errSecDecode, so the caller learns that something is there.
        for case .unreadable(let cls, let id, let error) in unreadable {
            KeystoneLog.logger.warning("skipping a damaged keychain item", metadata: ["class": "\(cls.rawValue)", "row": "\(id)", "status": "\(error.status)"])
        }
        damagedItemsSkipped.withLock { $0 += unreadable.count }
        if items.isEmpty, case .unreadable(_, _, let error)? = unreadable.first {
            throw error
        }
        return (items, unreadable)
    }

    private static func item(_ item: StoredItem, matches wanted: [String: AttributeValue], except honoured: [String: AttributeValue],
                             schema: ClassSchema, caseInsensitive: Bool, accessGroups: EngineConfiguration.AccessGroups) -> Bool {
        if case .entitled(let groups) = accessGroups, wanted[Key.accessGroup] == nil {
            guard let group = item.attributes[Key.accessGroup]?.stringValue, groups.contains(group) else { return false }
        }
        if wanted.count == honoured.count { return true }
        for (key, value) in wanted where honoured[key] == nil {
            let stored = item.attributes[key] ?? schema.attributes[key]?.type.emptyValue
            if stored == value { continue }
            if caseInsensitive, let a = stored?.stringValue, let b = value.stringValue,
               a.compare(b, options: .caseInsensitive) == .orderedSame { continue }
            return false
        }
        return true
    }

    // MARK: - Authentication

    /// Checks the authentication `item`'s secret needs; returns false when the item is to be skipped.
    private func authorize(_ item: StoredItem, _ q: ParsedQuery, operation: String, config: EngineConfiguration) throws -> Bool {
        guard let ac = item.accessControl, ac.flags.requiresAuthentication, config.enforcesAccessControl else { return true }
        if ac.flags.contains(.biometryCurrentSet),
           let enrolled = item.attributes[Self.enrollmentAttribute]?.numberValue,
           enrolled != biometryEnrollment.current {
            throw EngineError(Status.authFailed, "the biometry enrollment changed since the item was added")
        }
        switch q.authUI {
        case .skip: return false
        case .fail: throw EngineError.interactionNotAllowed("the item needs an authentication and kSecUseAuthenticationUI is Fail")
        case .allow: break
        }
        let now = config.now()
        if let context = q.context {
            if context.isInvalidated { throw EngineError(Status.authFailed, "the authentication context was invalidated") }
            if context.covers(now) { return true }
            if context.interactionNotAllowed {
                throw EngineError.interactionNotAllowed("the item needs an authentication and the context does not allow interaction")
            }
        }
        let request = AuthenticationRequest(itemClass: item.itemClass, flags: ac.flags, operationPrompt: q.prompt, operation: operation)
        let outcome = authenticator.authenticate(request)
        if let status = outcome.status {
            throw EngineError(status, "authentication ended with '\(outcome.rawValue)'")
        }
        q.context?.recordSuccess(at: now)
        return true
    }

    // MARK: - Copy

    private func performCopy(_ query: KeychainQuery) throws -> ItemResult? {
        let config = configuration
        let q = try ParsedQuery(query, for: .copy)
        let limit: Int? = { switch q.limit { case .one: return 1; case .all: return nil; case .count(let n): return n } }()
        // Stop reading at the limit, unless authentication may skip items (kSecUseAuthenticationUISkip).
        let stopAfter = q.returnData && q.authUI == .skip ? nil : limit
        var found = try storage.read { try matches(q, in: $0, config: config, stopAfter: stopAfter).items }
        guard !found.isEmpty else { throw EngineError.itemNotFound }
        var results: [ItemResult] = []
        results.reserveCapacity(min(found.count, limit ?? found.count))
        // Consume the rows as their results are made, so a large result does not hold both at once.
        found.reverse()
        while let item = found.popLast() {
            if let limit, results.count >= limit { break }
            if q.returnData {
                guard try authorize(item, q, operation: "copy", config: config) else { continue }
            }
            results.append(result(for: item, q, data: item.secret))
        }
        guard !results.isEmpty else { throw EngineError.itemNotFound }
        guard q.hasReturnKeys else { return nil }
        return shape(results, q, limitOverride: nil)
    }

    private func result(for item: StoredItem, _ q: ParsedQuery, data: Data?) -> ItemResult {
        let keys = [q.returnData, q.returnAttributes, q.returnRef, q.returnPersistentRef].filter { $0 }.count
        if keys == 1 && q.returnData { return .data(data ?? Data()) }
        if keys == 1 && q.returnPersistentRef { return .data(item.persistentReference) }
        var dictionary: KeychainQuery = [:]
        if q.returnAttributes {
            dictionary[Key.class] = .string(item.itemClass.rawValue)
            for (key, value) in item.attributes where !key.hasPrefix("_") {
                dictionary[key] = KeychainValue(value)
            }
            if let ac = item.accessControl { dictionary[Key.accessControl] = .accessControl(ac) }
        }
        if q.returnData { dictionary[Key.valueData] = .data(data ?? Data()) }
        if q.returnPersistentRef { dictionary[Key.valuePersistentRef] = .data(item.persistentReference) }
        if q.returnRef { dictionary[Key.valueRef] = .data(item.persistentReference) }
        return .attributes(dictionary)
    }

    private func shape(_ results: [ItemResult], _ q: ParsedQuery, limitOverride: ParsedQuery.Limit?) -> ItemResult {
        switch limitOverride ?? q.limit {
        case .one: return results[0]
        case .all, .count: return .array(results)
        }
    }

    // MARK: - Update

    private func performUpdate(_ query: KeychainQuery, _ changes: KeychainQuery) throws {
        let config = configuration
        let q = try ParsedQuery(query, for: .update)
        // Apple's server accepts a match limit in an update query and passes it to its SELECT: by default
        // every match is updated; an explicit limit updates that many matches (in row order).
        let updateLimit: Int? = q.limitGiven ? { switch q.limit { case .one: return 1; case .all: return nil; case .count(let n): return n } }() : nil
        if q.hasReturnKeys { throw EngineError.param("SecItemUpdate's query takes no return keys") }
        for key in changes.keys {
            if key == Key.class || key.hasPrefix("m_") || key.hasPrefix("r_") || key.hasPrefix("u_")
                || key == Key.valueRef || key == Key.valuePersistentRef {
                throw EngineError.param("'\(key)' cannot be in the attributes to update")
            }
        }
        var changeInput = changes
        changeInput[Key.useDataProtectionKeychain] = nil
        changeInput[Key.class] = .string(q.itemClass.rawValue)
        let c = try ParsedQuery(changeInput, for: .update)
        if c.accessControl != nil && c.accessibility != nil {
            throw EngineError.param("kSecAttrAccessible and kSecAttrAccessControl are mutually exclusive")
        }
        if case .some(.none) = c.sync { throw EngineError.param("kSecAttrSynchronizableAny cannot be set") }
        if let group = c.attributes[Key.accessGroup]?.stringValue { _ = try resolveAccessGroup(group, config) }
        let secretChanges = c.valueData != nil || c.accessControl != nil

        // Apply inside one write transaction. Authentication must not happen while the transaction is open:
        // when a target needs one, leave the transaction, authenticate, and apply again.
        var authorized: Set<Int64> = []
        var skipped: Set<Int64> = []
        for _ in 0..<3 {
            let needed: [StoredItem] = try storage.write { tx in
                let current = try matches(q, in: tx, config: config, stopAfter: updateLimit).items
                guard !current.isEmpty else { throw EngineError.itemNotFound }
                let targets = current.filter { !skipped.contains($0.rowID) }
                guard !targets.isEmpty else { throw EngineError.itemNotFound }
                if secretChanges && config.enforcesAccessControl {
                    let pending = targets.filter { !authorized.contains($0.rowID) && ($0.accessControl?.flags.requiresAuthentication ?? false) }
                    if !pending.isEmpty { return pending }
                }
                let now = config.now()
                for var item in targets {
                    for (key, value) in c.attributes { item.attributes[key] = value }
                    if case .some(.some(let b)) = c.sync { item.attributes[Key.synchronizable] = .bool(b) }
                    if let data = c.valueData { item.secret = data }
                    if let ac = c.accessControl {
                        item.accessControl = ac
                        item.attributes[Key.accessible] = .string(ac.accessibility.rawValue)
                        if ac.flags.contains(.biometryCurrentSet) {
                            item.attributes[Self.enrollmentAttribute] = .number(biometryEnrollment.current)
                        }
                    }
                    if let a = c.accessibility {
                        item.attributes[Key.accessible] = .string(a.rawValue)
                        if item.accessControl != nil { item.accessControl?.accessibility = a }
                    }
                    let accessibility = item.accessibility
                    if item.attributes[Key.synchronizable]?.boolValue == true && accessibility.isThisDeviceOnly {
                        throw EngineError.param("a synchronizable item cannot have a ThisDeviceOnly accessibility")
                    }
                    guard accessibility.isAvailable(in: storage.lockState) else {
                        throw EngineError.interactionNotAllowed("the new accessibility is not available while the keychain is locked")
                    }
                    item.attributes[Key.modificationDate] = .date(now)
                    try tx.replace(item)
                }
                return []
            }
            if needed.isEmpty { return }
            for item in needed {
                if try authorize(item, q, operation: "update", config: config) { authorized.insert(item.rowID) } else { skipped.insert(item.rowID) }
            }
        }
        throw EngineError(Status.interactionNotAllowed, "the matching items kept changing during the update")
    }

    // MARK: - Delete

    private func performDelete(_ query: KeychainQuery) throws {
        let config = configuration
        let q = try ParsedQuery(query, for: .delete)
        if q.limitGiven && q.limit != .all { throw EngineError.param("SecItemDelete takes no match limit: it deletes every match") }
        if q.hasReturnKeys { throw EngineError.param("SecItemDelete takes no return keys") }
        try storage.write { tx in
            let items = try matches(q, in: tx, config: config).items
            guard !items.isEmpty else { throw EngineError.itemNotFound }
            for item in items { try tx.delete(in: item.itemClass, rowID: item.rowID) }
        }
    }
}
