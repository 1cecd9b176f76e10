#if NIO
import Crypto
import Foundation
import KeychainEngine
import KeychainSealing

// Key rotation without downtime (issue 30, item 6): a new generation of a domain's key (the master domain's or one
// group's), every row of the domain re-sealed under it in bounded transactions while other machines read and write.
//
// Phases, recorded in the domain's record (`…/keys/…`, ``EtcdRotationState``), each step one etcd transaction, so a
// rotation killed at any point (kill -9) leaves every row readable and resumes where it stopped:
// 1. *begin*: the new generation's key is added to the record (wrapped under the administrators' key); phase
//    `distribute`. Rows are still sealed under the old generation, which stays in the record.
// 2. *distribute*: every member machine's bundle is sealed again with the new generation (the old ones stay in it);
//    phase `reseal`. Writers that read the record (administrators) or their bundle (members) again now seal under the
//    new generation; a reader that meets a row of a generation it does not hold reads its keys again, then opens it.
// 3. *reseal*: the items are scanned in key order, `batchSize` rows per transaction: each row of the domain not yet
//    under the new generation is opened and sealed again (same row id, digests, version and other extensions; only
//    the key tags change), in one transaction that compares each row's mod revision and advances the record's
//    cursor. A row another machine changed meanwhile fails the compare: that machine wins, the rotator reads the page
//    again and retries.
// 4. *verify*: the scan runs again from the start, at least ``EtcdKeyViews/refreshInterval`` after the distribution
//    (every writer has read its keys again by then); rows a writer sealed under the old generation before it read the
//    new one are re-sealed. When a pass finds none, the rotation is complete (the record's `rotation` is cleared).
//    A writer whose refresh fails does not seal at all (its write fails), so no writer seals under the old generation
//    longer than that interval after the distribution. (A process whose clock stops is the case left.)
//
// Decision: rotation re-seals the current rows (`…/k/…`). History rows and tombstones (E1's `…/h/…`) keep the
// generation they were written under: they hold versions already readable to whoever held that generation.
// Decision: re-sealing changes no item version, writes no HEAD counter and no audit entry: the items' contents do
// not change (their version and counter extensions are kept as they are, and still bound in the seals).

/// A rotation in progress, as its domain's record keeps it.
struct EtcdRotationState: Codable, Sendable, Hashable {
    enum Phase: String, Codable, Sendable { case distribute, reseal, verify }
    /// The generation rows are re-sealed to.
    var target: UInt32
    var phase: Phase
    /// The last item key the current pass has done (nil: from the start).
    var cursor: Data?
    /// Rows re-sealed so far, and in the current pass.
    var resealed: Int
    var resealedThisPass: Int
}

/// What a rotation did.
public struct EtcdRotationReport: Sendable {
    /// The group rotated, nil for the master domain (items of access groups that are not cryptographic groups).
    public var group: String?
    /// The generation every row of the domain is sealed under now.
    public var generation: UInt32
    /// Rows re-sealed (by this call; a resumed rotation counts only its own).
    public var resealed: Int
    /// Rows whose re-seal lost to another machine's write and were read again.
    public var conflicts: Int
    /// Whether this call resumed a rotation that an earlier one left unfinished.
    public var resumed: Bool
}

extension EtcdKeychain {
    /// A hook the tests use to stop a rotation at a chosen step (kill -9 of a child process at that point).
    nonisolated(unsafe) static var rotationStepHook: (@Sendable (String) -> Void)?

