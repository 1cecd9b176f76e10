import Crypto
import Foundation
import Keystone
import KeystoneProtectedFiles
import KeychainEngine
import KeystoneTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Expects `body` to fail with errSecDecode (-26275) and a reason containing `reason`.
func expectDecode(_ reason: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Data) {
    do {
        let data = try body()
        Issue.record("the file was read (\(data.count) bytes)", sourceLocation: sourceLocation)
    } catch let error as KeychainError {
        #expect(error.status == -26275, "\(error)", sourceLocation: sourceLocation)
        #expect(error.reason.contains(reason), "\(error.reason)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
    }
}

@Suite("Protected files: bound to their full path or an identifier")
struct ProtectedFileBindingTests {
    @Test("a file of the same name copied from another directory is refused with errSecDecode")
    func sameNameOtherDirectory() throws {
        let f = try ProtectedFileFixture()
        let alice = f.scratch.file("alice"), bob = f.scratch.file("bob")
        try FileManager.default.createDirectory(at: alice, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: bob, withIntermediateDirectories: true)
        try f.files.write(Data("alice's token".utf8), to: alice.appendingPathComponent("token"))
        try f.files.write(Data("bob's token".utf8), to: bob.appendingPathComponent("token"))
        try FileManager.default.removeItem(at: bob.appendingPathComponent("token"))
        try FileManager.default.copyItem(at: alice.appendingPathComponent("token"), to: bob.appendingPathComponent("token"))
        expectDecodeFailure(f.files, bob.appendingPathComponent("token"))
        #expect(try f.files.read(at: alice.appendingPathComponent("token")) == Data("alice's token".utf8))
    }

    @Test("the bound path is the absolute path with . and .. resolved: another spelling of the same path opens")
    func standardizedPath() throws {
        let f = try ProtectedFileFixture()
        try FileManager.default.createDirectory(at: f.scratch.file("sub"), withIntermediateDirectories: true)
        try f.files.write(Data("same file".utf8), to: f.scratch.file("x"))
        let spelled = URL(fileURLWithPath: f.scratch.url.path + "/sub/.././x")
        #expect(try f.files.read(at: spelled) == Data("same file".utf8))
    }

    @Test("with an identifier a file opens wherever it is moved, and only under that identifier")
    func identifier() throws {
        let f = try ProtectedFileFixture()
        let written = f.scratch.file("settings.kspf"), moved = f.scratch.file("moved-elsewhere")
        try f.files.write(Data("settings".utf8), to: written, identifier: "com.example.settings")
        try FileManager.default.moveItem(at: written, to: moved)
        #expect(try f.files.read(at: moved, identifier: "com.example.settings") == Data("settings".utf8))
        expectDecode("identifier") { try f.files.read(at: moved, identifier: "com.example.other") }
        expectDecode("identifier") { try f.files.read(at: moved) }
        // A file written under its path does not open under an identifier, even the path itself.
        try f.files.write(Data("by path".utf8), to: written)
        expectDecode("identifier") { try f.files.read(at: written, identifier: written.path) }
        #expect(throws: KeychainError.invalidItem) { try f.files.write(Data("x".utf8), to: written, identifier: "") }
        #expect(throws: KeychainError.invalidItem) { try f.files.read(at: written, identifier: "") }
    }

    /// A file of sealed format 1 written by the previous Keystone (before this change) with the class key 0x01...0x20:
    /// "legacy content v1" named `legacy.token`, 4 KiB chunks, class complete.
    static let formatVersion1 = "S1NQRgEBAAAAABAAbPhAOC2+1kmPEnPQTx7F+ICKtSCNhP3nZgMn3LPU4W66bxBq6+rUzDQa3hyj2W+sd5DSNp6f5vwSyPLWVeOyfZWEhm4yKacTSKtDA7y/u7c2"

    @Test("a file of sealed format 1 is refused by default, read when asked for, and rewriting it upgrades it to format 2")
    func formatVersion1() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        try keychain.save(SymmetricKey(data: Data((1...32).map { UInt8($0) })),
                          for: CryptoKeyItem<SymmetricKey>(service: ProtectedFiles.defaultService, account: "complete"),
                          options: SaveOptions(accessibility: .whenUnlockedThisDeviceOnly))
        let scratch = try ScratchDirectory()
        let url = scratch.file("legacy.token")
        try #require(Data(base64Encoded: Self.formatVersion1)).write(to: url)
        let strict = try ProtectedFiles(keychain: keychain, chunkSize: 4096)
        expectDecode("sealed format 1") { try strict.read(at: url) }
        let legacy = try ProtectedFiles(keychain: keychain, chunkSize: 4096, readsFormatVersion1: true)
        #expect(try legacy.read(at: url) == Data("legacy content v1".utf8))
        // Format 1 bound only the name: that is why it is not read by default.
        try FileManager.default.createDirectory(at: scratch.file("elsewhere"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: url, to: scratch.file("elsewhere/legacy.token"))
        #expect(try legacy.read(at: scratch.file("elsewhere/legacy.token")) == Data("legacy content v1".utf8))
        // Rewritten, it is format 2 and opens without the option.
        try legacy.write(try legacy.read(at: url), to: url)
        #expect(try Data(contentsOf: url)[4] == 2)
        #expect(try strict.read(at: url) == Data("legacy content v1".utf8))
    }
}

