import Foundation
import Keystone

/// Where `Keychain.reprotect(_:to:)` and `Keychain.reprotectAll(service:accessGroup:to:)` move items: another
/// accessibility, another access group, or both. A nil field is left as each item has it.
public struct ReprotectionTarget: Sendable, Hashable, CustomStringConvertible {
    /// The new accessibility (`kSecAttrAccessible`); nil keeps each item's. An item with an access control keeps
    /// its flags and gets this as its protection class.
    public var accessibility: Accessibility?
    /// The new access group (`kSecAttrAccessGroup`); nil keeps each item's.
    ///
    /// - Important: The app must be entitled to it (`keychain-access-groups`), else nothing changes and the call
    ///   fails with `errSecMissingEntitlement` (-34018).
    public var accessGroup: String?

    /// A target; give at least one of the two.
    public init(accessibility: Accessibility? = nil, accessGroup: String? = nil) {
        self.accessibility = accessibility
        self.accessGroup = accessGroup
    }

    /// `accessibility=ck group="…"`.
    public var description: String {
        var parts: [String] = []
        if let accessibility { parts.append("accessibility=\(accessibility.rawValue)") }
        if let accessGroup { parts.append("group=\"\(accessGroup)\"") }
        return parts.isEmpty ? "(nothing)" : parts.joined(separator: " ")
    }

    func validate() throws(KeychainError) {
        guard accessibility != nil || accessGroup != nil else {
            throw KeychainError(code: .invalidItem, reason: "a re-protection target needs an accessibility, an access group, or both")
        }
        if let accessGroup, accessGroup.isEmpty {
            throw KeychainError(code: .invalidItem, reason: "the target access group must not be empty")
        }
    }
}

/// What a re-protection did, item by item: names and attributes only, never a secret.
public struct ReprotectionReport: Sendable, CustomStringConvertible {
    /// An item left as it was, and why.
    public struct Skipped: Sendable, CustomStringConvertible {
        /// The item (class, service or server, account, group).
        public let item: String
        /// Why: `errSecInteractionNotAllowed` (-25308, not available in the current lock state: try again after
        /// the unlock), `errSecDuplicateItem` (-25299, the target group already holds an item with its primary
        /// key), `KeychainError.invalidItem` (a synchronizable item would stop synchronizing).
        public let reason: KeychainError

        /// `item: reason`.
        public var description: String { "\(item): \(reason)" }
    }

    /// The items moved, with their attributes read back after the move.
    public internal(set) var moved: [ItemAttributes] = []
    /// The items that already had the target protection (nothing written).
    public internal(set) var alreadyProtected: [ItemAttributes] = []
    /// The items left unchanged, with the reason.
    public internal(set) var skipped: [Skipped] = []
    /// The listed items that do not exist (`Keychain.reprotect(_:to:)` only).
    public internal(set) var missing: [String] = []
    /// The protection classes whose items could not even be listed (not available in the current lock state):
    /// items of these classes may exist and were not moved. Run again after the unlock.
    public internal(set) var unreachable: [Accessibility] = []

    /// Whether every item was reached: nothing skipped, no class unreachable.
    public var isComplete: Bool { skipped.isEmpty && unreachable.isEmpty }

    /// One line per item, names only.
    public var description: String {
        var lines = ["re-protection: \(moved.count) moved, \(alreadyProtected.count) already protected, \(skipped.count) skipped, "
                     + "\(missing.count) missing" + (unreachable.isEmpty ? "" : ", unreachable classes \(unreachable.map(\.rawValue))")]
        lines += moved.map { "moved \(Keychain.describe($0))" }
        lines += skipped.map { "skipped \($0)" }
        lines += missing.map { "missing \($0)" }
        return lines.joined(separator: "\n")
    }
}

