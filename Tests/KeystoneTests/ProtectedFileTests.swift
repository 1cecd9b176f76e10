import Foundation
import Keystone
import KeystoneProtectedFiles
import KeychainEngine
import KeystoneTesting
import Testing

/// A temporary directory removed at the end of the test.
final class ScratchDirectory {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-pf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
    func file(_ name: String) -> URL { url.appendingPathComponent(name) }
    /// Names in the directory (temporary files included).
    var names: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).sorted() }
}

/// Protected files over an InMemoryKeychain with 4 KiB chunks (the smallest), so multi-chunk files stay small.
struct ProtectedFileFixture {
    let memory = InMemoryKeychain()
    let files: ProtectedFiles
    let scratch: ScratchDirectory
    static let chunk = 4096
    /// A sealed chunk on disk: plaintext and tag.
    static let sealedChunk = chunk + 16

    init() throws {
        files = try ProtectedFiles(keychain: Keychain(store: memory), chunkSize: Self.chunk)
        scratch = try ScratchDirectory()
    }

    static func content(_ count: Int) -> Data { Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }) }

    /// The header of sealed format 2: 68 bytes, and the 65-byte ephemeral key for completeUnlessOpen.
    static func headerLength(_ protection: FileProtection) -> Int { protection == .completeUnlessOpen ? 133 : 68 }
}

func mode(of url: URL) throws -> Int {
    var info = stat()
    guard lstat(url.path, &info) == 0 else { throw KeychainError.itemNotFound }
    return Int(info.st_mode & 0o777)
}

func expectDecodeFailure(_ files: ProtectedFiles, _ url: URL, sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        let data = try files.read(at: url)
        Issue.record("a damaged file was read (\(data.count) bytes)", sourceLocation: sourceLocation)
    } catch let error as KeychainError {
        #expect(error.status == -26275, "\(error)", sourceLocation: sourceLocation)
        #expect(error.reason.contains(url.lastPathComponent), sourceLocation: sourceLocation)
    } catch {
        Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
    }
}

@Suite("Protected files: sealed under the keychain, streamed in chunks")
struct ProtectedFileTests {
    @Test("round trips: empty, one byte, around the chunk size and several chunks, for each class",
          arguments: FileProtection.allCases, [0, 1, 4095, 4096, 4097, 3 * 4096 + 17])
    func roundTrip(protection: FileProtection, size: Int) throws {
        let f = try ProtectedFileFixture()
        let url = f.scratch.file("secret.bin")
        let content = ProtectedFileFixture.content(size)
        try f.files.write(content, to: url, protection: protection)
        #expect(try f.files.read(at: url) == content)
        #expect(try f.files.protection(of: url) == protection)
        // The sealed size: header, full chunks, then a final chunk shorter than a full one (maybe empty), each + tag.
        let expected = ProtectedFileFixture.headerLength(protection) + (size / 4096) * ProtectedFileFixture.sealedChunk + (size % 4096) + 16
        #expect(try Data(contentsOf: url).count == expected)
        // Streaming in and out gives the same bytes.
        let plain = f.scratch.file("plain.bin"), out = f.scratch.file("out.bin"), streamed = f.scratch.file("streamed.bin")
        try content.write(to: plain)
        try f.files.write(contentsOf: plain, to: streamed, protection: protection)
        try f.files.read(at: streamed, to: out)
        #expect(try Data(contentsOf: out) == content)
        var chunks: [Int] = []
        try f.files.read(at: streamed) { chunks.append($0.count) }
        #expect(chunks.allSatisfy { $0 <= 4096 } && chunks.reduce(0, +) == size)
    }

    @Test("pieces of any size stream into the same file a single write makes")
    func pieces() throws {
        let f = try ProtectedFileFixture()
        let content = ProtectedFileFixture.content(10_000)
        var offset = 0
        let sizes = [1, 4095, 3, 5000, 7000]
        var turn = 0
        try f.files.write(to: f.scratch.file("p")) {
            guard offset < content.count else { return nil }
            let end = min(content.count, offset + sizes[turn % sizes.count])
            turn += 1
            defer { offset = end }
            return content[offset..<end]
        }
        #expect(try f.files.read(at: f.scratch.file("p")) == content)
    }

    @Test("two writes of the same content differ (fresh salt): nonces never repeat under one key")
    func freshSalt() throws {
        let f = try ProtectedFileFixture()
        let content = ProtectedFileFixture.content(100)
        try f.files.write(content, to: f.scratch.file("a"))
        let first = try Data(contentsOf: f.scratch.file("a"))
        try f.files.write(content, to: f.scratch.file("a"))
        let second = try Data(contentsOf: f.scratch.file("a"))
        #expect(first.count == second.count && first != second)
        #expect(first.range(of: content.prefix(16)) == nil)  // no plaintext on disk
    }

