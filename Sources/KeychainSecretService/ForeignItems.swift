import Foundation
import KeychainEngine

/// An item of a Secret Service collection written by another program (`secret-tool store`, Python `keyring`,
/// libsecret applications): what Keystone's importer reads.
public struct SecretServiceForeignItem: Sendable {
    /// The item's D-Bus object path.
    public var path: String
    /// The item's label.
    public var label: String
    /// The item's lookup attributes (`service`, `account`, `username`, `application`, `xdg:schema`…).
    public var attributes: [String: String]
    /// The secret, or nil when the service returned none (the collection locked meanwhile).
    public var secret: Data?
}

extension SecretServiceStorage {
    /// Every item of the collection that Keystone did not write (items with `xdg:schema` = Keystone's schema are
    /// left out), with its label, attributes and secret, sorted by path.
    ///
    /// Reads only: nothing in the collection changes. Uses a connection of its own.
    ///
    /// - Throws: `EngineError` with `errSecInteractionNotAllowed` (-25308) when the collection is locked (unlock it
    ///   first: `keystone unlock-keychain secret-service:…`), `errSecNotAvailable` when the service went away.
    public func foreignItems() throws -> [SecretServiceForeignItem] {
        let client = try SecretServiceClient.connect(address: busAddress, callTimeout: options.callTimeout)
        if try client.isLocked(collectionPath) {
            throw EngineError(Status.interactionNotAllowed, "the Secret Service collection is locked: unlock it (keystone unlock-keychain, Seahorse, or log in) and import again")
        }
        var items: [SecretServiceForeignItem] = []
        for path in try client.search(collectionPath, []).sorted() {
            guard let info = try client.itemInfo(path), info.attributes[ItemMapping.schemaKey] != ItemMapping.schemaName else { continue }
            items.append(SecretServiceForeignItem(path: path, label: info.label, attributes: info.attributes, secret: nil))
        }
        // One secret per GetSecrets: their sizes are unknown, and a reply larger than the bus carries would make the
        // bus disconnect the Secret Service itself.
        for index in items.indices { items[index].secret = try client.secrets([items[index].path])[items[index].path] }
        return items
    }
}
