import Foundation

// MARK: - What an importer produces

/// The typed item an imported secret becomes: a ``GenericPassword`` or an ``InternetPassword``.
public enum ImportTarget: Sendable, Hashable, CustomStringConvertible {
    /// A generic password (service + account).
    case generic(GenericPassword)
    /// An internet password (server + account + protocol, port, path…).
    case internet(InternetPassword)

    /// `genp` or `inet`.
    public var itemClass: ItemClass {
        switch self {
        case .generic: .genericPassword
        case .internet: .internetPassword
        }
    }

    /// The service (generic) or the server (internet): what the item is for.
    public var serviceOrServer: String {
        switch self {
        case .generic(let item): item.service
        case .internet(let item): item.server
        }
    }

    /// The typed item, whichever class it is (what ``Keychain``'s generic calls take).
    public var keychainItem: any KeychainItem {
        switch self {
        case .generic(let item): item
        case .internet(let item): item
        }
    }

    /// The account.
    public var account: String { keychainItem.account }

    /// The item's description: names only, never a secret.
    public var description: String { keychainItem.description }
}

/// One secret an importer found: the typed item it becomes, its secret, and what is known about it.
///
/// - Important: ``description`` names the item and where it came from; it never holds ``secret``.
public struct ImportCandidate: Sendable, CustomStringConvertible {
    /// The item to create in the target keychain.
    public var item: ImportTarget
    /// The secret.
    public var secret: Data
    /// The label (`kSecAttrLabel`), when the source has one.
    public var label: String?
    /// The comment (`kSecAttrComment`), when the source has one.
    public var comment: String?
    /// The accessibility the source used, when known; nil takes the target keychain's ``ItemOptions/accessibility``.
    public var accessibility: Accessibility?
    /// Whether the source item synchronized, when known; nil takes the target keychain's ``ItemOptions/synchronizable``.
    public var synchronizable: Bool?
    /// Where the candidate came from, for reports and errors: `"passwords.csv line 4"`, `"pass entry web/github"`,
    /// `"keychain-swift key token"`. Never a secret.
    public var origin: String
    /// Things about the source entry that were not imported (a note, extra lines, a TOTP seed), by name only.
    public var notes: [String]
    /// The legacy item the candidate was read from, when the import MOVES it (the other libraries' layouts): the
    /// exact SecItem query that identifies it. After the target holds the same secret, the legacy item is deleted
    /// with this query (unless ``ImportOptions/keepOriginals``).
    public var legacyItem: KeychainQuery?

    /// Describes a candidate.
    public init(item: ImportTarget, secret: Data, label: String? = nil, comment: String? = nil,
                accessibility: Accessibility? = nil, synchronizable: Bool? = nil, origin: String,
                notes: [String] = [], legacyItem: KeychainQuery? = nil) {
        self.item = item
        self.secret = secret
        self.label = label
        self.comment = comment
        self.accessibility = accessibility
        self.synchronizable = synchronizable
        self.origin = origin
        self.notes = notes
        self.legacyItem = legacyItem
    }

    /// `<item> from <origin>`: names only.
    public var description: String { "\(item) from \(origin)" }
}

/// A source entry that does not become an item.
public struct ImportProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why the entry is not imported.
    public enum Kind: Sendable, Hashable {
        /// The entry is broken (an empty service, a bad port, a pass entry gpg cannot decrypt, a duplicate of an
        /// earlier entry). An import aborts before writing anything when there is one, unless
        /// ``ImportOptions/skipInvalid`` is set.
        case invalid
        /// The entry is valid in its source but Keystone does not import it (a SwiftKeychainWrapper number archived
        /// with NSKeyedArchiver, a Bitwarden card, an item behind an access control). Always skipped and reported;
        /// a legacy item is left where it is.
        case unsupported
    }

    /// Invalid or unsupported.
    public var kind: Kind
    /// Which entry: file and line, pass entry, library key. Never a secret.
    public var origin: String
    /// What is wrong, and what to do. Never a secret.
    public var reason: String

    /// Describes a problem.
    public init(_ kind: Kind, origin: String, reason: String) {
        self.kind = kind
        self.origin = origin
        self.reason = reason
    }

    /// `origin: reason`.
    public var description: String { "\(origin): \(reason)" }
}

