#if NIO
import Crypto
import Foundation
import KeychainEngine
import KeychainSealing

// Access groups as cryptographic boundaries (issue 30, item 5).
//
// Key domains: the *master domain* (items of access groups that are not cryptographic groups; generation 0 is the
// class keys derived from the master key, as before groups existed) and one domain per *group* (an access group an
// administrator enrolled a machine for). Each domain has generations: a random 256-bit key per generation (master
// generation 0 excepted); an item of the domain is sealed under class keys derived from the newest generation's key,
// and its row names the domain and generation in extension tags 0x10 (group id, 16 bytes; absent: master domain) and
// 0x11 (generation, UInt32 big-endian; absent: 0), bound in the seals' associated data like every row byte.
//
// Cluster layout (beside the items):
// | Key | Value |
// |---|---|
// | `…/keys/master`, `…/keys/GID` | ``EtcdDomainRecord``: each generation's key wrapped under the administrators' key (derived from the master key), the group's name sealed the same way, its members, a rotation in progress |
// | `…/member/MACHINE` | ``EtcdMemberEntry``: a machine's keys (the index key and its groups' generation keys) sealed to its machine key (ECDH P-256, HKDF-SHA256, AES-256-GCM) |
// | `…/machinekey/MACHINE` | a machine's public key, published by the machine for an administrator to enroll (``EtcdKeychain/publishMachineKey(_:machineID:)``) |
//
// Decision: a machine enrolled only for groups holds no master key: its bundle holds the index key (the HEAD and
// audit keys derive from it, ``EtcdKeychain/headKey(_:)``) and its groups' keys. In the keychain's lock state it
// holds a KeySet whose class keys are placeholders derived from the index key (they open nothing) and whose index key
// is the keychain's: the header's key check passes, the unlock cache works as for an administrator, and the group
// keys themselves come from the bundle, kept in this process (``EtcdKeyViews``).
//
// Decision: generation keys are never taken back from current members (a member that held generation g has it
// anyway); what rotation changes is what *new* versions are sealed under, and removed machines never receive it.

/// The row extension tags access groups and rotation use (etcd30.md: 0x10...0x1F are E3's).
enum EtcdKeyTag {
    /// The group id (16 bytes) of the domain the row is sealed in; absent: the master domain.
    static let group: UInt8 = 0x10
    /// The domain's key generation (UInt32 big-endian); absent: generation 0.
    static let generation: UInt8 = 0x11
}

/// errSecVerifyFailed: a record or bundle older than one this machine has seen (etcd30.md's rollback status).
let etcdVerifyFailed: Int32 = -67808

/// One key domain's generation, as rows name it.
struct EtcdKeyName: Hashable, Sendable {
    /// The group id; empty for the master domain.
    var domain: Data
    var generation: UInt32

    init(domain: Data, generation: UInt32) {
        self.domain = domain
        self.generation = generation
    }

    /// The domain and generation a row's extensions name.
    init(extensions: [UInt8: Data]) {
        domain = extensions[EtcdKeyTag.group] ?? Data()
        generation = extensions[EtcdKeyTag.generation].flatMap { $0.count == 4 ? $0.reduce(0) { ($0 << 8) | UInt32($1) } : nil } ?? 0
    }

    /// The extensions that name this domain and generation (none for master generation 0: format-1 compatible).
    var extensions: [UInt8: Data] {
        var out: [UInt8: Data] = [:]
        if !domain.isEmpty { out[EtcdKeyTag.group] = domain }
        if generation != 0 { out[EtcdKeyTag.generation] = withUnsafeBytes(of: generation.bigEndian) { Data($0) } }
        return out
    }
}

/// A key domain's record in the cluster (`…/keys/master`, `…/keys/GID`), JSON.
struct EtcdDomainRecord: Codable, Sendable {
    static let format = 1
    var format: Int
    /// The group id (16 bytes), empty for the master domain.
    var id: Data
    /// The group's name, sealed under the administrators' key (nil for the master domain).
    var sealedName: Data?
    /// Generation (decimal) → its key wrapped under the administrators' key.
    var keys: [String: Data]
    /// The member machines (digests, hex), sorted.
    var members: [String]
    /// A rotation in progress.
    var rotation: EtcdRotationState?

    var generations: [UInt32] { keys.keys.compactMap(UInt32.init).sorted() }
    var newest: UInt32 { generations.last ?? 0 }

