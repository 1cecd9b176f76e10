#if !canImport(Darwin)
import Foundation
import KeychainEngine
import SwiftASN1
@_spi(FixedExpiryValidationTime) @_spi(DisableValidityCheck) import X509

// SecTrust on Linux: chain building and validation by swift-certificates' Verifier (RFC 5280 path validation,
// and its ServerIdentityPolicy for an SSL policy's host name), against the system's roots (TrustRoots.swift) or
// the anchors set with SecTrustSetAnchorCertificates. Names, signatures and error codes are Apple's (SecTrust.h;
// the rules of Apple's open-source SecTrust.c and trustd noted where they apply).
//
// Not modelled: revocation (OCSP/CRL), Certificate Transparency, Apple's pinned policies, the keychains' and the
// network's intermediates (AIA fetching), user trust settings, extended key usage. Chains are built only from the
// certificates given and the anchors.

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
                hostname: trust.policies.lazy.compactMap(\.hostname).first)
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

// MARK: - Evaluation

/// One evaluation's inputs, and the rule that turns the verifier's answers into Apple's result.
struct TrustEvaluation {
    let leaf: SecCertificate
    let intermediates: [SecCertificate]
    let anchors: [SecCertificate]
    let systemRoots: [Certificate]
    let date: Date
    let hostname: String?

    /// Evaluates, then (on failure) tells which of Apple's errors applies.
    ///
    /// The verifier says only "no valid chain", so the reason is found by asking again with less: first without the
    /// validity dates and the host name (is there a path to an anchor at all?), then looking at the dates of the
    /// path found, then asking with the host name. When several apply, the first in Apple's order is reported
    /// (SecTrust.c lists its errors by priority: … expired, not trusted, name mismatch …):
    /// 1. A certificate of the path is not valid at the verification date (expired or not yet valid):
    ///    `errSecCertificateExpired`, "“<that certificate>” certificate is expired" (Apple's one temporal-validity
    ///    error covers both).
    /// 2. No path reaches an anchor, "“<last certificate of the partial chain>” certificate is not trusted": with
    ///    `errSecNotTrusted` when that last certificate is self-issued (a root that is not an anchor: Apple's
    ///    AnchorTrusted check), `errSecCreateChainFailed` when it is not (its issuer is missing: Apple's
    ///    MissingIntermediate check). Apple's SecPolicyChecks.list gives both the "not trusted" subtype, hence the
    ///    one message. Other path failures (bad signature, a non-CA used as a CA) are reported the same way here;
    ///    Apple has finer codes for them.
    /// 3. The SSL policy's host name is not among the leaf's names: `errSecHostNameMismatch`,
    ///    "“<leaf>” certificate name does not match input".
    ///
    /// Apple's CFError also carries an underlying error listing every failure of every certificate; here the
    /// CFError has the reported failure only.
    func run() -> SecTrust.Outcome {
        let known = Dictionary((anchors + intermediates + [leaf]).map { ($0.certificate, $0) }, uniquingKeysWith: { a, _ in a })
        func wrap(_ chain: [Certificate]) -> [SecCertificate] {
            chain.compactMap { known[$0] ?? SecCertificate(der: Data($0.derBytes)) }
        }
        // Apple trusts a leaf that is itself an anchor (a self-signed server certificate set as the anchor), checking
        // only its dates and the host name. swift-certificates' RFC 5280 policy refuses a root that is not a CA, so
        // that case is decided here.
        if anchors.contains(leaf) || systemRoots.contains(leaf.certificate) {
            if date < leaf.certificate.notValidBefore || date > leaf.certificate.notValidAfter {
                return .init(chain: [leaf], failure: (errSecCertificateExpired, "“\(Self.name(leaf))” certificate is expired"))
            }
            if !hostnameMatches(leaf.certificate) {
                return .init(chain: [leaf], failure: (errSecHostNameMismatch, "“\(Self.name(leaf))” certificate name does not match input"))
            }
            return .init(chain: [leaf], failure: nil)
        }
        if let chain = validate(checkDates: true, checkHostname: true) {
            return .init(chain: wrap(chain), failure: nil)
        }
        let path: [Certificate]
        let reachesAnchor: Bool
        if let chain = validate(checkDates: false, checkHostname: false) {
            path = chain
            reachesAnchor = true
        } else {
            path = partialChain()
            reachesAnchor = false
        }
        let chain = wrap(path)
        if let index = path.firstIndex(where: { date < $0.notValidBefore || date > $0.notValidAfter }) {
            return .init(chain: chain, failure: (errSecCertificateExpired, "“\(Self.name(chain[index]))” certificate is expired"))
        }
        if reachesAnchor, hostname != nil, validate(checkDates: false, checkHostname: true) == nil {
            return .init(chain: chain, failure: (errSecHostNameMismatch, "“\(Self.name(leaf))” certificate name does not match input"))
        }
        let last = path.last ?? leaf.certificate
        let status = reachesAnchor || last.subject == last.issuer ? errSecNotTrusted : errSecCreateChainFailed
        return .init(chain: chain, failure: (status, "“\(Self.name(chain.last ?? leaf))” certificate is not trusted"))
    }

