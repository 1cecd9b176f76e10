import Crypto
import Foundation
#if os(Linux)
import CKeyring
#endif

/// Unlocked keys cached in the Linux kernel user keyring, so later processes start unlocked.
///
/// Two entries per keychain: the full key set (expiring with the keychain's timeout) and the
/// after-first-unlock set (class C and D keys; no expiry until the keychain is locked). The entry's
/// description names a digest of the keychain's real path, never the path itself.
struct KeyringCache {
    let base: String

    init(path: String) {
        let real = (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? path
        let absolute = URL(fileURLWithPath: real).standardizedFileURL.path
        let digest = SHA256.hash(data: Data(absolute.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
        base = "keystone:\(digest)"
    }

    private func description(full: Bool) -> String { base + (full ? ":full" : ":afu") }

    func cache(_ keys: KeySet, unlockedAt: Date, timeout: TimeInterval?, full: Bool) {
        #if os(Linux)
        var payload = Data()
        RowCodec.writeInt(unlockedAt.timeIntervalSince1970.bitPattern, to: &payload)
        payload.append(keys.serialized())
        let serial = payload.withUnsafeBytes { ckeyring_add(description(full: full), $0.baseAddress, $0.count) }
        guard serial > 0 else { return }
        _ = ckeyring_set_timeout(serial, UInt32(timeout.map { max(1, min($0, Double(UInt32.max))) } ?? 0))
        #endif
    }

    func load(full: Bool) -> (KeySet, Date)? {
        #if os(Linux)
        let serial = ckeyring_search(description(full: full))
        guard serial > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 512)
        let length = ckeyring_read(serial, &buffer, buffer.count)
        guard length > 8, length <= buffer.count else { return nil }
        var seconds: UInt64 = 0
        for i in 0..<8 { seconds = (seconds << 8) | UInt64(buffer[i]) }
        guard let keys = KeySet(serialized: Data(buffer[8..<length])) else { return nil }
        return (keys, Date(timeIntervalSince1970: Double(bitPattern: seconds)))
        #else
        return nil
        #endif
    }

    func removeFull() {
        #if os(Linux)
        let serial = ckeyring_search(description(full: true))
        if serial > 0 { _ = ckeyring_remove(serial) }
        #endif
    }

    func remove() {
        #if os(Linux)
        for full in [true, false] {
            let serial = ckeyring_search(description(full: full))
            if serial > 0 { _ = ckeyring_remove(serial) }
        }
        #endif
    }
}
