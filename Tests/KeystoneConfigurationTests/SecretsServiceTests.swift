#if NIO && os(Linux)
import Configuration
import Foundation
import KeychainEngine
import KeychainFile
@testable import KeystoneConfiguration
import Keystone
import Logging
import ServiceLifecycle
import Testing

@Suite("KeystoneSecretsService unlocks, follows and locks")
struct SecretsServiceTests {
    /// A locked keychain file holding db.password, and a provider over a fresh instance of it.
    private func lockedFixture() throws -> (TemporaryKeychainFile, KeystoneConfigProvider, KeychainFile) {
        let fixture = try TemporaryKeychainFile()
        try store(["db.password": .string("db-SECRET-1")], in: fixture.keychain)
        fixture.file.lock()
        let file = try KeychainFile.open(at: fixture.path)
        #expect(file.lockState == .locked)
        let provider = KeystoneConfigProvider(engine: KeychainEngine(storage: file), mapping: .service(appService))
        return (fixture, provider, file)
    }

    @Test("a password file unlocks the keychain at prepare(); the values are then served")
    func passwordFile() async throws {
        let (fixture, provider, file) = try lockedFixture()
        defer { withExtendedLifetime(fixture) {} }
        let passwordFile = fixture.folder.appendingPathComponent("password")
        try Data((TemporaryKeychainFile.password + "\n").utf8).write(to: passwordFile)
        let service = KeystoneSecretsService(provider: provider, password: .file(passwordFile.path), environment: [:], standardInput: { nil })
        try await service.prepare()
        #expect(file.lockState == .unlocked)
        #expect(try provider.value(forKey: key("db.password"), type: .string).value?.content == .string("db-SECRET-1"))
    }

    @Test("systemd's credential is read from $CREDENTIALS_DIRECTORY/<name>; without the variable, the error says what to add")
    func systemdCredential() async throws {
        let (fixture, provider, file) = try lockedFixture()
        defer { withExtendedLifetime(fixture) {} }
        let missing = KeystoneSecretsService(provider: provider, password: .systemdCredential("keychain-password"), environment: [:], standardInput: { nil })
        let error = try await #require(throws: KeystoneConfigurationError.self) { try await missing.prepare() }
        #expect(error.code == .passwordSourceUnavailable)
        #expect(error.message.contains("LoadCredential=keychain-password"))
        let credentials = fixture.folder.appendingPathComponent("credentials")
        try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
        try Data(TemporaryKeychainFile.password.utf8).write(to: credentials.appendingPathComponent("keychain-password"))
        let service = KeystoneSecretsService(provider: provider, password: .systemdCredential("keychain-password"),
                                             environment: ["CREDENTIALS_DIRECTORY": credentials.path], standardInput: { nil })
        try await service.prepare()
        #expect(file.lockState == .unlocked)
    }

    @Test("standard input gives the password; a wrong one is invalidPassword and never appears in the error or the log")
    func standardInputAndWrongPassword() async throws {
        let (fixture, provider, file) = try lockedFixture()
        defer { withExtendedLifetime(fixture) {} }
        let capture = LogCapture()
        let wrong = KeystoneSecretsService(provider: provider, password: .standardInput, logger: capture.logger,
                                           environment: [:], standardInput: { "WRONG-PASSWORD-xyz" })
        let error = try await #require(throws: KeystoneConfigurationError.self) { try await wrong.prepare() }
        #expect(error.code == .invalidPassword)
        #expect(!"\(error)".contains("WRONG-PASSWORD-xyz"))
        #expect(file.lockState == .locked)
        let right = KeystoneSecretsService(provider: provider, password: .standardInput, logger: capture.logger,
                                           environment: [:], standardInput: { TemporaryKeychainFile.password })
        try await right.prepare()
        #expect(file.lockState == .unlocked)
        #expect(!capture.all.contains { $0.contains("WRONG-PASSWORD") || $0.contains(TemporaryKeychainFile.password) || $0.contains("db-SECRET") })
    }

    @Test("an environment variable is used only when asked, with a warning that it is weaker")
    func environmentVariable() async throws {
        let (fixture, provider, file) = try lockedFixture()
        defer { withExtendedLifetime(fixture) {} }
        let capture = LogCapture()
        let service = KeystoneSecretsService(provider: provider, password: .environmentVariable("APP_KEYCHAIN_PASSWORD"), logger: capture.logger,
                                             environment: ["APP_KEYCHAIN_PASSWORD": TemporaryKeychainFile.password], standardInput: { nil })
        try await service.prepare()
        #expect(file.lockState == .unlocked)
        #expect(capture.all.contains { $0.contains("environ") })
        // Other sources never fall back to the environment.
        let (otherFixture, other, _) = try lockedFixture()
        defer { withExtendedLifetime(otherFixture) {} }
        let noFallback = KeystoneSecretsService(provider: other, password: .file("/nonexistent/keychain-password"),
                                                environment: ["APP_KEYCHAIN_PASSWORD": TemporaryKeychainFile.password], standardInput: { nil })
        let error = try await #require(throws: KeystoneConfigurationError.self) { try await noFallback.prepare() }
        #expect(error.code == .passwordSourceUnavailable)
    }

    @Test("alreadyUnlocked on a locked keychain fails the start with locked")
    func alreadyUnlockedButLocked() async throws {
        let (fixture, provider, _) = try lockedFixture()
        defer { withExtendedLifetime(fixture) {} }
        let service = KeystoneSecretsService(provider: provider, password: .alreadyUnlocked, environment: [:], standardInput: { nil })
        let error = try await #require(throws: KeystoneConfigurationError.self) { try await service.prepare() }
        #expect(error.code == .locked)
    }

    @Test("graceful shutdown of a ServiceGroup locks the keychain and discards the provider's values")
    func gracefulShutdown() async throws {
        let (fixture, provider, file) = try lockedFixture()
        defer { withExtendedLifetime(fixture) {} }
        let passwordFile = fixture.folder.appendingPathComponent("password")
        try Data(TemporaryKeychainFile.password.utf8).write(to: passwordFile)
        let service = KeystoneSecretsService(provider: provider, password: .file(passwordFile.path), environment: [:], standardInput: { nil })
        try await service.prepare()
        let keychain = Keychain(store: try #require(provider.engine))
        let group = ServiceGroup(configuration: .init(services: [.init(service: service)], logger: Logger(label: "test")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            // The service follows changes while it runs: a change is seen (the group is running), then shut down.
            _ = try await awaitUpdate(provider, key("db.password"), whileWatching: {
                try store(["db.password": .string("db-SECRET-2")], in: keychain)
            }, accept: { $0.string == "db-SECRET-2" })
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        #expect(file.lockState == .locked)
        let error = try #require(throws: KeystoneConfigurationError.self) { try provider.value(forKey: key("db.password"), type: .string) }
        #expect(error.code == .locked)
    }
}
#endif
