#if !canImport(Darwin)
import Foundation
import SwiftASN1
@_spi(FixedExpiryValidationTime) @_spi(DisableValidityCheck) import X509

// One SecTrust evaluation: swift-certificates' Verifier builds and validates the path (RFC 5280 path validation,
// Apple's SSL policy checks of SecPolicyChecks.swift, the SSL policy's host name), and the failure is reported as
// Apple's SecTrust.c reports it.

/// One evaluation's inputs, and the rule that turns the verifier's answers into Apple's result.
struct TrustEvaluation {
    let leaf: SecCertificate
    let intermediates: [SecCertificate]
    let anchors: [SecCertificate]
    let systemRoots: [Certificate]
    let date: Date
    let policies: [SecPolicy.Kind]

    /// The host name the SSL policies check the leaf against (the first one's).
    var hostname: String? {
        policies.lazy.compactMap { kind -> String? in
            if case .ssl(_, let hostname) = kind { return hostname }
            return nil
        }.first
    }

    /// Evaluates, then (on failure) tells which of Apple's errors applies.
    ///
    /// The verifier says only "no valid chain", so the reasons are found by asking again with less: without the
    /// validity dates, the host name and Apple's policy checks (is there a path to an anchor at all?), then checking
    /// the path found: its dates, Apple's SSL policy checks (``SSLPolicyChecks``), the host name. Of the failures
    /// found, the one Apple's SecTrust.c reports is returned: the most important subtype (broken signature
    /// algorithm, not standards compliant, not trusted, not permitted for this usage, name mismatch, expired, in
    /// that order), on the certificate nearest the leaf:
    /// - `errSecInvalidDigestAlgorithm`, "“<certificate>” certificate is using a broken signature algorithm".
    /// - `errSecCertificateValidityPeriodTooLong`, "“<leaf>” certificate is not standards compliant".
    /// - No path reaches an anchor, "“<last certificate of the partial chain>” certificate is not trusted": with
    ///   `errSecNotTrusted` when that last certificate is self-issued (a root that is not an anchor: Apple's
    ///   AnchorTrusted check), `errSecCreateChainFailed` when it is not (its issuer is missing: Apple's
    ///   MissingIntermediate check). Apple's SecPolicyChecks.list gives both the "not trusted" subtype, hence the
    ///   one message. Other path failures (bad signature, a non-CA used as a CA) are reported the same way here;
    ///   Apple has finer codes for them. Apple's policy checks and the host name are not looked at without a path
    ///   to an anchor (they rank below it anyway, but for the signature hash and the validity period).
    /// - `errSecInvalidExtendedKeyUsage`, "“<certificate>” certificate is not permitted for this usage".
    /// - The SSL policy's host name is not among the leaf's subject alternative names: `errSecHostNameMismatch`,
    ///   "“<leaf>” certificate name does not match input".
    /// - A certificate of the path is not valid at the verification date (expired or not yet valid):
    ///   `errSecCertificateExpired`, "“<that certificate>” certificate is expired" (Apple's one temporal-validity
    ///   error covers both).
    ///
    /// Apple's CFError also carries an underlying error listing every failure of every certificate; here the
    /// CFError has the reported failure only.
    func run() -> SecTrust.Outcome {
        let known = Dictionary((anchors + intermediates + [leaf]).map { ($0.certificate, $0) }, uniquingKeysWith: { a, _ in a })
        func wrap(_ chain: [Certificate]) -> [SecCertificate] {
            chain.compactMap { known[$0] ?? SecCertificate(der: Data($0.derBytes)) }
        }
        func outcome(_ chain: [SecCertificate], _ failures: [TrustFailure]) -> SecTrust.Outcome {
            guard let failure = TrustFailure.reported(failures) else { return .init(chain: chain, failure: nil) }
            let named = chain.indices.contains(failure.index) ? chain[failure.index] : leaf
            return .init(chain: chain, failure: (failure.status, failure.message(naming: Self.name(named))))
        }
        let systemRootSet = Set(systemRoots)
        // Apple trusts a leaf that is itself an anchor (a self-signed server certificate set as the anchor), checking
        // its dates, the host name and the policies' checks. swift-certificates' RFC 5280 policy refuses a root that
        // is not a CA, so that case is decided here.
        if anchors.contains(leaf) || systemRootSet.contains(leaf.certificate) {
            var failures: [TrustFailure] = []
            if !isValid(leaf.certificate) {
                failures.append(TrustFailure(kind: .expired, status: errSecCertificateExpired, index: 0))
            }
            if !hostnameMatches(leaf.certificate) {
                failures.append(TrustFailure(kind: .name, status: errSecHostNameMismatch, index: 0))
            }
            let source: TrustAnchorSource = systemRootSet.contains(leaf.certificate) ? .system : .app
            failures += SSLPolicyChecks.failures(policies: policies, chain: [leaf.certificate], anchor: source)
            return outcome([leaf], failures)
        }
        if let chain = validate(checkDates: true, checkHostname: true, checkPolicies: true) {
            return .init(chain: wrap(chain), failure: nil)
        }
        let path: [Certificate]
        let reachesAnchor: Bool
        if let chain = validate(checkDates: false, checkHostname: false, checkPolicies: false) {
            path = chain
            reachesAnchor = true
        } else {
            path = partialChain()
            reachesAnchor = false
        }
        var failures: [TrustFailure] = []
        if let index = path.firstIndex(where: { !isValid($0) }) {
            failures.append(TrustFailure(kind: .expired, status: errSecCertificateExpired, index: index))
        }
        if reachesAnchor {
            let source: TrustAnchorSource = path.last.map { systemRootSet.contains($0) } == true ? .system : .app
            failures += SSLPolicyChecks.failures(policies: policies, chain: path, anchor: source)
            if hostname != nil, validate(checkDates: false, checkHostname: true, checkPolicies: false) == nil {
                failures.append(TrustFailure(kind: .name, status: errSecHostNameMismatch, index: 0))
            }
        }
        if !reachesAnchor || failures.isEmpty {
            // No path to an anchor; or nothing wrong with the path found (only another path failed): not trusted.
            let last = path.last ?? leaf.certificate
            let status = reachesAnchor || last.subject == last.issuer ? errSecNotTrusted : errSecCreateChainFailed
            failures.append(TrustFailure(kind: .trust, status: status, index: path.count - 1))
        }
        return outcome(wrap(path), failures)
    }

