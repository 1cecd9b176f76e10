import Foundation
import KeychainEngine
@testable import KeychainFile
import Testing

/// A gate a test opens once; waiting threads pass after.
final class Gate: @unchecked Sendable {
    private let condition = NSCondition()
    private var open = false
    func wait() {
        condition.lock()
        while !open { condition.wait() }
        condition.unlock()
    }
    /// Waits until the gate opens; false when it stayed shut for `seconds` (a hang turned into a failure).
    func wait(seconds: TimeInterval) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date(timeIntervalSinceNow: seconds)
        while !open { if !condition.wait(until: deadline) { return open } }
        return true
    }
    func release() {
        condition.lock()
        open = true
        condition.broadcast()
        condition.unlock()
    }
}

/// A thread-safe list.
final class Collected<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [T] = []
    func append(_ item: T) { lock.lock(); items.append(item); lock.unlock() }
    var all: [T] { lock.lock(); defer { lock.unlock() }; return items }
}

/// Waits, polling a condition another thread makes true (not a clock: the limit only turns a hang into a failure).
private func eventually(_ condition: () -> Bool) -> Bool {
    for _ in 0..<20_000 {
        if condition() { return true }
        usleep(500)
    }
    return condition()
}

@Suite("Keychain file: group commit", .serialized)
struct GroupCommitTests {
    @Test("writers that commit while a flush runs share the next flush, and each gets its own result: a duplicate fails alone with errSecDuplicateItem")
    func sharedFlush() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        // The first write sets group commit up (SQLite flushes that one itself); the second is the first to share.
        try engine.add(genp("group", "existing", [Key.valueData: .data(Data("old".utf8))]))
        try engine.add(genp("group", "warm", [Key.valueData: .data(Data("w".utf8))]))
        #expect(file.logFlushCount == 1, "group commit did not take over the flushes")

        // The first leader is held inside its flush; everyone else commits meanwhile.
        let gate = Gate()
        let held = Gate()
        let leaders = Collected<Int>()
        file.withMutex {
            file.testHooks.beforeLogFlush = {
                leaders.append(1)
                if leaders.all.count == 1 { held.release(); gate.wait() }
            }
        }
        let flushesBefore = file.logFlushCount
        let results = Collected<(String, Int32)>()
        let returned = Collected<String>()
        let all = DispatchGroup()
        func writer(_ account: String, value: String) {
            all.enter()
            Thread.detachNewThread {
                let status = fileStatus { try engine.add(genp("group", account, [Key.valueData: .data(Data(value.utf8))])) }
                results.append((account, status))
                returned.append(account)
                all.leave()
            }
        }
        writer("lead", value: "lead")
        guard held.wait(seconds: 60) else {
            Issue.record("the writer did not flush the log itself")
            gate.release()
            return
        }
        let committedBefore = file.logCommitsWritten
        for i in 0..<5 { writer("w\(i)", value: "v\(i)") }
        // Two duplicates of an item already there: they fail at once, without waiting for anyone's flush.
        writer("existing", value: "dup-1")
        writer("existing", value: "dup-2")
        #expect(eventually { file.logCommitsWritten == committedBefore + 5 }, "the five writers did not commit while the flush was held")
        #expect(eventually { returned.all.filter { $0 == "existing" }.count == 2 }, "a failing writer waited for another's flush")
        #expect(returned.all.allSatisfy { $0 == "existing" }, "a write returned before the flush that covers it: \(returned.all)")
        gate.release()
        #expect(all.wait(timeout: .now() + 60) == .success)

        var statuses: [String: [Int32]] = [:]
        for (account, status) in results.all { statuses[account, default: []].append(status) }
        #expect(statuses["lead"] == [0])
        for i in 0..<5 { #expect(statuses["w\(i)"] == [0]) }
        #expect(statuses["existing"] == [Status.duplicateItem, Status.duplicateItem])
        // The held leader's flush, then one flush for the five that queued behind it.
        #expect(file.logFlushCount - flushesBefore == 2, "the queued writers did not share one flush")
        #expect(try engine.secret("group", "existing") == "old")
        for i in 0..<5 { #expect(try engine.secret("group", "w\(i)") == "v\(i)") }
    }

    @Test("a writer's failure rolls back only its own transaction while others commit around it")
    func failureIsolated() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("iso", "taken", [Key.valueData: .data(Data("t".utf8))]))
        let results = Collected<(Int, Int32)>()
        DispatchQueue.concurrentPerform(iterations: 64) { i in
            // Every fourth writer collides with the item already there.
            let account = i % 4 == 0 ? "taken" : "a\(i)"
            results.append((i, fileStatus { try engine.add(genp("iso", account, [Key.valueData: .data(Data("v\(i)".utf8))])) }))
        }
        for (i, status) in results.all {
            #expect(status == (i % 4 == 0 ? Status.duplicateItem : 0), "writer \(i)")
        }
        let again = try KeychainFile.open(at: path)
        if again.lockState != .unlocked { try again.unlock(password: "pw") }
        let reopened = KeychainEngine(storage: again)
        for i in 0..<64 where i % 4 != 0 { #expect(try reopened.secret("iso", "a\(i)") == "v\(i)") }
        #expect(try reopened.secret("iso", "taken") == "t")
    }

