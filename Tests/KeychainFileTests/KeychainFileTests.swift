import CSQLite
import Foundation
import KeychainEngine
@testable import KeychainFile
import Testing

/// A fresh directory for one test.
struct TempDir {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-file-\(UUID().uuidString)")
    func path(_ name: String = "test.keychain-db") -> String { url.appendingPathComponent(name).path }
}

func fileStatus(_ body: () throws -> Void) -> Int32 {
    do { try body(); return 0 } catch let e as EngineError { return e.status } catch { return Int32.min }
}

func genp(_ service: String, _ account: String, _ extra: KeychainQuery = [:]) -> KeychainQuery {
    [Key.class: .string("genp"), Key.service: .string(service), Key.account: .string(account)].merging(extra) { $1 }
}

extension KeychainEngine {
    func secret(_ service: String, _ account: String) throws -> String? {
        try copyMatching(genp(service, account, [Key.returnData: .bool(true)]))?.data.map { String(decoding: $0, as: UTF8.self) }
    }
}

func fileBytes(_ path: String) -> Data { (try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data() }

/// Runs raw SQL on a keychain file (to tamper with it, as an attacker with the file would).
func rawSQL(_ path: String, _ sql: String) {
    var db: OpaquePointer?
    sqlite3_open(path, &db)
    sqlite3_exec(db, sql, nil, nil, nil)
    sqlite3_close(db)
}

/// Flips one bit of one column of one row, through SQLite as an attacker with the file could.
func flipByte(_ path: String, table: String, column: String, rowID: Int64, offset: Int) {
    var db: OpaquePointer?
    sqlite3_open(path, &db)
    defer { sqlite3_close(db) }
    var select: OpaquePointer?
    sqlite3_prepare_v2(db, "SELECT \(column) FROM \(table) WHERE rowid = \(rowID)", -1, &select, nil)
    guard sqlite3_step(select) == SQLITE_ROW, let bytes = sqlite3_column_blob(select, 0) else { sqlite3_finalize(select); return }
    var data = Data(bytes: bytes, count: Int(sqlite3_column_bytes(select, 0)))
    sqlite3_finalize(select)
    data[offset] ^= 0x01
    var update: OpaquePointer?
    sqlite3_prepare_v2(db, "UPDATE \(table) SET \(column) = ?1 WHERE rowid = \(rowID)", -1, &update, nil)
    _ = data.withUnsafeBytes { sqlite3_bind_blob(update, 1, $0.baseAddress, Int32($0.count), unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)) }
    sqlite3_step(update)
    sqlite3_finalize(update)
}

@Suite("Keychain file: creating, opening, locking")
struct KeychainFileLifecycleTests {
    @Test("a new keychain is 0600 in a 0700 directory and refuses to be created twice")
    func permissions() throws {
        let dir = TempDir()
        let path = dir.path()
        _ = try KeychainFile.create(at: path, password: "pw")
        let fileMode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        let dirMode = try FileManager.default.attributesOfItem(atPath: dir.url.path)[.posixPermissions] as? Int
        #expect(fileMode == 0o600)
        #expect(dirMode == 0o700)
        #expect(fileStatus { _ = try KeychainFile.create(at: path, password: "other") } == Status.duplicateKeychain)
    }

    @Test("items survive closing and reopening; a reopened keychain with a password starts locked until unlocked")
    func reopen() throws {
        let path = TempDir().path()
        do {
            let file = try KeychainFile.create(at: path, password: "pw")
            try KeychainEngine(storage: file).add(genp("svc", "a", [Key.valueData: .data(Data("one".utf8))]))
            file.lock()
        }
        let file = try KeychainFile.open(at: path)
        #expect(file.lockState == .locked)
        let engine = KeychainEngine(storage: file)
        #expect(fileStatus { _ = try engine.secret("svc", "a") } == Status.interactionNotAllowed)
        #expect(fileStatus { try engine.add(genp("svc", "b")) } == Status.interactionNotAllowed)
        try file.unlock(password: "pw")
        #expect(try engine.secret("svc", "a") == "one")
    }

    @Test("a wrong password fails with errSecAuthFailed and writes nothing")
    func wrongPassword() throws {
        let path = TempDir().path()
        let created = try KeychainFile.create(at: path, password: "right")
        created.lock()
        let before = fileBytes(path) + fileBytes(path + "-wal")
        let file = try KeychainFile.open(at: path)
        #expect(fileStatus { try file.unlock(password: "wrong") } == Status.authFailed)
        #expect(file.lockState == .locked)
        #expect(fileBytes(path) + fileBytes(path + "-wal") == before)
    }

