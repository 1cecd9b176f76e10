import Foundation
import Keystone
import KeystoneProtectedFiles
import KeychainEngine
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("Protected files: temporary files of interrupted writes")
struct ProtectedFileTemporaryTests {
    @Test("a stale temporary file an interrupted write left is reported, then removed by the next write of the same target")
    func staleRemovedByNextWrite() throws {
        let f = try ProtectedFileFixture()
        let url = f.scratch.file("note.kspf")
        try f.files.write(Data("v1".utf8), to: url)
        // What a writer killed mid-write leaves: its temporary file, unlocked, under the exact temporary name.
        let stale = f.scratch.file(".note.kspf.1234567890123.tmp")
        try Data(contentsOf: url).write(to: stale)
        let found = try ProtectedFiles.temporaryFiles(in: f.scratch.url)
        #expect(found.map(\.url.lastPathComponent) == [".note.kspf.1234567890123.tmp"])
        #expect(found.first?.state == .stale && found.first?.targetName == "note.kspf")
        #expect(found.first?.size == Int64(try Data(contentsOf: url).count))
        try f.files.write(Data("v2".utf8), to: url)
        #expect(f.scratch.names == ["note.kspf"])
        #expect(try f.files.read(at: url) == Data("v2".utf8))
        #expect(try ProtectedFiles.temporaryFiles(in: f.scratch.url).isEmpty)
    }

    @Test("the plaintext temporary file of an interrupted read to a file is removed by the next read to that file")
    func stalePlaintextRemoved() throws {
        let f = try ProtectedFileFixture()
        try f.files.write(Data("secret".utf8), to: f.scratch.file("sealed"))
        try Data("secret".utf8).write(to: f.scratch.file(".plain.txt.77.tmp"))
        try f.files.read(at: f.scratch.file("sealed"), to: f.scratch.file("plain.txt"))
        #expect(f.scratch.names == ["plain.txt", "sealed"])
    }

    @Test("only the target's exact temporary names that are regular files of this user and unlocked are removed")
    func onlyExactStaleFiles() throws {
        let f = try ProtectedFileFixture()
        let url = f.scratch.file("note.kspf")
        let outside = try ScratchDirectory()
        let victim = outside.file("victim")
        try Data("do not touch".utf8).write(to: victim)
        let kept = [".note.kspf.abc.tmp", ".note.kspf..tmp", "note.kspf.42.tmp", ".note.kspf.42.tmp.bak",
                    ".note.kspf.123456789012345678901.tmp", ".other.kspf.42.tmp", ".note.kspf.42.temp"]
        for name in kept + [".note.kspf.42.tmp", ".note.kspf.18446744073709551615.tmp"] {
            try Data("x".utf8).write(to: f.scratch.file(name))
        }
        try FileManager.default.createSymbolicLink(at: f.scratch.file(".note.kspf.7.tmp"), withDestinationURL: victim)
        try FileManager.default.createDirectory(at: f.scratch.file(".note.kspf.8.tmp"), withIntermediateDirectories: false)
        var otherUser: [String] = []
        if geteuid() == 0 {   // only root can give a file to another user
            try Data("x".utf8).write(to: f.scratch.file(".note.kspf.9.tmp"))
            #expect(chown(f.scratch.file(".note.kspf.9.tmp").path, 65534, 65534) == 0)
            otherUser = [".note.kspf.9.tmp"]
        }
        let states = Dictionary(uniqueKeysWithValues: try ProtectedFiles.temporaryFiles(in: f.scratch.url).map { ($0.url.lastPathComponent, $0.state) })
        #expect(states[".note.kspf.7.tmp"] == .notRegularFile && states[".note.kspf.8.tmp"] == .notRegularFile)
        #expect(states[".note.kspf.42.tmp"] == .stale && states[".other.kspf.42.tmp"] == .stale)
        #expect(states[".note.kspf.abc.tmp"] == nil && states["note.kspf.42.tmp"] == nil)
        // The shortest temporary name: a one-letter target and one digit.
        try Data("x".utf8).write(to: f.scratch.file(".a.1.tmp"))
        #expect(try ProtectedFiles.temporaryFiles(in: f.scratch.url).first { $0.url.lastPathComponent == ".a.1.tmp" }?.targetName == "a")
        try FileManager.default.removeItem(at: f.scratch.file(".a.1.tmp"))
        if !otherUser.isEmpty { #expect(states[".note.kspf.9.tmp"] == .otherOwner) }

        try f.files.write(Data("sealed".utf8), to: url)
        let expected = (kept + [".note.kspf.7.tmp", ".note.kspf.8.tmp", "note.kspf"] + otherUser).sorted()
        #expect(f.scratch.names == expected)
        #expect(try Data(contentsOf: victim) == Data("do not touch".utf8))

        // The whole directory: the other target's stale file goes too, nothing else.
        let removed = try ProtectedFiles.removeStaleTemporaryFiles(in: f.scratch.url)
        #expect(removed.map(\.lastPathComponent) == [".other.kspf.42.tmp"])
        #expect(f.scratch.names == expected.filter { $0 != ".other.kspf.42.tmp" })
    }

    @Test("a concurrent writer's live temporary file is reported in use and never removed; both writes complete")
    func liveTemporaryKept() throws {
        let f = try ProtectedFileFixture()
        let url = f.scratch.file("shared")
        var sent = 0
        var seenInUse: [ProtectedFiles.TemporaryFile] = []
        try f.files.write(to: url) {
            defer { sent += 1 }
            if sent == 1 {
                // Writer A's temporary file exists and is locked: list it, then write the same target meanwhile.
                seenInUse = try ProtectedFiles.temporaryFiles(in: f.scratch.url)
                try f.files.write(Data("writer B".utf8), to: url)
                #expect(try ProtectedFiles.removeStaleTemporaryFiles(in: f.scratch.url).isEmpty)
                #expect(try f.files.read(at: url) == Data("writer B".utf8))
            }
            return sent < 3 ? Data("writer A ".utf8) : nil
        }
        #expect(seenInUse.map(\.state) == [.inUse])
        #expect(seenInUse.first?.targetName == "shared")
        #expect(try f.files.read(at: url) == Data("writer A writer A writer A ".utf8))
        #expect(f.scratch.names == ["shared"])
    }

    @Test("a directory that cannot be listed is a typed error")
    func missingDirectory() {
        #expect(throws: KeychainError.itemNotFound) { try ProtectedFiles.temporaryFiles(in: URL(fileURLWithPath: "/nonexistent-keystone-dir")) }
    }
}
