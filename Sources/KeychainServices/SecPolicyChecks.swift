#if !canImport(Darwin)
import Foundation
import SwiftASN1
import X509

// What Apple's SSL policy checks beyond RFC 5280 path validation and the host name, for SecTrust on Linux.
//
// The facts come from Apple's open-source Security project: SecPolicy.c (SecPolicyCreateSSL and set_ssl_ekus: which
// checks an SSL policy has), trustd's SecPolicyServer.c (SecPolicyCheckServerAuthEKU, ...ValidityPeriodMaximums,
// ...SignatureHashAlgorithms, ...KeySize), SecPolicyChecks.list (each check's OSStatus and error subtype) and
// SecTrust.c (which failure the CFError reports); and from Apple's support articles HT210176 ("Requirements for
// trusted certificates in iOS 13 and macOS 10.15") and HT211025 (398 days). The code is Keystone's own.
//
// What SecPolicyCreateSSL checks here, and what it does not (each a `Decision:` below):
// 1. Extended key usage of the leaf, every SSL policy (Apple's ExtendedKeyUsage check, set_ssl_ekus).
// 2. The stricter serverAuth rule of a server policy, by the kind of anchor (Apple's ServerAuthEKU check).
// 3. A CA certificate as the leaf: refused through 1 and 2, as Apple does (no separate CA check).
// 4. The validity period of a server's leaf (Apple's ValidityPeriodMaximums check), by the kind of anchor.
// 5. SHA-1 signatures in a server's chain (Apple's SignatureHashAlgorithms check).
// 6. Key sizes: true by construction (see `Decision:` at `SSLPolicyChecks`).
// 7. Key usage: not checked, as Apple's SSL and basic policies do not.
// 8. Names only from the subject alternative names (SecTrust.swift's `SSLHostNamePolicy`).
// Not modelled: Certificate Transparency (Apple requires it for chains to its system roots), revocation, Apple's
// blocked and graylisted keys, App Transport Security pins, user and admin trust settings.

/// `errSecInvalidExtendedKeyUsage` (-67609): the leaf's extended key usage does not allow the policy's use (an SSL
/// server's leaf without serverAuth, a client's without clientAuth), or an intermediate's does not.
public let errSecInvalidExtendedKeyUsage: OSStatus = -67609
/// `errSecInvalidDigestAlgorithm` (-67815): a certificate of the chain is signed with a hash the policy refuses
/// (SHA-1, for an SSL server).
public let errSecInvalidDigestAlgorithm: OSStatus = -67815
/// `errSecUnsupportedKeySize` (-67735): a certificate's key is smaller than the policy allows.
public let errSecUnsupportedKeySize: OSStatus = -67735
/// `errSecCertificateValidityPeriodTooLong` (-67901): an SSL server's leaf is valid for longer than Apple allows.
public let errSecCertificateValidityPeriodTooLong: OSStatus = -67901

/// Where a chain's anchor comes from: some of Apple's TLS server requirements depend on it.
enum TrustAnchorSource: Sendable {
    /// One of the system's roots (the distribution's CA bundle, or `SSL_CERT_FILE`/`SSL_CERT_DIR`): Apple's rules for
    /// its system trust store.
    ///
    /// Decision: the whole bundle counts as the system's roots, a CA an administrator added to it
    /// (`update-ca-certificates`) too. Apple exempts roots trusted through user or admin trust settings from the
    /// serverAuth and validity rules; Linux has no such settings, and a CA bundle does not say which roots are
    /// public, so the stricter rules apply to all of it. An app that trusts a private CA passes it as an anchor
    /// (`SecTrustSetAnchorCertificates`), which gets the rules for app anchors.
    case system
    /// An anchor the app set with `SecTrustSetAnchorCertificates`, a leaf that is itself such an anchor included.
    case app
}