    /// Rotates the key of `group` (nil: the master domain): a new generation, every row of the domain re-sealed under
    /// it while other machines keep reading and writing; resumes a rotation of that domain left unfinished.
    ///
    /// Blocks until done (a few hundred rows per second: see the benchmark). Needs the master key (unlocked with the
    /// password, or an administrator machine's TPM).
    ///
    /// - Parameters:
    ///   - group: the access group; nil rotates the master domain's key.
    ///   - batchSize: rows re-sealed per etcd transaction (1...120; etcd allows 128 operations).
    ///   - progress: called after each batch with the number of rows re-sealed so far.
    /// - Throws: `errSecInteractionNotAllowed` without the master key; `errSecItemNotFound` for a group that is not a
    ///   cryptographic group (enroll a machine for it first); `errSecParam` for a batch size out of range;
    ///   `errSecNotAvailable` when other writers kept winning (run it again: it resumes); the cluster's errors.
    /// - Important: Rotation protects versions written after it; it cannot take back versions a removed machine
    ///   already read or copied, nor the history rows written before it (see EtcdRotation.swift).
    @discardableResult
    public func rotateKeys(group: String? = nil, batchSize: Int = 64, progress: ((Int) -> Void)? = nil) throws -> EtcdRotationReport {
        guard (1...120).contains(batchSize) else { throw EngineError.param("the batch size must be between 1 and 120") }
        let (master, keychainID) = try heldMasterKey()
        let keys = KeySet(master: master)
        let domain = group.map { EtcdDomainKeys.groupID($0, index: keys.indexMAC) } ?? Data()
        let admin = EtcdAdminKey(master: master, keychainID: keychainID)
        var (record, revision) = try readDomainRecord(domain)
        if record == nil {
            guard group == nil else {
                throw EngineError(Status.itemNotFound, "\(group!) is not a cryptographic access group of the etcd keychain \(configuration.name): enroll a machine for it first (keystone enroll-machine)")
            }
            record = EtcdDomainRecord(format: EtcdDomainRecord.format, id: Data(), sealedName: nil, keys: [:], members: [], rotation: nil)
        }
        var current = record!
        let resumed = current.rotation != nil
        if current.rotation == nil {
            let target = current.newest + 1
            current.keys[String(target)] = try admin.wrap(SymmetricKey(size: .bits256), domain: domain, generation: target)
            current.rotation = EtcdRotationState(target: target, phase: .distribute, cursor: nil, resealed: 0, resealedThisPass: 0)
            revision = try writeDomainRecord(current, revision: revision)
            Self.rotationStepHook?("begin")
        }
        return try continueRotation(domain: domain, group: group, record: current, revision: revision, keys: keys,
                                    keychainID: keychainID, batchSize: batchSize, resumed: resumed, progress: progress)
    }

