#if canImport(Glibc) && !canImport(Darwin)
import Foundation
import Glibc
import Testing

/// A graphical polkit agent (polkit-gnome's) under Xvfb, through `scripts/polkit-dialog-screenshot.sh`, the script that
/// takes the DocC article's picture: the REAL polkitd on a private system bus in a mount namespace where the files
/// systemd-logind would write are planted (an active local x11 session 1 of a throwaway user) and the agent and
/// `keystone authenticate` run in that session's cgroup, so polkitd routes keystone's request to the GUI agent as on
/// a desktop. Nothing is typed into the GUI: the script fails unless the dialog's window is mapped and polkitd's
/// `BeginAuthentication` call to the agent carries the program's name and the reason.
enum PolkitGUIAgent {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/polkit-dialog-screenshot.sh").path

    /// Why the GUI agent cannot run here, or nil.
    static let unavailableReason: String? = {
        if let reason = PolkitDaemon.unavailableReason { return reason }
        let fm = FileManager.default
        for (tool, package) in [("/usr/lib/policykit-1-gnome/polkit-gnome-authentication-agent-1", "policykit-1-gnome"),
                                ("/usr/bin/Xvfb", "xvfb"), ("/usr/bin/xwininfo", "x11-utils"), ("/usr/bin/import", "imagemagick"),
                                ("/usr/bin/compare", "imagemagick"), ("/usr/bin/dbus-monitor", "dbus-bin"),
                                ("/usr/bin/setpriv", "util-linux"), ("/usr/bin/setsid", "util-linux")]
            where !fm.isExecutableFile(atPath: tool) {
            return "\(tool) not installed (apt-get install \(package))"
        }
        guard fm.isExecutableFile(atPath: script) else { return "\(script) is missing" }
        let mounts = (try? String(contentsOfFile: "/proc/mounts", encoding: .utf8)) ?? ""
        guard let hierarchy = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"].first(where: { mounts.contains(" \($0) cgroup2 ") }) else {
            return "no cgroup v2 hierarchy (the planted login session is found through /proc/PID/cgroup)"
        }
        guard access(hierarchy, W_OK) == 0 else {
            return "\(hierarchy) is not writable (the script makes the session's cgroup there): errno \(errno)"
        }
        return nil
    }()
}

@Suite("polkit GUI agent: the real polkitd and polkit-gnome under Xvfb, a planted login session (unshare -m)",
       .enabled(if: PolkitGUIAgent.unavailableReason == nil,
                Comment(rawValue: PolkitGUIAgent.unavailableReason ?? "polkitd, polkit-gnome, Xvfb and a cgroup v2 hierarchy are usable")))
struct PolkitGUIAgentTests {
    @Test("keystone without a terminal in a desktop session gets polkit-gnome's dialog, asked with the program's name and the reason")
    func dialogNamesProgramAndReason() async throws {
        let reason = "Open the vault \(getpid())"
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-polkit-gui-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let picture = directory.appendingPathComponent("dialog.png").path

        let (status, output) = try await blocking { () throws -> (Int32, String) in
            let process = Process()
            // The script's own waits are hang guards of at least 120 s each; timeout(1) bounds the whole at 600 s
            // (SIGTERM runs its teardown). Neither is a measure: the script waits for the dialog's own signals.
            process.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
            process.arguments = ["600", PolkitGUIAgent.script, picture]
            var environment = ProcessInfo.processInfo.environment
            environment["KEYSTONE"] = PolkitDaemon.keystone
            environment["REASON"] = reason
            environment["KEEP"] = nil
            process.environment = environment
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            process.standardInput = FileHandle.nullDevice
            try process.run()
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: data, as: UTF8.self))
        }
        #expect(status == 0, "\(output)")
        #expect(output.contains("the agent was asked: \"Authentication requested by keystone: \(reason)\""), "\(output)")
        let png = FileManager.default.contents(atPath: picture) ?? Data()
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "no PNG of the dialog: \(output)")
    }
}
#endif