    @Test("with group commit off, SQLite flushes every commit itself and no flush is shared")
    func groupCommitOff() throws {
        let file = try KeychainFile.create(at: TempDir().path(), password: "pw")
        file.groupCommitEnabled = false
        let engine = KeychainEngine(storage: file)
        for i in 0..<4 { try engine.add(genp("off", "a\(i)", [Key.valueData: .data(Data("v".utf8))])) }
        #expect(file.logFlushCount == 0)
        file.groupCommitEnabled = true
        for i in 4..<8 { try engine.add(genp("off", "a\(i)", [Key.valueData: .data(Data("v".utf8))])) }
        #expect(file.logFlushCount == 3, "the first write after turning it on sets it up; the three after share flushes")
    }
}

@Suite("Keychain file: group commit under SIGKILL", .serialized)
struct GroupCommitCrashTests {
    @Test("8 writer threads killed with SIGKILL during group commit never lose a write they reported done")
    func killedDuringGroupCommit() throws {
        let path = TempDir().path()
        _ = try KeychainFile.create(at: path, password: "pw")
        var generator = SystemRandomNumberGenerator()
        var reported = 0
        for round in 0..<8 {
            let (child, pipe) = try KeychainFileProcessTests().launch([path, "pw", "group-write-loop", "g\(round)", "8"])
            // Kill after a random number of acknowledged writes (a signal from the child, not a clock).
            let reader = LineReader(pipe)
            let target = Int.random(in: 8...120, using: &generator)
            var done: [(Int, Int)] = []
            func parse(_ line: String) -> (Int, Int)? {
                let parts = line.split(separator: " ")
                guard parts.count == 3, parts[0] == "done", let t = Int(parts[1]), let i = Int(parts[2]) else { return nil }
                return (t, i)
            }
            while done.count < target, let line = reader.next(), let entry = parse(line) { done.append(entry) }
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
            while let line = reader.next() { if let entry = parse(line) { done.append(entry) } }
            let file = try KeychainFile.open(at: path)
            if file.lockState != .unlocked { try file.unlock(password: "pw") }
            let engine = KeychainEngine(storage: file)
            for (t, i) in done {
                #expect(try engine.secret("stress", "g\(round)-\(t)-\(i)") == "value-\(t)-\(i)")
            }
            reported += done.count
        }
        #expect(reported > 0, "the children reported no completed write")
    }
}

@Suite("Keychain file: readers in parallel", .serialized)
struct ParallelReaderTests {
    @Test("a read runs while another thread's read is inside its transaction, and while a writer's flush is held")
    func readersDoNotWaitForEachOther() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("par", "a", [Key.valueData: .data(Data("1".utf8))]))
        try engine.add(genp("par", "b", [Key.valueData: .data(Data("2".utf8))]))

        // Reader 1 stays inside its read transaction until the gate opens.
        let inside = Gate(), leave = Gate()
        let first = DispatchGroup()
        first.enter()
        Thread.detachNewThread {
            _ = try? file.read { _ in inside.release(); leave.wait() }
            first.leave()
        }
        #expect(inside.wait(seconds: 60))
        // Reader 2, on another thread, reads and decrypts meanwhile.
        let second = DispatchGroup()
        let secret = Collected<String?>()
        second.enter()
        Thread.detachNewThread {
            secret.append(try? engine.secret("par", "b"))
            second.leave()
        }
        let finished = second.wait(timeout: .now() + 30) == .success
        leave.release()
        #expect(finished, "a read waited for another thread's read")
        #expect(first.wait(timeout: .now() + 30) == .success)
        #expect(secret.all == ["2"])

        // A writer held inside its flush: a read of the item it wrote, on another thread, does not wait for it.
        let flushing = Gate(), proceed = Gate()
        file.withMutex { file.testHooks.beforeLogFlush = { flushing.release(); proceed.wait() } }
        let writer = DispatchGroup()
        writer.enter()
        Thread.detachNewThread {
            _ = try? engine.update(genp("par", "a"), with: [Key.valueData: .data(Data("3".utf8))])
            writer.leave()
        }
        #expect(flushing.wait(seconds: 60))
        let reader = DispatchGroup()
        let seen = Collected<String?>()
        reader.enter()
        Thread.detachNewThread {
            seen.append(try? engine.secret("par", "b"))
            reader.leave()
        }
        let read = reader.wait(timeout: .now() + 30) == .success
        proceed.release()
        #expect(read, "a read waited for a writer's flush")
        #expect(writer.wait(timeout: .now() + 30) == .success)
        #expect(seen.all == ["2"])
        #expect(try engine.secret("par", "a") == "3")
    }

    @Test("8 threads reading and decrypting at once all get their own items, across a lock and unlock")
    func manyReaders() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        file.cachesDecryptedItems = false
        let engine = KeychainEngine(storage: file)
        for i in 0..<64 { try engine.add(genp("many", "a\(i)", [Key.valueData: .data(Data("v\(i)".utf8))])) }
        let wrong = Collected<String>()
        DispatchQueue.concurrentPerform(iterations: 8) { t in
            for n in 0..<200 {
                let i = (n * 7 + t) % 64
                if (try? engine.secret("many", "a\(i)")) != "v\(i)" { wrong.append("a\(i)") }
            }
        }
        #expect(wrong.all.isEmpty)
        file.lock()
        #expect(fileStatus { _ = try engine.secret("many", "a1") } == Status.interactionNotAllowed)
        try file.unlock(password: "pw")
        #expect(try engine.secret("many", "a1") == "v1")
    }
}

