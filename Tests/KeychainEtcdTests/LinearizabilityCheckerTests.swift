import Foundation
import Testing

/// A history written as a test reads: `op(process, call, from, to, outcome)`, times in arbitrary units.
private func op(_ process: Int, _ call: LinearizableCall, _ from: UInt64, _ to: UInt64?, _ outcome: LinearizableOutcome? = nil,
                key: String = "k") -> LinearizableOperation {
    LinearizableOperation(process: process, key: key, call: call, invoked: from,
                          response: to.map { ($0, outcome ?? .success) })
}

/// A small deterministic generator (SplitMix64), so a failing random history can be replayed from its seed.
private struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A history that is linearizable by construction: `processes` processes each run `perProcess` operations one after
/// another on `keys` keys; each operation takes effect at a random moment inside its interval, the outcomes are the
/// model's in the order of those moments. `unknown` of them (a fraction) lose their response, as a timed-out call's.
private func generatedHistory(seed: UInt64, processes: Int, perProcess: Int, keys: Int, unknown: Double = 0)
    -> [LinearizableOperation] {
    var random = SplitMix(state: seed)
    var planned: [(operation: LinearizableOperation, point: UInt64)] = []
    var written = 0
    var lastRead: [String: String] = [:]
    for process in 0..<processes {
        var clock: UInt64 = UInt64.random(in: 0..<20, using: &random)
        for _ in 0..<perProcess {
            let key = "k\(Int.random(in: 0..<keys, using: &random))"
            written += 1
            let value = "p\(process)-\(written)"
            let call: LinearizableCall
            switch Int.random(in: 0..<10, using: &random) {
            case 0, 1: call = .add(value)
            case 2, 3: call = .update(value)
            case 4, 5: call = .checkAndSet(expected: lastRead[key] ?? "none", value: value)
            case 6: call = .delete
            default: call = .read
            }
            let start = clock
            let end = start + UInt64.random(in: 1..<40, using: &random)
            let point = UInt64.random(in: start...end, using: &random)
            planned.append((LinearizableOperation(process: process, key: key, call: call, invoked: start, response: (end, .success)), point))
            clock = end + UInt64.random(in: 0..<5, using: &random)
            if case .read = call { lastRead[key] = lastRead[key] ?? "none" }
        }
    }
    // Apply in the order of the chosen moments; each answer is the model's.
    var states: [String: LinearizableItem] = [:]
    var history: [LinearizableOperation] = []
    for (operation, _) in planned.sorted(by: { ($0.point, $0.operation.process) < ($1.point, $1.operation.process) }) {
        var answered = operation
        let (outcome, after) = KeychainItemModel.step(states[operation.key] ?? .absent, operation.call)
        states[operation.key] = after
        answered.response = (operation.response!.time, outcome)
        if Double.random(in: 0..<1, using: &random) < unknown, operation.call != .read { answered.response = nil }
        history.append(answered)
    }
    return history
}

@Suite("Linearizability checker (Wing–Gong with memoization) for a keychain's items")
struct LinearizabilityCheckerTests {
    // MARK: known-bad histories: each must be rejected

    @Test("rejects a stale read: a read that starts after an acknowledged update returns the value before it")
    func staleRead() {
        let history = [
            op(0, .add("a"), 0, 1),
            op(0, .update("b"), 2, 3),
            op(1, .read, 4, 5, .value("a")),
        ]
        #expect(!LinearizabilityChecker.check(history).isLinearizable)
    }

    @Test("rejects two successful adds of one key, one after the other and at once")
    func twoAdds() {
        #expect(!LinearizabilityChecker.check([op(0, .add("a"), 0, 1), op(1, .add("b"), 2, 3)]).isLinearizable)
        #expect(!LinearizabilityChecker.check([op(0, .add("a"), 0, 10), op(1, .add("b"), 1, 9)]).isLinearizable)
    }

    @Test("rejects a lost acknowledged write: an acknowledged add no later read sees, with no delete")
    func lostAdd() {
        let history = [
            op(0, .add("a"), 0, 1),
            op(1, .read, 5, 6, .notFound),
        ]
        #expect(!LinearizabilityChecker.check(history).isLinearizable)
    }

    @Test("rejects a lost acknowledged update: the final read returns the value the last acknowledged update replaced")
    func lostUpdate() {
        let history = [
            op(0, .add("a"), 0, 1),
            op(1, .update("b"), 2, 4),
            op(2, .update("c"), 5, 7),
            op(3, .read, 8, 9, .value("b")),
        ]
        #expect(!LinearizabilityChecker.check(history).isLinearizable)
    }

    @Test("rejects two check-and-sets from the same version that both succeed")
    func twoCheckAndSets() {
        let history = [
            op(0, .add("a"), 0, 1),
            op(1, .checkAndSet(expected: "a", value: "b"), 2, 10),
            op(2, .checkAndSet(expected: "a", value: "c"), 3, 9),
        ]
        #expect(!LinearizabilityChecker.check(history).isLinearizable)
    }

