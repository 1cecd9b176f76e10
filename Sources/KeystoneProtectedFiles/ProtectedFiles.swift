import Foundation
import Keystone

/// When a protected file's content can be read, as Apple's Data Protection classes say it.
///
/// On Apple platforms these are `FileProtectionType`'s classes. Elsewhere they choose the keychain accessibility
/// of the class key the file is sealed under (see <doc:ProtectingFilesAtRest>).
public enum FileProtection: String, Sendable, Hashable, CaseIterable, Codable {
    /// Readable and writable only while the device (the keychain) is unlocked: `FileProtectionType.complete`;
    /// elsewhere a class key with `whenUnlockedThisDeviceOnly`.
    case complete
    /// Can be created while locked, read only while unlocked: `FileProtectionType.completeUnlessOpen`; elsewhere
    /// sealed to a class P-256 public key readable after the first unlock, opened with its private key
    /// (`whenUnlockedThisDeviceOnly`).
    case completeUnlessOpen
    /// Readable and writable after the first unlock since boot: `FileProtectionType.completeUntilFirstUserAuthentication`;
    /// elsewhere a class key with `afterFirstUnlockThisDeviceOnly`.
    case completeUntilFirstUserAuthentication
}

/// Files protected at rest, with one API on every platform.
///
/// On Apple platforms a protected file is a plain file with a Data Protection class (`FileProtectionType`), written
/// atomically. Elsewhere (Linux) it is sealed with AES-256-GCM in chunks, under a per-file key derived from a class
/// key held in the keychain; the file's full path (or an identifier the app chose) and the order of its chunks are
/// authenticated, and any file size streams in constant memory (about two chunks). With ``rollbackProtection``, a
/// counter in the keychain makes an older copy of a file put back fail to open.
///
/// ```swift
/// let files = try ProtectedFiles(keychain: Keychain())
/// try files.write(Data("report".utf8), to: url, protection: .complete)
/// let data = try files.read(at: url)
/// try files.write(contentsOf: bigVideo, to: protectedVideo)        // streams, whatever the size
/// try files.read(at: protectedVideo, to: decryptedCopy)            // appears only once everything verified
/// ```
///
/// Every write is an atomic replace: a temporary file in the same directory, mode 0600 from its creation, written,
/// flushed, then renamed over the target (the directory flushed too). If anything fails, the previous file is
/// untouched. A symlink at the target is replaced, never written through. A write first removes the temporary files
/// that interrupted writes of the same target left (see ``removeStaleTemporaryFiles(of:)``).
///
/// - Important: A locked keychain (or unavailable protected data) makes a read throw `errSecInteractionNotAllowed`
///   (-25308): the file is intact and readable after the unlock. Never delete or rewrite a protected file because a
///   read failed. On macOS, Data Protection classes are enforced only for apps using the data protection keychain
///   on Apple silicon (iOS-style apps, Mac Catalyst); for other macOS processes the class is recorded but files stay
///   readable while the Mac is locked: protect them with FileVault.
public struct ProtectedFiles: Sendable {
    /// The keychain service of the class keys by default.
    public static let defaultService = "com.keystone.protected-files"
    /// The chunk size of new sealed files by default: 64 KiB.
    public static let defaultChunkSize = 64 * 1024

    /// The keychain holding the class keys (used by the sealed format; Data Protection needs none).
    public let keychain: Keychain
    /// The keychain service of the class keys.
    public let service: String
    /// The chunk size of new sealed files, and of streaming on Apple platforms.
    public let chunkSize: Int
    /// Whether writes record a version per file in the keychain and reads refuse an older one (sealed format).
    public let rollbackProtection: Bool
    /// Whether files of sealed format 1 (earlier Keystones: only the file's name bound) are read.
    public let readsFormatVersion1: Bool

    let keys: ProtectedFileKeys
    let versions: ProtectedFileVersions

