import Foundation
import Testing
import KeychainEngine
@testable import Keystone
import KeystoneTesting

/// Forwards the four SecItem operations to an engine: a store the typed API cannot take the compiled path on.
struct SecItemOnly: KeychainStore {
    let engine: KeychainEngine
    func add(_ attributes: KeychainQuery) throws -> ItemResult? { try engine.add(attributes) }
    func copyMatching(_ query: KeychainQuery) throws -> ItemResult? { try engine.copyMatching(query) }
    func update(_ query: KeychainQuery, with: KeychainQuery) throws { try engine.update(query, with: with) }
    func delete(_ query: KeychainQuery) throws { try engine.delete(query) }
}

/// Two engines on memory with the same clock and configuration: one reached directly (the typed API's
/// compiled path), one through the SecItem operations only. A script run on both must read the same.
struct TwinKeychains {
    /// Each engine's clock: a script moves the clock of the engine it runs on.
    let clocks = (compiled: TestClock(), reference: TestClock())
    let compiled: KeychainEngine
    let reference: KeychainEngine

    init(entitled: [String]? = nil) {
        var config = EngineConfiguration()
        if let entitled { config.accessGroups = .entitled(entitled) }
        let clocks = self.clocks
        config.now = { clocks.compiled.now }
        compiled = KeychainEngine(storage: MemoryStorage(), configuration: config, authenticator: FixedAuthenticator(.success))
        config.now = { clocks.reference.now }
        reference = KeychainEngine(storage: MemoryStorage(), configuration: config, authenticator: FixedAuthenticator(.success))
    }

    /// Runs `step` on a keychain over each engine (with that engine's clock); returns the two transcripts.
    func run(options: ItemOptions = ItemOptions(), _ step: (Keychain, KeychainEngine, TestClock) throws -> String) -> (String, String) {
        func outcome(_ keychain: Keychain, _ engine: KeychainEngine, _ clock: TestClock) -> String {
            do { return try step(keychain, engine, clock) } catch let error as KeychainError { return "error \(error.status)" } catch { return "error \(error)" }
        }
        return (outcome(Keychain(store: compiled, options: options), compiled, clocks.compiled),
                outcome(Keychain(store: SecItemOnly(engine: reference), options: options), reference, clocks.reference))
    }

    func lock(_ state: LockState) {
        (compiled.storage as? MemoryStorage)?.lockState = state
        (reference.storage as? MemoryStorage)?.lockState = state
    }
}

