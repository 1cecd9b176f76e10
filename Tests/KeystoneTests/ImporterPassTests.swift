#if os(macOS) || os(Linux)
import Foundation
import Keystone
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
