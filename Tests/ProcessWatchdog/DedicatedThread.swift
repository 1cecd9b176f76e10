import Foundation
import Synchronization

/// A task executor that runs its jobs on one thread of its own: blocking work (a TPM command, a D-Bus call, waiting
/// for a child process) runs off Swift's cooperative pool, yet inside the calling task, so its task-local values
/// (Swift Testing's current test, which attributes an `#expect` to its test) stay in place.
public final class DedicatedThreadExecutor: TaskExecutor, Sendable {
    private let state = Mutex<(jobs: [UnownedJob], stopped: Bool)>(([], false))
    private let ready = DispatchSemaphore(value: 0)

    /// Starts the thread, with `stackSize` bytes of stack.
    public init(stackSize: Int = 4 << 20) {
        let thread = Thread { [self] in run() }
        thread.stackSize = stackSize
        thread.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        state.withLock { $0.jobs.append(unowned) }
        ready.signal()
    }

    /// Ends the thread once the jobs already enqueued have run.
    public func stop() {
        state.withLock { $0.stopped = true }
        ready.signal()
    }

    private func run() {
        while true {
            ready.wait()
            let next = state.withLock { state -> (UnownedJob?, Bool) in
                state.jobs.isEmpty ? (nil, state.stopped) : (state.jobs.removeFirst(), false)
            }
            if let job = next.0 { job.runSynchronously(on: asUnownedTaskExecutor()) } else if next.1 { return }
        }
    }
}

/// Runs `body` on a thread of its own (never on Swift's cooperative pool), in the calling task: an `#expect` inside
/// `body` is recorded against the running test.
public func onDedicatedThread<T: Sendable>(stackSize: Int = 4 << 20,
                                           _ body: @escaping @Sendable () throws -> T) async throws -> T {
    let executor = DedicatedThreadExecutor(stackSize: stackSize)
    defer { executor.stop() }
    // Nonisolated async code prefers the executor: `body` runs on its thread, in this task.
    return try await withTaskExecutorPreference(executor) { try body() }
}
