#if NIO
import Configuration
import Foundation

/// The secrets a snapshot holds: every item's bytes in one buffer, found by service and account.
///
/// Decision: one contiguous buffer and an index of (offset, length) pairs instead of a `Data` per item: a provider
/// over 10,000 small secrets then keeps about their own size plus the index (each `Data` would cost a heap object and
/// its header per item). A value is decoded from its bytes at each read (a copy of a few bytes, no decryption).
final class SecretTable: Sendable {
    struct Entry: Sendable, Hashable {
        var offset: UInt32
        /// `UInt32.max`: the item is damaged (its error is in `damaged`).
        var length: UInt32
    }

    let arena: [UInt8]
    let index: [String: [String: Entry]]
    let damaged: [KeychainItemName: KeystoneConfigurationError]
    /// Per service, how many of its rows the keychain left out as damaged (their accounts cannot be read).
    let damagedRows: [String: Int]

    /// How many items (damaged ones included).
    var count: Int { index.values.reduce(0) { $0 + $1.count } }

    init(arena: [UInt8], index: [String: [String: Entry]], damaged: [KeychainItemName: KeystoneConfigurationError],
         damagedRows: [String: Int] = [:]) {
        self.arena = arena
        self.index = index
        self.damaged = damaged
        self.damagedRows = damagedRows
    }

    static let empty = SecretTable(arena: [], index: [:], damaged: [:])

    enum Lookup {
        case missing
        case bytes(ArraySlice<UInt8>)
        case damaged(KeystoneConfigurationError)
    }

    func lookup(_ name: KeychainItemName) -> Lookup {
        guard let entry = index[name.service]?[name.account] else { return .missing }
        if entry.length == UInt32.max { return .damaged(damaged[name] ?? .init(.damaged, keychain: "", message: "damaged item")) }
        let start = Int(entry.offset)
        return .bytes(arena[start..<start + Int(entry.length)])
    }

    /// Whether both tables hold the same items with the same bytes.
    func hasSameContents(as other: SecretTable) -> Bool {
        if self === other { return true }
        guard index.count == other.index.count, damaged == other.damaged, damagedRows == other.damagedRows else { return false }
        for (service, accounts) in index {
            guard let others = other.index[service], others.count == accounts.count else { return false }
            for (account, entry) in accounts {
                guard let theirs = others[account] else { return false }
                if entry.length == UInt32.max || theirs.length == UInt32.max {
                    if entry.length != theirs.length { return false }
                    continue
                }
                guard entry.length == theirs.length,
                      arena[Int(entry.offset)..<Int(entry.offset + entry.length)]
                        .elementsEqual(other.arena[Int(theirs.offset)..<Int(theirs.offset + theirs.length)]) else { return false }
            }
        }
        return true
    }

    /// Builds a table; items are added one at a time.
    struct Builder {
        var arena: [UInt8] = []
        var index: [String: [String: Entry]] = [:]
        var damaged: [KeychainItemName: KeystoneConfigurationError] = [:]
        var damagedRows: [String: Int] = [:]

        mutating func addDamagedRows(service: String, count: Int) { damagedRows[service, default: 0] += count }

        mutating func add(_ name: KeychainItemName, bytes: Data) {
            let offset = UInt32(truncatingIfNeeded: arena.count)
            arena.append(contentsOf: bytes)
            index[name.service, default: [:]][name.account] = Entry(offset: offset, length: UInt32(bytes.count))
        }

        mutating func addDamaged(_ name: KeychainItemName, _ error: KeystoneConfigurationError) {
            index[name.service, default: [:]][name.account] = Entry(offset: 0, length: UInt32.max)
            damaged[name] = error
        }

        func build() -> SecretTable {
            // Give back the growth slack of the appends: an exact copy.
            let source = arena
            let exact = [UInt8](unsafeUninitializedCapacity: source.count) { buffer, count in
                _ = buffer.initialize(from: source)
                count = source.count
            }
            return SecretTable(arena: exact, index: index, damaged: damaged, damagedRows: damagedRows)
        }
    }
}

/// A snapshot of a ``KeystoneConfigProvider``: the keychain's items as the provider last read them, or why it has none.
///
/// Reads never touch the keychain: the bytes were read (and decrypted) when the snapshot was made. Every value it
/// returns is marked secret.
public struct KeystoneConfigSnapshot: ConfigSnapshot {
    public let providerName: String
    let table: SecretTable
    /// Set when the provider holds no values: locked, never loaded, discarded.
    let failure: KeystoneConfigurationError?
    let mapping: KeychainKeyMapping
    let keychainName: String

    /// The value of `key` as `type`.
    ///
    /// - Returns: nil in `value` when the keychain has no item for `key` (the next provider is asked).
    /// - Throws: ``KeystoneConfigurationError``: `.locked` when the provider holds no values, `.damaged` for an item
    ///   that could not be read, `.notConvertible` when the item's bytes are not a `type`.
    public func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        guard let name = mapping.item(key) else { return LookupResult(encodedKey: key.description, value: nil) }
        if let failure { throw failure.about(key: name.account) }
        switch table.lookup(name) {
        case .missing:
            if let rows = table.damagedRows[name.service], rows > 0 {
                throw KeystoneConfigurationError(
                    .damaged, keychain: keychainName, key: name.account, status: -26275,
                    message: "the keychain \(keychainName) has \(rows) damaged item(s) of service \(name.service), which may hold \(name.account) (a damaged item's account cannot be read): store the value again (`keystone add-generic-password -U …`) and remove the damaged items (`keystone doctor` lists them)")
            }
            return LookupResult(encodedKey: name.account, value: nil)
        case .damaged(let error):
            throw error.about(key: name.account)
        case .bytes(let bytes):
            guard let content = ValueDecoding.decode(bytes, as: type) else {
                throw KeystoneConfigurationError(
                    .notConvertible, keychain: keychainName, key: name.account,
                    message: "the item for \(name.account) (\(name)) in \(keychainName) is not a \(type.rawValue) value: store it in the form KeystoneConfiguration documents for \(type.rawValue)")
            }
            return LookupResult(encodedKey: name.account, value: ConfigValue(content, isSecret: true))
        }
    }

    /// Whether a reader sees the same thing in both snapshots.
    func isEquivalent(to other: KeystoneConfigSnapshot) -> Bool {
        failure == other.failure && table.hasSameContents(as: other.table)
    }
}
#endif