/// What a source holds: the candidates, and the entries that do not become items.
public struct ImportBatch: Sendable {
    /// The items to import, in source order.
    public var candidates: [ImportCandidate]
    /// The entries that are not imported.
    public var problems: [ImportProblem]

    /// A batch.
    public init(candidates: [ImportCandidate] = [], problems: [ImportProblem] = []) {
        self.candidates = candidates
        self.problems = problems
    }
}

/// A place secrets are imported from: a file export, a password store, another library's keychain layout.
///
/// ``read()`` only reads: it never changes the source. Moving (deleting a legacy item after the copy) is done by
/// ``Keychain/importItems(from:options:)`` through ``ImportCandidate/legacyItem``.
public protocol ImportSource {
    /// A short name for reports (`"csv"`, `"pass"`, `"keychain-swift"`).
    var name: String { get }
    /// Reads every entry.
    ///
    /// - Throws: ``KeychainError`` when the source as a whole cannot be read: ``KeychainError/Code/decodingFailed``
    ///   for a malformed file (naming the file and line), a keychain status for a keychain source
    ///   (`errSecInteractionNotAllowed` when it is locked). Problems with single entries are returned in
    ///   ``ImportBatch/problems`` instead.
    func read() throws -> ImportBatch
}

// MARK: - Applying

/// How ``Keychain/importItems(from:options:)`` treats existing items, invalid entries and originals.
public struct ImportOptions: Sendable, Hashable {
    /// Update an existing item whose secret differs, in place (`SecItemUpdate`, never delete-then-add). Default
    /// false: such an item is left untouched and reported as a conflict.
    public var replace: Bool
    /// Only plan: report what would happen and change nothing (neither the target nor the source). Default false.
    public var dryRun: Bool
    /// Import the valid entries when some are invalid. Default false: any invalid entry aborts the import before
    /// anything is written.
    public var skipInvalid: Bool
    /// Keep the legacy items of a move (the other libraries' layouts) after copying them. Default false: each is
    /// deleted once the target reads back the same secret.
    public var keepOriginals: Bool

    /// Options; every default is the careful one.
    public init(replace: Bool = false, dryRun: Bool = false, skipInvalid: Bool = false, keepOriginals: Bool = false) {
        self.replace = replace
        self.dryRun = dryRun
        self.skipInvalid = skipInvalid
        self.keepOriginals = keepOriginals
    }
}

/// What an import did (or, in a dry run, would do) with one candidate.
public enum ImportAction: String, Sendable, Hashable, CaseIterable {
    /// The item did not exist: added.
    case add
    /// The item existed with the same secret: nothing written.
    case unchanged
    /// The item existed with another secret (or one that cannot be compared without a prompt): left untouched.
    case conflict
    /// The item existed with another secret and ``ImportOptions/replace`` was set: updated in place.
    case replace
}

/// One line of an import report: the item, what happened, where it came from. Never a secret.
public struct ImportResult: Sendable, Hashable, CustomStringConvertible {
    /// The target item.
    public var item: ImportTarget
    /// What happened (or would happen).
    public var action: ImportAction
    /// Where the secret came from.
    public var origin: String
    /// Whether the legacy item was deleted after the copy (or, in a dry run, would be).
    public var movedOriginal: Bool
    /// What the source entry had that was not imported, by name.
    public var notes: [String]

    /// `add genp service="…" account="…" (from …)`.
    public var description: String { "\(action.rawValue) \(item) (from \(origin))" }
}

/// The outcome of an import: one result per candidate, and the entries not imported.
public struct ImportReport: Sendable, CustomStringConvertible {
    /// One per candidate, in source order.
    public var results: [ImportResult]
    /// The entries not imported (invalid ones only when ``ImportOptions/skipInvalid`` was set).
    public var problems: [ImportProblem]
    /// Whether nothing was written.
    public var dryRun: Bool

