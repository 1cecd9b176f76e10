#if !canImport(Darwin)
import Foundation
import KeychainEngine
import X509

// SecTrust on Linux: the trust object and Apple's SecTrust functions. Chain building and validation are
// swift-certificates' Verifier (RFC 5280 path validation), with Apple's SSL policy checks (SecPolicyChecks.swift:
// extended key usage, validity caps, SHA-1) and the SSL policy's host name, against the system's roots
// (TrustRoots.swift) or the anchors set with SecTrustSetAnchorCertificates (SecTrustEvaluation.swift). Names,
// signatures and error codes are Apple's (SecTrust.h; the rules of Apple's open-source SecTrust.c and trustd noted
// where they apply).
//
// Not modelled: revocation (OCSP/CRL), Certificate Transparency, Apple's pinned policies, the keychains' and the
// network's intermediates (AIA fetching), user trust settings. Chains are built only from the certificates given and
// the anchors.

/// The outcome of an evaluation (`SecTrustResultType`): ``SecTrustResultType/unspecified`` for a trusted chain,
/// ``SecTrustResultType/recoverableTrustFailure`` when it failed.
public enum SecTrustResultType: UInt32, Sendable {
    /// Not evaluated yet.
    case invalid = 0
    /// Trusted, and the user said so explicitly (never returned here: there are no user trust settings).
    case proceed = 1
    /// Deprecated by Apple; never returned.
    case confirm = 2
    /// The user chose not to trust a certificate of the chain (never returned here).
    case deny = 3
    /// Trusted: the chain reaches an anchor and meets every policy.
    case unspecified = 4
    /// Not trusted, for a reason a different anchor, date or host name could change.
    case recoverableTrustFailure = 5
    /// Not trusted, and nothing can change it (never returned here).
    case fatalTrustFailure = 6
    /// The evaluation could not run (never returned here).
    case otherError = 7
}

/// A trust evaluation (`SecTrustRef`): the certificates to evaluate (leaf first), the policies, the anchors and
/// the verification date, and after ``SecTrustEvaluateWithError(_:_:)`` the chain that was built.
///
/// Create one with ``SecTrustCreateWithCertificates(_:_:_:)``. Changing the policies, anchors or date discards
/// the previous result; functions that need a result (the chain, the count, the trust result) evaluate first when
/// there is none, as Apple's do.
public final class SecTrust: NSObject, @unchecked Sendable {
    // @unchecked Sendable: the variables (policies, anchors, anchorsOnly, verifyDate, outcome) are reached only
    // inside `locked`, while `lock` is held; `certificates` is a constant.
    /// The outcome of one evaluation: the chain built (leaf first; a partial chain when none reached an anchor)
    /// and the first failure as Apple reports it.
    struct Outcome {
        let chain: [SecCertificate]
        let failure: (status: OSStatus, message: String)?
    }

    private let lock = NSLock()
    private let certificates: [SecCertificate]
    private var policies: [SecPolicy]
    /// nil: the system's roots. Set: these, plus the system's roots when `anchorsOnly` is false.
    private var anchors: [SecCertificate]?
    private var anchorsOnly = true
    private var verifyDate: Date?
    private var outcome: Outcome?

    init(certificates: [SecCertificate], policies: [SecPolicy]) {
        self.certificates = certificates
        self.policies = policies
        super.init()
    }

    /// Runs `body` under the trust's lock.
    private func locked<T>(_ body: (SecTrust) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(self)
    }

    func setPolicies(_ policies: [SecPolicy]) { locked { $0.policies = policies; $0.outcome = nil } }
    func setAnchors(_ anchors: [SecCertificate]?) {
        locked { $0.anchors = anchors; $0.anchorsOnly = anchors != nil; $0.outcome = nil }
    }
    func setAnchorsOnly(_ only: Bool) { locked { $0.anchorsOnly = only; $0.outcome = nil } }
    func setVerifyDate(_ date: Date) { locked { $0.verifyDate = date; $0.outcome = nil } }
    var currentPolicies: [SecPolicy] { locked { $0.policies } }
    var customAnchors: [SecCertificate]? { locked { $0.anchors } }
    var leaf: SecCertificate { certificates[0] }
    /// The result so far, without evaluating.
    var evaluated: Outcome? { locked { $0.outcome } }

    /// The result, evaluating when there is none. The lock is held during the evaluation, so two threads asking at
    /// once evaluate once.
    func evaluate() -> Outcome {
        locked { trust in
            if let outcome = trust.outcome { return outcome }
            let roots: [SecCertificate]
            var systemRoots: [Certificate] = []
            if let anchors = trust.anchors {
                roots = anchors
                if !trust.anchorsOnly { systemRoots = TrustRoots.system }
            } else {
                roots = []
                systemRoots = TrustRoots.system
            }
            let evaluation = TrustEvaluation(
                leaf: trust.certificates[0], intermediates: Array(trust.certificates.dropFirst()),
                anchors: roots, systemRoots: systemRoots, date: trust.verifyDate ?? Date(),
                policies: trust.policies.map(\.kind))
            let outcome = evaluation.run()
            trust.outcome = outcome
            return outcome
        }
    }

