import Foundation
import Keystone

/// An import that stopped midway, after writing some items: what was written, where it stopped, and what was not
/// written.
///
/// `Keychain.importItems(from:options:)` writes item by item (each add or update is its own keychain transaction),
/// so a failure midway (a full disk, a keychain locked meanwhile, a source file that changed or broke while it was
/// read) leaves the items written before it in place. This error says exactly which.
///
/// Running the same import again completes it: the items already written read back equal and are reported
/// `unchanged` (or, for a move, their legacy item is gone and they are not read again), the others are added. Items
/// that existed before the import are still never overwritten unless ``ImportOptions/replace`` is set.
///
/// - Important: Its description names items and origins only (escaped), never a secret.
public struct ImportFailure: Error, Sendable, CustomStringConvertible {
    /// An entry of the source: the item it becomes and where it came from.
    public struct Entry: Sendable, Hashable, CustomStringConvertible {
        /// The target item.
        public var item: ImportTarget
        /// Where it came from (display text, escaped).
        public var origin: String

        /// `<item> (from <origin>)`.
        public var description: String { "\(item) (from \(origin))" }
    }

    /// Why the import stopped, with the keychain's status (`errSecIO` for a full disk, `errSecInteractionNotAllowed`
    /// for a keychain locked meanwhile).
    public var error: KeychainError
    /// The entries handled before the failure, in source order (``ImportReport/results``: `add` and `replace` were
    /// written, `unchanged` and `conflict` needed nothing), and the problems found so far.
    public var report: ImportReport
    /// The entry being imported when the import stopped; nil when reading the source failed between entries.
    public var failedEntry: Entry?
    /// Whether ``failedEntry`` itself was written (the failure came after, when moving its legacy item; the legacy
    /// item was kept).
    public var failedEntryWritten: Bool
    /// The entries not written: the failed one (unless ``failedEntryWritten``) and every later one, in source order.
    public var notWritten: [Entry]
    /// True when the source could not be read to its end (it broke or changed during the import): entries after the
    /// last one listed may exist that are not in ``notWritten``.
    public var restOfSourceUnread: Bool

    /// How many results that wrote something were handed to a callback (not in ``report``).
    var writtenHandedOver = 0

    /// The `OSStatus` of ``error``.
    public var status: Int32 { error.status }

    /// The results that changed the keychain: added or replaced items (and moved legacy items). Empty when the
    /// results were handed to a callback (`Keychain.importItems(from:options:forEachResult:)`).
    public var written: [ImportResult] {
        report.results.filter { $0.action == .add || $0.action == .replace || $0.movedOriginal }
    }

    /// The failure in one paragraph: where it stopped, why, how many were and were not written, what to do.
    public var summary: String {
        let place = failedEntry.map { "at \($0)" } ?? "while reading the source"
        let count = written.count + writtenHandedOver
        var text = "the import stopped \(place): \(error.reason.isEmpty ? error.message : error.reason). "
            + "\(count) entr\(count == 1 ? "y was" : "ies were") written"
        if failedEntryWritten { text += " (the last one's legacy item was kept)" }
        text += ", \(notWritten.count) \(notWritten.count == 1 ? "was" : "were") not"
        if restOfSourceUnread { text += " (and the rest of the source was not read)" }
        return text + ". Fix the cause, then run the same import again: what was written is then reported unchanged and the rest is imported"
    }

    /// The written results (one line each), the summary, then one `not written: <item> (from <origin>)` line per entry
    /// not written.
    public var description: String {
        (written.map(\.description) + [summary] + notWritten.map { "not written: \($0)" }).joined(separator: "\n")
    }
}
