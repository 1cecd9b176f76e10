#if NIO && os(Linux)
import Configuration
import ConfigurationTesting
import Foundation
import KeychainEngine
import KeychainFile
@testable import KeystoneConfiguration
import Keystone
import Logging
import Testing

@Suite("KeystoneConfigProvider on a keychain file")
struct KeychainFileProviderTests {
    @Test("passes swift-configuration's ProviderCompatTest on a keychain file")
    func compatibility() async throws {
        let fixture = try TemporaryKeychainFile()
        try store(compatValues, in: fixture.keychain)
        let provider = KeystoneConfigProvider(engine: fixture.engine, mapping: .service(appService), changes: .manual)
        try await provider.reload()
        try await ProviderCompatTest(provider: provider).runTest()
    }

    @Test("every value is marked secret, so a ConfigReader's descriptions and access log redact it")
    func valuesAreSecret() async throws {
        let fixture = try TemporaryKeychainFile()
        try store(["db.password": .string("hunter2-secret-value")], in: fixture.keychain)
        let provider = KeystoneConfigProvider(engine: fixture.engine, mapping: .service(appService), changes: .manual)
        try await provider.reload()
        let lookup = try provider.value(forKey: key("db.password"), type: .string)
        #expect(lookup.value?.isSecret == true)
        #expect(lookup.value?.content == .string("hunter2-secret-value"))
        #expect(!"\(try #require(lookup.value))".contains("hunter2"))
        // The access log of a reader (swift-configuration's AccessLogger) through a captured logger.
        let capture = CapturingReporter()
        let reader = ConfigReader(providers: [provider], accessReporter: capture)
        #expect(reader.string(forKey: "db.password") == "hunter2-secret-value")
        #expect(!capture.all.isEmpty)
        #expect(!capture.all.contains { $0.contains("hunter2") })
        #expect(!"\(provider)".contains("hunter2"))
    }

    @Test("a missing item is nil and falls through to the next provider")
    func missingFallsThrough() async throws {
        let fixture = try TemporaryKeychainFile()
        try store(["db.password": .string("from-keychain")], in: fixture.keychain)
        let provider = KeystoneConfigProvider(engine: fixture.engine, mapping: .service(appService), changes: .manual)
        try await provider.reload()
        #expect(try provider.value(forKey: key("api.token"), type: .string).value == nil)
        #expect(try await provider.fetchValue(forKey: key("api.token"), type: .string).value == nil)
        let reader = ConfigReader(providers: [provider, InMemoryProvider(values: ["api.token": "from-memory", "db.password": "shadowed"])])
        #expect(reader.string(forKey: "api.token") == "from-memory")
        #expect(reader.string(forKey: "db.password") == "from-keychain")
        // Items of another service are not this provider's.
        try store(["api.token": .string("other-service")], in: fixture.keychain, service: "com.example.other")
        try await provider.reload()
        #expect(try provider.value(forKey: key("api.token"), type: .string).value == nil)
    }

    @Test("a value of the wrong type is a notConvertible error naming the key, never the value")
    func wrongType() async throws {
        let fixture = try TemporaryKeychainFile()
        try store(["db.port": .string("not-a-number-SECRETISH")], in: fixture.keychain)
        try await fixture.keychain.save(Data([0xff, 0xfe, 0x41]), for: GenericPassword(service: appService, account: "binary"))
        let provider = KeystoneConfigProvider(engine: fixture.engine, mapping: .service(appService), changes: .manual)
        try await provider.reload()
        for (name, type) in [("db.port", ConfigType.int), ("db.port", .bool), ("db.port", .intArray), ("binary", .string)] {
            let error = try #require(throws: KeystoneConfigurationError.self) { try provider.value(forKey: key(name), type: type) }
            #expect(error.code == .notConvertible)
            #expect(error.key == name)
            #expect(error.message.contains(fixture.path))
            #expect(!"\(error)".contains("SECRETISH"))
        }
        // The bytes read as bytes.
        #expect(try provider.value(forKey: key("binary"), type: .bytes).value?.content == .bytes([0xff, 0xfe, 0x41]))
    }

