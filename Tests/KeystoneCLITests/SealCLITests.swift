import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("keystone seal / unseal: protected files from the command line")
struct SealCLITests {
    /// A sandbox with an unlocked keychain file `files.keychain-db` and a plaintext file `plain.txt`.
    struct Fixture {
        let box = Sandbox()
        var keychain: String { box.root.appendingPathComponent("files.keychain-db").path }
        func path(_ name: String) -> String { box.root.appendingPathComponent(name).path }
        let content = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })

        init() throws {
            try FileManager.default.createDirectory(at: box.root, withIntermediateDirectories: true)
            #expect(try box.run("create-keychain", "-p", "pw", keychain).status == 0)
            #expect(try box.run("unlock-keychain", "-p", "pw", keychain).status == 0)
            try content.write(to: URL(fileURLWithPath: path("plain.txt")))
        }
    }

    @Test("seal then unseal gives the bytes back, for each protection class; the sealed file is 0600",
          arguments: ["complete", "complete-unless-open", "complete-until-first-user-authentication"])
    func roundTrip(protection: String) throws {
        let f = try Fixture()
        let seal = try f.box.run("seal", "-k", f.keychain, "--protection", protection, f.path("plain.txt"), f.path("sealed.kspf"))
        #expect(seal.status == 0, "\(seal.stderr)")
        #expect(seal.stdout.isEmpty)
        let sealed = try Data(contentsOf: URL(fileURLWithPath: f.path("sealed.kspf")))
        #expect(sealed.prefix(4) == Data("KSPF".utf8))
        let attributes = try FileManager.default.attributesOfItem(atPath: f.path("sealed.kspf"))
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let unseal = try f.box.run("unseal", "-k", f.keychain, f.path("sealed.kspf"), f.path("out.txt"))
        #expect(unseal.status == 0, "\(unseal.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: f.path("out.txt"))) == f.content)
    }

    @Test("- reads the plaintext from standard input and writes it to standard output")
    func standardStreams() throws {
        let f = try Fixture()
        #expect(try f.box.run("seal", "-k", f.keychain, "-", f.path("note.kspf"), input: "a short note\n").status == 0)
        let unseal = try f.box.run("unseal", "-k", f.keychain, f.path("note.kspf"), "-")
        #expect(unseal.status == 0)
        #expect(unseal.stdout == "a short note\n")
        #expect(try f.box.run("seal", "-k", f.keychain, f.path("plain.txt"), "-").status == 2)
    }

    @Test("a tampered file fails with errSecDecode, prints no plaintext and creates no output file")
    func tampered() throws {
        let f = try Fixture()
        #expect(try f.box.run("seal", "-k", f.keychain, f.path("plain.txt"), f.path("sealed.kspf")).status == 0)
        var sealed = try Data(contentsOf: URL(fileURLWithPath: f.path("sealed.kspf")))
        sealed[sealed.count / 2] ^= 0x40
        try sealed.write(to: URL(fileURLWithPath: f.path("sealed.kspf")))
        let unseal = try f.box.run("unseal", "-k", f.keychain, f.path("sealed.kspf"), f.path("out.txt"))
        #expect(unseal.status == Int32(UInt8(truncatingIfNeeded: Int32(-26275))))
        #expect(unseal.stderr.contains("sealed.kspf"))
        #expect(unseal.stdout.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: f.path("out.txt")))
    }

    @Test("a locked keychain: seal and unseal exit 36, the input is untouched and nothing is written")
    func locked() throws {
        let f = try Fixture()
        #expect(try f.box.run("seal", "-k", f.keychain, f.path("plain.txt"), f.path("sealed.kspf")).status == 0)
        let sealed = try Data(contentsOf: URL(fileURLWithPath: f.path("sealed.kspf")))
        #expect(try f.box.run("lock-keychain", f.keychain).status == 0)
        let unseal = try f.box.run("unseal", "-k", f.keychain, f.path("sealed.kspf"), f.path("out.txt"))
        #expect(unseal.status == 36)
        #expect(unseal.stderr.contains("User interaction is not allowed."))
        #expect(try Data(contentsOf: URL(fileURLWithPath: f.path("sealed.kspf"))) == sealed)
        #expect(!FileManager.default.fileExists(atPath: f.path("out.txt")))
        let reseal = try f.box.run("seal", "-k", f.keychain, f.path("plain.txt"), f.path("sealed.kspf"))
        #expect(reseal.status == 36)
        #expect(try Data(contentsOf: URL(fileURLWithPath: f.path("sealed.kspf"))) == sealed)
        #expect(try f.box.run("unlock-keychain", "-p", "pw", f.keychain).status == 0)
        #expect(try f.box.run("unseal", "-k", f.keychain, f.path("sealed.kspf"), f.path("out.txt")).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: f.path("out.txt"))) == f.content)
    }

    /// The temporary files in `directory` (`.NAME.DIGITS.tmp`).
    static func temporaryNames(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasPrefix(".") && $0.hasSuffix(".tmp") }.sorted()
    }

    @Test("a seal killed midway leaves its temporary file; doctor --protected-files reports it (exit 1); the next seal of the same file removes it")
    func killedSeal() throws {
        let f = try Fixture()
        let directory = f.path("sealed")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let output = directory + "/note.kspf"
        #expect(try f.box.run("seal", "-k", f.keychain, f.path("plain.txt"), output).status == 0)

        // A seal reading standard input: it creates its temporary file, then waits for input; killed there.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(Sandbox.binary))
        process.arguments = ["seal", "-k", f.keychain, "-", output]
        process.environment = f.box.environment
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(f.content)
        // The signal: the temporary file holds the header and a first 64 KiB chunk, and the seal waits for the rest
        // of its input (a failure guard of 300 s for a loaded machine, never a timing assumption).
        func sealedBytes() -> Int {
            Self.temporaryNames(directory).compactMap {
                try? FileManager.default.attributesOfItem(atPath: directory + "/" + $0)[.size] as? Int
            }.first ?? 0
        }
        var waited = 0
        while sealedBytes() < 68 + 65_536 + 16 && waited < 30_000 && process.isRunning { usleep(10_000); waited += 1 }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? input.fileHandleForWriting.close()
        #expect(process.terminationReason == .uncaughtSignal)
        let left = Self.temporaryNames(directory)
        try #require(left.count == 1, "the killed seal left no temporary file")
        #expect(left[0].hasPrefix(".note.kspf.") && left[0].dropFirst(".note.kspf.".count).dropLast(".tmp".count).allSatisfy(\.isNumber))

        let doctor = try f.box.run("doctor", "--protected-files", directory)
        #expect(doctor.status == 1, "\(doctor.stdout)\(doctor.stderr)")
        #expect(doctor.stdout.contains(left[0]) && doctor.stdout.contains("interrupted write of note.kspf"))
        #expect(doctor.stdout.contains("sealed content"))
        let json = try f.box.run("doctor", "--protected-files", directory, "--json")
        #expect(json.status == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["ok"] as? Bool == false)
        let report = try #require((object["protectedFiles"] as? [[String: Any]])?.first)
        let temporary = try #require((report["temporaryFiles"] as? [[String: Any]])?.first)
        #expect(temporary["state"] as? String == "stale" && temporary["target"] as? String == "note.kspf" && temporary["sealed"] as? Bool == true)
        #expect((report["files"] as? [[String: Any]])?.first?["formatVersion"] as? Int == 2)
        #expect(Self.temporaryNames(directory) == left)   // doctor changes nothing

        #expect(try f.box.run("seal", "-k", f.keychain, f.path("plain.txt"), output).status == 0)
        #expect(Self.temporaryNames(directory).isEmpty)
        let clean = try f.box.run("doctor", "--protected-files", directory)
        #expect(clean.status == 0, "\(clean.stdout)")
        #expect(try f.box.run("unseal", "-k", f.keychain, output, "-").stdout == String(decoding: f.content, as: UTF8.self))
    }

    @Test("a sealed file copied into another directory under the same name does not unseal; --identifier lets a file move")
    func binding() throws {
        let f = try Fixture()
        for name in ["a", "b"] { try FileManager.default.createDirectory(atPath: f.path(name), withIntermediateDirectories: true) }
        #expect(try f.box.run("seal", "-k", f.keychain, f.path("plain.txt"), f.path("a/token")).status == 0)
        try FileManager.default.copyItem(atPath: f.path("a/token"), toPath: f.path("b/token"))
        let copied = try f.box.run("unseal", "-k", f.keychain, f.path("b/token"), "-")
        #expect(copied.status == 93 && copied.stdout.isEmpty)
        #expect(copied.stderr.contains("another path or identifier"))

        #expect(try f.box.run("seal", "-k", f.keychain, "--identifier", "app.token", f.path("plain.txt"), f.path("a/id")).status == 0)
        try FileManager.default.moveItem(atPath: f.path("a/id"), toPath: f.path("b/moved"))
        let moved = try f.box.run("unseal", "-k", f.keychain, "--identifier", "app.token", f.path("b/moved"), f.path("out"))
        #expect(moved.status == 0, "\(moved.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: f.path("out"))) == f.content)
        #expect(try f.box.run("unseal", "-k", f.keychain, f.path("b/moved"), "-").status == 93)
    }

    @Test("--rollback-protection: an older copy put back does not unseal with it, and unseals without it")
    func rollback() throws {
        let f = try Fixture()
        let sealed = f.path("state.kspf")
        #expect(try f.box.run("seal", "-k", f.keychain, "--rollback-protection", "-", sealed, input: "version one\n").status == 0)
        let old = try Data(contentsOf: URL(fileURLWithPath: sealed))
        #expect(try f.box.run("seal", "-k", f.keychain, "--rollback-protection", "-", sealed, input: "version two\n").status == 0)
        #expect(try f.box.run("unseal", "-k", f.keychain, "--rollback-protection", sealed, "-").stdout == "version two\n")
        try old.write(to: URL(fileURLWithPath: sealed))
        let refused = try f.box.run("unseal", "-k", f.keychain, "--rollback-protection", sealed, "-")
        #expect(refused.status == 93 && refused.stdout.isEmpty)
        #expect(refused.stderr.contains("older version"))
        #expect(try f.box.run("unseal", "-k", f.keychain, sealed, "-").stdout == "version one\n")
    }
}