    /// Whether `certificate` is valid at the verification date.
    func isValid(_ certificate: Certificate) -> Bool {
        date >= certificate.notValidBefore && date <= certificate.notValidAfter
    }

    /// The name Apple's messages give a certificate: its subject summary.
    static func name(_ certificate: SecCertificate) -> String {
        certificate.subjectSummary ?? ""
    }

    /// The verifier's chain (leaf to anchor), or nil when it finds none meeting the policies.
    ///
    /// - Parameters:
    ///   - checkDates: Whether the certificates must be valid at the verification date.
    ///   - checkHostname: Whether the SSL policy's host name (if any) must be among the leaf's names.
    ///   - checkPolicies: Whether the chain must meet Apple's SSL policy checks (``SSLPolicyChecks``).
    func validate(checkDates: Bool, checkHostname: Bool, checkPolicies: Bool) -> [Certificate]? {
        let roots = anchors.map(\.certificate) + systemRoots
        let leaf = leaf.certificate
        let intermediates = intermediates.map(\.certificate)
        let date = date
        let host = checkHostname ? hostname : nil
        let policies = policies
        let systemRootSet = Set(systemRoots)
        return BlockingVerification.run {
            var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
                if checkDates {
                    RFC5280Policy(fixedExpiryValidationTime: date)
                } else {
                    RFC5280Policy.withValidityCheckDisabled()
                }
                SSLPolicyVerifierPolicy(policies: policies, systemRoots: systemRootSet, enforcing: checkPolicies)
                if let host {
                    SSLHostNamePolicy(hostname: host)
                }
            }
            switch await verifier.validate(leaf: leaf, intermediates: CertificateStore(intermediates)) {
            case .validCertificate(let chain): return Array(chain)
            case .couldNotValidate: return nil
            }
        }
    }

    /// Whether the SSL policy's host name (if any) is among the certificate's names, by ``SSLHostNamePolicy`` alone.
    func hostnameMatches(_ certificate: Certificate) -> Bool {
        guard let host = hostname else { return true }
        return BlockingVerification.run {
            var verifier = Verifier(rootCertificates: CertificateStore([certificate])) {
                HostnameOnlyPolicy(certificate: certificate, hostname: host)
            }
            if case .validCertificate = await verifier.validate(leaf: certificate, intermediates: CertificateStore()) { return true }
            return false
        }
    }

    /// When no chain reaches an anchor: the path Apple would report, following issuer names from the leaf through
    /// the given certificates and the anchors, as far as it goes.
    func partialChain() -> [Certificate] {
        let pool = intermediates.map(\.certificate) + anchors.map(\.certificate) + systemRoots
        var chain = [leaf.certificate]
        while let tip = chain.last, tip.issuer != tip.subject, chain.count < 16,
              let issuer = pool.first(where: { $0.subject == tip.issuer && !chain.contains($0) }) {
            chain.append(issuer)
        }
        return chain
    }
}

/// An SSL policy's host name check: swift-certificates' ServerIdentityPolicy (an IP literal against the leaf's IP
/// address names, anything else against its DNS names), on a leaf that has subject alternative names.
///
/// Decision: a leaf without the subject alternative names extension never matches, as Apple's SSL policy since
/// iOS 13 and macOS 10.15 (HT210176: "DNS names in the CommonName of a certificate are no longer trusted");
/// ServerIdentityPolicy alone falls back to the subject's common name.
struct SSLHostNamePolicy: VerifierPolicy {
    var identity: ServerIdentityPolicy
    var verifyingCriticalExtensions: [ASN1ObjectIdentifier] { identity.verifyingCriticalExtensions }

    init(hostname: String) {
        identity = ServerIdentityPolicy(serverHostname: isIPLiteral(hostname) ? nil : hostname,
                                        serverIP: isIPLiteral(hostname) ? hostname : nil)
    }

    mutating func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        guard chain.leaf.extensions[oid: .X509ExtensionID.subjectAlternativeName] != nil else {
            return .failsToMeetPolicy(reason: "The leaf has no subject alternative names (the common name is not read)")
        }
        return identity.chainMeetsPolicyRequirements(chain: chain)
    }
}

/// ``SSLHostNamePolicy`` for one certificate, which declares that certificate's critical extensions handled (so
/// that only the name is checked).
struct HostnameOnlyPolicy: VerifierPolicy {
    var name: SSLHostNamePolicy
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier]

    init(certificate: Certificate, hostname: String) {
        name = SSLHostNamePolicy(hostname: hostname)
        verifyingCriticalExtensions = certificate.extensions.filter(\.critical).map(\.oid)
    }

    mutating func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        await name.chainMeetsPolicyRequirements(chain: chain)
    }
}

/// Whether `text` is an IPv4 or IPv6 literal (which an SSL policy matches against IP address names).
func isIPLiteral(_ text: String) -> Bool {
    var v4 = in_addr()
    var v6 = in6_addr()
    return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
}
#endif
