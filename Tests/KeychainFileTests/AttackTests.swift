import CSQLite
import Crypto
import Foundation
import KeychainEngine
@testable import KeychainFile
import KeychainSealing
import Testing

/// Reads one column of one row as an attacker with the file would.
func rawColumn(_ path: String, _ table: String, _ column: String, rowID: Int64) -> Data? {
    var db: OpaquePointer?
    sqlite3_open(path, &db)
    defer { sqlite3_close(db) }
    var select: OpaquePointer?
    sqlite3_prepare_v2(db, "SELECT \(column) FROM \(table) WHERE rowid = \(rowID)", -1, &select, nil)
    defer { sqlite3_finalize(select) }
    guard sqlite3_step(select) == SQLITE_ROW, let bytes = sqlite3_column_blob(select, 0) else { return nil }
    return Data(bytes: bytes, count: Int(sqlite3_column_bytes(select, 0)))
}

/// Sets one column of one row (a blob, or a SQL literal when `literal` is given).
func setColumn(_ path: String, _ table: String, _ column: String, rowID: Int64, _ value: Data) {
    var db: OpaquePointer?
    sqlite3_open(path, &db)
    defer { sqlite3_close(db) }
    var update: OpaquePointer?
    sqlite3_prepare_v2(db, "UPDATE \(table) SET \(column) = ?1 WHERE rowid = \(rowID)", -1, &update, nil)
    _ = value.withUnsafeBytes { sqlite3_bind_blob(update, 1, $0.baseAddress, Int32($0.count), unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)) }
    sqlite3_step(update)
    sqlite3_finalize(update)
}

func setHeader(_ path: String, _ name: String, _ value: String) {
    rawSQL(path, "UPDATE keystone_header SET value = CAST('\(value)' AS BLOB) WHERE name = '\(name)'")
}

/// Every column of a class table an attacker can move between rows.
let genpColumns = ["pk", "pclass", "wrapped", "payload", "d_acct", "d_svce", "d_agrp", "d_sync"]

@Suite("Keychain file under attack: substituted rows, planted files, hostile headers")
struct KeychainFileAttackTests {
    /// A keychain with items a (secret "secret-a") and b ("secret-b") of service "tam", and a bystander c.
    func twoItems() throws -> (path: String, engine: KeychainEngine) {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        for name in ["a", "b"] { try engine.add(genp("tam", name, [Key.valueData: .data(Data("secret-\(name)".utf8))])) }
        try engine.add(genp("other", "c", [Key.valueData: .data(Data("secret-c".utf8))]))
        file.lock()
        return (path, engine)
    }

    /// Swaps the account-digest columns of rows 1 and 2 (the issue's attack, with plain SQL and no password).
    func swapAccountDigests(_ path: String) throws {
        let a = try #require(rawColumn(path, "genp", "d_acct", rowID: 1))
        let b = try #require(rawColumn(path, "genp", "d_acct", rowID: 2))
        setColumn(path, "genp", "d_acct", rowID: 1, b)
        setColumn(path, "genp", "d_acct", rowID: 2, a)
    }

    func reopen(_ path: String) throws -> KeychainEngine {
        let file = try KeychainFile.open(at: path)
        if file.lockState != .unlocked { try file.unlock(password: "pw") }
        return KeychainEngine(storage: file)
    }

    @Test("swapping any one column between two rows never yields the other item's secret", arguments: genpColumns)
    func swappedColumn(column: String) throws {
        let (path, _) = try twoItems()
        let a = try #require(rawColumn(path, "genp", column, rowID: 1))
        let b = try #require(rawColumn(path, "genp", column, rowID: 2))
        setColumn(path, "genp", column, rowID: 1, Data(repeating: 0, count: 1))  // free the UNIQUE pk for the swap
        setColumn(path, "genp", column, rowID: 2, a)
        setColumn(path, "genp", column, rowID: 1, b)
        if column == "pclass" { rawSQL(path, "UPDATE genp SET pclass = CASE rowid WHEN 1 THEN 'C' ELSE 'D' END WHERE rowid IN (1, 2)") }
        let engine = try reopen(path)
        for account in ["a", "b"] {
            let status = fileStatus { _ = try engine.secret("tam", account) }
            var leaked: String?
            if status == 0 { leaked = try engine.secret("tam", account) }
            // Either the right item's own secret, or a failure: never the other one's.
            #expect(leaked == nil || leaked == "secret-\(account)")
            let all = try? engine.copyMatching(genp("tam", account, [Key.returnData: .bool(true), Key.returnAttributes: .bool(true),
                                                                     Key.matchLimit: .string(Key.matchLimitAll)]))
            for entry in all?.array ?? [] {
                #expect(entry.attributes?[Key.account]?.stringValue == account)
            }
        }
        // The bystander is untouched.
        #expect(try engine.secret("other", "c") == "secret-c")
    }

