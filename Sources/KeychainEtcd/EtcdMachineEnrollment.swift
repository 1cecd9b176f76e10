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
        return prefix + Data("machine/".utf8) + Data(digest.map { String(format: "%02x", $0) }.joined().utf8)
    }
}

extension EtcdKeychain {
    /// This machine's id: `/etc/machine-id` (systemd's, stable across reboots), else the host name.
    public static var machineID: String {
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
#endif
