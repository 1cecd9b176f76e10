import Foundation
import Testing

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
}