    @Test("a substituted account digest is errSecDecode for both rows, and the storage returns neither as an item")
    func substitutedAccountDigest() throws {
        let (path, _) = try twoItems()
        try swapAccountDigests(path)
        let engine = try reopen(path)
        #expect(fileStatus { _ = try engine.secret("tam", "a") } == Status.decode)
        let candidates = try engine.storage.read { try $0.candidates(in: .genericPassword, matching: [:]) }
        let damaged = candidates.filter { if case .unreadable(_, _, let e) = $0 { return e.status == Status.decode } else { return false } }
        #expect(damaged.count == 2)
        let file = try #require(engine.storage as? KeychainFile)
        #expect(try file.verify().damaged.map(\.rowID).sorted() == [1, 2])
        #expect(try file.verify().readable == 1)
    }

    @Test("deleting by account never deletes the row whose digest was substituted")
    func deleteAfterSubstitution() throws {
        let (path, _) = try twoItems()
        try swapAccountDigests(path)
        let engine = try reopen(path)
        _ = fileStatus { try engine.delete(genp("tam", "a")) }
        // Undo the tampering: both items are still there, intact.
        try swapAccountDigests(path)
        let restored = try reopen(path)
        #expect(try restored.secret("tam", "b") == "secret-b")
        #expect(try restored.secret("tam", "a") == "secret-a")
    }

