import Foundation
import KeychainEngine
import Keystone
import KeystoneImporters
import KeystoneTesting
import Testing

/// A keychain storage that runs out of space: every write transaction after the first `allowedWrites` fails with
/// `errSecIO`, as a keychain file on a full disk does. Reads keep working (the rows written before stay).
final class FullDiskStorage: KeychainStorage, @unchecked Sendable {
    // @unchecked Sendable: `remaining` is reached only while `lock` is held.
    let inner = MemoryStorage()
    private let lock = NSLock()
    private var remaining: Int

    init(allowedWrites: Int) { remaining = allowedWrites }

    var lockState: LockState { inner.lockState }

    func read<T>(_ body: (any StorageReader) throws -> T) throws -> T { try inner.read(body) }

    func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        let allowed = lock.withLock { () -> Bool in
            guard remaining > 0 else { return false }
            remaining -= 1
            return true
        }
        guard allowed else { throw EngineError(Status.io, "cannot write the keychain: No space left on device") }
        return try inner.write(body)
    }
}

@Suite("Importers: hostile and oversized sources (escaping, limits, ambiguous headers, partial failures)")
struct ImporterHostileTests {
    static let keystoneHeader = "class,service,account,server,protocol,port,path,label,comment,password\n"

    @Test("names with terminal escapes, newlines and quotes are shown escaped in the report, one line per entry")
    func escapedReport() throws {
        // A hostile export: a name that clears the screen and conceals text, an account that forges a report line.
        let text = "name,url,username,password\n"
            + "\"evil\u{1B}[2J\u{1B}[8m\",,\"bob\n3 added, 0 unchanged, 0 conflicts, 0 replaced, 0 not imported\",pw-1\n"
            + "\"quote\"\"d\",,\"tab\there\",pw-2\n"
            + "bad\u{1B}]0;title\u{07},\"https://\",x,\n"
        let keychain = Keychain(store: InMemoryKeychain())
        let report = try keychain.importItems(from: csv(text, name: "evil\u{1B}[31m.csv"), options: ImportOptions(dryRun: true))
        let shown = report.description
        for raw in ["\u{1B}", "\u{07}", "\t"] { #expect(!shown.contains(raw), "a raw control character is shown") }
        // One line per result and problem, then the summary: no forged line.
        #expect(shown.split(separator: "\n", omittingEmptySubsequences: false).count == report.results.count + report.problems.count + 1)
        #expect(shown.contains(#"service="evil\033[2J\033[8m""#))
        #expect(shown.contains(#"account="bob\0123 added, 0 unchanged"#))
        #expect(shown.contains(#"service="quote\042d" account="tab\011here""#))
        #expect(shown.contains(#"(from evil\033[31m.csv line 2)"#))
        #expect(shown.contains(#"skip evil\033[31m.csv line 5"#))
        #expect(!shown.contains("pw-1") && !shown.contains("pw-2"))
    }

    @Test("a field over the size limit fails naming the entry, never showing its value; nothing is written")
    func fieldOverLimit() throws {
        let huge = String(repeating: "A", count: (1 << 20) + 1)   // one byte over the 1 MiB default
        let text = Self.keystoneHeader + "genp,svc,small,,,,,,,ok\n" + "genp,svc,huge,,,,,,,\(huge)\n"
        let keychain = Keychain(store: InMemoryKeychain())
        let error = try #require(throws: KeychainError.self) { try keychain.importItems(from: csv(text, name: "big.csv")) }
        #expect(error.status == Status.dataTooLarge)
        #expect(error.reason.contains("big.csv line 3") && error.reason.contains("password"))
        #expect(!error.reason.contains("AAAA"))
        #expect(try keychain.exists(GenericPassword(service: "svc", account: "small")) == false)
    }

    @Test("a CSV header naming a column twice is refused as ambiguous")
    func duplicateHeader() throws {
        let text = "name,url,username,password,password\nsite,https://a.example,alice,first,second\n"
        let error = try #require(throws: KeychainError.self) { try csv(text, name: "dup.csv").read() }
        #expect(error == .decodingFailed)
        #expect(error.reason.contains("dup.csv line 1") && error.reason.contains("password"))
    }

    @Test("a failure midway (a full disk) reports which entries were written and which were not; a rerun completes it")
    func partialFailure() throws {
        var text = Self.keystoneHeader
        for index in 1...5 { text += "genp,svc,user\(index),,,,,,,pw-\(index)\n" }
        let storage = FullDiskStorage(allowedWrites: 2)
        let keychain = Keychain(store: KeychainEngine(storage: storage))
        let error = try #require(throws: ImportFailure.self) { try keychain.importItems(from: csv(text, name: "five.csv")) }
        let shown = String(describing: error)
        #expect(shown.contains(#"add genp service="svc" account="user1" (from five.csv line 2)"#))
        #expect(shown.contains(#"add genp service="svc" account="user2" (from five.csv line 3)"#))
        #expect(shown.contains("not written"))
        for index in 3...5 { #expect(shown.contains("account=\"user\(index)\" (from five.csv line \(index + 1))")) }
        #expect(!shown.contains("pw-"))
        #expect(error.status == Status.io)
        #expect(error.written.map(\.item.account) == ["user1", "user2"])
        #expect(error.notWritten.map(\.origin) == ["five.csv line 4", "five.csv line 5", "five.csv line 6"])
        #expect(error.failedEntry?.origin == "five.csv line 4" && !error.failedEntryWritten && !error.restOfSourceUnread)
        #expect(error.summary.contains("2 entries were written, 3 were not") && error.summary.contains("run the same import again"))
        #expect(try keychain.string(for: GenericPassword(service: "svc", account: "user2")) == "pw-2")
        #expect(try keychain.exists(GenericPassword(service: "svc", account: "user3")) == false)

        // A rerun on a keychain with room again: the two written are unchanged, the three others added.
        let roomy = Keychain(store: KeychainEngine(storage: storage.inner))
        let rerun = try roomy.importItems(from: csv(text, name: "five.csv"))
        #expect(rerun.results.map(\.action) == [.unchanged, .unchanged, .add, .add, .add])
        #expect(try roomy.string(for: GenericPassword(service: "svc", account: "user5")) == "pw-5")
    }

    @Test("a failure before anything was written is the keychain error itself, naming the entry")
    func failureBeforeAnyWrite() throws {
        let text = Self.keystoneHeader + "genp,svc,a,,,,,,,pw\n"
        let keychain = Keychain(store: KeychainEngine(storage: FullDiskStorage(allowedWrites: 0)))
        let error = try #require(throws: KeychainError.self) { try keychain.importItems(from: csv(text, name: "one.csv")) }
        #expect(error.status == Status.io)
        #expect(error.reason.contains("one.csv line 2") && error.reason.contains("nothing was written"))
    }

    @Test("a source that breaks while it is applied: the entries written are listed, the rest is said to be unread")
    func sourceBreaksMidway() throws {
        let keychain = Keychain(store: InMemoryKeychain())
        let source = BreakingSource()
        let error = try #require(throws: ImportFailure.self) { try keychain.importItems(from: source) }
        #expect(error.written.map(\.item.account) == ["a", "b"])
        #expect(error.restOfSourceUnread && error.failedEntry == nil && error.notWritten.isEmpty)
        #expect(error.status == Status.io)
        #expect(error.summary.contains("the rest of the source was not read"))
    }

    @Test("the limits are overridable: a field or a record over them is an invalid entry (errSecDataTooLarge) skipped with skipInvalid")
    func overridableLimits() throws {
        let text = Self.keystoneHeader + "genp,svc,a,,,,,,,short\n" + "genp,svc,b,,,,,,,this-one-is-longer-than-sixteen\n"
            + "genp,svc,c,,,,,,,\"\(String(repeating: "q", count: 15))\"\n"
        var source = csv(text, name: "l.csv")
        source.limits.maxFieldBytes = 16
        let batch = try source.read()
        #expect(batch.candidates.map(\.item.account) == ["a", "c"])
        #expect(batch.problems.map(\.origin) == ["l.csv line 3"])
        #expect(batch.problems.first?.status == Status.dataTooLarge && batch.problems.first?.reason.contains("\"password\" field") == true)
        #expect(batch.problems.first?.reason.contains("longer") == false)
        let keychain = Keychain(store: InMemoryKeychain())
        #expect(throws: KeychainError(status: Status.dataTooLarge)) { try keychain.importItems(from: source) }
        let report = try keychain.importItems(from: source, options: ImportOptions(skipInvalid: true))
        #expect(report.results.map(\.item.account) == ["a", "c"] && report.problems.count == 1)

        let long = Self.keystoneHeader + "genp,svc,a,,,,,,,short\n" + "genp,svc,b,,,,,,,\(String(repeating: "w", count: 90))\n" + "genp,svc,c,,,,,,,x\n"
        var records = csv(long, name: "r.csv")
        records.limits.maxRecordBytes = 80
        let byRecord = try records.read()
        #expect(byRecord.candidates.map(\.item.account) == ["a", "c"])
        #expect(byRecord.problems.map(\.origin) == ["r.csv line 3"])
        #expect(byRecord.problems.first?.reason.contains("limit for a record") == true)
        // The header itself over the limits is not an export.
        records.limits.maxRecordBytes = 20
        #expect(throws: KeychainError(status: Status.dataTooLarge)) { try records.read() }
    }

    @Test("JSON: an export over the document limit is refused; a value over the field limit makes its item invalid")
    func jsonLimits() throws {
        let json = #"{"format": "keystone-export", "version": 1, "items": [{"class": "genp", "service": "s", "account": "a", "password": "p"}, "#
            + #"{"class": "genp", "service": "s", "account": "b", "password": "\#(String(repeating: "z", count: 64))"}]}"#
        var source = ExportFileImportSource(contents: Data(json.utf8), fileName: "k.json", format: .json)
        source.limits.maxFieldBytes = 32
        let batch = try source.read()
        #expect(batch.candidates.map(\.item.account) == ["a"])
        #expect(batch.problems.map(\.origin) == ["k.json item 2"] && batch.problems.first?.status == Status.dataTooLarge)
        source.limits.maxDocumentBytes = 100
        #expect(throws: KeychainError(status: Status.dataTooLarge)) { try source.read() }
    }

    @Test("report text escapes control bytes, quotes, backslashes and non-ASCII bytes as dump-keychain does")
    func reportTextEscaping() {
        #expect(ReportText.escaped("a\u{1B}[0m\n\"\\é\u{7F}") == #"a\033[0m\012\042\134\303\251\177"#)
        #expect(ReportText.escaped(bytes: [0x63, 0x61, 0x66, 0xE9]) == #"caf\351"#)
        #expect(ReportText.escaped("plain text: 1-2_3.csv") == "plain text: 1-2_3.csv")
    }
}

/// A streaming source whose second reading breaks after two entries (a file truncated or unreadable meanwhile).
struct BreakingSource: ImportSource {
    // @unchecked Sendable: `count` is changed only by `forEachEntry`, which an import calls once at a time.
    final class Readings: @unchecked Sendable { var count = 0 }
    let readings = Readings()

    var name: String { "breaking" }
    var streamsEntries: Bool { true }

    func read() throws -> ImportBatch { ImportBatch() }

    func forEachEntry(_ body: (ImportEntry) throws -> Void) throws {
        readings.count += 1
        for (index, account) in ["a", "b", "c", "d"].enumerated() {
            if readings.count > 1, index == 2 { throw KeychainError(status: Status.io, reason: "cannot read source: Input/output error") }
            try body(.candidate(ImportCandidate(item: .generic(try GenericPassword(service: "svc", account: account)),
                                                secret: Data("s".utf8), origin: "entry \(index + 1)")))
        }
    }
}
