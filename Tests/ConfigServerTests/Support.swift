import Crypto
import Foundation
import ProcessWatchdog
#if canImport(Glibc)
import Glibc
#endif

/// The binaries `swift build --build-tests` puts next to the test bundle (ConfigServer, keystone, no-keyring-exec).
enum Binaries {
    static func find(_ name: String) -> String? {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return nil
    }

    static var configServer: String? { find("ConfigServer") }
    static var keystone: String? { find("keystone") }
    static var noKeyringExec: String? { find("no-keyring-exec") }

    /// The repository's root (the directory of Package.swift), found from this file's path.
    static var repository: URL {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while dir.path != "/" {
            if FileManager.default.fileExists(atPath: dir.appendingPathComponent("Package.swift").path) { return dir }
            dir = dir.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    }
}

/// What a finished process printed.
struct Finished {
    let status: Int32
    let stdout: String
    let stderr: String
}

/// Runs `executable` to its end with `input` on standard input (standard error through a file: no full-pipe stall).
func runToEnd(_ executable: String, _ arguments: [String], environment: [String: String], input: String? = nil) throws -> Finished {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.environment = environment
    let errorFile = FileManager.default.temporaryDirectory.appendingPathComponent("config-server-test-\(UUID().uuidString)")
    _ = FileManager.default.createFile(atPath: errorFile.path, contents: nil)
    defer { try? FileManager.default.removeItem(at: errorFile) }
    let out = Pipe(), stdin = Pipe()
    process.standardOutput = out
    process.standardError = try FileHandle(forWritingTo: errorFile)
    process.standardInput = stdin
    try process.run()
    if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
    try stdin.fileHandleForWriting.close()
    let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let stderrData = (try? Data(contentsOf: errorFile)) ?? Data()
    return Finished(status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
                    stderr: String(decoding: stderrData, as: UTF8.self))
}

/// The database password's fingerprint as ConfigServer computes it (HMAC-SHA256 keyed by the password over its label,
/// 16 bytes in hex): what `GET /db` must answer.
func expectedFingerprint(_ password: String) -> String {
    let mac = HMAC<SHA256>.authenticationCode(for: Data("keystone-config-server/db-fingerprint/v1".utf8),
                                              using: SymmetricKey(data: Data(password.utf8)))
    return Data(mac).prefix(16).map { String(format: "%02x", $0) }.joined()
}

/// A running ConfigServer replica: started, waited for until it prints its ready line, stopped with SIGTERM.
final class Replica: @unchecked Sendable {
    // @unchecked Sendable: `process` and `port` are set once in init; the output files are only appended by the child.
    let process: Process
    let port: UInt16
    let name: String
    private let stdoutFile: URL
    private let stderrFile: URL
    /// Kills the replica if this test process dies without stopping it (a crash, SIGKILL): the replica's command line
    /// must still contain `marker` (so a reused pid is never touched).
    private let watchdog: ProcessWatchdog?

    /// The watchdog's script: the replica's pid, then, at end of file (this process gone), SIGKILL when /proc/PID/cmdline
    /// still names the marker.
    private static let watchdogScript = """
        read -r pid; read -r _
        [ -n "$pid" ] && tr '\\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$1" && kill -KILL "$pid" 2>/dev/null
        exit 0
        """

    struct Failure: Error, CustomStringConvertible { let description: String }

    /// Starts `ConfigServer arguments` (under `wrapper` when given, e.g. no-keyring-exec) and waits for its ready line.
    ///
    /// - Throws: ``Failure`` when it exits first (with what it printed) or prints nothing ready within `timeout`
    ///   seconds (a hang guard, not a bound on start-up time).
    init(name: String, wrapper: String?, arguments: [String], environment: [String: String], directory: URL,
         marker: String, timeout: TimeInterval = 120) throws {
        let server = try Binaries.configServer.orThrow("the ConfigServer binary is built by `swift build --build-tests --traits NIO`")
        self.name = name
        stdoutFile = directory.appendingPathComponent("\(name).stdout")
        stderrFile = directory.appendingPathComponent("\(name).stderr")
        for file in [stdoutFile, stderrFile] { _ = FileManager.default.createFile(atPath: file.path, contents: nil) }
        let process = Process()
        if let wrapper {
            process.executableURL = URL(fileURLWithPath: wrapper)
            process.arguments = [server] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: server)
            process.arguments = arguments
        }
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: stdoutFile)
        process.standardError = try FileHandle(forWritingTo: stderrFile)
        try process.run()
        self.process = process
        watchdog = try? ProcessWatchdog.start(script: Self.watchdogScript, name: "config-server-watchdog", arguments: [marker])
        watchdog?.send(String(process.processIdentifier))
        let deadline = Date().addingTimeInterval(timeout)
        let prefix = "ConfigServer ready on http://127.0.0.1:"
        var readyLine: Substring?
        while readyLine == nil {
            let text = (try? String(contentsOf: stdoutFile, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) {
                readyLine = line
                break
            }
            if !process.isRunning {
                process.waitUntilExit()
                throw Failure(description: "\(name) exited with \(process.terminationStatus) before it was ready: \(Self.read(stderrFile))")
            }
            if Date() >= deadline {
                process.terminate()
                throw Failure(description: "\(name) printed no ready line within \(timeout) s: \(Self.read(stderrFile))")
            }
            usleep(20_000)
        }
        guard let port = readyLine.flatMap({ UInt16(String($0.dropFirst(prefix.count).prefix { $0.isNumber })) }) else {
            throw Failure(description: "\(name): unreadable ready line")
        }
        self.port = port
    }

