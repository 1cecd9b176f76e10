#if NIO
import Crypto
import Foundation
import KeychainEngine
import KeychainSealing

// Which keys seal and open an etcd keychain's rows, and the keys of the keychain-wide records (the HEAD key, the
// audit log). E1 (issue 30) wrote the hooks; E3 (access groups, rotation) fills them in: EtcdGroups.swift chooses
// the domain (master or group) and generation of each row (extension tags 0x10, 0x11).

extension EtcdKeychain {
    /// The keys `item` is sealed with, and the row extensions (tags 0x10...0x1F) that name them.
    ///
    /// - Parameter keys: the keys the transaction holds.
    /// - Throws: `errSecInteractionNotAllowed` when the needed keys are not held.
    /// - Throws: `errSecMissingEntitlement` on a machine enrolled only for access groups, for an item of another
    ///   group; `errSecInteractionNotAllowed` when the group's key is not held; `errSecVerifyFailed` when the key
    ///   records in the cluster are older than what this machine saw (replayed).
    ///
    /// Decision: an item is sealed in the domain of its access group when that group is a cryptographic group
    /// (EtcdGroups.swift), else in the master domain, under the newest generation this machine knows (key records
    /// read again at most ``EtcdKeyViews/refreshInterval`` seconds old).
    func sealingKeys(for item: StoredItem, from keys: KeySet) throws -> (keys: KeySet, extensions: [UInt8: Data]) {
        let (_, keychainID, _) = try snapshotKeys()
        return try groupSealing(for: item, from: keys, keychainID: keychainID)
    }

    /// The keys that open `row` (its extensions 0x10...0x1F say which), nil when this machine does not hold them.
    func openingKeys(for row: EtcdRow, from keys: KeySet) -> KeySet? {
        // Master generation 0 (every row before groups or a rotation): no lookup.
        if row.extensions[EtcdKeyTag.group] == nil, row.extensions[EtcdKeyTag.generation] == nil, !EtcdDomainKeys.isMember(keys) { return keys }
        guard let keychainID = try? snapshotKeys().1 else { return nil }
        if case .keys(let opening) = groupOpening(EtcdKeyName(extensions: row.extensions), from: keys, keychainID: keychainID) { return opening }
        return nil
    }

    /// Whether `row` belongs to a key domain this machine is not enrolled for: such rows are left out of every
    /// search, as items of another access group are on Apple's platforms (not errors).
    func isInvisible(_ row: EtcdRow, to keys: KeySet) -> Bool {
        guard EtcdDomainKeys.isMember(keys) else { return false }
        let name = EtcdKeyName(extensions: row.extensions)
        if name.domain.isEmpty { return true }
        guard let keychainID = try? snapshotKeys().1,
              let view = EtcdKeyViews.views.withLock({ $0[viewID(keychainID)] }) else { return false }
        return !view.groupIDs.contains(name.domain)
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
