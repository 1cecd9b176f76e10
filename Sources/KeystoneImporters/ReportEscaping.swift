import Foundation
import Keystone

/// Names and values shown in an import report, an error or on a terminal, escaped as `keystone dump-keychain` quotes
/// strings: printable ASCII stays as it is; every other byte (control characters, ESC, newlines, DEL, the bytes of
/// non-ASCII or invalid UTF-8), the backslash and the double quote become a backslash and three octal digits
/// (`\033`, `\012`, `\134`, `\042`, `\303\251`).
///
/// Decision: non-ASCII text is escaped too, byte by byte, as `dump-keychain` does: a name from a hostile export can
/// then neither send terminal escapes (C0 and C1 controls, ESC sequences), nor forge a report line (a newline), nor
/// hide or reorder text (bidirectional overrides, zero-width characters), and the report reads the same as a dump.
///
/// - Important: Everything an importer puts in an ``ImportResult``, ``ImportProblem`` or error goes through this:
///   ``ImportCandidate/origin``, ``ImportProblem/reason`` and ``ImportResult/notes`` are display text with the names in
///   them already escaped, and ``ImportTarget/description`` escapes the item's names.
public enum ReportText {
    /// `text` escaped (see ``ReportText``).
    public static func escaped(_ text: String) -> String { escaped(bytes: text.utf8) }

    /// `bytes` (a file name that may not be UTF-8) escaped (see ``ReportText``).
    public static func escaped<Bytes: Sequence>(bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var result = ""
        for byte in bytes {
            if byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\"), byte != UInt8(ascii: "\"") {
                result.unicodeScalars.append(UnicodeScalar(byte))
            } else {
                result += "\\" + String(byte >> 6) + String((byte >> 3) & 7) + String(byte & 7)
            }
        }
        return result
    }

    /// `"text"`, escaped: a name quoted in a sentence.
    static func quoted(_ text: String) -> String { "\"" + escaped(text) + "\"" }
}