/// One failed check: Apple's status, the subtype that ranks it and words its message, and the certificate (index
/// in the chain, the leaf 0) it concerns.
struct TrustFailure: Sendable, Equatable {
    /// Apple's error subtypes (SecTrust.c's SecTrustErrorSubType), most important first: when several checks fail,
    /// the CFError reports the most important subtype, and of several certificates with it the one nearest the leaf.
    enum Kind: Int, Sendable, Comparable {
        case weakHash = 3, compliance = 5, trust = 7, usage = 8, name = 9, expired = 10

        static func < (lhs: Kind, rhs: Kind) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    let kind: Kind
    let status: OSStatus
    let index: Int

    /// Apple's message for the subtype (SecFrameworkStrings.h, SEC_TRUST_ERROR_SUBTYPE_*), naming the certificate.
    func message(naming name: String) -> String {
        switch kind {
        case .weakHash: "“\(name)” certificate is using a broken signature algorithm"
        case .compliance: "“\(name)” certificate is not standards compliant"
        case .trust: "“\(name)” certificate is not trusted"
        case .usage: "“\(name)” certificate is not permitted for this usage"
        case .name: "“\(name)” certificate name does not match input"
        case .expired: "“\(name)” certificate is expired"
        }
    }

    /// The failure Apple's CFError reports among `failures`; nil when there is none.
    static func reported(_ failures: [TrustFailure]) -> TrustFailure? {
        failures.min { ($0.kind, $0.index) < ($1.kind, $1.index) }
    }
}

/// Apple's SSL policy checks on a chain (leaf first, anchor last) that path validation accepted.
///
/// Decision (key sizes, Apple's KeySize and WeakKeySize checks: an SSL server's chain needs RSA of 2048 bits or more
/// and EC of P-256 or more, every policy RSA of 1024 or more): true by construction here. A SecCertificate on Linux
/// is a swift-certificates `Certificate`, which cannot hold an RSA key under 2048 bits nor an EC key on a curve
/// other than P-256, P-384 and P-521: `SecCertificateCreateWithData` returns nil for such a certificate and the CA
/// bundle's reader skips it. So no chain reaches these checks with a weaker key, and `errSecUnsupportedKeySize` is
/// never returned by trust evaluation.
///
/// Decision (key usage): not checked. Apple's SSL and basic X.509 policies do not check the key usage extension
/// (SecPolicy.c adds kSecPolicyCheckKeyUsage only to other policies; SecPolicyCreateSSLWithKeyUsage only reports it),
/// and swift-certificates' RFC 5280 policy declares it handled without enforcing it. A leaf whose key usage does not
/// fit TLS passes, as on Apple platforms.
enum SSLPolicyChecks {
    static let serverAuth = ASN1ObjectIdentifier.ExtendedKeyUsage.serverAuth
    static let clientAuth = ASN1ObjectIdentifier.ExtendedKeyUsage.clientAuth
    static let anyUsage = ASN1ObjectIdentifier.ExtendedKeyUsage.any
    /// Microsoft's and Netscape's Server Gated Cryptography usages, which Apple accepts for a server.
    static let microsoftSGC: ASN1ObjectIdentifier = [1, 3, 6, 1, 4, 1, 311, 10, 3, 3]
    static let netscapeSGC: ASN1ObjectIdentifier = [2, 16, 840, 1, 113_730, 4, 1]

    /// Apple's dates (CFAbsoluteTime values of trustd), compared with a leaf's notBefore.
    static let july2016 = Date(timeIntervalSinceReferenceDate: 489_024_000)
    static let march2018 = Date(timeIntervalSinceReferenceDate: 541_555_200)
    static let july2019 = Date(timeIntervalSinceReferenceDate: 583_628_400)
    static let september2020 = Date(timeIntervalSinceReferenceDate: 620_611_200)
    static let day: TimeInterval = 86_400
    static let hour: TimeInterval = 3_600

