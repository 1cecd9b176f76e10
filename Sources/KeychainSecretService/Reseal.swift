import Foundation
import KeychainEngine

extension SecretServiceStorage {
    /// Adopts every item of the collection in Keystone's schema that its seal no longer vouches for, and seals it
    /// under the collection's seal key (made when it has none): the recovery after the "Keystone seal key" item was
    /// deleted (Seahorse), or after items were restored from a copy. Items whose lookup attributes disagree with
    /// their `keystone:attributes` are left as they are.
    ///
    /// - Returns: how many items were sealed.
    /// - Throws: `errSecInteractionNotAllowed` (-25308) when the collection is locked; `errSecNotAvailable` when the
    ///   service went away.
    /// - Important: This trusts the collection as it stands: an item another program planted or edited in
    ///   Keystone's schema becomes Keystone's. Run it only when the collection holds what you expect.
    @discardableResult
    public func resealItems() throws -> Int {
        try write { writer in
            guard let transaction = writer as? Transaction else { return 0 }
            return try transaction.resealAll()
        }
    }
}
