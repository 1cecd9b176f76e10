import Foundation
import Keystone

// MARK: - What an importer produces

/// The typed item an imported secret becomes: a `GenericPassword` or an `InternetPassword`.
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

    /// The typed item, whichever class it is (what `Keychain`'s generic calls take).
    public var keychainItem: any KeychainItem {
        switch self {
        case .generic(let item): item
        case .internet(let item): item
        }
    }

    /// The account.
    public var account: String { keychainItem.account }

    /// The item's description, `genp service="…" account="…"` as the item's own description but with every name
    /// escaped (``ReportText``): names only, never a secret.
    public var description: String {
        switch self {
        case .generic(let item):
            return "genp service=\(ReportText.quoted(item.service)) account=\(ReportText.quoted(item.account))"
                + (item.accessGroup.map { " group=\(ReportText.quoted($0))" } ?? "")
        case .internet(let item):
            var parts = ["inet server=\(ReportText.quoted(item.server)) account=\(ReportText.quoted(item.account))"]
            if let p = item.protocol { parts.append("protocol=\(p)") }
            if let a = item.authenticationType { parts.append("authenticationType=\(a)") }
            if let port = item.port { parts.append("port=\(port)") }
            if let path = item.path { parts.append("path=\(ReportText.quoted(path))") }
            if let domain = item.securityDomain { parts.append("securityDomain=\(ReportText.quoted(domain))") }
            if let group = item.accessGroup { parts.append("group=\(ReportText.quoted(group))") }
            return parts.joined(separator: " ")
        }
    }
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
    /// The accessibility the source used, when known; nil takes the target keychain's `ItemOptions.accessibility`.
    public var accessibility: Accessibility?
    /// Whether the source item synchronized, when known; nil takes the target keychain's `ItemOptions.synchronizable`.
    public var synchronizable: Bool?
    /// Where the candidate came from, for reports and errors: `"passwords.csv line 4"`, `"pass entry web/github"`,
    /// `"keychain-swift key \"token\""`. Display text: the names in it are escaped (``ReportText``). Never a secret.
    public var origin: String
    /// Things about the source entry that were not imported (a note, extra lines, a TOTP seed), by name only
    /// (display text, escaped).
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
        /// The entry is broken or refused (an empty service, a bad port, a pass entry gpg cannot decrypt, a duplicate
        /// of an earlier entry, a file name that is not UTF-8, a `pass` link outside the store, an entry over the
        /// ``ImportLimits``). An import aborts before writing anything when there is one, unless
        /// ``ImportOptions/skipInvalid`` is set.
        case invalid
        /// The entry is valid in its source but Keystone does not import it (a SwiftKeychainWrapper number archived
        /// with NSKeyedArchiver, a Bitwarden card, an item behind an access control). Always skipped and reported;
        /// a legacy item is left where it is.
        case unsupported
    }

    /// Invalid or unsupported.
    public var kind: Kind
    /// Which entry: file and line, pass entry, library key. Display text, names escaped (``ReportText``). Never a secret.
    public var origin: String
    /// What is wrong, and what to do. Display text, names and values escaped. Never a secret.
    public var reason: String
    /// The keychain status the problem stands for, when it is more than a malformed entry: `errSecDataTooLarge`
    /// (-25302) for an entry over one of the ``ImportLimits``. An import that aborts on this entry throws it.
    public var status: Int32?

    /// Describes a problem.
    public init(_ kind: Kind, origin: String, reason: String, status: Int32? = nil) {
        self.kind = kind
        self.origin = origin
        self.reason = reason
        self.status = status
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

/// One entry of a source, as ``ImportSource/forEachEntry(_:)`` visits it: a candidate, or a problem.
public enum ImportEntry: Sendable {
    /// An entry that becomes an item.
    case candidate(ImportCandidate)
    /// An entry that does not.
    case problem(ImportProblem)
}

/// A place secrets are imported from: a file export, a password store, another library's keychain layout.
///
/// ``read()`` only reads: it never changes the source. Moving (deleting a legacy item after the copy) is done by
/// `Keychain.importItems(from:options:)` through ``ImportCandidate/legacyItem``.
///
/// A source that can read its entries one at a time, again and again (a file), implements ``forEachEntry(_:)`` and
/// sets ``streamsEntries``: `Keychain.importItems(from:options:)` then reads it twice (validate, then apply), keeping
/// one entry in memory instead of all of them and their secrets.
public protocol ImportSource {
    /// A short name for reports (`"csv"`, `"pass"`, `"keychain-swift"`).
    var name: String { get }
    /// Reads every entry.
    ///
    /// - Throws: `KeychainError` when the source as a whole cannot be read: `KeychainError.Code.decodingFailed`
    ///   for a malformed file (naming the file and line), a keychain status for a keychain source
    ///   (`errSecInteractionNotAllowed` when it is locked). Problems with single entries are returned in
    ///   ``ImportBatch/problems`` instead.
    func read() throws -> ImportBatch
    /// Whether ``forEachEntry(_:)`` reads the source anew at each call, one entry at a time. Default false.
    var streamsEntries: Bool { get }
    /// Visits every entry in source order. The default visits what ``read()`` returns.
    ///
    /// - Throws: what ``read()`` throws, and what `body` throws.
    func forEachEntry(_ body: (ImportEntry) throws -> Void) throws
}

extension ImportSource {
    public var streamsEntries: Bool { false }

    public func forEachEntry(_ body: (ImportEntry) throws -> Void) throws {
        let batch = try read()
        for candidate in batch.candidates { try body(.candidate(candidate)) }
        for problem in batch.problems { try body(.problem(problem)) }
    }
}

// MARK: - Applying

/// How `Keychain.importItems(from:options:)` treats existing items, invalid entries and originals.
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
    /// One per candidate, in source order; empty when the results were handed to a callback instead
    /// (`Keychain.importItems(from:options:forEachResult:)`).
    public var results: [ImportResult]
    /// The entries not imported (invalid ones only when ``ImportOptions/skipInvalid`` was set).
    public var problems: [ImportProblem]
    /// Whether nothing was written.
    public var dryRun: Bool
    /// How many results were handed to a callback instead of kept, per action.
    var handedOver: [ImportAction: Int] = [:]

    /// How many results have `action` (kept or handed to a callback).
    public func count(_ action: ImportAction) -> Int { results.filter { $0.action == action }.count + handedOver[action, default: 0] }

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
