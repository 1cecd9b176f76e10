#if NIO
import Configuration
import Foundation
import KeychainEngine
import Keystone
import Logging
#if !canImport(Darwin)
import KeychainEtcd
import KeychainFile
#endif

/// A swift-configuration provider whose values are the generic passwords of a Keystone keychain, on any storage: a
/// keychain file, the Secret Service, an etcd keychain, memory.
///
/// ```swift
/// let engine = try KeychainServicesDefaults.fileEngine(at: "/var/lib/app/app.keychain-db", createIfMissing: false)
/// let provider = KeystoneConfigProvider(engine: engine, mapping: .service("com.example.app"))
/// let secrets = KeystoneSecretsService(provider: provider, password: .systemdCredential("keychain-password"))
/// try await secrets.prepare()                       // unlocks, reads the first snapshot
/// let config = ConfigReader(providers: [provider, EnvironmentVariablesProvider()])
/// let password = try config.requiredString(forKey: "db.password", isSecret: true)
/// ```
///
/// Keys map to items by ``KeychainKeyMapping`` (default: service = the app's prefix, account = the key joined with
/// `"."`). Values are typed as the article "Secrets for server apps" documents (text for numbers, Booleans and arrays; raw bytes for
/// `.bytes`). Every value returned is marked secret, so swift-configuration's access log and descriptions redact it.
///
/// The provider holds a snapshot of the mapping's items: ``value(forKey:type:)`` and ``snapshot()`` never touch the
/// keychain. ``reload()`` reads it again (on a thread of its own); ``run()`` reloads when the keychain changes
/// (``KeychainChangeSource``), and watchers see the values that changed. ``fetchValue(forKey:type:)`` reads the one
/// item afresh.
///
/// Outcomes: a missing item is nil (the next provider is asked); a locked keychain (or a provider not loaded yet, or
/// discarded) throws ``KeystoneConfigurationError/Code/locked`` for every key, never a default; an unreachable storage
/// throws `.unavailable` from ``reload()`` and keeps the last snapshot; a damaged item or a value of the wrong type
/// throws `.damaged` / `.notConvertible` for its key only.
///
/// - Important: The snapshot holds the secrets in this process's memory until ``discard()`` (which
///   ``KeystoneSecretsService`` calls at shutdown) or a reload that finds the keychain locked.
public final class KeystoneConfigProvider: Sendable {
    /// The keychain, as errors name it (a file path, an etcd URL without credentials).
    public let keychainName: String
    /// How keys map to items.
    public let mapping: KeychainKeyMapping
    /// How ``run()`` learns of changes.
    public let changes: KeychainChangeSource
    /// The engine the provider reads, when it was made from one (the service locks and unlocks its storage).
    public let engine: KeychainEngine?

    let keychain: Keychain
    let logger: Logger
    private let name: String?
    private let state: Locked<State>

    private struct ValueWatcher {
        let key: AbsoluteConfigKey
        let type: ConfigType
        let continuation: AsyncStream<Result<LookupResult, any Error>>.Continuation
        var last: Outcome
    }

    /// A read's outcome, comparable (so a watcher is told only of changes).
    enum Outcome: Equatable {
        case value(LookupResult)
        case failure(KeystoneConfigurationError)
        case otherFailure(String)

        init(_ result: Result<LookupResult, any Error>) {
            switch result {
            case .success(let lookup): self = .value(lookup)
            case .failure(let error as KeystoneConfigurationError): self = .failure(error)
            case .failure(let error): self = .otherFailure(String(describing: type(of: error)))
            }
        }
    }

    private struct State {
        var snapshot: KeystoneConfigSnapshot
        var snapshotWatchers: [UUID: AsyncStream<KeystoneConfigSnapshot>.Continuation] = [:]
        var valueWatchers: [UUID: ValueWatcher] = [:]
        /// Tickets of reloads: a reload applies its result only when no later-started reload applied one.
        var nextTicket = 0
        var appliedTicket = -1
        var reloads = 0
    }

