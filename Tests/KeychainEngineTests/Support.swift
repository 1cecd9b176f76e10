import Foundation
import KeychainEngine

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let time = Locked(Date(timeIntervalSinceReferenceDate: 800_000_000))
    var now: Date { time.current }
    func advance(_ seconds: TimeInterval) { time.withLock { $0 += seconds } }
}

/// An authenticator with scripted outcomes that counts its prompts.
final class ScriptedAuthenticator: Authenticator {
    private let state: Locked<(queue: [AuthenticationOutcome], fallback: AuthenticationOutcome, prompts: [AuthenticationRequest])>

    init(_ outcomes: [AuthenticationOutcome] = [], otherwise fallback: AuthenticationOutcome = .success) {
        state = Locked((outcomes, fallback, []))
    }

    var prompts: Int { state.current.prompts.count }
    var requests: [AuthenticationRequest] { state.current.prompts }

    func authenticate(_ request: AuthenticationRequest) -> AuthenticationOutcome {
        state.withLock { s in
            s.prompts.append(request)
            return s.queue.isEmpty ? s.fallback : s.queue.removeFirst()
        }
    }
}

/// A fresh engine over memory with a test clock and a scripted authenticator.
struct Fixture {
    let storage = MemoryStorage()
    let clock = TestClock()
    let auth: ScriptedAuthenticator
    let engine: KeychainEngine

    init(outcomes: [AuthenticationOutcome] = [], otherwise: AuthenticationOutcome = .success,
         configure: (inout EngineConfiguration) -> Void = { _ in }) {
        auth = ScriptedAuthenticator(outcomes, otherwise: otherwise)
        var config = EngineConfiguration()
        let clock = self.clock
        config.now = { clock.now }
        configure(&config)
        engine = KeychainEngine(storage: storage, configuration: config, authenticator: auth)
    }
}

func genp(_ service: String, _ account: String? = nil, _ extra: KeychainQuery = [:]) -> KeychainQuery {
    var q: KeychainQuery = [Key.class: .string("genp"), Key.service: .string(service)]
    if let account { q[Key.account] = .string(account) }
    return q.merging(extra) { $1 }
}

func secret(_ s: String) -> KeychainValue { .data(Data(s.utf8)) }

/// The status an engine call fails with, or 0 when it succeeds.
func status(_ body: () throws -> Void) -> Int32 {
    do { try body(); return Status.success } catch let e as EngineError { return e.status } catch { return Int32.min }
}

extension ItemResult {
    var string: String? { data.flatMap { String(data: $0, encoding: .utf8) } }
}

extension KeychainEngine {
    /// The secret of the one item matching `query`.
    func secretString(_ query: KeychainQuery) throws -> String? {
        var q = query
        q[Key.returnData] = .bool(true)
        return try copyMatching(q)?.string
    }
}