    private static func read(_ file: URL) -> String { (try? String(contentsOf: file, encoding: .utf8)) ?? "" }

    var stdout: String { Self.read(stdoutFile) }
    var stderr: String { Self.read(stderrFile) }

    /// Sends SIGTERM and waits for the exit; returns the exit status.
    @discardableResult
    func stop() -> Int32 {
        watchdog?.end()
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        watchdog?.end()
        if process.isRunning { process.terminate() }
    }
}

extension Optional {
    func orThrow(_ message: String) throws -> Wrapped {
        guard let self else { throw Replica.Failure(description: message) }
        return self
    }
}

/// A minimal blocking HTTP/1.1 client over one keep-alive TCP connection to 127.0.0.1 (no URLSession: no libcurl, no
/// hidden retries: every request the loop counts is exactly one request on the wire).
final class HTTPConnection {
    struct Response { let status: Int; let body: String }
    struct Failure: Error, CustomStringConvertible { let description: String }

    let port: UInt16
    private var fd: Int32 = -1
    private var buffer: [UInt8] = []

    init(port: UInt16) { self.port = port }
    deinit { close() }

    func close() {
        if fd >= 0 { _ = Glibc.close(fd) }
        fd = -1
        buffer = []
    }

    private func connect() throws {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        // A hang guard: a replica that stops answering fails the request instead of blocking the test.
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        _ = setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        _ = setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let code = errno
            _ = Glibc.close(socket)
            throw Failure(description: "connect 127.0.0.1:\(port): errno \(code)")
        }
        fd = socket
    }

    /// `GET path` with `Authorization: Bearer token` when a token is given.
    func get(_ path: String, bearer token: String? = nil) throws -> Response {
        if fd < 0 { try connect() }
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
        if let token { request += "Authorization: Bearer \(token)\r\n" }
        request += "\r\n"
        let bytes = Array(request.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else {
                let code = errno
                close()
                throw Failure(description: "send to 127.0.0.1:\(port): errno \(code)")
            }
            sent += n
        }
        // The head, then Content-Length bytes of body.
        let separator: [UInt8] = [13, 10, 13, 10]
        var headEnd: Int?
        while headEnd == nil {
            if let range = buffer.firstRange(of: separator) { headEnd = range.upperBound; break }
            try fill()
        }
        let head = String(decoding: buffer[..<headEnd!], as: UTF8.self)
        let lines = head.components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
            close()
            throw Failure(description: "malformed status line from 127.0.0.1:\(port): \(lines[0])")
        }
        var length = 0
        var closes = false
        for line in lines.dropFirst() {
            let lower = line.lowercased()
            if lower.hasPrefix("content-length:") { length = Int(lower.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0 }
            if lower.hasPrefix("connection:") && lower.contains("close") { closes = true }
        }
        while buffer.count < headEnd! + length { try fill() }
        let body = String(decoding: buffer[headEnd!..<(headEnd! + length)], as: UTF8.self)
        buffer.removeFirst(headEnd! + length)
        if closes { close() }
        return Response(status: status, body: body)
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 4096)
        let n = chunk.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else {
            let code = errno
            close()
            throw Failure(description: n == 0 ? "127.0.0.1:\(port) closed the connection" : "recv from 127.0.0.1:\(port): errno \(code)")
        }
        buffer.append(contentsOf: chunk[..<n])
    }
}