@Suite("Protected files: rollback protection")
struct ProtectedFileRollbackTests {
    struct Fixture {
        let memory = InMemoryKeychain()
        let scratch: ScratchDirectory
        let guarded: ProtectedFiles
        let unguarded: ProtectedFiles
        init() throws {
            scratch = try ScratchDirectory()
            guarded = try ProtectedFiles(keychain: Keychain(store: memory), chunkSize: 4096, rollbackProtection: true)
            unguarded = try ProtectedFiles(keychain: Keychain(store: memory), chunkSize: 4096)
        }
        /// The version counters recorded (account, value).
        func counters() throws -> [(String, UInt64)] {
            let keychain = Keychain(store: memory)
            return try keychain.accounts(service: ProtectedFiles.defaultService).filter { $0.account.hasPrefix("file-version:") }.map {
                let data = try #require(try keychain.data(for: GenericPassword(service: ProtectedFiles.defaultService, account: $0.account)))
                return ($0.account, data.reduce(0) { $0 << 8 | UInt64($1) })
            }
        }
    }

    @Test("an older version copied back is refused with errSecDecode when rollback protection is on, and opens when it is off",
          arguments: FileProtection.allCases)
    func olderCopy(protection: FileProtection) throws {
        let f = try Fixture()
        let url = f.scratch.file("balance")
        try f.guarded.write(Data("balance: 100".utf8), to: url, protection: protection)
        let old = try Data(contentsOf: url)
        try f.guarded.write(Data("balance: 0".utf8), to: url, protection: protection)
        #expect(try f.guarded.read(at: url) == Data("balance: 0".utf8))
        try old.write(to: url)
        expectDecode("older version") { try f.guarded.read(at: url) }
        var handed = 0
        #expect(throws: KeychainError.decode) { try f.guarded.read(at: url) { _ in handed += 1 } }
        #expect(handed == 0)   // refused before any chunk is handed over
        #expect(try f.unguarded.read(at: url) == Data("balance: 100".utf8))
        #expect(try f.counters().map(\.1) == [2])
    }

    @Test("a file newer than its counter (its writer died before recording it) opens and advances the counter, so the file it replaced is refused")
    func ratchetOnRead() throws {
        let f = try Fixture()
        let url = f.scratch.file("state")
        try f.guarded.write(Data("one".utf8), to: url)
        let first = try Data(contentsOf: url)
        try f.guarded.write(Data("two".utf8), to: url)
        // The state after a writer died between its rename and recording version 2: the counter still says 1.
        let (account, value) = try #require(try f.counters().first)
        #expect(value == 2)
        try Keychain(store: f.memory).save(Data([0, 0, 0, 0, 0, 0, 0, 1]), for: GenericPassword(service: ProtectedFiles.defaultService, account: account))
        #expect(try f.guarded.read(at: url) == Data("two".utf8))
        #expect(try f.counters().map(\.1) == [2])
        try first.write(to: url)
        expectDecode("older version") { try f.guarded.read(at: url) }
    }

    @Test("a removed file put back is refused")
    func removedPutBack() throws {
        let f = try Fixture()
        let url = f.scratch.file("session")
        try f.guarded.write(Data("session".utf8), to: url)
        let copy = try Data(contentsOf: url)
        #expect(try f.guarded.remove(at: url))
        try copy.write(to: url)
        expectDecode("older version") { try f.guarded.read(at: url) }
    }

    @Test("counters are per file: one per path or identifier, kept on this device, readable after the first unlock")
    func counterItems() throws {
        let f = try Fixture()
        try f.guarded.write(Data("a".utf8), to: f.scratch.file("a"))
        try f.guarded.write(Data("a2".utf8), to: f.scratch.file("a"))
        try f.guarded.write(Data("b".utf8), to: f.scratch.file("b"), identifier: "com.example.b")
        #expect(try f.counters().map(\.1).sorted() == [1, 2])
        let items = try Keychain(store: f.memory).accounts(service: ProtectedFiles.defaultService).filter { $0.account.hasPrefix("file-version:") }
        #expect(items.allSatisfy { $0.accessibility == .afterFirstUnlockThisDeviceOnly && $0.synchronizable == false })
        // A file written without rollback protection (version 0) opens until a protected write records a version.
        try f.unguarded.write(Data("c".utf8), to: f.scratch.file("c"))
        let unversioned = try Data(contentsOf: f.scratch.file("c"))
        #expect(try f.guarded.read(at: f.scratch.file("c")) == Data("c".utf8))
        try f.guarded.write(Data("c2".utf8), to: f.scratch.file("c"))
        try unversioned.write(to: f.scratch.file("c"))
        expectDecode("older version") { try f.guarded.read(at: f.scratch.file("c")) }
    }

    @Test("a locked keychain: a protected write fails with -25308 before creating anything; locked after the first unlock, completeUnlessOpen files are still written")
    func lockedWrite() throws {
        let f = try Fixture()
        let url = f.scratch.file("doc")
        try f.guarded.write(Data("v1".utf8), to: url)
        f.memory.lockState = .locked
        #expect(throws: KeychainError.interactionNotAllowed) {
            try f.guarded.write(Data("v2".utf8), to: url, protection: .completeUntilFirstUserAuthentication)
        }
        #expect(f.scratch.names == ["doc"])
        f.memory.lockState = .unlocked
        #expect(try f.guarded.read(at: url) == Data("v1".utf8))
        // Locked after the first unlock: the counters stay usable, so completeUnlessOpen files are still written.
        try f.guarded.write(Data("first".utf8), to: f.scratch.file("download"), protection: .completeUnlessOpen)
        f.memory.lockState = .lockedAfterFirstUnlock
        try f.guarded.write(Data("while locked".utf8), to: f.scratch.file("download"), protection: .completeUnlessOpen)
        f.memory.lockState = .unlocked
        #expect(try f.guarded.read(at: f.scratch.file("download")) == Data("while locked".utf8))
        #expect(try f.counters().map(\.1).sorted() == [1, 2])
    }
}
