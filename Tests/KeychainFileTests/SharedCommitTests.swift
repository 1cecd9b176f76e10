import Foundation
import KeychainEngine
@testable import KeychainFile
import Testing

/// Two instances on one file in this process are two connections with their own log descriptor, commit-file
/// descriptor (their own `flock`) and mapping: to the commit file they are two processes.
private func openAgain(_ path: String) throws -> (KeychainFile, KeychainEngine) {
    let file = try KeychainFile.open(at: path)
    if file.lockState != .unlocked { try file.unlock(password: "pw") }
    return (file, KeychainEngine(storage: file))
}

/// Adds two items: the first commit sets group commit up (SQLite flushes it), the second joins the commit file.
private func warmUp(_ engine: KeychainEngine, _ name: String) throws {
    for i in 0..<2 { try engine.add(genp("shared", "\(name)-warm-\(i)", [Key.valueData: .data(Data("w".utf8))])) }
}

/// Waits, polling a condition another thread or process makes true (not a clock: the limit only turns a hang into a failure).
private func eventually(_ condition: () -> Bool) -> Bool {
    for _ in 0..<20_000 {
        if condition() { return true }
        usleep(500)
    }
    return condition()
}

/// Writes the fields of a commit file (layout 1) as a planted file would hold them.
private func plantCommitFile(_ path: String, fields: [Int: UInt64], mode: mode_t = 0o600) throws {
    var bytes = Data(count: 4096)
    for (offset, value) in fields {
        withUnsafeBytes(of: value) { bytes.replaceSubrange(offset..<(offset + 8), with: $0) }
    }
    unlink(path)
    #expect(FileManager.default.createFile(atPath: path, contents: bytes))
    chmod(path, mode)
}