extension Keychain {
    /// Re-protects `items` in place: each moves to the target's accessibility and/or access group with one
    /// `SecItemUpdate` (atomic: the item is in its old protection or its new one, never gone), then its attributes
    /// are read back to verify.
    ///
    /// Each item is found by its identity (in `ItemOptions.accessGroup` or every entitled group when it names
    /// none; synchronizable per `ItemOptions.synchronizable`); every copy found (one per access group) is moved.
    ///
    /// - An item not available now (locked, -25308) is left as it is and listed in
    ///   ``ReprotectionReport/skipped``.
    /// - A synchronizable item is never given a `ThisDeviceOnly` accessibility (it would quietly stop
    ///   synchronizing): skipped with `KeychainError.invalidItem`.
    /// - An item whose primary key the target group already holds is skipped (`errSecDuplicateItem`); nothing is
    ///   overwritten.
    /// - A listed item that does not exist is in ``ReprotectionReport/missing``.
    ///
    /// - Returns: what happened to each item.
    /// - Throws: `KeychainError.invalidItem` for an empty target; `errSecMissingEntitlement` (-34018) when the app
    ///   is not entitled to the target group (checked first: nothing changed); `KeychainError.unexpectedResult`
    ///   when an item does not read back with the target protection; other keychain errors as they come (the
    ///   items before it were moved, the report is lost: run again, it is idempotent).
    /// - Important: Access-controlled items keep their flags: only the protection class changes.
    public func reprotect(_ items: [any KeychainItem], to target: ReprotectionTarget) throws -> ReprotectionReport {
        try target.validate()
        try checkEntitled(to: target)
        var report = ReprotectionReport()
        for item in items {
            let query = identity(of: item)
            let (rows, unreachable) = try reachableRows(query)
            if rows.isEmpty && unreachable.isEmpty {
                report.missing.append(item.description)
                continue
            }
            for row in rows { try reprotectRow(row, to: target, report: &report) }
            if !unreachable.isEmpty {
                // A copy of the item (another access group) may be in a class not available now.
                report.skipped.append(.init(item: item.description, reason: KeychainError(
                    status: Status.interactionNotAllowed,
                    reason: "not available in the current lock state (classes \(unreachable.map(\.rawValue))): try again after the unlock")))
            }
        }
        return report
    }

    /// Re-protects every generic password of `service` in place, as `reprotect(_:to:)` does for listed items.
    ///
    /// The items are listed by attributes only (never a prompt), synchronizable or not, in `accessGroup` (or
    /// `ItemOptions.accessGroup`; every entitled group when both are nil). When some of them are not available
    /// in the current lock state, the listing goes class by class (`kSecAttrAccessible` in the query) so the
    /// available ones are still moved; classes that cannot be listed now are in
    /// ``ReprotectionReport/unreachable``.
    ///
    /// - Returns: what happened to each item; ``ReprotectionReport/isComplete`` is false when anything was left.
    /// - Throws: `KeychainError.invalidItem` for an empty service or target; as `reprotect(_:to:)`.
    /// - Important: A keychain whose store does not filter on `kSecAttrAccessible` in searches (Keystone's engine
    ///   before it does) lists nothing while any item of the service is locked: everything is then reported
    ///   unreachable and nothing changes.
    public func reprotectAll(service: String, accessGroup: String? = nil, to target: ReprotectionTarget) throws -> ReprotectionReport {
        try target.validate()
        let query = try serviceQuery(service, accessGroup: accessGroup)
        try checkEntitled(to: target)
        var report = ReprotectionReport()
        let (rows, unreachable) = try reachableRows(query)
        report.unreachable = unreachable
        for row in rows { try reprotectRow(row, to: target, report: &report) }
        return report
    }

    // MARK: - Re-protection internals

    /// Fails with `errSecMissingEntitlement` when the app may not use the target group; changes nothing.
    ///
    /// An attributes-only search in that group: the keychain refuses it for a group the app is not entitled to.
    func checkEntitled(to target: ReprotectionTarget) throws(KeychainError) {
        guard let group = target.accessGroup else { return }
        var probe: KeychainQuery = [
            Key.class: .string(ItemClass.genericPassword.rawValue),
            Key.accessGroup: .string(group),
            Key.synchronizable: .string(Key.synchronizableAny),
            Key.returnAttributes: .bool(true),
            Key.matchLimit: .string(Key.matchLimitOne),
        ]
        Self.addPlatformKeys(&probe)
        do {
            _ = try store.copyMatching(probe)
        } catch let error where KeychainError.itemNotFound ~= error || KeychainError.interactionNotAllowed ~= error {
            return  // entitled: the group is empty, or its items are locked
        } catch {
            let error = KeychainError(converting: error)
            throw KeychainError(code: error.code, reason: "the target access group \"\(group)\" cannot be used (\(error.reason)); nothing was changed")
        }
    }

    /// The attribute dictionaries of the items matching `query` (limit All, attributes only); empty when none.
    func attributeRows(_ query: KeychainQuery) throws(KeychainError) -> [KeychainQuery] {
        try Self.attributeRows(in: store, query)
    }