    @Test("changing the password re-wraps the key: the old one fails, the new one opens every item")
    func changePassword() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "old")
        let engine = KeychainEngine(storage: file)
        for i in 0..<5 { try engine.add(genp("svc", "a\(i)", [Key.valueData: .data(Data("s\(i)".utf8))])) }
        #expect(fileStatus { try file.changePassword(old: "nope", new: "new") } == Status.authFailed)
        try file.changePassword(old: "old", new: "new")
        file.lock()
        let reopened = try KeychainFile.open(at: path)
        #expect(fileStatus { try reopened.unlock(password: "old") } == Status.authFailed)
        try reopened.unlock(password: "new")
        let again = KeychainEngine(storage: reopened)
        for i in 0..<5 { #expect(try again.secret("svc", "a\(i)") == "s\(i)") }
    }

    @Test("locked after first unlock: afterFirstUnlock and always items stay readable, whenUnlocked ones do not")
    func afterFirstUnlock() throws {
        let file = try KeychainFile.create(at: TempDir().path(), password: "pw")
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("svc", "ui", [Key.valueData: .data(Data("u".utf8)), Key.accessible: .string("ak")]))
        try engine.add(genp("svc", "bg", [Key.valueData: .data(Data("b".utf8)), Key.accessible: .string("ck")]))
        try engine.add(genp("svc", "al", [Key.valueData: .data(Data("d".utf8)), Key.accessible: .string("dk")]))
        file.lockAfterFirstUnlock()
        #expect(file.lockState == .lockedAfterFirstUnlock)
        #expect(try engine.secret("svc", "bg") == "b")
        #expect(try engine.secret("svc", "al") == "d")
        #expect(fileStatus { _ = try engine.secret("svc", "ui") } == Status.interactionNotAllowed)
        #expect(fileStatus { try engine.delete(genp("svc", "ui")) } == Status.interactionNotAllowed)
        try engine.update(genp("svc", "bg"), with: [Key.valueData: .data(Data("b2".utf8))])
        try file.unlock(password: "pw")
        #expect(try engine.secret("svc", "ui") == "u")
        #expect(try engine.secret("svc", "bg") == "b2")
    }

    @Test("the auto-lock timeout locks the keychain to after-first-unlock")
    func autoLock() throws {
        // The keychain's clock is moved by the test: no sleeping, and no failure when the machine is slow.
        let file = try KeychainFile.create(at: TempDir().path(), password: "pw", settings: KeychainSettings(lockAfterTimeout: 60))
        let now = Locked(Date())
        file.withMutex { file.clock = { now.current }; file.unlockedAt = now.current }
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("svc", "a", [Key.valueData: .data(Data("x".utf8))]))
        now.withLock { $0 += 59 }
        #expect(file.lockState == .unlocked)
        now.withLock { $0 += 1 }
        #expect(file.lockState == .lockedAfterFirstUnlock)
        #expect(fileStatus { _ = try engine.secret("svc", "a") } == Status.interactionNotAllowed)
        try file.unlock(password: "pw")
        #expect(try engine.secret("svc", "a") == "x")
    }

    @Test("an empty password opens by itself and says so")
    func emptyPassword() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "")
        #expect(file.isEmptyPassword)
        try KeychainEngine(storage: file).add(genp("svc", "a", [Key.valueData: .data(Data("x".utf8))]))
        let reopened = try KeychainFile.open(at: path)
        #expect(reopened.lockState == .unlocked)
        #expect(try KeychainEngine(storage: reopened).secret("svc", "a") == "x")
    }

    @Test("another instance's lock is seen at the next operation; the keyring cache unlocks a later instance")
    func acrossInstances() throws {
        let path = TempDir().path()
        let first = try KeychainFile.create(at: path, password: "pw")
        try KeychainEngine(storage: first).add(genp("svc", "a", [Key.valueData: .data(Data("x".utf8))]))
        let second = try KeychainFile.open(at: path)
        // Unlocked through the kernel keyring cache when the keyring is available here.
        if second.lockState == .unlocked {
            #expect(try KeychainEngine(storage: second).secret("svc", "a") == "x")
        } else {
            try second.unlock(password: "pw")
        }
        first.lock()
        #expect(second.lockState == .locked)
        #expect(fileStatus { _ = try KeychainEngine(storage: second).secret("svc", "a") } == Status.interactionNotAllowed)
        #expect(try KeychainFile.open(at: path).lockState == .locked)
    }

    @Test("a cached read never hides another instance's write or delete")
    func cacheFollowsOtherWriters() throws {
        let path = TempDir().path()
        let first = try KeychainFile.create(at: path, password: "pw")
        let reader = KeychainEngine(storage: first)
        try reader.add(genp("svc", "a", [Key.valueData: .data(Data("one".utf8))]))
        #expect(try reader.secret("svc", "a") == "one")  // now cached
        let second = try KeychainFile.open(at: path)
        if second.lockState != .unlocked { try second.unlock(password: "pw") }
        let writer = KeychainEngine(storage: second)
        try writer.update(genp("svc", "a"), with: [Key.valueData: .data(Data("two".utf8))])
        #expect(try reader.secret("svc", "a") == "two")
        try writer.delete(genp("svc", "a"))
        #expect(fileStatus { _ = try reader.secret("svc", "a") } == Status.itemNotFound)
    }

    @Test("delete removes the file and its WAL; a missing keychain is errSecNoSuchKeychain")
    func deletion() throws {
        let path = TempDir().path()
        _ = try KeychainFile.create(at: path, password: "pw")
        try KeychainFile.delete(at: path)
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        #expect(fileStatus { try KeychainFile.delete(at: path) } == Status.noSuchKeychain)
        #expect(fileStatus { _ = try KeychainFile.open(at: path) } == Status.noSuchKeychain)
    }
}

