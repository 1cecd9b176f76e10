import Foundation
import Keystone

/// Size limits on what an importer reads from a file or a password store, so a hostile or broken source can neither
/// exhaust memory nor store a huge "password".
///
/// An entry over a limit is an invalid entry (``ImportProblem/Kind/invalid``) whose ``ImportProblem/status`` is
/// `errSecDataTooLarge` (-25302): the import aborts before writing anything, with a `KeychainError` of that status
/// naming the entry and the field (never its value), unless ``ImportOptions/skipInvalid`` is set. Raise a limit when a
/// real export needs it (`keystone import --max-field-size`, `--max-record-size`, `--max-entry-size`).
///
/// ```swift
/// var source = try ExportFileImportSource(contentsOf: url)
/// source.limits.maxFieldBytes = 4 << 20   // notes of up to 4 MiB
/// ```
public struct ImportLimits: Sendable, Hashable {
    /// The largest field of a CSV record or value of a JSON item, in bytes (UTF-8). Default 1 MiB.
    public var maxFieldBytes: Int
    /// The largest CSV record (a line, or several when a quoted field spans lines, with its separators and quotes),
    /// in bytes. Default 4 MiB. Reading a CSV export keeps one record in memory at a time.
    public var maxRecordBytes: Int
    /// The largest JSON export, in bytes: JSON is parsed whole. Default 64 MiB.
    public var maxDocumentBytes: Int
    /// The most a `pass` entry may decrypt to, in bytes: gpg is stopped (SIGKILL) as soon as its output passes it.
    /// Default 1 MiB.
    public var maxDecryptedBytes: Int

    /// The default limits: 1 MiB a field, 4 MiB a record, 64 MiB a JSON export, 1 MiB a decrypted `pass` entry.
    ///
    /// Decision: far above any password, note or export line seen in practice (browsers cap notes at a few
    /// kilobytes, Bitwarden at 10,000 characters; a `pass` entry is a few lines), and low enough that a hostile file
    /// costs a few megabytes of memory at most while it is refused.
    public static let `default` = ImportLimits()

    /// Limits; each default is far above any real password, note or export line.
    public init(maxFieldBytes: Int = 1 << 20, maxRecordBytes: Int = 4 << 20, maxDocumentBytes: Int = 64 << 20,
                maxDecryptedBytes: Int = 1 << 20) {
        self.maxFieldBytes = maxFieldBytes
        self.maxRecordBytes = maxRecordBytes
        self.maxDocumentBytes = maxDocumentBytes
        self.maxDecryptedBytes = maxDecryptedBytes
    }

    /// `1 MiB`, `512 KiB`, `100 bytes`: a limit for a message.
    static func size(_ bytes: Int) -> String {
        if bytes >= 1 << 20, bytes % (1 << 20) == 0 { return "\(bytes >> 20) MiB" }
        if bytes >= 1 << 10, bytes % (1 << 10) == 0 { return "\(bytes >> 10) KiB" }
        return "\(bytes) bytes"
    }
}
