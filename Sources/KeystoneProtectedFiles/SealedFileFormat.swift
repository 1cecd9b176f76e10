import Crypto
import Foundation
import Keystone

// The sealed protected-file format (version 2; version 1 is still read on request): how a protected file is stored
// where Apple's Data Protection is not available (Linux and other non-Apple platforms). Documented for users in
// ProtectingFilesAtRest.md.
//
//     offset  size  field
//     0       4     magic "KSPF"
//     4       1     format version: 2 (1 for files of earlier Keystones)
//     5       1     protection class: 1 complete, 2 completeUnlessOpen, 3 completeUntilFirstUserAuthentication
//     6       2     n, the length of the ephemeral public key (big-endian): 65 for completeUnlessOpen, else 0
//     8       4     chunk size in bytes (big-endian), 4 KiB ... 16 MiB
//     12      16    key id: which class key sealed the file (never the key itself)
//     28      32    salt: random per file (a new salt on every write)
//     60      8     version 2 only: the file's version (big-endian): the rollback counter this write recorded in
//                   the keychain, 0 when written without rollback protection
//     68      n     completeUnlessOpen only: the per-file ephemeral P-256 public key (X9.63)   (version 1: at 60)
//     68+n    ...   chunks                                                                     (version 1: at 60+n)
//
// Keys. The per-file key is HKDF-SHA256 with the salt, and info binding what the file is:
// - version 2: "Keystone protected file v2" 0x00, then 0x01 + the file's full path (absolute, with "." and ".."
//   resolved, symlinks not resolved), or 0x02 + an identifier the app chose, UTF-8. So a file copied or moved to
//   another path (another directory, or another name) derives another key and fails to open (errSecDecode); an
//   app that needs files to move (a data directory that changes place) names them by identifier instead.
// - version 1: "Keystone protected file v1" 0x00 + the last path component only (a same-named file from another
//   directory opened): read only when the app asks for it, never written.
// The input key material:
// - complete and completeUntilFirstUserAuthentication: the class's 256-bit symmetric key in the keychain;
//   key id = HMAC-SHA256(class key, "Keystone protected file key id")[0..<16].
// - completeUnlessOpen: the ECDH shared secret of a fresh ephemeral P-256 key and the class's P-256 public key
//   (readable after the first unlock), so a file can be created while the device is locked, but reading needs the
//   class private key (whenUnlockedThisDeviceOnly); key id = SHA-256(class public key X9.63)[0..<16].
//
// Chunks. The plaintext is cut into chunks of exactly `chunk size` bytes, then one final chunk of 0 ..< chunk size
// bytes (so a file whose length is a multiple of the chunk size ends with an empty final chunk; the final chunk is
// the only one shorter than the chunk size, so a reader needs no look-ahead). Chunk i is stored as
// AES-256-GCM(ciphertext || 16-byte tag) with
// - nonce = 4 zero bytes || i as a 64-bit big-endian counter. Nonces never repeat under one key: the per-file key
//   is unique to this write (fresh random salt, and for completeUnlessOpen a fresh ephemeral key), and i counts up.
// - additional data = SHA-256(header) || i (64-bit big-endian) || final flag (1 for the last chunk, else 0).
// So a changed header (the file version included), a reordered, dropped, duplicated or appended chunk, and a
// truncation (at a chunk boundary or inside a chunk) all fail authentication. Nothing here is a new primitive:
// AES-GCM, HKDF, HMAC and SHA-256 are swift-crypto's.
//
// Decision (format 1): Keystone is pre-release and promises no stable file formats, but reading format 1 costs one
// branch, so it stays readable on request (`ProtectedFiles(readsFormatVersion1: true)`), never by default: a
// format-1 file binds only its last path component, and reading those by default would let any old same-named copy
// (a backup, another directory) be substituted even after the file was rewritten in format 2. Rewriting a file
// upgrades it.

/// The protection classes as stored in a sealed file's header.
extension FileProtection {
    var sealedCode: UInt8 {
        switch self {
        case .complete: return 1
        case .completeUnlessOpen: return 2
        case .completeUntilFirstUserAuthentication: return 3
        }
    }