    var encoded: Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(self)) ?? Data()
    }

    static func decode(_ data: Data) throws -> EtcdDomainRecord {
        guard data.count <= 1 << 20, let record = try? JSONDecoder().decode(EtcdDomainRecord.self, from: data),
              record.format == format, record.id.isEmpty || record.id.count == 16 else {
            throw EngineError(Status.invalidKeychain, "a key record of the etcd keychain is damaged")
        }
        return record
    }
}

/// The keys an administrator (master key holder) unwraps domain records with.
struct EtcdAdminKey {
    let key: SymmetricKey
    let keychainID: Data

    init(master: SymmetricKey, keychainID: Data) {
        key = HKDF<SHA256>.deriveKey(inputKeyMaterial: master, info: Data("keystone-etcd-domain-admin-v1".utf8), outputByteCount: 32)
        self.keychainID = keychainID
    }

    private func aad(_ what: String, _ domain: Data, _ generation: UInt32) -> Data {
        var out = Data("keystone-etcd-\(what)-v1\u{0}".utf8) + keychainID + domain
        withUnsafeBytes(of: generation.bigEndian) { out.append(contentsOf: $0) }
        return out
    }

    func wrap(_ generationKey: SymmetricKey, domain: Data, generation: UInt32) throws -> Data {
        try Sealing.seal(generationKey.withUnsafeBytes { Data($0) }, key: key, aad: aad("domain-key", domain, generation))
    }

    func unwrap(_ wrapped: Data, domain: Data, generation: UInt32) throws -> SymmetricKey {
        let bytes = try Sealing.open(wrapped, key: key, aad: aad("domain-key", domain, generation))
        guard bytes.count == 32 else { throw EngineError(Status.invalidKeychain, "a key record of the etcd keychain is damaged") }
        return SymmetricKey(data: bytes)
    }

    func sealName(_ name: String, domain: Data) throws -> Data {
        try Sealing.seal(Data(name.utf8), key: key, aad: aad("group-name", domain, 0))
    }

    func openName(_ sealed: Data, domain: Data) throws -> String {
        String(decoding: try Sealing.open(sealed, key: key, aad: aad("group-name", domain, 0)), as: UTF8.self)
    }
}

/// What a member machine's bundle holds (sealed to its machine key).
struct EtcdMemberBundle: Codable, Sendable {
    struct Group: Codable, Sendable {
        var name: String
        var id: Data
        /// Generation (decimal) → key.
        var keys: [String: Data]
    }
    var index: Data
    var groups: [Group]
}

/// A member machine's entry in the cluster (`…/member/MACHINE`), JSON.
struct EtcdMemberEntry: Codable, Sendable {
    static let scheme = "p256-ecdh-hkdf-sha256-aes-gcm-v1"
    var scheme: String
    var machinePublicKey: Data
    var ephemeralPublicKey: Data
    var sealed: Data
    /// The machine's groups (ids, hex) in enrollment order: the first is where its adds without a group go.
    var groups: [String] = []

