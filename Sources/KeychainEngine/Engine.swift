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
    /// Whether keys can be created in the Secure Enclave (`kSecAttrTokenIDSecureEnclave`), asked when such a key
    /// item is added. Default: never. `KeychainServicesDefaults` makes engines that ask whether a token is configured.
    public var secureEnclaveCheck: @Sendable () -> Bool = { false }
    /// Whether keys can be created in the Secure Enclave now; setting it makes ``secureEnclaveCheck`` a constant.
    public var secureEnclaveAvailable: Bool {
        get { secureEnclaveCheck() }
        set { secureEnclaveCheck = { newValue } }
    }
    /// Whether the device has a passcode: `whenPasscodeSetThisDeviceOnly` items need one.
    public var passcodeSet = true
    /// The clock for creation and modification dates and authentication reuse.
    public var now: @Sendable () -> Date = { Date() }

    /// The defaults described on each property.
    public init() {}
}

/// Observes or interrupts engine operations (call logs, injected failures).
package protocol EngineHook: Sendable {
    /// Called before `operation` runs; throwing an ``EngineError`` makes the operation fail with it, untouched.
    func willPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?) throws
    /// Called after `operation` ran, with its status.
    func didPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?, status: Int32)
    /// Called when `operation` left out `count` damaged rows: rows that matched the storage's search but
    /// could not be read and authenticated (`errSecDecode`), or that contradicted the search
    /// (an integrity failure). Called before ``didPerform(_:query:attributesToUpdate:status:)``, whether
    /// the operation succeeded (it acted on the readable matches) or failed with `errSecDecode` (only
    /// damaged rows matched). Each damaged row is also logged on ``KeystoneLog/logger`` (class, row id, status).
    ///
    /// The default implementation does nothing.
    func didSkipDamagedItems(_ operation: KeychainOperation, count: Int)
}

extension EngineHook {
    package func didSkipDamagedItems(_ operation: KeychainOperation, count: Int) {}
}

