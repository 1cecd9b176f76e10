#if NIO
import Foundation
import KeychainEngine

/// Counts the damaged rows the engine leaves out of the searches a provider makes on the current thread (a reload's
/// own thread): the engine reports them to its hooks, on the thread of the operation.
final class DamageCounter: @unchecked Sendable {
    // @unchecked Sendable: `count` is touched only on the thread that began the count (the hook runs on the
    // operation's thread, which is that thread).
    private(set) var count = 0

    func reset() { count = 0 }

    private static let key = "keystone.config.damage-counter"

    /// The engines that have the hook (weakly: an engine's address may be reused after it is gone).
    private static let hooked = Locked<[ObjectIdentifier: WeakEngine]>([:])
    private struct WeakEngine: @unchecked Sendable {
        // @unchecked Sendable: a weak reference to a Sendable class, read only under `hooked`'s lock.
        weak var engine: KeychainEngine?
    }

    /// Installs the hook on `engine`, once per engine (hooks cannot be removed: one per provider would pile up).
    static func install(on engine: KeychainEngine) {
        let id = ObjectIdentifier(engine)
        let isNew = hooked.withLock { hooked in
            if hooked[id]?.engine === engine { return false }
            hooked = hooked.filter { $0.value.engine != nil }
            hooked[id] = WeakEngine(engine: engine)
            return true
        }
        if isNew { engine.addHook(Hook()) }
    }

    /// Starts counting on this thread (the searches the caller makes until ``end()``).
    static func begin() -> DamageCounter {
        let counter = DamageCounter()
        Thread.current.threadDictionary[key] = counter
        return counter
    }

    static func end() { Thread.current.threadDictionary.removeObject(forKey: key) }

    private struct Hook: EngineHook {
        func willPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?) throws {}
        func didPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?, status: Int32) {}
        func didSkipDamagedItems(_ operation: KeychainOperation, count: Int) {
            guard let counter = Thread.current.threadDictionary[DamageCounter.key] as? DamageCounter else { return }
            counter.count += count
        }
    }
}
#endif
