import Foundation
import KeychainEngine

/// How a keychain row becomes a Secret Service item, and back.
///
/// Decisions (documented in the README, "Secret Service storage"):
/// - **One item per row**, in one collection, under the schema `xdg:schema` = ``schemaName``.
/// - **Lookup attributes** (plain strings the service matches, shown by desktop tools): `keystone:class`, and the
///   class's primary key. Generic passwords use `service` and `account`, so `secret-tool lookup service S account A`
///   finds them; internet passwords use the names of libsecret's `org.gnome.keyring.NetworkPassword` schema
///   (`user`, `server`, `protocol`, `port`, `object`, `domain`, `authtype`); every other primary-key attribute is
///   `keystone:<code>` (`keystone:agrp`, `keystone:sync`, `keystone:atag`…).
/// - **Everything else** is kept in one attribute, `keystone:attributes`: the row's attributes with their types
///   (a String stays a String, Data stays Data) and its access control, in the keychain file's row encoding,
///   base64. The secret (`v_Data`) is the item's secret and nothing else, so other tools read the password itself.
///   As in Apple's keychain, attributes are metadata: they are readable by any client of the session bus, as every
///   Secret Service attribute is. Never put a secret in an attribute.
/// - **Row ids** live in `keystone:rowid`; a replace creates the new version with `keystone:generation` one higher
///   before deleting the old one, so a crash between the two leaves two versions of which readers take the newer.
/// - **Seals**: `keystone:seal` binds an item's attributes to its object path (see `Seal`); `keystone:size` is the
///   secret's length.
/// - **Lookup values**: text as itself; bytes that are not UTF-8 text (or hold a NUL, or start with ``bytesPrefix``)
///   as `base64:` + their base64; numbers in decimal; booleans `1`/`0`; dates as seconds since 2001 (Apple's reference date).
enum ItemMapping {
    static let schemaName = "dev.keystone.Keychain"
    static let schemaKey = "xdg:schema"
    static let classKey = "keystone:class"
    static let rowIDKey = "keystone:rowid"
    static let generationKey = "keystone:generation"
    static let metadataKey = "keystone:attributes"
    /// The secret's length in bytes, so that reads ask for several secrets at once only as far as one D-Bus reply
    /// carries them (covered by the item's seal).
    static let sizeKey = "keystone:size"
    static let bytesPrefix = "base64:"

    /// The Secret Service attribute that holds a primary-key attribute of a class.
    static func lookupName(_ attribute: String, in itemClass: ItemClass) -> String {
        switch (itemClass, attribute) {
        case (.genericPassword, Key.service): return "service"
        case (.genericPassword, Key.account): return "account"
        case (.internetPassword, Key.account): return "user"
        case (.internetPassword, Key.server): return "server"
        case (.internetPassword, Key.protocol): return "protocol"
        case (.internetPassword, Key.port): return "port"
        case (.internetPassword, Key.path): return "object"
        case (.internetPassword, Key.securityDomain): return "domain"
        case (.internetPassword, Key.authenticationType): return "authtype"
        default: return "keystone:" + attribute
        }
    }

    /// A value as a lookup string: one string per value, equal strings exactly for equal values.
    static func lookupValue(_ value: AttributeValue) -> String {
        switch value {
        case .string(let s): return text(Data(s.utf8))
        case .data(let d): return text(d)
        case .number(let n): return String(n)
        case .bool(let b): return b ? "1" : "0"
        case .date(let d): return String(d.timeIntervalSinceReferenceDate)
        }
    }

    private static func text(_ bytes: Data) -> String {
        if !bytes.contains(0), let s = String(data: bytes, encoding: .utf8), !s.hasPrefix(bytesPrefix) { return s }
        return bytesPrefix + bytes.base64EncodedString()
    }

    /// The lookup attributes holding `constraints` (primary-key values) of `itemClass`.
    static func lookupAttributes(_ itemClass: ItemClass, _ constraints: [String: AttributeValue]) -> [(String, String)] {
        constraints.sorted { $0.key < $1.key }.map { (lookupName($0.key, in: itemClass), lookupValue($0.value)) }
    }

