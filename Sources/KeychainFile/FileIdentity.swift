import Crypto
import Foundation
import KeychainSealing
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
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

    /// The bytes the unlock cache names this file by: device and inode (big-endian), then the file id.
    var cacheIdentity: Data {
        var bytes = Data()
        withUnsafeBytes(of: device.bigEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: inode.bigEndian) { bytes.append(contentsOf: $0) }
        bytes.append(fileID)
        return bytes
    }
}

extension KeyringCache {
    /// The unlock cache of the keychain file `identity`.
    init(file identity: FileIdentity) { self.init(identity: identity.cacheIdentity) }

    /// Removes the entries format 1 keychains were cached under (named by a digest of the file's path), so an
    /// upgraded keychain leaves none behind.
    static func removeLegacyEntries(path: String) {
        let real = (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? path
        let absolute = URL(fileURLWithPath: real).standardizedFileURL.path
        let digest = SHA256.hash(data: Data(absolute.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
        var legacy = KeyringCache(identity: Data())
        legacy.base = "keystone:\(digest)"
        legacy.remove()
    }
}
