#if !canImport(Darwin)
import Foundation

// SecPolicy on Linux: the two policies trust evaluation offers here, after Apple's SecPolicy.c
// (`SecPolicyCreateSSL`, `SecPolicyCreateBasicX509`). What each checks is in ``SecTrustEvaluateWithError(_:_:)``.

/// A trust policy (`SecPolicyRef`): what ``SecTrustEvaluateWithError(_:_:)`` checks besides a valid path to an
/// anchor.
///
/// Create one with ``SecPolicyCreateSSL(_:_:)`` or ``SecPolicyCreateBasicX509()``.
public final class SecPolicy: NSObject, Sendable {
    /// What the policy checks.
    enum Kind: Equatable, Sendable {
        /// RFC 5280 path validation only.
        case basicX509
        /// Path validation, and the leaf's names against `hostname` when there is one.
        case ssl(server: Bool, hostname: String?)
    }

    let kind: Kind

    init(kind: Kind) {
        self.kind = kind
        super.init()
    }

    /// The host name an SSL policy checks the leaf against; nil for a basic policy or an SSL policy without one.
    var hostname: String? {
        if case .ssl(_, let hostname) = kind { return hostname }
        return nil
    }

    /// Equal when they check the same thing.
    public override func isEqual(_ object: Any?) -> Bool {
        (object as? SecPolicy)?.kind == kind
    }

    /// A hash of what the policy checks.
    public override var hash: Int {
        switch kind {
        case .basicX509: return 1
        case .ssl(let server, let hostname): return (server ? 2 : 3) &+ (hostname?.hashValue ?? 0)
        }
    }

    /// `<SecPolicy: basicX509>` or `<SecPolicy: sslServer example.com>`.
    public override var description: String {
        switch kind {
        case .basicX509: return "<SecPolicy: basicX509>"
        case .ssl(let server, let hostname):
            return "<SecPolicy: \(server ? "sslServer" : "sslClient")\(hostname.map { " \($0)" } ?? "")>"
        }
    }
}

/// Creates the policy for evaluating an SSL/TLS certificate chain.
///
/// - Parameters:
///   - server: `true` to evaluate a server's certificate (the usual case), `false` a client's.
///   - hostname: The name the leaf certificate must carry (a DNS name in its subject alternative names, or an IP
///     address for an IP literal); nil to skip the name check.
/// - Returns: The policy, for ``SecTrustCreateWithCertificates(_:_:_:)``.
/// - Important: As Apple's `SecPolicyCreateSSL`, the name is checked whenever one is given, for a client policy
///   too. As Apple's, the SSL policy also checks extended key usage (serverAuth for a server, clientAuth for a
///   client: `errSecInvalidExtendedKeyUsage`, -67609), and for a server SHA-1 signatures
///   (`errSecInvalidDigestAlgorithm`) and the leaf's validity period (`errSecCertificateValidityPeriodTooLong`); the
///   decisions are next to the checks (SecPolicyChecks.swift).
public func SecPolicyCreateSSL(_ server: Bool, _ hostname: CFString?) -> SecPolicy {
    SecPolicy(kind: .ssl(server: server, hostname: hostname.map { String($0) }))
}

/// Creates the basic X.509 policy: a valid path (signatures, validity dates, basic constraints, name
/// constraints) to a trusted anchor, and nothing about names.
public func SecPolicyCreateBasicX509() -> SecPolicy {
    SecPolicy(kind: .basicX509)
}
#endif