    /// Creates protected files whose class keys live in `keychain` under `service`.
    ///
    /// - Parameters:
    ///   - keychain: where the class keys live; its access group applies to them. Its accessibility, access control
    ///     and synchronizable options do not: each class key has its class's accessibility and stays on the device.
    ///   - service: the keychain service of the class keys; two services have independent keys.
    ///   - chunkSize: the size of the chunks new sealed files are cut into, 4 KiB ... 16 MiB (64 KiB by default).
    ///   - rollbackProtection: each write records the file's new version in the keychain (a counter per full path
    ///     or identifier, under `service`), and a read refuses a file older than the version recorded: a copy put
    ///     back. Off by default (it costs a keychain read and write per file write). Sealed format only.
    ///   - readsFormatVersion1: read files of sealed format 1, written by earlier Keystones, which bind only the
    ///     file's last path component; off by default. Rewrite such files to upgrade them.
    /// - Throws: `KeychainError.invalidItem` for an empty service, `errSecParam` (-50) for a chunk size out of range.
    /// - Important: Rollback protection cannot tell a file and the keychain restored together from a backup, and
    ///   cannot stop a file from being deleted; every reader of a file must turn it on (a reader without it accepts
    ///   any version). See <doc:ProtectingFilesAtRest>.
    public init(keychain: Keychain = Keychain(), service: String = ProtectedFiles.defaultService,
                chunkSize: Int = ProtectedFiles.defaultChunkSize, rollbackProtection: Bool = false,
                readsFormatVersion1: Bool = false) throws(KeychainError) {
        guard !service.isEmpty else { throw KeychainError(code: .invalidItem, reason: "protected files need a non-empty keychain service") }
        guard SealedFileHeader.chunkSizes.contains(chunkSize) else {
            throw KeychainError(status: Status.param, reason: "the chunk size must be between 4 KiB and 16 MiB, not \(chunkSize)")
        }
        self.keychain = keychain
        self.service = service
        self.chunkSize = chunkSize
        self.rollbackProtection = rollbackProtection
        self.readsFormatVersion1 = readsFormatVersion1
        self.keys = ProtectedFileKeys(keychain: keychain, service: service)
        self.versions = ProtectedFileVersions(keychain: keys.keychain, service: service)
    }

    // MARK: - Writing

    /// Writes `data` to a protected file at `url`, atomically replacing any file there.
    ///
    /// - Parameters:
    ///   - data: the content.
    ///   - url: the file; its directory must exist. Without an `identifier`, its full path is authenticated (sealed
    ///     format): a copy or a moved or renamed file does not open, so write it where it is read.
    ///   - protection: when the file can be read.
    ///   - identifier: binds the file to this name instead of its path (sealed format), for files that must
    ///     stay readable when their directory moves; read it with the same identifier. Unique per file.
    /// - Throws: `KeychainError` with `errSecInteractionNotAllowed` (-25308) when the class key (or the rollback
    ///   counter) cannot be used now (the keychain is locked; nothing was written), `errSecIO` (-36),
    ///   `errSecDiskFull` (-34) or `errSecWrPerm` (-61) for the file system; `KeychainError.invalidItem` for an
    ///   empty identifier; any other keychain status reading or creating the class key.
    public func write(_ data: Data, to url: URL, protection: FileProtection = .complete, identifier: String? = nil) throws {
        try write(.bytes(data), to: url, protection: protection, identifier: identifier)
    }

    /// Writes the content of the file at `source` to a protected file at `url`, streaming (constant memory).
    ///
    /// - Throws: as `write(_:to:protection:identifier:)`; `errSecItemNotFound` (-25300) when `source` does not exist.
    public func write(contentsOf source: URL, to url: URL, protection: FileProtection = .complete, identifier: String? = nil) throws {
        let fd = try FileIO.openForReading(source, what: "the source file")
        defer { close(fd) }
        try write(.descriptor(fd, source.path), to: url, protection: protection, identifier: identifier)
    }

    /// Writes everything readable from `source` (to its end) to a protected file at `url`, streaming.
    ///
    /// - Throws: as `write(_:to:protection:identifier:)`.
    public func write(from source: FileHandle, to url: URL, protection: FileProtection = .complete, identifier: String? = nil) throws {
        try write(.descriptor(source.fileDescriptor, "the source"), to: url, protection: protection, identifier: identifier)
    }

    /// Writes the pieces `next` returns, until it returns nil, to a protected file at `url`, streaming.
    ///
    /// The pieces may have any size. If `next` throws, the write stops, the temporary file is removed and the
    /// previous file at `url` (if any) is untouched; the error is rethrown.
    ///
    /// - Throws: as `write(_:to:protection:identifier:)`, or what `next` throws.
    public func write(to url: URL, protection: FileProtection = .complete, identifier: String? = nil,
                      pieces next: () throws -> Data?) throws {
        try withoutActuallyEscaping(next) { next in try write(.pieces(next), to: url, protection: protection, identifier: identifier) }
    }

    enum Source {
        case bytes(Data)
        case descriptor(Int32, String)
        case pieces(() throws -> Data?)
    }

    func write(_ source: Source, to url: URL, protection: FileProtection, identifier: String?) throws {
        #if canImport(Darwin)
        // Decision: a plain Data Protection file has no header to bind a name or a version to: identifier and
        // rollback protection apply to the sealed format only (documented in ProtectingFilesAtRest.md).
        try writeWithDataProtection(source, to: url, protection: protection)
        #else
        try writeSealed(source, to: url, identifier: identifier, protection: protection)
        #endif
    }

    // MARK: - Reading

