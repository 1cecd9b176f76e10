import Foundation

// Every operation has an async twin with the same name. Keychain calls block (disk, a lock held by another
// process, an authentication prompt), so the async forms run the synchronous operation on threads of their own
// (`BlockingCalls`), never on the caller's actor and never on Swift's cooperative pool: calling them from the
// main actor does not block the UI, and many waiting calls do not starve the app's other tasks. In an async
// context Swift picks these overloads, so write `try await`.

/// Runs a blocking keychain call off the caller's actor and off the cooperative pool.
package func offActor<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await BlockingCalls.run(body)
}

extension Keychain {
    /// Saves `data` for `item` off the caller's actor: add, or update when it exists.
    ///
    /// - Throws: as the synchronous `save(_:for:options:)`, or `CancellationError` before it starts.
    public func save(_ data: Data, for item: some KeychainItem, options: SaveOptions? = nil) async throws {
        try await offActor { try self.save(data, for: item, options: options) }
    }

    /// Saves `string` for `item` off the caller's actor.
    ///
    /// - Throws: as the synchronous `save(_:for:options:)`.
    public func save(_ string: String, for item: some KeychainItem, options: SaveOptions? = nil) async throws {
        try await offActor { try self.save(string, for: item, options: options) }
    }

    /// Encodes and saves `value` for `item` off the caller's actor.
    ///
    /// - Throws: as the synchronous `encode(_:for:options:encoder:)`.
    public func encode<Value: Encodable & Sendable>(_ value: Value, for item: some KeychainItem, options: SaveOptions? = nil,
                                                    encoder: @autoclosure @escaping @Sendable () -> JSONEncoder = JSONEncoder()) async throws {
        try await offActor { try self.encode(value, for: item, options: options, encoder: encoder()) }
    }

    /// Reads the secret of `item` off the caller's actor; nil when absent.
    ///
    /// - Throws: as the synchronous `data(for:)`.
    public func data(for item: some KeychainItem) async throws -> Data? {
        try await offActor { try self.data(for: item) }
    }

    /// Reads the secret of `item` as UTF-8 off the caller's actor; nil when absent.
    ///
    /// - Throws: as the synchronous `string(for:)`.
    public func string(for item: some KeychainItem) async throws -> String? {
        try await offActor { try self.string(for: item) }
    }

    /// Reads and decodes the secret of `item` off the caller's actor; nil when absent.
    ///
    /// - Throws: as the synchronous `value(_:for:decoder:)`.
    public func value<Value: Decodable & Sendable>(_ type: Value.Type, for item: some KeychainItem,
                                                   decoder: @autoclosure @escaping @Sendable () -> JSONDecoder = JSONDecoder()) async throws -> Value? {
        try await offActor { try self.value(type, for: item, decoder: decoder()) }
    }

    /// Whether `item` exists, off the caller's actor; never prompts.
    ///
    /// - Throws: as the synchronous `exists(_:)`.
    public func exists(_ item: some KeychainItem) async throws -> Bool {
        try await offActor { try self.exists(item) }
    }

    /// The attributes of `item`, off the caller's actor; never prompts.
    ///
    /// - Throws: as the synchronous `attributes(for:)`.
    public func attributes(for item: some KeychainItem) async throws -> ItemAttributes? {
        try await offActor { try self.attributes(for: item) }
    }

    /// The accounts of `service`, off the caller's actor; never reads secrets.
    ///
    /// - Throws: as the synchronous `accounts(service:accessGroup:)`.
    public func accounts(service: String, accessGroup: String? = nil) async throws -> [ItemAttributes] {
        try await offActor { try self.accounts(service: service, accessGroup: accessGroup) }
    }

    /// Replaces the secret of an existing `item` off the caller's actor.
    ///
    /// - Throws: as the synchronous `update(_:for:)`.
    public func update(_ data: Data, for item: some KeychainItem) async throws {
        try await offActor { try self.update(data, for: item) }
    }

    /// Replaces the secret of an existing `item` with `string`, off the caller's actor.
    ///
    /// - Throws: as the synchronous `update(_:for:)`.
    public func update(_ string: String, for item: some KeychainItem) async throws {
        try await offActor { try self.update(string, for: item) }
    }

    /// Deletes `item` off the caller's actor; a missing item counts as deleted.
    ///
    /// - Throws: as the synchronous `delete(_:)`.
    @discardableResult
    public func delete(_ item: some KeychainItem) async throws -> Bool {
        try await offActor { try self.delete(item) }
    }

    /// Deletes every generic password of `service`, off the caller's actor.
    ///
    /// - Throws: as the synchronous `deleteAll(service:accessGroup:)`.
    @discardableResult
    public func deleteAll(service: String, accessGroup: String? = nil) async throws -> Bool {
        try await offActor { try self.deleteAll(service: service, accessGroup: accessGroup) }
    }

    /// Moves `item` to another accessibility off the caller's actor (`SecItemUpdate`, never delete-then-add).
    ///
    /// - Throws: as the synchronous `migrate(_:to:)`.
    @discardableResult
    public func migrate(_ item: some KeychainItem, to accessibility: Accessibility) async throws -> Bool {
        try await offActor { try self.migrate(item, to: accessibility) }
    }
}
