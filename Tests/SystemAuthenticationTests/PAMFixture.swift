#if canImport(Glibc)
import Dispatch
import Foundation
import Glibc
import KeychainEngine
import SystemAuthentication

/// A throwaway Unix account for the PAM tests, a temporary PAM configuration directory, and a pseudo-terminal.
enum PAMFixture {
    /// The test user: created on first use, removed (`userdel`) when the test process exits.
    struct TestUser: Sendable {
        let name: String
        let password: String
    }

    struct FixtureError: Error, CustomStringConvertible {
        let description: String
    }

    /// Whether the tests can create a Unix account: root, with useradd, chpasswd and userdel.
    static let canCreateUsers: Bool = {
        guard geteuid() == 0 else { return false }
        return ["useradd", "chpasswd", "userdel"].allSatisfy { tool($0) != nil }
    }()

    /// Whether pam_start_confdir (Linux-PAM 1.4 or later) exists: every test service lives in a temporary directory.
    static let hasConfdir: Bool = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pam_start_confdir") != nil

    private static let created = Locked<TestUser?>(nil)

    /// The process's test user (`kst` and 6 random lowercase letters), created once with `useradd` and given a
    /// random password through `chpasswd` on its standard input (never as an argument).
    static func user() throws -> TestUser {
        try created.withLock { existing in
            if let existing { return existing }
            let letters = Array("abcdefghijklmnopqrstuvwxyz")
            let name = "kst" + String((0..<6).map { _ in letters.randomElement()! })
            let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789")
            let password = "Pw-" + String((0..<20).map { _ in alphabet.randomElement()! })
            guard let useradd = tool("useradd"), let chpasswd = tool("chpasswd") else {
                throw FixtureError(description: "useradd or chpasswd not found")
            }
            removeStaleUsers()
            let added = run([useradd, "--no-create-home", "--shell", "/usr/sbin/nologin",
                             "--comment", "\(staleMarker)\(getpid())", name])
            guard added == 0 else { throw FixtureError(description: "useradd \(name) exited with \(added)") }
            let user = TestUser(name: name, password: password)
            existing = user
            atexit { PAMFixture.removeUser() }
            let set = run([chpasswd], standardInput: "\(name):\(password)\n")
            guard set == 0 else { throw FixtureError(description: "chpasswd exited with \(set)") }
            return user
        }
    }

    /// The comment a test user carries: this marker and the pid of the test process that made it.
    static let staleMarker = "keystone-test pid "

    /// Removes test users left by test processes that died before their `atexit` ran (a crash, SIGKILL): those
    /// whose comment names a pid that no longer exists.
    static func removeStaleUsers() {
        guard let userdel = tool("userdel"), let passwd = try? String(contentsOfFile: "/etc/passwd", encoding: .utf8) else { return }
        for line in passwd.split(separator: "\n") {
            let fields = line.split(separator: ":", omittingEmptySubsequences: false)
            guard fields.count >= 5, fields[0].hasPrefix("kst"), fields[4].hasPrefix(staleMarker),
                  let pid = pid_t(fields[4].dropFirst(staleMarker.count)) else { continue }
            if kill(pid, 0) == -1 && errno == ESRCH { run([userdel, String(fields[0])]) }
        }
    }

    /// Removes the test user (at exit).
    static func removeUser() {
        guard let user = created.current, let userdel = tool("userdel") else { return }
        _ = run([userdel, user.name])
    }

    /// A password that is not the test user's.
    static func wrongPassword() -> String {
        "wrong-" + UUID().uuidString
    }

