import Foundation

// A Wing–Gong linearizability checker (with Lowe's memoization: "Testing for linearizability", 2017) for the history
// of a keychain's items, as Jepsen's Knossos checks a register's. The model is one item per key (P-compositionality:
// a history is linearizable iff its restriction to every key is, since operations on different keys commute and
// every operation here names one key), so each key is checked on its own.
//
// An operation is recorded with its invocation time and, when it answered, its response time and outcome (times on
// CLOCK_MONOTONIC, which every process of the machine shares; the invocation is taken before the request is sent and
// the response after the answer came back, so the real-time order the checker uses is never tighter than the real one).
// An operation whose outcome is unknown (`errSecNotAvailable` once it may have been sent: etcd may or may not have
// committed it) has no response: as Jepsen's `:info` operations, it may take effect at any moment after its invocation,
// or never, and any outcome the model allows is accepted for it.

/// One item's state in the model: absent, or present with a value (every written value is unique in a history).
enum LinearizableItem: Hashable, Sendable, CustomStringConvertible {
    case absent
    case present(String)

    var description: String {
        switch self {
        case .absent: "absent"
        case .present(let value): "present(\(value))"
        }
    }
}

/// What an operation asked for.
///
/// Decision: a check-and-set states the version it read; the history records the *value* read with that version
/// instead. Every written value is unique in a history and an item's version never goes back (E1: versions continue
/// after delete and undelete), so "the current version is the one I read" is "the current value is the one I read":
/// the model needs no knowledge of how versions are numbered.
enum LinearizableCall: Hashable, Sendable, CustomStringConvertible {
    /// SecItemAdd: succeeds only if the item is absent.
    case add(String)
    /// SecItemUpdate of the secret: succeeds if the item is present.
    case update(String)
    /// An update with check-and-set: succeeds if the item is present with the value `expected` (read at the version
    /// stated), else a version conflict (present, another value) or not found (absent).
    case checkAndSet(expected: String, value: String)
    /// SecItemDelete: succeeds if the item is present.
    case delete
    /// SecItemCopyMatching with the secret.
    case read

    var description: String {
        switch self {
        case .add(let value): "add(\(value))"
        case .update(let value): "update(\(value))"
        case .checkAndSet(let expected, let value): "cas(\(expected)→\(value))"
        case .delete: "delete"
        case .read: "read"
        }
    }
}

/// How an operation answered.
enum LinearizableOutcome: Hashable, Sendable, CustomStringConvertible {
    case success
    case duplicate
    case notFound
    case conflict
    case value(String)

    var description: String {
        switch self {
        case .success: "ok"
        case .duplicate: "duplicate"
        case .notFound: "notFound"
        case .conflict: "conflict"
        case .value(let value): "value(\(value))"
        }
    }
}

/// One operation of a history.
struct LinearizableOperation: Hashable, Sendable, CustomStringConvertible {
    var process: Int
    var key: String
    var call: LinearizableCall
    /// Invocation time (nanoseconds, one clock for the whole history).
    var invoked: UInt64
    /// Response time and outcome; nil: unknown (possibly applied, no response).
    var response: (time: UInt64, outcome: LinearizableOutcome)?

    static func == (a: Self, b: Self) -> Bool {
        a.process == b.process && a.key == b.key && a.call == b.call && a.invoked == b.invoked
            && a.response?.time == b.response?.time && a.response?.outcome == b.response?.outcome
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(process); hasher.combine(key); hasher.combine(call); hasher.combine(invoked)
        hasher.combine(response?.time); hasher.combine(response?.outcome)
    }

    var description: String {
        let answer = response.map { "\($0.outcome) @\($0.time)" } ?? "unknown"
        return "p\(process) \(key) \(call) @\(invoked) → \(answer)"
    }
}

enum KeychainItemModel {
    /// Applies `call` to `state`: the outcome the model gives and the state after it.
    static func step(_ state: LinearizableItem, _ call: LinearizableCall) -> (LinearizableOutcome, LinearizableItem) {
        switch (call, state) {
        case (.add(let value), .absent): (.success, .present(value))
        case (.add, .present): (.duplicate, state)
        case (.update(let value), .present): (.success, .present(value))
        case (.update, .absent): (.notFound, state)
        case (.checkAndSet(let expected, let value), .present(let current)):
            current == expected ? (.success, .present(value)) : (.conflict, state)
        case (.checkAndSet, .absent): (.notFound, state)
        case (.delete, .present): (.success, .absent)
        case (.delete, .absent): (.notFound, state)
        case (.read, .present(let value)): (.value(value), state)
        case (.read, .absent): (.notFound, state)
        }
    }
}

/// The verdict on a history.
struct LinearizabilityVerdict: Sendable, CustomStringConvertible {
    /// Keys whose history has no linearization, with the longest prefix of operations the search could linearize.
    var anomalies: [(key: String, linearized: Int, operations: Int, stuckAt: String)]
    /// Memoized states the searches visited (all keys).
    var statesExplored: Int
    var isLinearizable: Bool { anomalies.isEmpty }

