#if NIO
import Configuration

/// A generic password item's primary key within a keychain: its service and account.
public struct KeychainItemName: Sendable, Hashable, CustomStringConvertible {
    /// `kSecAttrService`.
    public var service: String
    /// `kSecAttrAccount`.
    public var account: String

    public init(service: String, account: String) {
        self.service = service
        self.account = account
    }

    public var description: String { "service \(service), account \(account)" }
}

/// Which keychain item holds the value of a configuration key.
///
/// The default rule, ``service(_:separator:)``: the generic password whose service is the app's prefix
/// (`"com.example.app"`) and whose account is the key's components joined with `"."`: `db.password` → service
/// `com.example.app`, account `db.password`. The key's context is not used.
///
/// Any other rule: ``init(services:item:)``. The provider loads every generic password of ``services`` into its
/// snapshot; a key for which the rule gives no item (or an item of a service not listed) is not this provider's, and
/// reads of it return nil, so swift-configuration asks the next provider.
public struct KeychainKeyMapping: Sendable {
    /// The services whose generic passwords the provider's snapshot holds.
    public let services: [String]
    /// The item of a key, or nil when the key is not this provider's.
    public let item: @Sendable (AbsoluteConfigKey) -> KeychainItemName?

    /// A rule of your own.
    ///
    /// - Parameters:
    ///   - services: every service `item` can name (the snapshot loads these services' generic passwords only).
    ///   - item: the item that holds a key's value; nil: the key is not this provider's (it falls through).
    public init(services: [String], item: @escaping @Sendable (AbsoluteConfigKey) -> KeychainItemName?) {
        self.services = services
        self.item = item
    }

    /// The default rule: service `service`, account = the key's components joined with `separator`.
    ///
    /// Decision: an empty key, or one with an empty component (`db..password`), maps to no item (nil: falls through)
    /// rather than to an account no CLI user would type.
    public static func service(_ service: String, separator: String = ".") -> Self {
        Self(services: [service]) { key in
            guard !key.components.isEmpty, !key.components.contains(where: \.isEmpty) else { return nil }
            return KeychainItemName(service: service, account: key.components.joined(separator: separator))
        }
    }
}
#endif
