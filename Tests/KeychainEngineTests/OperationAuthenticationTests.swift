import Foundation
import KeychainEngine
import Testing

/// A clock that moves on by a millisecond each time it is read, so no two authorizations of an operation happen at
/// the same instant (a clock standing still would let a reuse duration of 0 cover them by accident).
final class TickingClock: Sendable {
    private let time = Locked(Date(timeIntervalSinceReferenceDate: 800_000_000))
    func now() -> Date { time.withLock { $0 += 0.001; return $0 } }
}

/// One keychain operation over several protected items asks for authentication once: a success covers every item of
/// the operation whose access control the person's factor satisfies, whatever the reuse duration (0 included).
@Suite("A multi-item operation asks for authentication once")
struct OperationAuthenticationTests {
    /// An engine whose clock ticks at every read, with `count` `.userPresence` items of service "svc".
    func fixture(items count: Int, flags: AccessControlFlags = .userPresence,
                 outcomes: [AuthenticationOutcome] = []) throws -> Fixture {
        let clock = TickingClock()
        let f = Fixture(outcomes: outcomes, configure: { $0.now = { clock.now() } })
        for index in 0..<count {
            try f.engine.add(genp("svc", "account-\(index)", [
                Key.valueData: secret("guarded-\(index)"),
                Key.accessControl: .accessControl(AccessControl(accessibility: .whenPasscodeSetThisDeviceOnly, flags: flags)),
            ]))
        }
        return f
    }

    /// Every secret of service "svc" in one copyMatching (kSecMatchLimitAll, kSecReturnData).
    func readAll(_ f: Fixture, _ extra: KeychainQuery = [:]) throws -> [String] {
        let query = genp("svc", nil, [Key.matchLimit: .string(Key.matchLimitAll), Key.returnData: .bool(true)])
        let results = try f.engine.copyMatching(query.merging(extra) { $1 })?.array ?? []
        return results.compactMap(\.string).sorted()
    }

    @Test("2 and 10 .userPresence items in one kSecMatchLimitAll read: one prompt; the next read prompts again",
          arguments: [2, 10])
    func oneReadOnePrompt(count: Int) throws {
        let f = try fixture(items: count)
        let expected = (0..<count).map { "guarded-\($0)" }.sorted()
        #expect(try readAll(f) == expected)
        #expect(f.auth.prompts == 1)
        #expect(try readAll(f) == expected)
        #expect(f.auth.prompts == 2, "a second operation asks again: nothing carries over without a context")
    }

    @Test("with a context whose reuse duration is 0: one prompt per operation", arguments: [2, 10])
    func contextWithoutReuse(count: Int) throws {
        let f = try fixture(items: count)
        let context = AuthenticationContext(reuseDuration: 0)
        let extra: KeychainQuery = [Key.useAuthenticationContext: .authenticationContext(context)]
        #expect(try readAll(f, extra).count == count)
        #expect(f.auth.prompts == 1)
        #expect(try readAll(f, extra).count == count)
        #expect(f.auth.prompts == 2, "a reuse duration of 0 covers no later operation")
    }

    @Test("an update of the secret of 10 protected items asks once")
    func updateOfSeveralItems() throws {
        let f = try fixture(items: 10)
        try f.engine.update(genp("svc"), with: [Key.valueData: secret("changed")])
        #expect(f.auth.prompts == 1)
        #expect(try readAll(f) == Array(repeating: "changed", count: 10))
        #expect(f.auth.prompts == 2)
    }

    @Test("a cancelled prompt fails the whole read with errSecUserCanceled, after one prompt")
    func cancelledOnce() throws {
        let f = try fixture(items: 3, outcomes: [.userCancel])
        #expect(status { _ = try readAll(f) } == Status.userCanceled)
        #expect(f.auth.prompts == 1)
    }

    @Test("items with different access controls: one prompt per factor, not per item")
    func differentFactors() throws {
        let f = try fixture(items: 3, flags: .biometryAny)
        for index in 0..<3 {
            try f.engine.add(genp("svc", "pin-\(index)", [
                Key.valueData: secret("pin-\(index)"),
                Key.accessControl: .accessControl(AccessControl(accessibility: .whenPasscodeSetThisDeviceOnly, flags: .devicePasscode)),
            ]))
        }
        #expect(try readAll(f).count == 6)
        #expect(f.auth.prompts == 2)
        #expect(Set(f.auth.requests.map(\.flags)) == [.biometryAny, .devicePasscode])
    }

    @Test("each item's application password is asked for, even within one operation")
    func applicationPasswordPerItem() throws {
        let f = try fixture(items: 3, flags: .applicationPassword)
        #expect(try readAll(f).count == 3)
        #expect(f.auth.prompts == 3)
    }
}