    var description: String {
        if anomalies.isEmpty { return "linearizable (\(statesExplored) states explored)" }
        return anomalies.map { "key \($0.key): not linearizable; at most \($0.linearized) of \($0.operations) operations linearized, stuck at \($0.stuckAt)" }
            .joined(separator: "\n")
    }
}

enum LinearizabilityChecker {
    /// Checks a history of keychain operations: each key on its own, from `initial` (absent by default).
    static func check(_ history: [LinearizableOperation], initial: LinearizableItem = .absent) -> LinearizabilityVerdict {
        var verdict = LinearizabilityVerdict(anomalies: [], statesExplored: 0)
        for (key, operations) in Dictionary(grouping: history, by: \.key).sorted(by: { $0.key < $1.key }) {
            let result = checkKey(operations, initial: initial)
            verdict.statesExplored += result.states
            if !result.ok {
                verdict.anomalies.append((key, result.deepest, operations.count, result.stuckAt))
            }
        }
        return verdict
    }

    /// The Wing–Gong search with Lowe's memoization on one key's operations.
    static func checkKey(_ operations: [LinearizableOperation], initial: LinearizableItem)
        -> (ok: Bool, states: Int, deepest: Int, stuckAt: String) {
        // Events: a call per operation, a return per answered one, in time order; at equal times calls first (the
        // operations then count as concurrent: the permissive reading).
        struct Event { var time: UInt64; var isCall: Bool; var op: Int }
        var events: [Event] = []
        for (index, operation) in operations.enumerated() {
            events.append(Event(time: operation.invoked, isCall: true, op: index))
            if let response = operation.response {
                // A response can never come before its invocation; clamp a clock glitch to the invocation.
                events.append(Event(time: max(response.time, operation.invoked), isCall: false, op: index))
            }
        }
        events.sort { ($0.time, $0.isCall ? 0 : 1, $0.op) < ($1.time, $1.isCall ? 0 : 1, $1.op) }

        // A doubly linked list over the events (index 0 and count+1 are sentinels), with each call's return.
        let count = events.count
        var next = Array(0...(count + 1)).map { $0 + 1 }
        var previous = Array(0...(count + 1)).map { $0 - 1 }
        var returnOf = [Int](repeating: -1, count: operations.count)
        var callOf = [Int](repeating: -1, count: operations.count)
        for (position, event) in events.enumerated() {
            if event.isCall { callOf[event.op] = position + 1 } else { returnOf[event.op] = position + 1 }
        }
        var remainingReturns = operations.filter { $0.response != nil }.count
        func unlink(_ node: Int) { next[previous[node]] = next[node]; previous[next[node]] = previous[node] }
        func relink(_ node: Int) { next[previous[node]] = node; previous[next[node]] = node }
        func lift(_ op: Int) {
            unlink(callOf[op])
            if returnOf[op] >= 0 { unlink(returnOf[op]); remainingReturns -= 1 }
        }
        func unlift(_ op: Int) {
            if returnOf[op] >= 0 { relink(returnOf[op]); remainingReturns += 1 }
            relink(callOf[op])
        }

        struct Memo: Hashable { var linearized: [UInt64]; var state: LinearizableItem }
        var linearized = [UInt64](repeating: 0, count: (operations.count + 63) / 64)
        var cache = Set<Memo>()
        var stack: [(op: Int, state: LinearizableItem)] = []
        var state = initial
        var deepest = 0
        var stuckAt = ""
        var node = next[0]
        let end = count + 1
        while remainingReturns > 0 {
            guard node != end else { break }   // only unanswered calls left after node: cannot happen with returns left
            let event = events[node - 1]
            let operation = operations[event.op]
            if event.isCall {
                let (outcome, after) = KeychainItemModel.step(state, operation.call)
                if operation.response == nil || operation.response?.outcome == outcome {
                    var candidate = linearized
                    candidate[event.op / 64] |= 1 << UInt64(event.op % 64)
                    if cache.insert(Memo(linearized: candidate, state: after)).inserted {
                        stack.append((event.op, state))
                        state = after
                        linearized = candidate
                        lift(event.op)
                        if stack.count > deepest { deepest = stack.count; stuckAt = "" }
                        node = next[0]
                        continue
                    }
                }
                node = next[node]
            } else {
                // A return reached: the operation it closes was not linearized before it. Backtrack.
                if stack.count == deepest, stuckAt.isEmpty { stuckAt = "\(operation) in state \(state)" }
                guard let (op, before) = stack.popLast() else {
                    return (false, cache.count, deepest, stuckAt)
                }
                unlift(op)
                linearized[op / 64] &= ~(1 << UInt64(op % 64))
                state = before
                node = next[callOf[op]]
            }
        }
        return (true, cache.count, deepest, stuckAt)
    }
}