    /// Runs a rotation's remaining phases (see EtcdRotation.swift).
    func continueRotation(domain: Data, group: String?, record start: EtcdDomainRecord, revision start2: Int64, keys: KeySet,
                          keychainID: Data, batchSize: Int, resumed: Bool, progress: ((Int) -> Void)?) throws -> EtcdRotationReport {
        var record = start
        var revision = start2
        guard var state = record.rotation else {
            return EtcdRotationReport(group: group, generation: record.newest, resealed: 0, conflicts: 0, resumed: resumed)
        }
        let admin = EtcdAdminKey(master: keys.master!, keychainID: keychainID)
        if state.phase == .distribute {
            for machine in record.members {
                try rewriteBundle(machineDigest: machine, admin: admin, keys: keys, keychainID: keychainID)
                Self.rotationStepHook?("distribute")
            }
            state.phase = .reseal
            record.rotation = state
            revision = try writeDomainRecord(record, revision: revision)
        }
        // This process seals under the new generation from now on.
        let view = try loadAdministratorView(keys: keys, keychainID: keychainID)
        guard let newKey = view.keys[domain]?[state.target] else {
            throw EngineError(Status.invalidKeychain, "the rotation's new key is missing from the etcd keychain's key record")
        }
        var mine = 0
        var conflicts = 0
        let resealStarted = Date()
        while true {
            if state.phase == .verify {
                // Decision: the verify pass starts at least one key-refresh interval after the new generation was
                // distributed: every writer reads its keys again before sealing at most that long after, so a row
                // a writer sealed under the old generation was written before this pass reads it, and is re-sealed.
                let wait = EtcdKeyViews.refreshInterval - Date().timeIntervalSince(resealStarted)
                if wait > 0 { usleep(UInt32(min(wait, 60) * 1_000_000)) }
            }
            while true {
                let page = try Self.etcd { try client.range(prefix: keyspace.allItems, limit: batchSize, startingAfter: state.cursor) }
                if page.kvs.isEmpty { break }
                var attempt = page.kvs
                var attempts = 0
                var followed = false
                while true {
                    var compares: [EtcdCompare] = [.modRevision(keyspace.domain(domain), equals: revision)]
                    var operations: [EtcdOperation] = []
                    for kv in attempt {
                        guard let resealed = try reseal(kv, domain: domain, group: group, target: state.target, newKey: newKey,
                                                        view: view, keys: keys, keychainID: keychainID) else { continue }
                        compares.append(.modRevision(kv.key, equals: kv.modRevision))
                        operations.append(.put(kv.key, resealed))
                    }
                    var next = state
                    next.cursor = page.kvs.last?.key
                    next.resealed += operations.count
                    next.resealedThisPass += operations.count
                    record.rotation = next
                    operations.append(.put(keyspace.domain(domain), record.encoded))
                    let result = try Self.etcd { try client.txn(compare: compares, success: operations) }
                    if result.succeeded {
                        revision = result.revision
                        state = next
                        mine += operations.count - 1
                        Self.rotationStepHook?("batch")
                        break
                    }
                    // Another machine wrote one of these rows (it wins), or another rotator moved the record.
                    conflicts += 1
                    attempts += 1
                    if attempts >= Self.maximumAttempts {
                        throw EngineError(Status.notAvailable, "the rows of this rotation kept being changed by other machines; the rotation stopped and resumes where it left off: run it again")
                    }
                    let (fresh, freshRevision) = try readDomainRecord(domain)
                    guard let fresh, let freshState = fresh.rotation, freshState.target == state.target else {
                        throw EngineError(Status.notAvailable, "another machine finished or changed this rotation meanwhile; run it again to check")
                    }
                    record = fresh
                    revision = freshRevision
                    if freshState != state {
                        // Another rotator of the same domain advanced it: follow its record.
                        state = freshState
                        followed = true
                        break
                    }
                    attempt = try page.kvs.compactMap { kv in try Self.etcd { try client.range(kv.key) }.kvs.first }
                }
                progress?(state.resealed)
                if !followed && !page.more { break }
            }
            // The pass is complete.
            let clean = state.phase == .verify && state.resealedThisPass == 0
            if clean {
                record.rotation = nil
                _ = try writeDomainRecord(record, revision: revision)
                Self.rotationStepHook?("complete")
                return EtcdRotationReport(group: group, generation: state.target, resealed: mine, conflicts: conflicts, resumed: resumed)
            }
            state.phase = .verify
            state.cursor = nil
            state.resealedThisPass = 0
            record.rotation = state
            revision = try writeDomainRecord(record, revision: revision)
        }
    }

