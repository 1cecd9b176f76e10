#if NIO
import Foundation
import KeychainEngine

/// Counts the damaged rows the engine leaves out of the searches a provider makes on the current thread (a reload's
/// own thread): the engine reports them to its hooks, on the thread of the operation.
final class DamageCounter: @unchecked Sendable {
    // @unchecked Sendable: `count` is touched only on the thread that began the count (the hook runs on the
    // operation's thread, which is that thread).
    private(set) var count = 0
    let owner: UUID

    private init(owner: UUID) { self.owner = owner }

    func reset() { count = 0 }

    private static let key = "keystone.config.damage-counter"

    /// The hook a provider installs on its engine once (at init): it counts only for that provider's reloads.
    static func install(on engine: KeychainEngine, owner: UUID) {
        engine.addHook(Hook(owner: owner))
    }

    /// Starts counting on this thread for `owner`.
    static func begin(owner: UUID) -> DamageCounter {
        let counter = DamageCounter(owner: owner)
        Thread.current.threadDictionary[key] = counter
        return counter
    }

    static func end() { Thread.current.threadDictionary.removeObject(forKey: key) }

    private struct Hook: EngineHook {
        let owner: UUID
        func willPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?) throws {}
        func didPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?, status: Int32) {}
        func didSkipDamagedItems(_ operation: KeychainOperation, count: Int) {
            guard let counter = Thread.current.threadDictionary[DamageCounter.key] as? DamageCounter, counter.owner == owner else { return }
            counter.count += count
        }
    }
}
#endif
