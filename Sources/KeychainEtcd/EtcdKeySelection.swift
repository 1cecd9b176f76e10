#if NIO
import Crypto
import Foundation
import KeychainEngine
import KeychainSealing

// Which keys seal and open an etcd keychain's rows, and the keys of the keychain-wide records (the HEAD key, the
// audit log). Written by E1 (issue 30) as trivial hooks: every item under the master KeySet, no key extensions;
// E3 (access groups, rotation) owns this file and fills it in.

extension EtcdKeychain {
    /// The keys `item` is sealed with, and the row extensions (tags 0x10...0x1F) that name them.
    ///
    /// - Parameter keys: the keys the transaction holds.
    /// - Throws: `errSecInteractionNotAllowed` when the needed keys are not held.
    func sealingKeys(for item: StoredItem, from keys: KeySet) throws -> (keys: KeySet, extensions: [UInt8: Data]) {
        (keys, [:])
    }

    /// The keys that open `row` (its extensions 0x10...0x1F say which), nil when this machine does not hold them.
    func openingKeys(for row: EtcdRow, from keys: KeySet) -> KeySet? {
        keys
    }

    /// The key of the HEAD record's MAC: HKDF of the index key (itself derived from the master key), label
    /// "keystone-etcd-head", so a machine holding only the after-first-unlock keys can still write.
    func headKey(_ keys: KeySet) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: keys.index, info: Data("keystone-etcd-head".utf8), outputByteCount: 32)
    }

    /// The key of the audit log's MACs: HKDF of the index key, label "keystone-etcd-audit".
    func auditKey(_ keys: KeySet) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: keys.index, info: Data("keystone-etcd-audit".utf8), outputByteCount: 32)
    }
}
#endif