    @Test("every single-bit flip anywhere in a sealed file is detected", arguments: FileProtection.allCases)
    func everyBitFlip(protection: FileProtection) throws {
        let f = try ProtectedFileFixture()
        let url = f.scratch.file("small")
        try f.files.write(ProtectedFileFixture.content(40), to: url, protection: protection)
        let sealed = try Data(contentsOf: url)
        let damaged = f.scratch.file("small")
        for bit in 0..<(sealed.count * 8) {
            var copy = sealed
            copy[bit / 8] ^= UInt8(1 << (bit % 8))
            try copy.write(to: damaged)
            #expect(throws: KeychainError.decode) { try f.files.read(at: damaged) }
        }
    }

    @Test("truncation at every chunk boundary, inside chunks and inside the header is detected")
    func truncation() throws {
        let f = try ProtectedFileFixture()
        let url = f.scratch.file("t")
        try f.files.write(ProtectedFileFixture.content(3 * 4096 + 100), to: url)
        let sealed = try Data(contentsOf: url)
        let header = ProtectedFileFixture.headerLength(.complete), chunk = ProtectedFileFixture.sealedChunk
        var lengths = [0, 3, 59, 60, 67, header, header + 1, sealed.count - 1, sealed.count - 16, sealed.count - 17]
        for k in 1...3 { lengths += [header + k * chunk, header + k * chunk - 1, header + k * chunk + 1, header + k * chunk - chunk / 2] }
        for length in Set(lengths) {
            try sealed.prefix(length).write(to: url)
            expectDecodeFailure(f.files, url)
        }
    }

    @Test("swapped, dropped, duplicated and appended chunks are detected")
    func reorder() throws {
        let f = try ProtectedFileFixture()
        let url = f.scratch.file("r")
        try f.files.write(ProtectedFileFixture.content(3 * 4096 + 100), to: url)
        let sealed = try Data(contentsOf: url)
        let h = ProtectedFileFixture.headerLength(.complete), chunk = ProtectedFileFixture.sealedChunk
        let header = sealed.prefix(h)
        let chunks = (0..<3).map { sealed[(h + $0 * chunk)..<(h + ($0 + 1) * chunk)] }
        let last = sealed[(h + 3 * chunk)...]
        let variants: [Data] = [
            header + chunks[1] + chunks[0] + chunks[2] + last,   // swap
            header + chunks[0] + chunks[2] + last,               // drop
            header + chunks[0] + chunks[1] + chunks[1] + chunks[2] + last, // duplicate
            sealed + Data([0]),                                  // one byte appended
            sealed + last,                                       // the final chunk again
            header + chunks[0] + chunks[1] + chunks[2],          // final chunk dropped
        ]
        for variant in variants {
            try variant.write(to: url)
            expectDecodeFailure(f.files, url)
        }
    }

    @Test("a renamed file cannot be opened (its name is authenticated); renamed back, it opens")
    func rename() throws {
        let f = try ProtectedFileFixture()
        let original = f.scratch.file("alice.token"), renamed = f.scratch.file("mallory.token")
        try f.files.write(Data("token".utf8), to: original)
        try FileManager.default.moveItem(at: original, to: renamed)
        expectDecodeFailure(f.files, renamed)
        try FileManager.default.moveItem(at: renamed, to: original)
        #expect(try f.files.read(at: original) == Data("token".utf8))
    }

    @Test("a file sealed under another keychain's key fails with errSecDecode, with or without a key there",
          arguments: FileProtection.allCases)
    func otherKeychain(protection: FileProtection) throws {
        let f = try ProtectedFileFixture(), g = try ProtectedFileFixture()
        let url = f.scratch.file("x")
        try f.files.write(Data("mine".utf8), to: url, protection: protection)
        expectDecodeFailure(g.files, url)                                    // g has no class key yet
        try g.files.write(Data("theirs".utf8), to: g.scratch.file("x"), protection: protection)
        expectDecodeFailure(g.files, url)                                    // g's own key differs
        let other = try ProtectedFiles(keychain: Keychain(store: f.memory), service: "com.example.other", chunkSize: 4096)
        expectDecodeFailure(other, url)                                      // another service is another key
        #expect(try f.files.read(at: url) == Data("mine".utf8))
    }

    @Test("not a protected file, a missing file: typed errors")
    func notProtected() throws {
        let f = try ProtectedFileFixture()
        try Data("plain text that is long enough to hold a header, and then some more bytes".utf8).write(to: f.scratch.file("plain"))
        expectDecodeFailure(f.files, f.scratch.file("plain"))
        #expect(throws: KeychainError.itemNotFound) { try f.files.read(at: f.scratch.file("missing")) }
        #expect(try f.files.remove(at: f.scratch.file("missing")) == false)
    }

