#if NIO && os(Linux)
import Configuration
import ConfigurationTesting
import EtcdCluster
import Foundation
import KeychainEngine
import KeychainEtcd
import KeychainSecretService
@testable import KeystoneConfiguration
import Keystone
import Logging
import SecretServiceDaemon
import Testing

/// One private gnome-keyring (its own D-Bus) for this suite's process.
private enum SharedDaemon {
    static let daemon = Result<SecretServiceDaemon, any Error> { try SecretServiceDaemon.start() }
    static func engine() throws -> KeychainEngine {
        var options = SecretServiceStorage.Options(busAddress: try daemon.get().busAddress)
        options.unlockPrompt = .never
        return KeychainEngine(storage: try SecretServiceStorage(options: options))
    }
}

@Suite("KeystoneConfigProvider on the Secret Service", .serialized,
       .enabled(if: SecretServiceDaemon.unavailableReason == nil,
                Comment(rawValue: "Secret Service skipped: \(SecretServiceDaemon.unavailableReason ?? "")")))
struct SecretServiceProviderTests {
    @Test("passes swift-configuration's ProviderCompatTest on a private gnome-keyring")
    func compatibility() async throws {
        let engine = try SharedDaemon.engine()
        let service = "com.example.compat-\(UUID().uuidString)"
        try store(compatValues, in: Keychain(store: engine), service: service)
        let provider = KeystoneConfigProvider(engine: engine, mapping: .service(service), changes: .manual)
        try await provider.reload()
        try await ProviderCompatTest(provider: provider).runTest()
    }

    @Test("a change made through another connection is seen by the bounded poll, also across a keyring daemon restart")
    func pollSeesChanges() async throws {
        let engine = try SharedDaemon.engine()
        let service = "com.example.poll-\(UUID().uuidString)"
        try store(["api.token": .string("v1")], in: Keychain(store: engine), service: service)
        let provider = KeystoneConfigProvider(engine: engine, mapping: .service(service), changes: .poll(every: .milliseconds(100)))
        try await provider.reload()
        let runner = Task { try await provider.run() }
        defer { runner.cancel() }
        let other = Keychain(store: try SharedDaemon.engine())
        let first = try await awaitUpdate(provider, key("api.token"), whileWatching: {
            try store(["api.token": .string("v2")], in: other, service: service)
        }, accept: { $0.string == "v2" })
        #expect(first.string == "v2")
        // The daemon restarted (unlocked again as a login does): the poll goes on and sees the next change.
        let daemon = try SharedDaemon.daemon.get()
        let second = try await awaitUpdate(provider, key("api.token"), whileWatching: {
            try daemon.restartKeyringDaemon(unlock: true)
            try store(["api.token": .string("v3")], in: Keychain(store: try SharedDaemon.engine()), service: service)
        }, accept: { $0.string == "v3" })
        #expect(second.string == "v3")
    }
}

@Suite("KeystoneConfigProvider on etcd", .serialized,
       .enabled(if: EtcdTestCluster.unavailableReason == nil, Comment(rawValue: "etcd skipped: \(EtcdTestCluster.unavailableReason ?? "")")))
struct EtcdProviderTests {
    private static let password = "etcd-config-test-pw"

    /// A new etcd keychain on `cluster` and another client of it ("another machine").
    private func keychains(_ cluster: EtcdTestCluster, query: String = "") throws -> (EtcdKeychain, EtcdKeychain, EtcdConfiguration) {
        let configuration = try EtcdConfiguration(url: cluster.url(name: "config-\(UUID().uuidString.prefix(8))", query: query), environment: [:])
        let keychain = try EtcdKeychain.create(configuration, password: Self.password)
        let other = try EtcdKeychain.open(configuration)
        if other.lockState != .unlocked { try other.unlock(password: Self.password) }
        return (keychain, other, configuration)
    }

    @Test("passes swift-configuration's ProviderCompatTest on a 3-member etcd cluster")
    func compatibility() async throws {
        let (keychain, _, _) = try keychains(try EtcdTestCluster.shared())
        let engine = KeychainEngine(storage: keychain)
        try store(compatValues, in: Keychain(store: engine))
        let provider = KeystoneConfigProvider(engine: engine, mapping: .service(appService), changes: .manual)
        try await provider.reload()
        try await ProviderCompatTest(provider: provider).runTest()
    }