    /// `<SecTrust: N certificates, evaluated|not evaluated>`.
    public override var description: String {
        "<SecTrust: \(certificates.count) certificate\(certificates.count == 1 ? "" : "s"), \(evaluated == nil ? "not evaluated" : "evaluated")>"
    }
}

// MARK: - Apple's functions

/// Creates a trust evaluation for a certificate and its intermediates, under one or several policies.
///
/// - Parameters:
///   - certificates: A ``SecCertificate``, or an array of them: the leaf first, then any intermediates, in any
///     order (the chain is built from them).
///   - policies: A ``SecPolicy``, an array of them, or nil for ``SecPolicyCreateBasicX509()`` (Apple's default).
///   - trust: Receives the trust on success.
/// - Returns: `errSecSuccess`; `errSecParam` when `certificates` holds no certificate or something else, or
///   `policies` something other than policies.
public func SecTrustCreateWithCertificates(_ certificates: CFTypeRef, _ policies: CFTypeRef?,
                                           _ trust: UnsafeMutablePointer<SecTrust?>) -> OSStatus {
    guard let certificateList: [SecCertificate] = objects(certificates), !certificateList.isEmpty else { return errSecParam }
    var policyList = [SecPolicyCreateBasicX509()]
    if let policies {
        guard let list: [SecPolicy] = objects(policies) else { return errSecParam }
        policyList = list
    }
    trust.pointee = SecTrust(certificates: certificateList, policies: policyList)
    return errSecSuccess
}

/// One object of type `T`, or an array (`CFArray`, a Swift array) of only such objects; nil otherwise.
private func objects<T>(_ value: Any) -> [T]? {
    if let one = value as? T { return [one] }
    let items: [Any]
    if let array = value as? NSArray { items = array.map { $0 } } else if let array = value as? [Any] { items = array } else { return nil }
    var result: [T] = []
    for item in items {
        guard let typed = item as? T else { return nil }
        result.append(typed)
    }
    return result
}

/// Replaces the trust's policies; the next evaluation uses them.
///
/// - Returns: `errSecSuccess`; `errSecParam` when `policies` is neither a ``SecPolicy`` nor an array of them.
public func SecTrustSetPolicies(_ trust: SecTrust, _ policies: CFTypeRef) -> OSStatus {
    guard let list: [SecPolicy] = objects(policies) else { return errSecParam }
    trust.setPolicies(list)
    return errSecSuccess
}

/// Copies the trust's policies.
///
/// - Returns: `errSecSuccess`.
public func SecTrustCopyPolicies(_ trust: SecTrust, _ policies: UnsafeMutablePointer<CFArray?>) -> OSStatus {
    policies.pointee = trust.currentPolicies as NSArray
    return errSecSuccess
}

/// Sets the anchors: from now on only these certificates are trusted roots, not the system's, unless
/// ``SecTrustSetAnchorCertificatesOnly(_:_:)`` is then called with `false`.
///
/// - Parameters:
///   - trust: The trust to change.
///   - anchorCertificates: The anchors (an empty array trusts nothing); nil returns to the system's roots.
/// - Returns: `errSecSuccess`; `errSecParam` when the array holds something other than certificates.
/// - Important: As Apple's, setting anchors turns the system's roots off; a leaf that is itself an anchor is trusted
///   (its dates and the host name are still checked).
public func SecTrustSetAnchorCertificates(_ trust: SecTrust, _ anchorCertificates: CFArray?) -> OSStatus {
    guard let anchorCertificates else {
        trust.setAnchors(nil)
        return errSecSuccess
    }
    guard let list: [SecCertificate] = objects(anchorCertificates) else { return errSecParam }
    trust.setAnchors(list)
    return errSecSuccess
}

/// Whether only the custom anchors are trusted (`true`, the state after ``SecTrustSetAnchorCertificates(_:_:)``) or
/// the system's roots as well (`false`).
///
/// - Returns: `errSecSuccess`.
public func SecTrustSetAnchorCertificatesOnly(_ trust: SecTrust, _ anchorCertificatesOnly: Bool) -> OSStatus {
    trust.setAnchorsOnly(anchorCertificatesOnly)
    return errSecSuccess
}

/// Copies the custom anchors set with ``SecTrustSetAnchorCertificates(_:_:)``.
///
/// - Returns: `errSecSuccess`, with nil when none were set.
public func SecTrustCopyCustomAnchorCertificates(_ trust: SecTrust, _ anchors: UnsafeMutablePointer<CFArray?>) -> OSStatus {
    anchors.pointee = trust.customAnchors.map { $0 as NSArray }
    return errSecSuccess
}

