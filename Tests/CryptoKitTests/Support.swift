#if !canImport(Darwin)
import CryptoKit
import Foundation
import KeychainEngine
import KeychainServices
import Swtpm
import Testing

/// An authenticator that answers with scripted outcomes (the last one repeats) and records every request.
final class CountingAuthenticator: Authenticator, @unchecked Sendable {
    // @unchecked Sendable: the variables are reached only while `lock` is held.
    private let lock = NSLock()
    private var outcomes: [AuthenticationOutcome]
    private var recorded: [AuthenticationRequest] = []
    private var domainState: Data?

    init(_ outcomes: AuthenticationOutcome..., domainState: Data? = nil) {
        self.outcomes = outcomes.isEmpty ? [.success] : outcomes
        self.domainState = domainState
    }

    var requests: [AuthenticationRequest] { lock.withLock { recorded } }
    var count: Int { lock.withLock { recorded.count } }

    func authenticate(_ request: AuthenticationRequest) -> AuthenticationOutcome {
        lock.withLock {
            recorded.append(request)
            if request.cancellation?.isCancelled == true { return .appCancel }
            return outcomes.count > 1 ? outcomes.removeFirst() : outcomes[0]
        }
    }

    func availability(for flags: AccessControlFlags) -> AuthenticationOutcome? { nil }
    var biometryKind: BiometryKind { .fingerprint }
    var biometryDomainState: Data? {
        get { lock.withLock { domainState } }
        set { lock.withLock { domainState = newValue } }
    }
}

/// A clock the test moves by hand.
final class ManualClock: @unchecked Sendable {
    // @unchecked Sendable: `current` is reached only while `lock` is held.
    private let lock = NSLock()
    private var current = Date(timeIntervalSinceReferenceDate: 800_000_000)

    var now: @Sendable () -> Date { { [self] in lock.withLock { current } } }

    func advance(by seconds: TimeInterval) { lock.withLock { current += seconds } }
}

/// Runs `body` on a thread of its own with `token` as the process's Secure Enclave and, for LAContext and key uses, an
/// engine whose authenticator and clock are the test's; restores the previous Secure Enclave and engine after.
///
/// Process-wide state: only suites with `.ownsDefaultKeychain` call it.
func withEnclave<T: Sendable>(_ token: (any SecureEnclaveToken)?, authenticator: any Authenticator = FixedAuthenticator(.success),
                              clock: ManualClock? = nil, _ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await onThread { try inEnclave(token, authenticator: authenticator, clock: clock, body) }
}

/// ``withEnclave(_:authenticator:clock:_:)`` on the calling thread (already one of its own, as in `withSwtpm`).
func inEnclave<T>(_ token: (any SecureEnclaveToken)?, authenticator: any Authenticator = FixedAuthenticator(.success),
                  clock: ManualClock? = nil, _ body: () throws -> T) rethrows -> T {
    let savedToken = KeychainServicesDefaults.secureEnclave
    var configuration = EngineConfiguration()
    if let clock { configuration.now = clock.now }
    KeychainServicesDefaults.setEngine(KeychainEngine(configuration: configuration, authenticator: authenticator))
    KeychainServicesDefaults.useSecureEnclave(token)
    defer {
        KeychainServicesDefaults.useSecureEnclave(savedToken)
        KeychainServicesDefaults.setEngine(nil)
    }
    return try body()
}

/// The ``SecureEnclaveError`` `body` throws, recording an issue when it throws something else or nothing.
func enclaveError(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> SecureEnclaveError? {
    do {
        try body()
        Issue.record("no error was thrown", sourceLocation: sourceLocation)
    } catch let error as SecureEnclaveError {
        return error
    } catch {
        Issue.record("\(type(of: error)) thrown, not SecureEnclaveError: \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// An access control with flags, as apps make it.
func access(_ flags: SecAccessControlCreateFlags, _ protection: CFString = kSecAttrAccessibleWhenUnlockedThisDeviceOnly) -> SecAccessControl {
    SecAccessControlCreateWithFlags(nil, protection, flags, nil)!
}
#endif