    init?(sealedCode: UInt8) {
        switch sealedCode {
        case 1: self = .complete
        case 2: self = .completeUnlessOpen
        case 3: self = .completeUntilFirstUserAuthentication
        default: return nil
        }
    }
}

/// A sealed file's header.
struct SealedFileHeader {
    static let magic: [UInt8] = Array("KSPF".utf8)
    /// The format written.
    static let version: UInt8 = 2
    /// The length up to the ephemeral key, by format: version 1 has no file version.
    static func fixedLength(_ formatVersion: UInt8) -> Int { formatVersion == 1 ? 60 : 68 }
    static let chunkSizes = 4096...(16 << 20)
    static let tagLength = 16

    var formatVersion: UInt8 = SealedFileHeader.version
    var protection: FileProtection
    var chunkSize: Int
    var keyID: Data
    var salt: Data
    /// The rollback counter's value this file was written with (0: none). Always 0 in format 1.
    var fileVersion: UInt64 = 0
    var ephemeralPublicKey: Data

    /// The header's bytes.
    var encoded: Data {
        var data = Data(Self.magic)
        data.append(formatVersion)
        data.append(protection.sealedCode)
        data.append(UInt8(ephemeralPublicKey.count >> 8))
        data.append(UInt8(ephemeralPublicKey.count & 0xFF))
        withUnsafeBytes(of: UInt32(chunkSize).bigEndian) { data.append(contentsOf: $0) }
        data.append(keyID)
        data.append(salt)
        if formatVersion >= 2 { withUnsafeBytes(of: fileVersion.bigEndian) { data.append(contentsOf: $0) } }
        data.append(ephemeralPublicKey)
        return data
    }

    /// Reads and checks a header at the start of `fd`.
    ///
    /// - Returns: the header and its bytes.
    /// - Throws: `KeychainError.decode` (-26275) naming `path` when it is not a Keystone protected file (wrong
    ///   magic, unknown version or class, impossible sizes), or the file ends inside the header.
    static func read(from fd: Int32, path: String) throws -> (SealedFileHeader, Data) {
        var fixed = [UInt8](repeating: 0, count: fixedLength(1))
        let count = try fixed.withUnsafeMutableBytes { try FileIO.readFully(fd, into: $0, path: path) }
        guard count == fixed.count, Array(fixed[0..<4]) == magic else {
            throw SealedFile.damaged(path, "it is not a Keystone protected file (no KSPF header)")
        }
        let formatVersion = fixed[4]
        guard (1...version).contains(formatVersion) else {
            throw SealedFile.damaged(path, "it has format version \(formatVersion); this Keystone reads versions 1 to \(version)")
        }
        guard let protection = FileProtection(sealedCode: fixed[5]) else {
            throw SealedFile.damaged(path, "its header names an unknown protection class")
        }
        let ephemeralLength = Int(fixed[6]) << 8 | Int(fixed[7])
        let chunkSize = Int(fixed[8]) << 24 | Int(fixed[9]) << 16 | Int(fixed[10]) << 8 | Int(fixed[11])
        guard chunkSizes.contains(chunkSize), ephemeralLength == (protection == .completeUnlessOpen ? 65 : 0) else {
            throw SealedFile.damaged(path, "its header is damaged")
        }
        var rest = [UInt8](repeating: 0, count: fixedLength(formatVersion) - fixed.count + ephemeralLength)
        let read = try rest.withUnsafeMutableBytes { try FileIO.readFully(fd, into: $0, path: path) }
        guard read == rest.count else { throw SealedFile.damaged(path, "it ends inside its header") }
        var fileVersion: UInt64 = 0
        if formatVersion >= 2 { for byte in rest[0..<8] { fileVersion = fileVersion << 8 | UInt64(byte) } }
        let header = SealedFileHeader(formatVersion: formatVersion, protection: protection, chunkSize: chunkSize,
                                      keyID: Data(fixed[12..<28]), salt: Data(fixed[28..<60]), fileVersion: fileVersion,
                                      ephemeralPublicKey: Data(rest[(rest.count - ephemeralLength)...]))
        return (header, Data(fixed) + Data(rest))
    }
}

