#if NIO
import Crypto
import Foundation
import KeychainEngine
import KeychainSealing

// Unlocking an etcd keychain with a machine's TPM instead of the password: the master key sealed to a key that lives
// in that machine's Secure Enclave token (on Linux the TPM 2.0), one sealed copy per enrolled machine, stored in the
// cluster beside the header (`keystone/v1/NAME/machine/ID`). The same scheme as a keychain file sealed to a TPM
// (``SealedProtector``: ECDH P-256 in the token, HKDF-SHA256, AES-256-GCM, bound to the keychain id).

/// One machine's sealed copy of the master key, as stored in the cluster (JSON).
struct EtcdMachineProtector: Codable, Sendable {
    var scheme: String
    var tokenKey: Data
    var ephemeralPublicKey: Data
    var wrappedMaster: Data

    init(_ sealed: SealedProtector) {
        scheme = SealedProtector.scheme
        tokenKey = sealed.tokenKey
        ephemeralPublicKey = sealed.ephemeralPublicKey
        wrappedMaster = sealed.wrappedMaster
    }

    /// The stored protector, validated before the token sees any of it.
    ///
    /// - Throws: `errSecWrongSecVersion` for another scheme; `errSecInvalidKeychain` for a malformed entry.
    var sealed: SealedProtector {
        get throws {
            guard scheme == SealedProtector.scheme else {
                throw EngineError(Status.wrongSecVersion, "this machine's entry was sealed with a scheme this Keystone does not know (\(scheme))")
            }
            guard tokenKey.count <= SealedProtector.maximumKeyLength, ephemeralPublicKey.count == 65,
                  wrappedMaster.count == PasswordProtector.wrappedLength else {
                throw EngineError(Status.invalidKeychain, "this machine's entry in the etcd keychain is damaged")
            }
            return SealedProtector(tokenKey: tokenKey, ephemeralPublicKey: ephemeralPublicKey, wrappedMaster: wrappedMaster)
        }
    }
}

extension EtcdKeyspace {
    /// The key of the sealed master key of the machine `machineID` (a digest of it: the cluster learns no host name).
    func machine(_ machineID: String) -> Data {
        let digest = SHA256.hash(data: Data("keystone-etcd-machine\u{0}\(machineID)".utf8))
        return prefix + Data("machine/".utf8) + Data(digest.hexString.utf8)
    }
}

extension EtcdKeychain {
    /// This machine's id: `KEYSTONE_ETCD_MACHINE_ID` when set (several simulated machines on one host), else
    /// `/etc/machine-id` (systemd's, stable across reboots), else the host name.
    public static var machineID: String {
        if let id = ProcessInfo.processInfo.environment["KEYSTONE_ETCD_MACHINE_ID"], !id.isEmpty { return id }
        if let id = try? String(contentsOfFile: "/etc/machine-id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), !id.isEmpty {
            return id
        }
        return ProcessInfo.processInfo.hostName
    }

    /// Lets this machine unlock the keychain with its TPM, without the password (``unlock(with:machineID:)``): seals
    /// the master key to a new key made in `token` and stores it in the cluster under this machine's id, replacing an
    /// earlier enrollment of this machine.
    ///
    /// Blocks while the token works. The keychain must be unlocked with its password in this process or through the
    /// unlock cache (the master key is needed).
    ///
    /// - Throws: `errSecInteractionNotAllowed` when the master key is not held (unlock with the password first);
    ///   the token's `errSecUnimplemented` (no TPM) or `errSecNotAvailable`; the cluster's errors.
    /// - Important: Whoever can run code on this machine as a user allowed to use its TPM, and can read the cluster,
    ///   can then open the keychain: enrollment binds the keychain to the machine, not to a person. Remove a machine
    ///   that leaves the fleet (``removeMachine(_:)``); a changed password does not revoke enrolled machines.
    public func enrollMachine(_ token: any SecureEnclaveToken, machineID: String = EtcdKeychain.machineID) throws {
        let (master, keychainID) = try heldMasterKey()
        let sealed = try SealedProtector(sealing: master, to: token, fileID: keychainID)
        let entry = try JSONEncoder().encode(EtcdMachineProtector(sealed))
        _ = try Self.etcd { try client.put(keyspace.machine(machineID), entry) }
    }