    /// How many results have `action`.
    public func count(_ action: ImportAction) -> Int { results.filter { $0.action == action }.count }

    /// `3 added, 1 unchanged, 1 conflict, 0 replaced, 2 not imported` (with `(dry run)` when nothing was written).
    public var summary: String {
        let text = "\(count(.add)) added, \(count(.unchanged)) unchanged, \(count(.conflict)) conflict\(count(.conflict) == 1 ? "" : "s"), "
            + "\(count(.replace)) replaced, \(problems.count) not imported"
        return dryRun ? text + " (dry run: nothing was changed)" : text
    }

    /// One line per result and problem, then the summary. Never a secret.
    public var description: String {
        (results.map(\.description) + problems.map { "skip \($0)" } + [summary]).joined(separator: "\n")
    }
}

extension Keychain {
    /// Imports every entry of `source` into this keychain: adds new items, leaves existing ones untouched unless
    /// ``ImportOptions/replace`` is set, and moves legacy items (deleting each only once the target reads back the
    /// same secret).
    ///
    /// Everything is validated first: an invalid entry aborts before anything is written, unless
    /// ``ImportOptions/skipInvalid`` is set. Then each candidate is planned (`add`, `unchanged`, `conflict`,
    /// `replace`) by reading the existing item's attributes and, when it exists, its secret (compared in memory,
    /// never shown). An existing item with an access control is not read (that would prompt): it is a conflict, or
    /// replaced with ``ImportOptions/replace``. With ``ImportOptions/dryRun`` the plan is returned and nothing changes.
    ///
    /// ```swift
    /// let source = try CSVImportSource(contentsOf: url)
    /// let report = try keychain.importItems(from: source, options: ImportOptions(dryRun: true))
    /// print(report)   // one line per item, names only
    /// ```
    ///
    /// - Returns: one result per candidate and the entries not imported.
    /// - Throws: ``KeychainError/Code/invalidItem`` naming the first invalid entry (and how many there are) when
    ///   ``ImportOptions/skipInvalid`` is not set: nothing was written. Else what `source.read()` throws, and keychain
    ///   statuses: `errSecInteractionNotAllowed` (locked: the existing item is never taken as absent; items written
    ///   before it stay, and a rerun finishes the job).
    /// - Important: The source's secrets stay in memory for the import's duration. Reports, errors and
    ///   descriptions name items only.
    public func importItems(from source: some ImportSource, options: ImportOptions = ImportOptions()) throws -> ImportReport {
        try importItems(try source.read(), options: options)
    }

    /// Imports the candidates of `batch`: see ``importItems(from:options:)``.
    ///
    /// - Throws: as ``importItems(from:options:)``.
    public func importItems(_ batch: ImportBatch, options: ImportOptions = ImportOptions()) throws -> ImportReport {
        var problems = batch.problems
        // Decision: two candidates for the same target item in one source are ambiguous (which secret wins?): the
        // later one is invalid, naming the earlier.
        var seen: [ImportTarget: String] = [:]
        var candidates: [ImportCandidate] = []
        for candidate in batch.candidates {
            if let first = seen[candidate.item] {
                problems.append(ImportProblem(.invalid, origin: candidate.origin, reason: "the same item as \(first) (\(candidate.item))"))
                continue
            }
            seen[candidate.item] = candidate.origin
            candidates.append(candidate)
        }
        let invalid = problems.filter { $0.kind == .invalid }
        if let first = invalid.first, !options.skipInvalid {
            throw KeychainError(code: .invalidItem, reason: "\(invalid.count) invalid entr\(invalid.count == 1 ? "y" : "ies"), nothing was imported; "
                                + "the first: \(first). Fix the source, or skip invalid entries")
        }

        var results: [ImportResult] = []
        for candidate in candidates {
            let target = targetKeychain(for: candidate)
            let action = try target.plannedAction(for: candidate, replace: options.replace)
            var moved = false
            if !options.dryRun {
                try target.write(candidate, action: action)
            }
            if let legacy = candidate.legacyItem, !options.keepOriginals, action != .conflict,
               !Self.isSameItem(legacy, as: candidate, in: target) {
                // A move: delete the legacy item only once the target holds the same secret (never zero copies).
                if !options.dryRun {
                    guard try target.secret(of: candidate.item) == candidate.secret else {
                        throw KeychainError(code: .unexpectedResult, reason: "\(candidate.item) did not read back equal after the import; the legacy item (\(candidate.origin)) was kept")
                    }
                    _ = try reportsExistence { try store.delete(legacy) }
                }
                moved = true
            }
            results.append(ImportResult(item: candidate.item, action: action, origin: candidate.origin, movedOriginal: moved, notes: candidate.notes))
        }
        return ImportReport(results: results, problems: options.skipInvalid ? problems : problems.filter { $0.kind != .invalid }, dryRun: options.dryRun)
    }