    /// Every failure of `chain` under `policies` (an SSL policy's checks; nothing for a basic X.509 policy).
    static func failures(policies: [SecPolicy.Kind], chain: [Certificate], anchor: TrustAnchorSource) -> [TrustFailure] {
        guard !chain.isEmpty else { return [] }
        var failures: [TrustFailure] = []
        for case .ssl(let server, _) in policies {
            failures += usage(chain, server: server, anchor: anchor)
            if server {
                failures += signatureHashes(chain)
                failures += validityPeriod(chain[0], anchor: anchor)
            }
        }
        return failures
    }

    /// The usages a certificate's extended key usage extension lists; nil when it has none. An extension that does
    /// not parse lists nothing (so allows no use).
    static func extendedKeyUsages(_ certificate: Certificate) -> Set<ASN1ObjectIdentifier>? {
        guard let usage = certificate.extensions[oid: .X509ExtensionID.extendedKeyUsage] else { return nil }
        guard let parsed = try? ExtendedKeyUsage(usage) else { return [] }
        return Set(parsed.map { ASN1ObjectIdentifier($0) })
    }

    /// Extended key usage (errSecInvalidExtendedKeyUsage).
    ///
    /// Decision, as Apple's set_ssl_ekus (every SSL policy, the leaf only): a leaf without the extension is allowed
    /// any use; with it, it must list anyExtendedKeyUsage, or for a server serverAuth (or Microsoft's or Netscape's
    /// Server Gated Cryptography), for a client clientAuth. So a client certificate, a code-signing certificate or
    /// an S/MIME certificate is refused as a server's, and a server certificate as a client's.
    ///
    /// Decision, as Apple's ServerAuthEKU check (server policies only), which is stricter by the kind of anchor:
    /// - Under one of the system's roots, the leaf must list serverAuth itself (a leaf without the extension, or
    ///   with anyExtendedKeyUsage only, is refused whenever it was issued), and every intermediate that has the
    ///   extension must list serverAuth or anyExtendedKeyUsage.
    /// - Under an app's anchor, a leaf issued after 1 July 2019 must list serverAuth itself (HT210176); an older
    ///   one only meets the rule above. Intermediates are not checked.
    /// Apple skips this check for roots trusted through user or admin trust settings; Linux has none.
    ///
    /// Decision (a CA certificate as an SSL leaf): Apple's SSL policy has no check that the leaf is not a CA (its
    /// NotCA check belongs to the OCSP signer policy); a CA certificate is refused as a server's leaf because it
    /// does not list serverAuth, which the rule above requires of any leaf issued after July 2019. A CA:TRUE leaf
    /// that lists serverAuth and names the host is trusted, as Apple trusts it (`openssl req -x509` makes
    /// self-signed server certificates with CA:TRUE).
    static func usage(_ chain: [Certificate], server: Bool, anchor: TrustAnchorSource) -> [TrustFailure] {
        var failures: [TrustFailure] = []
        func fail(_ index: Int) {
            failures.append(TrustFailure(kind: .usage, status: errSecInvalidExtendedKeyUsage, index: index))
        }
        let leafUsages = extendedKeyUsages(chain[0])
        let allowed: Set<ASN1ObjectIdentifier> = server ? [anyUsage, serverAuth, microsoftSGC, netscapeSGC] : [anyUsage, clientAuth]
        if let leafUsages, leafUsages.isDisjoint(with: allowed) { fail(0) }
        guard server else { return failures }
        let listsServerAuth = leafUsages?.contains(serverAuth) ?? false
        switch anchor {
        case .system:
            if !listsServerAuth { fail(0) }
            for index in chain.indices.dropFirst().dropLast() {
                if let usages = extendedKeyUsages(chain[index]), !usages.isEmpty, usages.isDisjoint(with: [serverAuth, anyUsage]) {
                    fail(index)
                }
            }
        case .app:
            if chain[0].notValidBefore > july2019, !listsServerAuth { fail(0) }
        }
        return failures
    }