    /// Unlocks the keychain on this machine with its TPM (after ``enrollMachine(_:machineID:)``): this process, and
    /// this user's other processes through the unlock cache.
    ///
    /// Blocks while the token works. Reads the header and this machine's entry; writes nothing to the cluster.
    /// - Throws: `errSecAuthFailed` when this machine is not enrolled; `errSecDecode` when its entry was sealed to
    ///   another TPM (a cleared TPM, another machine's id) or edited; the token's `errSecNotAvailable` /
    ///   `errSecUnimplemented`; the cluster's errors.
    public func unlock(with token: any SecureEnclaveToken, machineID: String = EtcdKeychain.machineID) throws {
        let (fresh, revision) = try readCurrentHeader()
        let found = try Self.etcd { try client.range(keyspace.machine(machineID)) }
        guard let value = found.kvs.first?.value else {
            throw EngineError(Status.authFailed, "this machine (\(machineID)) is not enrolled to unlock the etcd keychain \(configuration.name) with its TPM: unlock it with its password, then enroll it")
        }
        guard let stored = try? JSONDecoder().decode(EtcdMachineProtector.self, from: value) else {
            throw EngineError(Status.invalidKeychain, "this machine's entry in the etcd keychain is damaged")
        }
        let master = try stored.sealed.unseal(with: token, fileID: fresh.keychainID)
        guard KeySet(master: master).check(fileID: fresh.keychainID) == fresh.keyCheck else {
            throw SealedProtector.sealedElsewhere("the unsealed key is not this keychain's")
        }
        try installUnlocked(master, header: fresh, revision: revision)
    }

    /// Removes a machine's enrollment: it can no longer unlock with its TPM (its password still works).
    ///
    /// - Throws: `errSecItemNotFound` when that machine is not enrolled; the cluster's errors.
    public func removeMachine(_ machineID: String) throws {
        let result = try Self.etcd { try client.txn(compare: [], success: [.delete(keyspace.machine(machineID))]) }
        guard case .delete(let deleted)? = result.responses.first, deleted > 0 else {
            throw EngineError(Status.itemNotFound, "no machine \(machineID) is enrolled in the etcd keychain \(configuration.name)")
        }
    }
}

// MARK: - Machine keys for access groups (issue 30)

/// A machine's key-agreement key pair: what an administrator seals the keys of a machine's access groups to
/// (``EtcdKeychain/enrollMachine(_:publicKey:groups:)``), and what the machine unseals them with
/// (``EtcdKeychain/unlock(machineKey:machineID:)``).
///
/// Decision: in the machine's TPM when it has one (``token(_:file:)``: the TPM makes the key; the file keeps only the
/// TPM-wrapped blob, useless on another machine), else a software P-256 key in a local file of mode 0600
/// (``software(file:)``). The software key protects against whoever can read the cluster, not against root or the
/// same user on that machine; the TPM key also survives no copy of the disk. A key file readable by group or others is
/// refused.
public struct EtcdMachineKey: Sendable {
    enum Kind: Sendable {
        case software(P256.KeyAgreement.PrivateKey)
        case token(any SecureEnclaveToken, Data)
    }

    let kind: Kind
    /// The public key, ANSI X9.63 (65 bytes): given to the administrator who enrolls this machine.
    public let publicKeyX963: Data

    /// A short fingerprint of the public key (SHA-256, first 16 bytes, hex) to compare out of band before enrolling.
    public var fingerprint: String { Self.fingerprint(of: publicKeyX963) }

    /// The fingerprint of a public key (``fingerprint``).
    public static func fingerprint(of publicKeyX963: Data) -> String {
        SHA256.hash(data: publicKeyX963).prefix(16).hexString
    }