    @Test("a whole row moved to another row id is not returned for the old persistent reference")
    func movedRow() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        let refA = try #require(try engine.add(genp("tam", "a", [Key.valueData: .data(Data("secret-a".utf8)), Key.returnPersistentRef: .bool(true)]))?.data)
        try engine.add(genp("tam", "b", [Key.valueData: .data(Data("secret-b".utf8))]))
        file.lock()
        // Swap the rows' ids: row 1 now holds b's sealed contents and b's columns.
        rawSQL(path, "UPDATE genp SET rowid = 100 WHERE rowid = 1; UPDATE genp SET rowid = 1 WHERE rowid = 2; UPDATE genp SET rowid = 2 WHERE rowid = 100;")
        let reopened = try reopen(path)
        let status = fileStatus { _ = try reopened.copyMatching([Key.valuePersistentRef: .data(refA), Key.returnData: .bool(true)]) }
        #expect(status == Status.decode)
    }

    @Test("a keychain owned by another user, or open to group or others, is refused with the file, owner and mode named")
    func plantedFile() throws {
        let dir = TempDir()
        let path = dir.path()
        _ = try KeychainFile.create(at: path, password: "")
        chmod(path, 0o666)
        let loose = fileStatusAndReason { _ = try KeychainFile.open(at: path) }
        #expect(loose.status == Status.wrPerm)
        #expect(loose.reason.contains(path) && loose.reason.contains("0666") && loose.reason.contains("chmod 600"))
        chmod(path, 0o600)
        #expect(fileStatus { _ = try KeychainFile.open(at: path) } == 0)
        if geteuid() == 0 {
            chown(path, 65534, 65534)
            let foreign = fileStatusAndReason { _ = try KeychainFile.open(at: path) }
            #expect(foreign.status == Status.wrPerm)
            #expect(foreign.reason.contains("owned by") && foreign.reason.contains("65534"))
            chown(path, 0, 0)
        }
        chmod(dir.url.path, 0o777)
        let openDirectory = fileStatusAndReason { _ = try KeychainFile.open(at: path) }
        #expect(openDirectory.status == Status.wrPerm)
        #expect(openDirectory.reason.contains("0777"))
        #expect(fileStatus { _ = try KeychainFile.create(at: dir.path("second.keychain-db"), password: "") } == Status.wrPerm)
        chmod(dir.url.path, 0o1777)  // sticky, as /tmp: others cannot replace our file
        #expect(fileStatus { _ = try KeychainFile.open(at: path) } == 0)
    }

    @Test("a planted write-ahead log (a symbolic link to another file) is refused, and that file is never written")
    func plantedLog() throws {
        let dir = TempDir()
        let path = dir.path()
        do { _ = try KeychainFile.create(at: path, password: "") }
        for suffix in ["-wal", "-shm"] { unlink(path + suffix) }
        let victim = dir.path("victim.txt")
        try Data("precious".utf8).write(to: URL(fileURLWithPath: victim))
        symlink(victim, path + "-wal")
        let refused = fileStatusAndReason { _ = try KeychainFile.open(at: path) }
        #expect(refused.status == Status.wrPerm)
        #expect(refused.reason.contains("-wal"))
        #expect(fileBytes(victim) == Data("precious".utf8))
    }

    @Test("header values out of range are errSecInvalidKeychain, never a trap",
          arguments: [
            ("kdf", #"{"blockSize":8,"parallelism":1,"rounds":1152921504606846976,"salt":"AAAAAAAAAAAAAAAAAAAAAA=="}"#),
            ("kdf", #"{"blockSize":8,"parallelism":1,"rounds":-1,"salt":"AAAAAAAAAAAAAAAAAAAAAA=="}"#),
            ("kdf", #"{"blockSize":9223372036854775807,"parallelism":9223372036854775807,"rounds":32768,"salt":"AAAAAAAAAAAAAAAAAAAAAA=="}"#),
            ("kdf", #"{"blockSize":8,"parallelism":1,"rounds":32769,"salt":"AAAAAAAAAAAAAAAAAAAAAA=="}"#),
            ("kdf", #"{"blockSize":8,"parallelism":1,"rounds":8388608,"salt":"AAAAAAAAAAAAAAAAAAAAAA=="}"#),
            ("kdf", #"{"blockSize":8,"parallelism":1,"rounds":1048576,"salt":"AAAAAAAAAAAAAAAAAAAAAA=="}"#),
            ("kdf", #"{"blockSize":8,"parallelism":1,"rounds":3,"salt":"AAAAAAAAAAAAAAAAAAAAAA=="}"#),
            ("kdf", #"{"blockSize":8,"parallelism":1,"rounds":32768,"salt":""}"#),
            ("kdf", "not json"),
            ("settings", #"{"lockAfterTimeout":-5,"lockOnSleep":false}"#),
            ("settings", #"{"lockAfterTimeout":1e300,"lockOnSleep":false}"#),
            ("version", "0"),
            ("version", "-9223372036854775808"),
            ("epoch", "-1"),
            ("epoch", "many"),
            ("empty", "2"),
            ("master", "short"),
            ("fileid", "x"),
          ])
    func hostileHeader(field: String, value: String) throws {
        let path = TempDir().path()
        _ = try KeychainFile.create(at: path, password: "")
        setHeader(path, field, value)
        let before = fileBytes(path)
        #expect(fileStatus { _ = try KeychainFile.open(at: path) } == Status.invalidKeychain)
        #expect(fileBytes(path) == before)
    }

    @Test("cached keys never unlock another keychain later put at the same path")
    func cacheFollowsTheFile() throws {
        let dir = TempDir()
        let path = dir.path()
        do {
            let first = try KeychainFile.create(at: path, password: "one")
            try KeychainEngine(storage: first).add(genp("svc", "a", [Key.valueData: .data(Data("x".utf8))]))
        }
        // The unlocked first keychain moves away (closed); another one, locked, takes its place.
        #expect(rename(path, dir.path("moved.keychain-db")) == 0)
        let second = try KeychainFile.create(at: path, password: "two")
        second.lock()
        let reopened = try KeychainFile.open(at: path)
        #expect(reopened.lockState == .locked)
        #expect(fileStatus { try KeychainEngine(storage: reopened).add(genp("svc", "b", [Key.valueData: .data(Data("y".utf8))])) } == Status.interactionNotAllowed)
        // A symbolic link to the moved, unlocked keychain finds that file's own keys, never the second's.
        symlink(dir.path("moved.keychain-db"), dir.path("link.keychain-db"))
        let linked = try KeychainFile.open(at: dir.path("link.keychain-db"))
        if linked.lockState != .unlocked { try linked.unlock(password: "one") }
        #expect(try KeychainEngine(storage: linked).secret("svc", "a") == "x")
    }

    @Test("a write after the file was replaced lands in the file other processes read")
    func replacedFile() throws {
        let dir = TempDir()
        let path = dir.path()
        let original = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: original)
        try engine.add(genp("svc", "before", [Key.valueData: .data(Data("1".utf8))]))
        // Another process deletes the keychain and creates a new one at the same path (the same password).
        try KeychainFile.delete(at: path)
        do {
            let replacement = try KeychainFile.create(at: path, password: "pw")
            try KeychainEngine(storage: replacement).add(genp("svc", "restored", [Key.valueData: .data(Data("2".utf8))]))
            replacement.lock()
        }
        let status = fileStatus { try engine.add(genp("svc", "after", [Key.valueData: .data(Data("3".utf8))])) }
        let reader = try KeychainFile.open(at: path)
        if reader.lockState != .unlocked { try reader.unlock(password: "pw") }
        let readerEngine = KeychainEngine(storage: reader)
        // The old instance follows the new file, without the old file's keys: the write fails, visibly.
        #expect(status == Status.interactionNotAllowed, "the new file's keys are not the old file's")
        try original.unlock(password: "pw")
        try engine.add(genp("svc", "after", [Key.valueData: .data(Data("3".utf8))]))
        #expect(try readerEngine.secret("svc", "after") == "3", "an acknowledged write must be visible")
        #expect(try readerEngine.secret("svc", "restored") == "2")
        #expect(fileStatus { _ = try readerEngine.secret("svc", "before") } == Status.itemNotFound)
    }

    @Test("a running instance sees another instance's unlock after its lock")
    func seesUnlock() throws {
        let path = TempDir().path()
        let first = try KeychainFile.create(at: path, password: "pw")
        let second = try KeychainFile.open(at: path)
        try #require(second.lockState == .unlocked, "the kernel keyring is not available here")
        first.lock()
        #expect(second.lockState == .locked)
        try first.unlock(password: "pw")
        #expect(second.lockState == .unlocked)
    }

    @Test("delete removes only keychains: any other file is left as it is")
    func deleteOnlyKeychains() throws {
        let dir = TempDir()
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let notes = dir.path("notes.txt")
        try Data("precious".utf8).write(to: URL(fileURLWithPath: notes))
        #expect(fileStatus { try KeychainFile.delete(at: notes) } == Status.invalidKeychain)
        #expect(fileBytes(notes) == Data("precious".utf8))
        var db: OpaquePointer?
        let other = dir.path("app.sqlite")
        sqlite3_open(other, &db)
        sqlite3_exec(db, "CREATE TABLE t (x); INSERT INTO t VALUES (1);", nil, nil, nil)
        sqlite3_close(db)
        #expect(fileStatus { try KeychainFile.delete(at: other) } == Status.invalidKeychain)
        #expect(FileManager.default.fileExists(atPath: other))
    }
}

func fileStatusAndReason(_ body: () throws -> Void) -> (status: Int32, reason: String) {
    do { try body(); return (0, "") } catch let e as EngineError { return (e.status, e.reason) } catch { return (Int32.min, "\(error)") }
}

/// Reads a child's standard output line by line, blocking on the pipe: a deterministic signal, no clock.
final class LineReader {
    private let handle: FileHandle
    private var buffer = Data()
    init(_ pipe: Pipe) { handle = pipe.fileHandleForReading }

    /// The next line, or nil at end of file.
    func next() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer = Data(buffer[(newline + 1)...])
                return line
            }
            let chunk = handle.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }
}

@Suite("Keychain file: creation under crashes and races", .serialized)
struct KeychainFileCreationTests {
    @Test("a creator killed at any moment leaves either no keychain or a complete one, and the next creation succeeds")
    func killedCreator() throws {
        let dir = TempDir()
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        chmod(dir.url.path, 0o700)
        let prefix = dir.path("k")
        var generator = SystemRandomNumberGenerator()
        var created = 0
        for round in 0..<6 {
            let base = "\(prefix)\(round)"
            let (child, pipe) = try KeychainFileProcessTests().launch([base, "pw", "create-loop"])
            let reader = LineReader(pipe)
            // Kill after a random number of completed creations: the kill lands inside the next one (mostly in
            // its key derivation, the longest step).
            let target = Int.random(in: 0...2, using: &generator)
            var seen = 0
            while seen < target, let line = reader.next(), line.hasPrefix("created") { seen += 1 }
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
            while let line = reader.next() { if line.hasPrefix("created") { seen += 1 } }
            for i in 0...(seen + 1) {
                let path = "\(base)-\(i)"
                guard FileManager.default.fileExists(atPath: path) else {
                    #expect(i >= seen, "a creation reported done left no file")
                    continue
                }
                let file = try KeychainFile.open(at: path)
                if file.lockState != .unlocked { try file.unlock(password: "pw") }
                created += 1
            }
            // The interrupted creation does not stand in the way of the next creation at its path, which also
            // removes its abandoned temporary file.
            let interrupted = "\(base)-\(seen)"
            if !FileManager.default.fileExists(atPath: interrupted) {
                _ = try KeychainFile.create(at: interrupted, password: "pw")
            }
            let stray = "\(base)-\(seen + 1)"
            if !FileManager.default.fileExists(atPath: stray) { _ = try KeychainFile.create(at: stray, password: "pw") }
        }
        #expect(created > 0)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.url.path).filter { $0.contains(".creating-") }
        #expect(leftovers.isEmpty, "abandoned builds are removed by the next creation: \(leftovers)")
    }

    @Test("8 processes making first use of a missing default keychain all succeed, on one file")
    func racingFirstUse() throws {
        let dir = TempDir()
        let path = dir.path("login.keychain-db")
        let processes = try (0..<8).map { index -> (Process, Pipe) in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try #require(KeychainFileProcessTests.stressBinary))
            process.arguments = ["-", "-", "default-add", "user\(index)"]
            var environment = ProcessInfo.processInfo.environment
            environment["KEYSTONE_KEYCHAIN"] = path
            process.environment = environment
            let pipe = Pipe()
            process.standardOutput = pipe
            return (process, pipe)
        }
        for (process, _) in processes { try process.run() }
        for (process, pipe) in processes {
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "\(output)")
        }
        let file = try KeychainFile.open(at: path)
        let engine = KeychainEngine(storage: file)
        for index in 0..<8 { #expect(try engine.secret("first-use", "user\(index)") == "user\(index)") }
    }

    @Test("a default keychain left headerless by an interrupted creation of an earlier version is moved aside and recreated")
    func headerlessDefault() throws {
        let dir = TempDir()
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        chmod(dir.url.path, 0o700)
        let path = dir.path("login.keychain-db")
        var db: OpaquePointer?
        sqlite3_open(path, &db)
        sqlite3_exec(db, "PRAGMA journal_mode=WAL; CREATE TABLE keystone_header (name TEXT PRIMARY KEY, value BLOB NOT NULL);", nil, nil, nil)
        sqlite3_close(db)
        chmod(path, 0o600)
        let (file, created) = try KeychainFile.openDefault(at: path)
        #expect(created)
        try KeychainEngine(storage: file).add(genp("svc", "a", [Key.valueData: .data(Data("x".utf8))]))
        let aside = try FileManager.default.contentsOfDirectory(atPath: dir.url.path).filter { $0.contains(".interrupted-") }
        #expect(aside.count == 1)
    }
}

@Suite("Keychain file: the unlock cache")
struct UnlockCacheTests {
    /// The expiry column of this process's keyring entry `description` in /proc/keys ("perm" when none), or nil.
    func expiry(of description: String) -> String? {
        // /proc files report size 0: read to the end of the stream.
        guard let handle = FileHandle(forReadingAtPath: "/proc/keys") else { return nil }
        let table = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        for line in table.split(separator: "\n") where line.contains(description + ":") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if fields.count > 3 { return String(fields[3]) }
        }
        return nil
    }

    @Test("cached keys expire: after 12 hours at the latest, sooner with the auto-lock timeout; lock removes them")
    func entriesExpire() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw", settings: KeychainSettings(lockAfterTimeout: 600))
        let header = try #require(file.header.fileID)
        let cache = KeyringCache(file: FileIdentity(device: file.device, inode: file.inode, fileID: header))
        let afu = try #require(expiry(of: cache.base + ":afu"), "the kernel keyring is not available here")
        #expect(afu != "perm")
        #expect(afu.hasSuffix("h") || afu.hasSuffix("m"))
        let full = try #require(expiry(of: cache.base + ":full"))
        #expect(full.hasSuffix("m") || full.hasSuffix("s"), "the full keys expire with the 10-minute timeout: \(full)")
        file.lock()
        #expect(isGone(cache.base + ":afu"))
        #expect(isGone(cache.base + ":full"))
    }

    /// Removed: absent, or revoked and waiting for the kernel's garbage collector ("expd").
    func isGone(_ description: String) -> Bool { [nil, "expd"].contains(expiry(of: description)) }

    @Test("delete-keychain removes the cached keys")
    func deleteRemovesEntries() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let cache = KeyringCache(file: FileIdentity(device: file.device, inode: file.inode, fileID: try #require(file.header.fileID)))
        try #require(expiry(of: cache.base + ":afu") != nil, "the kernel keyring is not available here")
        try KeychainFile.delete(at: path)
        #expect(isGone(cache.base + ":afu"))
        #expect(isGone(cache.base + ":full"))
    }
}

@Suite("Keychain file: doctor's diagnosis")
struct DiagnosisTests {
    @Test("a damaged item is reported with its class and row id, never its contents")
    func damagedItem() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "")
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("svc", "alice", [Key.valueData: .data(Data("top-secret".utf8))]))
        try engine.add(genp("svc", "bob", [Key.valueData: .data(Data("other-secret".utf8))]))
        flipByte(path, table: "genp", column: "payload", rowID: 2, offset: 20)
        let diagnosis = KeychainDiagnosis.examine(keychainAt: path)
        let items = try #require(diagnosis.findings.first { $0.check == "items" })
        #expect(items.severity == .problem)
        #expect(items.detail.contains("1 damaged") && items.detail.contains("genp row 2"))
        #expect(diagnosis.severity == .problem)
        let text = diagnosis.findings.map(\.description).joined(separator: "\n")
        #expect(!text.contains("secret") && !text.contains("alice") && !text.contains("svc"))
        #expect(diagnosis.findings.contains { $0.check == "password" && $0.severity == .warning })
    }

    @Test("loose permissions and foreign files are problems with a fix; a healthy keychain has none")
    func permissions() throws {
        let dir = TempDir()
        let path = dir.path()
        _ = try KeychainFile.create(at: path, password: "pw")
        #expect(KeychainDiagnosis.examine(keychainAt: path).severity < .warning)
        chmod(path, 0o644)
        let loose = KeychainDiagnosis.examine(keychainAt: path)
        let finding = try #require(loose.findings.first { $0.check == "permissions" })
        #expect(finding.severity == .problem && finding.fix?.contains("chmod 600") == true)
        let notes = dir.path("notes.txt")
        try Data("x".utf8).write(to: URL(fileURLWithPath: notes))
        #expect(KeychainDiagnosis.examine(keychainAt: notes).findings.first?.detail.contains("not a Keystone keychain") == true)
    }
}

/// A small tmpfs mounted for one test (root only), so the disk can really fill up.
struct SmallDisk {
    let path: String
    static let available: Bool = {
        guard geteuid() == 0 else { return false }
        let probe = TempDir().url.path
        try? FileManager.default.createDirectory(atPath: probe, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: probe) }
        guard run("/bin/mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", probe]) == 0 else { return false }
        _ = run("/bin/umount", [probe])
        return true
    }()

    init(megabytes: Int) throws {
        path = TempDir().url.path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try #require(Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m,mode=0700", "tmpfs", path]) == 0)
    }

    func unmount() { _ = Self.run("/bin/umount", ["-l", path]) }

    static func run(_ tool: String, _ arguments: [String]) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }
}

