import Foundation

/// The program an authentication is for, as every prompt names it: the terminal's first line, the fingerprint
/// reader's instruction, the polkit dialog's message.
///
/// Decision: the name is the last path component of `/proc/self/exe` (the executable the kernel runs, with
/// ` (deleted)` removed when the file was replaced since), not of `CommandLine.arguments[0]`, which whoever starts
/// the process chooses freely (`exec -a`). Without `/proc` (a container without it) it falls back to `arguments[0]`'s
/// last component, then to “a program”.
///
/// - Important: This names the program to the person; it proves nothing. Code running as the same user can start any
///   executable (or copy one under another name), so the name is a label, never an identity: who may read an item is
///   decided by the keychain's access control, not by this name.
public enum RequestingProgram {
    /// The executable's name, computed once.
    public static let name: String = resolveName()

    /// The first thing every prompt shows: who asks, and why.
    ///
    /// `Authentication requested by <name>: <reason>`, or `Authentication requested by <name>.` when `reason` is nil
    /// or blank (the reason is the app's `localizedReason` / `kSecUseOperationPrompt`, shown as given).
    public static func headline(reason: String?) -> String {
        let trimmed = reason?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        return trimmed.isEmpty ? "Authentication requested by \(name)." : "Authentication requested by \(name): \(trimmed)"
    }

    static func resolveName() -> String {
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            var path = path
            if path.hasSuffix(" (deleted)") { path.removeLast(" (deleted)".count) }
            let last = URL(fileURLWithPath: path).lastPathComponent
            if !last.isEmpty, last != "/" { return last }
        }
        if let first = CommandLine.arguments.first {
            let last = URL(fileURLWithPath: first).lastPathComponent
            if !last.isEmpty, last != "/" { return last }
        }
        return "a program"
    }
}
