#if NIO
import Configuration
import KeystoneConfiguration
import Testing

@Suite("Key mapping")
struct KeyMappingTests {
    @Test("the default rule maps db.password to service com.example.app, account db.password")
    func defaultRule() {
        let mapping = KeychainKeyMapping.service("com.example.app")
        #expect(mapping.item(AbsoluteConfigKey(["db", "password"])) == KeychainItemName(service: "com.example.app", account: "db.password"))
        #expect(mapping.services == ["com.example.app"])
    }

    @Test("an empty key or an empty component maps to no item")
    func emptyKeys() {
        let mapping = KeychainKeyMapping.service("com.example.app")
        #expect(mapping.item(AbsoluteConfigKey([])) == nil)
        #expect(mapping.item(AbsoluteConfigKey(["db", "", "password"])) == nil)
    }

    @Test("the separator is overridable")
    func separator() {
        let mapping = KeychainKeyMapping.service("svc", separator: "/")
        #expect(mapping.item(AbsoluteConfigKey(["db", "password"]))?.account == "db/password")
    }
}
#endif

#if NIO
import Foundation
import KeychainEngine
@testable import KeystoneConfiguration
import Keystone
import KeystoneTesting

/// A store that records the name of the thread each read ran on.
private final class ThreadRecordingStore: KeychainStore, @unchecked Sendable {
    // @unchecked Sendable: `names` is reached only under `lock`; the wrapped store is Sendable.
    let wrapped: any KeychainStore
    private let lock = NSLock()
    private var names: [String] = []
    init(_ wrapped: any KeychainStore) { self.wrapped = wrapped }
    var threadNames: [String] { lock.lock(); defer { lock.unlock() }; return names }
    private func record() {
        let name = OwnThread.isCurrent ? "own thread" : "caller's thread"
        lock.lock(); names.append(name); lock.unlock()
    }
    func add(_ attributes: KeychainQuery) throws -> ItemResult? { try wrapped.add(attributes) }
    func copyMatching(_ query: KeychainQuery) throws -> ItemResult? { record(); return try wrapped.copyMatching(query) }
    func update(_ query: KeychainQuery, with: KeychainQuery) throws { try wrapped.update(query, with: with) }
    func delete(_ query: KeychainQuery) throws { try wrapped.delete(query) }
}

@Suite("KeystoneConfigProvider keeps blocking keychain calls off the cooperative pool")
struct ProviderThreadTests {
    @Test("reload() and fetchValue() read the keychain on a thread of their own, never the cooperative pool")
    func ownThreads() async throws {
        let memory = InMemoryKeychain()
        try await Keychain(store: memory).save(Data("v".utf8), for: GenericPassword(service: "svc", account: "k"))
        let recorder = ThreadRecordingStore(memory)
        let provider = KeystoneConfigProvider(keychain: Keychain(store: recorder), keychainName: "memory", mapping: .service("svc"))
        try await provider.reload()
        _ = try await provider.fetchValue(forKey: AbsoluteConfigKey(["k"]), type: .string)
        #expect(recorder.threadNames == ["own thread", "own thread"])
        // reloadBlocking() is for start-up code on a thread of its own: it reads on the caller's thread.
        try provider.reloadBlocking()
        #expect(recorder.threadNames.last == "caller's thread")
        #expect(try provider.value(forKey: AbsoluteConfigKey(["k"]), type: .string).value?.content == .string("v"))
        // A store that is not an engine: the automatic change source is the bounded poll.
        #expect(provider.engine == nil)
        #expect(provider.changes == .automatic)
    }
}
#endif
