import Foundation
import KeychainEngine
@testable import KeychainFile
import Testing

// Reads on pooled connections use a copy of the instance's state (keys, format version, lock epoch) made under the
// mutex and kept while nothing changed (`ReaderPool.swift`). These tests read on connections that already hold such a
// copy (a read before warms them) and check that every change a read must see still reaches it: another instance's
// lock (through the file only), the auto-lock timeout (the clock only), another instance's writes, this instance's
// writes from another thread.

@Suite("Keychain file: reads in parallel")
struct ParallelReadTests {
    @Test("8 threads reading while a writer updates every item get only their item's secret, never older than one they saw, and the last write once it returned")
    func readersWhileWriterUpdates() throws {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        file.cachesDecryptedItems = false
        let engine = KeychainEngine(storage: file)
        let items = 16, rounds = 10
        for i in 0..<items { try engine.add(genp("par", "a\(i)", [Key.valueData: .data(Data("a\(i)-0".utf8))])) }
        let problems = Collected<String>()
        let writerDone = Gate()
        let readers = DispatchGroup()
        for t in 0..<8 {
            readers.enter()
            Thread.detachNewThread {
                defer { readers.leave() }
                var seen = [Int](repeating: 0, count: items)
                func check(_ i: Int, last: Bool) {
                    guard let value = try? engine.secret("par", "a\(i)") else { problems.append("a\(i): read failed"); return }
                    let parts = value.split(separator: "-")
                    guard parts.count == 2, parts[0] == "a\(i)", let round = Int(parts[1]) else {
                        problems.append("a\(i): another item's secret"); return
                    }
                    if round < seen[i] { problems.append("a\(i): round \(round) after \(seen[i])") }
                    seen[i] = round
                    if last && round != rounds { problems.append("a\(i): round \(round) after the writer returned") }
                }
                var i = t % items
                while !writerDone.wait(seconds: 0) {
                    check(i, last: false)
                    i = (i + 1) % items
                }
                // Reads that start after the writer returned see its last round.
                for i in 0..<items { check(i, last: true) }
            }
        }
        let writer = DispatchGroup()
        writer.enter()
        Thread.detachNewThread {
            defer { writer.leave() }
            for round in 1...rounds {
                for i in 0..<items {
                    do { try engine.update(genp("par", "a\(i)"), with: [Key.valueData: .data(Data("a\(i)-\(round)".utf8))]) } catch {
                        problems.append("update a\(i) failed: \(error)")
                    }
                }
            }
        }
        #expect(writer.wait(timeout: .now() + 120) == .success, "the writer did not finish")
        writerDone.release()
        #expect(readers.wait(timeout: .now() + 120) == .success, "the readers did not finish")
        #expect(problems.all.isEmpty, "\(problems.all.prefix(10))")
    }

    @Test("4 threads reading an unchanged keychain do not invalidate each other's copies of its state (they took the mutex at every read)")
    func readersKeepTheirCopies() throws {
        let file = try KeychainFile.create(at: TempDir().path(), password: "pw")
        file.cachesDecryptedItems = false
        let engine = KeychainEngine(storage: file)
        for i in 0..<64 { try engine.add(genp("par", "a\(i)", [Key.valueData: .data(Data("v\(i)".utf8))])) }
        let before = file.stateGeneration.load(ordering: .acquiring)
        let wrong = Collected<Int>()
        DispatchQueue.concurrentPerform(iterations: 4) { t in
            for n in 0..<500 where (try? engine.secret("par", "a\((n + t) % 64)")) != "v\((n + t) % 64)" { wrong.append(n) }
        }
        #expect(wrong.all.isEmpty)
        #expect(file.stateGeneration.load(ordering: .acquiring) == before)
    }

    /// A new keychain file with one item ("par"/"a" = "x") read three times through `engine` (warming this thread's
    /// pooled connections: they now hold a copy of the keys), and a second, unlocked instance of the same file.
    private static func warmReaderAndAnotherInstance() throws -> (file: KeychainFile, engine: KeychainEngine, other: KeychainFile) {
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("par", "a", [Key.valueData: .data(Data("x".utf8))]))
        for _ in 0..<3 { #expect(try engine.secret("par", "a") == "x") }
        let other = try KeychainFile.open(at: path)
        if other.lockState != .unlocked { try other.unlock(password: "pw") }
        return (file, engine, other)
    }

    @Test("a read on a connection that read before sees another instance's lock, with nothing else telling this instance")
    func anotherInstanceLockSeenByWarmReader() throws {
        let (file, engine, other) = try Self.warmReaderAndAnotherInstance()
        other.lock()
        #expect(fileStatus { _ = try engine.secret("par", "a") } == Status.interactionNotAllowed)
        #expect(file.lockState == .locked)
    }

    @Test("a read on a connection that read before sees another instance's write and unlock")
    func anotherInstanceWriteSeenByWarmReader() throws {
        let (file, engine, other) = try Self.warmReaderAndAnotherInstance()
        try KeychainEngine(storage: other).update(genp("par", "a"), with: [Key.valueData: .data(Data("y".utf8))])
        #expect(try engine.secret("par", "a") == "y")
        other.lock()
        #expect(fileStatus { _ = try engine.secret("par", "a") } == Status.interactionNotAllowed)
        try other.unlock(password: "pw")
        // This instance finds the keys in the keyring cache when the kernel keyring is available here.
        if file.lockState == .unlocked { #expect(try engine.secret("par", "a") == "y") }
    }

    @Test("a read on a connection that read before sees the auto-lock timeout pass, with only the clock moving")
    func timeoutSeenByWarmReader() throws {
        let file = try KeychainFile.create(at: TempDir().path(), password: "pw", settings: KeychainSettings(lockAfterTimeout: 60))
        let now = Locked(Date())
        file.withMutex { file.clock = { now.current }; file.unlockedAt = now.current }
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("par", "a", [Key.valueData: .data(Data("x".utf8))]))
        for _ in 0..<3 { #expect(try engine.secret("par", "a") == "x") }
        now.withLock { $0 += 59 }
        #expect(try engine.secret("par", "a") == "x")
        now.withLock { $0 += 1 }
        #expect(fileStatus { _ = try engine.secret("par", "a") } == Status.interactionNotAllowed)
    }

    @Test("reads on connections that read before see this instance's lock and unlock, made from another thread")
    func ownLockFromAnotherThread() throws {
        let file = try KeychainFile.create(at: TempDir().path(), password: "pw")
        let engine = KeychainEngine(storage: file)
        try engine.add(genp("par", "a", [Key.valueData: .data(Data("x".utf8))]))
        for _ in 0..<3 { #expect(try engine.secret("par", "a") == "x") }
        let done = DispatchGroup()
        done.enter()
        Thread.detachNewThread { file.lock(); done.leave() }
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(fileStatus { _ = try engine.secret("par", "a") } == Status.interactionNotAllowed)
        try file.unlock(password: "pw")
        #expect(try engine.secret("par", "a") == "x")
    }
}