    /// Where the CLI keeps this machine's software key: `$KEYSTONE_KEYCHAIN_DIR/etcd-machine.key`, else
    /// `$XDG_DATA_HOME/keystone/etcd-machine.key`, else `~/.local/share/keystone/etcd-machine.key`.
    public static var defaultFile: String? {
        let environment = ProcessInfo.processInfo.environment
        if let dir = environment["KEYSTONE_KEYCHAIN_DIR"], !dir.isEmpty { return dir + "/etcd-machine.key" }
        if let dir = environment["XDG_DATA_HOME"], !dir.isEmpty { return dir + "/keystone/etcd-machine.key" }
        if let home = environment["HOME"], !home.isEmpty { return home + "/.local/share/keystone/etcd-machine.key" }
        return nil
    }

    /// Whether the key lives in a TPM.
    public var isInToken: Bool { if case .token = kind { true } else { false } }

    /// The software key in `file`, made (mode 0600) when the file does not exist.
    ///
    /// - Throws: `errSecParam` when the file is readable by group or others, or is not a key; `errSecIO` when it
    ///   cannot be read or written.
    public static func software(file: String) throws -> EtcdMachineKey {
        if let data = try readKeyFile(file) {
            guard let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: data) else {
                throw EngineError(Status.param, "\(file) is not a Keystone machine key")
            }
            return EtcdMachineKey(kind: .software(key), publicKeyX963: key.publicKey.x963Representation)
        }
        let key = P256.KeyAgreement.PrivateKey()
        try writeKeyFile(file, key.rawRepresentation)
        return EtcdMachineKey(kind: .software(key), publicKeyX963: key.publicKey.x963Representation)
    }

    /// The key made in `token` (a TPM), its wrapped blob kept in `file` (made, mode 0600, when absent).
    ///
    /// - Throws: the token's errors (`errSecUnimplemented` without a TPM); `errSecDecode` when the blob in `file`
    ///   belongs to another TPM; `errSecParam` / `errSecIO` for the file as ``software(file:)``.
    public static func token(_ token: any SecureEnclaveToken, file: String) throws -> EtcdMachineKey {
        if let blob = try readKeyFile(file) {
            let key = try token.key(dataRepresentation: blob)
            return EtcdMachineKey(kind: .token(token, blob), publicKeyX963: key.publicKeyX963)
        }
        let key = try token.createKey(.keyAgreement)
        try writeKeyFile(file, key.dataRepresentation)
        return EtcdMachineKey(kind: .token(token, key.dataRepresentation), publicKeyX963: key.publicKeyX963)
    }

    /// The ECDH shared x coordinate with `peer` (X9.63).
    func sharedSecret(with peer: Data) throws -> Data {
        switch kind {
        case .software(let key):
            guard let peerKey = try? P256.KeyAgreement.PublicKey(x963Representation: peer),
                  let shared = try? key.sharedSecretFromKeyAgreement(with: peerKey) else {
                throw EngineError(Status.decode, "the sealed key bundle's ephemeral key is not a P-256 point")
            }
            return shared.withUnsafeBytes { Data($0) }
        case .token(let token, let blob):
            return try token.sharedSecret(peerX963: peer, with: blob)
        }
    }

    private static func readKeyFile(_ path: String) throws -> Data? {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { return nil }
            throw EngineError(Status.io, "cannot read the machine key \(path) (errno \(errno))")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw EngineError(Status.param, "the machine key \(path) is readable by other users: chmod 600 \(path) (or remove it and enroll this machine again)")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw EngineError(Status.io, "cannot read the machine key \(path)")
        }
        return data
    }

    private static func writeKeyFile(_ path: String, _ bytes: Data) throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty { try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]) }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw EngineError(Status.io, "cannot create the machine key \(path) (errno \(errno))") }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count, fsync(fd) == 0 else {
            throw EngineError(Status.io, "cannot write the machine key \(path) (errno \(errno))")
        }
    }
}

// MARK: - Enrolling machines for access groups (issue 30)