    /// `name` in the usual system directories.
    static func tool(_ name: String) -> String? {
        for directory in ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
            let path = directory + "/" + name
            if access(path, X_OK) == 0 { return path }
        }
        return nil
    }

    /// pamtester, when installed.
    static let pamtester: String? = tool("pamtester")

    /// cwrap's pam_wrapper (libpam-wrapper), which points an unmodified PAM application (pamtester) at a service
    /// directory of the test's own (`PAM_WRAPPER_SERVICE_DIR`).
    static let pamWrapper: String? = {
        let directories = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"]
        return directories.map { $0 + "/libpam_wrapper.so" }.first { access($0, R_OK) == 0 }
    }()

    /// Runs `arguments` (posix_spawn, no shell, output discarded) with `environment` added, feeding
    /// `standardInput` on a pipe; returns the exit status.
    @discardableResult
    static func run(_ arguments: [String], standardInput: String? = nil, environment: [String: String] = [:]) -> Int32 {
        var input: [Int32] = [-1, -1]
        guard pipe(&input) == 0 else { return -1 }
        for fd in input { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var inherited = ProcessInfo.processInfo.environment
        inherited.merge(environment) { $1 }
        var envp: [UnsafeMutablePointer<CChar>?] = inherited.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, arguments[0], &actions, nil, &argv, &envp)
        close(input[0])
        if spawned == 0, let standardInput {
            var bytes = Array(standardInput.utf8)
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { write(input[1], $0.baseAddress, $0.count) }
                if written <= 0 { break }
                offset += written
            }
            bytes.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) }
        }
        close(input[1])
        guard spawned == 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
    }

    /// A temporary PAM configuration directory holding `files` (service name: contents); removed by ``remove()``.
    struct ServiceDirectory: Sendable {
        let path: String

        init(_ files: [String: String]) throws {
            path = FileManager.default.temporaryDirectory.path + "/keystone-pam-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            for (name, contents) in files {
                try contents.write(toFile: path + "/" + name, atomically: true, encoding: .utf8)
            }
        }

        func remove() {
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    /// Starts `body` on a thread of its own NOW, in the caller, and hands back its result later (``Started/value``).
    ///
    /// Unlike `async let x = onThread { … }`, whose child task needs a free thread of Swift's cooperative pool before
    /// it even starts (on a 2-core CI machine the pool is two threads, often busy with other suites' synchronous
    /// work), the body is running when this returns: a test that then watches a terminal for the body's prompt does
    /// not wait on the pool.
    static func started<T: Sendable>(_ body: @escaping @Sendable () -> T) -> Started<T> {
        let started = Started<T>()
        let thread = Thread { started.finish(body()) }
        thread.start()
        return started
    }

    /// The result of a body ``started(_:)`` on its own thread.
    final class Started<T: Sendable>: Sendable {
        private let state = Locked<(result: T?, waiter: CheckedContinuation<T, Never>?)>((nil, nil))

        fileprivate func finish(_ result: T) {
            let waiter: CheckedContinuation<T, Never>? = state.withLock { s in
                s.result = result
                defer { s.waiter = nil }
                return s.waiter
            }
            waiter?.resume(returning: result)
        }

        /// The body's result, once it returned.
        var value: T {
            get async {
                await withCheckedContinuation { continuation in
                    let ready: T? = state.withLock { s in
                        if let result = s.result { return result }
                        s.waiter = continuation
                        return nil
                    }
                    if let ready { continuation.resume(returning: ready) }
                }
            }
        }
    }

    /// Runs `body` on a thread of its own (PAM blocks; never on Swift's cooperative pool) and returns its result.
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: body()) }
            thread.start()
        }
    }
}

/// A prompter that answers from a script and records every message it is shown.
///
/// Answers questions (secret, visible) in order; once the script is used up it answers nil (the person
/// cancelled), so no conversation can go on forever.
final class ScriptedPrompter: AuthenticationPrompter, Sendable {
    private struct State {
        var answers: [String?]
        var messages: [AuthenticationMessage] = []
    }

    private let state: Locked<State>
    let isInteractive: Bool
    /// Signalled after each question was answered (for tests that act between attempts).
    let answered = DispatchSemaphore(value: 0)

    init(_ answers: [String?], interactive: Bool = true) {
        state = Locked(State(answers: answers))
        isInteractive = interactive
    }

    func prompt(_ message: AuthenticationMessage, cancellation: AuthenticationCancellation) -> String? {
        let answer: String? = state.withLock { s in
            s.messages.append(message)
            guard message.expectsAnswer, !s.answers.isEmpty else { return nil }
            return s.answers.removeFirst()
        }
        if message.expectsAnswer { answered.signal() }
        return answer
    }

    /// Every message shown, in order.
    var messages: [AuthenticationMessage] { state.current.messages }
    /// The secret prompts shown.
    var secretPrompts: [AuthenticationMessage] { messages.filter { $0.style == .secret } }
    /// The error messages shown.
    var errors: [AuthenticationMessage] { messages.filter { $0.style == .error } }
}

/// A prompter that blocks in its first question until its cancellation handler releases it.
final class BlockingPrompter: AuthenticationPrompter, Sendable {
    let isInteractive = true
    /// Signalled when the prompter is waiting.
    let waiting = DispatchSemaphore(value: 0)

