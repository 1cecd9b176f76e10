import CSecretService
import Foundation
import KeychainEngine

/// Seals: how Keystone tells its own Secret Service items from copies and edits made by other programs.
///
/// Every item Keystone writes carries `keystone:seal` = `v1:` + HMAC-SHA-256, under the collection's seal key, of
/// the item's own D-Bus object path and every other attribute it has (`xdg:schema`, `keystone:class`, the lookup
/// attributes of the primary key, `keystone:rowid`, `keystone:generation`, `keystone:size`, `keystone:attributes`,
/// and in compatibility mode `username`, `application`, `target`). The seal is written right after the item is
/// created (its path is known only then), with `Properties.Set` of its attributes.
///
/// The seal key is 32 random bytes kept as the secret of one item of the same collection (``keyClass``), created by
/// the first Keystone write to a collection that has none.
///
/// An item claiming Keystone's schema is read only when its seal verifies under a seal key of the collection, or,
/// for items written before seals existed, when it has no seal and was last modified no later than the second the
/// oldest seal key was created (the Secret Service keeps `Created`/`Modified` itself; clients cannot set them). Any other item is
/// ignored: never returned, never counted as a duplicate, never changed or deleted; a log line names its path.
///
/// Decision: the seal does not cover the secret. Changing a password in Seahorse (`SetSecret`) is the user's own
/// edit and Keystone reads the new secret, as every Secret Service client does.
///
/// - Important: What this stops and what it does not. It stops items copied, cloned or edited by programs that do
///   not read the seal key: a copy (another object path, a higher `keystone:generation`, another `keystone:rowid`),
///   an edit of `keystone:attributes` or of a lookup attribute, a twin of an item; and it keeps Keystone's reads
///   from taking those for its own. It does **not** stop a program of the same session that reads the seal key
///   (the Secret Service gives every item of an unlocked collection to every program of the session): such a
///   program can forge any item, and it can read every secret anyway.
enum Seal {
    /// The attribute holding an item's seal.
    static let attribute = "keystone:seal"
    /// The `keystone:class` of the item holding the seal key (no item class: class searches never see it).
    static let keyClass = "seal-key"
    static let prefix = "v1:"
    /// The label desktop tools show for the seal key item.
    static let keyLabel = "Keystone seal key (do not delete: Keystone stops reading its items of this collection without it)"

    /// A seal key of the collection: the secret of the item at `path`, created (by the service's clock) at `created`.
    struct Key: Sendable {
        let path: String
        let bytes: Data
        let created: UInt64
    }

    /// The attributes that identify seal key items.
    static var keyAttributes: [(String, String)] {
        [(ItemMapping.schemaKey, ItemMapping.schemaName), (ItemMapping.classKey, keyClass)]
    }

    /// The seal of an item at `path` holding `attributes` (its seal attribute, if any, left out).
    static func seal(path: String, attributes: [(String, String)], key: Key) -> String {
        var message = Data("keystone-seal-v1".utf8)
        func append(_ text: String) {
            let bytes = Data(text.utf8)
            var length = UInt32(bytes.count).bigEndian
            withUnsafeBytes(of: &length) { message.append(contentsOf: $0) }
            message.append(bytes)
        }
        append(path)
        for (name, value) in covered(attributes).sorted(by: { $0.0 < $1.0 }) {
            append(name)
            append(value)
        }
        let hex = key.bytes.withUnsafeBytes { k in
            message.withUnsafeBytes { m in
                ks_hmac_sha256_hex(k.bindMemory(to: UInt8.self).baseAddress, k.count, m.bindMemory(to: UInt8.self).baseAddress, m.count)
            }
        }
        defer { ks_free(hex) }
        return prefix + (hex.map { String(cString: $0) } ?? "")
    }

    /// The attributes a seal covers: `xdg:schema`, every `keystone:` attribute but the seal, the lookup attributes
    /// of the item's class and the compatibility attributes; what a Secret Service adds of its own is left out.
    static func covered(_ attributes: [(String, String)]) -> [(String, String)] {
        let itemClass = attributes.first { $0.0 == ItemMapping.classKey }.flatMap { ItemClass(rawValue: $0.1) }
        let lookup = itemClass.map { itemClass in
            Set(ClassSchema.of(itemClass).primaryKey.map { ItemMapping.lookupName($0, in: itemClass) })
        } ?? []
        let compatibility: Set<String> = ["username", "application", "target"]
        return attributes.filter { name, _ in
            name != attribute && (name == ItemMapping.schemaKey || name.hasPrefix("keystone:") || lookup.contains(name)
                                  || compatibility.contains(name))
        }
    }

    /// What an item's seal says about it.
    enum Verdict: Equatable {
        /// Sealed by Keystone, at this path, with these attributes.
        case sealed
        /// Written before seals existed (no seal, last modified before the oldest seal key).
        case legacy
        /// Not Keystone's as it stands: copied, edited, or planted by another program.
        case refused(String)
    }

    /// Judges an item claiming Keystone's schema.
    static func verdict(path: String, info: SecretServiceClient.ItemInfo, keys: [Key]) -> Verdict {
        guard let value = info.attributes[attribute] else {
            guard let oldest = keys.map(\.created).min() else { return .legacy }
            // Decision: `<=`: the service's clock counts seconds, and an item written in the second the key was
            // made (by an older Keystone, or one of ours whose seal a crash interrupted) is taken as written before.
            return info.modified <= oldest
                ? .legacy
                : .refused("it has no seal and was written or changed after the collection's seal key was made")
        }
        guard !keys.isEmpty else { return .refused("it is sealed but the collection has no seal key (was the \"Keystone seal key\" item deleted?)") }
        let pairs = info.attributes.map { ($0.key, $0.value) }
        for key in keys where constantTimeEqual(seal(path: path, attributes: pairs, key: key), value) { return .sealed }
        return .refused("its seal does not match its path and attributes (copied or edited by another program)")
    }

    private static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for i in x.indices { difference |= x[i] ^ y[i] }
        return difference == 0
    }

    /// 32 random bytes for a new seal key.
    static func newKeyBytes() -> Data {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }
}