    @Test("a locked keychain is a locked error naming the keychain and the fix, for every key, never a default")
    func locked() async throws {
        let fixture = try TemporaryKeychainFile()
        try store(["db.password": .string("pw-value-1")], in: fixture.keychain)
        let provider = KeystoneConfigProvider(engine: fixture.engine, mapping: .service(appService), changes: .manual)
        // Not loaded yet: locked.
        let before = try #require(throws: KeystoneConfigurationError.self) { try provider.value(forKey: key("db.password"), type: .string) }
        #expect(before.code == .locked)
        try await provider.reload()
        fixture.file.lock()
        let error = try await #require(throws: KeystoneConfigurationError.self) { try await provider.reload() }
        #expect(error.code == .locked)
        #expect(error.status == Status.interactionNotAllowed)
        #expect(error.message.contains(fixture.path))
        #expect(error.message.contains("unlock"))
        // The values held were dropped: reads throw, the missing key too (no fall-through while locked).
        for name in ["db.password", "absent.key"] {
            let read = try #require(throws: KeystoneConfigurationError.self) { try provider.value(forKey: key(name), type: .string) }
            #expect(read.code == .locked)
        }
        let reader = ConfigReader(providers: [provider, InMemoryProvider(values: ["db.password": "default"])])
        #expect(throws: KeystoneConfigurationError.self) { try reader.requiredString(forKey: "db.password") }
        let fetched = try await #require(throws: KeystoneConfigurationError.self) { try await provider.fetchValue(forKey: key("db.password"), type: .string) }
        #expect(fetched.code == .locked)
    }

    @Test("a damaged item is a damaged error for its key only; the other items are served")
    func damagedItem() async throws {
        let sqlite3 = try #require(["/usr/bin/sqlite3", "/usr/local/bin/sqlite3"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                   "sqlite3 damages the row (apt-get install sqlite3)")
        let fixture = try TemporaryKeychainFile()
        try store(["good": .string("good-value")], in: fixture.keychain)
        try store(["victim": .string("victim-SECRET-value")], in: fixture.keychain)
        // The last row (victim) gets the first row's sealed payload: a swap the file detects.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: sqlite3)
        process.arguments = [fixture.path, """
            UPDATE genp SET payload = (SELECT payload FROM genp WHERE rowid = (SELECT min(rowid) FROM genp)),
                            wrapped = (SELECT wrapped FROM genp WHERE rowid = (SELECT min(rowid) FROM genp))
            WHERE rowid = (SELECT max(rowid) FROM genp);
            """]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        // A fresh instance (no cached rows), unlocked.
        let file = try KeychainFile.open(at: fixture.path)
        if file.lockState != .unlocked { try file.unlock(password: TemporaryKeychainFile.password) }
        let capture = LogCapture()
        let provider = KeystoneConfigProvider(engine: KeychainEngine(storage: file), mapping: .service(appService), changes: .manual,
                                              logger: capture.logger)
        try await provider.reload()
        #expect(try provider.value(forKey: key("good"), type: .string).value?.content == .string("good-value"))
        let error = try #require(throws: KeystoneConfigurationError.self) { try provider.value(forKey: key("victim"), type: .string) }
        #expect(error.code == .damaged)
        #expect(error.key == "victim")
        #expect(!"\(error)".contains("SECRET") && !"\(error)".contains("good-value"))
        #expect(!capture.all.contains { $0.contains("SECRET") || $0.contains("good-value") })
    }

