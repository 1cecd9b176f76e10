import Foundation

/// An item's identity compiled once for repeated typed operations: its class and primary-key values,
/// coerced and interned, so a save or read does not build, hash and parse `String`-keyed dictionaries.
///
/// It holds every primary-key attribute of the class but the access group and `sync` (which each call
/// gives). Keystone's typed `Keychain` compiles its items to this and, over a ``KeychainEngine`` on a
/// ``MemoryStorage``, runs `compiledSecret(for:accessGroup:synchronizable:observedQuery:)` and
/// `compiledSave(_:for:…)`: the
/// same rules as the SecItem operations, without their dictionaries.
public struct CompiledItemKey: Sendable {
    /// The class.
    package let itemClass: ItemClass
    /// The primary-key values (without group and sync), sorted by attribute id.
    let values: [(AttributeID, AttributeValue)]

    /// Compiles `identity`: `kSecClass` and the class's primary-key attributes but the access group and
    /// `sync`, every one of them, and nothing else.
    ///
    /// - Returns: nil when `identity` does not have that shape (then use the SecItem operations).
    package init?(_ identity: KeychainQuery) {
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
    package init(genericPasswordService service: String, account: String) {
        itemClass = .genericPassword
        values = Self.account < Self.service
            ? [(Self.account, .string(account)), (Self.service, .string(service))]
            : [(Self.service, .string(service)), (Self.account, .string(account))]
    }

    /// A generic password's identity from a dictionary's values (a string or data each, as a SecItem dictionary
    /// may give them): what the SecItem functions' compiled path looks items up by.
    package init(genericPasswordService service: AttributeValue, account: AttributeValue) {
        itemClass = .genericPassword
        values = Self.account < Self.service
            ? [(Self.account, account), (Self.service, service)]
            : [(Self.service, service), (Self.account, account)]
    }

    private static let account = AttributeID.of(Key.account)
    private static let service = AttributeID.of(Key.service)

    func value(_ id: AttributeID) -> AttributeValue? {
        for entry in values where entry.0 == id { return entry.1 }
        return nil
    }
}

/// The outcome of a compiled operation: done, or not handled here (use the SecItem operation).
package enum CompiledOutcome<Value: Sendable>: Sendable {
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

    /// Whether one of `ids` asks for authentication before use (the compiled path then hands over to the general one).
    ///
    /// - Throws: `errSecInteractionNotAllowed` when one is not available in `lockState`.
    private static func needsAuthentication(_ ids: [Int64], in table: MemoryStorage.Table, _ lockState: LockState,
                                            _ config: EngineConfiguration) throws -> Bool {
        for id in ids {
            let row = table.row(id)!
            guard row.accessibility.isAvailable(in: lockState) else {
                throw EngineError.interactionNotAllowed("a matching item is not available while the keychain is \(lockState.rawValue)")
            }
            if config.enforcesAccessControl, row.accessControl?.flags.requiresAuthentication == true { return true }
        }
        return false
    }

    /// The rows matching `key` + `sync` (+ `group`), in row-id order.
    private static func matchingRows(_ table: MemoryStorage.Table, _ key: CompiledItemKey, group: String?, sync: Bool,
                                     accessGroups: EngineConfiguration.AccessGroups) -> [Int64] {
        var ids: [Int64] = []
        forEachMatchingRow(table, key, group: group, sync: sync, accessGroups: accessGroups) { ids.append($0); return true }
        return ids
    }

    /// Calls the hooks around one logical operation as ``copyMatching(_:)`` and the others do: `willPerform`
    /// (which may fail it, untouched), then `didPerform` with its status.
    private func observed<T>(_ hooks: [any EngineHook], _ operation: KeychainOperation, _ query: KeychainQuery,
                             _ update: KeychainQuery?, _ body: () throws -> T) throws -> T {
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
    /// - Parameters:
    ///   - key: the item's class and primary-key values, compiled once.
    ///   - group: the access group; nil as for a query without `kSecAttrAccessGroup`.
    ///   - sync: whether the synchronizable item is meant (`kSecAttrSynchronizable`).
    ///   - observedQuery: the `copyMatching` query this read stands for, built only when hooks are
    ///     installed: they see it as that operation (and may fail it). When it gives nil (the default), hooks make
    ///     the read unsupported.
    /// - Returns: `.done(secret)`, or `.unsupported` (a storage other than ``MemoryStorage``, or hooks and no
    ///   `observedQuery`): then run ``copyMatching(_:)``.
    /// - Throws: ``EngineError`` with `errSecItemNotFound`, `errSecInteractionNotAllowed`, `errSecMissingEntitlement`,
    ///   and, for an item whose secret needs an authentication (read through ``copyMatching(_:)``'s rules),
    ///   `errSecUserCanceled`, `errSecAuthFailed`.
    package func compiledSecret(for key: CompiledItemKey, accessGroup group: String?, synchronizable sync: Bool,
                               observedQuery: () -> KeychainQuery? = { nil }) throws -> CompiledOutcome<Data> {
        guard let memory = storage as? MemoryStorage else { return .unsupported }
        let hooks = self.hooks.current
        if hooks.isEmpty { return try secretStep(memory, key, group, sync) }
        guard let query = observedQuery() else { return .unsupported }
        return .done(try observed(hooks, .copy, query, nil) {
            if case .done(let data) = try secretStep(memory, key, group, sync) { return data }
            // Needs an authentication: copyMatching's own rules, already observed as this copy.
            var report = OperationReport()
            guard case .data(let data)? = try performCopy(query, &report) else {
                throw EngineError(Status.internalError, "kSecReturnData did not return data")
            }
            return data
        })
    }

    private func secretStep(_ memory: MemoryStorage, _ key: CompiledItemKey, _ group: String?, _ sync: Bool) throws -> CompiledOutcome<Data> {
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

    /// What one step of a compiled save did.
    private enum SaveStep { case added, exists, updated, needsAuthentication }

    /// Adds the item `key` (+ group, sync) with `secret`, or when one with its primary key exists updates
    /// the items matching `key` (+ group) + sync: ``addOrUpdate(_:matching:with:)`` for a typed save whose
    /// attributes are the key, `v_Data`, `kSecAttrAccessible` and optionally a label and a comment, and
    /// whose changes are the same minus the key. Without its dictionaries; without hooks, in one step under
    /// the storage lock.
    ///
    /// - Parameters:
    ///   - secret: the item's secret (`v_Data`).
    ///   - key: the item's class and primary-key values, compiled once.
    ///   - group: the access group; nil as for an add without `kSecAttrAccessGroup`.
    ///   - sync: whether the item is synchronizable (`kSecAttrSynchronizable`).
    ///   - accessibility: the `kSecAttrAccessible` value to store.
    ///   - label: `kSecAttrLabel`, if any.
    ///   - comment: `kSecAttrComment`, if any.
    ///   - observedAs: the add, the update query and the changes this save stands for, built only
    ///     when hooks are installed: they see an add and, when the item exists, an update, as with separate
    ///     calls (and may fail either). When it gives nil (the default), hooks make the save unsupported.
    /// - Returns: `.done(outcome)`, or `.unsupported` (a storage other than ``MemoryStorage``, hooks and no
    ///   `observedAs`, or, without hooks, a target needing an authentication): nothing was changed; run
    ///   ``addOrUpdate(_:matching:with:)``.
    /// - Throws: ``EngineError`` with `errSecAuthFailed` (no passcode for `akpu`), `errSecMissingEntitlement`, `errSecInteractionNotAllowed`,
    ///   `errSecItemNotFound` (the item went away between the add and the update), and with hooks, the codes
    ///   of ``update(_:with:)`` for targets needing an authentication.
    package func compiledSave(_ secret: Data, for key: CompiledItemKey, accessGroup group: String?, synchronizable sync: Bool,
                             accessibility: Accessibility, label: String?, comment: String?,
                             observedAs: () -> (add: KeychainQuery, query: KeychainQuery, changes: KeychainQuery)? = { nil }) throws -> CompiledOutcome<SaveOutcome> {
        guard let memory = storage as? MemoryStorage else { return .unsupported }
        let hooks = self.hooks.current
        let step = { (mode: SaveStep) throws -> SaveStep in
            try self.saveStep(memory, secret, key, group, sync, accessibility, label, comment, mode: mode)
        }
        if hooks.isEmpty {
            switch try step(.updated) {
            case .added: return .done(.added)
            case .updated: return .done(.updated)
            case .exists, .needsAuthentication: return .unsupported
            }
        }
        guard let (add, query, changes) = observedAs() else { return .unsupported }
        do {
            _ = try observed(hooks, .add, add, nil) {
                if try step(.added) == .exists { throw EngineError.duplicateItem("an item with the same primary key exists") }
            }
            return .done(.added)
        } catch let error as EngineError where error.status == Status.duplicateItem {
            // The item exists: the update, observed as one.
        }
        try observed(hooks, .update, query, changes) {
            if try step(.exists) == .needsAuthentication {
                var report = OperationReport()
                try performUpdate(query, changes, &report)
            }
        }
        return .done(.updated)
    }

    /// One step of a compiled save under the storage lock. `mode` `.added`: add only (`.exists` when the
    /// primary key is taken); `.exists`: update only; `.updated`: add, or update when the key is taken.
    private func saveStep(_ memory: MemoryStorage, _ secret: Data, _ key: CompiledItemKey, _ group: String?, _ sync: Bool,
                          _ accessibility: Accessibility, _ label: String?, _ comment: String?, mode: SaveStep) throws -> SaveStep {
        let config = configuration
        let now = config.now()
        var resolvedGroup = ""
        if mode != .exists {
            // The add's checks, in the add's order (prepareAdd).
            if accessibility == .whenPasscodeSetThisDeviceOnly && !config.passcodeSet {
                throw EngineError(Status.authFailed, "whenPasscodeSetThisDeviceOnly needs a device passcode")
            }
            resolvedGroup = try resolveAccessGroup(group, config)
        } else {
            try Self.checkEntitlement(group, config)
        }
        return try memory.withTable(key.itemClass) { table, lockState in
            if mode != .exists {
                guard accessibility.isAvailable(in: lockState) else {
                    throw EngineError.interactionNotAllowed("the keychain is locked and the item's accessibility is '\(accessibility.rawValue)'")
                }
                var values = ContiguousArray<(AttributeID, AttributeValue)>(key.values)
                values.append((Self.groupID, .string(resolvedGroup)))
                values.append((Self.syncID, .bool(sync)))
                values.append((Self.accessibleID, .string(accessibility.rawValue)))
                values.append((Self.creationID, .date(now)))
                values.append((Self.modificationID, .date(now)))
                if let label { values.append((Self.labelID, .string(label))) }
                if let comment { values.append((Self.commentID, .string(comment))) }
                values.sort { $0.0 < $1.0 }
                // The table's UNIQUE check says whether the item exists (as the storage's insert does for add).
                if try table.insertUnlessTaken(MemoryStorage.Row(values: values, secret: secret, accessControl: nil)) != nil {
                    return .added
                }
                if mode == .added { return .exists }
            }
            // The update's targets, the item existing: the rows matching the identity query, which names the group
            // only when the caller did.
            let targets = Self.matchingRows(table, key, group: group, sync: sync, accessGroups: config.accessGroups)
            guard !targets.isEmpty else { throw EngineError.itemNotFound }
            if try Self.needsAuthentication(targets, in: table, lockState, config) { return .needsAuthentication }
            // The update's own checks on the changed items (updated(_:with:now:)).
            guard accessibility.isAvailable(in: lockState) else {
                throw EngineError.interactionNotAllowed("the new accessibility is not available while the keychain is locked")
            }
            for id in targets {
                table.rows.modify(id) { row in
                    if row.accessible != nil { row.accessible = accessibility } else { row.set(Self.accessibleID, .string(accessibility.rawValue)) }
                    if row.accessControl != nil { row.accessControl!.accessibility = accessibility }
                    if let label { row.set(Self.labelID, .string(label)) }
                    if let comment { row.set(Self.commentID, .string(comment)) }
                    row.secret = secret
                    if !row.modified.isNaN { row.modified = now.timeIntervalSinceReferenceDate } else { row.set(Self.modificationID, .date(now)) }
                }
            }
            return .updated
        }
    }

    // MARK: - The SecItem functions' compiled path

    /// `add` of a generic item whose attributes are `key` (+ group, sync), `v_Data` and optionally `kSecAttrAccessible`,
    /// without return keys: ``add(_:)``'s rules and errors, without its dictionaries.
    ///
    /// - Parameter accessibility: `kSecAttrAccessible`; nil for the configuration's default.
    /// - Returns: `.done`, or `.unsupported` (a storage other than ``MemoryStorage``, or hooks installed): nothing was
    ///   changed; run ``add(_:)``.
    /// - Throws: ``EngineError`` with `errSecDuplicateItem`, `errSecAuthFailed` (no passcode for `akpu`),
    ///   `errSecMissingEntitlement`, `errSecInteractionNotAllowed`.
    package func compiledAdd(_ secret: Data, for key: CompiledItemKey, accessGroup group: String?, synchronizable sync: Bool,
                             accessibility: Accessibility?) throws -> CompiledOutcome<Void> {
        guard let memory = storage as? MemoryStorage, hooks.current.isEmpty else { return .unsupported }
        let accessibility = accessibility ?? configuration.defaultAccessibility
        switch try saveStep(memory, secret, key, group, sync, accessibility, nil, nil, mode: .added) {
        case .added: return .done(())
        case .exists: throw EngineError.duplicateItem("an item with the same primary key exists")
        case .updated, .needsAuthentication: return .unsupported
        }
    }

    /// `update` of the items matching `key` (+ `group`, or the entitled groups) + `sync` with a new secret (changes:
    /// `v_Data` alone): ``update(_:with:)``'s rules and errors, without its dictionaries.
    ///
    /// - Returns: `.done`, or `.unsupported` (a storage other than ``MemoryStorage``, hooks installed, or a target whose
    ///   secret needs an authentication to change): nothing was changed; run ``update(_:with:)``.
    /// - Throws: ``EngineError`` with `errSecItemNotFound`, `errSecInteractionNotAllowed`, `errSecMissingEntitlement`.
    package func compiledUpdate(_ secret: Data, for key: CompiledItemKey, accessGroup group: String?,
                                synchronizable sync: Bool) throws -> CompiledOutcome<Void> {
        guard let memory = storage as? MemoryStorage, hooks.current.isEmpty else { return .unsupported }
        let config = configuration
        try Self.checkEntitlement(group, config)
        return try memory.withTable(key.itemClass) { table, lockState in
            let targets = Self.matchingRows(table, key, group: group, sync: sync, accessGroups: config.accessGroups)
            guard !targets.isEmpty else { throw EngineError.itemNotFound }
            // Every check before any change, as the update's transaction leaves nothing changed when one fails.
            if try Self.needsAuthentication(targets, in: table, lockState, config) { return .unsupported }
            let now = config.now()
            for id in targets {
                table.rows.modify(id) { row in
                    row.secret = secret
                    if !row.modified.isNaN { row.modified = now.timeIntervalSinceReferenceDate } else { row.set(Self.modificationID, .date(now)) }
                }
            }
            return .done(())
        }
    }

    /// `delete` of the items matching `key` (+ `group`, or the entitled groups) + `sync`: ``delete(_:)``'s rules and
    /// errors, without its dictionaries.
    ///
    /// - Returns: `.done`, or `.unsupported` (a storage other than ``MemoryStorage``, or hooks installed): nothing was
    ///   deleted; run ``delete(_:)``.
    /// - Throws: ``EngineError`` with `errSecItemNotFound`, `errSecInteractionNotAllowed`, `errSecMissingEntitlement`.
    package func compiledDelete(_ key: CompiledItemKey, accessGroup group: String?, synchronizable sync: Bool) throws -> CompiledOutcome<Void> {
        guard let memory = storage as? MemoryStorage, hooks.current.isEmpty else { return .unsupported }
        let config = configuration
        try Self.checkEntitlement(group, config)
        try memory.withTable(key.itemClass) { table, lockState in
            let targets = Self.matchingRows(table, key, group: group, sync: sync, accessGroups: config.accessGroups)
            guard !targets.isEmpty else { throw EngineError.itemNotFound }
            for id in targets where !table.row(id)!.accessibility.isAvailable(in: lockState) {
                throw EngineError.interactionNotAllowed("a matching item is not available while the keychain is \(lockState.rawValue)")
            }
            for id in targets { _ = table.remove(id) }
        }
        return .done(())
    }
}