/// A cryptographic access group as ``EtcdKeychain/groups()`` lists it.
public struct EtcdGroupInfo: Sendable, Hashable {
    /// The access group (`kSecAttrAccessGroup`).
    public var name: String
    /// Its id in the cluster (hex): the cluster never holds the name in clear.
    public var id: String
    /// The key generation new versions are sealed under.
    public var generation: UInt32
    /// The member machines (digests of their ids, hex, as the cluster knows them).
    public var members: [String]
    /// Whether a rotation of its key is unfinished (`keystone rotate-group-key` resumes it).
    public var rotating: Bool
}

/// A machine's published public key (`…/machinekey/MACHINE`), JSON.
struct EtcdPublishedMachineKey: Codable {
    var publicKey: Data
    var inToken: Bool
}

extension EtcdKeyspace {
    func member(digest: String) -> Data { members + Data(digest.utf8) }
}

extension EtcdKeychain {
    /// Publishes this machine's public key in the cluster, for an administrator to enroll it
    /// (``enrollMachine(_:publicKey:groups:)``). Needs no unlock (only etcd write access).
    ///
    /// - Important: Whoever can write to etcd can replace a published key before the administrator enrolls the
    ///   machine: compare ``EtcdMachineKey/fingerprint`` out of band (the CLI prints it on both sides), or pass the
    ///   public key to the enrollment directly.
    public func publishMachineKey(_ key: EtcdMachineKey, machineID: String = EtcdKeychain.machineID) throws {
        let entry = try JSONEncoder().encode(EtcdPublishedMachineKey(publicKey: key.publicKeyX963, inToken: key.isInToken))
        _ = try Self.etcd { try client.put(keyspace.machineKey(machineID), entry) }
    }

    /// The public key machine `machineID` published, nil when none.
    public func publishedMachineKey(_ machineID: String) throws -> Data? {
        guard let value = try Self.etcd({ try client.range(keyspace.machineKey(machineID)) }).kvs.first?.value else { return nil }
        guard let published = try? JSONDecoder().decode(EtcdPublishedMachineKey.self, from: value), published.publicKey.count == 65 else {
            throw EngineError(Status.invalidKeychain, "the published key of machine \(machineID) is damaged")
        }
        return published.publicKey
    }

    /// Enrolls machine `machineID` for the access groups `groups`: seals their keys (and the keychain's index key,
    /// which the HEAD and audit keys derive from) to its machine key, never the master key. An access group that is
    /// not a cryptographic group yet becomes one: its items are re-sealed under a new group key (as a rotation).
    ///
    /// The machine then unlocks with ``unlock(machineKey:machineID:)``; it sees only the items of its groups.
    ///
    /// - Parameters:
    ///   - machineID: the machine's id (its `/etc/machine-id`, or `KEYSTONE_ETCD_MACHINE_ID`, as it published its key).
    ///   - publicKey: the machine's public key (X9.63); nil: the one it published (``publishMachineKey(_:machineID:)``).
    ///   - groups: the access groups it may read and write (at least one).
    /// - Throws: `errSecInteractionNotAllowed` without the master key; `errSecItemNotFound` when no public key was
    ///   given or published; `errSecParam` for no group or an invalid key; `errSecNotAvailable` when another
    ///   administrator changed a group meanwhile (run it again); the cluster's errors.
    public func enrollMachine(_ machineID: String, publicKey: Data? = nil, groups: [String]) throws {
        guard !groups.isEmpty, !groups.contains("") else { throw EngineError.param("name at least one access group, none empty") }
        let (master, keychainID) = try heldMasterKey()
        let keys = KeySet(master: master)
        let admin = EtcdAdminKey(master: master, keychainID: keychainID)
        guard let publicKey = try publicKey ?? publishedMachineKey(machineID) else {
            throw EngineError(Status.itemNotFound, "machine \(machineID) published no key: run keystone publish-machine-key on it, or pass its public key")
        }
        guard (try? P256.KeyAgreement.PublicKey(x963Representation: publicKey)) != nil else {
            throw EngineError.param("the machine's public key is not a P-256 key (X9.63, 65 bytes)")
        }
        let digest = EtcdKeyspace.machineDigest(machineID)
        var created: [(String, Data)] = []
        for group in groups {
            let id = EtcdDomainKeys.groupID(group, index: keys.indexMAC)
            let (existing, revision) = try readDomainRecord(id)
            if var record = existing {
                guard !record.members.contains(digest) else { continue }
                record.members = (record.members + [digest]).sorted()
                _ = try writeDomainRecord(record, revision: revision)
            } else {
                // Decision: a new group starts at generation 1 with a "rotation" whose re-seal pass moves the items of
                // that access group out of the master domain (as a rotation, resumable).
                let record = EtcdDomainRecord(format: EtcdDomainRecord.format, id: id, sealedName: try admin.sealName(group, domain: id),
                                              keys: ["1": try admin.wrap(SymmetricKey(size: .bits256), domain: id, generation: 1)],
                                              members: [digest], rotation: EtcdRotationState(target: 1, phase: .distribute, cursor: nil, resealed: 0, resealedThisPass: 0))
                _ = try writeDomainRecord(record, revision: 0)
                created.append((group, id))
            }
        }
        let order = groups.map { EtcdDomainKeys.groupID($0, index: keys.indexMAC) }
        try rewriteBundle(machineDigest: digest, admin: admin, keys: keys, keychainID: keychainID, publicKey: publicKey, order: order)
        for (group, id) in created {
            let (record, revision) = try readDomainRecord(id)
            guard let record else { continue }
            _ = try continueRotation(domain: id, group: group, record: record, revision: revision, keys: keys, keychainID: keychainID,
                                     batchSize: 64, resumed: false, progress: nil)
        }
        forgetKeyView(keychainID: keychainID)
    }