@Suite("Keychain file: a full disk")
struct FullDiskTests {
    @Test("a full disk fails the write with errSecDiskFull and loses nothing stored",
          .enabled(if: SmallDisk.available, "needs root and mount(8) to make a small tmpfs"))
    func fullDisk() throws {
        let disk = try SmallDisk(megabytes: 3)
        defer { disk.unmount() }
        let path = disk.path + "/full.keychain-db"
        let ballast = disk.path + "/ballast"
        try Data(count: 512 * 1024).write(to: URL(fileURLWithPath: ballast))
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        var stored: [String: Data] = [:]
        var failure: Int32 = 0
        var generator = SystemRandomNumberGenerator()
        for i in 0..<10_000 {
            let secret = Data((0..<8_192).map { _ in UInt8.random(in: 0...255, using: &generator) })
            let status = fileStatus { try engine.add(genp("fill", "item-\(i)", [Key.valueData: .data(secret)])) }
            if status != 0 { failure = status; break }
            stored["item-\(i)"] = secret
        }
        #expect(failure == Status.diskFull)
        #expect(stored.count > 10)
        // An update of an existing item on the full disk fails or succeeds; either way nothing is lost.
        _ = fileStatus { try engine.update(genp("fill", "item-0"), with: [Key.valueData: .data(Data("small".utf8))]) }
        let reopened = try KeychainFile.open(at: path)
        if reopened.lockState != .unlocked { try reopened.unlock(password: "pw") }
        let check = KeychainEngine(storage: reopened)
        for (account, secret) in stored where account != "item-0" {
            #expect(try check.copyMatching(genp("fill", account, [Key.returnData: .bool(true)]))?.data == secret)
        }
        let first = try check.copyMatching(genp("fill", "item-0", [Key.returnData: .bool(true)]))?.data
        #expect(first == stored["item-0"] || first == Data("small".utf8))
        // Once space is freed on the disk, the keychain works again.
        try FileManager.default.removeItem(atPath: ballast)
        for i in 1..<6 { try check.delete(genp("fill", "item-\(i)")) }
        try check.add(genp("fill", "after", [Key.valueData: .data(Data("x".utf8))]))
        #expect(try check.copyMatching(genp("fill", "item-6", [Key.returnData: .bool(true)]))?.data == stored["item-6"])
    }
}

