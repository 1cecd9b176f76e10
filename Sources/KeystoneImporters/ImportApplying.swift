import Crypto
import Foundation
import Keystone

// Applying an import: validation (invalid entries, duplicates), the plan per item, the writes, moves, and the report
// or the partial failure.

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
    /// Items are written one by one (each is its own keychain transaction), so an import is not all-or-nothing: when
    /// writing fails midway, the items written before stay and ``ImportFailure`` lists them, and the entries not
    /// written. Running the same import again completes it (what was written reads back `unchanged`).
    ///
    /// A source that streams its entries (``ImportSource/streamsEntries``: CSV files) is read twice, validating then
    /// applying, with one entry in memory at a time.
    ///
    /// ```swift
    /// let source = try ExportFileImportSource(contentsOf: url)
    /// let report = try keychain.importItems(from: source, options: ImportOptions(dryRun: true))
    /// print(report)   // one line per item, names only, escaped
    /// ```
    ///
    /// - Returns: one result per candidate and the entries not imported.
    /// - Throws: ``ImportFailure`` when the import stopped after writing some items (its ``ImportFailure/error`` keeps
    ///   the keychain status). `KeychainError` when nothing was written: `KeychainError.Code.invalidItem` naming
    ///   the first invalid entry (and how many there are) when ``ImportOptions/skipInvalid`` is not set,
    ///   `errSecDataTooLarge` (-25302) when that first entry is over one of the ``ImportLimits``; what
    ///   `source.read()` throws; keychain statuses such as `errSecInteractionNotAllowed` (locked: the existing item is
    ///   never taken as absent), naming the entry it stopped at.
    /// - Important: A source that does not stream (`pass`, JSON, the other libraries' layouts) keeps its secrets in
    ///   memory for the import's duration. Reports, errors and descriptions name items only, escaped.
    public func importItems(from source: some ImportSource, options: ImportOptions = ImportOptions()) throws -> ImportReport {
        try importItems(from: source, options: options, handler: nil)
    }

    /// Imports as ``importItems(from:options:)`` does, handing each result to `forEachResult` as soon as its entry is
    /// handled instead of keeping it: memory then stays flat however many entries the source has (a CSV file streams).
    ///
    /// - Returns: the report without ``ImportReport/results`` (its counts and problems are complete).
    /// - Throws: as ``importItems(from:options:)``; an ``ImportFailure``'s report has no results either: they were
    ///   handed over, so its ``ImportFailure/written`` is empty and the callback saw what was written.
    public func importItems(from source: some ImportSource, options: ImportOptions = ImportOptions(),
                            forEachResult: (ImportResult) -> Void) throws -> ImportReport {
        try withoutActuallyEscaping(forEachResult) { handler in
            try importItems(from: source, options: options, handler: handler)
        }
    }

    func importItems(from source: some ImportSource, options: ImportOptions, handler: ((ImportResult) -> Void)?) throws -> ImportReport {
        guard source.streamsEntries else { return try importItems(try source.read(), options: options, handler: handler) }
        // Pass 1: validate, keeping per item only a 16-byte digest and the ordinal of its first candidate.
        var first: [ImportValidator.Key: UInt32] = [:]
        var duplicated: Set<UInt32> = []
        var ordinal: UInt32 = 0
        var invalidCount = 0
        var firstInvalid: ImportProblem?
        var firstInvalidDuplicates: (of: UInt32, item: ImportTarget)?
        try source.forEachEntry { entry in
            switch entry {
            case .candidate(let candidate):
                defer { ordinal += 1 }
                let key = ImportValidator.key(candidate.item)
                guard let earlier = first[key] else {
                    first[key] = ordinal
                    return
                }
                duplicated.insert(earlier)
                invalidCount += 1
                if firstInvalid == nil {
                    firstInvalid = ImportProblem(.invalid, origin: candidate.origin, reason: "")
                    firstInvalidDuplicates = (earlier, candidate.item)
                }
            case .problem(let problem):
                guard problem.kind == .invalid else { return }
                invalidCount += 1
                if firstInvalid == nil { firstInvalid = problem }
            }
        }
        if var problem = firstInvalid, !options.skipInvalid {
            if let (earlier, item) = firstInvalidDuplicates {
                problem.reason = "the same item as \(try Self.origin(ofCandidate: earlier, in: source)) (\(item))"
            }
            throw Self.invalidEntries(count: invalidCount, first: problem)
        }
        // Pass 2: apply, checking each entry against pass 1 (the source may have changed since).
        var run = ImportRun(keychain: self, options: options, handler: handler)
        var firstOrigins: [UInt32: String] = [:]
        ordinal = 0
        do {
            try source.forEachEntry { entry in
                switch entry {
                case .candidate(let candidate):
                    defer { ordinal += 1 }
                    let earlier = first[ImportValidator.key(candidate.item)]
                    if earlier == ordinal {
                        if duplicated.contains(ordinal) { firstOrigins[ordinal] = candidate.origin }
                        run.apply(candidate)
                    } else if let earlier, let origin = firstOrigins[earlier] {
                        run.found(ImportProblem(.invalid, origin: candidate.origin, reason: "the same item as \(origin) (\(candidate.item))"))
                    } else {
                        run.sourceChanged(candidate)
                    }
                case .problem(let problem):
                    run.found(problem)
                }
            }
        } catch {
            run.sourceFailed(KeychainError(converting: error))
        }
        return try run.finish()
    }

    /// The origin of the candidate at `ordinal` (0-based, counting candidates only) of a streaming source.
    static func origin(ofCandidate ordinal: UInt32, in source: some ImportSource) throws -> String {
        var index: UInt32 = 0
        do {
            try source.forEachEntry { entry in
                guard case .candidate(let candidate) = entry else { return }
                if index == ordinal { throw FoundOrigin(origin: candidate.origin) }
                index += 1
            }
        } catch let found as FoundOrigin {
            return found.origin
        }
        return "an earlier entry"
    }

    /// Imports the candidates of `batch`: see ``importItems(from:options:)``.
    ///
    /// - Throws: as ``importItems(from:options:)``.
    public func importItems(_ batch: ImportBatch, options: ImportOptions = ImportOptions()) throws -> ImportReport {
        try importItems(batch, options: options, handler: nil)
    }

    func importItems(_ batch: ImportBatch, options: ImportOptions, handler: ((ImportResult) -> Void)?) throws -> ImportReport {
        var problems = batch.problems
        var validator = ImportValidator()
        var candidates: [ImportCandidate] = []
        for candidate in batch.candidates {
            if let problem = validator.check(candidate) { problems.append(problem) } else { candidates.append(candidate) }
        }
        let invalid = problems.filter { $0.kind == .invalid }
        if let first = invalid.first, !options.skipInvalid { throw Self.invalidEntries(count: invalid.count, first: first) }
        var run = ImportRun(keychain: self, options: options, handler: handler)
        for problem in problems { run.found(problem) }
        for candidate in candidates { run.apply(candidate) }
        return try run.finish()
    }

    /// The error of an import that aborts on invalid entries before writing anything.
    static func invalidEntries(count: Int, first: ImportProblem) -> KeychainError {
        let reason = "\(count) invalid entr\(count == 1 ? "y" : "ies"), nothing was imported; the first: \(first). "
            + (first.status == Status.dataTooLarge ? "Raise the limit, fix the source, or skip invalid entries" : "Fix the source, or skip invalid entries")
        if let status = first.status { return KeychainError(status: status, reason: reason) }
        return KeychainError(code: .invalidItem, reason: reason)
    }

    /// Imports one candidate: plans it, writes it, moves its legacy item. Throws with `written` telling whether the
    /// candidate's item was written before the failure.
    func importOne(_ candidate: ImportCandidate, options: ImportOptions, written: inout Bool) throws -> ImportResult {
        let target = targetKeychain(for: candidate)
        let action = try target.plannedAction(for: candidate, replace: options.replace)
        var moved = false
        if !options.dryRun {
            try target.write(candidate, action: action)
            written = action == .add || action == .replace
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
        return ImportResult(item: candidate.item, action: action, origin: candidate.origin, movedOriginal: moved, notes: candidate.notes)
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
        let (add, query, changes) = saveQueries(candidate.secret, for: candidate.item.keychainItem, options.saveOptions)
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
        let identity = target.identity(of: candidate.item.keychainItem)
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

/// Stops a visit of a source at the entry looked for.
private struct FoundOrigin: Error {
    let origin: String
}

/// Finds the candidates that name an item an earlier candidate of the same source named.
///
/// Decision: two candidates for the same target item in one source are ambiguous (which secret wins?): the later one
/// is invalid, naming the earlier. Items are told apart by a 128-bit digest of their (escaped, so injective)
/// description; a streaming source keeps only the digest and the ordinal of each item's first candidate.
struct ImportValidator {
    struct Key: Hashable {
        var high: UInt64
        var low: UInt64
    }

    private var seen: [Key: String] = [:]

    /// The duplicate problem for `candidate`, or nil when it is the first for its item.
    mutating func check(_ candidate: ImportCandidate) -> ImportProblem? {
        let key = Self.key(candidate.item)
        if let first = seen[key] {
            return ImportProblem(.invalid, origin: candidate.origin, reason: "the same item as \(first) (\(candidate.item))")
        }
        seen[key] = candidate.origin
        return nil
    }

    static func key(_ item: ImportTarget) -> Key {
        let digest = Array(SHA256.hash(data: Data(item.description.utf8)))
        func word(_ offset: Int) -> UInt64 { digest[offset..<offset + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        return Key(high: word(0), low: word(8))
    }
}

/// One import's progress: the results, the problems, and, once something failed, where and what was not written.
struct ImportRun {
    let keychain: Keychain
    let options: ImportOptions
    /// Takes each result instead of ``results`` when set.
    let handler: ((ImportResult) -> Void)?
    var results: [ImportResult] = []
    var handedOver: [ImportAction: Int] = [:]
    /// How many of the results handed over wrote something.
    var handedOverWritten = 0
    var problems: [ImportProblem] = []
    var failure: KeychainError?
    var failedEntry: ImportFailure.Entry?
    var failedEntryWritten = false
    var notWritten: [ImportFailure.Entry] = []
    var restOfSourceUnread = false

    init(keychain: Keychain, options: ImportOptions, handler: ((ImportResult) -> Void)?) {
        self.keychain = keychain
        self.options = options
        self.handler = handler
    }

    /// Imports `candidate`, unless the import already failed: then it is listed as not written.
    mutating func apply(_ candidate: ImportCandidate) {
        let entry = ImportFailure.Entry(item: candidate.item, origin: candidate.origin)
        guard failure == nil else {
            notWritten.append(entry)
            return
        }
        var written = false
        do {
            let result = try keychain.importOne(candidate, options: options, written: &written)
            if let handler {
                handler(result)
                handedOver[result.action, default: 0] += 1
                if !options.dryRun, result.action == .add || result.action == .replace || result.movedOriginal { handedOverWritten += 1 }
            } else {
                results.append(result)
            }
        } catch {
            failure = KeychainError(converting: error)
            failedEntry = entry
            failedEntryWritten = written
            if !written { notWritten.append(entry) }
        }
    }

    /// Records a problem of the source. An invalid one that validation let through (skipInvalid not set) means the
    /// source changed since it was validated: the import stops there.
    mutating func found(_ problem: ImportProblem) {
        problems.append(problem)
        if problem.kind == .invalid, !options.skipInvalid, failure == nil {
            failure = KeychainError(code: .invalidItem, reason: "the source changed while it was imported: \(problem)")
        }
    }

    /// A candidate that was not in the source when it was validated: the source changed, the import stops there.
    mutating func sourceChanged(_ candidate: ImportCandidate) {
        if failure == nil {
            failure = KeychainError(code: .invalidItem, reason: "the source changed while it was imported: \(candidate.origin) (\(candidate.item)) is not what was validated")
            failedEntry = ImportFailure.Entry(item: candidate.item, origin: candidate.origin)
        }
        notWritten.append(ImportFailure.Entry(item: candidate.item, origin: candidate.origin))
    }

    /// Reading the source failed between entries.
    mutating func sourceFailed(_ error: KeychainError) {
        if failure == nil { failure = error }
        restOfSourceUnread = true
    }

    /// The report; or, after a failure, ``ImportFailure`` when something was written, the error (naming where it
    /// stopped) when nothing was.
    func finish() throws -> ImportReport {
        var report = ImportReport(results: results, problems: options.skipInvalid ? problems : problems.filter { $0.kind != .invalid },
                                  dryRun: options.dryRun)
        report.handedOver = handedOver
        guard let failure else { return report }
        let partial = ImportFailure(error: failure, report: report, failedEntry: failedEntry, failedEntryWritten: failedEntryWritten,
                                    notWritten: notWritten, restOfSourceUnread: restOfSourceUnread, writtenHandedOver: handedOverWritten)
        // Decision: ImportFailure only when the keychain changed; when nothing was written the plain KeychainError keeps
        // `catch KeychainError.interactionNotAllowed` and the like working, and says where it stopped.
        guard !options.dryRun, !partial.written.isEmpty || handedOverWritten > 0 || failedEntryWritten else {
            // Nothing was written: the keychain error itself (same code), naming where the import stopped.
            let place = failedEntry.map { "\($0): " } ?? ""
            throw KeychainError(code: failure.code, reason: place + (failure.reason.isEmpty ? failure.message : failure.reason) + "; nothing was written")
        }
        throw partial
    }
}