@Suite("Keychain file: group commit across processes", .serialized)
struct SharedCommitTests {
    @Test("writers of other processes that commit while one process flushes are covered by the next flush and do not flush themselves")
    func sharedAcrossProcesses() throws {
        let path = TempDir().path()
        let a = try KeychainFile.create(at: path, password: "pw")
        let engineA = KeychainEngine(storage: a)
        let (b, engineB) = try openAgain(path)
        let (c, engineC) = try openAgain(path)
        try warmUp(engineA, "a"); try warmUp(engineB, "b"); try warmUp(engineC, "c")
        let sharedA = try #require(a.sharedCommit, "group commit across processes was not set up")
        let sharedB = try #require(b.sharedCommit), sharedC = try #require(c.sharedCommit)
        #expect(sharedA.isJoined && sharedB.isJoined && sharedC.isJoined)
        // A stopped machine must not turn the test into a flush of their own: they wait for the held leader.
        sharedB.patienceOverride = 600_000_000_000
        sharedC.patienceOverride = 600_000_000_000
        let ledB = sharedB.ledFlushes, ledC = sharedC.ledFlushes

        // A leads a flush and is held with the flush lock, before it reads which commits its flush covers.
        let held = Gate(), proceed = Gate()
        let leads = Collected<Int>()
        sharedA.leaderHook = {
            leads.append(1)
            if leads.all.count == 1 { held.release(); proceed.wait() }
        }
        let waiting = Collected<String>()
        sharedB.waitingHook = { waiting.append("b") }
        sharedC.waitingHook = { waiting.append("c") }
        let returned = Collected<String>()
        let all = DispatchGroup()
        func writer(_ name: String, _ engine: KeychainEngine) {
            all.enter()
            Thread.detachNewThread {
                let status = fileStatus { try engine.add(genp("shared", name, [Key.valueData: .data(Data(name.utf8))])) }
                returned.append("\(name) \(status)")
                all.leave()
            }
        }
        writer("a", engineA)
        guard held.wait(seconds: 60) else {
            Issue.record("A did not lead a flush")
            proceed.release()
            return
        }
        writer("b", engineB)
        writer("c", engineC)
        #expect(eventually { waiting.all.count == 2 }, "B and C did not wait for A's flush")
        #expect(returned.all.isEmpty, "a write returned before a flush covering it: \(returned.all)")
        proceed.release()
        #expect(all.wait(timeout: .now() + 60) == .success)
        #expect(Set(returned.all) == ["a 0", "b 0", "c 0"])
        #expect(sharedB.ledFlushes == ledB && sharedC.ledFlushes == ledC, "B or C flushed although A's flush covered them")
        #expect(sharedB.coveredByOthers >= 1 && sharedC.coveredByOthers >= 1)
        let (_, reader) = try openAgain(path)
        for name in ["a", "b", "c"] { #expect(try reader.secret("shared", name) == name) }
    }

    @Test("a process killed with SIGKILL while it holds the flush lock does not block the others: one of them takes over the flush")
    func killedLeaderTakenOver() throws {
        let stress = try #require(KeychainFileProcessTests.stressBinary, "build KeychainFileStress first (swift build)")
        _ = stress
        let path = TempDir().path()
        let file = try KeychainFile.create(at: path, password: "pw")
        let engine = KeychainEngine(storage: file)
        try warmUp(engine, "w")
        let shared = try #require(file.sharedCommit)
        // No giving up on the holder: only its death can let this writer through.
        shared.patienceOverride = 600_000_000_000
        let led = shared.ledFlushes
        let (holder, pipe) = try KeychainFileProcessTests().launch([path, "pw", "hold-commit-lock"])
        defer { if holder.isRunning { kill(holder.processIdentifier, SIGKILL); holder.waitUntilExit() } }
        #expect(LineReader(pipe).next() == "held")

        let waiting = Gate()
        shared.waitingHook = { waiting.release() }
        let done = DispatchGroup()
        let status = Collected<Int32>()
        done.enter()
        Thread.detachNewThread {
            status.append(fileStatus { try engine.add(genp("shared", "after-kill", [Key.valueData: .data(Data("k".utf8))])) })
            done.leave()
        }
        #expect(waiting.wait(seconds: 60), "the writer did not wait for the process holding the flush lock")
        #expect(status.all.isEmpty, "the write returned while another process held the flush lock, unflushed")
        kill(holder.processIdentifier, SIGKILL)
        holder.waitUntilExit()
        #expect(done.wait(timeout: .now() + 60) == .success, "the writer stayed blocked after the lock holder was killed")
        #expect(status.all == [0])
        #expect(shared.ledFlushes == led + 1, "the writer did not flush the log itself after the holder died")
        #expect(try engine.secret("shared", "after-kill") == "k")
    }

    @Test("4 writer processes adding at once share the commit file, and none loses an add it reported done when all are killed with SIGKILL")
    func processesKilled() throws {
        let path = TempDir().path()
        _ = try KeychainFile.create(at: path, password: "pw")
        var generator = SystemRandomNumberGenerator()
        let target = Int.random(in: 20...80, using: &generator)
        var children: [(Process, LineReader, String)] = []
        for p in 0..<4 {
            let (child, pipe) = try KeychainFileProcessTests().launch([path, "pw", "write-loop", "p\(p)"])
            children.append((child, LineReader(pipe), "p\(p)"))
        }
        var done: [String: [Int]] = [:]
        // Each child reports its adds; all are killed once each has reported `target` (a signal from them, not a clock).
        for (_, reader, prefix) in children {
            while done[prefix, default: []].count < target, let line = reader.next(), let i = Int(line.dropFirst(5)) {
                done[prefix, default: []].append(i)
            }
        }
        for (child, _, _) in children { kill(child.processIdentifier, SIGKILL) }
        for (child, reader, prefix) in children {
            child.waitUntilExit()
            while let line = reader.next() { if let i = Int(line.dropFirst(5)) { done[prefix, default: []].append(i) } }
        }
        let (_, engine) = try openAgain(path)
        var total = 0
        for (prefix, adds) in done {
            for i in adds { #expect(try engine.secret("stress", "\(prefix)-\(i)") == "value-\(i)") }
            total += adds.count
        }
        #expect(total >= 4 * target)
        // Every add after a process's first took a ticket of the commit file.
        let committed = fileBytes(path + "-commit").withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 40, as: UInt64.self) }
        #expect(committed >= UInt64(total - 4), "the processes did not share the commit file")
    }