@Suite("Keychain file: at rest, tampering, bad files")
struct KeychainFileProtectionTests {
    @Test("no stored secret, service, account or label appears in the file or its WAL")
    func atRest() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        let needles = ["SuperSecretValue-81f3", "com.example.VerySecretService", "alice.wonderland@example.com", "Label-Quartz-9"]
        try engine.add(genp(needles[1], needles[2], [Key.valueData: .data(Data(needles[0].utf8)), Key.label: .string(needles[3])]))
        try engine.add([Key.class: .string("inet"), Key.server: .string("server.example-hidden.org"), Key.account: .string(needles[2]),
                        Key.valueData: .data(Data(needles[0].utf8))])
        let bytes = fileBytes(path) + fileBytes(path + "-wal")
        #expect(bytes.count > 0)
        for needle in needles + ["server.example-hidden.org"] {
            #expect(bytes.range(of: Data(needle.utf8)) == nil, "found \(needle.prefix(6))… in the file")
        }
    }

    @Test("a flipped byte in one row is errSecDecode for that item only")
    func flippedByte() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("svc", "victim", [Key.valueData: .data(Data("v".utf8))]))
        try engine.add(genp("svc", "other", [Key.valueData: .data(Data("o".utf8))]))
        let victim = try #require(try engine.copyMatching(genp("svc", "victim", [Key.returnPersistentRef: .bool(true)]))?.data)
        let rowID = try #require(PersistentReference(data: victim)?.rowID)
        flipByte(path, table: "genp", column: "payload", rowID: rowID, offset: 30)
        let reopened = try KeychainFile.open(at: path)
        if reopened.lockState != .unlocked { try reopened.unlock(password: "pw") }
        let fresh = KeychainEngine(storage: reopened)
        #expect(fileStatus { _ = try fresh.secret("svc", "victim") } == Status.decode)
        #expect(try fresh.secret("svc", "other") == "o")
        let all = try fresh.copyMatching(genp("svc", "other", [Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true)]))
        #expect(all?.array?.count == 1)
    }

    @Test("two swapped rows both fail with errSecDecode; a third item is untouched")
    func swappedRows() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        for account in ["a", "b", "c"] { try engine.add(genp("svc", account, [Key.valueData: .data(Data(account.utf8))])) }
        rawSQL(path, """
            CREATE TEMP TABLE t AS SELECT rowid AS r, wrapped, payload FROM genp;
            UPDATE genp SET wrapped = (SELECT wrapped FROM t WHERE r = 2), payload = (SELECT payload FROM t WHERE r = 2) WHERE rowid = 1;
            UPDATE genp SET wrapped = (SELECT wrapped FROM t WHERE r = 1), payload = (SELECT payload FROM t WHERE r = 1) WHERE rowid = 2;
            """)
        let reopened = try KeychainFile.open(at: path)
        if reopened.lockState != .unlocked { try reopened.unlock(password: "pw") }
        let fresh = KeychainEngine(storage: reopened)
        #expect(fileStatus { _ = try fresh.secret("svc", "a") } == Status.decode)
        #expect(fileStatus { _ = try fresh.secret("svc", "b") } == Status.decode)
        #expect(try fresh.secret("svc", "c") == "c")
    }

    @Test("bad files give a typed error and are left unchanged", arguments: ["truncated", "not a keychain", "newer format", "empty"])
    func badFiles(_ kind: String) throws {
        let dir = TempDir()
        let path = dir.path()
        let expected: Int32
        switch kind {
        case "truncated":
            let file = try KeychainFile.create(at: path, password: "pw")
            try KeychainEngine(storage: file).add(genp("svc", "a"))
            rawSQL(path, "PRAGMA wal_checkpoint(TRUNCATE)")
            let data = fileBytes(path)
            try data.prefix(100).write(to: URL(fileURLWithPath: path))
            expected = Status.invalidKeychain
        case "not a keychain":
            try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
            try Data("just some text, not SQLite at all, padded to be longer than a header…".utf8).write(to: URL(fileURLWithPath: path))
            expected = Status.invalidKeychain
        case "newer format":
            _ = try KeychainFile.create(at: path, password: "pw")
            rawSQL(path, "UPDATE keystone_header SET value = CAST('99' AS BLOB) WHERE name = 'version'")
            expected = Status.wrongSecVersion
        default:
            try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
            try Data().write(to: URL(fileURLWithPath: path))
            expected = Status.invalidKeychain
        }
        let before = fileBytes(path)
        #expect(fileStatus { _ = try KeychainFile.open(at: path) } == expected)
        #expect(fileBytes(path) == before)
    }
}

