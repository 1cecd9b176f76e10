#if canImport(Glibc)
import Foundation
import Glibc

/// A shell that cleans up after a test fixture when the test process dies without doing it itself.
///
/// The shell's standard input is the read end of a pipe whose write end only this process holds: the kernel closes
/// it when this process exits, however it exits (a crash, SIGKILL), and the script, reading to end of file, then
/// acts (kills the fixture's daemons, removes its directory). Both ends are close-on-exec (`pipe2(O_CLOEXEC)`, which
/// Swift's Glibc module hides, so it is found with `dlsym`): Foundation's `Process` hands the read end to the shell
/// as its standard input (dup2 clears the flag there), and no other child inherits the write end, which would keep
/// the shell from ever seeing end of file.
///
/// Used by the fprintd fixture (SystemAuthenticationTests) and the swtpm fixture (KeychainTPMTests); each passes its
/// own script.
public struct ProcessWatchdog: Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The shell.
    public let process: Process
    /// The write end of the shell's standard input.
    public let input: FileHandle

    /// Starts `/bin/sh -c script name arguments…` (PATH `/usr/bin:/bin`, output discarded).
    ///
    /// - Throws: ``Failure`` when the pipe or the shell cannot be made.
    public static func start(script: String, name: String, arguments: [String]) throws -> ProcessWatchdog {
        typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "pipe2") else { throw Failure(description: "no pipe2 in libc") }
        var fds: [Int32] = [-1, -1]
        guard unsafeBitCast(symbol, to: Pipe2.self)(&fds, O_CLOEXEC) == 0 else {
            throw Failure(description: "pipe2 failed: errno \(errno)")
        }
        let readEnd = FileHandle(fileDescriptor: fds[0], closeOnDealloc: true)
        let writeEnd = FileHandle(fileDescriptor: fds[1], closeOnDealloc: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script, name] + arguments
        process.environment = ["PATH": "/usr/bin:/bin"]
        process.standardInput = readEnd
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch {
            try? readEnd.close()
            try? writeEnd.close()
            throw Failure(description: "cannot run the watchdog \(name): \(error)")
        }
        try? readEnd.close()
        return ProcessWatchdog(process: process, input: writeEnd)
    }

    /// Writes one line to the shell (a pid to kill, for example).
    public func send(_ line: String) { try? input.write(contentsOf: Data((line + "\n").utf8)) }

    /// Sends SIGKILL to the shell: it never acts after this.
    public func signal() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// Kills the shell without letting it act, waits for it, and closes its input. Call it before ending the fixture's
    /// processes yourself, so that the shell never acts on pids that exited and were reused.
    public func end() {
        signal()
        process.waitUntilExit()
        try? input.close()
    }
}
#endif