    /// A provider over `engine`'s keychain.
    ///
    /// Reads nothing: the provider serves values after the first ``reload()`` (``KeystoneSecretsService`` makes it);
    /// before it, reads throw ``KeystoneConfigurationError/Code/locked``.
    ///
    /// - Parameters:
    ///   - engine: the keychain (`KeychainServicesDefaults.fileEngine(at:)`, `.environmentEngine()`, `.currentEngine()`).
    ///   - mapping: which item holds a key's value.
    ///   - changes: how ``run()`` learns of changes (the storage's own signal by default).
    ///   - name: shown in ``providerName``.
    ///   - logger: where reload failures are logged (never a value).
    public convenience init(engine: KeychainEngine, mapping: KeychainKeyMapping, changes: KeychainChangeSource = .automatic,
                            name: String? = nil, logger: Logger? = nil) {
        self.init(keychain: Keychain(store: engine), engine: engine, keychainName: Self.name(of: engine.storage),
                  mapping: mapping, changes: changes, name: name, logger: logger)
    }

    /// A provider over any store of the typed API (an `InMemoryKeychain`, `Keychain()` on Apple platforms, a store of
    /// your own). Its changes are polled (``KeychainChangeSource/automatic`` polls every 5 seconds).
    ///
    /// - Parameters:
    ///   - keychain: the typed API's keychain whose items serve the values.
    ///   - keychainName: how errors name the keychain.
    ///   - mapping: how configuration keys name items (``KeychainKeyMapping/service(_:separator:)``).
    ///   - changes: how ``run()`` learns of changes (a poll every 5 seconds by default).
    ///   - name: shown in ``providerName``.
    ///   - logger: where reload failures are logged (never a value).
    public convenience init(keychain: Keychain, keychainName: String, mapping: KeychainKeyMapping,
                            changes: KeychainChangeSource = .automatic, name: String? = nil, logger: Logger? = nil) {
        self.init(keychain: keychain, engine: (keychain.store as? any EngineBackedStore)?.engine, keychainName: keychainName,
                  mapping: mapping, changes: changes, name: name, logger: logger)
    }

    private init(keychain: Keychain, engine: KeychainEngine?, keychainName: String, mapping: KeychainKeyMapping,
                 changes: KeychainChangeSource, name: String?, logger: Logger?) {
        self.keychain = keychain
        self.engine = engine
        self.keychainName = keychainName
        self.mapping = mapping
        self.changes = changes
        self.name = name
        self.logger = logger ?? Self.defaultLogger
        if let engine { DamageCounter.install(on: engine) }
        let providerName = "KeystoneConfigProvider[\(name ?? keychainName)]"
        self.state = Locked(State(snapshot: KeystoneConfigSnapshot(
            providerName: providerName, table: .empty,
            failure: Self.notLoaded(keychainName), mapping: mapping, keychainName: keychainName)))
    }

    /// The logger of providers made without one (made once: a logger costs a factory call).
    static let defaultLogger = Logger(label: "keystone.configuration")

    static func notLoaded(_ keychainName: String) -> KeystoneConfigurationError {
        KeystoneConfigurationError(.locked, keychain: keychainName, message: "the keychain \(keychainName) has not been unlocked and read by this provider (or its values were discarded): run KeystoneSecretsService (or call prepare()), or unlock it and call reload()")
    }

    /// How errors name a storage: a file's path, an etcd keychain's URL (no credentials), else its type.
    static func name(of storage: any KeychainStorage) -> String {
        #if !canImport(Darwin)
        if let file = storage as? KeychainFile { return file.path }
        if let etcd = storage as? EtcdKeychain { return etcd.configuration.description }
        #endif
        if let described = storage as? any CustomStringConvertible { return described.description }
        return String(describing: type(of: storage))
    }

    /// How many reloads have completed (tests: proof that a signal, not a timer, caused one).
    package var reloadCount: Int { state.withLock { $0.reloads } }

    // MARK: - Reading the keychain

    /// Reads every item of the mapping's services again, on a thread of its own, and makes them the snapshot.
    /// Watchers are told of the values that changed.
    ///
    /// - Throws: ``KeystoneConfigurationError``: `.locked` (the snapshot then holds no values), `.unavailable` (the
    ///   snapshot keeps its values), `.keychain`.
    public func reload() async throws {
        let ticket = takeTicket()
        let outcome = await Self.capture { try await OwnThread.run { [self] in try self.readTable() } }
        try apply(outcome, ticket: ticket)
    }

    /// ``reload()`` on the calling thread: for start-up code that runs before any task (it blocks until the keychain
    /// answered). Never call it from an async function.
    ///
    /// - Throws: as ``reload()``.
    public func reloadBlocking() throws {
        let ticket = takeTicket()
        let outcome = Result { try readTable() }
        try apply(outcome, ticket: ticket)
    }