extension FullDiskTests {
    @Test("on a full disk the shared commit file is refused, never mapped with pages no block backs (a store there is SIGBUS)",
          .enabled(if: SmallDisk.available, "needs root and mount(8) to make a small tmpfs"))
    func commitFileOnFullDisk() throws {
        let disk = try SmallDisk(megabytes: 1)
        defer { disk.unmount() }
        let path = disk.path + "/full.keychain-db"
        #expect(FileManager.default.createFile(atPath: path + "-wal", contents: Data(count: 4096)))
        let log = open(path + "-wal", O_RDWR | O_CLOEXEC)
        try #require(log >= 0)
        defer { close(log) }
        #expect(FileManager.default.createFile(atPath: disk.path + "/ballast", contents: nil))
        let ballast = try #require(FileHandle(forWritingAtPath: disk.path + "/ballast"))
        while (try? ballast.write(contentsOf: Data(count: 4096))) != nil {}
        try? ballast.close()
        let shared = SharedCommit.open(keychainPath: path, logDescriptor: log)
        if shared != nil {
            var info = stat()
            #expect(stat(path + "-commit", &info) == 0)
            #expect(Int(info.st_blocks) * 512 >= Int(info.st_size), "the mapped commit file is sparse: \(info.st_blocks) blocks for \(info.st_size) bytes")
        }
    }
}