    func prompt(_ message: AuthenticationMessage, cancellation: AuthenticationCancellation) -> String? {
        guard message.expectsAnswer else { return nil }
        let release = DispatchSemaphore(value: 0)
        let token = cancellation.onCancel { release.signal() }
        defer { cancellation.removeHandler(token) }
        waiting.signal()
        release.wait()
        return nil
    }
}

/// A pseudo-terminal: the test plays the person on the master side; a prompter opens ``slavePath``.
final class PseudoTerminal: Sendable {
    let master: Int32
    /// Held open by the test so the terminal outlives every prompt (and for `tcgetattr`).
    let slave: Int32
    let slavePath: String

    // Glibc's Swift module lacks <stdlib.h>'s pseudo-terminal functions (and <pty.h>): looked up in the C library.
    private typealias OpenPT = @convention(c) (Int32) -> Int32
    private typealias GrantPT = @convention(c) (Int32) -> Int32
    private typealias PTSName = @convention(c) (Int32, UnsafeMutablePointer<CChar>?, Int) -> Int32

    private static func function<F>(_ name: String, as type: F.Type) throws -> F {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else {
            throw PAMFixture.FixtureError(description: "\(name) not found")
        }
        return unsafeBitCast(symbol, to: type)
    }

    init() throws {
        let openpt = try Self.function("posix_openpt", as: OpenPT.self)
        let grantpt = try Self.function("grantpt", as: GrantPT.self)
        let unlockpt = try Self.function("unlockpt", as: GrantPT.self)
        let ptsname = try Self.function("ptsname_r", as: PTSName.self)
        let master = openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { throw PAMFixture.FixtureError(description: "posix_openpt: errno \(errno)") }
        guard grantpt(master) == 0, unlockpt(master) == 0 else {
            close(master)
            throw PAMFixture.FixtureError(description: "grantpt/unlockpt: errno \(errno)")
        }
        var name = [CChar](repeating: 0, count: 256)
        guard ptsname(master, &name, name.count) == 0 else {
            close(master)
            throw PAMFixture.FixtureError(description: "ptsname_r: errno \(errno)")
        }
        let path = name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        let slave = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard slave >= 0 else {
            close(master)
            throw PAMFixture.FixtureError(description: "open \(path): errno \(errno)")
        }
        self.master = master
        self.slave = slave
        self.slavePath = path
    }

    deinit {
        close(slave)
        close(master)
    }

    /// Whether the terminal echoes input (ECHO in its local modes).
    var echoes: Bool {
        var modes = termios()
        guard tcgetattr(slave, &modes) == 0 else { return false }
        return modes.c_lflag & tcflag_t(ECHO) != 0
    }

    /// Waits until the terminal stops echoing, as a program reading a password switches it; false if it still echoes
    /// after `seconds`. A prompter that prints its prompt before `tcsetattr(TCSAFLUSH)` (polkit's text agent does)
    /// discards whatever was typed in between: typing only once echo is off is the deterministic signal that the
    /// flush is done (the kernel flushes, then sets the modes).
    func waitUntilSilent(within seconds: Double) -> Bool {
        var waited = 0.0
        while echoes {
            guard waited < seconds else { return false }
            usleep(10_000)
            waited += 0.01
        }
        return true
    }

    /// Reads what the terminal shows until it contains `text`; nil if the terminal shows nothing for a minute
    /// (a safety net so a broken prompter fails the test instead of hanging it — never reached when it works).
    func read(until text: String) -> String? {
        var seen = [UInt8]()
        while !String(decoding: seen, as: UTF8.self).contains(text) {
            var fds = [pollfd(fd: master, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 1, 60_000)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 1024)
            let count = Glibc.read(master, &buffer, buffer.count)
            guard count > 0 else { return nil }
            seen += buffer[..<count]
        }
        return String(decoding: seen, as: UTF8.self)
    }

    /// Everything the terminal has shown and not yet been read, without waiting.
    func drain() -> String {
        var seen = [UInt8]()
        while true {
            var fds = [pollfd(fd: master, events: Int16(POLLIN), revents: 0)]
            guard poll(&fds, 1, 0) > 0 else { break }
            var buffer = [UInt8](repeating: 0, count: 1024)
            let count = Glibc.read(master, &buffer, buffer.count)
            guard count > 0 else { break }
            seen += buffer[..<count]
        }
        return String(decoding: seen, as: UTF8.self)
    }

    /// Types `text` on the terminal.
    func type(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
            guard written > 0 else { return }
            bytes = bytes.dropFirst(written)
        }
    }
}
#endif
