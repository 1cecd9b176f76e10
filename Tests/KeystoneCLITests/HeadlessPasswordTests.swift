import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Where `create-keychain` and `unlock-keychain` find the keychain password with no terminal: the systemd credential
/// `keystone.keychain-password`, the file `KEYSTONE_PASSWORD_FILE` names, standard input, else a failure at once; and
/// where keychains live for a user with no usable home (`KEYSTONE_KEYCHAIN_DIR`).
@Suite("keystone CLI: headless keychain passwords and the keychain directory")
struct HeadlessPasswordTests {
    struct Box {
        let cell: CellDirectory
        let keystone: String
        var environment: [String: String]

        init() throws {
            cell = try CellDirectory()
            keystone = try #require(Sandbox.binary, "the keystone binary is built by `swift build`")
            environment = bareEnvironment(["KEYSTONE_KEYCHAIN_DIR": try cell.directory("keychains"),
                                           "XDG_CONFIG_HOME": try cell.directory("config")])
        }

        func run(_ arguments: [String], input: CellInput = .devNull, changes: [String: String?] = [:]) throws -> CellRun {
            var environment = self.environment
            for (key, value) in changes { environment[key] = value }
            return try cellRun([keystone] + arguments, environment: environment, input: input)
        }
    }

    @Test("KEYSTONE_PASSWORD_FILE gives create-keychain and unlock-keychain the file's first line; its content is never printed")
    func passwordFile() throws {
        var box = try Box()
        defer { box.cell.remove() }
        box.environment["KEYSTONE_PASSWORD_FILE"] = try box.cell.file("password", "file-pw\nsecond line ignored\n")
        let create = try box.run(["create-keychain", "k"])
        #expect(create.status == 0, "\(create)")
        #expect(try box.run(["lock-keychain", "k"]).status == 0)
        let unlock = try box.run(["unlock-keychain", "k"])
        #expect(unlock.status == 0, "\(unlock)")
        // The keychain's password is the first line: -p with it unlocks, the whole file's text does not.
        #expect(try box.run(["unlock-keychain", "-p", "file-pw", "k"]).status == 0)
        #expect(try box.run(["unlock-keychain", "-p", "file-pw\nsecond line ignored", "k"]).status == 51)
        for run in [create, unlock] { #expect(!run.stdout.contains("file-pw") && !run.stderr.contains("file-pw")) }
    }

    @Test("the systemd credential comes before KEYSTONE_PASSWORD_FILE, and both before standard input")
    func credentialFirst() throws {
        var box = try Box()
        defer { box.cell.remove() }
        let credentials = try box.cell.directory("credentials")
        _ = try box.cell.file("credentials/keystone.keychain-password", "credential-pw")
        box.environment["CREDENTIALS_DIRECTORY"] = credentials
        box.environment["KEYSTONE_PASSWORD_FILE"] = try box.cell.file("password", "file-pw\n")
        #expect(try box.run(["create-keychain", "k"], input: .bytes(Data("stdin-pw\n".utf8))).status == 0)
        #expect(try box.run(["unlock-keychain", "-p", "credential-pw", "k"]).status == 0)
        #expect(try box.run(["unlock-keychain", "-p", "file-pw", "k"]).status == 51)
        // Without the credential, the file; without either, standard input.
        #expect(try box.run(["create-keychain", "f"], changes: ["CREDENTIALS_DIRECTORY": nil]).status == 0)
        #expect(try box.run(["unlock-keychain", "-p", "file-pw", "f"]).status == 0)
        #expect(try box.run(["create-keychain", "s"], input: .bytes(Data("stdin-pw\n".utf8)),
                            changes: ["CREDENTIALS_DIRECTORY": nil, "KEYSTONE_PASSWORD_FILE": nil]).status == 0)
        #expect(try box.run(["unlock-keychain", "-p", "stdin-pw", "s"]).status == 0)
        // A credentials directory without Keystone's credential is not a source: the file is used.
        _ = try box.cell.directory("other-credentials")
        #expect(try box.run(["create-keychain", "o"], changes: ["CREDENTIALS_DIRECTORY": box.cell.path("other-credentials")]).status == 0)
        #expect(try box.run(["unlock-keychain", "-p", "file-pw", "o"]).status == 0)
    }

    @Test("a password file that is missing, empty or a FIFO fails at once naming it, and creates nothing")
    func badPasswordFiles() throws {
        let box = try Box()
        defer { box.cell.remove() }
        let empty = try box.cell.file("empty", "")
        let fifo = box.cell.path("fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        for (path, why) in [(box.cell.path("missing"), "No such file"), (empty, "empty"), (fifo, "not a regular file")] {
            let run = try box.run(["create-keychain", "k"], changes: ["KEYSTONE_PASSWORD_FILE": path])
            #expect(run.status == 1 && !run.hung && run.seconds < failFastLimit, "\(run)")
            #expect(run.stderr.contains("KEYSTONE_PASSWORD_FILE") && run.stderr.contains(path) && run.stderr.contains(why), "\(run)")
            #expect(!FileManager.default.fileExists(atPath: box.cell.path("keychains/k.keychain-db")))
        }
    }

    @Test("item secrets, old and new passwords never come from the password file or the credential")
    func onlyKeychainPasswords() throws {
        var box = try Box()
        defer { box.cell.remove() }
        box.environment["KEYSTONE_PASSWORD_FILE"] = try box.cell.file("password", "file-pw\n")
        #expect(try box.run(["create-keychain", "k"]).status == 0)
        // -w without a value reads the item's secret from standard input only: at its end, a usage error.
        let add = try box.run(["add-generic-password", "-s", "s", "-a", "a", "k", "-w"])
        #expect(add.status == 2 && add.stderr.contains("standard input ended"), "\(add)")
        #expect(try box.run(["find-generic-password", "-s", "s", "-a", "a", "k"]).status == 44)
        // set-keychain-password asks for the old and the new password: neither comes from the file.
        let change = try box.run(["set-keychain-password", "k"])
        #expect(change.status == 2, "\(change)")
        #expect(try box.run(["unlock-keychain", "-p", "file-pw", "k"]).status == 0)
    }

    @Test("the password never comes from an environment variable holding it")
    func notFromEnvironment() throws {
        let box = try Box()
        defer { box.cell.remove() }
        let run = try box.run(["create-keychain", "k"], changes: ["KEYSTONE_PASSWORD": "env-pw", "KEYSTONE_KEYCHAIN_PASSWORD": "env-pw"])
        #expect(run.status == 2 && run.stderr.contains("KEYSTONE_PASSWORD_FILE"), "\(run)")
        #expect(!FileManager.default.fileExists(atPath: box.cell.path("keychains/k.keychain-db")))
    }

    @Test("KEYSTONE_KEYCHAIN_DIR holds the login keychain and keychains named without a '/', before XDG_DATA_HOME")
    func keychainDirectory() throws {
        var box = try Box()
        defer { box.cell.remove() }
        box.environment["XDG_DATA_HOME"] = try box.cell.directory("data")
        #expect(try box.run(["add-generic-password", "-s", "s", "-a", "a", "-w", "v"]).status == 0)
        #expect(FileManager.default.fileExists(atPath: box.cell.path("keychains/login.keychain-db")))
        #expect(try box.run(["create-keychain", "-p", "pw", "named"]).status == 0)
        #expect(FileManager.default.fileExists(atPath: box.cell.path("keychains/named.keychain-db")))
        #expect(!FileManager.default.fileExists(atPath: box.cell.path("data/keystone")))
    }

    @Test("a keychain the user named by a path that cannot be written gets no KEYSTONE_KEYCHAIN_DIR advice")
    func explicitPathNoAdvice() throws {
        let box = try Box()
        defer { box.cell.remove() }
        let run = try box.run(["create-keychain", "-p", "pw", "/proc/keystone-test/k.keychain-db"])
        #expect(run.status != 0)
        #expect(!run.stderr.contains("KEYSTONE_KEYCHAIN_DIR"), "\(run)")
    }
}
