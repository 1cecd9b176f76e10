import Foundation

/// Where the async forms run their blocking keychain calls: threads of their own, never Swift's cooperative pool.
///
/// A keychain call blocks its thread: disk I/O and `fsync`, a lock held by another process, an authentication
/// prompt waiting for a person. Swift's cooperative pool has as many threads as the machine has cores, so a
/// blocking call there takes a thread from every task of the app: on a 2-core machine two waiting prompts
/// would freeze all of them. The async forms therefore hand each call to a thread of its own and suspend (not
/// block) the caller until it returns.
///
/// A call starts a new thread at once (dispatch's concurrent queues add threads for blocked work only
/// gradually, about a second apart) as long as fewer than ``maximumThreads`` are running; beyond that, calls
/// wait their turn in order, and a thread that finishes its call takes the next waiting one before it ends.
/// No thread is kept idle. Cancellation is honoured before a call starts; a call that has started cannot be
/// interrupted.
enum BlockingCalls {
    /// The most threads running keychain calls at once.
    static let maximumThreads = 64

    private final class Pool: @unchecked Sendable {
        // @unchecked Sendable: `waiting` and `running` are reached only while `lock` is held.
        let lock = NSLock()
        var waiting: [@Sendable () -> Void] = []
        var running = 0

        func submit(_ job: @escaping @Sendable () -> Void) {
            lock.lock()
            guard running < BlockingCalls.maximumThreads else {
                waiting.append(job)
                lock.unlock()
                return
            }
            running += 1
            lock.unlock()
            let thread = Thread { [self] in work(job) }
            thread.name = "keystone.block"  // at most 15 bytes on Linux: a longer name is not set at all
            thread.start()
        }

        private func work(_ first: @escaping @Sendable () -> Void) {
            Thread.current.threadDictionary[BlockingCalls.markerKey] = true
            var job = first
            while true {
                job()
                lock.lock()
                if waiting.isEmpty {
                    running -= 1
                    lock.unlock()
                    return
                }
                job = waiting.removeFirst()
                lock.unlock()
            }
        }
    }

    private static let pool = Pool()
    fileprivate static let markerKey = "keystone.blocking-call"

    /// Whether the current code runs on one of these threads (lets tests prove where a call ran).
    static var isOnBlockingThread: Bool { Thread.current.threadDictionary[markerKey] as? Bool == true }

    /// Runs `body` on a thread of its own and returns its result, suspending the caller meanwhile.
    ///
    /// - Throws: `CancellationError` when the task is cancelled before the call starts; else what `body` throws.
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try Task.checkCancellation()
        return try await withCheckedThrowingContinuation { continuation in
            pool.submit { continuation.resume(with: Result { try body() }) }
        }
    }
}