    /// Drops every value held: reads throw ``KeystoneConfigurationError/Code/locked`` until the next successful
    /// ``reload()``. Watchers are told.
    public func discard() {
        let ticket = takeTicket()
        try? apply(.failure(Self.notLoaded(keychainName)), ticket: ticket)
    }

    private static func capture<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    private func takeTicket() -> Int {
        state.withLock { state in
            defer { state.nextTicket += 1 }
            return state.nextTicket
        }
    }

    /// Makes a read's outcome the snapshot (unless a later reload already applied one) and tells the watchers.
    private func apply(_ outcome: Result<SecretTable, any Error>, ticket: Int) throws {
        let failure: KeystoneConfigurationError?
        let table: SecretTable?
        switch outcome {
        case .success(let read):
            failure = nil
            table = read
        case .failure(let error):
            if error is CancellationError { throw error }
            let classified = KeystoneConfigurationError.classify(error, keychain: keychainName, while: "reading its items")
            failure = classified
            table = nil
        }
        state.withLock { state in
            state.reloads += 1
            guard ticket > state.appliedTicket else { return }
            state.appliedTicket = ticket
            let current = state.snapshot
            let next: KeystoneConfigSnapshot
            if let table {
                next = KeystoneConfigSnapshot(providerName: current.providerName, table: table, failure: nil,
                                              mapping: mapping, keychainName: keychainName)
            } else if let failure, failure.code == .locked || current.failure != nil {
                // Decision: a locked keychain drops the values held (a lock must take the secrets away from this
                // process too); other failures (an unreachable etcd quorum, a busy file) keep the last snapshot,
                // which is still the keychain's latest known state, and are thrown from reload() and logged.
                next = KeystoneConfigSnapshot(providerName: current.providerName, table: .empty, failure: failure,
                                              mapping: mapping, keychainName: keychainName)
            } else {
                return
            }
            guard !next.isEquivalent(to: current) else { return }
            state.snapshot = next
            for continuation in state.snapshotWatchers.values { continuation.yield(next) }
            for (id, watcher) in state.valueWatchers {
                let result = Result { try next.value(forKey: watcher.key, type: watcher.type) }
                let outcome = Outcome(result)
                guard outcome != watcher.last else { continue }
                state.valueWatchers[id]?.last = outcome
                watcher.continuation.yield(result)
            }
        }
        if let failure { throw failure }
    }

    /// The generic passwords of the mapping's services (blocking).
    ///
    /// Decision: one query per service (limit All, data and attributes), as an app's own search would be. The engine
    /// leaves damaged rows out of such a search (Apple's rule) and reports how many to its hooks: the provider counts
    /// them per service (``DamageCounter``, on this thread only), and a key missing from a service with damaged rows is
    /// `.damaged`, not nil: its item may be one of them (a damaged row's account cannot be read), and falling through
    /// to another provider's default would hide the damage.
    func readTable() throws -> SecretTable {
        var builder = SecretTable.Builder()
        let counter = engine == nil ? nil : DamageCounter.begin()
        defer { if counter != nil { DamageCounter.end() } }
        for service in mapping.services {
            let query: KeychainQuery = [
                Key.class: .string(ItemClass.genericPassword.rawValue), Key.service: .string(service),
                Key.matchLimit: .string(Key.matchLimitAll), Key.returnData: .bool(true), Key.returnAttributes: .bool(true),
            ]
            counter?.reset()
            let result: ItemResult?
            do {
                result = try keychain.store.copyMatching(query)
            } catch where Self.status(of: error) == Status.itemNotFound {
                result = nil
            } catch where Self.status(of: error) == Status.decode {
                // Only damaged rows matched.
                builder.addDamagedRows(service: service, count: max(1, counter?.count ?? 1))
                continue
            }
            if let damaged = counter?.count, damaged > 0 { builder.addDamagedRows(service: service, count: damaged) }
            for element in result?.array ?? [result].compactMap({ $0 }) {
                guard let attributes = element.attributes, let account = attributes[Key.account]?.textValue else { continue }
                builder.add(KeychainItemName(service: service, account: account), bytes: attributes[Key.valueData]?.dataValue ?? Data())
            }
        }
        return builder.build()
    }

