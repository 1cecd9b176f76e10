import Foundation
import KeychainEngine
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The tool's settings files (`default-keychain`, `search-list` in ``ToolConfig/directory``): they choose which
/// keychain every later command uses, so whoever can write them can redirect the user's secrets to a keychain of
/// their choosing.
///
/// - **Writing**: the directory is created with mode 0700 when it does not exist (whatever the umask); a file is
///   written to a temporary file of mode 0600 in the same directory, flushed to disk (`fsync`), renamed over the old
///   one, and the directory flushed: it is always whole (the old content or the new one) and 0600, whatever the umask.
/// - **Trust**: a directory not owned by this user, or that its group or others can write, is refused:
///   writing fails (errSecWrPerm, with the `chmod` to run) and what it holds is ignored, with a warning on standard
///   error. A file is ignored when it is not a regular file owned by this user (a symbolic link, another user's
///   file), or when others can both reach it and write it.
///
/// Decision: a pre-existing loose directory is refused, not tightened: someone else may already have written
/// there, and only the user can tell. The fix (`chmod 700 DIR` after checking its files) is in the message.
enum SettingsFiles {
    /// The largest settings file read (a search list of a few thousand keychains).
    static let maximumSize = 1 << 20

    /// Why nobody but this user can be trusted to have written `directory`'s files: nil when it is safe (or absent).
    static func directoryProblem(_ directory: String) -> String? {
        var info = stat()
        guard stat(directory, &info) == 0 else { return nil }
        guard (info.st_mode & S_IFMT) == S_IFDIR else { return "\(directory) is not a directory" }
        let mode = String(format: "%04o", Int(info.st_mode) & 0o7777)
        if info.st_uid != geteuid() {
            return "\(directory) belongs to uid \(info.st_uid), not to you (uid \(geteuid()))"
        }
        if info.st_mode & (S_IWGRP | S_IWOTH) != 0 {
            return "\(directory) has mode \(mode): its group or other users can write it, so anyone of them could have replaced the settings in it"
        }
        return nil
    }

    /// The fix for ``directoryProblem(_:)``.
    static func directoryFix(_ directory: String) -> String {
        "check the files in \(directory), then run `chmod 700 \(directory)` (or remove the directory)"
    }

    /// The non-empty lines of `directory/name`; nil lines and a warning when the file cannot be trusted; nothing when
    /// it does not exist.
    static func load(_ name: String, in directory: String) -> (lines: [String], warning: String?) {
        let path = directory + "/" + name
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT || errno == ENOTDIR { return ([], nil) }
            if errno == ELOOP { return ([], "ignoring \(path): it is a symbolic link; remove it and set the setting again") }
            return ([], "ignoring \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        if let problem = directoryProblem(directory) {
            return ([], "ignoring \(path): \(problem); \(directoryFix(directory))")
        }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            return ([], "ignoring \(path): it is not a regular file; remove it and set the setting again")
        }
        guard info.st_uid == geteuid() else {
            return ([], "ignoring \(path): it belongs to uid \(info.st_uid), not to you; remove it and set the setting again")
        }
        var directoryInfo = stat()
        let othersReachIt = stat(directory, &directoryInfo) == 0 && directoryInfo.st_mode & (S_IXGRP | S_IXOTH) != 0
        if othersReachIt && info.st_mode & (S_IWGRP | S_IWOTH) != 0 {
            return ([], "ignoring \(path): its mode is \(String(format: "%04o", Int(info.st_mode) & 0o7777)) and others can reach it, so anyone could have rewritten it; check it, then run `chmod 600 \(path)`")
        }
        guard info.st_size <= off_t(maximumSize) else { return ([], "ignoring \(path): it is larger than \(maximumSize) bytes") }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var count = 0
        while count < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            count += n
        }
        let text = String(decoding: bytes[..<min(count, maximumSize)], as: UTF8.self)
        return (text.split(separator: "\n").map(String.init).filter { !$0.isEmpty }, nil)
    }

    /// Why a settings file could not be written.
    struct WriteFailure: Error {
        let reason: String
    }

    /// Writes `lines` to `directory/name`: 0600 whatever the umask, atomically (see the type's summary).
    ///
    /// - Throws: ``WriteFailure`` saying why: the directory cannot be created, is not safe
    ///   (``directoryProblem(_:)``), or the file cannot be written.
    static func store(_ name: String, _ lines: [String], in directory: String) throws(WriteFailure) {
        try makeDirectory(directory)
        if let problem = directoryProblem(directory) {
            throw WriteFailure(reason: "\(problem): the setting was not written; \(directoryFix(directory))")
        }
        let path = directory + "/" + name
        var template = Array((directory + "/." + name + ".XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw WriteFailure(reason: "cannot write in \(directory): \(String(cString: strerror(errno)))") }
        let temporary = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var written = false
        defer {
            if !written { unlink(temporary) }
        }
        let bytes = Array((lines.joined(separator: "\n") + "\n").utf8)
        var offset = 0
        var failure: String?
        if fchmod(fd, 0o600) != 0 { failure = "fchmod: \(String(cString: strerror(errno)))" }
        while failure == nil && offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { failure = "write: \(String(cString: strerror(errno)))" } else { offset += n }
        }
        if failure == nil && fsync(fd) != 0 { failure = "fsync: \(String(cString: strerror(errno)))" }
        close(fd)
        if let failure { throw WriteFailure(reason: "cannot write \(path): \(failure)") }
        guard rename(temporary, path) == 0 else {
            throw WriteFailure(reason: "cannot replace \(path): \(String(cString: strerror(errno)))")
        }
        written = true
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }

    /// Creates `directory` with mode 0700 (whatever the umask) when it does not exist; its parents as the umask
    /// makes them (they are the user's `~/.config` or `$XDG_CONFIG_HOME`).
    private static func makeDirectory(_ directory: String) throws(WriteFailure) {
        var info = stat()
        if stat(directory, &info) == 0 { return }
        let parent = (directory as NSString).deletingLastPathComponent
        if !parent.isEmpty {
            do {
                try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
            } catch {
                throw WriteFailure(reason: "cannot create \(parent): \(error.localizedDescription)")
            }
        }
        if mkdir(directory, 0o700) == 0 {
            chmod(directory, 0o700)  // the umask may have taken bits the owner needs
        } else if errno != EEXIST {
            throw WriteFailure(reason: "cannot create \(directory): \(String(cString: strerror(errno)))")
        }
    }

    /// Warnings already printed by this process (each once).
    private static let warned = Locked<Set<String>>([])

    /// Prints `warning` on standard error once per process.
    static func warn(_ warning: String) {
        if warned.withLock({ $0.insert(warning).inserted }) { writeErr("keystone: warning: \(warning)\n") }
    }
}
