import Foundation

/// An item's identity compiled once for repeated typed operations: its class and primary-key values,
/// coerced and interned, so a save or read does not build, hash and parse `String`-keyed dictionaries.
///
/// It holds every primary-key attribute of the class but the access group and `sync` (which each call
/// gives). Keystone's typed `Keychain` compiles its items to this and, over a ``KeychainEngine`` on a
/// ``MemoryStorage``, runs ``KeychainEngine/compiledSecret(for:accessGroup:synchronizable:)`` and
/// ``KeychainEngine/compiledSave(_:for:accessGroup:synchronizable:accessibility:label:comment:)``: the
/// same rules as the SecItem operations, without their dictionaries.
public struct CompiledItemKey: Sendable {
    /// The class.
    public let itemClass: ItemClass
    /// The primary-key values (without group and sync), sorted by attribute id.
    let values: [(AttributeID, AttributeValue)]

    /// Compiles `identity`: `kSecClass` and the class's primary-key attributes but the access group and
    /// `sync`, every one of them, and nothing else.
    ///
    /// - Returns: nil when `identity` does not have that shape (then use the SecItem operations).
    public init?(_ identity: KeychainQuery) {
        guard let q = try? ParsedQuery(identity, for: .copy), q.sync == nil, !q.hasReturnKeys, q.valueData == nil,
              q.persistentReference == nil, q.accessControl == nil, q.accessibility == nil, !q.limitGiven,
              q.context == nil, q.prompt == nil, !q.caseInsensitive, identity[Key.class] != nil else { return nil }
        let schema = ClassSchema.of(q.itemClass)
        let keys = schema.primaryKey.filter { $0 != Key.accessGroup && $0 != Key.synchronizable }
        guard q.attributes.count == keys.count, keys.allSatisfy({ q.attributes[$0] != nil }) else { return nil }
        itemClass = q.itemClass
        values = keys.map { (AttributeID.of($0), q.attributes[$0]!) }.sorted { $0.0 < $1.0 }
    }

    /// A generic password's identity (service and account), compiled without a dictionary.
    public init(genericPasswordService service: String, account: String) {
        itemClass = .genericPassword
        values = [(Self.account, .string(account)), (Self.service, .string(service))].sorted { $0.0 < $1.0 }
    }

    private static let account = AttributeID.of(Key.account)
    private static let service = AttributeID.of(Key.service)

    func value(_ id: AttributeID) -> AttributeValue? {
        for entry in values where entry.0 == id { return entry.1 }
        return nil
    }
}

/// The outcome of a compiled operation: done, or not handled here (use the SecItem operation).
public enum CompiledOutcome<Value: Sendable>: Sendable {
    /// The operation ran with the SecItem rules; this is its result.
    case done(Value)
    /// The compiled path does not handle this case (hooks installed, another storage, an item needing an
    /// authentication…): nothing was changed; run the SecItem operation instead.
    case unsupported
}

extension KeychainEngine {
    private static let syncID = AttributeID.of(Key.synchronizable)
    private static let groupID = AttributeID.of(Key.accessGroup)
    private static let accessibleID = AttributeID.of(Key.accessible)
    private static let labelID = AttributeID.of(Key.label)
    private static let commentID = AttributeID.of(Key.comment)
    private static let creationID = AttributeID.of(Key.creationDate)
    private static let modificationID = AttributeID.of(Key.modificationDate)

    /// Whether `row` matches the query `key` + `sync` (+ `group`, or the entitled groups): every query
    /// attribute is checked on the row, as ``copyMatching(_:)`` does.
    private static func row(_ row: MemoryStorage.Row, in table: MemoryStorage.Table, matches key: CompiledItemKey,
                            group: String?, sync: Bool, accessGroups: EngineConfiguration.AccessGroups) -> Bool {
        for (id, value) in key.values where table.value(row, id) != value { return false }
        if table.value(row, syncID) != .bool(sync) { return false }
        if let group {
            return row.value(groupID) == .string(group)
        }
        if case .entitled(let groups) = accessGroups {
            guard let stored = row.value(groupID)?.stringValue, groups.contains(stored) else { return false }
        }
        return true
    }

    /// Visits the rows matching `key` + `sync` (+ `group`), in row-id order, until `body` returns false.
    private static func forEachMatchingRow(_ table: MemoryStorage.Table, _ key: CompiledItemKey, group: String?, sync: Bool,
                                           accessGroups: EngineConfiguration.AccessGroups, _ body: (Int64) throws -> Bool) rethrows {
        let hash = table.groupFreeHash { $0 == syncID ? .bool(sync) : key.value($0) }
        try table.groupFree.forEachID(hash) { id in
            guard let row = table.row(id), Self.row(row, in: table, matches: key, group: group, sync: sync, accessGroups: accessGroups) else { return true }
            return try body(id)
        }
    }

    /// The rows matching `key` + `sync` (+ `group`), in row-id order.
    private static func matchingRows(_ table: MemoryStorage.Table, _ key: CompiledItemKey, group: String?, sync: Bool,
                                     accessGroups: EngineConfiguration.AccessGroups) -> [Int64] {
        var ids: [Int64] = []
        forEachMatchingRow(table, key, group: group, sync: sync, accessGroups: accessGroups) { ids.append($0); return true }
        return ids
    }

    private func compiledPathAvailable(_ key: CompiledItemKey) -> MemoryStorage? {
        guard hooks.current.isEmpty, let memory = storage as? MemoryStorage else { return nil }
        return memory
    }