    static func itemQuery(_ name: KeychainItemName) -> KeychainQuery {
        [
            Key.class: .string(ItemClass.genericPassword.rawValue), Key.service: .string(name.service),
            Key.account: .string(name.account), Key.returnData: .bool(true),
        ]
    }

    static func status(of error: any Error) -> Int32? {
        if let engine = error as? EngineError { return engine.status }
        if let typed = error as? KeychainError { return typed.status }
        return nil
    }
}

// MARK: - ConfigProvider

extension KeystoneConfigProvider: ConfigProvider {
    public var providerName: String { state.withLock { $0.snapshot.providerName } }

    /// The value of `key` in the current snapshot (no keychain access).
    ///
    /// - Throws: ``KeystoneConfigurationError`` (see ``KeystoneConfigSnapshot/value(forKey:type:)``).
    public func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        try state.withLock { $0.snapshot }.value(forKey: key, type: type)
    }

    /// The value of `key` read afresh from the keychain (one item, on a thread of its own); the snapshot is not changed.
    ///
    /// - Throws: ``KeystoneConfigurationError``: `.locked`, `.unavailable`, `.damaged`, `.notConvertible`.
    nonisolated(nonsending) public func fetchValue(forKey key: AbsoluteConfigKey, type: ConfigType) async throws -> LookupResult {
        guard let name = mapping.item(key) else { return LookupResult(encodedKey: key.description, value: nil) }
        let keychain = self.keychain
        let keychainName = self.keychainName
        let data: Data?
        do {
            data = try await OwnThread.run { () throws -> Data? in
                do {
                    return try keychain.store.copyMatching(Self.itemQuery(name))?.data ?? Data()
                } catch where Self.status(of: error) == Status.itemNotFound {
                    return nil
                }
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw KeystoneConfigurationError.classify(error, keychain: keychainName, key: name.account, while: "reading \(name)")
        }
        guard let data else { return LookupResult(encodedKey: name.account, value: nil) }
        var builder = SecretTable.Builder()
        builder.add(name, bytes: data)
        let single = KeystoneConfigSnapshot(providerName: providerName, table: builder.build(), failure: nil,
                                            mapping: mapping, keychainName: keychainName)
        return try single.value(forKey: key, type: type)
    }

    /// Watches `key`: the current outcome at once, then each change (a value, nil, or an error such as `.locked`).
    nonisolated(nonsending) public func watchValue<Return: ~Copyable>(
        forKey key: AbsoluteConfigKey,
        type: ConfigType,
        updatesHandler: nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<Result<LookupResult, any Error>, Never>) async throws -> Return
    ) async throws -> Return {
        let (stream, continuation) = AsyncStream<Result<LookupResult, any Error>>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        state.withLock { state in
            let result = Result { try state.snapshot.value(forKey: key, type: type) }
            state.valueWatchers[id] = ValueWatcher(key: key, type: type, continuation: continuation, last: Outcome(result))
            continuation.yield(result)
        }
        defer {
            state.withLock { _ = $0.valueWatchers.removeValue(forKey: id) }
            continuation.finish()
        }
        return try await updatesHandler(ConfigUpdatesAsyncSequence(stream))
    }

    /// The current snapshot (no keychain access).
    public func snapshot() -> any ConfigSnapshot { state.withLock { $0.snapshot } }

    /// Watches the snapshot: the current one at once, then each one that differs.
    nonisolated(nonsending) public func watchSnapshot<Return: ~Copyable>(
        updatesHandler: nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<any ConfigSnapshot, Never>) async throws -> Return
    ) async throws -> Return {
        let (stream, continuation) = AsyncStream<KeystoneConfigSnapshot>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        state.withLock { state in
            state.snapshotWatchers[id] = continuation
            continuation.yield(state.snapshot)
        }
        defer {
            state.withLock { _ = $0.snapshotWatchers.removeValue(forKey: id) }
            continuation.finish()
        }
        return try await updatesHandler(ConfigUpdatesAsyncSequence(stream.map { $0 as any ConfigSnapshot }))
    }
}

extension KeystoneConfigProvider: CustomStringConvertible {
    /// The provider's name and how many items it holds (never a value).
    public var description: String {
        let (name, count, failed) = state.withLock { ($0.snapshot.providerName, $0.snapshot.table.count, $0.snapshot.failure != nil) }
        return failed ? "\(name)[no values]" : "\(name)[\(count) items]"
    }
}
#endif