    @Test("etcd's watch brings a rotation made by another client to a watcher")
    func watchSeesOtherClient() async throws {
        let (keychain, other, _) = try keychains(try EtcdTestCluster.shared())
        let engine = KeychainEngine(storage: keychain)
        try store(["api.token": .string("t1")], in: Keychain(store: engine))
        let provider = KeystoneConfigProvider(engine: engine, mapping: .service(appService))
        try await provider.reload()
        let runner = Task { try await provider.run() }
        defer { runner.cancel() }
        let rotated = try await awaitUpdate(provider, key("api.token"), whileWatching: {
            try store(["api.token": .string("t2")], in: Keychain(store: KeychainEngine(storage: other)))
        }, accept: { $0.string == "t2" })
        #expect(rotated.string == "t2")
    }

    @Test("members killed and restarted during a watch: the watch resumes on another member and misses no rotation; a lost quorum is .unavailable and keeps the values")
    func membersKilledAndRestarted() async throws {
        let cluster = try EtcdTestCluster.start(EtcdTestCluster.Options(members: 3))
        defer { cluster.stop() }
        let (keychain, other, _) = try keychains(cluster, query: "timeout=2")
        let engine = KeychainEngine(storage: keychain)
        try store(["api.token": .string("k0")], in: Keychain(store: engine))
        let capture = LogCapture()
        let provider = KeystoneConfigProvider(engine: engine, mapping: .service(appService), logger: capture.logger)
        try await provider.reload()
        let runner = Task { try await provider.run() }
        defer { runner.cancel() }
        let writer = Keychain(store: KeychainEngine(storage: other))
        // The watch is on member 0 first (endpoints are tried in order): kill it, rotate, then the others in turn.
        for (round, member) in [0, 1, 2].enumerated() {
            let value = "k\(round + 1)"
            let seen = try await awaitUpdate(provider, key("api.token"), whileWatching: {
                cluster.kill(member: member)
                try store(["api.token": .string(value)], in: writer)
            }, accept: { $0.string == value })
            #expect(seen.string == value)
            try cluster.restart(member: member)
            try cluster.waitUntilHealthy()
        }
        // Two members down: no quorum. The reload fails with .unavailable naming the keychain; the values stay.
        cluster.kill(member: 1)
        cluster.kill(member: 2)
        let error = try await #require(throws: KeystoneConfigurationError.self) { try await provider.reload() }
        #expect(error.code == .unavailable)
        #expect(error.message.contains(provider.keychainName))
        #expect(try provider.value(forKey: key("api.token"), type: .string).value?.content == .string("k3"))
        try cluster.restart(member: 1)
        try cluster.restart(member: 2)
        try cluster.waitUntilHealthy()
        // And the watch is back: a rotation after the outage arrives.
        let after = try await awaitUpdate(provider, key("api.token"), whileWatching: {
            try store(["api.token": .string("k4")], in: writer)
        }, accept: { $0.string == "k4" })
        #expect(after.string == "k4")
        #expect(!capture.all.contains { $0.contains(Self.password) || $0.contains("k1") && $0.contains("api.token=") })
    }

    @Test("a watch resumed from a compacted revision says resynchronize, and a provider reading again sees the current value")
    func compaction() async throws {
        let cluster = try EtcdTestCluster.shared()
        let (keychain, other, _) = try keychains(cluster)
        let engine = KeychainEngine(storage: keychain)
        let start = try keychain.currentRevision()
        for value in ["c1", "c2", "c3"] { try store(["api.token": .string(value)], in: Keychain(store: KeychainEngine(storage: other))) }
        let now = try keychain.currentRevision()
        _ = try cluster.etcdctl(["compact", "\(now)"])
        var iterator = keychain.changes(after: start).makeAsyncIterator()
        let first = try await iterator.next()
        guard case .resynchronize = first else {
            Issue.record("expected resynchronize after compaction, got \(String(describing: first))")
            return
        }
        let provider = KeystoneConfigProvider(engine: engine, mapping: .service(appService), changes: .manual)
        try await provider.reload()
        #expect(try provider.value(forKey: key("api.token"), type: .string).value?.content == .string("c3"))
    }

    @Test("a locked etcd keychain is .locked naming its URL, never a default")
    func locked() async throws {
        let (keychain, _, configuration) = try keychains(try EtcdTestCluster.shared())
        let engine = KeychainEngine(storage: keychain)
        try store(["api.token": .string("x")], in: Keychain(store: engine))
        let provider = KeystoneConfigProvider(engine: engine, mapping: .service(appService), changes: .manual)
        try await provider.reload()
        keychain.lock()
        let error = try await #require(throws: KeystoneConfigurationError.self) { try await provider.reload() }
        #expect(error.code == .locked)
        #expect(error.message.contains(configuration.description))
        #expect(throws: KeystoneConfigurationError.self) { try provider.value(forKey: key("api.token"), type: .string) }
    }
}
#endif