    private static func checkEntitlement(_ group: String?, _ config: EngineConfiguration) throws {
        guard case .entitled(let groups) = config.accessGroups else { return }
        if let group, !groups.contains(group) {
            throw EngineError(Status.missingEntitlement, "the access group is not among the caller's entitled groups")
        }
        if groups.isEmpty { throw EngineError(Status.missingEntitlement, "the caller has no keychain access group") }
    }

    /// The secret of the first item matching `key`: `copyMatching` of class + key (+ group) + sync with
    /// `kSecReturnData` and match limit One, without its dictionaries.
    ///
    /// - Returns: `.done(secret)`, or `.unsupported` (hooks installed, a storage other than ``MemoryStorage``,
    ///   or an item whose secret needs an authentication): then run ``copyMatching(_:)``.
    /// - Throws: ``EngineError`` with `errSecItemNotFound`, `errSecInteractionNotAllowed`, `errSecMissingEntitlement`.
    public func compiledSecret(for key: CompiledItemKey, accessGroup group: String?, synchronizable sync: Bool) throws -> CompiledOutcome<Data> {
        guard let memory = compiledPathAvailable(key) else { return .unsupported }
        let config = configuration
        try Self.checkEntitlement(group, config)
        return try memory.withTable(key.itemClass) { table, lockState in
            var first: Int64?
            Self.forEachMatchingRow(table, key, group: group, sync: sync, accessGroups: config.accessGroups) { first = $0; return false }
            guard let id = first, let row = table.row(id) else { throw EngineError.itemNotFound }
            guard row.accessibility.isAvailable(in: lockState) else {
                throw EngineError.interactionNotAllowed("a matching item is not available while the keychain is \(lockState.rawValue)")
            }
            if config.enforcesAccessControl, row.accessControl?.flags.requiresAuthentication == true { return .unsupported }
            return .done(row.secret ?? Data())
        }
    }

    /// Adds the item `key` (+ group, sync) with `secret`, or when one with its primary key exists updates
    /// the items matching `key` (+ group) + sync: ``addOrUpdate(_:matching:with:)`` for a typed save whose
    /// attributes are the key, `v_Data`, `kSecAttrAccessible` and optionally a label and a comment, and
    /// whose changes are the same minus the key. Without its dictionaries, in one step under the storage lock.
    ///
    /// - Returns: `.done(outcome)`, or `.unsupported` (hooks installed, a storage other than
    ///   ``MemoryStorage``, or a target needing an authentication): nothing was changed; run
    ///   ``addOrUpdate(_:matching:with:)``.
    /// - Throws: ``EngineError`` with `errSecParam` (synchronizable with a ThisDeviceOnly accessibility),
    ///   `errSecAuthFailed` (no passcode for `akpu`), `errSecMissingEntitlement`, `errSecInteractionNotAllowed`.
    public func compiledSave(_ secret: Data, for key: CompiledItemKey, accessGroup group: String?, synchronizable sync: Bool,
                             accessibility: Accessibility, label: String?, comment: String?) throws -> CompiledOutcome<SaveOutcome> {
        guard let memory = compiledPathAvailable(key) else { return .unsupported }
        let config = configuration
        // The add's checks, in the add's order (prepareAdd).
        if sync && accessibility.isThisDeviceOnly {
            throw EngineError.param("a synchronizable item cannot have a ThisDeviceOnly accessibility")
        }
        if accessibility == .whenPasscodeSetThisDeviceOnly && !config.passcodeSet {
            throw EngineError(Status.authFailed, "whenPasscodeSetThisDeviceOnly needs a device passcode")
        }
        let resolvedGroup = try resolveAccessGroup(group, config)
        let now = config.now()
        return try memory.withTable(key.itemClass) { table, lockState in
            guard accessibility.isAvailable(in: lockState) else {
                throw EngineError.interactionNotAllowed("the keychain is locked and the item's accessibility is '\(accessibility.rawValue)'")
            }
            // The update's targets, should the item exist: the rows matching the identity query, which names
            // the group only when the caller did. The item exists when one of them is in the add's group.
            let targets = Self.matchingRows(table, key, group: group, sync: sync, accessGroups: config.accessGroups)
            if !targets.contains(where: { table.row($0)?.group == resolvedGroup }) {
                var values = ContiguousArray<(AttributeID, AttributeValue)>(key.values)
                values.append((Self.groupID, .string(resolvedGroup)))
                values.append((Self.syncID, .bool(sync)))
                values.append((Self.accessibleID, .string(accessibility.rawValue)))
                values.append((Self.creationID, .date(now)))
                values.append((Self.modificationID, .date(now)))
                if let label { values.append((Self.labelID, .string(label))) }
                if let comment { values.append((Self.commentID, .string(comment))) }
                values.sort { $0.0 < $1.0 }
                _ = try table.insert(MemoryStorage.Row(values: values, secret: secret, accessControl: nil))
                return .done(.added)
            }
            for id in targets {
                let row = table.row(id)!
                guard row.accessibility.isAvailable(in: lockState) else {
                    throw EngineError.interactionNotAllowed("a matching item is not available while the keychain is \(lockState.rawValue)")
                }
                if config.enforcesAccessControl, row.accessControl?.flags.requiresAuthentication == true { return .unsupported }
            }
            for id in targets {
                let index = Int(id - 1)
                table.rows[index]!.set(Self.accessibleID, .string(accessibility.rawValue))
                if table.rows[index]!.accessControl != nil { table.rows[index]!.accessControl!.accessibility = accessibility }
                if let label { table.rows[index]!.set(Self.labelID, .string(label)) }
                if let comment { table.rows[index]!.set(Self.commentID, .string(comment)) }
                table.rows[index]!.secret = secret
                table.rows[index]!.set(Self.modificationID, .date(now))
            }
            return .done(.updated)
        }
    }
}
