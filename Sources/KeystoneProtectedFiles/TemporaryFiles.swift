import Foundation
import Keystone

// The temporary files of atomic writes (AtomicFileWriter): their names, the lock a live writer holds on its own,
// and the removal of those an interrupted writer left behind.
//
// A writer's temporary file is `.<target name>.<random decimal UInt64>.tmp`, in the target's directory. A writer
// killed before its rename (SIGKILL, a power cut, a crash) leaves it there; nothing else would ever remove it, and
// an interrupted `read(at:to:)` leaves plaintext in it.
//
// Decision (live writers): every writer holds an exclusive flock(2) on its temporary file from just after creating
// it until after the rename (or the removal), and removal needs that lock: a file is removed only when
// flock(LOCK_EX|LOCK_NB) succeeds on it, so a temporary file another process (or thread) is writing right now is
// never removed. The lock dies with its process, so the file of a killed writer is removable at once. There is an
// instant between a writer's open(2) and its flock(2): a remover that wins it removes the new file, and the writer,
// which checks after locking that its path still names its file, starts again under another name; the writer never
// waits for a lock (a held lock makes it pick another name), so no one can make a writer hang by holding one.
// Where flock is not supported (some network file systems), the writer goes on unlocked and nothing there is ever
// removed (a lock that cannot be taken is never taken as "stale").
//
// Decision (what is removed): only directory entries whose name matches the pattern exactly (for a target:
// `.<its name>.` + 1 to 20 digits + `.tmp`), that are regular files (never followed: O_NOFOLLOW), owned by the
// effective user, and unlocked. Symlinks, directories, other users' files and other names are left and reported.

/// The temporary files of protected-file writes.
enum TemporaryFiles {
    /// The temporary name for a write to `targetName`.
    static func name(for targetName: String, random: UInt64) -> String { ".\(targetName).\(random).tmp" }

    /// The target name of a temporary file name, or nil when `name` is not one (`.<target>.<1-20 digits>.tmp`).
    static func targetName(of name: String) -> String? {
        let bytes = Array(name.utf8)
        let suffix = Array(".tmp".utf8)
        guard bytes.count >= 1 + 1 + 1 + 1 + suffix.count, bytes.first == UInt8(ascii: "."), bytes.suffix(suffix.count).elementsEqual(suffix) else { return nil }
        var end = bytes.count - suffix.count          // one past the last digit
        var start = end
        while start > 0, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[start - 1]) { start -= 1 }
        let digits = end - start
        guard (1...20).contains(digits), start >= 3, bytes[start - 1] == UInt8(ascii: ".") else { return nil }
        end = start - 1                                // the dot before the digits
        guard end > 1 else { return nil }
        return String(decoding: bytes[1..<end], as: UTF8.self)
    }

    /// What an entry matching the pattern is.
    enum Inspection {
        case stale(size: Int64)
        case inUse(size: Int64)
        case otherOwner(uid: UInt32, size: Int64)
        case notRegularFile
        case undetermined(String)
    }

    /// Opens `path` without following a symlink and without blocking (a FIFO), and tells what it is; when `remove`
    /// and it is stale, removes it while holding its lock.
    static func inspect(_ path: String, remove: Bool) -> (Inspection, removed: Bool) {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if code == ELOOP || code == ENXIO || code == EISDIR { return (.notRegularFile, false) }
            return (.undetermined(String(cString: strerror(code))), false)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return (.undetermined(String(cString: strerror(errno))), false) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { return (.notRegularFile, false) }
        let size = Int64(info.st_size)
        guard info.st_uid == geteuid() else { return (.otherOwner(uid: UInt32(info.st_uid), size: size), false) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            if code == EWOULDBLOCK { return (.inUse(size: size), false) }
            return (.undetermined("its lock cannot be tested: \(String(cString: strerror(code)))"), false)
        }
        // Locked by us: no writer holds it. The lock is released when fd is closed.
        guard remove else { return (.stale(size: size), false) }
        var current = stat()
        guard lstat(path, &current) == 0, current.st_dev == info.st_dev, current.st_ino == info.st_ino else {
            return (.stale(size: size), false)   // renamed or removed meanwhile: not ours to touch
        }
        return (.stale(size: size), unlink(path) == 0)
    }

    /// The names in `directory` (one readdir pass; "." and ".." left out).
    ///
    /// - Throws: `KeychainError` (errSecItemNotFound, errSecWrPerm or errSecIO) when it cannot be listed.
    static func names(in directory: String) throws -> [String] {
        guard let dir = opendir(directory) else { throw FileIO.error(errno, "could not list \(directory)") }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            // Names that are not UTF-8 are skipped: no target name (a Swift String) has such a temporary name.
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw -> String? in
                let bytes = raw.bindMemory(to: UInt8.self)
                let length = bytes.firstIndex(of: 0) ?? bytes.count
                return String(validating: bytes[0..<length], as: UTF8.self)
            }
            if let name, name != ".", name != ".." { names.append(name) }
        }
        return names
    }

    /// Removes the stale temporary files of `target`, best effort (what cannot be listed or removed stays).
    static func removeStale(of target: URL) {
        _ = try? ProtectedFiles.removeStaleTemporaryFiles(of: target)
    }
}