    @Test("a locked keychain: the read fails with -25308 and the file is left byte for byte",
          arguments: [(FileProtection.complete, LockState.lockedAfterFirstUnlock), (.complete, .locked),
                      (.completeUnlessOpen, .lockedAfterFirstUnlock), (.completeUnlessOpen, .locked),
                      (.completeUntilFirstUserAuthentication, .locked)])
    func lockedRead(protection: FileProtection, lock: LockState) throws {
        let f = try ProtectedFileFixture()
        let url = f.scratch.file("locked")
        try f.files.write(ProtectedFileFixture.content(5000), to: url, protection: protection)
        let before = try Data(contentsOf: url)
        f.memory.lockState = lock
        let destination = f.scratch.file("out")
        for _ in 0..<2 {
            #expect(throws: KeychainError.interactionNotAllowed) { try f.files.read(at: url) }
            #expect(throws: KeychainError.interactionNotAllowed) { try f.files.read(at: url, to: destination) }
        }
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        #expect(try Data(contentsOf: url) == before)
        #expect(f.scratch.names == ["locked"])
        f.memory.lockState = .unlocked
        #expect(try f.files.read(at: url) == ProtectedFileFixture.content(5000))
    }

    @Test("completeUntilFirstUserAuthentication reads and writes after the first unlock")
    func afterFirstUnlock() throws {
        let f = try ProtectedFileFixture()
        let url = f.scratch.file("sync")
        try f.files.write(Data("a".utf8), to: url, protection: .completeUntilFirstUserAuthentication)
        f.memory.lockState = .lockedAfterFirstUnlock
        try f.files.write(Data("b".utf8), to: url, protection: .completeUntilFirstUserAuthentication)
        #expect(try f.files.read(at: url) == Data("b".utf8))
    }

