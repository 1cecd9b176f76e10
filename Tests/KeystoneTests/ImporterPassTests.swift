#if os(macOS) || os(Linux)
import Foundation
import Keystone
import KeychainEngine
import KeystoneTesting
import Testing

/// A throwaway GnuPG home with one key without a passphrase, and a password store initialised for it, in a temporary
/// directory: never the user's ~/.gnupg or ~/.password-store.
final class PassFixture {
    let root: URL
    let gnupgHome: URL
    let store: URL
    let environment: [String: String]

    /// Why the fixture cannot be made here (gpg or pass missing), or nil.
    static var unavailableReason: String? {
        for tool in ["gpg", "pass", "gpgconf"] where which(tool) == nil { return "\(tool) is not installed (apt-get install gnupg pass)" }
        return nil
    }

    static func which(_ tool: String) -> String? {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        where FileManager.default.isExecutableFile(atPath: "\(dir)/\(tool)") { return "\(dir)/\(tool)" }
        return nil
    }

    init() throws {
        // A short path: gpg-agent's socket path must stay under the kernel's limit.
        root = URL(fileURLWithPath: "/tmp/kp-\(UUID().uuidString.prefix(8))")
        gnupgHome = root.appendingPathComponent("g")
        store = root.appendingPathComponent("store")
        try FileManager.default.createDirectory(at: gnupgHome, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var env = ProcessInfo.processInfo.environment
        env["GNUPGHOME"] = gnupgHome.path
        env["PASSWORD_STORE_DIR"] = store.path
        env["HOME"] = root.path
        env["PASSWORD_STORE_GPG_OPTS"] = nil
        environment = env
        try run("gpg", ["--batch", "--passphrase", "", "--quick-gen-key", "Keystone Test <keystone-test@example.invalid>", "default", "default", "never"])
        try run("pass", ["init", "keystone-test@example.invalid"])
    }

    deinit {
        _ = try? run("gpgconf", ["--kill", "gpg-agent"])
        try? FileManager.default.removeItem(at: root)
    }

    /// `pass insert -m ENTRY` with `content` on standard input (never in arguments).
    func insert(_ entry: String, _ content: String) throws {
        try run("pass", ["insert", "-m", entry], input: content)
    }

    @discardableResult
    func run(_ tool: String, _ arguments: [String], input: String? = nil) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(Self.which(tool)))
        process.arguments = arguments
        process.environment = environment
        let out = Pipe(), inPipe = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = inPipe
        try process.run()
        if let input { inPipe.fileHandleForWriting.write(Data(input.utf8)) }
        try inPipe.fileHandleForWriting.close()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw KeychainError(status: Status.io, reason: "\(tool) \(arguments.first ?? "") exited \(process.terminationStatus)") }
        return String(decoding: data, as: UTF8.self)
    }
}

@Suite("Importers: pass (password-store) through a real gpg", .enabled(if: PassFixture.unavailableReason == nil, "\(PassFixture.unavailableReason ?? "")"))
struct ImporterPassTests {
    @Test("first line = password, login:/username:/user: = account (else the entry name), directory = service; other lines named, not imported")
    func mapping() throws {
        let pass = try PassFixture()
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
        let pass = try PassFixture()
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
