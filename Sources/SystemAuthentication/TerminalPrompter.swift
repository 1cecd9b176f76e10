#if canImport(Glibc)
import Foundation
import Glibc
import KeychainEngine

/// Asks on a terminal (`/dev/tty`, the process's controlling terminal, by default), as sudo and su do.
///
/// Every ``prompt(_:cancellation:)`` opens the terminal, writes the message, and for a question reads one line:
/// - ``AuthenticationMessage/Style/secret``: echo is switched off while the line is read (and always switched back,
///   also on cancellation or error), and a newline is written after it, since the Enter key was not echoed.
/// - ``AuthenticationMessage/Style/visible``: echo stays as it is.
/// - ``AuthenticationMessage/Style/info`` and ``AuthenticationMessage/Style/error``: the text and a newline; the
///   return value is nil.
///
/// The read waits in `poll(2)` on the terminal and on a pipe that a cancellation handler writes to, so cancelling
/// wakes it at once and the prompt returns nil. End of input (Ctrl-D on an empty line, the terminal hung up) returns
/// nil, as does a line longer than ``maximumLineLength`` bytes (after an error message).
///
/// - Important: A process killed (SIGKILL, or a signal it does not handle) while a secret is read leaves the
///   terminal without echo (`stty sane` restores it). The answer is a Swift `String` that cannot be wiped; the read
///   buffer is zeroed.
/// - Important: The prompter installs no signal handlers. Ctrl-C on the controlling terminal sends SIGINT to the
///   process as usual, and a process in a background process group that switches echo off is stopped by SIGTTOU, as
///   any terminal program is.
public struct TerminalPrompter: AuthenticationPrompter {
    /// The longest line read, in bytes (without the newline).
    public static let maximumLineLength = 4096

    /// The terminal device.
    public let path: String

    /// A prompter on the terminal at `path`.
    public init(path: String = "/dev/tty") {
        self.path = path
    }

    /// Whether `path` opens (`O_RDWR | O_NOCTTY`) and is a terminal: false without a controlling terminal (a
    /// daemon, a CI job), for `/dev/null`, for a file.
    public var isInteractive: Bool {
        let fd = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return isatty(fd) == 1
    }

    /// Shows `message` on the terminal and, for a question, reads the answer.
    ///
    /// - Returns: the line typed, without its newline, for ``AuthenticationMessage/Style/secret`` and
    ///   ``AuthenticationMessage/Style/visible``; nil for info and error messages, on cancellation, at end of input,
    ///   for an over-long line, or when the terminal cannot be opened.
    public func prompt(_ message: AuthenticationMessage, cancellation: AuthenticationCancellation) -> String? {
        guard !cancellation.isCancelled else { return nil }
        let fd = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }

        guard message.expectsAnswer else {
            writeAll(fd, message.text + "\n")
            return nil
        }
        guard isatty(fd) == 1 else { return nil }

        // Echo off before the prompt is written: whoever sees the prompt types into a terminal that does not echo.
        var saved = termios()
        var echoChanged = false
        if message.style == .secret {
            guard tcgetattr(fd, &saved) == 0 else { return nil }
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO | ECHOE | ECHOK | ECHONL)
            guard tcsetattr(fd, TCSANOW, &quiet) == 0 else { return nil }
            echoChanged = true
        }
        defer {
            if echoChanged { _ = tcsetattr(fd, TCSANOW, &saved) }
        }

        writeAll(fd, message.text)
        let line = readLine(fd, cancellation: cancellation)
        if message.style == .secret { writeAll(fd, "\n") }
        switch line {
        case .line(let answer): return answer
        case .tooLong:
            writeAll(fd, "Input longer than \(Self.maximumLineLength) bytes; cancelled.\n")
            return nil
        case .cancelled: return nil
        }
    }

    private enum Line {
        case line(String)
        case tooLong
        case cancelled
    }

    /// Reads bytes up to a newline, waiting on the terminal and on the cancellation's wake pipe.
    private func readLine(_ fd: Int32, cancellation: AuthenticationCancellation) -> Line {
        guard let wake = WakePipe() else { return .cancelled }
        let token = cancellation.onCancel { wake.wake() }
        defer { cancellation.removeHandler(token) }

        var bytes = [UInt8]()
        bytes.reserveCapacity(256)
        defer {
            // Wipe the typed bytes.
            bytes.withUnsafeMutableBytes { buffer in
                if let base = buffer.baseAddress { explicit_bzero(base, buffer.count) }
            }
        }
        while true {
            if cancellation.isCancelled { return .cancelled }
            var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wake.readFD, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return .cancelled
            }
            if fds[1].revents != 0 || cancellation.isCancelled { return .cancelled }
            let events = fds[0].revents
            if events & Int16(POLLIN) == 0 {
                if events & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 { return .cancelled }
                continue
            }
            var byte: UInt8 = 0
            let count = read(fd, &byte, 1)
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return .cancelled
            }
            if count == 0 { return .cancelled }  // end of input
            if byte == UInt8(ascii: "\n") {
                if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
                return .line(String(decoding: bytes, as: UTF8.self))
            }
            guard bytes.count < Self.maximumLineLength else { return .tooLong }
            bytes.append(byte)
        }
    }

    private func writeAll(_ fd: Int32, _ text: String) {
        var remaining = Array(text.utf8)[...]
        while !remaining.isEmpty {
            let written = remaining.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            remaining = remaining.dropFirst(written)
        }
    }
}

/// A pipe a cancellation handler writes to, to wake a `poll(2)`.
///
/// A class so the descriptors are closed only when the last reference (the read loop's, or a cancellation
/// handler still running after `AuthenticationCancellation.removeHandler(_:)`) is gone: a late handler never
/// writes to a descriptor number reused by something else.
private final class WakePipe: Sendable {
    let readFD: Int32
    let writeFD: Int32

    init?() {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return nil }
        readFD = fds[0]
        writeFD = fds[1]
        // Glibc's Swift module has no pipe2: close-on-exec and a write end that never blocks, set afterwards.
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        _ = fcntl(writeFD, F_SETFL, fcntl(writeFD, F_GETFL) | O_NONBLOCK)
    }

    func wake() {
        var byte: UInt8 = 1
        _ = write(writeFD, &byte, 1)
    }

    deinit {
        close(readFD)
        close(writeFD)
    }
}
#endif
