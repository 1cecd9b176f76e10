#if os(Linux)
import Foundation
import Glibc
import Testing

/// Kills inside the defaults write itself, not between steps: real `UserDefaults` (swift-corelibs-foundation), which
/// rewrites its plist in place, in a child process (Tests/MigrationChild).
@Suite("Migration crashes inside the defaults write (child processes)")
struct MigrationCrashInsideWriteTests {
    typealias Sandbox = MigrationCrashTests.Sandbox

    /// The suite's plist under the sandbox's HOME, if UserDefaults wrote one.
    static func plist(_ sandbox: Sandbox) -> URL? {
        let home = sandbox.root.appendingPathComponent("home")
        let files = FileManager.default.enumerator(atPath: home.path)?.allObjects as? [String] ?? []
        return files.first { $0.contains("com.example.migration-test") && $0.hasSuffix(".plist") }.map { home.appendingPathComponent($0) }
    }

    /// Checks the state right after a kill (every secret has a copy, none a wrong one), then reruns the migration and
    /// checks it ended with one copy of each secret in the keychain, none in the defaults, the version recorded.
    /// - Returns: the keys of the secrets that had no copy after the kill (lost).
    static func lostSecrets(afterKillIn sandbox: Sandbox, context: String) throws -> [String] {
        let rerun = try sandbox.run(["inspect", "migrate", "inspect"])
        #expect(rerun.status == 0, "\(context): \(rerun.lines)")
        let blocks = MigrationCrashTests.inspections(rerun.lines)
        try #require(blocks.count == 2, "\(context): \(rerun.lines)")
        let (after, finished) = (blocks[0], blocks[1])
        var lost: [String] = []
        for key in MigrationCrashTests.values.keys.sorted() {
            let legacy = after["defaults \(key)"], stored = after["keychain \(key)"]
            #expect(legacy != "different" && stored?.hasSuffix("different") == false, "\(context): \(key)")
            if !(legacy == "equal" || stored == "1 equal") { lost.append(key) }
            #expect(finished["defaults \(key)"] == "absent", "\(context): \(key)")
            if !lost.contains(key) { #expect(finished["keychain \(key)"] == "1 equal", "\(context): \(key)") }
        }
        #expect(finished["version"] == "2", "\(context)")
        return lost
    }

    @Test("Killed inside the defaults write (real UserDefaults, the plist truncated, SIGXFSZ at the write): no secret lost, the rerun finishes",
          arguments: 1...3)
    func killedInsideTheWrite(removal: Int) throws {
        let sandbox = try Sandbox()
        let setup = try sandbox.run(["setup"])
        #expect(setup.status == 0, "\(setup.lines)")
        let before = try #require(Self.plist(sandbox), "UserDefaults wrote no plist in the sandbox")
        #expect(try before.resourceValues(forKeys: [.fileSizeKey]).fileSize ?? 0 > 0)

        let crashed = try sandbox.run(["migrate-xfsz:\(removal)"])
        // The kill came from the write itself: the process died by SIGXFSZ after the limit was set, and the plist,
        // rewritten in place, is empty (the hazard this test is about: every value of the suite is gone).
        #expect(crashed.lines.contains("limit set"), "\(crashed.lines)")
        #expect(crashed.status == SIGXFSZ && !crashed.lines.contains { $0.hasPrefix("migrated") }, "\(crashed.status) \(crashed.lines)")
        let after = try #require(Self.plist(sandbox))
        #expect(try after.resourceValues(forKeys: [.fileSizeKey]).fileSize == 0, "the kill did not land inside the write")

        let lost = try Self.lostSecrets(afterKillIn: sandbox, context: "killed in the write after removal \(removal)")
        #expect(lost.isEmpty, "secrets lost: \(lost)")
    }

    /// How a trial ends the child.
    enum Kill {
        /// Not killed: the run goes to its end.
        case never
        /// SIGKILL this many microseconds after the run's first checkpoint.
        case after(UInt32)
        /// SIGKILL as soon as the parent sees the defaults plist shorter than it was (truncated by a write in
        /// progress), or when the run ends.
        case whenTruncated
    }

    @Test("Random SIGKILLs of runs over a large defaults file (real UserDefaults, 20 trials: at random moments, and as soon as the plist is seen truncated): 0 secrets lost, every rerun finishes")
    func randomKills() throws {
        let child = try #require(MigrationCrashTests.childBinary, "build MigrationChild first (swift build)")
        var generator = SystemRandomNumberGenerator()
        // One setup (keychain file, defaults with 1 MiB of filler: a long write), copied for every trial.
        let template = try Sandbox()
        let setup = try template.run(["setup:1"])
        try #require(setup.status == 0, "\(setup.lines)")
        let templatePlist = try #require(Self.plist(template))
        let fullSize = try #require(try templatePlist.resourceValues(forKeys: [.fileSizeKey]).fileSize)

        func trial(_ kill: Kill) throws -> (sandbox: Sandbox, killed: Bool, elapsed: UInt64) {
            let sandbox = try Sandbox()
            try FileManager.default.removeItem(at: sandbox.root.appendingPathComponent("home"))
            for name in try FileManager.default.contentsOfDirectory(atPath: template.root.path) {
                try FileManager.default.copyItem(at: template.root.appendingPathComponent(name), to: sandbox.root.appendingPathComponent(name))
            }
            let plist = try #require(Self.plist(sandbox)).path
            let process = Process()
            process.executableURL = URL(fileURLWithPath: child)
            process.arguments = ["migrate"]
            process.environment = sandbox.environment
            let input = Pipe(), output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            try input.fileHandleForWriting.close()
            // Wait for the first checkpoint: the run has started.
            var seen = Data()
            while !seen.contains(UInt8(ascii: "\n")) {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                seen += chunk
            }
            let started = DispatchTime.now().uptimeNanoseconds
            switch kill {
            case .never:
                break
            case .after(let delay):
                usleep(delay)
                Glibc.kill(process.processIdentifier, SIGKILL)
            case .whenTruncated:
                var info = stat()
                while process.isRunning {
                    if stat(plist, &info) == 0 && Int(info.st_size) < fullSize {
                        Glibc.kill(process.processIdentifier, SIGKILL)
                        break
                    }
                }
            }
            _ = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let killed = process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL
            return (sandbox, killed, DispatchTime.now().uptimeNanoseconds - started)
        }
        // Calibrate: how long a whole run takes here, from its first checkpoint to its end. Only the kill moments are
        // drawn from it; no assertion depends on time.
        let calibration = try trial(.never)
        #expect(!calibration.killed)
        let span = max(UInt32(min(calibration.elapsed / 1000, 2_000_000)), 1000)

        var lost: [String] = []
        var kills = 0
        for index in 0..<20 {
            let run = try trial(index.isMultiple(of: 2) ? .after(UInt32.random(in: 0...span, using: &generator)) : .whenTruncated)
            if run.killed { kills += 1 }
            lost += try Self.lostSecrets(afterKillIn: run.sandbox, context: "trial \(index)").map { "trial \(index): \($0)" }
        }
        #expect(kills > 0, "no trial was killed")
        #expect(lost.isEmpty, "secrets lost: \(lost)")
    }
}
#endif
