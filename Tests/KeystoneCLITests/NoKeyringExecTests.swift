import Foundation
import Testing

/// The `no-keyring-exec` helper (Tests/NoKeyringExec): a command run under it sees the kernel keyring refused with
/// EPERM, as in a container with Docker's default seccomp profile.
enum NoKeyringExec {
    /// The built helper, beside the test bundle (`swift build --build-tests` builds it).
    static var binary: String? {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("no-keyring-exec").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return nil
    }

    /// A Python program printing the errno of keyctl(KEYCTL_GET_KEYRING_ID, user keyring) (0 when it succeeds).
    static let probe = """
        import ctypes, os
        number = {"x86_64": 250, "aarch64": 219}[os.uname().machine]
        libc = ctypes.CDLL(None, use_errno=True)
        result = libc.syscall(number, 0, -4, 0)
        print(0 if result >= 0 else ctypes.get_errno())
        """

    static var python: String? {
        ["/usr/bin/python3", "/usr/local/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}

@Suite("no-keyring-exec: the kernel keyring refused as in a container")
struct NoKeyringExecTests {
    @Test("keyctl answers EPERM under the helper, in the command and in the processes it starts, and works without it")
    func keyctlRefused() throws {
        let helper = try #require(NoKeyringExec.binary, "no-keyring-exec is built by `swift build --build-tests`")
        guard let python = NoKeyringExec.python else {
            print("skipped: python3 is not installed (the keyctl probe is a python3 one-liner)")
            return
        }
        let free = try Run.launch(python, ["-c", NoKeyringExec.probe])
        #expect(free.status == 0, "\(free.stderr)")
        let direct = try Run.launch(helper, [python, "-c", NoKeyringExec.probe])
        #expect(direct.status == 0, "\(direct.stderr)")
        #expect(direct.stdout == "\(EPERM)\n")
        let grandchild = try Run.launch(helper, ["/bin/sh", "-c", "\"$0\" -c \"$1\"", python, NoKeyringExec.probe])
        #expect(grandchild.stdout == "\(EPERM)\n")
        // Where the keyring works at all, the refusal is the helper's doing.
        if free.stdout != "0\n" { print("note: the kernel keyring is refused here even without the helper (errno \(free.stdout))") }
        #expect(try Run.launch(helper, ["--check"]).status == 0)
    }

    @Test("the helper runs the command with its arguments and exit status; a missing command exits 127")
    func execsCommand() throws {
        let helper = try #require(NoKeyringExec.binary, "no-keyring-exec is built by `swift build --build-tests`")
        let echo = try Run.launch(helper, ["/bin/sh", "-c", "echo \"$1\"; exit 7", "sh", "an argument"])
        #expect(echo.status == 7)
        #expect(echo.stdout == "an argument\n")
        #expect(try Run.launch(helper, ["no-such-command-\(UUID().uuidString)"]).status == 127)
        #expect(try Run.launch(helper, []).status == 2)
    }
}