/// Sets the date the certificates' validity is checked at (by default, the time of the evaluation).
///
/// - Returns: `errSecSuccess`.
public func SecTrustSetVerifyDate(_ trust: SecTrust, _ verifyDate: CFDate) -> OSStatus {
    trust.setVerifyDate(verifyDate as Date)
    return errSecSuccess
}

/// Evaluates the trust: builds a chain from the leaf through the given intermediates to an anchor (the system's
/// roots, or the anchors set), and checks it against the policies at the verification date.
///
/// - Parameters:
///   - trust: The trust to evaluate. The result is kept until the policies, anchors or date change.
///   - error: Nil, or receives on failure a CFError in `kCFErrorDomainOSStatus` with Apple's code and message,
///     the first in this order (Apple's) when several apply:
///     `errSecInvalidDigestAlgorithm` (-67815, "“name” certificate is using a broken signature algorithm": SSL
///     server policy, a certificate signed with SHA-1),
///     `errSecCertificateValidityPeriodTooLong` (-67901, "“name” certificate is not standards compliant": SSL
///     server policy, a leaf valid longer than Apple allows),
///     `errSecNotTrusted` (-67843, "“name” certificate is not trusted": the chain ends at a root that is not an
///     anchor) or `errSecCreateChainFailed` (-25318, same message: an issuer is missing),
///     `errSecInvalidExtendedKeyUsage` (-67609, "“name” certificate is not permitted for this usage": SSL policy,
///     the leaf's extended key usage lacks serverAuth, or clientAuth for a client policy; a CA certificate as a
///     server's leaf),
///     `errSecHostNameMismatch` (-67602, "“name” certificate name does not match input": the host is not among the
///     leaf's subject alternative names),
///     `errSecCertificateExpired` (-67818, "“name” certificate is expired": a certificate of the chain is expired
///     or not yet valid).
/// - Returns: `true` when the chain is trusted.
/// - Important: Synchronous, and it may take milliseconds (the first call reads the system's roots): call it off
///   the main thread, as Apple asks. It never runs on Swift's cooperative pool; no revocation, Certificate
///   Transparency or network fetching is done. The SSL policy checks what Apple's does beyond RFC 5280 (see
///   SecPolicyChecks.swift): extended key usage, and for a server SHA-1 signatures and the leaf's validity period,
///   stricter under the system's roots than under anchors the app set.
public func SecTrustEvaluateWithError(_ trust: SecTrust, _ error: UnsafeMutablePointer<CFError?>?) -> Bool {
    let outcome = trust.evaluate()
    guard let failure = outcome.failure else {
        error?.pointee = nil
        return true
    }
    error?.pointee = NSError(domain: NSOSStatusErrorDomain, code: Int(failure.status),
                             userInfo: [NSLocalizedDescriptionKey: failure.message])
    return false
}

/// The result of the last evaluation, evaluating first when there is none.
///
/// - Returns: `errSecSuccess`, with ``SecTrustResultType/unspecified`` (trusted) or
///   ``SecTrustResultType/recoverableTrustFailure``.
public func SecTrustGetTrustResult(_ trust: SecTrust, _ result: UnsafeMutablePointer<SecTrustResultType>) -> OSStatus {
    result.pointee = trust.evaluate().failure == nil ? .unspecified : .recoverableTrustFailure
    return errSecSuccess
}

/// The number of certificates in the evaluated chain (evaluating first when needed): leaf to anchor on success,
/// the partial chain on failure.
public func SecTrustGetCertificateCount(_ trust: SecTrust) -> CFIndex {
    trust.evaluate().chain.count
}

/// The evaluated chain (evaluating first when needed), leaf first, ending with the anchor on success; on failure
/// the part of the chain that could be built.
public func SecTrustCopyCertificateChain(_ trust: SecTrust) -> CFArray? {
    trust.evaluate().chain as NSArray
}

/// The certificate at `ix` in the evaluated chain (evaluating first when needed); nil out of range.
///
/// Apple deprecated it for ``SecTrustCopyCertificateChain(_:)``; it is kept for the code that still calls it.
public func SecTrustGetCertificateAtIndex(_ trust: SecTrust, _ ix: CFIndex) -> SecCertificate? {
    let chain = trust.evaluate().chain
    return chain.indices.contains(ix) ? chain[ix] : nil
}

/// The leaf certificate's public key.
///
/// - Returns: nil when the key is of a kind SecKey does not have here (neither EC P-256/384/521 nor RSA).
public func SecTrustCopyKey(_ trust: SecTrust) -> SecKey? {
    SecCertificateCopyKey(trust.leaf)
}
#endif