/// What a sealed file of format 2 is bound to: its full path, or an identifier the app chose.
enum SealedFileIdentity: Hashable {
    case path(String)
    case identifier(String)

    /// The identity of the file at `url`, or the app's `identifier`.
    ///
    /// - Throws: `KeychainError.invalidItem` for an empty identifier.
    init(url: URL, identifier: String?) throws {
        if let identifier {
            guard !identifier.isEmpty else { throw KeychainError(code: .invalidItem, reason: "a protected file's identifier must not be empty") }
            self = .identifier(identifier)
        } else {
            self = .path(url.absoluteURL.standardizedFileURL.path)
        }
    }

    /// The bytes bound: a kind byte (1 path, 2 identifier) and the UTF-8 name.
    var bound: Data {
        switch self {
        case .path(let path): return Data([1]) + Data(path.utf8)
        case .identifier(let identifier): return Data([2]) + Data(identifier.utf8)
        }
    }

    /// For messages.
    var description: String {
        switch self {
        case .path(let path): return "path \(path)"
        case .identifier(let identifier): return "identifier \"\(identifier)\""
        }
    }
}

/// Sealing and opening the chunks of one file.
enum SealedFile {
    static let infoV1 = Data("Keystone protected file v1".utf8) + Data([0])
    static let infoV2 = Data("Keystone protected file v2".utf8) + Data([0])

    /// The integrity failure of `path`: `KeychainError.decode` (-26275), naming the file, never its content.
    static func damaged(_ path: String, _ why: String) -> KeychainError {
        KeychainError(status: Status.decode, reason: "the protected file \(path) cannot be opened: \(why)")
    }

    /// HKDF info of format 2: the file's identity.
    static func info(_ identity: SealedFileIdentity) -> Data { infoV2 + identity.bound }

    /// HKDF info of format 1: the file's last path component only.
    static func info(version1Name name: String) -> Data { infoV1 + Data(name.utf8) }

    /// The per-file key from a class symmetric key.
    static func fileKey(classKey: SymmetricKey, salt: Data, info: Data) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: classKey, salt: salt, info: info, outputByteCount: 32)
    }

    /// The per-file key from an ECDH shared secret (completeUnlessOpen).
    static func fileKey(sharedSecret: SharedSecret, salt: Data, info: Data, ephemeral: Data, classPublic: Data) -> SymmetricKey {
        sharedSecret.hkdfDerivedSymmetricKey(using: SHA256.self, salt: salt, sharedInfo: info + ephemeral + classPublic,
                                             outputByteCount: 32)
    }

    /// The key id of a class symmetric key.
    static func keyID(of classKey: SymmetricKey) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: Data("Keystone protected file key id".utf8), using: classKey).prefix(16))
    }

    /// The key id of a class public key.
    static func keyID(of classPublic: P256.KeyAgreement.PublicKey) -> Data {
        Data(SHA256.hash(data: classPublic.x963Representation).prefix(16))
    }

    /// Chunk `index`'s nonce: 4 zero bytes and the big-endian counter.
    static func nonce(_ index: UInt64) -> AES.GCM.Nonce {
        var bytes = [UInt8](repeating: 0, count: 12)
        withUnsafeBytes(of: index.bigEndian) { for i in 0..<8 { bytes[4 + i] = $0[i] } }
        return try! AES.GCM.Nonce(data: bytes)  // 12 bytes: always valid
    }

    /// Chunk `index`'s additional data.
    static func aad(headerHash: Data, index: UInt64, final: Bool) -> Data {
        var aad = headerHash
        withUnsafeBytes(of: index.bigEndian) { aad.append(contentsOf: $0) }
        aad.append(final ? 1 : 0)
        return aad
    }
}