    private static func sealingKey(shared: Data, machine: Data, ephemeral: Data, keychainID: Data) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: shared), salt: keychainID,
                               info: Data("keystone-etcd-member-v1".utf8) + machine + ephemeral, outputByteCount: 32)
    }

    private static func aad(keychainID: Data, machine: String) -> Data {
        Data("keystone-etcd-member-v1\u{0}".utf8) + keychainID + Data(machine.utf8)
    }

    /// Seals `bundle` to the machine whose public key is `machinePublicKey` (X9.63).
    init(sealing bundle: EtcdMemberBundle, to machinePublicKey: Data, keychainID: Data, machine: String) throws {
        guard let peer = try? P256.KeyAgreement.PublicKey(x963Representation: machinePublicKey) else {
            throw EngineError(Status.param, "the machine's public key is not a P-256 key (X9.63, 65 bytes)")
        }
        let ephemeral = P256.KeyAgreement.PrivateKey()
        let shared = try ephemeral.sharedSecretFromKeyAgreement(with: peer).withUnsafeBytes { Data($0) }
        let key = Self.sealingKey(shared: shared, machine: machinePublicKey, ephemeral: ephemeral.publicKey.x963Representation, keychainID: keychainID)
        scheme = Self.scheme
        self.machinePublicKey = machinePublicKey
        ephemeralPublicKey = ephemeral.publicKey.x963Representation
        groups = []
        sealed = try Sealing.seal(try JSONEncoder().encode(bundle), key: key, aad: Self.aad(keychainID: keychainID, machine: machine))
    }

    /// The bundle, unsealed with this machine's key.
    ///
    /// - Throws: `errSecDecode` when it was sealed to another machine's key or edited; the token's errors.
    func open(with machineKey: EtcdMachineKey, keychainID: Data, machine: String) throws -> EtcdMemberBundle {
        guard scheme == Self.scheme else {
            throw EngineError(Status.wrongSecVersion, "this machine's key bundle was sealed with a scheme this Keystone does not know (\(scheme))")
        }
        guard machinePublicKey == machineKey.publicKeyX963 else {
            throw EngineError(Status.decode, "this machine's key bundle was sealed to another machine key (fingerprint \(EtcdMachineKey.fingerprint(of: machinePublicKey)), this machine's is \(machineKey.fingerprint)): enroll this machine again")
        }
        let shared = try machineKey.sharedSecret(with: ephemeralPublicKey)
        let key = Self.sealingKey(shared: shared, machine: machinePublicKey, ephemeral: ephemeralPublicKey, keychainID: keychainID)
        guard let bytes = try? Sealing.open(sealed, key: key, aad: Self.aad(keychainID: keychainID, machine: machine)),
              let bundle = try? JSONDecoder().decode(EtcdMemberBundle.self, from: bytes), bundle.index.count == 32 else {
            throw EngineError(Status.decode, "this machine's key bundle does not open with its machine key (sealed to another machine, or edited)")
        }
        return bundle
    }

    var encoded: Data { (try? JSONEncoder().encode(self)) ?? Data() }

    static func decode(_ data: Data) throws -> EtcdMemberEntry {
        guard data.count <= 1 << 20, let entry = try? JSONDecoder().decode(EtcdMemberEntry.self, from: data),
              entry.ephemeralPublicKey.count == 65, entry.machinePublicKey.count == 65 else {
            throw EngineError(Status.invalidKeychain, "this machine's entry in the etcd keychain is damaged")
        }
        return entry
    }
}

extension EtcdKeyspace {
    /// The prefix of the key domains' records.
    var domains: Data { prefix + Data("keys/".utf8) }

    /// The record of a domain (`master`, or the group id in hex).
    func domain(_ id: Data) -> Data { domains + Data((id.isEmpty ? "master" : id.hexString).utf8) }

    /// The digest (hex) a machine's id is known by in the cluster.
    static func machineDigest(_ machineID: String) -> String {
        SHA256.hash(data: Data("keystone-etcd-machine\u{0}\(machineID)".utf8)).hexString
    }

    var members: Data { prefix + Data("member/".utf8) }
    func member(_ machineID: String) -> Data { members + Data(Self.machineDigest(machineID).utf8) }
    func machineKey(_ machineID: String) -> Data { prefix + Data("machinekey/".utf8) + Data(Self.machineDigest(machineID).utf8) }
}


/// Key derivations of the domains.
enum EtcdDomainKeys {
    /// The id of the group named `name`: the first 16 bytes of an HMAC under the index key (the cluster learns no
    /// group name; every machine of the keychain computes it).
    static func groupID(_ name: String, index: HMAC<SHA256>) -> Data {
        Sealing.digest(Data("keystone-etcd-group\u{0}\(name)".utf8), mac: index).prefix(16)
    }

    /// The class keys of one generation's key, limited to `classes` (what the lock state allows), with the keychain's
    /// index key.
    static func keySet(_ key: SymmetricKey, index: SymmetricKey, classes: some Sequence<ProtectionClass>) -> KeySet {
        var classKeys: [ProtectionClass: SymmetricKey] = [:]
        for cls in classes {
            classKeys[cls] = HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: Data("keystone-etcd-domain-class-\(cls.rawValue)".utf8), outputByteCount: 32)
        }
        return KeySet(classKeys: classKeys, index: index)
    }

    /// The placeholder class keys of a member machine (derived from the index key: they open no row).
    static func placeholder(_ cls: ProtectionClass, index: SymmetricKey) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: index, info: Data("keystone-etcd-member-placeholder-\(cls.rawValue)".utf8), outputByteCount: 32)
    }

    /// A member machine's KeySet: placeholder class keys and the keychain's index key.
    static func memberKeySet(index: SymmetricKey) -> KeySet {
        var classKeys: [ProtectionClass: SymmetricKey] = [:]
        for cls in ProtectionClass.allCases { classKeys[cls] = placeholder(cls, index: index) }
        return KeySet(classKeys: classKeys, index: index)
    }

    /// Whether `keys` are a member machine's (placeholders), not an administrator's.
    static func isMember(_ keys: KeySet) -> Bool {
        guard keys.master == nil, let (cls, key) = keys.classKeys.first else { return false }
        return key.withUnsafeBytes { Data($0) } == placeholder(cls, index: keys.index).withUnsafeBytes { Data($0) }
    }
}