/// The keychain: Apple's SecItem rules over a ``KeychainStorage``.
///
/// The contract, as in Apple's Keychain Services (Apple's documented SecItem rules):
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
/// - **Damaged rows.** The engine never trusts the storage's filtering: it re-checks every query attribute
///   against every row it reads. A row the storage cannot read and authenticate (`errSecDecode`), or a
///   readable row that contradicts a constraint the storage was asked to honour (an integrity failure),
///   is damaged. Damaged rows are never returned, changed or deleted. Copy, update and delete act on the
///   readable matches and leave damaged ones out, logging each (class, row id, status) and reporting the
///   count (``damagedItemsSeen``); when only damaged rows match, the
///   operation fails with `errSecDecode`, so the caller learns something is there.
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
    let hooks = Locked<[any EngineHook]>([])
    private let biometryEnrollment = Locked<Int64>(1)
    private let damagedItemsSkipped = Locked<Int>(0)
    /// Whether the storage's write transactions report the lock state they write with (``StorageReader/lockState``),
    /// learnt at the first add: an add then checks its accessibility inside its transaction, instead of asking the
    /// storage first (a keychain file reads its header again for that).
    private let transactionsReportLockState = Locked<Bool?>(nil)

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
    ///
    /// Setting it replaces the whole configuration, and `engine.configuration.field = value` reads it and writes it
    /// back: a change made by another thread in between is lost. Use ``updateConfiguration(_:)`` where others may
    /// change it at the same time.
    public var configuration: EngineConfiguration {
        get { settings.current }
        set { settings.withLock { $0 = newValue } }
    }

    /// Changes the configuration in place, atomically: no other change can come between reading and writing it, so
    /// two threads changing different fields at once both get their change. Applies to the next operation.
    ///
    /// - Important: `change` runs under the configuration's lock: keep it short, and never start a keychain operation
    ///   of this engine from it.
    /// - Returns: what `change` returns.
    public func updateConfiguration<T>(_ change: (inout EngineConfiguration) throws -> T) rethrows -> T {
        try settings.withLock(change)
    }

    /// The authenticator asked for access-controlled secrets.
    public var authenticator: any Authenticator {
        get { authenticatorBox.current }
        set { authenticatorBox.withLock { $0 = newValue } }
    }

    /// The storage's lock state.
    public var lockState: LockState { storage.lockState }

    /// Adds a hook that sees (and may fail) every operation.
    package func addHook(_ hook: any EngineHook) { hooks.withLock { $0.append(hook) } }

    /// Simulates a change of the enrolled biometry: `biometryCurrentSet` items added before become unreadable
    /// (`errSecAuthFailed`), as on a device after a fingerprint or face is added.
    ///
    /// Only for authenticators without a ``Authenticator/biometryDomainState``: when the authenticator reports
    /// one (the system's fingerprint reader, a scripted biometry), that state decides.
    package func changeBiometryEnrollment() { biometryEnrollment.withLock { $0 += 1 } }

    /// The enrolled-biometry state a `biometryCurrentSet` item is bound to: the authenticator's domain state, or
    /// the engine's own counter (8 bytes, big-endian) when the authenticator reports none.
    func currentBiometryState() -> Data {
        if let state = authenticator.biometryDomainState { return state }
        return Self.counterState(biometryEnrollment.current)
    }

    static func counterState(_ counter: Int64) -> Data {
        withUnsafeBytes(of: counter.bigEndian) { Data($0) }
    }

    /// The state a stored item was bound to; items written before domain states were kept the counter as a number.
    static func boundBiometryState(_ value: AttributeValue?) -> Data? {
        switch value {
        case .data(let data)?: return data
        case .number(let n)?: return counterState(n)
        default: return nil
        }
    }

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
        try perform(.add, attributes, nil) { _ in try self.performAdd(attributes) }
    }

    /// `SecItemCopyMatching`: finds items and returns them in the shape the return keys ask for.
    ///
    /// - Throws: ``EngineError`` with `errSecItemNotFound`, `errSecParam`, `errSecNoSuchAttr`,
    ///   `errSecInteractionNotAllowed`, `errSecUserCanceled`, `errSecAuthFailed`, `errSecDecode`,
    ///   `errSecMissingEntitlement`.
    public func copyMatching(_ query: KeychainQuery) throws -> ItemResult? {
        try perform(.copy, query, nil) { try self.performCopy(query, &$0) }
    }

    /// `SecItemUpdate`: changes every item that matches `query`.
    ///
    /// - Throws: ``EngineError`` with `errSecItemNotFound`, `errSecDuplicateItem`, `errSecParam`,
    ///   `errSecNoSuchAttr`, `errSecInteractionNotAllowed`, `errSecUserCanceled`, `errSecAuthFailed`,
    ///   `errSecMissingEntitlement`, `errSecDecode` (only damaged rows match; nothing is changed).
    /// - Important: A row the engine could not read and authenticate is never changed.
    public func update(_ query: KeychainQuery, with attributesToUpdate: KeychainQuery) throws {
        try perform(.update, query, attributesToUpdate) { try self.performUpdate(query, attributesToUpdate, &$0) }
    }

    /// `SecItemDelete`: removes every item that matches `query`.
    ///
    /// - Throws: ``EngineError`` with `errSecItemNotFound`, `errSecParam`, `errSecNoSuchAttr`,
    ///   `errSecInteractionNotAllowed`, `errSecMissingEntitlement`, `errSecDecode` (only damaged rows
    ///   match; nothing is deleted).
    /// - Important: A row the engine could not read and authenticate is never deleted, even when the
    ///   storage's (unauthenticated) index columns say it matches.
    public func delete(_ query: KeychainQuery) throws {
        try perform(.delete, query, nil) { try self.performDelete(query, &$0) }
    }

    /// What an operation tells its hooks besides its status.
    struct OperationReport {
        init() {}
        /// Damaged rows the operation left out (see ``EngineHook/didSkipDamagedItems(_:count:)``).
        var damagedSkipped = 0
    }

    private func perform<T>(_ operation: KeychainOperation, _ query: KeychainQuery, _ update: KeychainQuery?,
                            _ body: (inout OperationReport) throws -> T) throws(EngineError) -> T {
        let hooks = self.hooks.current
        var report = OperationReport()
        do {
            for hook in hooks { try hook.willPerform(operation, query: query, attributesToUpdate: update) }
            let result = try StorageInteraction.$userInterfaceAllowed.withValue(Self.allowsUserInterface(query)) {
                try body(&report)
            }
            if report.damagedSkipped > 0 { damagedItemsSkipped.withLock { $0 += report.damagedSkipped } }
            if report.damagedSkipped > 0 { for hook in hooks { hook.didSkipDamagedItems(operation, count: report.damagedSkipped) } }
            for hook in hooks { hook.didPerform(operation, query: query, attributesToUpdate: update, status: Status.success) }
            return result
        } catch {
            let engineError = Self.engineError(error)
            if report.damagedSkipped > 0 { damagedItemsSkipped.withLock { $0 += report.damagedSkipped } }
            if report.damagedSkipped > 0 { for hook in hooks { hook.didSkipDamagedItems(operation, count: report.damagedSkipped) } }
            for hook in hooks { hook.didPerform(operation, query: query, attributesToUpdate: update, status: engineError.status) }
            throw engineError
        }
    }

    /// Whether a query lets a storage ask the user (``StorageInteraction``): `kSecUseAuthenticationUI` absent or
    /// Allow, and no authentication context that forbids interaction.
    static func allowsUserInterface(_ query: KeychainQuery) -> Bool {
        if case .authenticationContext(let context)? = query[Key.useAuthenticationContext], context.interactionNotAllowed { return false }
        guard let policy = query[Key.useAuthenticationUI] else { return true }
        return policy.stringValue == Key.useAuthenticationUIAllow
    }

    static func engineError(_ error: any Error) -> EngineError {
        if let e = error as? EngineError { return e }
        return EngineError(Status.internalError, "storage failure: \(type(of: error))")
    }

    // MARK: - Add

    private func performAdd(_ input: KeychainQuery) throws -> ItemResult? {
        let checkInside = transactionsReportLockState.current == true
        let (q, prepared) = try prepareAdd(input, configuration, checkingLockState: !checkInside)
        var item = prepared
        // The storage owns the duplicate check: its insert enforces the UNIQUE constraint over the primary key and
        // fails with errSecDuplicateItem, changing nothing, whether the existing row is readable or not (a row of a
        // locked class still holds its key), as Apple's SecItemAdd does. The engine does not look first.
        item.rowID = try storage.write { tx in
            let reported = tx.lockState
            if transactionsReportLockState.current == nil { transactionsReportLockState.withLock { $0 = reported != nil } }
            if checkInside { try Self.checkAddable(item.accessibility, in: reported ?? storage.lockState) }
            return try tx.insert(item)
        }
        guard q.hasReturnKeys else { return nil }
        return shape([result(for: item, q, data: item.secret)], q, limitOverride: .one)
    }

    /// The primary-key attributes of `item`, as search constraints.
    static func primaryKeyConstraints(of item: StoredItem) -> [String: AttributeValue] {
        ClassSchema.of(item.itemClass).primaryKey(of: item.attributes)
    }

    /// Validates an add and builds the row it inserts (defaults filled in).
    ///
    /// `checkingLockState` false: the caller checks the accessibility against the lock state itself
    /// (``checkAddable(_:in:)``), inside its transaction.
    private func prepareAdd(_ input: KeychainQuery, _ config: EngineConfiguration,
                            checkingLockState: Bool = true) throws -> (ParsedQuery, StoredItem) {
        let q = try ParsedQuery(input, for: .add)
        guard q.persistentReference == nil else { throw EngineError.param("kSecValuePersistentRef cannot be added") }
        guard q.itemClass != .identity else {
            throw EngineError.param("an identity is a certificate and its private key: add those (or a SecIdentity in kSecValueRef)")
        }
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
        // Synchronizable with a ThisDeviceOnly accessibility: Apple's documentation says the two do not go
        // together, but the keychain accepts the item and reads it back with sync = true; it never leaves
        // the device. Keystone does the same (there is nothing to leave to).
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
        attributes.merge(schema.primaryKey(of: attributes)) { given, _ in given }  // missing ones as empty values
        if let ac = q.accessControl, ac.flags.contains(.biometryCurrentSet) {
            attributes[Self.enrollmentAttribute] = .data(currentBiometryState())
        }
        if checkingLockState { try Self.checkAddable(accessibility, in: storage.lockState) }
        return (q, StoredItem(itemClass: q.itemClass, attributes: attributes, secret: q.valueData, accessControl: q.accessControl))
    }

    /// Fails with `errSecInteractionNotAllowed` when an item of `accessibility` cannot be added in `lockState`.
    private static func checkAddable(_ accessibility: Accessibility, in lockState: LockState) throws {
        guard accessibility.isAvailable(in: lockState) else {
            throw EngineError.interactionNotAllowed("the keychain is locked and the item's accessibility is '\(accessibility.rawValue)'")
        }
    }

    func resolveAccessGroup(_ requested: String?, _ config: EngineConfiguration) throws -> String {
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

    /// A damaged row a search left out: unreadable (`errSecDecode`) or contradicting its search.
    struct DamagedRow {
        let itemClass: ItemClass
        let rowID: Int64
        let error: EngineError
    }

    /// What a search found: the readable matches in row-id order, and the damaged rows it left out.
    struct Matches {
        var items: [StoredItem] = []
        var damaged: [DamagedRow] = []

        /// `errSecItemNotFound`, or `errSecDecode` when damaged rows were all that matched.
        var noMatchError: EngineError {
            if let first = damaged.first { return EngineError(Status.decode, first.error.status == Status.decode ? first.error.reason : "a matching item is damaged") }
            return EngineError.itemNotFound
        }
    }

    /// The rows that match `q`, in row-id order, and the damaged rows that were left out.
    ///
    /// The storage's filtering is never trusted: every query attribute is checked again against every
    /// readable row. A readable row that contradicts a constraint the storage was asked to honour (or a row
    /// of another class or row id than asked) is an integrity failure: it is treated as damaged, like a row
    /// the storage reports as unreadable with `errSecDecode`. Damaged rows are logged (class, row id, status)
    /// and never returned, so callers cannot change or delete them.
    ///
    /// - Parameter stopAfter: stop once this many readable matches were found (a match limit).
    /// - Throws: `errSecInteractionNotAllowed` when a row it reaches is locked; `errSecMissingEntitlement`.
    func matches(_ q: ParsedQuery, in reader: any StorageReader, config: EngineConfiguration,
                         stopAfter: Int? = nil) throws -> Matches {
        if let group = q.attributes[Key.accessGroup]?.stringValue, case .entitled(let groups) = config.accessGroups, !groups.contains(group) {
            throw EngineError(Status.missingEntitlement, "the access group is not among the caller's entitled groups")
        }
        if case .entitled(let groups) = config.accessGroups, groups.isEmpty {
            throw EngineError(Status.missingEntitlement, "the caller has no keychain access group")
        }
        let schema = ClassSchema.of(q.itemClass)
        let wanted = Self.wanted(q)
        var constraints: [String: AttributeValue] = [:]
        for key in schema.primaryKey {
            guard let value = wanted[key] else { continue }
            if q.caseInsensitive, value.stringValue != nil { continue }
            constraints[key] = value
        }
        // The reader's own state when it has one (a keychain file's reads run in parallel: asking the storage again
        // would take the lock every reader shares), else the storage's.
        let lockState = reader.lockState ?? storage.lockState
        var found = Matches()
        let visit = { (candidate: Candidate) throws -> Bool in
            switch candidate {
            case .item(let item):
                if let problem = Self.integrityProblem(item, q: q, constraints: constraints, schema: schema) {
                    found.damaged.append(DamagedRow(itemClass: q.itemClass, rowID: item.rowID, error: EngineError(Status.decode, problem)))
                    return true
                }
                guard Self.item(item, matches: wanted, schema: schema, caseInsensitive: q.caseInsensitive, accessGroups: config.accessGroups) else { return true }
                guard item.accessibility.isAvailable(in: lockState) else {
                    throw EngineError.interactionNotAllowed("a matching item is not available while the keychain is \(lockState.rawValue)")
                }
                found.items.append(item)
                if let stopAfter, found.items.count >= stopAfter { return false }
            case .unreadable(let cls, let id, let error):
                if error.status == Status.interactionNotAllowed { throw error }
                found.damaged.append(DamagedRow(itemClass: cls, rowID: id, error: error))
            }
            return true
        }
        if let ref = q.persistentReference {
            if let candidate = try reader.candidate(in: q.itemClass, rowID: ref.rowID) { _ = try visit(candidate) }
        } else {
            try reader.forEachCandidate(in: q.itemClass, matching: constraints, visit)
        }
        for row in found.damaged {
            KeystoneLog.logger.warning("left out a damaged keychain item", metadata: [
                "class": "\(row.itemClass.rawValue)", "row": "\(row.rowID)", "status": "\(row.error.status)",
            ])
        }
        if found.items.count > 1 { found.items.sort { $0.rowID < $1.rowID } }
        return found
    }

    /// Why a row the storage returned as readable cannot be what was asked for, or nil when it can.
    ///
    /// A storage must honour its constraints: a row that contradicts one (or has another class, or another
    /// row id than the persistent reference named) was swapped or corrupted below the engine.
    private static func integrityProblem(_ item: StoredItem, q: ParsedQuery, constraints: [String: AttributeValue],
                                         schema: ClassSchema) -> String? {
        if item.itemClass != q.itemClass { return "the storage returned a row of another class" }
        if let ref = q.persistentReference, item.rowID != ref.rowID { return "the storage returned another row than the reference named" }
        for (key, value) in constraints where schema.storedValue(of: key, in: item.attributes) != value {
            return "the storage returned a row that contradicts its search"
        }
        return nil
    }

    /// Whether `item` holds every attribute of `wanted` (the storage's filtering is not trusted) and, for an
    /// entitled caller whose query names no group, belongs to one of its groups.
    private static func item(_ item: StoredItem, matches wanted: [String: AttributeValue],
                             schema: ClassSchema, caseInsensitive: Bool, accessGroups: EngineConfiguration.AccessGroups) -> Bool {
        if case .entitled(let groups) = accessGroups, wanted[Key.accessGroup] == nil {
            guard let group = item.attributes[Key.accessGroup]?.stringValue, groups.contains(group) else { return false }
        }
        for (key, value) in wanted {
            let stored = schema.storedValue(of: key, in: item.attributes)
            if stored == value { continue }
            if caseInsensitive, let a = stored?.stringValue, let b = value.stringValue,
               a.compare(b, options: .caseInsensitive) == .orderedSame { continue }
            return false
        }
        return true
    }

    // MARK: - Authentication

    /// Checks the authentication `item`'s secret needs; returns false when the item is to be skipped.
    ///
    /// - Parameter grants: the operation's successes so far (``AuthenticationContext/forOneOperation()``, one per
    ///   operation): a success for one item covers the operation's later items that need the same.
    func authorize(_ item: StoredItem, _ q: ParsedQuery, operation: String, config: EngineConfiguration,
                   grants: AuthenticationContext) throws -> Bool {
        guard let ac = item.accessControl, ac.flags.requiresAuthentication, config.enforcesAccessControl else { return true }
        if ac.flags.contains(.biometryCurrentSet),
           let enrolled = Self.boundBiometryState(item.attributes[Self.enrollmentAttribute]),
           enrolled != currentBiometryState() {
            throw EngineError(Status.authFailed, "the biometry enrollment changed since the item was added")
        }
        switch q.authUI {
        case .skip: return false
        case .fail: throw EngineError.interactionNotAllowed("the item needs an authentication and kSecUseAuthenticationUI is Fail")
        case .allow: break
        }
        try AuthenticationGate.authorize(ac.flags, itemClass: item.itemClass, operation: operation, prompt: q.prompt,
                                         context: q.context, authenticator: authenticator, now: config.now(),
                                         operationGrants: grants)
        return true
    }

    // MARK: - Copy

    func performCopy(_ query: KeychainQuery, _ report: inout OperationReport) throws -> ItemResult? {
        let config = configuration
        let q = try ParsedQuery(query, for: .copy)
        if q.itemClass == .identity { return try performIdentityCopy(q, &report) }
        let limit: Int? = { switch q.limit { case .one: return 1; case .all: return nil; case .count(let n): return n } }()
        // The search stops at the limit, unless items needing an authentication may be skipped (UI Skip):
        // then a later match may have to stand in for a skipped one.
        let stopAfter = q.returnData && q.authUI == .skip ? nil : limit
        // Damaged matches are left out, as Apple's query loop (SecItemDb.c, s3dl_query_row) goes on past
        // an item that fails to decode. Unlike Apple, Keystone does not stop at the first row with limit
        // One (Apple's SELECT says LIMIT 1): a damaged first row does not hide a readable one after it.
        // Unlike Apple, which then reports errSecItemNotFound, only damaged matches fail with errSecDecode.
        var found = try storage.read { try matches(q, in: $0, config: config, stopAfter: stopAfter) }
        report.damagedSkipped = found.damaged.count
        guard !found.items.isEmpty else { throw found.noMatchError }
        var results: [ItemResult] = []
        results.reserveCapacity(min(found.items.count, limit ?? found.items.count))
        // Consume the rows as their results are made, so a large result never holds both at once.
        var items = found.items
        found.items = []
        items.reverse()
        let grants = AuthenticationContext.forOneOperation()
        while let item = items.popLast() {
            if let limit, results.count >= limit { break }
            if q.returnData {
                guard try authorize(item, q, operation: "copy", config: config, grants: grants) else { continue }
            }
            results.append(result(for: item, q, data: item.secret))
        }
        guard !results.isEmpty else { throw EngineError.itemNotFound }
        guard q.hasReturnKeys else { return nil }
        return shape(results, q, limitOverride: nil)
    }

    func result(for item: StoredItem, _ q: ParsedQuery, data: Data?) -> ItemResult {
        let keys = [q.returnData, q.returnAttributes, q.returnRef, q.returnPersistentRef].filter { $0 }.count
        if keys == 1 && q.returnData { return .data(data ?? Data()) }
        if keys == 1 && q.returnPersistentRef { return .data(item.persistentReference) }
        var dictionary: KeychainQuery = [:]
        if q.returnAttributes || q.returnRef {
            dictionary[Key.class] = .string(item.itemClass.rawValue)
            for (key, value) in item.attributes where !key.hasPrefix("_") {
                dictionary[key] = KeychainValue(value)
            }
            // Apple's result always carries an access control: for an item added with only kSecAttrAccessible,
            // one with that protection class and no flags (SecDbKeychainItem.c makes one from `pdmn`).
            dictionary[Key.accessControl] = .accessControl(item.accessControl ?? AccessControl(accessibility: item.accessibility, flags: []))
        }
        if q.returnData { dictionary[Key.valueData] = .data(data ?? Data()) }
        if q.returnPersistentRef { dictionary[Key.valuePersistentRef] = .data(item.persistentReference) }
        if q.returnRef {
            // The material of a reference (a key, certificate or identity object; passwords have none), as
            // Apple's server hands its client what it needs to make one (SecDbItemCopyResult adds the
            // attributes and the data when a reference is asked): the attributes (above), the persistent
            // reference under v_Ref, and the data, unless reading it needs an authentication: then the
            // object must fetch it through the persistent reference when it is used, and authenticate then.
            // KeychainServices makes the object and keeps only what was asked.
            dictionary[Key.valueRef] = .data(item.persistentReference)
            let protected = configuration.enforcesAccessControl && (item.accessControl?.flags.requiresAuthentication ?? false)
            if !q.returnData, !protected { dictionary[Key.valueData] = .data(item.secret ?? Data()) }
        }
        return .attributes(dictionary)
    }

    func shape(_ results: [ItemResult], _ q: ParsedQuery, limitOverride: ParsedQuery.Limit?) -> ItemResult {
        switch limitOverride ?? q.limit {
        case .one: return results[0]
        case .all, .count: return .array(results)
        }
    }

    // MARK: - Update

    /// A validated update: the query, the changes, and how many matches it may change.
    struct UpdatePlan {
        let query: ParsedQuery
        let changes: ParsedQuery
        /// Apple's server accepts a match limit in an update query and passes it to its SELECT: by default
        /// every match is updated; an explicit limit updates that many matches (in row order).
        let limit: Int?
        /// Whether the secret or its protection changes (which needs an authentication for protected items).
        var changesSecret: Bool { changes.valueData != nil || changes.accessControl != nil }
    }

    func prepareUpdate(_ query: KeychainQuery, _ changes: KeychainQuery, _ config: EngineConfiguration) throws -> UpdatePlan {
        let q = try ParsedQuery(query, for: .update)
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
        return UpdatePlan(query: q, changes: c, limit: updateLimit)
    }

    func performUpdate(_ query: KeychainQuery, _ changes: KeychainQuery, _ report: inout OperationReport) throws {
        let config = configuration
        let plan = try prepareUpdate(query, changes, config)
        if plan.query.itemClass == .identity { return try performIdentityUpdate(plan, &report) }
        // Apply inside one write transaction. Authentication must not happen while the transaction is open:
        // when a target needs one, leave the transaction, authenticate, and apply again.
        var authorized: Set<Int64> = []
        var skipped: Set<Int64> = []
        let grants = AuthenticationContext.forOneOperation()
        for _ in 0..<3 {
            let needed: [StoredItem] = try storage.write { tx in
                try applyUpdate(plan, in: tx, config: config, authorized: authorized, skipped: skipped, report: &report)
            }
            if needed.isEmpty { return }
            for item in needed {
                if try authorize(item, plan.query, operation: "update", config: config, grants: grants) {
                    authorized.insert(item.rowID)
                } else {
                    skipped.insert(item.rowID)
                }
            }
        }
        throw EngineError(Status.interactionNotAllowed, "the matching items kept changing during the update")
    }

    /// Applies `plan` inside the transaction `tx`; returns the targets that still need an authentication
    /// (nothing is changed then), or an empty list once every target was changed.
    private func applyUpdate(_ plan: UpdatePlan, in tx: any StorageWriter, config: EngineConfiguration,
                             authorized: Set<Int64>, skipped: Set<Int64>, report: inout OperationReport) throws -> [StoredItem] {
        // Only rows read and authenticated are changed: damaged matches are left as they are
        // (see performDelete), and only damaged matches fail with errSecDecode.
        let found = try matches(plan.query, in: tx, config: config, stopAfter: plan.limit)
        report.damagedSkipped = found.damaged.count
        let current = found.items
        guard !current.isEmpty else { throw found.noMatchError }
        let targets = skipped.isEmpty ? current : current.filter { !skipped.contains($0.rowID) }
        guard !targets.isEmpty else { throw EngineError.itemNotFound }
        if plan.changesSecret && config.enforcesAccessControl {
            let pending = targets.filter { !authorized.contains($0.rowID) && ($0.accessControl?.flags.requiresAuthentication ?? false) }
            if !pending.isEmpty { return pending }
        }
        let now = config.now()
        // The transaction's own lock state: asking the storage would read the file's header again (a keychain file).
        let lockState = tx.lockState
        for item in targets { try tx.replace(try updated(item, with: plan.changes, now: now, lockState: lockState)) }
        return []
    }

    /// `item` with `c`'s changes applied and a new modification date.
    ///
    /// `lockState`: the state the transaction reads with (``StorageReader/lockState``), nil to ask the storage.
    func updated(_ original: StoredItem, with c: ParsedQuery, now: Date, lockState: LockState? = nil) throws -> StoredItem {
        var item = original
        for (key, value) in c.attributes { item.attributes[key] = value }
        if case .some(.some(let b)) = c.sync { item.attributes[Key.synchronizable] = .bool(b) }
        if let data = c.valueData { item.secret = data }
        if let ac = c.accessControl {
            item.accessControl = ac
            item.attributes[Key.accessible] = .string(ac.accessibility.rawValue)
            if ac.flags.contains(.biometryCurrentSet) {
                item.attributes[Self.enrollmentAttribute] = .data(currentBiometryState())
            }
        }
        if let a = c.accessibility {
            item.attributes[Key.accessible] = .string(a.rawValue)
            if item.accessControl != nil { item.accessControl?.accessibility = a }
        }
        // A synchronizable item may take a ThisDeviceOnly accessibility, as on Apple's keychain (see prepareAdd).
        let accessibility = item.accessibility
        guard accessibility.isAvailable(in: lockState ?? storage.lockState) else {
            throw EngineError.interactionNotAllowed("the new accessibility is not available while the keychain is locked")
        }
        item.attributes[Key.modificationDate] = .date(now)
        return item
    }

    // MARK: - Add or update

    /// Whether ``addOrUpdate(_:matching:with:)`` added the item or updated an existing one.
    package enum SaveOutcome: Sendable, Hashable {
        /// No item had the primary key: the item was added.
        case added
        /// An item had the primary key: the items matching the query were updated.
        case updated
    }

    /// Adds an item or, when one with its primary key exists, updates the items that match `query`: the
    /// add-or-update of careful keychain code (never delete-then-add), as one call.
    ///
    /// The outcome is exactly that of `add(attributes)` followed, on `errSecDuplicateItem`, by
    /// `update(query, with: changes)`, with the same errors. Without hooks both steps run in one storage
    /// transaction (an upsert by primary key), unless a target needs an authentication, which never happens
    /// inside a transaction. With hooks, they see the two operations as before: an add (failing with
    /// `errSecDuplicateItem` when the item exists), then an update.
    ///
    /// - Parameters:
    ///   - attributes: the item to add, as for ``add(_:)``.
    ///   - query: the items to update when the item exists, as for ``update(_:with:)``.
    ///   - changes: the attributes and secret to update.
    /// - Returns: whether the item was added or updated.
    /// - Throws: ``EngineError`` with the codes of ``add(_:)`` and ``update(_:with:)``.
    /// - Important: The existing item is updated in place (its creation date is kept), never deleted.
    @discardableResult
    package func addOrUpdate(_ attributes: KeychainQuery, matching query: KeychainQuery, with changes: KeychainQuery) throws -> SaveOutcome {
        if !hooks.current.isEmpty {
            do {
                try add(attributes)
                return .added
            } catch let error as EngineError where error.status == Status.duplicateItem {
                try update(query, with: changes)
                return .updated
            }
        }
        do {
            return try performAddOrUpdate(attributes, query, changes)
        } catch {
            throw Self.engineError(error)
        }
    }

    /// Signals, out of a transaction, that an update target needs an authentication first.
    private struct NeedsAuthentication: Error {}

    private func performAddOrUpdate(_ attributes: KeychainQuery, _ query: KeychainQuery, _ changes: KeychainQuery) throws -> SaveOutcome {
        let config = configuration
        let (_, item) = try prepareAdd(attributes, config)
        var report = OperationReport()
        do {
            return try storage.write { tx -> SaveOutcome in
                var plan: UpdatePlan?
                let outcome = try tx.upsert(item) { existing in
                    // The update query names exactly this row's primary key: change it in place.
                    let p = try prepareUpdate(query, changes, config)
                    plan = p
                    guard Self.pinsPrimaryKey(p.query, of: item, config: config) else { return nil }
                    guard case .item(let old) = existing else {
                        if case .unreadable(_, _, let error) = existing, error.status == Status.interactionNotAllowed { throw error }
                        return nil  // Damaged: left to the general update below, which reports it.
                    }
                    guard Self.integrityProblem(old, q: p.query, constraints: Self.primaryKeyConstraints(of: item),
                                                schema: ClassSchema.of(item.itemClass)) == nil,
                          Self.item(old, matches: Self.wanted(p.query), schema: ClassSchema.of(item.itemClass),
                                    caseInsensitive: p.query.caseInsensitive, accessGroups: config.accessGroups) else { return nil }
                    let lockState = tx.lockState ?? storage.lockState
                    guard old.accessibility.isAvailable(in: lockState) else {
                        throw EngineError.interactionNotAllowed("a matching item is not available while the keychain is \(lockState.rawValue)")
                    }
                    if p.changesSecret && config.enforcesAccessControl && (old.accessControl?.flags.requiresAuthentication ?? false) {
                        throw NeedsAuthentication()
                    }
                    return try updated(old, with: p.changes, now: config.now(), lockState: lockState)
                }
                switch outcome {
                case .inserted: return .added
                case .replaced: return .updated
                case .kept:
                    // The update query may match more than this row (no access group named, …), or the row
                    // did not qualify: run the general update in the same transaction.
                    let p = try plan ?? prepareUpdate(query, changes, config)
                    let needed = try applyUpdate(p, in: tx, config: config, authorized: [], skipped: [], report: &report)
                    if !needed.isEmpty { throw NeedsAuthentication() }
                    return .updated
                }
            }
        } catch is NeedsAuthentication {
            var report = OperationReport()
            try performUpdate(query, changes, &report)
            return .updated
        }
    }

    /// The attributes a query asks for, with the implicit `sync` Apple's server adds.
    private static func wanted(_ q: ParsedQuery) -> [String: AttributeValue] {
        var wanted = q.attributes
        // kSecAttrAccessible in a search matches the item's protection class, as on Apple's keychain (pdmn is a
        // column like any other): what lets a caller list the items of one class while another class is locked.
        if let accessibility = q.accessibility { wanted[Key.accessible] = .string(accessibility.rawValue) }
        switch q.sync {
        // Apple's server adds sync = false to a query without kSecAttrSynchronizable, unless it names a
        // persistent reference (SecDbQuery.c, query_create_with_limit).
        case .none: if q.persistentReference == nil { wanted[Key.synchronizable] = .bool(false) }
        case .some(.none): break
        case .some(.some(let b)): wanted[Key.synchronizable] = .bool(b)
        }
        return wanted
    }

    /// Whether the update query `q` can match no row but the one with `item`'s primary key: it names every
    /// primary-key attribute, with `item`'s values, case-sensitively, and no persistent reference.
    private static func pinsPrimaryKey(_ q: ParsedQuery, of item: StoredItem, config: EngineConfiguration) -> Bool {
        guard q.persistentReference == nil, q.itemClass == item.itemClass, !q.caseInsensitive else { return false }
        let wanted = Self.wanted(q)
        if case .entitled(let groups) = config.accessGroups, groups.isEmpty { return false }
        let schema = ClassSchema.of(item.itemClass)
        for key in schema.primaryKey {
            guard let value = wanted[key], value == schema.primaryKeyValue(key, of: item.attributes) else { return false }
        }
        if let group = wanted[Key.accessGroup]?.stringValue, case .entitled(let groups) = config.accessGroups, !groups.contains(group) { return false }
        return true
    }

    // MARK: - Delete

    private func performDelete(_ query: KeychainQuery, _ report: inout OperationReport) throws {
        let config = configuration
        let q = try ParsedQuery(query, for: .delete)
        if q.limitGiven && q.limit != .all { throw EngineError.param("SecItemDelete takes no match limit: it deletes every match") }
        if q.hasReturnKeys { throw EngineError.param("SecItemDelete takes no return keys") }
        if q.itemClass == .identity { return try performIdentityDelete(q, &report) }
        // Keystone never deletes (or changes) a row it could not read and authenticate. A storage's index
        // columns (the digests it searches by) are not authenticated: trusting them would let someone who
        // swaps one make `delete account a` delete item b. So damaged matches are skipped and logged, the
        // readable ones deleted; if only damaged rows match, the delete fails with errSecDecode and the
        // caller learns something is there.
        //
        // Apple differs: its query loop schedules an asynchronous delete of an item that fails to decode
        // (SecItemDb.c, s3dl_query_row → deleteCorruptedItemAsync), and SecDbItemInsertOrReplace (SecDbItem.c)
        // replaces a corrupt row holding the new item's primary key as if it were not there. Keystone
        // deliberately leaves data it cannot read in place: only an explicit repair tool may remove it.
        try storage.write { tx in
            let found = try matches(q, in: tx, config: config)
            report.damagedSkipped = found.damaged.count
            guard !found.items.isEmpty else { throw found.noMatchError }
            for item in found.items { try tx.delete(in: item.itemClass, rowID: item.rowID) }
        }
    }
}
