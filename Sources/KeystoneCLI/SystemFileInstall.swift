import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Writes `contents` to `path` (a file of `directory`, 0644) atomically, as `install-pam` and `install-polkit` install
/// system configuration: a temporary file in the same directory, written, flushed, then renamed over `path`, so a
/// reader (PAM, polkitd) sees the old file or the new one, never half of one. Prints `installed PATH`.
///
/// - Throws: `MessageFailure` (exit 1) naming `verb` and the reason (with "run it as root" when not root).
func installSystemFile(_ contents: String, at path: String, in directory: String, verb: String) throws {
    let temporary = directory + "/.keystone.\(getpid()).tmp"
    let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    guard fd >= 0 else {
        let reason = String(cString: strerror(errno))
        throw MessageFailure(message: "keystone: \(verb): cannot write \(directory): \(reason)\(geteuid() != 0 ? " (run it as root)" : "")", exitCode: 1)
    }
    let bytes = Array(contents.utf8)
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    fchmod(fd, 0o644)
    let synced = fsync(fd) == 0
    close(fd)
    guard written == bytes.count, synced, rename(temporary, path) == 0 else {
        let reason = String(cString: strerror(errno))
        unlink(temporary)
        throw MessageFailure(message: "keystone: \(verb): cannot write \(path): \(reason)", exitCode: 1)
    }
    writeOut("installed \(path)\n")
}