/// Seals a stream of bytes into chunks written to an ``AtomicFileWriter``: exactly `chunkSize` bytes of memory
/// for the plaintext, whatever the file's size.
final class ChunkSealer {
    private let key: SymmetricKey
    private let headerHash: Data
    private let writer: AtomicFileWriter
    private var buffer: [UInt8]
    private var filled = 0
    private var index: UInt64 = 0

    init(key: SymmetricKey, header: Data, chunkSize: Int, writer: AtomicFileWriter) throws {
        self.key = key
        self.headerHash = Data(SHA256.hash(data: header))
        self.writer = writer
        self.buffer = [UInt8](repeating: 0, count: chunkSize)
        try writer.write(header)
    }

    /// Adds plaintext; every full chunk is sealed and written (never as the final chunk).
    func consume(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            let take = min(buffer.count - filled, bytes.count - offset)
            buffer.withUnsafeMutableBytes { destination in
                (destination.baseAddress! + filled).copyMemory(from: bytes.baseAddress! + offset, byteCount: take)
            }
            filled += take
            offset += take
            if filled == buffer.count { try emit(final: false) }
        }
    }

    /// Reads `fd` to its end straight into the chunk buffer (the file-to-file path: no intermediate copies).
    func consume(fileDescriptor fd: Int32, path: String) throws {
        while true {
            let count = try buffer.withUnsafeMutableBytes { destination in
                try FileIO.readFully(fd, into: UnsafeMutableRawBufferPointer(rebasing: destination[filled...]), path: path)
            }
            filled += count
            if filled == buffer.count { try emit(final: false) } else { return }
        }
    }

    /// Seals the final chunk (shorter than a full chunk, possibly empty).
    func finish() throws { try emit(final: true) }

    private func emit(final: Bool) throws {
        let box = try buffer.withUnsafeBytes { bytes in
            try AES.GCM.seal(UnsafeRawBufferPointer(rebasing: bytes[0..<filled]), using: key, nonce: SealedFile.nonce(index),
                             authenticating: SealedFile.aad(headerHash: headerHash, index: index, final: final))
        }
        // One write per chunk: the combined box is nonce || ciphertext || tag, and the nonce is not stored (it is the
        // chunk's index).
        if let combined = box.combined {
            try writer.write(combined.dropFirst(12))
        } else {
            try writer.write(box.ciphertext)
            try writer.write(box.tag)
        }
        index += 1
        filled = 0
    }
}

/// Opens the chunks following a header, handing each verified plaintext chunk to `body` in order.
///
/// Each chunk is verified before it is handed over; a failure throws `KeychainError.decode` naming `path`.
/// Chunks handed over before a failure were authentic on their own, but the file as a whole is not: callers
/// discard them.
func openChunks(fd: Int32, path: String, header: SealedFileHeader, headerBytes: Data, key: SymmetricKey,
                _ body: (Data) throws -> Void) throws {
    let headerHash = Data(SHA256.hash(data: headerBytes))
    let full = header.chunkSize + SealedFileHeader.tagLength
    var buffer = Data(count: full)
    var index: UInt64 = 0
    while true {
        let count = try buffer.withUnsafeMutableBytes { try FileIO.readFully(fd, into: $0, path: path) }
        let final = count < full
        guard count >= SealedFileHeader.tagLength else {
            throw SealedFile.damaged(path, "it is truncated (or it was changed, renamed, or sealed under another key)")
        }
        let plaintext: Data
        do {
            let box = try AES.GCM.SealedBox(nonce: SealedFile.nonce(index), ciphertext: buffer.prefix(count - SealedFileHeader.tagLength),
                                            tag: buffer[(count - SealedFileHeader.tagLength)..<count])
            plaintext = try AES.GCM.open(box, using: key,
                                         authenticating: SealedFile.aad(headerHash: headerHash, index: index, final: final))
        } catch {
            throw SealedFile.damaged(path, "chunk \(index) does not authenticate: the file was changed, truncated or reordered after sealing, or it was sealed for another path or identifier (a copy or a renamed file; its full path or identifier is authenticated)")
        }
        try body(plaintext)
        if final { return }
        index += 1
    }
}
