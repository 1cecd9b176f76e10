import Foundation
import Keystone

// Atomic replace of a file, and the POSIX file I/O under protected files (shared by the sealed format and the
// Data Protection path).
//
// The new content goes to a temporary file in the target's directory, created with O_CREAT|O_EXCL|O_NOFOLLOW and
// mode 0600 in the same open(2) (never chmod'ed afterwards, so it is never readable by others, not even for an
// instant); it is written, fsync'ed, renamed over the target, and the directory is fsync'ed. Until the rename the
// target is untouched: any failure removes the temporary file and leaves the old target as it was.
//
// The writer holds an exclusive flock(2) on its temporary file from its creation until after the rename, and removes
// the stale temporary files of the same target (those no writer holds locked: left by killed writers) before
// creating its own; see TemporaryFiles.swift for the rules.
//
// Decisions on planted symlinks:
// - At the temporary path: O_EXCL|O_NOFOLLOW refuses any existing name (a symlink included), so nothing is ever
//   written through it; the writer tries another random name (a few times), then fails with errSecIO.
// - At the target path: rename(2) replaces the directory entry itself, never what a symlink points to. A symlink at
//   the target is therefore replaced by the new regular file and its destination is left unchanged.

/// A file opened for writing under a temporary name, renamed over its target by ``commit()``.
package final class AtomicFileWriter {
    /// The final path.
    let target: URL
    /// The temporary path, in the target's directory.
    let temporaryPath: String
    private var descriptor: Int32
    private var committed = false
    /// Set by ``writeInBackground()``: writes are queued to a thread of their own.
    private var background: BackgroundWriter?

    /// Creates the temporary file next to `target`, mode 0600 from creation.
    ///
    /// - Parameter beforeFirstWrite: runs on the new, empty temporary file before any byte is written (the Data
    ///   Protection path sets the protection class there). A throw removes the temporary file.
    /// - Throws: `KeychainError` with `errSecIO` (-36) or `errSecWrPerm` (-61) when the file cannot be created.
    package init(target: URL, beforeFirstWrite: ((String) throws -> Void)? = nil) throws {
        self.target = target
        // Before creating ours: the disk space stale ones hold may be what this write needs.
        TemporaryFiles.removeStale(of: target)
        (descriptor, temporaryPath) = try Self.createTemporary(next: target)
        if let beforeFirstWrite {
            do { try beforeFirstWrite(temporaryPath) } catch { abandon(); throw error }
        }
    }

    deinit { abandon() }

    /// Creates `.<name>.<random>.tmp` next to `target` with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, and locks it;
    /// another random name when one exists (a planted file or symlink) or when a remover took the new file in the
    /// instant before it was locked; at most 8 tries.
    private static func createTemporary(next target: URL) throws -> (Int32, String) {
        let directory = target.deletingLastPathComponent().path
        for _ in 0..<8 {
            let name = TemporaryFiles.name(for: target.lastPathComponent, random: UInt64.random(in: 0...UInt64.max))
            let path = (directory as NSString).appendingPathComponent(name)
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 {
                if lockNew(fd, path) { return (fd, path) }
                close(fd)
                continue
            }
            let code = errno
            if code != EEXIST { throw FileIO.error(code, "could not create a temporary file next to \(target.path)") }
        }
        throw KeychainError(status: Status.io, reason: "could not create a temporary file next to \(target.path): every name tried exists")
    }

    /// Takes the writer's lock on its new temporary file, never waiting. False when the file is lost: a remover
    /// unlinked it before the lock, or holds its lock now (then the file is unlinked here if it still bears `path`).
    /// Where flock is not supported the file is kept unlocked (removers then never remove it).
    private static func lockNew(_ fd: Int32, _ path: String) -> Bool {
        var result: Int32
        repeat { result = flock(fd, LOCK_EX | LOCK_NB) } while result != 0 && errno == EINTR
        if result == 0 { return stillNamed(fd, path) }
        guard errno == EWOULDBLOCK else { return true }
        if stillNamed(fd, path) { unlink(path) }
        return false
    }

    /// Whether `path` still names the file open as `fd`.
    private static func stillNamed(_ fd: Int32, _ path: String) -> Bool {
        var opened = stat(), named = stat()
        return fstat(fd, &opened) == 0 && lstat(path, &named) == 0 && opened.st_dev == named.st_dev && opened.st_ino == named.st_ino
    }

    /// From now on, writes are queued to a ``BackgroundWriter`` (a thread of its own that also flushes every few
    /// megabytes), so the disk works while the caller prepares the next bytes. ``commit()`` waits for it.
    func writeInBackground() {
        guard background == nil, descriptor >= 0 else { return }
        background = BackgroundWriter(descriptor: descriptor, path: target.path)
    }

    /// Writes all of `bytes` (queued, in background mode: a failure is then thrown by a later write or by ``commit()``).
    ///
    /// - Throws: `KeychainError` with `errSecIO` (-36) or `errSecDiskFull` (-34).
    func write(_ bytes: UnsafeRawBufferPointer) throws {
        if let background { return try background.enqueue(Data(bytes)) }
        try FileIO.writeAll(descriptor, bytes, path: target.path)
    }

    /// Writes all of `data`.
    package func write(_ data: Data) throws {
        if let background { return try background.enqueue(data) }
        try data.withUnsafeBytes { try FileIO.writeAll(descriptor, $0, path: target.path) }
    }

    /// Flushes the temporary file, renames it over the target and flushes the directory.
    ///
    /// - Throws: `KeychainError` with `errSecIO` (-36); the target is then untouched (unless only the directory
    ///   flush failed, after the rename).
    package func commit() throws {
        if let background {
            self.background = nil
            do { try background.finish() } catch { abandon(); throw error }
        }
        guard fsync(descriptor) == 0 else {
            let code = errno
            abandon()
            throw FileIO.error(code, "could not flush \(target.path)")
        }
        // Renamed while still open, so the lock is held until the file bears the target's name.
        guard rename(temporaryPath, target.path) == 0 else {
            let code = errno
            unlink(temporaryPath)
            committed = true
            close(descriptor)
            descriptor = -1
            throw FileIO.error(code, "could not move the new file over \(target.path)")
        }
        committed = true
        close(descriptor)
        descriptor = -1
        FileIO.syncDirectory(of: target)
    }

    /// Closes and removes the temporary file; the target is untouched.
    package func abandon() {
        if let background { self.background = nil; background.cancel() }
        // Removed while still open and locked, so no remover ever sees it unlocked.
        if !committed { unlink(temporaryPath); committed = true }
        if descriptor >= 0 { close(descriptor); descriptor = -1 }
    }
}

