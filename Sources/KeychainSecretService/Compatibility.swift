import Foundation
import KeychainEngine

/// Generic passwords shared with other Secret Service clients (opt-in: ``SecretServiceStorage/Options/compatibility``).
///
/// What the other clients write, from their sources:
/// - **Python keyring** (jaraco/keyring, `keyring/backends/SecretService.py`): attributes `service`, `username`,
///   `application` = `Python keyring library`, label `Password for 'USER' on 'SERVICE'`, no `xdg:schema`; it looks
///   items up by `service` + `username` only.
/// - **go-keyring** (zalando/go-keyring, `keyring_unix.go`): attributes `service`, `username`, label
///   `Password for 'USER' on 'SERVICE'`, no schema; it looks items up by `service` + `username`.
/// - **keyring-rs** (open-contributions/keyring-rs, `src/secret_service.rs`): attributes `service`, `username`,
///   `target` (default `default`), `application` = `rust-keyring`; schema `org.freedesktop.Secret.Generic`; it
///   looks items up by `service` + `username` + `target`.
/// - **secret-tool** users commonly store `service` + `account`.
///
/// In compatibility mode Keystone:
/// - **reads** any item of the collection that has a `service` attribute and is not Keystone's, whatever its schema,
///   as a generic password: `kSecAttrService` = `service`, `kSecAttrAccount` = `username` (else `account`),
///   `kSecAttrLabel` = its label, in ``accessGroup``, not synchronizable, accessible when unlocked. Its row id comes
///   from its object path, until Keystone replaces it (the new version keeps the id);
/// - **writes** its generic passwords with `username`, `application` = `Python keyring library` and `target` =
///   `default` beside its own attributes, so `python3 -m keyring get S U`, go-keyring and keyring-rs (which searches
///   `target` + `service` + `username`) find what Keystone stored, and Python keyring's `set` replaces Keystone's item
///   rather than adding a second one (gnome-keyring's replace matches an item holding a superset of the attributes).
public struct Compatibility: Sendable, Hashable {
    /// The access group other programs' items appear in: the engine's default group (`default`) unless the program
    /// uses another.
    public var accessGroup: String

    public init(accessGroup: String = "default") {
        self.accessGroup = accessGroup
    }

    /// The searches that find other clients' items holding `constraints`, or nil when no such item can hold them
    /// (they have only a service, an account, the access group ``accessGroup`` and no synchronization).
    func searches(for constraints: [String: AttributeValue]) -> [[(String, String)]]? {
        for (attribute, value) in constraints {
            switch attribute {
            case Key.service, Key.account: continue
            case Key.accessGroup: guard value == .string(accessGroup) else { return nil }
            case Key.synchronizable: guard value == .bool(false) else { return nil }
            default: return nil
            }
        }
        var base: [(String, String)] = []
        if let service = constraints[Key.service] {
            guard let text = Self.text(service) else { return nil }
            base.append(("service", text))
        }
        if let account = constraints[Key.account] {
            guard let text = Self.text(account) else { return nil }
            return [base + [("username", text)], base + [("account", text)]]
        }
        return [base]  // no service given: every item, of which those with a `service` are read
    }

    /// An attribute value as the text other clients store, or nil when it is not text.
    static func text(_ value: AttributeValue) -> String? {
        switch value {
        case .string(let s): return s.contains("\0") ? nil : s
        case .data(let d): return d.contains(0) ? nil : String(data: d, encoding: .utf8)
        default: return nil
        }
    }

    /// Another client's item as a generic password, or nil when it has no `service`.
    func row(from info: SecretServiceClient.ItemInfo, secret: Data?, rowID: Int64) -> StoredItem? {
        guard let service = info.attributes["service"] else { return nil }
        let account = info.attributes["username"] ?? info.attributes["account"] ?? ""
        var attributes: [String: AttributeValue] = [
            Key.service: .string(service),
            Key.account: .string(account),
            Key.accessGroup: .string(accessGroup),
            Key.synchronizable: .bool(false),
            Key.accessible: .string(Accessibility.whenUnlocked.rawValue),
            Key.creationDate: .date(Date(timeIntervalSince1970: TimeInterval(info.created))),
            Key.modificationDate: .date(Date(timeIntervalSince1970: TimeInterval(info.modified))),
        ]
        if !info.label.isEmpty { attributes[Key.label] = .string(info.label) }
        return StoredItem(itemClass: .genericPassword, rowID: rowID, attributes: attributes, secret: secret ?? Data())
    }

    /// The other clients' attributes written beside Keystone's on a generic password.
    func attributes(for item: StoredItem) -> [(String, String)] {
        guard item.itemClass == .genericPassword, let account = item.attributes[Key.account].flatMap(Self.text) else { return [] }
        // `application` is Python keyring's: its `set` (CreateItem with replace, which in gnome-keyring replaces an item
        // holding a superset of the given attributes) then updates Keystone's item instead of adding a second one.
        return [("username", account), ("application", "Python keyring library"), ("target", "default")]
    }
}
