import Foundation
import X509

/// Hosts mapped to the public keys (SPKI pins) their certificate chains must contain.
///
/// A connection to a pinned host is allowed when normal trust evaluation succeeds (the chain leads to a trusted
/// root, is in its validity period and names the host) **and** a certificate of the validated chain — the leaf, an
/// intermediate or the root — has one of the host's pinned keys. Hosts the policy does not name get normal trust
/// evaluation only.
///
/// ```swift
/// let policy = try PinningPolicy([
///     .init(host: "api.example.com", includeSubdomains: true, pins: [
///         "sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E=",  // the key in use
///         "sha256/YLh1dUR9y6Kja30RrAn7JKnbQG/uEtLMkBgFF2Fuihg=",  // the backup key, kept offline
///     ]),
/// ])
/// ```
///
/// - Important: Every host needs at least two distinct pins, so that a backup key exists: with a single pin, losing
///   or rotating that key takes the app offline until users update it. Pin a key you control (your leaf's, or your
///   own intermediate's) plus an offline backup; pinning a public CA's key lets anyone with a certificate from
///   that CA through.
public struct PinningPolicy: Sendable {
    /// The pins of one host (and optionally its subdomains).
    public struct Rule: Sendable, Hashable {
        /// The host name, lowercased, without a trailing dot.
        public let host: String
        /// Whether the rule also applies to every subdomain of ``host`` (a more specific rule wins).
        public let includeSubdomains: Bool
        /// The pins as given (base64 SHA-256 of a SubjectPublicKeyInfo, `sha256/` prefix optional).
        public let pinTexts: [String]
        /// The date after which the pins are no longer enforced (the host falls back to normal trust), if any.
        public let expiration: Date?

        /// A rule; its pins are checked when the ``PinningPolicy`` is built.
        ///
        /// - Parameters:
        ///   - host: The host name (case and a trailing dot are ignored).
        ///   - includeSubdomains: Whether subdomains of `host` are pinned too.
        ///   - pins: Base64 SHA-256 SPKI pins, at least two distinct ones (`sha256/` prefix optional).
        ///   - expiration: After this date the pins stop being enforced: an app that is no longer updated must not
        ///     be locked out of a server whose keys have all changed.
        public init(host: String, includeSubdomains: Bool = false, pins: [String], expiration: Date? = nil) {
            self.host = PinningPolicy.normalize(host)
            self.includeSubdomains = includeSubdomains
            self.pinTexts = pins
            self.expiration = expiration
        }
    }

    /// What evaluation does when a pinned host's chain has none of its pins.
    public enum Mode: Sendable, Hashable {
        /// Refuse the connection (fail closed). The default.
        case enforce
        /// Allow the connection and report the failure (to roll out a policy and watch before enforcing it).
        case reportOnly
    }

    struct CompiledRule: Sendable {
        let rule: Rule
        let pins: Set<SPKIPin>
    }

    let rules: [CompiledRule]
    /// Whether pin failures refuse connections or are only reported.
    public let mode: Mode
    let now: @Sendable () -> Date
    let onFailure: (@Sendable (PinningFailureReport) -> Void)?

    /// A policy over the given rules.
    ///
    /// - Parameters:
    ///   - rules: One rule per host (a later rule for the same host and `includeSubdomains` replaces an earlier one).
    ///   - mode: ``Mode/enforce`` (default) or ``Mode/reportOnly``. Normal trust evaluation is enforced in both.
    ///   - now: The clock rule expirations are compared with (injectable for tests).
    ///   - onFailure: Called with every pin failure, enforced or report-only. It receives host names and the pins
    ///     seen (public-key digests): nothing secret. Called on the thread that evaluated the chain: keep it short.
    /// - Throws: ``PinningError/malformedPin(host:pin:reason:)`` for a pin that is not base64 or not 32 bytes,
    ///   ``PinningError/tooFewPins(host:count:)`` for a host with fewer than two distinct pins,
    ///   ``PinningError/emptyHost`` for a rule without a host.
    public init(
        _ rules: [Rule],
        mode: Mode = .enforce,
        now: @escaping @Sendable () -> Date = { Date() },
        onFailure: (@Sendable (PinningFailureReport) -> Void)? = nil
    ) throws {
        var compiled: [CompiledRule] = []
        for rule in rules {
            guard !rule.host.isEmpty else { throw PinningError.emptyHost }
            let pins = try Set(rule.pinTexts.map { try SPKIPin($0, host: rule.host) })
            // The same pin twice is no backup.
            guard pins.count >= 2 else { throw PinningError.tooFewPins(host: rule.host, count: pins.count) }
            compiled.removeAll { $0.rule.host == rule.host && $0.rule.includeSubdomains == rule.includeSubdomains }
            compiled.append(CompiledRule(rule: rule, pins: pins))
        }
        self.rules = compiled
        self.mode = mode
        self.now = now
        self.onFailure = onFailure
    }

    /// The rule that applies to `host`, expired or not: an exact rule first, else the subdomain rule of the
    /// longest matching parent domain.
    public func rule(for host: String) -> Rule? { compiledRule(for: host)?.rule }