    @Test("rejects a read of a value never written, and a value read after an acknowledged delete")
    func phantomAndResurrected() {
        #expect(!LinearizabilityChecker.check([op(0, .add("a"), 0, 1), op(1, .read, 2, 3, .value("z"))]).isLinearizable)
        #expect(!LinearizabilityChecker.check([op(0, .add("a"), 0, 1), op(0, .delete, 2, 3), op(1, .read, 4, 5, .value("a"))])
            .isLinearizable)
    }

    @Test("rejects a delete answering notFound while the item exists, and an update answering success on an absent item")
    func wrongNotFound() {
        #expect(!LinearizabilityChecker.check([op(0, .add("a"), 0, 1), op(1, .delete, 2, 3, .notFound)]).isLinearizable)
        #expect(!LinearizabilityChecker.check([op(0, .update("a"), 0, 1)]).isLinearizable)
    }

    @Test("rejects a lost write even when an operation of unknown outcome could explain only part of it")
    func unknownDoesNotExcuseEverything() {
        // The unknown delete may have applied, but only once: the second read after it cannot see "a" again.
        let history = [
            op(0, .add("a"), 0, 1),
            op(1, .delete, 2, nil),
            op(2, .read, 5, 6, .notFound),
            op(2, .read, 7, 8, .value("a")),
        ]
        #expect(!LinearizabilityChecker.check(history).isLinearizable)
    }

    @Test("rejects a generated history once one read answers a value nobody wrote; another key's anomaly is named")
    func generatedCorrupted() throws {
        for seed in UInt64(1)...20 {
            var history = generatedHistory(seed: seed, processes: 4, perProcess: 60, keys: 3)
            let reads = history.indices.filter { history[$0].call == .read }
            let index = try #require(reads.dropFirst(reads.count / 2).first)
            history[index].response = (history[index].response!.time, .value("never-written"))
            let verdict = LinearizabilityChecker.check(history)
            #expect(verdict.anomalies.map(\.key) == [history[index].key], "seed \(seed): \(verdict)")
        }
    }

    // MARK: known-good histories: each must be accepted

    @Test("accepts racing adds (one success, one duplicate) and reads at once with an update seeing either value")
    func concurrentGood() {
        let history = [
            op(0, .add("a"), 0, 10),
            op(1, .add("b"), 1, 9, .duplicate),
            op(2, .read, 11, 12, .value("a")),
            op(0, .update("c"), 13, 20),
            op(1, .read, 14, 15, .value("a")),
            op(2, .read, 16, 17, .value("c")),
            op(1, .read, 21, 22, .value("c")),
        ]
        let verdict = LinearizabilityChecker.check(history)
        #expect(verdict.isLinearizable, "\(verdict)")
    }

    @Test("accepts a read at once with an add that answers before the add (the add took effect first)")
    func readOverlapsAdd() {
        let verdict = LinearizabilityChecker.check([op(0, .add("a"), 0, 10), op(1, .read, 2, 5, .value("a"))])
        #expect(verdict.isLinearizable, "\(verdict)")
    }

    @Test("accepts an operation of unknown outcome either applied (seen later) or never applied")
    func unknownOutcome() {
        let applied = [op(0, .add("a"), 0, 1), op(1, .update("b"), 2, nil), op(2, .read, 10, 11, .value("b"))]
        let notApplied = [op(0, .add("a"), 0, 1), op(1, .update("b"), 2, nil), op(2, .read, 10, 11, .value("a"))]
        let lateApplied = [op(0, .add("a"), 0, 1), op(1, .update("b"), 2, nil), op(2, .read, 10, 11, .value("a")),
                           op(2, .read, 12, 13, .value("b"))]
        let unknownAdd = [op(0, .add("a"), 0, nil), op(1, .add("b"), 5, 6, .duplicate), op(1, .read, 7, 8, .value("a"))]
        for history in [applied, notApplied, lateApplied, unknownAdd] {
            let verdict = LinearizabilityChecker.check(history)
            #expect(verdict.isLinearizable, "\(history): \(verdict)")
        }
    }

    @Test("accepts two check-and-sets from one version: one succeeds, the other reports a version conflict")
    func checkAndSetRace() {
        let history = [
            op(0, .add("a"), 0, 1),
            op(1, .checkAndSet(expected: "a", value: "b"), 2, 10, .conflict),
            op(2, .checkAndSet(expected: "a", value: "c"), 3, 9),
            op(1, .read, 11, 12, .value("c")),
        ]
        let verdict = LinearizabilityChecker.check(history)
        #expect(verdict.isLinearizable, "\(verdict)")
    }

    @Test("accepts generated linearizable histories (4 processes, 3 keys), with and without unknown outcomes")
    func generatedGood() {
        for seed in UInt64(1)...20 {
            for unknown in [0.0, 0.05] {
                let history = generatedHistory(seed: seed, processes: 4, perProcess: 60, keys: 3, unknown: unknown)
                let verdict = LinearizabilityChecker.check(history)
                #expect(verdict.isLinearizable, "seed \(seed), unknown \(unknown): \(verdict)")
            }
        }
    }
}
