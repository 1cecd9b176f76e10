import Foundation
import Keystone

/// RFC 4180 CSV: fields separated by commas, records by CRLF or LF; a field in double quotes may hold commas, line
/// breaks and doubled quotes (`""`). A UTF-8 byte order mark at the start is skipped; a last empty line is not a record.
///
/// The reader is incremental: it takes the input in chunks and keeps one record in memory, never the whole file. A
/// field or record over the ``ImportLimits`` is not kept: the reader skips the rest of it (still following quotes
/// and lines) and returns the record marked ``Record/oversized``, so the caller can report that entry and go on.
enum CSV {
    /// The most fields a record may have: more is an oversized record (no export has more than a few dozen columns,
    /// and each field costs memory even when empty).
    static let maxFields = 1024

    /// Which limit a record went over.
    enum Oversize: Equatable {
        /// The field at this index (0-based) is over ``ImportLimits/maxFieldBytes``.
        case field(Int)
        /// The record is over ``ImportLimits/maxRecordBytes`` or ``CSV/maxFields``.
        case record
    }

    /// A record and the line it starts on (1-based, counting the header).
    struct Record {
        var fields: [String]
        var line: Int
        /// Set when a field or the record went over a limit: ``fields`` is then incomplete (empty when the record is).
        var oversized: Oversize?
    }

    /// Reads records one at a time from chunks of bytes.
    struct Reader {
        let file: String
        let limits: ImportLimits
        /// The next chunk, or nil at the end of the input.
        private let nextChunk: () throws -> Data?

        private var chunk: [UInt8] = []
        private var index = 0
        private var atEnd = false
        private var started = false

        private var fields: [String] = []
        private var field: [UInt8] = []
        private var line = 1, recordLine = 1
        private var quoted = false, quoteLine = 0, wasQuoted = false
        /// A quote seen inside a quoted field: the next byte tells a doubled quote from the closing one.
        private var quoteInQuoted = false
        /// A CR ended the last record: a LF right after it belongs to it.
        private var afterCR = false
        private var recordBytes = 0
        private var oversized: Oversize?
        /// The record went over a limit as a whole: nothing more of it is kept.
        private var droppingRecord = false

        /// A reader of `nextChunk`'s bytes; `file` names the input in errors.
        init(file: String, limits: ImportLimits, nextChunk: @escaping () throws -> Data?) {
            self.file = file
            self.limits = limits
            self.nextChunk = nextChunk
        }

        /// A reader of `data`.
        init(data: Data, file: String, limits: ImportLimits) {
            var remaining: Data? = data
            self.init(file: file, limits: limits) {
                defer { remaining = nil }
                return remaining
            }
        }

        /// A reader of the file at `handle`, 64 KiB at a time.
        init(handle: FileHandle, file: String, limits: ImportLimits) {
            self.init(file: file, limits: limits) {
                do {
                    guard let data = try handle.read(upToCount: 64 << 10), !data.isEmpty else { return nil }
                    return data
                } catch {
                    throw KeychainError(status: Status.io, reason: "cannot read \(file): \(error.localizedDescription)")
                }
            }
        }

        /// Refills `chunk`; false at the end of the input.
        private mutating func fill() throws -> Bool {
            while !atEnd {
                guard let data = try nextChunk() else {
                    atEnd = true
                    return false
                }
                if data.isEmpty { continue }
                chunk = Array(data)
                index = 0
                return true
            }
            return false
        }

        /// The next record, or nil at the end.
        ///
        /// - Throws: `KeychainError.Code.decodingFailed` naming the file and the line of an unterminated quoted
        ///   field, of a quote inside an unquoted field, of text after a closing quote, or of text that is not UTF-8.
        mutating func next() throws -> Record? {
            if !started {
                started = true
                // Skip a UTF-8 byte order mark: gather the first three bytes (a chunk may be shorter).
                var head: [UInt8] = []
                while head.count < 3 {
                    if index >= chunk.count, try !fill() { break }
                    let take = min(3 - head.count, chunk.count - index)
                    head += chunk[index..<index + take]
                    index += take
                }
                let rest = Array(chunk[index...])
                chunk = (head == [0xEF, 0xBB, 0xBF] ? [] : head) + rest
                index = 0
            }
            while true {
                if index >= chunk.count, try !fill() { return try finish() }
                // (fill() resets index to 0 on a new chunk.)
                let byte = chunk[index]
                index += 1
                if let record = try consume(byte) { return record }
            }
        }

