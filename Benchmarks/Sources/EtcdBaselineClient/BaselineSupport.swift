import Foundation

// What KeychainEtcd's client files (linked here from ../Sources/KeychainEtcd) use from the rest of Keystone that a
// package of its own cannot see: KeychainEngine's `Locked` has package access, and `endpointList` is declared in
// KeychainEtcd's EtcdKeychain.swift, which this baseline does not compile. Copies of the two, for the baseline only.

/// A value behind a lock (a copy of KeychainEngine's package-access `Locked`).
final class Locked<Value> {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access to the value.
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    /// The current value.
    var current: Value { withLock { $0 } }
}

// @unchecked Sendable: `value` is reached only inside `withLock`, while `lock` is held, and `Value: Sendable` makes
// what crosses threads through it safe to share.
extension Locked: @unchecked Sendable where Value: Sendable {}

extension EtcdConfiguration {
    /// The endpoints, for messages (as KeychainEtcd's EtcdKeychain.swift declares it).
    var endpointList: String { endpoints.map(\.description).joined(separator: ", ") }
}
