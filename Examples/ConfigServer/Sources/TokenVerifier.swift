import Crypto
import Foundation
import KeychainEngine

/// The API tokens a replica accepts: the current one, and the previous one for a grace period after a rotation.
///
/// Decision (the rotation window): a rotation written on one machine reaches each replica a few milliseconds apart
/// (etcd's watch), and clients learn the new token at their own pace. A replica therefore keeps accepting the token
/// it replaced for `grace` after it saw the rotation, then only the new one; a second rotation ends the grace of the
/// first at once (at most two tokens are ever accepted). So a client that switches to the new token once every replica
/// serves it never gets a 401, and an old token stops working `grace` after the last replica saw the rotation.
/// `grace` 0 refuses the previous token as soon as the replica sees the new one.
///
/// Tokens are compared as SHA-256 digests (swift-crypto's digest equality is constant-time), so neither a token's
/// bytes nor its length leaks through the comparison's timing. The tokens are never logged nor described.
final class TokenVerifier: Sendable {
    private struct State: Sendable {
        var current: SHA256Digest?
        var previous: SHA256Digest?
        var previousUntil: ContinuousClock.Instant?
        var rotations = 0
    }

    private let state = Locked(State())
    private let grace: Duration
    private let now: @Sendable () -> ContinuousClock.Instant

    /// - Parameters:
    ///   - grace: how long the previous token is still accepted after this replica saw a rotation.
    ///   - now: the clock (tests pass their own).
    init(grace: Duration, now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }) {
        self.grace = grace
        self.now = now
    }

    /// Whether a token is known (the first value arrived).
    var hasToken: Bool { state.withLock { $0.current != nil } }

    /// How many rotations this replica saw since it started (the first value is not one).
    var rotations: Int { state.withLock { $0.rotations } }

    /// Takes `token` as the current token. The token it replaces stays accepted for the grace period.
    func update(_ token: String) {
        let digest = SHA256.hash(data: Data(token.utf8))
        let at = now()
        state.withLock { state in
            guard state.current != digest else { return }
            if let old = state.current {
                state.previous = old
                state.previousUntil = at.advanced(by: grace)
                state.rotations += 1
            }
            state.current = digest
        }
    }

    /// Drops every token (the keychain was locked): every request is refused until the next ``update(_:)``.
    func forget() {
        state.withLock { $0 = State(rotations: $0.rotations) }
    }

    /// What a presented token is.
    enum Verdict: Equatable {
        case current, previous, refused
    }

    /// Checks `presented` against the current token and, within its grace, the previous one.
    func check(_ presented: String) -> Verdict {
        let digest = SHA256.hash(data: Data(presented.utf8))
        let at = now()
        return state.withLock { state in
            if let current = state.current, current == digest { return .current }
            if let previous = state.previous, let until = state.previousUntil, at < until, previous == digest {
                return .previous
            }
            return .refused
        }
    }
}

/// The database password's fingerprint: proves a replica holds the password without revealing it.
///
/// HMAC-SHA256 keyed by the password over a fixed label, the first 16 bytes in hex. It is not the password and does
/// not let anyone compute it (for a strong password); a weak password can still be guessed offline from it, as from
/// any function of it: keep the endpoint internal.
func databaseFingerprint(_ password: String) -> String {
    let mac = HMAC<SHA256>.authenticationCode(for: Data("keystone-config-server/db-fingerprint/v1".utf8),
                                              using: SymmetricKey(data: Data(password.utf8)))
    return Data(mac).prefix(16).map { String(format: "%02x", $0) }.joined()
}
