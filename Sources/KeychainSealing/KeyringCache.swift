import Crypto
import Foundation
import KeychainEngine
#if os(Linux)
import CKeyring
import Glibc
#endif

/// Unlocked keys cached in the Linux kernel user keyring, so later processes start unlocked.
///
/// Two entries per keychain: the full key set (expiring with the keychain's auto-lock timeout, and at the latest
/// after ``lifetime``) and the after-first-unlock set (class C and D keys, expiring after ``lifetime``). Entries
/// are named by a digest of the keychain's identity (for a file: device, inode and the random id in its header;
/// for an etcd keychain: the cluster, the name and its random id), never by a path or a name alone; the keys read
/// back are used only when they pass the keychain's key check (``KeySet/check(fileID:)``).
///
/// Where the kernel keyring is refused (`EPERM`/`EACCES` from a container's seccomp profile, `ENOSYS`), the entries
/// go to this user's unlock agent (`keystone agent`, ``UnlockAgentClient``) when one answers, with the same names and
/// expiry; ``store(_:unlockedAt:timeout:full:)`` says which of the two kept them, or that neither did.
///
/// - Important: Code running as the same user can read these entries while they live (from the keyring, or by asking
///   the agent). `lock-keychain` and `delete-keychain` remove them from both.
package struct KeyringCache: Sendable {
    /// The longest any entry lives: 12 hours, as a login session.
    package static let lifetime: TimeInterval = 12 * 3600

    package var base: String

    /// The cache of the keychain whose identity is `identity`: bytes that name exactly one keychain.
    package init(identity: Data) {
        base = "keystone:" + SHA256.hash(data: Data("keystone-cache-v2".utf8) + identity).prefix(16).map { String(format: "%02x", $0) }.joined()
    }

    private func description(full: Bool) -> String { base + (full ? ":full" : ":afu") }

    /// Stores `keys` for later processes: in the kernel keyring where it works, else in this user's unlock agent
    /// when one answers.
    ///
    /// - Returns: where the keys were kept; ``UnlockPersistence/thisProcessOnly(reason:)`` when neither the keyring
    ///   nor an agent could keep them (later processes will find the keychain locked). Never throws for that.
    /// - Throws: `EngineError` with `errSecQuotaExceeded` when the kernel refuses for lack of room (the user's
    ///   keyring quota, `EDQUOT`, or memory).
    @discardableResult
    package func store(_ keys: KeySet, unlockedAt: Date, timeout: TimeInterval?, full: Bool) throws(EngineError) -> UnlockPersistence {
        #if os(Linux)
        var payload = Data()
        RowCodec.writeInt(unlockedAt.timeIntervalSince1970.bitPattern, to: &payload)
        payload.append(keys.serialized())
        let seconds = UInt32(max(1, min(timeout ?? Self.lifetime, Self.lifetime).rounded(.up)))
        let serial = payload.withUnsafeBytes { ckeyring_add(description(full: full), $0.baseAddress, $0.count) }
        let code = errno
        guard serial > 0 else {
            switch code {
            case EDQUOT, ENOMEM, ENOSPC, ENFILE:
                KeystoneLog.logger.error("the unlock cache could not be written: the kernel keyring is full", metadata: ["errno": "\(code)"])
                throw EngineError(Status.quotaExceeded, "the keychain is unlocked in this process only: the kernel keyring quota is full (\(String(cString: strerror(code)))); other processes will find it locked. Free keyring space (keyctl show @u) or raise /proc/sys/kernel/keys/maxbytes")
            default:
                return storeInAgent(name: description(full: full), payload: [UInt8](payload), ttl: seconds,
                                    keyringRefusal: String(cString: strerror(code)))
            }
        }
        _ = ckeyring_set_timeout(serial, seconds)
        return .kernelKeyring
        #else
        return .thisProcessOnly(reason: "there is no kernel keyring on this platform")
        #endif
    }

    /// The keyring refused: the agent keeps the entry, when one answers.
    private func storeInAgent(name: String, payload: [UInt8], ttl: UInt32, keyringRefusal: String) -> UnlockPersistence {
        var payload = payload
        defer { ckagentWipe(&payload) }
        guard let agent = UnlockAgentClient.configured else {
            KeystoneLog.logger.warning("the kernel keyring is refused and the unlock agent is turned off; each process must unlock the keychain itself")
            return .thisProcessOnly(reason: "the kernel keyring is refused here (\(keyringRefusal)) and the unlock agent is turned off (KEYSTONE_AGENT=0)")
        }
        do {
            try agent.put(name: name, payload: payload, ttl: ttl)
            return .agent(socket: agent.location.socket)
        } catch {
            KeystoneLog.logger.warning("the kernel keyring is refused and no unlock agent kept the keys; each process must unlock the keychain itself",
                                       metadata: ["agent": "\(error.reason)"])
            return .thisProcessOnly(reason: "the kernel keyring is refused here (\(keyringRefusal)), and \(error.reason)")
        }
    }

    #if os(Linux)
    /// Whether `code` (an errno of a keyring call) means the keyring itself is refused or missing, not just the key.
    private static func keyringRefused(_ code: Int32) -> Bool { code == EPERM || code == EACCES || code == ENOSYS }
    #endif

    /// The payload of the agent's entry `name` when the keyring is refused and an agent answers.
    private func loadFromAgent(name: String) -> [UInt8]? {
        guard let agent = UnlockAgentClient.configured else { return nil }
        do {
            return try agent.get(name: name)
        } catch {
            switch error.kind {
            case .notRunning: KeystoneLog.logger.debug("no unlock agent", metadata: ["agent": "\(error.reason)"])
            case .unresponsive: break  // logged once by the client
            default: KeystoneLog.logger.warning("the unlock agent was not used", metadata: ["agent": "\(error.reason)"])
            }
            return nil
        }
    }

    /// Removes the agent's entry `name` when an agent socket exists (whatever the keyring does: keys an earlier
    /// process left there while its keyring was refused must go too).
    private func removeFromAgent(name: String) {
        guard let agent = UnlockAgentClient.configured, agent.socketExists else { return }
        do { try agent.remove(name: name) } catch {
            if error.kind != .notRunning {
                KeystoneLog.logger.warning("the unlock agent's entry could not be removed", metadata: ["agent": "\(error.reason)"])
            }
        }
    }

    /// The keys and unlock date stored in the entry, if it exists and parses.
    package func load(full: Bool) -> (KeySet, Date)? {
        #if os(Linux)
        let serial = ckeyring_search(description(full: full))
        var buffer: [UInt8]
        if serial > 0 {
            buffer = [UInt8](repeating: 0, count: 512)
            let length = ckeyring_read(serial, &buffer, buffer.count)
            guard length > 8, length <= buffer.count else { return nil }
            buffer.removeSubrange(length...)
        } else {
            guard Self.keyringRefused(errno), let payload = loadFromAgent(name: description(full: full)) else { return nil }
            buffer = payload
        }
        defer { ckagentWipe(&buffer) }
        guard buffer.count > 8 else { return nil }
        var bits: UInt64 = 0
        for i in 0..<8 { bits = (bits << 8) | UInt64(buffer[i]) }
        let seconds = Double(bitPattern: bits)
        guard seconds.isFinite, let keys = KeySet(serialized: Data(buffer[8...])) else { return nil }
        return (keys, Date(timeIntervalSince1970: seconds))
        #else
        return nil
        #endif
    }

    /// Whether this process can use the kernel keyring: a search for an entry that does not exist answers
    /// "no such key" where the keyring works, and "not implemented" or "permission denied" where it does not.
    package static var isAvailable: Bool {
        #if os(Linux)
        if ckeyring_search("keystone:probe") > 0 { return true }
        let code = errno
        return code == ENOKEY || code == EKEYEXPIRED || code == EKEYREVOKED
        #else
        return false
        #endif
    }

    /// Records that the keychain was locked at `date` (an entry of its own, with no keys, living as long as the keys
    /// could): a process holding keys unlocked before that date drops them at its next call. Storages whose lock is
    /// per machine use it (etcd); a keychain file records its locks in the file instead. In the kernel keyring where
    /// it works, else in the unlock agent when one answers. Best effort: where neither is there each process locks
    /// and unlocks for itself anyway.
    package func recordLock(at date: Date) {
        #if os(Linux)
        var payload = Data()
        RowCodec.writeInt(date.timeIntervalSince1970.bitPattern, to: &payload)
        let ttl = UInt32(Self.lifetime * 2)
        let serial = payload.withUnsafeBytes { ckeyring_add(base + ":locked", $0.baseAddress, $0.count) }
        if serial > 0 {
            _ = ckeyring_set_timeout(serial, ttl)
        } else if Self.keyringRefused(errno), let agent = UnlockAgentClient.configured, agent.socketExists {
            do { try agent.put(name: base + ":locked", payload: [UInt8](payload), ttl: ttl) } catch {
                KeystoneLog.logger.warning("the lock could not be recorded in the unlock agent", metadata: ["agent": "\(error.reason)"])
            }
        }
        #endif
    }

    /// When the keychain was last locked on this machine (``recordLock(at:)``), if the record lives.
    package func lastLock() -> Date? {
        #if os(Linux)
        let serial = ckeyring_search(base + ":locked")
        var buffer = [UInt8](repeating: 0, count: 16)
        if serial > 0 {
            guard ckeyring_read(serial, &buffer, buffer.count) == 8 else { return nil }
        } else {
            guard Self.keyringRefused(errno), let agent = UnlockAgentClient.configured, agent.socketExists,
                  let payload = loadFromAgent(name: base + ":locked"), payload.count == 8 else { return nil }
            buffer = payload
        }
        var bits: UInt64 = 0
        for i in 0..<8 { bits = (bits << 8) | UInt64(buffer[i]) }
        let seconds = Double(bitPattern: bits)
        return seconds.isFinite ? Date(timeIntervalSince1970: seconds) : nil
        #else
        return nil
        #endif
    }

    /// Removes the full entry (the after-first-unlock entry stays).
    package func removeFull() { remove(full: true) }

    /// Removes both entries.
    package func remove() {
        remove(full: true)
        remove(full: false)
    }

    private func remove(full: Bool) {
        #if os(Linux)
        let serial = ckeyring_search(description(full: full))
        if serial > 0 { _ = ckeyring_remove(serial) }
        removeFromAgent(name: description(full: full))
        #endif
    }
}

/// Where an unlock's keys were kept for later processes (``KeyringCache/store(_:unlockedAt:timeout:full:)``).
package enum UnlockPersistence: Sendable, Equatable {
    /// The Linux kernel user keyring.
    case kernelKeyring
    /// This user's unlock agent, listening at `socket`.
    case agent(socket: String)
    /// Nowhere: later processes will find the keychain locked, for `reason` (no secret in it).
    case thisProcessOnly(reason: String)

    /// Whether later processes will find the keys.
    package var persists: Bool {
        if case .thisProcessOnly = self { return false }
        return true
    }
}