    @Test("the snapshot holds the values: reads do not touch the keychain (a locked file still serves the snapshot taken)")
    func snapshotIsCached() async throws {
        let fixture = try TemporaryKeychainFile()
        try store(["db.password": .string("v1")], in: fixture.keychain)
        let provider = KeystoneConfigProvider(engine: fixture.engine, mapping: .service(appService), changes: .manual)
        try await provider.reload()
        let snapshot = provider.snapshot()
        fixture.file.lock()
        // Without a reload the provider has not seen the lock; the snapshot taken keeps its values either way.
        #expect(try snapshot.value(forKey: key("db.password"), type: .string).value?.content == .string("v1"))
        #expect(try provider.value(forKey: key("db.password"), type: .string).value?.content == .string("v1"))
        #expect(provider.reloadCount == 1)
    }
}

@Suite("KeystoneConfigProvider watches a keychain file", .serialized)
struct KeychainFileWatchTests {
    @Test("a rotation made by the keystone CLI in another process reaches a watcher through inotify, not a timer")
    func rotationByCLI() async throws {
        let fixture = try TemporaryKeychainFile()
        try store(["api.token": .string("token-v1")], in: fixture.keychain)
        let provider = KeystoneConfigProvider(engine: fixture.engine, mapping: .service(appService), changes: .automatic)
        try await provider.reload()
        let runner = Task { try await provider.run() }
        defer { runner.cancel() }
        let path = fixture.path, home = fixture.folder
        let update = try await awaitUpdate(provider, key("api.token"), whileWatching: {
            var run = try keystone(["add-generic-password", "-U", "-a", "api.token", "-s", appService, path, "-w"], input: "token-v2\n", home: home)
            if run.status == 36 {
                // No unlock cache shared with child processes here: the CLI unlocks itself.
                _ = try keystone(["unlock-keychain", path], input: TemporaryKeychainFile.password + "\n", home: home)
                run = try keystone(["add-generic-password", "-U", "-a", "api.token", "-s", appService, path, "-w"], input: "token-v2\n", home: home)
            }
            #expect(run.status == 0, "keystone add-generic-password: \(run.stderr)")
        }, accept: { $0.string == "token-v2" })
        #expect(update.string == "token-v2")
        #expect(try provider.value(forKey: key("api.token"), type: .string).value?.content == .string("token-v2"))
    }

    @Test("a keychain locked while watched: the watcher sees a locked error, never the old value as a default")
    func lockedWhileWatched() async throws {
        let fixture = try TemporaryKeychainFile()
        try store(["api.token": .string("token-v1")], in: fixture.keychain)
        let provider = KeystoneConfigProvider(engine: fixture.engine, mapping: .service(appService), changes: .automatic)
        try await provider.reload()
        let runner = Task { try await provider.run() }
        defer { runner.cancel() }
        let file = fixture.file
        // Locking writes the file's header (it tells other instances): inotify wakes the provider, whose reload finds it locked.
        let update = try await awaitUpdate(provider, key("api.token"), whileWatching: { file.lock() },
                                           accept: { $0.configurationError != nil })
        #expect(update.configurationError?.code == .locked)
        #expect(throws: KeystoneConfigurationError.self) { try provider.value(forKey: key("api.token"), type: .string) }
    }

    @Test("the provider's own reads cause no reload: an idle watched file reloads only for changes")
    func noFeedbackLoop() async throws {
        let fixture = try TemporaryKeychainFile()
        try store(["a": .string("1")], in: fixture.keychain)
        let provider = KeystoneConfigProvider(engine: fixture.engine, mapping: .service(appService), changes: .automatic)
        try await provider.reload()
        let runner = Task { try await provider.run() }
        defer { runner.cancel() }
        let keychain = fixture.keychain
        // A change made in this process: seen (proof the watch runs), then the count must settle.
        _ = try await awaitUpdate(provider, key("b"), whileWatching: { try store(["b": .string("2")], in: keychain) },
                                  accept: { $0.string == "2" })
        let settled = provider.reloadCount
        _ = try await awaitUpdate(provider, key("c"), whileWatching: { try store(["c": .string("3")], in: keychain) },
                                  accept: { $0.string == "3" })
        // One change: at most two reloads (a commit's WAL writes coalesce; one may start while another runs).
        #expect(provider.reloadCount - settled <= 3)
    }
}
#endif
