#if NIO
import Foundation

/// Runs blocking keychain work on a thread of its own, never on Swift's cooperative pool.
///
/// Decision: as Keystone's async forms do (a thread per call, the caller suspended meanwhile): a keychain read blocks
/// on disk, on another process's file lock, or on an etcd round trip, and a cooperative thread held there is taken
/// from every task of a server (two cores: two threads).
enum OwnThread {
    fileprivate static let markerKey = "keystone.config.own-thread"

    /// Whether the current code runs on one of these threads (tests prove where a call ran; a thread's name is not
    /// reliable on Linux).
    static var isCurrent: Bool { Thread.current.threadDictionary[markerKey] as? Bool == true }

    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try Task.checkCancellation()
        return try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                Thread.current.threadDictionary[OwnThread.markerKey] = true
                continuation.resume(with: Result { try body() })
            }
            thread.name = "keystone.config"  // Linux: at most 15 bytes
            thread.start()
        }
    }
}
#endif
