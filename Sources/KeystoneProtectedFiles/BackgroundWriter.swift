import Foundation
import Keystone

// Overlapping the disk with the encryption: a large protected file's chunks are written, and flushed every few
// megabytes, by a thread of its own while the caller's thread seals the next ones. Sealing and writing one after the
// other costs the sum of both (the final fsync alone waits for every byte to reach the disk); overlapped, about the
// slower of the two.
//
// Memory stays bounded: at most `capacity` chunks wait in the queue, and the sealing thread waits when it is full.
// The thread is a `Thread`, never Swift's cooperative pool: it blocks in write(2) and fdatasync(2).

/// Writes queued buffers to a file descriptor on a thread of its own, in order.
final class BackgroundWriter: @unchecked Sendable {
    // @unchecked Sendable: the variables below are reached only while `condition` is locked; the other properties
    // are constants.
    private let condition = NSCondition()
    private var queue: [Data] = []
    private var finishing = false
    private var cancelled = false
    private var exited = false
    private var failure: KeychainError?

    private let descriptor: Int32
    private let path: String
    private let capacity: Int
    private let flushInterval: Int

    /// Starts the writing thread.
    ///
    /// - Parameters:
    ///   - descriptor: the file to write; it stays owned by the caller (not closed here).
    ///   - path: the file's name, for error messages.
    ///   - capacity: how many buffers may wait; the caller's ``enqueue(_:)`` blocks beyond that.
    ///   - flushInterval: `fdatasync` after about this many bytes, so the disk works while the caller seals (the
    ///     caller's final fsync then waits for the last stretch only). 0: never.
    init(descriptor: Int32, path: String, capacity: Int = 8, flushInterval: Int = 8 << 20) {
        self.descriptor = descriptor
        self.path = path
        self.capacity = max(1, capacity)
        self.flushInterval = flushInterval
        let thread = Thread { [self] in run() }
        thread.name = "Keystone protected file writer"
        thread.start()
    }

    /// Queues `data` to be written after everything queued before it; waits while the queue is full.
    ///
    /// - Throws: the `KeychainError` of an earlier write that failed (`errSecIO`, `errSecDiskFull`): nothing more is
    ///   written then.
    func enqueue(_ data: Data) throws {
        condition.lock()
        defer { condition.unlock() }
        while queue.count >= capacity && failure == nil && !exited { condition.wait() }
        if let failure { throw failure }
        queue.append(data)
        condition.broadcast()
    }

    /// Waits until everything queued is written and the thread has ended.
    ///
    /// - Throws: the `KeychainError` of the first write that failed.
    func finish() throws {
        condition.lock()
        defer { condition.unlock() }
        finishing = true
        condition.broadcast()
        while !exited { condition.wait() }
        if let failure { throw failure }
    }

    /// Drops what is queued and waits for the thread to end (after the write in progress, if any).
    func cancel() {
        condition.lock()
        defer { condition.unlock() }
        cancelled = true
        queue.removeAll()
        condition.broadcast()
        while !exited { condition.wait() }
    }

    private func run() {
        var sinceFlush = 0
        while true {
            condition.lock()
            while queue.isEmpty && !finishing && !cancelled { condition.wait() }
            if cancelled || queue.isEmpty {
                exited = true
                condition.broadcast()
                condition.unlock()
                return
            }
            let next = queue.removeFirst()
            condition.broadcast()
            condition.unlock()
            do {
                try next.withUnsafeBytes { try FileIO.writeAll(descriptor, $0, path: path) }
                sinceFlush += next.count
                if flushInterval > 0, sinceFlush >= flushInterval {
                    sinceFlush = 0
                    guard Self.flushData(descriptor) == 0 else { throw FileIO.error(errno, "could not flush \(path)") }
                }
            } catch {
                condition.lock()
                failure = KeychainError(converting: error)
                queue.removeAll()
                exited = true
                condition.broadcast()
                condition.unlock()
                return
            }
        }
    }

    /// fdatasync(2) where there is one; fsync(2) elsewhere (Darwin declares no fdatasync).
    private static func flushData(_ fd: Int32) -> Int32 {
        #if canImport(Glibc) || canImport(Musl)
        return fdatasync(fd)
        #else
        return fsync(fd)
        #endif
    }
}
