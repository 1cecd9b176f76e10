import Foundation

/// Where the async forms run their blocking keychain calls: threads of their own, never Swift's cooperative pool.
///
/// A keychain call blocks its thread: disk I/O and `fsync`, a lock held by another process, an authentication
/// prompt waiting for a person. Swift's cooperative pool has as many threads as the machine has cores, so a
/// blocking call there takes a thread from every task of the app: on a 2-core machine two waiting prompts
/// would freeze all of them. The async forms therefore hand each call to a worker thread of this pool and
/// suspend (not block) the caller until it returns.
///
/// The pool starts a thread as soon as a call finds no idle one (dispatch's concurrent queues add threads for
/// blocked work only gradually, a second or so apart), up to ``maximumThreads``; beyond that, calls wait their
/// turn in order. Up to ``idleThreads`` finished threads stay parked for the next calls; the others end.
/// Cancellation is honoured before a call starts; a call that has started cannot be interrupted.
enum BlockingCalls {
    /// The most threads running keychain calls at once.
    static let maximumThreads = 64
    /// Threads kept parked for later calls.
    static let idleThreads = 4

    private final class Pool: @unchecked Sendable {
        // @unchecked Sendable: every mutable property is reached only while `condition` is locked.
        let condition = NSCondition()
        var jobs: [@Sendable () -> Void] = []
        var threads = 0
        var idle = 0

        func submit(_ job: @escaping @Sendable () -> Void) {
            condition.lock()
            jobs.append(job)
            if idle > 0 {
                condition.signal()
            } else if threads < BlockingCalls.maximumThreads {
                threads += 1
                let thread = Thread { [self] in work() }
                thread.name = "keystone.blocking-call"
                thread.start()
            }
            condition.unlock()
        }

        private func work() {
            Thread.current.threadDictionary[BlockingCalls.markerKey] = true
            condition.lock()
            while true {
                if let job = jobs.first {
                    jobs.removeFirst()
                    condition.unlock()
                    job()
                    condition.lock()
                } else if idle < BlockingCalls.idleThreads {
                    idle += 1
                    condition.wait()
                    idle -= 1
                } else {
                    threads -= 1
                    condition.unlock()
                    return
                }
            }
        }
    }

    private static let pool = Pool()
    fileprivate static let markerKey = "keystone.blocking-call"

    /// Whether the current code runs on one of the pool's threads (lets tests prove where a call ran).
    static var isOnBlockingThread: Bool { Thread.current.threadDictionary[markerKey] as? Bool == true }

    /// Runs `body` on a thread of the pool and returns its result, suspending the caller meanwhile.
    ///
    /// - Throws: `CancellationError` when the task is cancelled before the call starts; else what `body` throws.
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try Task.checkCancellation()
        return try await withCheckedThrowingContinuation { continuation in
            pool.submit { continuation.resume(with: Result { try body() }) }
        }
    }
}