@Suite("Keychain file: crashes and many processes", .serialized)
struct KeychainFileProcessTests {
    /// The stress child, built next to the test bundle by `swift test`.
    static var stressBinary: String? {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("KeychainFileStress").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return nil
    }

    func launch(_ arguments: [String]) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(Self.stressBinary, "build KeychainFileStress first (swift build)"))
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        return (process, pipe)
    }

    @Test("a writer killed with SIGKILL at random moments never loses a write it reported done, and the file always opens")
    func crash() throws {
        let path = TempDir().path()
        _ = try KeychainFile.create(at: path, password: "pw")
        var generator = SystemRandomNumberGenerator()
        var reported = 0
        for round in 0..<20 {
            let (child, pipe) = try launch([path, "pw", "write-loop", "r\(round)"])
            // Kill after a random number of acknowledged writes (a signal from the child, not a clock): the kill
            // lands somewhere inside the next write.
            let reader = LineReader(pipe)
            let target = Int.random(in: 1...40, using: &generator)
            var done: [Int] = []
            while done.count < target, let line = reader.next(), let i = Int(line.dropFirst(5)) { done.append(i) }
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
            while let line = reader.next() { if let i = Int(line.dropFirst(5)) { done.append(i) } }
            let file = try KeychainFile.open(at: path)
            if file.lockState != .unlocked { try file.unlock(password: "pw") }
            let engine = KeychainEngine(storage: file)
            for i in done {
                #expect(try engine.secret("stress", "r\(round)-\(i)") == "value-\(i)")
            }
            reported += done.count
        }
        #expect(reported > 0, "the children reported no completed write")
    }

    @Test("4 processes × 500 mixed operations: the final contents equal the effect of the operations that succeeded")
    func concurrentProcesses() throws {
        let path = TempDir().path()
        _ = try KeychainFile.create(at: path, password: "pw")
        let children = try (0..<4).map { try launch([path, "pw", "mixed", "p\($0)", "\(1234 + $0)", "500"]) }
        var expected: [String: String] = [:]
        for (child, pipe) in children {
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            child.waitUntilExit()
            #expect(child.terminationStatus == 0)
            for line in output.split(separator: "\n") {
                let parts = line.split(separator: " ").map(String.init)
                guard parts.count == 4, parts[0] == "ok" else { continue }
                switch parts[1] {
                case "add", "update": expected[parts[2]] = parts[3]
                default: expected[parts[2]] = nil
                }
            }
        }
        let file = try KeychainFile.open(at: path)
        if file.lockState != .unlocked { try file.unlock(password: "pw") }
        let engine = KeychainEngine(storage: file)
        let all = try engine.copyMatching([Key.class: .string("genp"), Key.service: .string("stress"),
                                           Key.matchLimit: .string(Key.matchLimitAll), Key.returnAttributes: .bool(true), Key.returnData: .bool(true)])
        var actual: [String: String] = [:]
        for entry in all?.array ?? [] {
            guard let a = entry.attributes, let account = a[Key.account]?.stringValue, let data = a[Key.valueData]?.dataValue else { continue }
            actual[account] = String(decoding: data, as: UTF8.self)
        }
        #expect(!expected.isEmpty)
        #expect(actual == expected)
    }
}