    /// This keychain with the candidate's accessibility, synchronizable, label and comment where it has them.
    func targetKeychain(for candidate: ImportCandidate) -> Keychain {
        var target = self
        if let accessibility = candidate.accessibility { target.options.accessibility = accessibility }
        if let synchronizable = candidate.synchronizable { target.options.synchronizable = synchronizable }
        if let label = candidate.label { target.options.label = label }
        if let comment = candidate.comment { target.options.comment = comment }
        // The item names its own access group (or none: the keychain's default).
        return target
    }

    /// add / unchanged / conflict / replace for `candidate`, reading the existing item without prompting.
    func plannedAction(for candidate: ImportCandidate, replace: Bool) throws -> ImportAction {
        // A locked keychain throws here (errSecInteractionNotAllowed): never taken as "absent".
        guard let existing = try attributes(of: candidate.item) else { return .add }
        // Decision: an access-controlled item is never read to compare (that would show a prompt per item): it
        // counts as different.
        if !existing.hasAccessControl, let secret = try secret(of: candidate.item), Self.equal(secret, candidate.secret) {
            return .unchanged
        }
        return replace ? .replace : .conflict
    }

    /// Writes `candidate` as `action` says: add (a plain add: an item that appeared meanwhile is a duplicate error,
    /// never overwritten), or update in place.
    func write(_ candidate: ImportCandidate, action: ImportAction) throws {
        let (add, query, changes) = saveQueries(candidate.secret, for: candidate.item.keychainItem, options)
        switch action {
        case .add: try run { _ = try store.add(add) }
        case .replace: try run { try store.update(query, with: changes) }
        case .unchanged, .conflict: break
        }
    }

    func attributes(of item: ImportTarget) throws -> ItemAttributes? { try attributes(for: item.keychainItem) }

    func secret(of item: ImportTarget) throws -> Data? { try data(for: item.keychainItem) }

    /// Whether the legacy item is the target item itself (same class and primary key): then there is nothing to
    /// move, and deleting it would delete the import.
    static func isSameItem(_ legacy: KeychainQuery, as candidate: ImportCandidate, in target: Keychain) -> Bool {
        let identity = target.identity(of: candidate.item.keychainItem, target.options)
        guard legacy[Key.class]?.stringValue == identity[Key.class]?.stringValue else { return false }
        let keys = [Key.service, Key.account, Key.server, Key.protocol, Key.authenticationType, Key.path, Key.securityDomain]
        for key in keys where (legacy[key]?.textValue ?? "") != (identity[key]?.textValue ?? "") { return false }
        if candidate.item.itemClass == .internetPassword, (legacy[Key.port]?.integerValue ?? 0) != (identity[Key.port]?.integerValue ?? 0) { return false }
        // An access group missing on either side may be the keychain's default group: counted as the same (keeping a
        // legacy item is safe, deleting the target is not).
        if let a = legacy[Key.accessGroup]?.stringValue, let b = identity[Key.accessGroup]?.stringValue, a != b { return false }
        return (legacy[Key.synchronizable]?.boolValue ?? false) == (identity[Key.synchronizable]?.boolValue ?? false)
    }

    /// Compares two secrets without an early exit on the first differing byte.
    static func equal(_ a: Data, _ b: Data) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for (x, y) in zip(a, b) { difference |= x ^ y }
        return difference == 0
    }
}
