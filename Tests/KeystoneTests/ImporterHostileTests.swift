import Foundation
import KeychainEngine
import Keystone
import KeystoneTesting
import Testing

/// A keychain storage that runs out of space: every write transaction after the first `allowedWrites` fails with
/// `errSecIO`, as a keychain file on a full disk does. Reads keep working (the rows written before stay).
final class FullDiskStorage: KeychainStorage, @unchecked Sendable {
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
        let error = try #require(throws: (any Error).self) { try keychain.importItems(from: csv(text, name: "five.csv")) }
        let shown = String(describing: error)
        #expect(shown.contains(#"add genp service="svc" account="user1" (from five.csv line 2)"#))
        #expect(shown.contains(#"add genp service="svc" account="user2" (from five.csv line 3)"#))
        #expect(shown.contains("not written"))
        for index in 3...5 { #expect(shown.contains("account=\"user\(index)\" (from five.csv line \(index + 1))")) }
        #expect(!shown.contains("pw-"))
        #expect(try keychain.string(for: GenericPassword(service: "svc", account: "user2")) == "pw-2")
    }
}