    /// The name Apple's messages give a certificate: its subject summary.
    static func name(_ certificate: SecCertificate) -> String {
        certificate.subjectSummary ?? ""
    }

    /// The verifier's chain (leaf to anchor), or nil when it finds none meeting the policies.
    func validate(checkDates: Bool, checkHostname: Bool) -> [Certificate]? {
        let roots = anchors.map(\.certificate) + systemRoots
        let leaf = leaf.certificate
        let intermediates = intermediates.map(\.certificate)
        let date = date
        let host = checkHostname ? hostname : nil
        return BlockingVerification.run {
            var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
                if checkDates {
                    RFC5280Policy(fixedExpiryValidationTime: date)
                } else {
                    RFC5280Policy.withValidityCheckDisabled()
                }
                if let host {
                    // An IP literal is matched against the leaf's IP address names, anything else its DNS names.
                    ServerIdentityPolicy(serverHostname: isIPLiteral(host) ? nil : host,
                                         serverIP: isIPLiteral(host) ? host : nil)
                }
            }
            switch await verifier.validate(leaf: leaf, intermediates: CertificateStore(intermediates)) {
            case .validCertificate(let chain): return Array(chain)
            case .couldNotValidate: return nil
            }
        }
    }

    /// Whether the SSL policy's host name (if any) is among the certificate's names, by swift-certificates'
    /// ServerIdentityPolicy alone.
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

/// ServerIdentityPolicy for one certificate, which declares that certificate's critical extensions handled (so
/// that only the name is checked).
struct HostnameOnlyPolicy: VerifierPolicy {
    var identity: ServerIdentityPolicy
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier]

    init(certificate: Certificate, hostname: String) {
        identity = ServerIdentityPolicy(serverHostname: isIPLiteral(hostname) ? nil : hostname,
                                        serverIP: isIPLiteral(hostname) ? hostname : nil)
        verifyingCriticalExtensions = certificate.extensions.filter(\.critical).map(\.oid)
    }

    mutating func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        identity.chainMeetsPolicyRequirements(chain: chain)
    }
}

/// Whether `text` is an IPv4 or IPv6 literal (which an SSL policy matches against IP address names).
func isIPLiteral(_ text: String) -> Bool {
    var v4 = in_addr()
    var v6 = in6_addr()
    return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
}

/// Runs the verifier's async validation from synchronous code.
///
/// `Verifier.validate` is async, SecTrust's API is synchronous. The calling thread becomes the task's executor:
/// the task is started with a task-executor preference for an executor whose jobs are queued and run by the
/// calling thread itself, which waits on a condition until the task has finished. So no job of the validation
/// ever runs on Swift's cooperative pool, and blocking the caller cannot starve the pool (a call from async code
/// blocks its own thread for the evaluation, as Apple's synchronous SecTrustEvaluateWithError does; with stores
/// made of certificates, as here, the validation never waits for anything but CPU).
enum BlockingVerification {
    static func run<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        let executor = CallerThreadExecutor()
        let result = Locked<T?>(nil)
        Task(executorPreference: executor) {
            let value = await body()
            result.withLock { $0 = value }
            executor.finish()
        }
        executor.runJobs()
        guard let value = result.withLock({ $0 }) else { preconditionFailure("the validation task ended without a result") }
        return value
    }
}

/// A task executor whose jobs are run by the thread that calls ``runJobs()``, until ``finish()``.
final class CallerThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var finished = false

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    func finish() {
        condition.lock()
        finished = true
        condition.signal()
        condition.unlock()
    }

    func runJobs() {
        while true {
            condition.lock()
            while jobs.isEmpty && !finished { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
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
/// - Parameter anchorCertificates: The anchors (an empty array trusts nothing); nil returns to the system's roots.
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
///   - error: Nil, or receives on failure a CFError in `kCFErrorDomainOSStatus` with Apple's code and message:
///     `errSecCertificateExpired` (-67818, "“name” certificate is expired": a certificate of the chain is expired
///     or not yet valid), `errSecNotTrusted` (-67843, "“name” certificate is not trusted": the chain ends at a
///     root that is not an anchor) or `errSecCreateChainFailed` (-25318, same message: an issuer is missing),
///     `errSecHostNameMismatch` (-67602, "“name” certificate name does not match input"). The first in that order
///     is reported when several apply.
/// - Returns: `true` when the chain is trusted.
/// - Important: Synchronous, and it may take milliseconds (the first call reads the system's roots): call it off
///   the main thread, as Apple asks. It never runs on Swift's cooperative pool; no revocation, Certificate
///   Transparency or network fetching is done.
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
