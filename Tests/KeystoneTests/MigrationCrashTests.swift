#if os(Linux)
import Foundation
import Glibc
import Testing

/// The crash tests of the migrations: a child process (Tests/MigrationChild) runs them against a real keychain file
/// and real `UserDefaults`, and dies by SIGKILL at a chosen step; a second child finishes the job.
@Suite("Migration crashes (child processes)")
struct MigrationCrashTests {
    /// The child, built next to the test bundle by `swift build`.
    static var childBinary: String? {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("MigrationChild").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return nil
    }

    /// The checkpoints of a full run of the child's plan (the plan of `DefaultsPlan`): 3 steps of 3 copy checkpoints,
    /// 3 removals, the version set, the one write.
    static let checkpointCount = 14

    /// The values the old app kept in its defaults (given to the child on standard input, never as arguments).
    static let values = ["auth_token": "tok-sup3r-s3cret", "refresh_blob": "refresh-sup3r-s3cret", "smtp_password": "smtp-sup3r-s3cret"]

    /// A private HOME (UserDefaults persist under $XDG_CONFIG_HOME there), keychain file and marker.
    final class Sandbox {
        let root: URL
        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-migration-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: root.appendingPathComponent("home/.config"), withIntermediateDirectories: true)
        }
        deinit { try? FileManager.default.removeItem(at: root) }

        var environment: [String: String] {
            let home = root.appendingPathComponent("home").path
            return [
                "HOME": home,
                "XDG_CONFIG_HOME": home + "/.config",
                "XDG_DATA_HOME": home + "/.local/share",
                "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
                "KEYSTONE_KEYCHAIN": root.appendingPathComponent("default.keychain-db").path,
                "MIG_KEYCHAIN": root.appendingPathComponent("app.keychain-db").path,
                "MIG_SUITE": "com.example.migration-test",
                "MIG_MARKER": home + "/.local/share/com.example.app/keystone-install-marker",
            ]
        }

        struct Run {
            let lines: [String]
            let killed: Bool
            let status: Int32
        }

        /// Runs the child with `commands`, the values on standard input; waits for it to end (by exit or signal).
        ///
        /// - Parameters:
        ///   - launcher: a program and its arguments the child runs under (`setpriv` to run as another user).
        ///   - overrides: environment variables replacing the sandbox's.
        func run(_ commands: [String], launcher: [String] = [], overrides: [String: String] = [:]) throws -> Run {
            let process = Process()
            let child = try #require(MigrationCrashTests.childBinary, "build MigrationChild first (swift build)")
            process.executableURL = URL(fileURLWithPath: launcher.first ?? child)
            process.arguments = launcher.isEmpty ? commands : Array(launcher.dropFirst()) + [child] + commands
            process.environment = environment.merging(overrides) { $1 }
            let input = Pipe(), output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: MigrationCrashTests.values))
            try input.fileHandleForWriting.close()
            // EOF when the child is gone: its end is the signal, no clock.
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
            return Run(lines: lines, killed: process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL,
                       status: process.terminationStatus)
        }
    }

    /// The `inspect` blocks of a run: one dictionary per block, "defaults KEY" / "keychain KEY" / "version" / "other theme" → the rest.
    static func inspections(_ lines: [String]) -> [[String: String]] {
        var blocks: [[String: String]] = []
        for line in lines {
            if line == "inspect" { blocks.append([:]); continue }
            let words = line.split(separator: " ").map(String.init)
            guard !blocks.isEmpty, let first = words.first, ["defaults", "keychain", "version", "other"].contains(first) else { continue }
            let key = first == "version" ? "version" : "\(first) \(words[1])"
            let start = first == "version" ? 1 : 2
            blocks[blocks.count - 1][key] = words[start...].joined(separator: " ")
        }
        return blocks
    }

    @Test("A full run of the child passes every checkpoint, moves every secret and persists the defaults in the sandbox only")
    func fullRun() throws {
        let sandbox = try Sandbox()
        let run = try sandbox.run(["setup", "migrate", "inspect"])
        #expect(run.status == 0, "\(run.lines)")
        #expect(run.lines.filter { $0.hasPrefix("checkpoint ") }.count == Self.checkpointCount)
        #expect(run.lines.contains("migrated 0 2"))
        let state = try #require(Self.inspections(run.lines).first)
        for key in Self.values.keys {
            #expect(state["defaults \(key)"] == "absent")
            #expect(state["keychain \(key)"] == "1 equal")
        }
        #expect(state["version"] == "2" && state["other theme"] == "present")
        // UserDefaults wrote under the sandbox's HOME, nowhere else.
        let files = FileManager.default.enumerator(atPath: sandbox.root.appendingPathComponent("home").path)?.allObjects as? [String] ?? []
        #expect(files.contains { $0.contains("com.example.migration-test") }, "\(files)")
        // No secret is printed.
        #expect(!run.lines.joined().contains("sup3r-s3cret"))
    }

    @Test("Killed (SIGKILL) at any checkpoint: never zero copies right after; a rerun ends with one copy of each secret, none in the defaults, the version recorded",
          arguments: 0..<Self.checkpointCount)
    func killedAtCheckpoint(index: Int) throws {
        let sandbox = try Sandbox()
        let crashed = try sandbox.run(["setup", "migrate:\(index)"])
        #expect(crashed.killed, "\(crashed.lines)")
        #expect(crashed.lines.last?.hasPrefix("checkpoint \(index) ") == true, "\(crashed.lines)")

        let rerun = try sandbox.run(["inspect", "migrate", "inspect"])
        #expect(rerun.status == 0, "\(rerun.lines)")
        let blocks = Self.inspections(rerun.lines)
        try #require(blocks.count == 2)
        let (after, finished) = (blocks[0], blocks[1])
        for key in Self.values.keys {
            let legacy = after["defaults \(key)"], stored = after["keychain \(key)"]
            #expect(legacy != "different" && stored?.hasSuffix("different") == false)
            #expect(legacy == "equal" || stored == "1 equal", "\(key) has no copy after a kill at \(crashed.lines.last ?? "")")
            #expect(stored == "0 absent" || stored == "1 equal")
            #expect(finished["defaults \(key)"] == "absent")
            #expect(finished["keychain \(key)"] == "1 equal")
        }
        #expect(finished["version"] == "2" && finished["other theme"] == "present")
    }

    @Test("Killed between the wipe and the marker: the next launch wipes again (nothing more), writes the marker; the one after is not fresh")
    func freshInstallKilledBeforeMarker() throws {
        let sandbox = try Sandbox()
        let crashed = try sandbox.run(["fresh-setup", "fresh:kill"])
        #expect(crashed.killed && crashed.lines.last == "checkpoint marker", "\(crashed.lines)")
        let rerun = try sandbox.run(["fresh-inspect", "fresh", "fresh-inspect", "fresh"])
        #expect(rerun.status == 0, "\(rerun.lines)")
        #expect(rerun.lines == ["app 0", "other 1", "inet 1", "marker no", "result wiped 0 items",
                                "app 0", "other 1", "inet 1", "marker yes", "result notFresh"])
    }

    @Test("A daemon user whose HOME does not exist: every launch defers the wipe and deletes nothing, so what it saves survives")
    func freshInstallWithoutHome() throws {
        let sandbox = try Sandbox()
        // As root, HOME could be created: run the child as nobody (setpriv), who cannot create a directory in /.
        var launcher: [String] = []
        if getuid() == 0 {
            let setpriv = try #require(["/usr/bin/setpriv", "/bin/setpriv"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                       "setpriv is needed to run the child as another user")
            launcher = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
            try FileManager.default.setAttributes([.ownerAccountID: 65534, .groupOwnerAccountID: 65534], ofItemAtPath: sandbox.root.path)
        }
        let home = "/nonexistent-keystone-\(UUID().uuidString)"
        let overrides = ["HOME": home, "XDG_CONFIG_HOME": home + "/.config", "XDG_DATA_HOME": home + "/.local/share",
                         "MIG_MARKER": home + "/.local/share/com.example.app/keystone-install-marker"]
        let setup = try sandbox.run(["fresh-setup"], launcher: launcher, overrides: overrides)
        #expect(setup.status == 0, "\(setup.lines)")
        let first = try sandbox.run(["fresh", "fresh-inspect", "fresh", "fresh-inspect"], launcher: launcher, overrides: overrides)
        #expect(first.status == 0, "\(first.lines)")
        #expect(first.lines.count == 10 && first.lines[0].hasPrefix("result deferred: ") && first.lines[0].contains(home), "\(first.lines)")
        #expect(Array(first.lines[1...4]) == ["app 2", "other 1", "inet 1", "marker no"], "\(first.lines)")
        #expect(Array(first.lines[6...9]) == ["app 2", "other 1", "inet 1", "marker no"], "\(first.lines)")
        #expect(!FileManager.default.fileExists(atPath: home))
    }

    @Test("The UserDefaults install marker is absent, then written and synchronized: another process sees it")
    func userDefaultsMarker() throws {
        let sandbox = try Sandbox()
        let first = try sandbox.run(["ud-marker", "ud-marker-write", "ud-marker"])
        #expect(first.lines == ["udmarker no", "udmarker yes"], "\(first.lines)")
        let second = try sandbox.run(["ud-marker"])
        #expect(second.lines == ["udmarker yes"], "\(second.lines)")
    }
}
#endif
