import Crypto
import Foundation

// The sealed protected-file format (version 1): how a protected file is stored where Apple's Data Protection is
// not available (Linux and other non-Apple platforms). Documented for users in ProtectedFiles.md.
//
//     offset  size  field
//     0       4     magic "KSPF"
//     4       1     version, 1
//     5       1     protection class: 1 complete, 2 completeUnlessOpen, 3 completeUntilFirstUserAuthentication
//     6       2     n, the length of the ephemeral public key (big-endian): 65 for completeUnlessOpen, else 0
//     8       4     chunk size in bytes (big-endian), 4 KiB ... 16 MiB
//     12      16    key id: which class key sealed the file (never the key itself)
//     28      32    salt: random per file (a new salt on every write)
//     60      n     completeUnlessOpen only: the per-file ephemeral P-256 public key (X9.63)
//     60+n    ...   chunks
//
// Keys. The per-file key is HKDF-SHA256 with the salt, info = "Keystone protected file v1" 0x00 + the file's name
// (its last path component at write time, UTF-8), from:
// - complete and completeUntilFirstUserAuthentication: the class's 256-bit symmetric key in the keychain;
//   key id = HMAC-SHA256(class key, "Keystone protected file key id")[0..<16].
// - completeUnlessOpen: the ECDH shared secret of a fresh ephemeral P-256 key and the class's P-256 public key
//   (readable after the first unlock), so a file can be created while the device is locked, but reading needs the
//   class private key (whenUnlockedThisDeviceOnly); key id = SHA-256(class public key X9.63)[0..<16].
// Binding the name through HKDF means a renamed file derives another key and fails to open (errSecDecode).
//
// Chunks. The plaintext is cut into chunks of exactly `chunk size` bytes, then one final chunk of 0 ..< chunk size
// bytes (so a file whose length is a multiple of the chunk size ends with an empty final chunk; the final chunk is
// the only one shorter than the chunk size, so a reader needs no look-ahead). Chunk i is stored as
// AES-256-GCM(ciphertext || 16-byte tag) with
// - nonce = 4 zero bytes || i as a 64-bit big-endian counter. Nonces never repeat under one key: the per-file key
//   is unique to this write (fresh random salt, and for completeUnlessOpen a fresh ephemeral key), and i counts up.
// - additional data = SHA-256(header) || i (64-bit big-endian) || final flag (1 for the last chunk, else 0).
// So a changed header, a reordered, dropped, duplicated or appended chunk, and a truncation (at a chunk boundary
// or inside a chunk) all fail authentication. Nothing here is a new primitive: AES-GCM, HKDF, HMAC and SHA-256
// are swift-crypto's.

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
    static let version: UInt8 = 1
    static let fixedLength = 60
    static let chunkSizes = 4096...(16 << 20)
    static let tagLength = 16

    var protection: FileProtection
    var chunkSize: Int
    var keyID: Data
    var salt: Data
    var ephemeralPublicKey: Data

    /// The header's bytes.
    var encoded: Data {
        var data = Data(Self.magic)
        data.append(Self.version)
        data.append(protection.sealedCode)
        data.append(UInt8(ephemeralPublicKey.count >> 8))
        data.append(UInt8(ephemeralPublicKey.count & 0xFF))
        withUnsafeBytes(of: UInt32(chunkSize).bigEndian) { data.append(contentsOf: $0) }
        data.append(keyID)
        data.append(salt)
        data.append(ephemeralPublicKey)
        return data
    }

    /// Reads and checks a header at the start of `fd`.
    ///
    /// - Returns: the header and its bytes.
    /// - Throws: ``KeychainError/decode`` (-26275) naming `path` when it is not a Keystone protected file (wrong
    ///   magic, unknown version or class, impossible sizes), or the file ends inside the header.
    static func read(from fd: Int32, path: String) throws -> (SealedFileHeader, Data) {
        var fixed = [UInt8](repeating: 0, count: fixedLength)
        let count = try fixed.withUnsafeMutableBytes { try FileIO.readFully(fd, into: $0, path: path) }
        guard count == fixedLength, Array(fixed[0..<4]) == magic else {
            throw SealedFile.damaged(path, "it is not a Keystone protected file (no KSPF header)")
        }
        guard fixed[4] == version else {
            throw SealedFile.damaged(path, "it has format version \(fixed[4]); this Keystone reads version \(version)")
        }
        guard let protection = FileProtection(sealedCode: fixed[5]) else {
            throw SealedFile.damaged(path, "its header names an unknown protection class")
        }
        let ephemeralLength = Int(fixed[6]) << 8 | Int(fixed[7])
        let chunkSize = Int(fixed[8]) << 24 | Int(fixed[9]) << 16 | Int(fixed[10]) << 8 | Int(fixed[11])
        guard chunkSizes.contains(chunkSize), ephemeralLength == (protection == .completeUnlessOpen ? 65 : 0) else {
            throw SealedFile.damaged(path, "its header is damaged")
        }
        var ephemeral = [UInt8](repeating: 0, count: ephemeralLength)
        let read = try ephemeral.withUnsafeMutableBytes { try FileIO.readFully(fd, into: $0, path: path) }
        guard read == ephemeralLength else { throw SealedFile.damaged(path, "it ends inside its header") }
        let header = SealedFileHeader(protection: protection, chunkSize: chunkSize, keyID: Data(fixed[12..<28]),
                                      salt: Data(fixed[28..<60]), ephemeralPublicKey: Data(ephemeral))
        return (header, Data(fixed) + Data(ephemeral))
    }
}

/// Sealing and opening the chunks of one file.
enum SealedFile {
    static let info = Data("Keystone protected file v1".utf8) + Data([0])

    /// The integrity failure of `path`: ``KeychainError/decode`` (-26275), naming the file, never its content.
    static func damaged(_ path: String, _ why: String) -> KeychainError {
        KeychainError(status: Status.decode, reason: "the protected file \(path) cannot be opened: \(why)")
    }

    /// HKDF info binding the file's name.
    static func info(name: String) -> Data { info + Data(name.utf8) }

    /// The per-file key from a class symmetric key.
    static func fileKey(classKey: SymmetricKey, salt: Data, name: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: classKey, salt: salt, info: info(name: name), outputByteCount: 32)
    }

    /// The per-file key from an ECDH shared secret (completeUnlessOpen).
    static func fileKey(sharedSecret: SharedSecret, salt: Data, name: String, ephemeral: Data, classPublic: Data) -> SymmetricKey {
        sharedSecret.hkdfDerivedSymmetricKey(using: SHA256.self, salt: salt, sharedInfo: info(name: name) + ephemeral + classPublic,
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
/// Each chunk is verified before it is handed over; a failure throws ``KeychainError/decode`` naming `path`.
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
            throw SealedFile.damaged(path, "chunk \(index) does not authenticate: the file was changed, truncated, reordered or renamed after sealing (its name is authenticated)")
        }
        try body(plaintext)
        if final { return }
        index += 1
    }
}
