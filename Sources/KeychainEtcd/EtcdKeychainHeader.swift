#if NIO
import Crypto
import Foundation
import KeychainEngine
import KeychainSealing

/// An etcd keychain's header (`keystone/v1/NAME/meta`, JSON): what every machine needs to open it.
///
/// Nothing here is secret: the master key is wrapped under a key derived from the keychain password with scrypt,
/// exactly as in a keychain file, and the key check (an HMAC under the index key) lets cached keys be verified before
/// use. Every value read from the cluster is validated (``validated()``) before any arithmetic or key derivation: a
/// header planted or edited by whoever can write to etcd is `errSecInvalidKeychain`, never a trap or a huge allocation.
struct EtcdKeychainHeader: Codable, Sendable, Hashable {
    static let format = 1
    static let keychainIDLength = 16

    /// The header's format (1).
    var format: Int
    /// A random id: the unlock cache and every row's seal are bound to it, so a keychain deleted and created again
    /// under the same name never meets the old one's keys or rows.
    var keychainID: Data
    /// The scrypt parameters and the wrapped master key.
    var kdf: KDFParameters
    var wrappedMaster: Data
    var emptyPassword: Bool
    /// ``KeySet/check(fileID:)`` of the keys, with the keychain id.
    var keyCheck: Data
    /// Seconds after an unlock when this machine's keys drop to after-first-unlock; nil: never.
    var lockAfterTimeout: TimeInterval?
    /// Versions kept per item, the current one included (issue 30; nil: ``defaultMaxVersions``).
    var maxVersions: Int? = nil
    /// Seconds a deleted item stays undeletable before a later write purges it (nil: ``defaultRetention``).
    var tombstoneRetention: TimeInterval? = nil
    /// Whether every update must state the item version it read (check-and-set; nil: false).
    var requireCheckAndSet: Bool? = nil
    /// Whether every read writes an audit entry naming the items it opened (``EtcdKeychain/setAuditsReads(_:)``); nil: no.
    var auditReads: Bool? = nil

    static let defaultMaxVersions = 10
    static let defaultRetention: TimeInterval = 30 * 24 * 3600
    static let maxVersionsLimit = 100

    var protector: PasswordProtector {
        PasswordProtector(kdf: kdf, wrappedMaster: wrappedMaster, isEmpty: emptyPassword)
    }

    /// A new keychain's header: a random master key wrapped under `password`.
    static func make(password: String, lockAfterTimeout: TimeInterval?) throws -> (EtcdKeychainHeader, SymmetricKey) {
        let master = SymmetricKey(size: .bits256)
        let keychainID = randomBytes(keychainIDLength)
        let protector = try PasswordProtector(sealing: master, password: password)
        let header = EtcdKeychainHeader(format: format, keychainID: keychainID, kdf: protector.kdf, wrappedMaster: protector.wrappedMaster,
                                        emptyPassword: password.isEmpty, keyCheck: KeySet(master: master).check(fileID: keychainID),
                                        lockAfterTimeout: lockAfterTimeout)
        return (header, master)
    }

    var encoded: Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(self)) ?? Data()
    }

    /// Parses and validates a stored header.
    ///
    /// - Throws: `errSecWrongSecVersion` for a newer format; `errSecInvalidKeychain` for anything malformed or out of range.
    static func decode(_ data: Data) throws -> EtcdKeychainHeader {
        guard data.count <= 64 * 1024, let header = try? JSONDecoder().decode(EtcdKeychainHeader.self, from: data) else {
            throw EngineError(Status.invalidKeychain, "the etcd keychain's header is damaged (not a Keystone header)")
        }
        return try header.validated()
    }

    func validated() throws -> EtcdKeychainHeader {
        if format > Self.format {
            throw EngineError(Status.wrongSecVersion, "the etcd keychain was made by a newer Keystone (header format \(format)); update Keystone on this machine")
        }
        guard format >= 1, keychainID.count == Self.keychainIDLength, wrappedMaster.count == PasswordProtector.wrappedLength, keyCheck.count == 32 else {
            throw EngineError(Status.invalidKeychain, "the etcd keychain's header is damaged (id, wrapped key or key check)")
        }
        if let timeout = lockAfterTimeout, !(timeout.isFinite && timeout >= 0 && timeout <= TimeInterval(UInt32.max)) {
            throw EngineError(Status.invalidKeychain, "the etcd keychain's header has a lock timeout out of range")
        }
        if let versions = maxVersions, !(1...Self.maxVersionsLimit).contains(versions) {
            throw EngineError(Status.invalidKeychain, "the etcd keychain's header keeps \(versions) versions per item (1...\(Self.maxVersionsLimit) allowed)")
        }
        if let retention = tombstoneRetention, !(retention.isFinite && retention >= 0 && retention <= 100 * 366 * 24 * 3600) {
            throw EngineError(Status.invalidKeychain, "the etcd keychain's header has a deleted-item retention out of range")
        }
        try kdf.validate()
        return self
    }

    /// The identity the unlock cache names this keychain by: its name and random id.
    func cacheIdentity(name: String) -> Data {
        Data("etcd\u{0}\(name)\u{0}".utf8) + keychainID
    }
}
#endif