    /// The label desktop tools show: the item's own label when it has one, else `service (account)` (generic),
    /// `server (account)` (internet), or the class's name.
    static func label(of item: StoredItem) -> String {
        func string(_ key: String) -> String? {
            switch item.attributes[key] {
            case .string(let s)?: return s.isEmpty ? nil : s
            case .data(let d)?: return d.isEmpty ? nil : String(data: d, encoding: .utf8)
            default: return nil
            }
        }
        if let label = string(Key.label) { return label }
        switch item.itemClass {
        case .genericPassword, .internetPassword:
            let main = string(item.itemClass == .genericPassword ? Key.service : Key.server) ?? ""
            let account = string(Key.account)
            switch (main.isEmpty, account) {
            case (false, let account?): return "\(main) (\(account))"
            case (false, nil): return main
            case (true, let account?): return "(\(account))"
            case (true, nil): return item.itemClass == .genericPassword ? "Keystone password" : "Keystone internet password"
            }
        case .certificate: return "Keystone certificate"
        case .key: return "Keystone key"
        case .identity: return "Keystone identity"
        }
    }

    /// Every Secret Service attribute of a row stored as version `generation`.
    static func attributes(of item: StoredItem, generation: Int, extra: [(String, String)]) -> [(String, String)] {
        var result: [(String, String)] = [(schemaKey, schemaName), (classKey, item.itemClass.rawValue)]
        result += lookupAttributes(item.itemClass, ClassSchema.of(item.itemClass).primaryKey(of: item.attributes))
        result.append((rowIDKey, String(item.rowID)))
        result.append((generationKey, String(generation)))
        result.append((sizeKey, String(item.secret?.count ?? 0)))
        // The metadata keeps whether the row has a secret (an empty one stands for it), not the secret.
        var metadata = item
        metadata.secret = item.secret == nil ? nil : Data()
        result.append((metadataKey, RowCodec.encode(metadata).base64EncodedString()))
        var names = Set(result.map(\.0))
        for (key, value) in extra where !names.contains(key) {
            result.append((key, value))
            names.insert(key)
        }
        return result
    }

    /// Whether an item's attributes mark it as Keystone's.
    static func isKeystoneItem(_ attributes: [String: String]) -> Bool {
        attributes[classKey] != nil && attributes[rowIDKey] != nil && attributes[metadataKey] != nil
    }

    /// The row a Keystone item holds, checked against its lookup attributes.
    ///
    /// - Throws: `errSecDecode` when the metadata is unreadable or disagrees with the lookup attributes (an item
    ///   written before seals, edited by someone else; a sealed item edited so never gets here: `Seal`).
    static func row(from attributes: [String: String], secret: Data?, itemClass: ItemClass, rowID: Int64) throws -> StoredItem {
        guard let encoded = attributes[metadataKey], let metadata = Data(base64Encoded: encoded) else {
            throw EngineError(Status.decode, "a Secret Service item's keystone:attributes is missing or not base64")
        }
        var item = try RowCodec.decode(metadata, itemClass: itemClass, rowID: rowID)
        let schema = ClassSchema.of(itemClass)
        for attribute in schema.primaryKey {
            let value = schema.primaryKeyValue(attribute, of: item.attributes)
            guard attributes[lookupName(attribute, in: itemClass)] == lookupValue(value) else {
                throw EngineError(Status.decode, "a Secret Service item's lookup attribute \(lookupName(attribute, in: itemClass)) disagrees with its keystone:attributes")
            }
        }
        item.secret = item.secret == nil ? nil : (secret ?? Data())
        return item
    }

    /// The content type given to a secret: text when it is UTF-8 text, else bytes.
    static func contentType(_ secret: Data) -> String {
        String(data: secret, encoding: .utf8) != nil ? "text/plain" : "application/octet-stream"
    }
}
