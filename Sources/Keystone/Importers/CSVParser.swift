import Foundation

/// RFC 4180 CSV: fields separated by commas, records by CRLF or LF; a field in double quotes may hold commas, line
/// breaks and doubled quotes (`""`). A UTF-8 byte order mark at the start is skipped; a last empty line is not a record.
enum CSV {
    /// A record and the line it starts on (1-based, counting the header).
    struct Record {
        var fields: [String]
        var line: Int
    }

    /// Parses `text`.
    ///
    /// - Throws: ``KeychainError/Code/decodingFailed`` naming `file` and the line of an unterminated quoted field or
    ///   of a quote inside an unquoted field.
    static func parse(_ text: String, file: String) throws -> [Record] {
        var scalars = Array(text.unicodeScalars)
        if scalars.first == "\u{FEFF}" { scalars.removeFirst() }
        var records: [Record] = []
        var fields: [String] = []
        var field = String.UnicodeScalarView()
        var line = 1, recordLine = 1
        var index = 0
        var quoted = false, quoteLine = 0, wasQuoted = false
        func endField() {
            fields.append(String(field))
            field = String.UnicodeScalarView()
            wasQuoted = false
        }
        func endRecord() {
            endField()
            // A blank line (one empty field) is not a record.
            if !(fields.count == 1 && fields[0].isEmpty) { records.append(Record(fields: fields, line: recordLine)) }
            fields = []
        }
        while index < scalars.count {
            let c = scalars[index]
            if quoted {
                if c == "\"" {
                    if index + 1 < scalars.count, scalars[index + 1] == "\"" {
                        field.append("\"")
                        index += 2
                        continue
                    }
                    quoted = false
                } else {
                    if c == "\n" { line += 1 }
                    field.append(c)
                }
                index += 1
                continue
            }
            switch c {
            case "\"":
                guard field.isEmpty, !wasQuoted else {
                    throw KeychainError(code: .decodingFailed, reason: "\(file) line \(line): a quote inside an unquoted field (quote the whole field and double the quote)")
                }
                quoted = true
                wasQuoted = true
                quoteLine = line
            case ",":
                endField()
            case "\r":
                // CRLF, or a lone CR, ends the record.
                endRecord()
                if index + 1 < scalars.count, scalars[index + 1] == "\n" { index += 1 }
                line += 1
                recordLine = line
            case "\n":
                endRecord()
                line += 1
                recordLine = line
            default:
                guard !wasQuoted else {
                    throw KeychainError(code: .decodingFailed, reason: "\(file) line \(line): text after a closing quote")
                }
                field.append(c)
            }
            index += 1
        }
        if quoted {
            throw KeychainError(code: .decodingFailed, reason: "\(file) line \(quoteLine): a quoted field is not closed")
        }
        if !field.isEmpty || !fields.isEmpty || wasQuoted { endRecord() }
        return records
    }
}