@Suite("Keychain file: reading no more than asked")
struct StreamingReadTests {
    @Test("a limit-one query stops at its first match: rows after it are never decrypted")
    func limitOneStopsEarly() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        for i in 0..<50 { try engine.add(genp("svc", "acct-\(i)", [Key.valueData: .data(Data("s\(i)".utf8))])) }
        // Damage the last row: any query that decrypts it counts a damaged item.
        flipByte(path, table: "genp", column: "payload", rowID: 50, offset: 20)
        let reader = KeychainEngine(storage: try KeychainFile.open(at: path))
        #expect(try reader.copyMatching(genp("svc", "acct-0", [:]).filter { $0.key != Key.account }.merging([Key.returnData: .bool(true)]) { $1 })?.data == Data("s0".utf8))
        #expect(reader.damagedItemsSeen == 0, "the limit-one query read past its first match")
        let all = try reader.copyMatching([Key.class: .string("genp"), Key.service: .string("svc"), Key.matchLimit: .string(Key.matchLimitAll)])
        #expect(all == nil)  // no return keys
        #expect(reader.damagedItemsSeen == 1)
    }
}

/// A row of a keychain file of the current format, opened with its password: what the downgrade tests reseal.
struct OpenedRow {
    let itemClass: ItemClass
    let rowID: Int64
    let pclass: String
    let pk: Data
    let digests: [Data]
    let classKey: SymmetricKey
    let itemKey: Data
    let plain: Data
}

