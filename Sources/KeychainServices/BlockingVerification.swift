#if !canImport(Darwin)
import Foundation
import KeychainEngine

// Synchronous calls into swift-certificates' async verifier, without Swift's cooperative pool.

/// Runs the verifier's async validation from synchronous code.
///
/// `Verifier.validate` is async, SecTrust's API is synchronous. The calling thread becomes the task's executor:
/// the task is started with a task-executor preference for an executor whose jobs are queued and run by the
/// calling thread itself, which waits on a condition until the task has finished. So no job of the validation
/// ever runs on Swift's cooperative pool, and blocking the caller cannot starve the pool (a call from async code
/// blocks its own thread for the evaluation, as Apple's synchronous SecTrustEvaluateWithError does; with stores
/// made of certificates, as here, the validation never waits for anything but CPU).
enum BlockingVerification {
    static func run<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        let executor = CallerThreadExecutor()
        let result = Locked<T?>(nil)
        Task(executorPreference: executor) {
            let value = await body()
            result.withLock { $0 = value }
            executor.finish()
        }
        executor.runJobs()
        guard let value = result.withLock({ $0 }) else { preconditionFailure("the validation task ended without a result") }
        return value
    }
}

/// A task executor whose jobs are run by the thread that calls ``runJobs()``, until ``finish()``.
///
/// `@unchecked Sendable`: `jobs` and `finished` are reached only while `condition` is locked.
final class CallerThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var finished = false

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    func finish() {
        condition.lock()
        finished = true
        condition.signal()
        condition.unlock()
    }

    func runJobs() {
        while true {
            condition.lock()
            while jobs.isEmpty && !finished { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
#endif
