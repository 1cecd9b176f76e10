import Foundation
import KeychainEngine
import KeychainSealing
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The ownership and permission rules a keychain file and its directory must meet before Keystone trusts them,
/// as ssh refuses a private key others can read or write.
///
/// - The file (after following symbolic links) is a regular file owned by the current (effective) user, with no
///   permission bits for group or others (0600 or stricter). Root gets no exemption: a file planted by another
///   user is refused for root too.
/// - Its directory is owned by the current user or root, and is not writable by group or others unless it has
///   the sticky bit (as `/tmp`), where only the owner can rename or delete the file.
/// - Its SQLite companions (`-wal`, `-shm`), when present, are regular files owned by the current user: not
///   symbolic links or files planted by someone else.
///
/// A refusal is `errSecWrPerm` with a message naming the file, its owner and its mode, and the fix.
/// Keystone itself creates directories 0700 and files 0600, so its own files always pass.
package enum FileSafety {
    /// A reason a path is not trusted, for `keystone doctor`.
    package struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// The file or directory.
        package let path: String
        /// What is wrong, in words.
        package let reason: String
        /// A command that fixes it, when there is one.
        package let fix: String?
        package var description: String { fix.map { "\(path): \(reason) (fix: \($0))" } ?? "\(path): \(reason)" }
    }

    /// Checks the keychain file at `path` and its directory.
    ///
    /// - Throws: `EngineError` with `errSecWrPerm` for the first problem found; `errSecNoSuchKeychain` when
    ///   there is no file.
    package static func check(keychainAt path: String) throws {
        if let problem = try problems(keychainAt: path).first {
            KeystoneLog.logger.warning("refusing keychain file", metadata: ["path": "\(problem.path)", "reason": "\(problem.reason)"])
            throw EngineError(Status.wrPerm, "refusing to use the keychain \(path): \(problem.reason); \(problem.fix.map { "fix it with `\($0)`" } ?? "move it to a directory only you can write")")
        }
    }

    /// Checks a directory a keychain is to be created in.
    ///
    /// - Throws: `EngineError` with `errSecWrPerm` when it is owned by another user or writable by others.
    package static func check(directoryAt path: String) throws {
        if let problem = directoryProblem(path) {
            throw EngineError(Status.wrPerm, "refusing to keep a keychain in \(path): \(problem.reason)\(problem.fix.map { "; fix it with `\($0)`" } ?? "")")
        }
    }

    /// Every problem with the keychain file at `path` and its directory (empty when it is safe to use).
    ///
    /// - Throws: `EngineError` with `errSecNoSuchKeychain` when there is no file.
    package static func problems(keychainAt path: String) throws -> [Problem] {
        var info = stat()
        guard stat(path, &info) == 0 else { throw EngineError(Status.noSuchKeychain, "no keychain at \(path)") }
        let real = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        var found: [Problem] = []
        let me = geteuid()
        if (info.st_mode & S_IFMT) != S_IFREG {
            found.append(Problem(path: real, reason: "it is not a regular file", fix: nil))
        }
        if info.st_uid != me {
            found.append(Problem(path: real, reason: "it is owned by \(userName(info.st_uid)), not by you (\(userName(me)))", fix: nil))
        } else if info.st_mode & 0o077 != 0 {
            found.append(Problem(path: real, reason: "its mode is \(octal(info.st_mode)): group or others can read or write it",
                                 fix: "chmod 600 \(shellQuoted(real))"))
        }
        if let problem = directoryProblem((real as NSString).deletingLastPathComponent) { found.append(problem) }
        found += companionProblems(real)
        return found
    }

    /// Problems with SQLite's companion files next to the keychain file `real` (checked before SQLite opens it).
    static func companionProblems(_ real: String) -> [Problem] {
        var found: [Problem] = []
        let me = geteuid()
        // SQLite's companions, opened by name next to the file: in a shared (sticky) directory someone else could
        // plant them first, as a symbolic link or a file of theirs, and have the keychain's log written there.
        for suffix in ["-wal", "-shm"] {
            var companion = stat()
            guard lstat(real + suffix, &companion) == 0 else { continue }
            if (companion.st_mode & S_IFMT) != S_IFREG {
                found.append(Problem(path: real + suffix, reason: "the keychain's \(suffix.dropFirst()) file is not a regular file (a symbolic link?)", fix: nil))
            } else if companion.st_uid != me {
                found.append(Problem(path: real + suffix, reason: "the keychain's \(suffix.dropFirst()) file is owned by \(userName(companion.st_uid))", fix: nil))
            }
        }
        return found
    }

    static func directoryProblem(_ directory: String) -> Problem? {
        let dir = directory.isEmpty ? "." : directory
        var info = stat()
        guard stat(dir, &info) == 0 else { return nil }
        let me = geteuid()
        if info.st_uid != me && info.st_uid != 0 {
            return Problem(path: dir, reason: "the directory is owned by \(userName(info.st_uid)), not by you (\(userName(me))) or root", fix: nil)
        }
        let sticky = info.st_mode & mode_t(S_ISVTX) != 0
        if info.st_mode & 0o022 != 0 && !sticky {
            return Problem(path: dir, reason: "the directory's mode is \(octal(info.st_mode)): group or others can replace files in it",
                           fix: info.st_uid == me ? "chmod 700 \(shellQuoted(dir))" : nil)
        }
        return nil
    }

    private static func octal(_ mode: mode_t) -> String { "0" + String(mode & 0o7777, radix: 8) }

    private static func userName(_ uid: uid_t) -> String {
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return "uid \(uid)" }
        return "\(String(cString: name)) (uid \(uid))"
    }

    private static func shellQuoted(_ s: String) -> String {
        s.allSatisfy({ $0.isLetter || $0.isNumber || "/._-+".contains($0) }) ? s : "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
