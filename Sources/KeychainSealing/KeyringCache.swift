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
/// - Important: Code running as the same user can read these entries while they live. `lock-keychain` and
///   `delete-keychain` remove them.
package struct KeyringCache: Sendable {
    /// The longest any entry lives: 12 hours, as a login session.
    package static let lifetime: TimeInterval = 12 * 3600

    package var base: String

    /// The cache of the keychain whose identity is `identity`: bytes that name exactly one keychain.
    package init(identity: Data) {
        base = "keystone:" + SHA256.hash(data: Data("keystone-cache-v2".utf8) + identity).prefix(16).map { String(format: "%02x", $0) }.joined()
    }

    private func description(full: Bool) -> String { base + (full ? ":full" : ":afu") }

    /// Stores `keys`.
    ///
    /// - Throws: `EngineError` with `errSecQuotaExceeded` when the kernel refuses for lack of room (the user's
    ///   keyring quota, `EDQUOT`, or memory). Where the keyring does not exist at all (`ENOSYS`, or `EPERM`/`EACCES`
    ///   in a container that forbids `keyctl`) nothing is cached and nothing is thrown: each process unlocks
    ///   for itself there, and a warning is logged.
    package func store(_ keys: KeySet, unlockedAt: Date, timeout: TimeInterval?, full: Bool) throws(EngineError) {
        #if os(Linux)
        var payload = Data()
        RowCodec.writeInt(unlockedAt.timeIntervalSince1970.bitPattern, to: &payload)
        payload.append(keys.serialized())
        let serial = payload.withUnsafeBytes { ckeyring_add(description(full: full), $0.baseAddress, $0.count) }
        let code = errno
        guard serial > 0 else {
            switch code {
            case EDQUOT, ENOMEM, ENOSPC, ENFILE:
                KeystoneLog.logger.error("the unlock cache could not be written: the kernel keyring is full", metadata: ["errno": "\(code)"])
                throw EngineError(Status.quotaExceeded, "the keychain is unlocked in this process only: the kernel keyring quota is full (\(String(cString: strerror(code)))); other processes will find it locked. Free keyring space (keyctl show @u) or raise /proc/sys/kernel/keys/maxbytes")
            default:
                KeystoneLog.logger.warning("the kernel keyring is not available; each process must unlock the keychain itself", metadata: ["errno": "\(code)"])
                return
            }
        }
        let seconds = min(timeout ?? Self.lifetime, Self.lifetime)
        _ = ckeyring_set_timeout(serial, UInt32(max(1, seconds.rounded(.up))))
        #endif
    }

    /// The keys and unlock date stored in the entry, if it exists and parses.
    package func load(full: Bool) -> (KeySet, Date)? {
        #if os(Linux)
        let serial = ckeyring_search(description(full: full))
        guard serial > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 512)
        let length = ckeyring_read(serial, &buffer, buffer.count)
        guard length > 8, length <= buffer.count else { return nil }
        var bits: UInt64 = 0
        for i in 0..<8 { bits = (bits << 8) | UInt64(buffer[i]) }
        let seconds = Double(bitPattern: bits)
        guard seconds.isFinite, let keys = KeySet(serialized: Data(buffer[8..<length])) else { return nil }
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
    /// per machine use it (etcd); a keychain file records its locks in the file instead. Best effort: where the
    /// keyring is not available each process locks and unlocks for itself anyway.
    package func recordLock(at date: Date) {
        #if os(Linux)
        var payload = Data()
        RowCodec.writeInt(date.timeIntervalSince1970.bitPattern, to: &payload)
        let serial = payload.withUnsafeBytes { ckeyring_add(base + ":locked", $0.baseAddress, $0.count) }
        if serial > 0 { _ = ckeyring_set_timeout(serial, UInt32(Self.lifetime * 2)) }
        #endif
    }

    /// When the keychain was last locked on this machine (``recordLock(at:)``), if the record lives.
    package func lastLock() -> Date? {
        #if os(Linux)
        let serial = ckeyring_search(base + ":locked")
        guard serial > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 16)
        guard ckeyring_read(serial, &buffer, buffer.count) == 8 else { return nil }
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
        #endif
    }
}