    func compiledRule(for host: String) -> CompiledRule? {
        let host = Self.normalize(host)
        if let exact = rules.first(where: { $0.rule.host == host && !$0.rule.includeSubdomains }) { return exact }
        return rules
            .filter { $0.rule.includeSubdomains && (host == $0.rule.host || host.hasSuffix("." + $0.rule.host)) }
            .max { $0.rule.host.count < $1.rule.host.count }
    }

    /// The pins enforced for `host` now: none for a host outside the policy or whose rule has expired.
    public func activePins(for host: String) -> Set<SPKIPin> {
        guard let compiled = compiledRule(for: host) else { return [] }
        if let expiration = compiled.rule.expiration, now() >= expiration { return [] }
        return compiled.pins
    }

    /// Checks the pins of `host` against a chain that normal trust evaluation has already validated.
    ///
    /// Use this where the platform evaluated trust itself (a URLSession challenge's `SecTrust`, a TLS stack's own
    /// verification); ``evaluate(chain:host:evaluator:)`` does both.
    ///
    /// - Parameters:
    ///   - validatedChain: The validated chain, DER certificates, leaf first.
    ///   - host: The host connected to.
    /// - Throws: ``PinningError/pinMismatch(host:seen:)`` when `host` is pinned, its rule has not expired, the
    ///   policy enforces, and no certificate of the chain has a pinned key. ``PinningError/unreadableCertificate(host:)``
    ///   when a certificate of a pinned host's chain cannot be parsed.
    public func checkPins(validatedChain: [Data], host: String) throws {
        let pins = activePins(for: host)
        guard !pins.isEmpty else { return }
        var seen: [SPKIPin] = []
        for der in validatedChain {
            guard let pin = try? SPKIPin(certificateDER: der) else {
                throw PinningError.unreadableCertificate(host: Self.normalize(host))
            }
            if pins.contains(pin) { return }
            seen.append(pin)
        }
        let enforced = mode == .enforce
        onFailure?(PinningFailureReport(host: Self.normalize(host), seen: seen, enforced: enforced))
        if enforced { throw PinningError.pinMismatch(host: Self.normalize(host), seen: seen) }
    }

    /// Evaluates trust and then pins for a chain a server presented.
    ///
    /// - Parameters:
    ///   - chain: The certificates the server presented, DER, leaf first.
    ///   - host: The host connected to (checked against the leaf's names, and the key of the policy's rules).
    ///   - evaluator: Normal trust evaluation (``TrustEvaluator/system(anchors:anchorsOnly:verifyDate:)`` by default).
    /// - Returns: The validated chain, leaf first, up to its trusted root.
    /// - Throws: The evaluator's error when the chain is not trusted (a ``TrustEvaluationError`` with Apple's
    ///   OSStatus from the default evaluator), then as ``checkPins(validatedChain:host:)``.
    public func evaluate(chain: [Data], host: String, evaluator: TrustEvaluator = .system()) async throws -> [Data] {
        let validated = try await evaluator.evaluate(chain, host)
        try checkPins(validatedChain: validated, host: host)
        return validated
    }

    static func normalize(_ host: String) -> String {
        var host = host.lowercased().trimmingCharacters(in: .whitespaces)
        while host.hasSuffix(".") { host.removeLast() }
        return host
    }
}

/// A pin failure, as given to ``PinningPolicy``'s `onFailure` callback.
public struct PinningFailureReport: Sendable, Hashable {
    /// The host connected to.
    public let host: String
    /// The pins of the validated chain, leaf first (public-key digests, nothing secret).
    public let seen: [SPKIPin]
    /// Whether the connection was refused (``PinningPolicy/Mode/enforce``) or allowed (``PinningPolicy/Mode/reportOnly``).
    public let enforced: Bool

    /// A report (for tests of `onFailure` callbacks).
    public init(host: String, seen: [SPKIPin], enforced: Bool) {
        self.host = host
        self.seen = seen
        self.enforced = enforced
    }
}

/// Why a pinning policy could not be built, or refused a chain.
public enum PinningError: Error, Hashable, CustomStringConvertible, LocalizedError {
    /// A pin that is not base64, or not the 32 bytes of a SHA-256 digest (host empty for a lone ``SPKIPin``).
    case malformedPin(host: String, pin: String, reason: String)
    /// A host with fewer than two distinct pins: there would be no backup.
    case tooFewPins(host: String, count: Int)
    /// A rule without a host name.
    case emptyHost
    /// A trusted chain in which no certificate has a pinned key of `host`; `seen` are its pins, leaf first.
    case pinMismatch(host: String, seen: [SPKIPin])
    /// A certificate of a pinned host's chain that could not be parsed.
    case unreadableCertificate(host: String)

    public var description: String {
        switch self {
        case .malformedPin(let host, let pin, let reason):
            return "Malformed pin \"\(pin)\"\(host.isEmpty ? "" : " for \(host)"): \(reason)"
        case .tooFewPins(let host, let count):
            return "\(host) has \(count) distinct pin\(count == 1 ? "" : "s"): pin at least two keys, one a backup"
        case .emptyHost:
            return "A pinning rule has no host"
        case .pinMismatch(let host, let seen):
            return "No certificate of the chain for \(host) has a pinned key; pins seen: "
                + seen.map(\.description).joined(separator: ", ")
        case .unreadableCertificate(let host):
            return "A certificate of the chain for \(host) could not be parsed"
        }
    }

    public var errorDescription: String? { description }
}