/// What this process knows of one keychain's key domains: the generation keys it holds, the groups, and the highest
/// generation of each domain it has seen (a record or bundle older than that is a replay: refused).
struct EtcdKeyView: Sendable {
    /// Whether this is an administrator's view (from the records) or a member's (from its bundle).
    var administrator: Bool
    /// Every group id the cluster has records of (administrators), or the member's groups.
    var groupIDs: Set<Data> = []
    /// Group names by id (administrators: every group; members: theirs).
    var names: [Data: String] = [:]
    /// A member's groups in enrollment order.
    var order: [Data] = []
    /// Domain id (empty: master) → generation → key. Master generation 0 is never here (it is the master key's).
    var keys: [Data: [UInt32: SymmetricKey]] = [:]
    /// The newest generation of each domain this process has seen (never goes down).
    var highest: [Data: UInt32] = [:]
    /// The newest master-domain generation in the cluster.
    var masterGeneration: UInt32 { highest[Data()] ?? 0 }
    /// When it was read from the cluster.
    var readAt: Date
    /// A member's machine key and id (to read its bundle again).
    var machine: (key: EtcdMachineKey, id: String)?
}

/// The key views of this process, by keychain object and keychain id.
///
/// Decision: one view per EtcdKeychain object, not per keychain: tests (and tools) hold an administrator's and a
/// member's object of one keychain in one process. A view outlives its object (a few hundred bytes); it is keyed
/// with the keychain id too, so a reused object identifier never meets another keychain's keys.
enum EtcdKeyViews {
    struct ID: Hashable {
        let object: ObjectIdentifier
        let keychainID: Data
    }
    static let views = Locked<[ID: EtcdKeyView]>([:])
    /// Seconds after which a writer reads the key records again before sealing (another administrator may have
    /// created a group or started a rotation).
    ///
    /// Decision: 2 s. Within it, a writer may seal under a generation that was just superseded; the rotation's last
    /// pass re-seals such rows (see ``EtcdKeychain/rotateKeys(group:batchSize:progress:)``).
    nonisolated(unsafe) static var refreshInterval: TimeInterval = 2
}

extension EtcdKeychain {
    // MARK: - Reading the key view

    func viewID(_ keychainID: Data) -> EtcdKeyViews.ID { EtcdKeyViews.ID(object: ObjectIdentifier(self), keychainID: keychainID) }

    /// The current key view for `keys` (the transaction's), read from the cluster when absent or older than
    /// `maximumAge`.
    ///
    /// - Throws: `errSecVerifyFailed` when the cluster's records are older than what this process saw (a replay);
    ///   `errSecDecode` for a bundle that does not open; the cluster's errors.
    func keyView(for keys: KeySet, keychainID: Data, maximumAge: TimeInterval = EtcdKeyViews.refreshInterval) throws -> EtcdKeyView {
        let now = Date()
        let cached = EtcdKeyViews.views.withLock { $0[viewID(keychainID)] }
        let member = EtcdDomainKeys.isMember(keys)
        if let cached, cached.administrator != member, now.timeIntervalSince(cached.readAt) < maximumAge { return cached }
        if member {
            if cached?.machine == nil, let file = EtcdMachineKey.defaultFile, FileManager.default.fileExists(atPath: file),
               let key = try? EtcdMachineKey.software(file: file) {
                // Keys from the unlock cache (another process unlocked): the software machine key opens the bundle here too.
                return try loadMemberView(machine: key, machineID: EtcdKeychain.machineID, keychainID: keychainID, index: keys.index)
            }
            guard let machine = cached?.machine else {
                throw EngineError.interactionNotAllowed("this process has no machine key for the etcd keychain's groups: unlock it with the machine key (keystone unlock-keychain --machine-key) in this process")
            }
            return try loadMemberView(machine: machine.key, machineID: machine.id, keychainID: keychainID, index: keys.index)
        }
        return try loadAdministratorView(keys: keys, keychainID: keychainID)
    }

