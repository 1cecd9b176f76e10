import Crypto
import Foundation
import KeychainEngine
#if os(Linux)
import CKeyring
import Glibc
#endif

/// Which file a keychain is: device and inode of the file, and the random id stored in its header.
///
/// The unlock cache is keyed by this identity, never by a path: a symbolic link, a relative path, or another
/// keychain later put at the same path never meets cached keys of another file.
struct FileIdentity: Hashable {
    var device: UInt64
    var inode: UInt64
    var fileID: Data

    init(device: UInt64, inode: UInt64, fileID: Data) {
        self.device = device
        self.inode = inode
        self.fileID = fileID
    }

    /// The identity of the file at `path`, with the header's `fileID`; nil when there is no file.
    init?(path: String, fileID: Data) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        self.fileID = fileID
    }
}

/// Unlocked keys cached in the Linux kernel user keyring, so later processes start unlocked.
///
/// Two entries per keychain: the full key set (expiring with the keychain's auto-lock timeout, and at the latest
/// after ``lifetime``) and the after-first-unlock set (class C and D keys, expiring after ``lifetime``). Entries
/// are named by a digest of the file's ``FileIdentity``, never by its path; the keys read back are used only
/// when they pass the header's key check (``KeySet/check(fileID:)``).
///
/// - Important: Code running as the same user can read these entries while they live. `lock-keychain` and
///   `delete-keychain` remove them.
struct KeyringCache {
    /// The longest any entry lives: 12 hours, as a login session.
    static let lifetime: TimeInterval = 12 * 3600

    private(set) var base: String

    init(identity: FileIdentity) {
        var bytes = Data("keystone-cache-v2".utf8)
        withUnsafeBytes(of: identity.device.bigEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: identity.inode.bigEndian) { bytes.append(contentsOf: $0) }
        bytes.append(identity.fileID)
        base = "keystone:" + SHA256.hash(data: bytes).prefix(16).map { String(format: "%02x", $0) }.joined()
    }

    private func description(full: Bool) -> String { base + (full ? ":full" : ":afu") }

    /// Stores `keys`.
    ///
    /// - Throws: `EngineError` with `errSecQuotaExceeded` when the kernel refuses for lack of room (the user's
    ///   keyring quota, `EDQUOT`, or memory). Where the keyring does not exist at all (`ENOSYS`, or `EPERM`/`EACCES`
    ///   in a container that forbids `keyctl`) nothing is cached and nothing is thrown: each process unlocks
    ///   for itself there, and a warning is logged.
    func store(_ keys: KeySet, unlockedAt: Date, timeout: TimeInterval?, full: Bool) throws {
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
    func load(full: Bool) -> (KeySet, Date)? {
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
    static var isAvailable: Bool {
        #if os(Linux)
        if ckeyring_search("keystone:probe") > 0 { return true }
        let code = errno
        return code == ENOKEY || code == EKEYEXPIRED || code == EKEYREVOKED
        #else
        return false
        #endif
    }

    /// Removes the full entry (the after-first-unlock entry stays).
    func removeFull() { remove(full: true) }

    /// Removes both entries.
    func remove() {
        remove(full: true)
        remove(full: false)
    }

    /// Removes the entries format 1 keychains were cached under (named by a digest of the file's path), so an
    /// upgraded keychain leaves none behind.
    static func removeLegacyEntries(path: String) {
        let real = (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? path
        let absolute = URL(fileURLWithPath: real).standardizedFileURL.path
        let digest = SHA256.hash(data: Data(absolute.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
        var legacy = KeyringCache(identity: FileIdentity(device: 0, inode: 0, fileID: Data()))
        legacy.base = "keystone:\(digest)"
        legacy.remove()
    }

    private func remove(full: Bool) {
        #if os(Linux)
        let serial = ckeyring_search(description(full: full))
        if serial > 0 { _ = ckeyring_remove(serial) }
        #endif
    }
}