@Suite("Keychain file: group commit and other processes' writes", .serialized)
struct GroupCommitForeignWriterTests {
    @Test("a row another process (the sqlite3 tool) changed after group-committed writes is read back, as damaged")
    func foreignWriteAfterGroupCommit() throws {
        guard let tool = ["/usr/bin/sqlite3", "/usr/local/bin/sqlite3"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            Issue.record("sqlite3 is not installed (apt-get install sqlite3)")
            return
        }
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("foreign", "a", [Key.valueData: .data(Data("A".utf8))]))
        try engine.add(genp("foreign", "b", [Key.valueData: .data(Data("B".utf8))]))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = [path, "UPDATE genp SET payload = (SELECT payload FROM genp WHERE rowid = 2) WHERE rowid = 1;"]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(fileStatus { _ = try engine.secret("foreign", "a") } == Status.decode)
        #expect(try engine.secret("foreign", "b") == "B")
    }
}

extension GroupCommitForeignWriterTests {
    @Test("rows swapped by the sqlite3 tool in a new keychain read back as damaged, and later writes reach the file others read",
          arguments: [0, 1, 2])
    func foreignSwapAfterDirectWrites(variant: Int) throws {
        guard let tool = ["/usr/bin/sqlite3", "/usr/local/bin/sqlite3"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            Issue.record("sqlite3 is not installed (apt-get install sqlite3)")
            return
        }
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        if variant == 1 { file.groupCommitEnabled = false }
        if variant == 2 { file.withMutex { file.pooledReads = false } }
        func item(_ account: String) -> StoredItem {
            StoredItem(itemClass: .genericPassword, attributes: [Key.service: .string("svc"), Key.account: .string(account),
                       Key.accessGroup: .string("g"), Key.synchronizable: .bool(false), Key.accessible: .string("ak")],
                       secret: Data(account.utf8))
        }
        let damaged = try file.write { try $0.insert(item("a")) }
        _ = try file.write { try $0.insert(item("b")) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = [path, "UPDATE genp SET payload = (SELECT payload FROM genp WHERE rowid <> \(damaged) LIMIT 1), wrapped = (SELECT wrapped FROM genp WHERE rowid <> \(damaged) LIMIT 1) WHERE rowid = \(damaged);"]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let direct = try file.read { try $0.candidate(in: .genericPassword, rowID: damaged) }
        guard case .unreadable? = direct else { Issue.record("not reported damaged: \(String(describing: direct))"); return }
        // The engine goes over the table (search, update and delete of the others): the damaged row stays readable as damaged.
        let engine = KeychainEngine(storage: file)
        _ = try? engine.copyMatching([Key.class: .string("genp"), Key.matchLimit: .string(Key.matchLimitAll), Key.returnData: .bool(true)])
        #expect(fileStatus { try engine.update([Key.class: .string("genp"), Key.service: .string("svc")], with: [Key.label: .string("touched")]) } == 0)
        #expect(fileStatus { try engine.delete([Key.class: .string("genp"), Key.account: .string("b")]) } == 0)
        // The log the instance writes is the one at the file's name (the sqlite3 tool did not take it as the last
        // connection and delete it), so a new instance sees the writes.
        var log = stat()
        #expect(stat(path + "-wal", &log) == 0 && log.st_size > 0)
        let again = try KeychainFile.open(at: path)
        if again.lockState != .unlocked { try again.unlock(password: "pw") }
        #expect(try again.read { try $0.candidates(in: .genericPassword, matching: [Key.account: .string("b")]) }.isEmpty)
        #expect(try file.read { try $0.candidate(in: .genericPassword, rowID: damaged) } != nil)
    }
}
