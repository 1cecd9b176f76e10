#if NIO && os(Linux)
import Foundation
import KeychainEngine
import Glibc

/// Linux's inotify on a keychain file's folder: wakes when the file, its `-wal` or its `-journal` is written, made,
/// renamed over or removed, by this process or another (`keystone add-generic-password -U …`).
///
/// Decision: the folder is watched, not the file: SQLite creates and removes the `-wal` file as connections come and
/// go, and a file replaced by a rename keeps no watch. A thread of its own waits in `poll(2)` on the inotify
/// descriptor and a pipe that ``stop()`` writes to; events are coalesced (the stream keeps only the newest wake-up),
/// so a commit's many WAL writes cause one reload, or two when a reload was already running.
final class FileChangeMonitor: Sendable {
    private let inotify: Int32
    private let stopPipe: (read: Int32, write: Int32)
    private let names: Set<String>
    let changes: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation
    private let stopped = Locked(false)

    /// Starts watching the folder of `path`.
    ///
    /// - Throws: `POSIXError` when inotify cannot be set up (no more watches: `fs.inotify.max_user_watches`).
    init(path: String) throws {
        let url = URL(fileURLWithPath: path)
        let base = url.lastPathComponent
        names = [base, base + "-wal", base + "-journal"]
        let folder = url.deletingLastPathComponent().path
        let fd = inotify_init1(Int32(IN_CLOEXEC) | Int32(IN_NONBLOCK))
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let mask = UInt32(IN_MODIFY) | UInt32(IN_CLOSE_WRITE) | UInt32(IN_CREATE) | UInt32(IN_MOVED_TO) | UInt32(IN_DELETE)
        guard inotify_add_watch(fd, folder, mask) >= 0 else {
            let code = errno
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            let code = errno
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        inotify = fd
        stopPipe = (fds[0], fds[1])
        (changes, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let thread = Thread { [self] in self.loop() }
        thread.name = "keystone.inotify"
        thread.start()
    }

    /// Stops the thread and finishes ``changes``. Idempotent.
    func stop() {
        let wasStopped = stopped.withLock { stopped in
            defer { stopped = true }
            return stopped
        }
        guard !wasStopped else { return }
        var byte: UInt8 = 1
        _ = write(stopPipe.write, &byte, 1)
    }

    private func loop() {
        defer {
            continuation.finish()
            close(inotify)
            close(stopPipe.read)
            close(stopPipe.write)
        }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0), pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return
            }
            if fds[1].revents != 0 { return }
            guard fds[0].revents != 0 else { continue }
            var relevant = false
            while true {
                let count = buffer.withUnsafeMutableBytes { read(inotify, $0.baseAddress, $0.count) }
                if count <= 0 { break }
                relevant = relevant || containsRelevantEvent(buffer, count: count)
            }
            if relevant { continuation.yield(()) }
        }
    }

    /// Whether the events in `buffer` name one of the keychain's files (or overflowed: then anything may have changed).
    private func containsRelevantEvent(_ buffer: [UInt8], count: Int) -> Bool {
        var offset = 0
        let header = MemoryLayout<inotify_event>.size
        while offset + header <= count {
            let (mask, length) = buffer.withUnsafeBytes { raw -> (UInt32, Int) in
                let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                return (event.mask, Int(event.len))
            }
            if mask & UInt32(IN_Q_OVERFLOW) != 0 { return true }
            if length > 0 {
                let nameBytes = buffer[(offset + header)..<min(count, offset + header + length)].prefix { $0 != 0 }
                if names.contains(String(decoding: nameBytes, as: UTF8.self)) { return true }
            }
            offset += header + length
        }
        return false
    }
}
#endif