/// Every row of every class of the file at `path`, opened as the current format seals it.
func openedRows(_ path: String, _ file: KeychainFile, _ keys: KeySet) throws -> [OpenedRow] {
    var db: OpaquePointer?
    sqlite3_open(path, &db)
    defer { sqlite3_close(db) }
    var rows: [OpenedRow] = []
    for cls in ItemClass.allCases {
        let digestColumns = ClassSchema.of(cls).primaryKey.map { "d_\($0)" }
        var select: OpaquePointer?
        sqlite3_prepare_v2(db, "SELECT rowid, pk, pclass, wrapped, payload, \(digestColumns.joined(separator: ", ")) FROM \(cls.rawValue)", -1, &select, nil)
        defer { sqlite3_finalize(select) }
        func blob(_ i: Int32) -> Data {
            guard let p = sqlite3_column_blob(select, i) else { return Data() }
            return Data(bytes: p, count: Int(sqlite3_column_bytes(select, i)))
        }
        while sqlite3_step(select) == SQLITE_ROW {
            let rowID = sqlite3_column_int64(select, 0)
            let pk = blob(1)
            let pclass = String(cString: sqlite3_column_text(select, 2))
            let digests = (0..<digestColumns.count).map { blob(Int32(5 + $0)) }
            let classKey = try #require(ProtectionClass(rawValue: pclass).flatMap { keys.classKeys[$0] }, "row \(rowID) has no class key")
            let aad = file.aad(cls, pclass, pk, digests: digests, rowID: rowID, version: FileFormat.version)
            let itemKey = try Sealing.open(blob(3), key: classKey, aad: aad)
            let plain = try Sealing.open(blob(4), key: SymmetricKey(data: itemKey), aad: aad)
            rows.append(OpenedRow(itemClass: cls, rowID: rowID, pclass: pclass, pk: pk, digests: digests,
                                  classKey: classKey, itemKey: itemKey, plain: plain))
        }
    }
    return rows
}

@Suite("Keychain file: format 1 files keep their items")
struct FormatUpgradeTests {
    /// Turns a format 2 file into the format 1 an earlier Keystone wrote: rows sealed without row id and digest
    /// columns, no file id, no key check, no service-alone index.
    func downgrade(_ path: String, password: String) throws {
        let file = try KeychainFile.open(at: path)
        let keys = KeySet(master: try file.unwrapMaster(password))
        for row in try openedRows(path, file, keys) {
            let v1 = file.aad(row.itemClass, row.pclass, row.pk, digests: row.digests, rowID: row.rowID, version: 1)
            setColumn(path, row.itemClass.rawValue, "wrapped", rowID: row.rowID, try Sealing.seal(row.itemKey, key: row.classKey, aad: v1))
            setColumn(path, row.itemClass.rawValue, "payload", rowID: row.rowID, try Sealing.seal(row.plain, key: SymmetricKey(data: row.itemKey), aad: v1))
        }
        for cls in ItemClass.allCases { rawSQL(path, "DROP INDEX IF EXISTS \(cls.rawValue)_first") }
        setHeader(path, "version", "1")
        rawSQL(path, "DELETE FROM keystone_header WHERE name IN ('fileid', 'keycheck')")
    }

