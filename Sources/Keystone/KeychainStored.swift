import Foundation

/// A value kept in the keychain, read and written like a property (as `@AppStorage` is for defaults).
///
/// ```swift
/// struct Session {
///     @KeychainStored(try! GenericPassword(service: "com.example.api", account: "token"))
///     var token: String?
/// }
/// session.token = "t0k3n"             // saves: add, or update when it exists
/// let token = session.token           // reads; nil when absent
/// session.token = nil                 // deletes (absent counts as done)
/// if let error = session.$token.lastError, error.isTransient { /* locked: try later; nothing was deleted */ }
/// let fresh = try session.$token.read()   // or throw instead of recording the error
/// ```
///
/// `String` values are stored as their UTF-8 bytes and `Data` as it is, so other keychain code reads them as
/// usual; any other `Codable` value is stored as JSON.
///
/// Errors are never swallowed: the property accessors cannot throw, so a failure leaves the value unchanged
/// (a read gives nil) and is recorded in ``lastError`` (cleared by the next success); ``read()`` and
/// ``write(_:)`` throw it instead.
///
/// - Important: A read that fails because the keychain is locked (`errSecInteractionNotAllowed`) gives nil with
///   ``lastError`` set: it does not mean the value is absent, and nothing is deleted. Check ``lastError`` (or use
///   ``read()``) before treating nil as "not stored".
@propertyWrapper
public struct KeychainStored<Value: Codable & Sendable>: Sendable {
    /// Which item holds the value.
    public let item: any KeychainItem
    /// The keychain it lives in.
    public let keychain: Keychain
    private let failure = Locked<KeychainError?>(nil)

    /// Keeps the value in `item` of `keychain` (the platform keychain by default).
    public init(_ item: some KeychainItem, keychain: Keychain = Keychain()) {
        self.item = item
        self.keychain = keychain
    }

    /// The stored value, or nil when there is none or the read failed (see ``lastError``). Setting nil deletes.
    public var wrappedValue: Value? {
        get {
            do { return try read() } catch { return nil }
        }
        nonmutating set {
            try? write(newValue)
        }
    }

    /// The wrapper itself: `$name.read()`, `$name.write(_:)`, `$name.lastError`.
    public var projectedValue: KeychainStored<Value> { self }

    /// The error of the last access through this wrapper, or nil when it succeeded.
    public var lastError: KeychainError? { failure.current }

    /// Reads the value; nil when there is none.
    ///
    /// - Throws: ``KeychainError``: `errSecInteractionNotAllowed` while locked (transient: nothing is deleted),
    ///   `errSecUserCanceled`/`errSecAuthFailed` for a protected item, `decodingFailed` for a value of another shape.
    public func read() throws -> Value? {
        try recording {
            switch Value.self {
            case is String.Type: return try keychain.string(for: item) as? Value
            case is Data.Type: return try keychain.data(for: item) as? Value
            default: return try keychain.value(Value.self, for: item)
            }
        }
    }

    /// Saves `value` (add, or update when it exists; never delete-then-add), or deletes the item for nil.
    ///
    /// - Throws: ``KeychainError``: `errSecInteractionNotAllowed` while locked, `errSecMissingEntitlement`, …
    public func write(_ value: Value?) throws {
        try recording {
            switch value {
            case nil: _ = try keychain.delete(item)
            case let string as String: try keychain.save(string, for: item)
            case let data as Data: try keychain.save(data, for: item)
            case let value?: try keychain.encode(value, for: item)
            }
        }
    }

    private func recording<T>(_ body: () throws -> T) throws -> T {
        do {
            let result = try body()
            failure.withLock { $0 = nil }
            return result
        } catch {
            let converted = error as? KeychainError ?? KeychainError(converting: error)
            failure.withLock { $0 = converted }
            throw converted
        }
    }
}
