#if os(macOS) || os(Linux)
import Foundation
import Keystone
import KeystoneImporters
import KeychainEngine
import KeystoneTesting
import PassStore
import Testing


@Suite("Importers: pass (password-store) through a real gpg", .enabled(if: PassStore.unavailableReason == nil, "\(PassStore.unavailableReason ?? "")"))
struct ImporterPassTests {
    @Test("first line = password, login:/username:/user: = account (else the entry name), directory = service; other lines named, not imported")
    func mapping() throws {
        let pass = try PassStore()
        try pass.insert("web/github.com/work", "gh-pass\nlogin: alice@example.com\nurl: https://github.com\notpauth://totp/x?secret=ABC\n")
        try pass.insert("email", "mail-pass\n")
        try pass.insert("servers/db/root", "db-pass\nuser: postgres\nsome free text\nmore text\n")
        let source = PassImportSource(environment: pass.environment)
        #expect(try source.entries() == ["email", "servers/db/root", "web/github.com/work"])
        let store = InMemoryKeychain()
        let keychain = Keychain(store: store)
        let report = try keychain.importItems(from: source)
        #expect(report.results.map(\.action) == [.add, .add, .add])
        #expect(try keychain.string(for: GenericPassword(service: "web/github.com", account: "alice@example.com")) == "gh-pass")
        #expect(try keychain.string(for: GenericPassword(service: "email", account: "email")) == "mail-pass")
        #expect(try keychain.string(for: GenericPassword(service: "servers/db", account: "postgres")) == "db-pass")
        #expect(try keychain.attributes(for: GenericPassword(service: "web/github.com", account: "alice@example.com"))?.label == "pass: web/github.com/work")
        let github = try #require(report.results.first { $0.origin == "pass entry web/github.com/work" })
        #expect(github.notes == ["field url", "field otpauth"])
        #expect(report.results.first { $0.origin == "pass entry servers/db/root" }?.notes == ["2 more lines"])
        #expect(!report.description.contains("gh-pass") && !report.description.contains("ABC"))
    }

    @Test("an entry gpg cannot decrypt is an invalid entry naming it: nothing is written unless invalid entries are skipped")
    func undecryptable() throws {
        let pass = try PassStore()
        try pass.insert("good", "g\n")
        try Data("not an OpenPGP message".utf8).write(to: pass.store.appendingPathComponent("broken.gpg"))
        let keychain = Keychain(store: InMemoryKeychain())
        let source = PassImportSource(environment: pass.environment)
        let error = try #require(throws: KeychainError.self) { try keychain.importItems(from: source) }
        #expect(error == .invalidItem && error.reason.contains("pass entry broken") && error.reason.contains("gpg could not decrypt it"))
        #expect(try keychain.exists(GenericPassword(service: "good", account: "good")) == false)
        let report = try keychain.importItems(from: source, options: ImportOptions(skipInvalid: true))
        #expect(report.results.map(\.action) == [.add])
        #expect(report.problems.map(\.origin) == ["pass entry broken"])
    }

    @Test("an entry that is a symbolic link to a file outside the store is refused and reported; the others import")
    func symlinkOutsideStore() throws {
        let pass = try PassStore()
        try pass.insert("good", "g\n")
        // A secret encrypted to the same key, outside the store, reached through a link the store's author planted.
        try pass.insert("elsewhere-secret", "outside\n")
        let outside = pass.root.appendingPathComponent("elsewhere")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        try FileManager.default.moveItem(at: pass.store.appendingPathComponent("elsewhere-secret.gpg"), to: outside.appendingPathComponent("secret.gpg"))
        try FileManager.default.createSymbolicLink(atPath: pass.store.appendingPathComponent("bank.gpg").path, withDestinationPath: "../elsewhere/secret.gpg")
        let keychain = Keychain(store: InMemoryKeychain())
        let source = PassImportSource(environment: pass.environment)
        let error = try #require(throws: KeychainError.self) { try keychain.importItems(from: source) }
        #expect(error.reason.contains("pass entry bank") && error.reason.contains("outside the store"))
        let report = try keychain.importItems(from: source, options: ImportOptions(skipInvalid: true))
        #expect(report.results.map(\.origin) == ["pass entry good"])
        #expect(report.problems.map(\.origin) == ["pass entry bank"])
        #expect(try keychain.exists(GenericPassword(service: "bank", account: "bank")) == false)
    }

    @Test("a file name that is not UTF-8 is reported for that entry (escaped) and skipped with skipInvalid; the others import")
    func nonUTF8Name() throws {
        let pass = try PassStore()
        try pass.insert("good", "g\n")
        try pass.insert("cafe", "c\n")
        // Rename cafe.gpg to "caf\xE9.gpg" (Latin-1), a name no String can hold.
        let from = pass.store.appendingPathComponent("cafe.gpg").path
        let to = Array(pass.store.path.utf8) + Array("/caf".utf8) + [0xE9] + Array(".gpg".utf8)
        #expect(rename(from, to.map { CChar(bitPattern: $0) } + [0]) == 0)
        let keychain = Keychain(store: InMemoryKeychain())
        let source = PassImportSource(environment: pass.environment)
        let error = try #require(throws: KeychainError.self) { try keychain.importItems(from: source) }
        #expect(error == .invalidItem && error.reason.contains(#"pass entry caf\351"#) && error.reason.contains("not UTF-8"))
        #expect(try keychain.exists(GenericPassword(service: "good", account: "good")) == false)
        let report = try keychain.importItems(from: source, options: ImportOptions(skipInvalid: true))
        #expect(report.results.map(\.origin) == ["pass entry good"])
        #expect(report.problems.map(\.origin) == [#"pass entry caf\351"#])
        #expect(report.description.contains(#"skip pass entry caf\351: "#))
    }

    @Test("gpg's output over the size limit fails naming the entry: gpg is stopped, the plaintext never kept")
    func decryptedOverLimit() throws {
        let pass = try PassStore()
        try pass.insert("small", "s\n")
        // Compresses to a few kilobytes, decrypts to 2 MiB (the default limit is 1 MiB).
        try pass.insert("bomb", "pw\n" + String(repeating: "x", count: 2 << 20) + "\n")
        let keychain = Keychain(store: InMemoryKeychain())
        let error = try #require(throws: KeychainError.self) { try keychain.importItems(from: PassImportSource(environment: pass.environment)) }
        #expect(error.status == Status.dataTooLarge)
        #expect(error.reason.contains("pass entry bomb") && !error.reason.contains("xxxx"))
        #expect(try keychain.exists(GenericPassword(service: "small", account: "small")) == false)
    }

    @Test("PASSWORD_STORE_GPG_OPTS with shell quoting is refused rather than guessed")
    func quotedOptions() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["PASSWORD_STORE_GPG_OPTS"] = "--trust-model 'always'"
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(throws: KeychainError.invalidItem) { try PassImportSource(directory: dir, environment: environment).read() }
    }
}
#endif