    @Test("a format 1 keychain opens locked, unlocks with its password, is upgraded in place and keeps every item")
    func upgrade() throws {
        let path = TempDir().path()
        do {
            let file = try KeychainFile.create(at: path, password: "pw")
            let engine = KeychainEngine(storage: file)
            for name in ["a", "b", "c"] { try engine.add(genp("svc", name, [Key.valueData: .data(Data("secret-\(name)".utf8))])) }
            try engine.add(genp("svc", "later", [Key.valueData: .data(Data("kept".utf8)), Key.accessible: .string("ck")]))
            file.lock()
        }
        try downgrade(path, password: "pw")
        let old = try KeychainFile.open(at: path)
        #expect(old.withMutex { old.header.version } == 1)
        #expect(old.lockState == .locked)
        #expect(fileStatus { try old.unlock(password: "wrong") } == Status.authFailed)
        try old.unlock(password: "pw")
        #expect(old.withMutex { old.header.version } == FileFormat.version)
        let engine = KeychainEngine(storage: old)
        for name in ["a", "b", "c"] { #expect(try engine.secret("svc", name) == "secret-\(name)") }
        #expect(try engine.secret("svc", "later") == "kept")
        // Upgraded rows are bound to their row ids and digest columns, as new ones are.
        let b = try #require(rawColumn(path, "genp", "d_acct", rowID: 2))
        let c = try #require(rawColumn(path, "genp", "d_acct", rowID: 3))
        setColumn(path, "genp", "d_acct", rowID: 2, c)
        setColumn(path, "genp", "d_acct", rowID: 3, b)
        let reopened = try KeychainFile.open(at: path)
        if reopened.lockState != .unlocked { try reopened.unlock(password: "pw") }
        let after = KeychainEngine(storage: reopened)
        #expect(fileStatus { _ = try after.secret("svc", "b") } == Status.decode)
        #expect(try after.secret("svc", "a") == "secret-a")
    }
}

@Suite("Keychain file: format 2 files keep their items and get byte-wise blob digests")
struct Format2UpgradeTests {
    /// Turns a current file into the format 2 an earlier Keystone wrote: digest columns with every value
    /// written with its own type (a key's tag given as Data digested as Data), rows sealed over those digests.
    func downgradeToFormat2(_ path: String, password: String) throws {
        let file = try KeychainFile.open(at: path)
        let keys = KeySet(master: try file.unwrapMaster(password))
        for row in try openedRows(path, file, keys) {
            let cls = row.itemClass, table = cls.rawValue
            let item = try RowCodec.decode(row.plain, itemClass: cls, rowID: row.rowID)
            let old = file.digests(of: cls, item.attributes, keys.indexMAC, version: 2)
            let aad = file.aad(cls, row.pclass, old.pk, digests: old.columns, rowID: row.rowID, version: 2)
            setColumn(path, table, "pk", rowID: row.rowID, old.pk)
            for (key, digest) in zip(ClassSchema.of(cls).primaryKey, old.columns) { setColumn(path, table, "d_\(key)", rowID: row.rowID, digest) }
            setColumn(path, table, "wrapped", rowID: row.rowID, try Sealing.seal(row.itemKey, key: row.classKey, aad: aad))
            setColumn(path, table, "payload", rowID: row.rowID, try Sealing.seal(row.plain, key: SymmetricKey(data: row.itemKey), aad: aad))
        }
        setHeader(path, "version", "2")
    }

    @Test("a format 2 keychain is upgraded on unlock; a tag stored as Data is then found as Data and as a String, and collides with both")
    func upgradeFromFormat2() throws {
        let path = TempDir().path()
        let key: KeychainQuery = [Key.class: .string("keys"), Key.applicationTag: .data(Data("com.example.tag".utf8)),
                                  Key.valueData: .data(Data("key-bytes".utf8))]
        do {
            let file = try KeychainFile.create(at: path, password: "pw")
            let engine = KeychainEngine(storage: file)
            try engine.add(key)
            try engine.add(genp("svc", "a", [Key.valueData: .data(Data("secret-a".utf8))]))
            file.lock()
        }
        try downgradeToFormat2(path, password: "pw")
        // Before the upgrade, the Data tag's digest differs from the String's (what format 2 wrote).
        let digestBefore = try #require(rawColumn(path, "keys", "d_atag", rowID: 1))
        let old = try KeychainFile.open(at: path)
        #expect(old.withMutex { old.header.version } == 2)
        try old.unlock(password: "pw")
        #expect(old.withMutex { old.header.version } == FileFormat.version)
        #expect(rawColumn(path, "keys", "d_atag", rowID: 1) != digestBefore)
        let engine = KeychainEngine(storage: old)
        #expect(try engine.secret("svc", "a") == "secret-a")
        for tag in [KeychainValue.data(Data("com.example.tag".utf8)), .string("com.example.tag")] {
            let found = try engine.copyMatching([Key.class: .string("keys"), Key.applicationTag: tag, Key.returnData: .bool(true)])
            #expect(found?.data == Data("key-bytes".utf8))
            #expect(fileStatus { try engine.add([Key.class: .string("keys"), Key.applicationTag: tag]) } == Status.duplicateItem)
        }
        #expect(engine.damagedItemsSeen == 0)
    }
}