    /// Signature hashes (errSecInvalidDigestAlgorithm).
    ///
    /// Decision, as Apple's SignatureHashAlgorithms check of an SSL server policy (HT210176: SHA-2 only): every
    /// certificate of the chain but the self-signed ones must not be signed with SHA-1 (a self-signed root's
    /// signature proves nothing, and SHA-1 roots stay trusted). MD2, MD4 and MD5, which Apple refuses too, are not
    /// verified by swift-certificates at all, so such a chain already fails as not trusted. The basic X.509 and the
    /// SSL client policies accept SHA-1, as Apple's.
    static func signatureHashes(_ chain: [Certificate]) -> [TrustFailure] {
        chain.indices.compactMap { index in
            let certificate = chain[index]
            guard certificate.signatureAlgorithm == .sha1WithRSAEncryption, !isSelfSigned(certificate) else { return nil }
            return TrustFailure(kind: .weakHash, status: errSecInvalidDigestAlgorithm, index: index)
        }
    }

    static func isSelfSigned(_ certificate: Certificate) -> Bool {
        certificate.subject == certificate.issuer && certificate.publicKey.isValidSignature(certificate.signature, for: certificate)
    }

    /// Validity period of a server's leaf (errSecCertificateValidityPeriodTooLong), from notBefore to notAfter.
    ///
    /// Decision, as Apple's ValidityPeriodMaximums check of an SSL server policy:
    /// - Under an app's anchor (a leaf that is its own anchor too): at most 825 days (and an hour) for a leaf issued
    ///   after 1 July 2019 (HT210176); no limit before.
    /// - Under one of the system's roots, by the leaf's notBefore: before 1 July 2016, 60 months; before 1 March
    ///   2018, 39 months; before 1 September 2020, 825 days; from then on, 398 days (HT211025). Apple's months are
    ///   counted as it counts them (5 years and 2 leap days; 3 years, two 31-day months, a 30-day month and a leap
    ///   day), with an hour's slip for all but the 398 days.
    /// The client and basic X.509 policies have no limit.
    static func validityPeriod(_ leaf: Certificate, anchor: TrustAnchorSource) -> [TrustFailure] {
        let issued = leaf.notValidBefore
        let maximum: TimeInterval?
        switch anchor {
        case .system:
            if issued < july2016 {
                maximum = day * (365 * 5 + 2) + hour
            } else if issued < march2018 {
                maximum = day * (365 * 3 + 2 * 31 + 30 + 1) + hour
            } else if issued < september2020 {
                maximum = day * 825 + hour
            } else {
                maximum = day * 398
            }
        case .app:
            maximum = issued > july2019 ? day * 825 + hour : nil
        }
        guard let maximum, leaf.notValidAfter.timeIntervalSince(issued) > maximum else { return [] }
        return [TrustFailure(kind: .compliance, status: errSecCertificateValidityPeriodTooLong, index: 0)]
    }
}

/// The checks of ``SSLPolicyChecks`` as a verifier policy, so that path building looks for a chain that meets them.
///
/// It also declares the extended key usage extension handled, for every policy: swift-certificates' RFC 5280 policy
/// does not, so a leaf whose extended key usage is marked critical failed every evaluation as not trusted; Apple
/// reads the extension, critical or not.
struct SSLPolicyVerifierPolicy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = [.X509ExtensionID.extendedKeyUsage]
    let policies: [SecPolicy.Kind]
    /// The system's roots in this evaluation (empty when only the app's anchors are trusted).
    let systemRoots: Set<Certificate>
    /// False: only declares the extension handled (to find the path an evaluation that failed would have taken).
    let enforcing: Bool

    mutating func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        guard enforcing, let root = chain.last else { return .meetsPolicy }
        let anchor: TrustAnchorSource = systemRoots.contains(root) ? .system : .app
        guard let failure = TrustFailure.reported(SSLPolicyChecks.failures(policies: policies, chain: Array(chain), anchor: anchor)) else {
            return .meetsPolicy
        }
        return .failsToMeetPolicy(reason: "Apple's SSL policy: OSStatus \(failure.status) for certificate \(failure.index) of the chain")
    }
}
#endif