/// Everything the engine stores for the items of `service`, as text (attributes, secret, row ids).
func dump(_ engine: KeychainEngine, service: String = "com.example.api") throws -> String {
    let query: KeychainQuery = [Key.class: .string("genp"), Key.service: .string(service), Key.synchronizable: .string(Key.synchronizableAny),
                                Key.returnAttributes: .bool(true), Key.returnData: .bool(true), Key.returnPersistentRef: .bool(true),
                                Key.matchLimit: .string(Key.matchLimitAll)]
    guard let result = try? engine.copyMatching(query) else { return "none" }
    return (result.array ?? []).map { item in
        (item.attributes ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
    }.joined(separator: "\n")
}

@Suite("The typed API's compiled path follows exactly the SecItem rules")
struct CompiledPathTests {
    @Test("save adds then updates in place, and reads back, exactly as add / update / copyMatching would",
          arguments: [ItemOptions(), ItemOptions(label: "L", comment: "C"), ItemOptions(accessibility: .afterFirstUnlock, synchronizable: true),
                      ItemOptions(accessGroup: "TEAM.shared"), ItemOptions(accessibility: .whenUnlockedThisDeviceOnly, synchronizable: true)])
    func saveAndRead(_ options: ItemOptions) throws {
        let twins = TwinKeychains()
        let item = try GenericPassword(service: "com.example.api", account: "alice")
        let script: (Keychain, KeychainEngine, TestClock) throws -> String = { keychain, engine, clock in
            var log: [String] = []
            try keychain.save("one", for: item)
            log.append(try keychain.string(for: item) ?? "nil")
            clock.advance(10)
            try keychain.save("two", for: item)
            log.append(try keychain.string(for: item) ?? "nil")
            log.append(try keychain.string(for: item.withAccount("bob")) ?? "nil")
            log.append(try dump(engine))
            return log.joined(separator: "|")
        }
        let (compiled, reference) = twins.run(options: options, script)
        #expect(compiled == reference)
    }

    @Test("without a group, save updates the item in every group the query reaches, as add then update does")
    func everyGroup() throws {
        let twins = TwinKeychains()
        let item = try GenericPassword(service: "com.example.api", account: "alice")
        let (compiled, reference) = twins.run { keychain, engine, clock in
            try engine.add([Key.class: .string("genp"), Key.service: .string("com.example.api"), Key.account: .string("alice"),
                            Key.accessGroup: .string("other"), Key.valueData: .data(Data("other".utf8))])
            try keychain.save("one", for: item)
            clock.advance(5)
            try keychain.save("two", for: item)
            return "\(try keychain.string(for: item) ?? "nil")|\(try dump(engine))"
        }
        #expect(compiled == reference)
        #expect(compiled.components(separatedBy: "v_Data=").count == 3)
    }

    @Test("locked keychains, foreign groups and missing passcodes fail with the same status on both paths")
    func failures() throws {
        let item = try GenericPassword(service: "com.example.api", account: "alice")
        let twins = TwinKeychains(entitled: ["TEAM.app", "TEAM.shared"])
        var results: [(String, String)] = []
        results.append(twins.run { keychain, _, _ in try keychain.save("v", for: item); return "saved" })
        twins.lock(.locked)
        results.append(twins.run { keychain, _, _ in try keychain.save("w", for: item); return "saved" })
        results.append(twins.run { keychain, _, _ in try keychain.string(for: item) ?? "nil" })
        results.append(twins.run(options: ItemOptions(accessibility: .always)) { keychain, _, _ in try keychain.save("x", for: item); return "saved" })
        twins.lock(.unlocked)
        results.append(twins.run(options: ItemOptions(accessGroup: "OTHER")) { keychain, _, _ in try keychain.save("y", for: item); return "saved" })
        results.append(twins.run(options: ItemOptions(accessGroup: "OTHER")) { keychain, _, _ in try keychain.string(for: item) ?? "nil" })
        results.append(twins.run(options: ItemOptions(accessGroup: "TEAM.shared")) { keychain, _, _ in try keychain.string(for: item) ?? "nil" })
        results.append(twins.run { keychain, engine, clock in "\(try keychain.string(for: item) ?? "nil")|\(try dump(engine))" })
        for (compiled, reference) in results { #expect(compiled == reference) }
        #expect(results.map(\.0).contains("error -25308"))
        #expect(results.map(\.0).contains("error -34018"))
    }

    @Test("an item protected by an access control takes the SecItem path, which authenticates")
    func accessControlled() throws {
        let twins = TwinKeychains()
        let item = try GenericPassword(service: "com.example.api", account: "alice")
        let (compiled, reference) = twins.run { keychain, engine, clock in
            let protected = Keychain(store: keychain.store, options: ItemOptions(accessControlFlags: .userPresence))
            try protected.save("one", for: item)
            try keychain.save("two", for: item)
            return "\(try keychain.string(for: item) ?? "nil")|\(try dump(engine))"
        }
        #expect(compiled == reference)
        #expect(compiled.hasPrefix("two|"))
    }

    @Test("with hooks installed (InMemoryKeychain's call log), a save is still seen as an add, then an update")
    func hooksSeeBothSteps() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        let item = try GenericPassword(service: "com.example.api", account: "alice")
        try keychain.save("one", for: item)
        try keychain.save("two", for: item)
        #expect(memory.calls.map(\.operation) == [.add, .add, .update])
        #expect(try keychain.string(for: item) == "two")
    }

    @Test("over InMemoryKeychain the compiled path logs the same calls, statuses and injected failures as the SecItem path")
    func sameCallLog() throws {
        struct Forward: KeychainStore {
            let memory: InMemoryKeychain
            func add(_ attributes: KeychainQuery) throws -> ItemResult? { try memory.add(attributes) }
            func copyMatching(_ query: KeychainQuery) throws -> ItemResult? { try memory.copyMatching(query) }
            func update(_ query: KeychainQuery, with: KeychainQuery) throws { try memory.update(query, with: with) }
            func delete(_ query: KeychainQuery) throws { try memory.delete(query) }
        }
        let item = try GenericPassword(service: "com.example.api", account: "alice")
        func script(_ memory: InMemoryKeychain, _ keychain: Keychain) -> [String] {
            var out: [String] = []
            func step(_ body: () throws -> String) {
                do { out.append(try body()) } catch let error as KeychainError { out.append("error \(error.status)") } catch { out.append("\(error)") }
            }
            step { try keychain.string(for: item) ?? "nil" }
            step { try keychain.save("one", for: item); return "saved" }
            step { try keychain.save("two", for: item); return "saved" }
            memory.injectFailure(Status.missingEntitlement, on: .update)
            step { try keychain.save("three", for: item); return "saved" }
            memory.injectFailure(Status.notAvailable, on: .copy)
            step { try keychain.string(for: item) ?? "nil" }
            memory.lockState = .locked
            step { try keychain.save("four", for: item); return "saved" }
            step { try keychain.string(for: item) ?? "nil" }
            memory.lockState = .unlocked
            step { try keychain.string(for: item) ?? "nil" }
            return out + memory.calls.map { "\($0)" }
        }
        let compiled = InMemoryKeychain(), reference = InMemoryKeychain()
        let a = script(compiled, Keychain(store: compiled))
        let b = script(reference, Keychain(store: Forward(memory: reference)))
        #expect(a == b)
        #expect(a.contains("error -34018"))
        #expect(a.filter { $0 == "two" }.count == 1)
    }
}
