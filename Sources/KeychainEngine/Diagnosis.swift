/// How a `keystone doctor` finding weighs, for every storage's diagnosis.
public enum DiagnosisSeverity: String, Sendable, Hashable, Comparable {
    /// The check passed.
    case ok
    /// Worth knowing; nothing to do.
    case note
    /// Works, but something should be changed.
    case warning
    /// The storage cannot be used as it is.
    case problem
    private var rank: Int { switch self { case .ok: 0; case .note: 1; case .warning: 2; case .problem: 3 } }
    /// Ordered from ``ok`` to ``problem``.
    public static func < (a: DiagnosisSeverity, b: DiagnosisSeverity) -> Bool { a.rank < b.rank }
}

/// One check of a storage's diagnosis: its outcome and, for a problem, one sentence a user can act on.
public struct DiagnosisFinding: Sendable, Hashable, CustomStringConvertible {
    /// How the finding weighs.
    public let severity: DiagnosisSeverity
    /// The check's name.
    public let check: String
    /// What was found, in words (names, counts, modes; never an item's contents).
    public let detail: String
    /// What to do about it, when something should be done.
    public let fix: String?
    public var description: String { "\(severity.rawValue): \(check): \(detail)" + (fix.map { " — fix: \($0)" } ?? "") }

    /// A finding.
    public init(severity: DiagnosisSeverity, check: String, detail: String, fix: String? = nil) {
        self.severity = severity
        self.check = check
        self.detail = detail
        self.fix = fix
    }
}