        /// The last record at the end of the input.
        private mutating func finish() throws -> Record? {
            if quoteInQuoted {
                quoteInQuoted = false
                quoted = false
            }
            if quoted {
                throw KeychainError(code: .decodingFailed, reason: "\(file) line \(quoteLine): a quoted field is not closed")
            }
            guard !field.isEmpty || !fields.isEmpty || wasQuoted || oversized != nil else { return nil }
            let record = try endRecord()
            if record.oversized == nil, record.fields.count == 1, record.fields[0].isEmpty { return nil }
            return record
        }

        private mutating func consume(_ byte: UInt8) throws -> Record? {
            let quote = UInt8(ascii: "\""), comma = UInt8(ascii: ","), cr = UInt8(ascii: "\r"), lf = UInt8(ascii: "\n")
            if afterCR {
                afterCR = false
                if byte == lf { return nil }
            }
            recordBytes += 1
            if recordBytes > limits.maxRecordBytes, !droppingRecord { markRecordOversized() }
            if quoteInQuoted {
                quoteInQuoted = false
                if byte == quote {
                    append(quote)
                    return nil
                }
                quoted = false
                // The quote closed the field: this byte is read outside it.
            } else if quoted {
                if byte == quote {
                    quoteInQuoted = true
                } else {
                    if byte == lf { line += 1 }
                    append(byte)
                }
                return nil
            }
            switch byte {
            case quote:
                guard field.isEmpty, !wasQuoted, !fieldWasOversized else {
                    throw KeychainError(code: .decodingFailed, reason: "\(file) line \(line): a quote inside an unquoted field (quote the whole field and double the quote)")
                }
                quoted = true
                wasQuoted = true
                quoteLine = line
            case comma:
                try endField()
            case cr, lf:
                let record = try endRecord()
                line += 1
                recordLine = line
                afterCR = byte == cr
                // A blank line (one empty field) is not a record.
                if record.oversized == nil, record.fields.count == 1, record.fields[0].isEmpty { return nil }
                return record
            default:
                guard !wasQuoted else {
                    throw KeychainError(code: .decodingFailed, reason: "\(file) line \(line): text after a closing quote")
                }
                append(byte)
            }
            return nil
        }

        /// Bytes of the current field beyond the field limit were dropped.
        private var fieldWasOversized = false

        private mutating func append(_ byte: UInt8) {
            guard !droppingRecord, !fieldWasOversized else { return }
            guard field.count < limits.maxFieldBytes else {
                fieldWasOversized = true
                field = []
                if oversized == nil { oversized = .field(fields.count) }
                return
            }
            field.append(byte)
        }

        /// Drops the record. A field already over its limit stays the reason given (the more precise one).
        private mutating func markRecordOversized() {
            if oversized == nil { oversized = .record }
            droppingRecord = true
            fields = []
            field = []
        }

        private mutating func endField() throws {
            defer {
                field = []
                wasQuoted = false
                fieldWasOversized = false
            }
            guard !droppingRecord else { return }
            guard fields.count < CSV.maxFields else {
                markRecordOversized()
                return
            }
            guard let text = String(bytes: field, encoding: .utf8) else {
                throw KeychainError(code: .decodingFailed, reason: "\(file) line \(line) is not UTF-8 text")
            }
            fields.append(text)
        }

        private mutating func endRecord() throws -> Record {
            try endField()
            let record = Record(fields: fields, line: recordLine, oversized: oversized)
            fields = []
            oversized = nil
            droppingRecord = false
            recordBytes = 0
            return record
        }
    }
}