    /// Reads every domain record; unwraps their keys when the master key is held.
    @discardableResult
    func loadAdministratorView(keys: KeySet, keychainID: Data) throws -> EtcdKeyView {
        let found = try Self.etcd { try client.range(prefix: keyspace.domains) }
        let admin = keys.master.map { EtcdAdminKey(master: $0, keychainID: keychainID) }
        var view = EtcdKeyView(administrator: true, readAt: Date())
        for kv in found.kvs {
            let record = try EtcdDomainRecord.decode(kv.value)
            guard kv.key == keyspace.domain(record.id) else { throw EngineError(Status.invalidKeychain, "a key record of the etcd keychain is stored under another key") }
            if !record.id.isEmpty { view.groupIDs.insert(record.id) }
            view.highest[record.id] = record.newest
            guard let admin else { continue }
            if let sealed = record.sealedName { view.names[record.id] = try admin.openName(sealed, domain: record.id) }
            var generations: [UInt32: SymmetricKey] = [:]
            for generation in record.generations where !(record.id.isEmpty && generation == 0) {
                generations[generation] = try admin.unwrap(record.keys[String(generation)]!, domain: record.id, generation: generation)
            }
            view.keys[record.id] = generations
        }
        return try install(view, keychainID: keychainID, keepKeysFrom: admin == nil)
    }

    /// Reads this machine's bundle and makes it the view.
    @discardableResult
    func loadMemberView(machine: EtcdMachineKey, machineID: String, keychainID: Data, index: SymmetricKey) throws -> EtcdKeyView {
        let found = try Self.etcd { try client.range(keyspace.member(machineID)) }
        guard let value = found.kvs.first?.value else {
            throw EngineError(Status.authFailed, "this machine (\(machineID)) is not enrolled for any group of the etcd keychain \(configuration.name): ask an administrator to run keystone enroll-machine")
        }
        let bundle = try EtcdMemberEntry.decode(value).open(with: machine, keychainID: keychainID, machine: EtcdKeyspace.machineDigest(machineID))
        guard bundle.index == index.withUnsafeBytes({ Data($0) }) else {
            throw EngineError(Status.decode, "this machine's key bundle belongs to another keychain")
        }
        let indexMAC = HMAC<SHA256>(key: index)
        var view = EtcdKeyView(administrator: false, readAt: Date(), machine: (machine, machineID))
        for group in bundle.groups {
            guard group.id == EtcdDomainKeys.groupID(group.name, index: indexMAC) else {
                throw EngineError(Status.decode, "this machine's key bundle names a group under another id")
            }
            view.groupIDs.insert(group.id)
            view.names[group.id] = group.name
            view.order.append(group.id)
            var generations: [UInt32: SymmetricKey] = [:]
            for (generation, key) in group.keys {
                guard let number = UInt32(generation), key.count == 32 else { continue }
                generations[number] = SymmetricKey(data: key)
            }
            view.keys[group.id] = generations
            view.highest[group.id] = generations.keys.max() ?? 0
        }
        return try install(view, keychainID: keychainID, keepKeysFrom: false)
    }

    /// Makes `view` this process's view of the keychain, unless it is older than what was seen (a replay).
    private func install(_ view: EtcdKeyView, keychainID: Data, keepKeysFrom keep: Bool) throws -> EtcdKeyView {
        try EtcdKeyViews.views.withLock { views in
            var view = view
            if let previous = views[viewID(keychainID)], previous.administrator == view.administrator {
                for (domain, seen) in previous.highest {
                    let now = view.highest[domain]
                    // Decision: a domain whose record vanished (a group deleted) is not a replay; a lower generation is.
                    if let now, now < seen {
                        KeystoneLog.logger.warning("etcd keychain key record older than one seen here (replayed?)", metadata: ["keychain": "\(configuration.name)", "domain": "\(domain.isEmpty ? "master" : domain.prefix(4).hexString)"])
                        throw EngineError(etcdVerifyFailed, "the key record of \(domain.isEmpty ? "the master domain" : "group \(domain.prefix(4).hexString)") in the cluster is at generation \(now), older than generation \(seen) this machine has seen: it was rolled back (replayed) in etcd; nothing was sealed under it. Rotate the key again from an administrator machine")
                    }
                }
                if keep {
                    // Without the master key (after first unlock) the keys already unwrapped stay usable.
                    view.keys.merge(previous.keys) { new, _ in new }
                    view.names.merge(previous.names) { new, _ in new }
                }
                if view.machine == nil { view.machine = previous.machine }
            }
            views[viewID(keychainID)] = view
            return view
        }
    }