    @Test("a locked keychain: a complete write fails with -25308 before creating anything; the old file stays")
    func lockedWrite() throws {
        let f = try ProtectedFileFixture()
        let url = f.scratch.file("doc")
        try f.files.write(Data("v1".utf8), to: url, protection: .complete)
        let before = try Data(contentsOf: url)
        for lock in [LockState.lockedAfterFirstUnlock, .locked] {
            f.memory.lockState = lock
            #expect(throws: KeychainError.interactionNotAllowed) { try f.files.write(Data("v2".utf8), to: url, protection: .complete) }
        }
        // Locked since boot: not even the first-unlock class can be written.
        #expect(throws: KeychainError.interactionNotAllowed) {
            try f.files.write(Data("v2".utf8), to: url, protection: .completeUntilFirstUserAuthentication)
        }
        #expect(try Data(contentsOf: url) == before)
        #expect(f.scratch.names == ["doc"])
    }

    @Test("completeUnlessOpen: created while locked after the first unlock, readable only after the unlock")
    func createWhileLocked() throws {
        let f = try ProtectedFileFixture()
        // First use needs the keychain unlocked: the class key pair is created then.
        f.memory.lockState = .lockedAfterFirstUnlock
        #expect(throws: KeychainError.interactionNotAllowed) { try f.files.write(Data("x".utf8), to: f.scratch.file("early"), protection: .completeUnlessOpen) }
        #expect(f.scratch.names.isEmpty)
        f.memory.lockState = .unlocked
        try f.files.write(Data("first".utf8), to: f.scratch.file("first"), protection: .completeUnlessOpen)
        f.memory.lockState = .lockedAfterFirstUnlock
        let url = f.scratch.file("download")
        try f.files.write(Data("downloaded while locked".utf8), to: url, protection: .completeUnlessOpen)
        #expect(throws: KeychainError.interactionNotAllowed) { try f.files.read(at: url) }
        f.memory.lockState = .locked
        #expect(throws: KeychainError.interactionNotAllowed) { try f.files.write(Data("x".utf8), to: url, protection: .completeUnlessOpen) }
        f.memory.lockState = .unlocked
        #expect(try f.files.read(at: url) == Data("downloaded while locked".utf8))
    }

    @Test("the class keys are created once, add-only, with each class's accessibility, on the device only",
          arguments: [(FileProtection.complete, Accessibility.whenUnlockedThisDeviceOnly),
                      (.completeUntilFirstUserAuthentication, .afterFirstUnlockThisDeviceOnly)])
    func classKeys(protection: FileProtection, accessibility: Accessibility) throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory, options: ItemOptions(accessibility: .afterFirstUnlock, synchronizable: true))
        let files = try ProtectedFiles(keychain: keychain, service: "com.example.files")
        let scratch = try ScratchDirectory()
        try files.write(Data("1".utf8), to: scratch.file("a"), protection: protection)
        try files.write(Data("2".utf8), to: scratch.file("b"), protection: protection)
        let items = try Keychain(store: memory).accounts(service: "com.example.files")
        #expect(items.map(\.account) == [protection.rawValue])
        #expect(items.first?.accessibility == accessibility)
        #expect(items.first?.synchronizable == false)
        #expect(try files.read(at: scratch.file("a")) == Data("1".utf8))
    }

    @Test("files are 0600 from creation: the temporary file mid-write and the final file")
    func mode0600() throws {
        let f = try ProtectedFileFixture()
        let url = f.scratch.file("m")
        var temporaryModes: [Int] = []
        var sent = 0
        try f.files.write(to: url) {
            defer { sent += 1 }
            if sent == 1 {
                for name in f.scratch.names where name != "m" { temporaryModes.append(try mode(of: f.scratch.file(name))) }
            }
            return sent < 3 ? ProtectedFileFixture.content(5000) : nil
        }
        #expect(temporaryModes == [0o600])
        #expect(try mode(of: url) == 0o600)
        try f.files.read(at: url, to: f.scratch.file("plain"))
        #expect(try mode(of: f.scratch.file("plain")) == 0o600)
    }

    struct SourceFailed: Error {}

    @Test("a write that fails midway leaves the previous file intact and no temporary file")
    func atomicReplace() throws {
        let f = try ProtectedFileFixture()
        let url = f.scratch.file("keep")
        try f.files.write(Data("version 1".utf8), to: url)
        let before = try Data(contentsOf: url)
        var sent = 0
        #expect(throws: SourceFailed.self) {
            try f.files.write(to: url) {
                sent += 1
                if sent == 4 { throw SourceFailed() }
                return ProtectedFileFixture.content(6000)
            }
        }
        #expect(try Data(contentsOf: url) == before)
        #expect(f.scratch.names == ["keep"])
        #expect(try f.files.read(at: url) == Data("version 1".utf8))
    }

    @Test("a symlink planted at the target is replaced, never written through")
    func symlinkTarget() throws {
        let f = try ProtectedFileFixture()
        let victim = f.scratch.file("victim"), link = f.scratch.file("link")
        try Data("do not touch".utf8).write(to: victim)
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: victim)
        try f.files.write(Data("sealed".utf8), to: link)
        #expect(try Data(contentsOf: victim) == Data("do not touch".utf8))
        let type = try FileManager.default.attributesOfItem(atPath: link.path)[.type] as? FileAttributeType
        #expect(type == .typeRegular)
        #expect(try mode(of: link) == 0o600)
        #expect(try f.files.read(at: link) == Data("sealed".utf8))
    }

    @Test("a verified read to a file appears only when everything verified; a damaged file leaves no output")
    func atomicReadToFile() throws {
        let f = try ProtectedFileFixture()
        let url = f.scratch.file("d")
        try f.files.write(ProtectedFileFixture.content(3 * 4096), to: url)
        var sealed = try Data(contentsOf: url)
        sealed[sealed.count - 3] ^= 1   // the last chunk: the first three verify, then the read fails
        try sealed.write(to: url)
        let out = f.scratch.file("out")
        try Data("previous".utf8).write(to: out)
        var handed = 0
        #expect(throws: KeychainError.decode) { try f.files.read(at: url) { _ in handed += 1 } }
        #expect(handed == 3)
        #expect(throws: KeychainError.decode) { try f.files.read(at: url, to: out) }
        #expect(try Data(contentsOf: out) == Data("previous".utf8))
        #expect(f.scratch.names == ["d", "out"])
    }

    @Test("remove deletes the file and keeps the class key for the other files")
    func remove() throws {
        let f = try ProtectedFileFixture()
        try f.files.write(Data("1".utf8), to: f.scratch.file("a"))
        try f.files.write(Data("2".utf8), to: f.scratch.file("b"))
        #expect(try f.files.remove(at: f.scratch.file("a")))
        #expect(f.scratch.names == ["b"])
        #expect(try f.files.read(at: f.scratch.file("b")) == Data("2".utf8))
    }

    @Test("a chunk size out of range and an empty service are refused")
    func invalidSettings() {
        #expect(throws: KeychainError.param) { try ProtectedFiles(keychain: Keychain(store: InMemoryKeychain()), chunkSize: 100) }
        #expect(throws: KeychainError.invalidItem) { try ProtectedFiles(keychain: Keychain(store: InMemoryKeychain()), service: "") }
    }
}

@Suite("Protected files: async forms")
struct ProtectedFileAsyncTests {
    @Test("the async forms write, read and report a locked keychain as the synchronous ones do")
    func asyncForms() async throws {
        let f = try ProtectedFileFixture()
        let url = f.scratch.file("async")
        try await f.files.write(Data("async".utf8), to: url)
        #expect(try await f.files.read(at: url) == Data("async".utf8))
        f.memory.lockState = .locked
        await #expect(throws: KeychainError.interactionNotAllowed) { try await f.files.read(at: url) }
    }
}