    /// Removes machine `machineID` from access group `group`: its bundle is sealed again without that group's keys
    /// (removed when no group is left), and, unless `rotate` is false, the group's key is rotated so that the keys
    /// the machine held open no version written from now on.
    ///
    /// - Throws: `errSecItemNotFound` when the machine is not a member of that group; the errors of
    ///   ``rotateKeys(group:batchSize:progress:)``.
    /// - Important: Without the rotation the machine's old key still opens the group's items (it may have kept it).
    public func removeMachine(_ machineID: String, fromGroup group: String, rotate: Bool = true) throws {
        let (master, keychainID) = try heldMasterKey()
        let keys = KeySet(master: master)
        let id = EtcdDomainKeys.groupID(group, index: keys.indexMAC)
        let digest = EtcdKeyspace.machineDigest(machineID)
        let (existing, revision) = try readDomainRecord(id)
        guard var record = existing, record.members.contains(digest) else {
            throw EngineError(Status.itemNotFound, "machine \(machineID) is not enrolled for the access group \(group) of the etcd keychain \(configuration.name)")
        }
        record.members.removeAll { $0 == digest }
        _ = try writeDomainRecord(record, revision: revision)
        try rewriteBundle(machineDigest: digest, admin: EtcdAdminKey(master: master, keychainID: keychainID), keys: keys, keychainID: keychainID)
        forgetKeyView(keychainID: keychainID)
        if rotate { try rotateKeys(group: group) }
    }

    /// The cryptographic access groups: every one on an administrator machine, a member machine's own otherwise.
    ///
    /// - Throws: `errSecInteractionNotAllowed` when locked; the cluster's errors.
    public func groups() throws -> [EtcdGroupInfo] {
        let (keys, keychainID, _) = try snapshotKeys()
        guard let keys else { throw EngineError.interactionNotAllowed("the keychain is locked: unlock it first") }
        let view = try keyView(for: keys, keychainID: keychainID, maximumAge: 0)
        var out: [EtcdGroupInfo] = []
        for id in view.groupIDs {
            let (record, _) = try readDomainRecord(id)
            out.append(EtcdGroupInfo(name: view.names[id] ?? "?", id: id.hexString, generation: record?.newest ?? view.highest[id] ?? 0,
                                     members: record?.members ?? [], rotating: record?.rotation != nil))
        }
        return out.sorted { $0.name < $1.name }
    }