    /// Forgets this process's view of the keychain's keys (the next call reads them again).
    func forgetKeyView(keychainID: Data) {
        _ = EtcdKeyViews.views.withLock { $0.removeValue(forKey: viewID(keychainID)) }
    }

    // MARK: - Choosing keys (called by EtcdKeySelection)

    /// The domain and generation `item` is sealed in, and the keys: see EtcdKeySelection.swift.
    ///
    /// - Throws: `errSecMissingEntitlement` on a member machine for an access group it is not enrolled for;
    ///   `errSecInteractionNotAllowed` when the group key is not held here (an administrator after first unlock).
    func groupSealing(for item: StoredItem, from keys: KeySet, keychainID: Data) throws -> (keys: KeySet, extensions: [UInt8: Data]) {
        let view = try keyView(for: keys, keychainID: keychainID)
        let group = item.attributes[Key.accessGroup]?.stringValue ?? ""
        let id = EtcdDomainKeys.groupID(group, index: keys.indexMAC)
        let classes = keys.classKeys.keys
        if view.groupIDs.contains(id) {
            guard let generations = view.keys[id], let newest = generations.keys.max(), let key = generations[newest] else {
                if !view.administrator { throw missingGroup(group, view) }
                throw EngineError.interactionNotAllowed("the key of the access group \(group) is not held here: unlock the keychain with its password")
            }
            return (EtcdDomainKeys.keySet(key, index: keys.index, classes: classes), EtcdKeyName(domain: id, generation: newest).extensions)
        }
        guard view.administrator else { throw missingGroup(group, view) }
        let generation = view.masterGeneration
        if generation == 0 { return (keys, [:]) }
        guard let key = view.keys[Data()]?[generation] else {
            throw EngineError.interactionNotAllowed("the keychain's current key is not held here: unlock the keychain with its password")
        }
        return (EtcdDomainKeys.keySet(key, index: keys.index, classes: classes), EtcdKeyName(domain: Data(), generation: generation).extensions)
    }

    private func missingGroup(_ group: String, _ view: EtcdKeyView) -> EngineError {
        let mine = view.names.values.sorted().joined(separator: ", ")
        return EngineError(Status.missingEntitlement, "this machine is enrolled in the etcd keychain \(configuration.name) only for the access groups \(mine.isEmpty ? "(none)" : mine), not for \(group.isEmpty ? "an item without a group" : group): add the item with one of its groups (kSecAttrAccessGroup), or enroll the machine for that group")
    }

    /// What a row sealed in `name` is to this machine.
    enum RowAccess {
        /// These keys open it.
        case keys(KeySet)
        /// It belongs to a domain this machine is not enrolled for: invisible, as items of another access group are
        /// to an app on Apple's platforms.
        case invisible
        /// The machine is enrolled but does not hold these keys now (locked, or not read yet).
        case locked
    }

    /// The keys that open a row sealed in `name`: see EtcdKeySelection.swift.
    func groupOpening(_ name: EtcdKeyName, from keys: KeySet, keychainID: Data) -> RowAccess {
        let member = EtcdDomainKeys.isMember(keys)
        if !member, name.domain.isEmpty, name.generation == 0 { return .keys(keys) }
        if member, name.domain.isEmpty { return .invisible }
        func lookup(_ view: EtcdKeyView) -> SymmetricKey? { view.keys[name.domain]?[name.generation] }
        var view = try? keyView(for: keys, keychainID: keychainID, maximumAge: .infinity)
        if let current = view, lookup(current) == nil, !member || current.groupIDs.contains(name.domain) {
            // A generation this machine has not seen yet (a rotation began after it read its keys): read them again.
            view = try? keyView(for: keys, keychainID: keychainID, maximumAge: 0)
        }
        guard let view else { return .locked }
        if member, !view.groupIDs.contains(name.domain) { return .invisible }
        guard let key = lookup(view) else { return .locked }
        return .keys(EtcdDomainKeys.keySet(key, index: keys.index, classes: keys.classKeys.keys))
    }
}
#endif