/// Plain POSIX reads and writes with errors as `KeychainError`.
enum FileIO {
    /// A `KeychainError` for `errno` `code`: errSecDiskFull, errSecWrPerm, errSecItemNotFound or errSecIO.
    static func error(_ code: Int32, _ what: String) -> KeychainError {
        let status: Int32
        switch code {
        case ENOSPC, EDQUOT: status = Status.diskFull
        case EACCES, EPERM, EROFS: status = Status.wrPerm
        case ENOENT, ENOTDIR: status = Status.itemNotFound
        default: status = Status.io
        }
        let reason = String(cString: strerror(code))
        return KeychainError(status: status, reason: "\(what): \(reason)")
    }

    /// Opens `url` for reading (following no symlink at the last component is not required for reads).
    static func openForReading(_ url: URL, what: String) throws -> Int32 {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw error(errno, "could not open \(what) \(url.path)") }
        return fd
    }

    /// Writes all of `bytes` to `fd`, retrying on EINTR and short writes.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws {
        var offset = 0
        while offset < bytes.count {
            let written = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw error(errno, "could not write \(path)")
            }
            offset += written
        }
    }

    /// Reads up to `buffer.count` bytes, fewer only at the end of the file. Returns the count read.
    static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String) throws -> Int {
        var offset = 0
        while offset < buffer.count {
            let count = read(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if count < 0 {
                if errno == EINTR { continue }
                throw error(errno, "could not read \(path)")
            }
            if count == 0 { break }
            offset += count
        }
        return offset
    }

    /// Flushes the directory holding `url`, so a rename in it survives a crash. Best effort: a directory that cannot
    /// be opened for reading (some file systems) keeps the rename the file system made.
    static func syncDirectory(of url: URL) {
        let fd = open(url.deletingLastPathComponent().path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }
}