    /// Reads the whole content of the protected file at `url`; nothing is returned unless all of it verified.
    ///
    /// - Throws: `KeychainError` with
    ///   - `errSecInteractionNotAllowed` (-25308): the keychain is locked (protected data unavailable): the file is
    ///     intact and readable after the unlock; it is never rewritten or removed.
    ///   - `errSecDecode` (-26275): the file was changed, truncated, extended or reordered; it was sealed for another
    ///     path or identifier (a copy from another directory, a moved or renamed file); it is an older version than
    ///     the keychain recorded (``rollbackProtection``); it is in sealed format 1 (see ``readsFormatVersion1``);
    ///     it was sealed under another keychain's key, or is not a protected file. The reason names the file and
    ///     which of these it is, when that can be told.
    ///   - `errSecItemNotFound` (-25300): there is no file at `url`; `errSecIO` (-36) for other file-system failures.
    public func read(at url: URL, identifier: String? = nil) throws -> Data {
        var content = Data()
        try read(at: url, identifier: identifier) { content.append($0) }
        return content
    }

    /// Reads the protected file at `url` chunk by chunk, in order, in constant memory.
    ///
    /// - Important: Each chunk is verified before `body` sees it, but a later chunk can still fail (a truncated or
    ///   tampered file): then this throws, and whatever `body` did with the earlier chunks must be discarded. Use
    ///   `read(at:identifier:to:)` for an output file that only appears when everything verified.
    /// - Throws: as `read(at:identifier:)`, or what `body` throws.
    public func read(at url: URL, identifier: String? = nil, chunks body: (Data) throws -> Void) throws {
        #if canImport(Darwin)
        try readWithDataProtection(at: url, body)
        #else
        try readSealed(at: url, identifier: identifier, body)
        #endif
    }

    /// Reads the protected file at `url` into `destination`, streaming.
    ///
    /// - Important: On failure, what was written to `destination` before it must be discarded (see
    ///   ``read(at:identifier:chunks:)``).
    /// - Throws: as `read(at:identifier:)`; `errSecIO` (-36) when writing `destination` fails.
    public func read(at url: URL, identifier: String? = nil, into destination: FileHandle) throws {
        let fd = destination.fileDescriptor
        try read(at: url, identifier: identifier) { chunk in try chunk.withUnsafeBytes { try FileIO.writeAll(fd, $0, path: "the destination") } }
    }

    /// Reads the protected file at `url` into a new plain file at `destination` (mode 0600), atomically: the
    /// destination appears (or replaces the previous one) only once the whole file verified.
    ///
    /// - Important: The destination holds the plaintext, unprotected: remove it when done.
    /// - Throws: as `read(at:identifier:)`; then nothing was created at `destination` and a previous file there is untouched.
    public func read(at url: URL, identifier: String? = nil, to destination: URL) throws {
        let writer = try AtomicFileWriter(target: destination)
        writer.writeInBackground()
        do {
            try read(at: url, identifier: identifier) { try writer.write($0) }
            try writer.commit()
        } catch {
            writer.abandon()
            throw error
        }
    }

    /// The protection class of the protected file at `url`.
    ///
    /// - Throws: as `read(at:identifier:)` for a file that is not a protected file or does not exist; never needs the keychain.
    public func protection(of url: URL) throws -> FileProtection {
        #if canImport(Darwin)
        return try dataProtectionClass(of: url)
        #else
        let fd = try FileIO.openForReading(url, what: "the protected file")
        defer { close(fd) }
        return try SealedFileHeader.read(from: fd, path: url.path).0.protection
        #endif
    }

    /// Removes the protected file at `url` (the class keys stay: other files use them). With
    /// ``rollbackProtection`` (sealed format), its version counter is advanced, so a copy put back is refused.
    ///
    /// - Parameters:
    ///   - url: the protected file to remove.
    ///   - identifier: the identifier the file was written with, if any (for its counter).
    /// - Returns: whether there was a file.
    /// - Throws: `KeychainError` with `errSecWrPerm` (-61) or `errSecIO` (-36) when it cannot be removed; with
    ///   rollback protection, a keychain status when the counter cannot be advanced (the file is removed then).
    @discardableResult
    public func remove(at url: URL, identifier: String? = nil) throws -> Bool {
        if rollbackProtection { _ = try SealedFileIdentity(url: url, identifier: identifier) }   // an empty identifier: nothing removed
        if unlink(url.path) == 0 {
            FileIO.syncDirectory(of: url)
            #if !canImport(Darwin)
            if rollbackProtection { try recordRemoval(of: url, identifier: identifier) }
            #endif
            return true
        }
        let code = errno
        if code == ENOENT { return false }
        throw FileIO.error(code, "could not remove the protected file \(url.path)")
    }
}
