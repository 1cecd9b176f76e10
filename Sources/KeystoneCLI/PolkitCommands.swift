import ArgumentParser
import Foundation
#if !canImport(Darwin)
import SystemAuthentication
#endif
#if canImport(Glibc)
import Glibc
#endif

// `install-polkit`: Keystone's polkit action, through which LAContext asks a desktop app's user for the password when
// the app has no terminal.

/// The verbs of this file, present when this keystone has the SystemAuthentication backend (on Linux).
var polkitVerbs: [any ParsableCommand.Type] {
    #if !canImport(Darwin)
    return [InstallPolkit.self]
    #else
    return []
    #endif
}

#if !canImport(Darwin)
struct InstallPolkit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "install-polkit",
        abstract: "Install Keystone's polkit action, so LAContext in a desktop app without a terminal asks through the desktop's polkit agent.",
        discussion: """
        Writes ACTIONDIR/io.github.keystone.authenticate.policy (default /usr/share/polkit-1/actions, mode 0644): \
        auth_self, asked every time. --owner USER (repeatable) names users whose programs may show their own name \
        and reason in the dialog (polkit's org.freedesktop.policykit.owner; root always may); without it the dialog \
        shows the action's own message. An owner's programs can also put a Keystone dialog in front of other users' \
        sessions: name only the desktop's own users. Needs root. --print shows the file and writes nothing.
        """)
    @Flag(help: "Print the action file instead of writing it.") var print = false
    @Option(name: .customLong("owner"), help: "A user whose programs may name themselves and the reason in the dialog (repeatable).")
    var owners: [String] = []
    @Option(name: .customLong("action-dir"), help: "polkit's actions directory.") var actionDirectory = "/usr/share/polkit-1/actions"

    mutating func run() throws {
        for owner in owners where owner.isEmpty || owner.contains(where: { $0 == " " || $0 == "\0" || $0 == ":" }) {
            throw UsageFailure(message: "keystone: install-polkit: invalid user name \"\(owner)\"")
        }
        let contents = PolkitAuthentication.actionFileContents(owners: owners)
        if print { writeOut(contents); return }
        let path = actionDirectory + "/\(PolkitConfiguration.defaultActionID).policy"
        if (try? String(contentsOfFile: path, encoding: .utf8)) == contents { writeOut("\(path) is already installed\n"); return }
        try installSystemFile(contents, at: path, in: actionDirectory, verb: "install-polkit")
    }
}
#endif