    /// The items matching `query` that can be listed now, and the protection classes that cannot.
    ///
    /// A search fails with -25308 when any match is locked: then each protection class is searched on its own
    /// (`kSecAttrAccessible` in the query), and the rows are checked to have that class (a store that ignores the
    /// key would otherwise list a row twice).
    func reachableRows(_ query: KeychainQuery) throws(KeychainError) -> (rows: [KeychainQuery], unreachable: [Accessibility]) {
        do {
            return (try attributeRows(query), [])
        } catch let error where error.isTransient {
            // Some match is locked: list class by class.
        }
        var rows: [KeychainQuery] = []
        var unreachable: [Accessibility] = []
        for accessibility in Accessibility.allCases {
            var perClass = query
            perClass[Key.accessible] = .string(accessibility.rawValue)
            do {
                rows += try attributeRows(perClass).filter { $0[Key.accessible]?.stringValue == accessibility.rawValue }
            } catch let error where error.isTransient {
                unreachable.append(accessibility)
            }
        }
        return (rows, unreachable)
    }

    /// The query matching exactly the item of `row`: class, every primary-key attribute, access group, synchronizable.
    func exactQuery(_ row: KeychainQuery) throws(KeychainError) -> KeychainQuery {
        guard let itemClass = row[Key.class]?.stringValue.flatMap(ItemClass.init(rawValue:)),
              itemClass == .genericPassword || itemClass == .internetPassword else {
            throw KeychainError(code: .unexpectedResult, reason: "a listed item is not a password")
        }
        // The class's primary key (ClassSchema), a missing attribute as the empty value the keychain stored for it;
        // the access group only when the row names one.
        var query = ClassSchema.of(itemClass).primaryKeyQuery(of: row)
        query[Key.class] = .string(itemClass.rawValue)
        query[Key.accessGroup] = row[Key.accessGroup]
        query[Key.synchronizable] = .bool(row[Key.synchronizable]?.boolValue ?? false)
        Self.addPlatformKeys(&query)
        return query
    }

    /// `genp service="…" account="…" group="…"`: names only.
    static func describe(_ attributes: ItemAttributes) -> String {
        var text = attributes.itemClass == .internetPassword
            ? "inet server=\"\(attributes.server ?? "")\"" : "genp service=\"\(attributes.service ?? "")\""
        text += " account=\"\(attributes.account)\""
        if let group = attributes.accessGroup { text += " group=\"\(group)\"" }
        if attributes.synchronizable { text += " synchronizable" }
        return text
    }

    /// Moves one listed item in place and verifies it; records the outcome in `report`.
    func reprotectRow(_ row: KeychainQuery, to target: ReprotectionTarget, report: inout ReprotectionReport) throws(KeychainError) {
        let before = ItemAttributes(row)
        let name = Self.describe(before)
        let accessibility = target.accessibility ?? before.accessibility
        let group = target.accessGroup ?? before.accessGroup
        if before.synchronizable, let wanted = target.accessibility, wanted.isThisDeviceOnly {
            // The rule of migrateAll: a synchronizable item would quietly stop leaving the device.
            report.skipped.append(.init(item: name, reason: KeychainError(
                code: .invalidItem, reason: "a synchronizable item is not given the ThisDeviceOnly accessibility '\(wanted.rawValue)'")))
            return
        }
        if before.accessibility == accessibility && before.accessGroup == group {
            report.alreadyProtected.append(before)
            return
        }
        let query = try exactQuery(row)
        var changes: KeychainQuery = [:]
        if let accessibility, accessibility != before.accessibility {
            if case .accessControl(let control)? = row[Key.accessControl], !control.flags.isEmpty {
                // Keep the flags; only the protection class changes (kSecAttrAccessible and kSecAttrAccessControl
                // are exclusive in an update).
                changes[Key.accessControl] = .accessControl(AccessControl(accessibility: accessibility, flags: control.flags))
            } else {
                changes[Key.accessible] = .string(accessibility.rawValue)
            }
        }
        if let group, group != before.accessGroup { changes[Key.accessGroup] = .string(group) }
        do {
            // One SecItemUpdate: the item changes protection in place, atomically; never delete-then-add.
            try store.update(query, with: changes)
        } catch let error where KeychainError.interactionNotAllowed ~= error || KeychainError.duplicateItem ~= error {
            report.skipped.append(.init(item: name, reason: KeychainError(converting: error)))
            return
        } catch let error where KeychainError.itemNotFound ~= error {
            report.missing.append(name)  // deleted since it was listed
            return
        } catch {
            let error = KeychainError(converting: error)
            throw KeychainError(code: error.code, reason: "re-protecting \(name): \(error.reason)")
        }
        // Verify: read the attributes back where the item now is.
        var readBack = query
        if let group { readBack[Key.accessGroup] = .string(group) }
        guard let after = try attributeRows(readBack).first.map(ItemAttributes.init),
              after.accessibility == accessibility, after.accessGroup == group else {
            throw KeychainError(code: .unexpectedResult, reason: "re-protecting \(name): the item did not read back with \(target)")
        }
        report.moved.append(after)
    }
}