    /// On a machine enrolled only for access groups (unlocked with its machine key): those groups, the first being
    /// where an add without a group goes. Nil on an administrator machine (every group) or while locked.
    public var enrolledGroups: [String]? {
        guard let (keys, keychainID, _) = try? snapshotKeys(), let keys, EtcdDomainKeys.isMember(keys),
              let view = EtcdKeyViews.views.withLock({ $0[viewID(keychainID)] }), !view.administrator else { return nil }
        return view.order.compactMap { view.names[$0] }
    }

    /// `base` with the access groups this machine is enrolled for (``enrolledGroups``), as Apple's entitlement: an
    /// add without a group goes to the first, a search without one sees these only, another is
    /// `errSecMissingEntitlement`. Unchanged on an administrator machine.
    public func engineConfiguration(_ base: EngineConfiguration = EngineConfiguration()) -> EngineConfiguration {
        guard let groups = enrolledGroups else { return base }
        var configuration = base
        configuration.accessGroups = .entitled(groups)
        return configuration
    }

    /// Unlocks this machine with its machine key (after ``enrollMachine(_:publicKey:groups:)``): it holds its groups'
    /// keys and the index key, never the master key; this process, and this user's other processes through the
    /// unlock cache (those read the bundle again with the machine key: a software key file is read by them; a key in
    /// the TPM must be given to each process: ``unlock(machineKey:machineID:)`` there too).
    ///
    /// - Throws: `errSecAuthFailed` when the machine is not enrolled for any group; `errSecDecode` when its bundle was
    ///   sealed to another machine key or edited; the token's errors; the cluster's errors.
    public func unlock(machineKey: EtcdMachineKey, machineID: String = EtcdKeychain.machineID) throws {
        let (fresh, revision) = try readCurrentHeader()
        let found = try Self.etcd { try client.range(keyspace.member(machineID)) }
        guard let value = found.kvs.first?.value else {
            throw EngineError(Status.authFailed, "this machine (\(machineID)) is not enrolled for any group of the etcd keychain \(configuration.name): publish its key (keystone publish-machine-key) and ask an administrator to enroll it")
        }
        let bundle = try EtcdMemberEntry.decode(value).open(with: machineKey, keychainID: fresh.keychainID, machine: EtcdKeyspace.machineDigest(machineID))
        let index = SymmetricKey(data: bundle.index)
        let keys = EtcdDomainKeys.memberKeySet(index: index)
        guard keys.check(fileID: fresh.keychainID) == fresh.keyCheck else {
            throw EngineError(Status.decode, "this machine's key bundle is not this keychain's (the keychain was made again?): enroll the machine again")
        }
        try loadMemberView(machine: machineKey, machineID: machineID, keychainID: fresh.keychainID, index: index)
        try installUnlocked(keys: keys, header: fresh, revision: revision)
    }