    /// The row `kv` sealed again under `target`, nil when it needs nothing (another domain's, or done already).
    private func reseal(_ kv: EtcdKeyValue, domain: Data, group: String?, target: UInt32, newKey: SymmetricKey, view: EtcdKeyView,
                        keys: KeySet, keychainID: Data) throws -> Data? {
        guard let row = EtcdRow(decoding: kv.value), let (cls, primaryKey) = itemKey(kv.key) else { return nil }
        let name = EtcdKeyName(extensions: row.extensions)
        if name == EtcdKeyName(domain: domain, generation: target) { return nil }
        // Which rows belong to the domain: a group's are those whose access-group digest is the group's (wherever
        // they are sealed now: migrated from the master domain when the group was made); the master domain's are
        // those sealed in it.
        if let group {
            let schema = ClassSchema.of(cls)
            guard let index = schema.primaryKey.firstIndex(of: Key.accessGroup), index < row.digests.count,
                  row.digests[index] == RowDigest.attribute(cls, Key.accessGroup, .string(group), mac: keys.indexMAC) else { return nil }
        } else if !name.domain.isEmpty {
            return nil
        }
        let opening: KeySet
        if name.domain.isEmpty && name.generation == 0 {
            opening = keys
        } else if let key = view.keys[name.domain]?[name.generation] {
            opening = EtcdDomainKeys.keySet(key, index: keys.index, classes: ProtectionClass.allCases)
        } else {
            return nil  // sealed under keys no administrator holds (damaged or forged): left as it is, never deleted
        }
        let aad = EtcdRow.aad(keychainID: keychainID, itemClass: cls, protection: row.sealed.protection, rowID: row.rowID,
                              primaryKey: primaryKey, digests: row.digests, format: row.format, extensions: row.extensions)
        guard case .item(let item) = row.sealed.open(itemClass: cls, rowID: row.rowID, keys: opening, aad: aad) else { return nil }
        var extensions = row.extensions
        extensions[EtcdKeyTag.group] = nil
        extensions[EtcdKeyTag.generation] = nil
        extensions.merge(EtcdKeyName(domain: domain, generation: target).extensions) { new, _ in new }
        let sealing = EtcdDomainKeys.keySet(newKey, index: keys.index, classes: ProtectionClass.allCases)
        let sealed = try SealedItem(sealing: item, keys: sealing) { protection in
            EtcdRow.aad(keychainID: keychainID, itemClass: cls, protection: protection, rowID: row.rowID,
                        primaryKey: primaryKey, digests: row.digests, format: EtcdRow.format, extensions: extensions)
        }
        return EtcdRow(rowID: row.rowID, digests: row.digests, extensions: extensions, sealed: sealed, format: EtcdRow.format).encoded
    }

    /// The class and primary-key digest an item key names.
    func itemKey(_ key: Data) -> (ItemClass, Data)? {
        guard key.starts(with: keyspace.allItems) else { return nil }
        let rest = key.dropFirst(keyspace.allItems.count)
        guard let slash = rest.firstIndex(of: UInt8(ascii: "/")),
              let cls = ItemClass(rawValue: String(decoding: rest[rest.startIndex..<slash], as: UTF8.self)),
              let digest = keyspace.digest(in: key, of: cls) else { return nil }
        return (cls, digest)
    }

    // MARK: - Records

    /// A domain's record and its mod revision (0: absent).
    func readDomainRecord(_ domain: Data) throws -> (EtcdDomainRecord?, Int64) {
        let found = try Self.etcd { try client.range(keyspace.domain(domain)) }
        guard let kv = found.kvs.first else { return (nil, 0) }
        let record = try EtcdDomainRecord.decode(kv.value)
        guard record.id == domain else { throw EngineError(Status.invalidKeychain, "a key record of the etcd keychain is stored under another key") }
        return (record, kv.modRevision)
    }

    /// Writes a domain's record if it still has `revision` (0: absent).
    ///
    /// - Throws: `errSecNotAvailable` when another machine changed it meanwhile (nothing written: run it again).
    func writeDomainRecord(_ record: EtcdDomainRecord, revision: Int64) throws -> Int64 {
        let key = keyspace.domain(record.id)
        let compare: EtcdCompare = revision == 0 ? .createRevision(key, equals: 0) : .modRevision(key, equals: revision)
        let result = try Self.etcd { try client.txn(compare: [compare], success: [.put(key, record.encoded)]) }
        guard result.succeeded else {
            throw EngineError(Status.notAvailable, "another machine changed the keychain's key record meanwhile; nothing was changed: run the command again (a rotation resumes)")
        }
        return result.revision
    }
}
#endif