    @Test("a commit file planted by another user, open to others, a symbolic link, or holding garbage is refused or reset: writes still flush")
    func plantedCommitFile() throws {
        // Open to group and others: refused, the instance flushes alone.
        do {
            let path = TempDir().path()
            let file = try KeychainFile.create(at: path, password: "pw")
            try plantCommitFile(path + "-commit", fields: [0: SharedCommit.magic], mode: 0o644)
            let engine = KeychainEngine(storage: file)
            try warmUp(engine, "mode")
            #expect(file.sharedCommit == nil, "a commit file others can read and write was used")
            #expect(try engine.secret("shared", "mode-warm-1") == "w")
        }
        // A symbolic link to a file of this user: not followed.
        do {
            let dir = TempDir()
            let path = dir.path()
            let file = try KeychainFile.create(at: path, password: "pw")
            let elsewhere = dir.path("elsewhere")
            try plantCommitFile(elsewhere, fields: [:])
            try FileManager.default.createSymbolicLink(atPath: path + "-commit", withDestinationPath: elsewhere)
            try warmUp(KeychainEngine(storage: file), "link")
            #expect(file.sharedCommit == nil, "a symbolic link was followed")
            #expect(fileBytes(elsewhere) == Data(count: 4096), "the link's target was written")
        }
        // Owned by another user (root can plant one to test it).
        if geteuid() == 0 {
            let path = TempDir().path()
            let file = try KeychainFile.create(at: path, password: "pw")
            try plantCommitFile(path + "-commit", fields: [0: SharedCommit.magic])
            chown(path + "-commit", 65534, 65534)
            try warmUp(KeychainEngine(storage: file), "owner")
            #expect(file.sharedCommit == nil, "another user's commit file was used")
        }
        // This user's file, for this very log, claiming that far more was flushed than was ever committed: reset, and
        // the write is flushed by its own process.
        do {
            let path = TempDir().path()
            let file = try KeychainFile.create(at: path, password: "pw")
            var log = stat()
            #expect(stat(path + "-wal", &log) == 0)
            try plantCommitFile(path + "-commit", fields: [
                0: SharedCommit.magic, 8: SharedCommit.layout, 16: 7, 24: UInt64(log.st_dev), 32: UInt64(log.st_ino),
                40: 10, 48: 1 << 40,
            ])
            let engine = KeychainEngine(storage: file)
            try warmUp(engine, "lie")
            let shared = try #require(file.sharedCommit)
            let led = shared.ledFlushes
            try engine.add(genp("shared", "after-lie", [Key.valueData: .data(Data("l".utf8))]))
            #expect(shared.ledFlushes == led + 1, "a write returned on the planted file's word, unflushed")
            #expect(shared.coveredByOthers == 0)
            #expect(shared.counters.flushed <= shared.counters.committed)
        }
        // Garbage of the right owner and mode: reset and used.
        do {
            let path = TempDir().path()
            let file = try KeychainFile.create(at: path, password: "pw")
            let garbage = Data((0..<4096).map { _ in UInt8.random(in: 0...255) })
            #expect(FileManager.default.createFile(atPath: path + "-commit", contents: garbage))
            chmod(path + "-commit", 0o600)
            let engine = KeychainEngine(storage: file)
            try warmUp(engine, "garbage")
            let shared = try #require(file.sharedCommit)
            #expect(shared.isJoined)
            try engine.add(genp("shared", "after-garbage", [Key.valueData: .data(Data("g".utf8))]))
            #expect(try engine.secret("shared", "after-garbage") == "g")
        }
    }
}