    /// Seals machine `machineDigest`'s bundle again from the records: the index key and every generation of each
    /// group it is a member of; removes its entry when it is a member of none.
    func rewriteBundle(machineDigest: String, admin: EtcdAdminKey, keys: KeySet, keychainID: Data, publicKey: Data? = nil, order: [Data] = []) throws {
        for _ in 0..<Self.maximumAttempts {
            let entryKey = keyspace.member(digest: machineDigest)
            let found = try Self.etcd { try client.range(entryKey) }
            let existing = try found.kvs.first.map { try EtcdMemberEntry.decode($0.value) }
            guard let machinePublicKey = publicKey ?? existing?.machinePublicKey else { return }
            let records = try Self.etcd { try client.range(prefix: keyspace.domains) }.kvs.map { try EtcdDomainRecord.decode($0.value) }
            let mine = records.filter { !$0.id.isEmpty && $0.members.contains(machineDigest) }
            var ordered = (existing?.groups ?? []).compactMap { Data(hex: $0) } + order
            ordered += mine.map(\.id).sorted { $0.lexicographicallyPrecedes($1) }
            var seen = Set<Data>()
            ordered = ordered.filter { id in mine.contains { $0.id == id } && seen.insert(id).inserted }
            let revision = found.kvs.first?.modRevision ?? 0
            let compare: EtcdCompare = revision == 0 ? .createRevision(entryKey, equals: 0) : .modRevision(entryKey, equals: revision)
            let operation: EtcdOperation
            if ordered.isEmpty {
                operation = .delete(entryKey)
            } else {
                var bundle = EtcdMemberBundle(index: keys.index.withUnsafeBytes { Data($0) }, groups: [])
                for id in ordered {
                    let record = mine.first { $0.id == id }!
                    var generations: [String: Data] = [:]
                    for generation in record.generations {
                        generations[String(generation)] = try admin.unwrap(record.keys[String(generation)]!, domain: id, generation: generation).withUnsafeBytes { Data($0) }
                    }
                    let name = try record.sealedName.map { try admin.openName($0, domain: id) } ?? ""
                    bundle.groups.append(EtcdMemberBundle.Group(name: name, id: id, keys: generations))
                }
                var entry = try EtcdMemberEntry(sealing: bundle, to: machinePublicKey, keychainID: keychainID, machine: machineDigest)
                entry.groups = ordered.map(\.hexString)
                operation = .put(entryKey, entry.encoded)
            }
            if try Self.etcd({ try client.txn(compare: [compare], success: [operation]) }).succeeded { return }
        }
        throw EngineError(Status.notAvailable, "machine \(machineDigest.prefix(8))'s entry kept changing; run the command again")
    }
}

extension Data {
    /// Bytes from hex digits; nil for anything else.
    init?(hex: String) {
        guard hex.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self = Data(bytes)
    }
}

// MARK: - etcd RBAC for member machines

/// One permission of an etcd role (`etcdctl role grant-permission ROLE [--prefix] PERMISSION KEY`).
public struct EtcdRolePermission: Sendable, Hashable {
    /// The key, or the prefix when ``prefix``.
    public var key: String
    public var prefix: Bool
    /// `read` or `readwrite`.
    public var permission: String

    /// The etcdctl arguments that grant it to `role`.
    public func etcdctlArguments(role: String) -> [String] {
        ["role", "grant-permission", role] + (prefix ? ["--prefix=true"] : []) + [permission, key]
    }
}

extension EtcdKeychain {
    /// The etcd role a machine enrolled only for access groups needs on keychain `name`, and no more: read the
    /// keychain; write items, their history and tombstones, the row-id sequence, the HEAD record and the audit log;
    /// never the header, the key records, the machines' bundles or TPM entries (so such a machine cannot replay or
    /// edit a key record, another machine's bundle, or the header).
    ///
    /// Decision: etcd's RBAC cannot confine a machine's *item* writes to its groups: an item's key holds the group's
    /// digest in its last segment (`…/k/CLSS/IDENTITY/GROUP`), so that a search by service and account without a group
    /// reads one prefix, and existing keychains keep their layout; a prefix per group would need the group first.
    /// What confines a machine to its groups is cryptography: it cannot read another group's item, nor write one
    /// that opens (a row it forges or moves fails authentication: `errSecDecode`); it can delete another group's item
    /// or replace it with garbage, which rollback detection and the audit log (E1, E2) report, and etcd's history keeps.
    public static func memberRolePermissions(keychain name: String) -> [EtcdRolePermission] {
        let base = "keystone/v1/\(name)/"
        return [
            EtcdRolePermission(key: base, prefix: true, permission: "read"),
            EtcdRolePermission(key: base + "k/", prefix: true, permission: "readwrite"),
            EtcdRolePermission(key: base + "h/", prefix: true, permission: "readwrite"),
            EtcdRolePermission(key: base + "t/", prefix: true, permission: "readwrite"),
            EtcdRolePermission(key: base + "audit/", prefix: true, permission: "readwrite"),
            EtcdRolePermission(key: base + "seq", prefix: false, permission: "readwrite"),
            EtcdRolePermission(key: base + "head", prefix: false, permission: "readwrite"),
        ]
    }
}
#endif