extension ProtectedFiles {
    /// A temporary file of an atomic write (`.<target name>.<random>.tmp`), found next to its target.
    ///
    /// Keystone's atomic writes (protected files, `ProtectedFiles.read(at:identifier:to:)`'s output) go through such a
    /// file. A writer that is killed or loses power before its final rename leaves it behind: a sealed file's, or for
    /// `ProtectedFiles.read(at:identifier:to:)` plaintext. The next write of the same target removes the stale ones.
    public struct TemporaryFile: Sendable, Hashable {
        /// Whether the file can be removed.
        public enum State: String, Sendable, Hashable, CaseIterable {
            /// Left by an interrupted write (no writer holds its lock): removable, and removed by the next write of
            /// its target.
            case stale
            /// A writer is writing it right now (it holds the file's lock): never removed.
            case inUse
            /// Owned by another user: never removed.
            case otherOwner
            /// A symlink, directory or other non-regular file under a temporary file's name: never followed or removed.
            case notRegularFile
            /// Its lock could not be tested (a file system without flock(2), a permission): never removed.
            case undetermined
        }

        /// The temporary file.
        public let url: URL
        /// The name of the file the write was replacing (in the same directory).
        public let targetName: String
        /// Whether it can be removed.
        public let state: State
        /// Its size in bytes, when it could be told.
        public let size: Int64?
        /// Why its state is ``State/undetermined``, else nil.
        public let note: String?
    }

    /// The temporary files of atomic writes in `directory`, stale or not. Changes nothing (each file's lock is
    /// tested and released at once).
    ///
    /// - Throws: `KeychainError` with `errSecItemNotFound` (-25300), `errSecWrPerm` (-61) or `errSecIO` (-36) when
    ///   the directory cannot be listed.
    public static func temporaryFiles(in directory: URL) throws(KeychainError) -> [TemporaryFile] {
        try scan(directory, target: nil, remove: false).found
    }

    /// Removes the stale temporary files of `target` that interrupted writes left (the ones ``temporaryFiles(in:)``
    /// reports as ``TemporaryFile/State/stale`` for that target). Every write of `target` does this first.
    ///
    /// Only names of the exact form `.<target's name>.<digits>.tmp`, regular files (never followed), owned by the
    /// effective user, that no writer holds locked: a concurrent writer's live temporary file is never removed.
    ///
    /// - Returns: the files removed.
    /// - Throws: `KeychainError` when the directory cannot be listed (as ``temporaryFiles(in:)``).
    @discardableResult
    public static func removeStaleTemporaryFiles(of target: URL) throws(KeychainError) -> [URL] {
        try scan(target.deletingLastPathComponent(), target: target.lastPathComponent, remove: true).removed
    }

    /// Removes every stale temporary file in `directory`, whatever its target, under the same rules as
    /// ``removeStaleTemporaryFiles(of:)``.
    ///
    /// - Important: Any regular file of yours named `.<name>.<digits>.tmp` that no process holds locked counts as
    ///   stale: use this on directories holding Keystone's files.
    /// - Returns: the files removed.
    /// - Throws: `KeychainError` when the directory cannot be listed (as ``temporaryFiles(in:)``).
    @discardableResult
    public static func removeStaleTemporaryFiles(in directory: URL) throws(KeychainError) -> [URL] {
        try scan(directory, target: nil, remove: true).removed
    }

    private static func scan(_ directory: URL, target: String?, remove: Bool) throws(KeychainError) -> (found: [TemporaryFile], removed: [URL]) {
        let names: [String]
        do { names = try TemporaryFiles.names(in: directory.path) } catch { throw KeychainError(converting: error) }
        var found: [TemporaryFile] = [], removed: [URL] = []
        for name in names.sorted() {
            guard let targetName = TemporaryFiles.targetName(of: name), target == nil || target == targetName else { continue }
            let url = directory.appendingPathComponent(name)
            let (inspection, wasRemoved) = TemporaryFiles.inspect(url.path, remove: remove)
            if wasRemoved { removed.append(url); continue }
            let file: TemporaryFile
            switch inspection {
            case .stale(let size): file = TemporaryFile(url: url, targetName: targetName, state: .stale, size: size, note: nil)
            case .inUse(let size): file = TemporaryFile(url: url, targetName: targetName, state: .inUse, size: size, note: nil)
            case .otherOwner(_, let size): file = TemporaryFile(url: url, targetName: targetName, state: .otherOwner, size: size, note: nil)
            case .notRegularFile: file = TemporaryFile(url: url, targetName: targetName, state: .notRegularFile, size: nil, note: nil)
            case .undetermined(let why): file = TemporaryFile(url: url, targetName: targetName, state: .undetermined, size: nil, note: why)
            }
            found.append(file)
        }
        if !removed.isEmpty { FileIO.syncDirectory(of: removed[0]) }
        return (found, removed)
    }
}
