// Linux-only: what Apple's SSL policy checks beyond RFC 5280 and the host name (extended key usage, validity caps,
// SHA-1 signatures, names in the subject alternative names), over certificates the openssl binary makes.
#if !canImport(Darwin)
import Foundation
@testable import KeychainServices
import Testing
import X509

/// Evaluates `chain` (leaf first) under `policy`, anchored at `anchors`, at `date`.
private func evaluate(_ chain: [SecCertificate], _ policy: SecPolicy, anchors: [SecCertificate],
                      at date: Date = TrustPKI.now) -> (trusted: Bool, code: Int?, message: String?, result: SecTrustResultType) {
    var created: SecTrust?
    precondition(SecTrustCreateWithCertificates(chain as NSArray, policy, &created) == errSecSuccess)
    let trust = created!
    _ = SecTrustSetAnchorCertificates(trust, anchors as NSArray)
    _ = SecTrustSetVerifyDate(trust, date as NSDate)
    var error: CFError?
    let trusted = SecTrustEvaluateWithError(trust, &error)
    var result = SecTrustResultType.invalid
    _ = SecTrustGetTrustResult(trust, &result)
    return (trusted, error.map { CFErrorGetCode($0) }, error.map { CFErrorCopyDescription($0) }, result)
}

/// The same, with the anchor as one of the system's roots (Apple's rules for its system trust store) rather than an
/// anchor the app set.
private func evaluateAsSystemRoot(_ chain: [SecCertificate], _ policy: SecPolicy, root: SecCertificate,
                                  at date: Date = TrustPKI.now) -> (status: OSStatus?, message: String?) {
    let evaluation = TrustEvaluation(leaf: chain[0], intermediates: Array(chain.dropFirst()), anchors: [],
                                     systemRoots: [root.certificate], date: date, policies: [policy.kind])
    let failure = evaluation.run().failure
    return (failure?.status, failure?.message)
}

private let server = SecPolicyCreateSSL(true, "localhost" as CFString)
private let client = SecPolicyCreateSSL(false, nil)
private let basic = SecPolicyCreateBasicX509()
private let localhost = "subjectAltName=DNS:localhost"
private let leafConstraints = "basicConstraints=critical,CA:FALSE"

@Suite("SecTrust: Apple's SSL policy checks beyond RFC 5280 (openssl-made certificates)",
       .enabled(if: OpenSSL.isAvailable, OpenSSL.missing))
struct SecTrustPolicyChecksTests {
    @Test("an SSL server policy trusts a leaf whose extended key usage has serverAuth (critical or not)",
          arguments: ["extendedKeyUsage=serverAuth", "extendedKeyUsage=critical,serverAuth", "extendedKeyUsage=clientAuth,serverAuth"])
    func serverAuthLeaf(usage: String) throws {
        var pki = try OpenSSLPKI()
        defer { pki.remove() }
        let leaf = try pki.leaf(extensions: [leafConstraints, localhost, usage])
        let result = evaluate([leaf, try pki.intermediate], server, anchors: [try pki.root])
        #expect(result.trusted && result.code == nil, "\(result.message ?? "")")
        #expect(result.result == .unspecified)
    }

    @Test("an SSL server policy refuses a leaf made for another usage with errSecInvalidExtendedKeyUsage and Apple's message",
          arguments: ["extendedKeyUsage=clientAuth", "extendedKeyUsage=codeSigning", "extendedKeyUsage=emailProtection,timeStamping"])
    func otherUsageLeaf(usage: String) throws {
        var pki = try OpenSSLPKI()
        defer { pki.remove() }
        let leaf = try pki.leaf(extensions: [leafConstraints, localhost, usage])
        let result = evaluate([leaf, try pki.intermediate], server, anchors: [try pki.root])
        #expect(!result.trusted)
        #expect(result.code == Int(errSecInvalidExtendedKeyUsage) && result.code == -67609)
        #expect(result.message == "“localhost” certificate is not permitted for this usage")
        #expect(result.result == .recoverableTrustFailure)
        // The basic X.509 policy checks no usage: the same chain is trusted.
        #expect(evaluate([leaf, try pki.intermediate], basic, anchors: [try pki.root]).trusted)
    }

    @Test("a CA certificate as the server's leaf is refused with errSecInvalidExtendedKeyUsage (it lacks serverAuth)")
    func caAsLeaf() throws {
        var pki = try OpenSSLPKI()
        defer { pki.remove() }
        let caLeaf = try pki.leaf(extensions: OpenSSLPKI.caExtensions + [localhost])
        let result = evaluate([caLeaf, try pki.intermediate], server, anchors: [try pki.root])
        #expect(result.code == Int(errSecInvalidExtendedKeyUsage))
        #expect(result.message == "“localhost” certificate is not permitted for this usage")
        // Usage is reported before the name: a CA leaf for another host.
        let elsewhere = try pki.leaf("elsewhere.example", extensions: OpenSSLPKI.caExtensions + ["subjectAltName=DNS:elsewhere.example"])
        let both = evaluate([elsewhere, try pki.intermediate], server, anchors: [try pki.root])
        #expect(both.code == Int(errSecInvalidExtendedKeyUsage))
        #expect(both.message == "“elsewhere.example” certificate is not permitted for this usage")
        // The intermediate CA itself (issued in 2015, before Apple's serverAuth rule, without extended key usage)
        // presented as the leaf fails on its name only, as on Apple platforms.
        let intermediate = evaluate([try pki.intermediate], server, anchors: [try pki.root])
        #expect(intermediate.code == Int(errSecHostNameMismatch))
    }

    @Test("a leaf with no extended key usage, or anyExtendedKeyUsage, issued after 1 July 2019 under an app's anchor is refused; issued before, it is trusted",
          arguments: [nil, "extendedKeyUsage=anyExtendedKeyUsage"] as [String?])
    func missingOrAnyUsage(usage: String?) throws {
        var pki = try OpenSSLPKI()
        defer { pki.remove() }
        let extensions = [leafConstraints, localhost] + (usage.map { [$0] } ?? [])
        let recent = try pki.leaf(extensions: extensions)
        let refused = evaluate([recent, try pki.intermediate], server, anchors: [try pki.root])
        #expect(refused.code == Int(errSecInvalidExtendedKeyUsage))
        #expect(refused.message == "“localhost” certificate is not permitted for this usage")
        let old = try pki.leaf(extensions: extensions, from: "20180601000000Z", to: "20200101000000Z")
        let trusted = evaluate([old, try pki.intermediate], server, anchors: [try pki.root], at: TrustPKI.date(2019, 6, 1))
        #expect(trusted.trusted, "\(trusted.message ?? "")")
        // One of the system's roots: a leaf must carry serverAuth itself, whenever it was issued.
        let system = evaluateAsSystemRoot([old, try pki.intermediate], server, root: try pki.root, at: TrustPKI.date(2019, 6, 1))
        #expect(system.status == errSecInvalidExtendedKeyUsage)
    }

    @Test("a self-signed leaf that is itself the anchor still needs serverAuth under an SSL server policy")
    func anchorLeafUsage() throws {
        let pki = try OpenSSLPKI()
        defer { pki.remove() }
        // Made self-signed: openssl ca -selfsign with the leaf's own key.
        let name = "selfsigned"
        try pki.makeKey(name)
        try pki.request(name, subject: "localhost")
        try pki.sign(name, issuer: nil, extensions: [leafConstraints, localhost], from: "20250101000000Z", to: "20270101000000Z", digest: "sha256")
        let selfSigned = try pki.certificate(name)
        #expect(evaluate([selfSigned], server, anchors: [selfSigned]).code == Int(errSecInvalidExtendedKeyUsage))
        #expect(evaluate([selfSigned], basic, anchors: [selfSigned]).trusted)
        try pki.sign("\(name)-server", issuer: nil, extensions: [leafConstraints, localhost, "extendedKeyUsage=serverAuth"],
                     from: "20250101000000Z", to: "20270101000000Z", digest: "sha256", request: name)
        let withUsage = try pki.certificate("\(name)-server")
        #expect(evaluate([withUsage], server, anchors: [withUsage]).trusted)
    }

    @Test("an SSL client policy needs clientAuth (or no extended key usage, or anyExtendedKeyUsage), and refuses a serverAuth-only leaf")
    func clientPolicy() throws {
        var pki = try OpenSSLPKI()
        defer { pki.remove() }
        let anchors = [try pki.root], intermediate = try pki.intermediate
        let clientLeaf = try pki.leaf(extensions: [leafConstraints, localhost, "extendedKeyUsage=clientAuth"])
        #expect(evaluate([clientLeaf, intermediate], client, anchors: anchors).trusted)
        let serverLeaf = try pki.leaf(extensions: [leafConstraints, localhost, "extendedKeyUsage=serverAuth"])
        let refused = evaluate([serverLeaf, intermediate], client, anchors: anchors)
        #expect(refused.code == Int(errSecInvalidExtendedKeyUsage))
        #expect(refused.message == "“localhost” certificate is not permitted for this usage")
        #expect(evaluate([try pki.leaf(extensions: [leafConstraints, localhost])], client, anchors: anchors + [intermediate]).trusted)
        #expect(evaluate([try pki.leaf(extensions: [leafConstraints, localhost, "extendedKeyUsage=anyExtendedKeyUsage"]), intermediate],
                         client, anchors: anchors).trusted)
        // Two policies: the leaf must meet both.
        let both = [SecPolicyCreateSSL(true, "localhost" as CFString), client]
        var created: SecTrust?
        #expect(SecTrustCreateWithCertificates([serverLeaf, intermediate] as NSArray, both as NSArray, &created) == errSecSuccess)
        _ = SecTrustSetAnchorCertificates(created!, anchors as NSArray)
        _ = SecTrustSetVerifyDate(created!, TrustPKI.now as NSDate)
        #expect(!SecTrustEvaluateWithError(created!, nil))
    }

    @Test("a server leaf valid longer than 825 days, issued after 1 July 2019, is errSecCertificateValidityPeriodTooLong; 825 days, or issued before, is trusted")
    func validityCap() throws {
        var pki = try OpenSSLPKI()
        defer { pki.remove() }
        let extensions = [leafConstraints, localhost, "extendedKeyUsage=serverAuth"]
        let anchors = [try pki.root], intermediate = try pki.intermediate
        // 2025-01-01 + 826 days = 2027-04-07.
        let long = try pki.leaf(extensions: extensions, from: "20250101000000Z", to: "20270407000000Z")
        let refused = evaluate([long, intermediate], server, anchors: anchors)
        #expect(refused.code == Int(errSecCertificateValidityPeriodTooLong) && refused.code == -67901)
        #expect(refused.message == "“localhost” certificate is not standards compliant")
        #expect(evaluate([long, intermediate], basic, anchors: anchors).trusted)
        #expect(evaluate([long, intermediate], client, anchors: anchors).code == Int(errSecInvalidExtendedKeyUsage))
        let capped = try pki.leaf(extensions: extensions, from: "20250101000000Z", to: "20270406000000Z")
        #expect(evaluate([capped, intermediate], server, anchors: anchors).trusted)
        let before = try pki.leaf(extensions: extensions, from: "20190101000000Z", to: "20240101000000Z")
        #expect(evaluate([before, intermediate], server, anchors: anchors, at: TrustPKI.date(2020)).trusted)
        // Under one of the system's roots: 398 days for a leaf issued after 1 September 2020.
        #expect(evaluateAsSystemRoot([capped, intermediate], server, root: anchors[0]).status == errSecCertificateValidityPeriodTooLong)
        let year = try pki.leaf(extensions: extensions, from: "20250101000000Z", to: "20260204000000Z")  // 399 days
        #expect(evaluateAsSystemRoot([year, intermediate], server, root: anchors[0], at: TrustPKI.date(2025, 6, 1)).status == errSecCertificateValidityPeriodTooLong)
        let short = try pki.leaf(extensions: extensions, from: "20250101000000Z", to: "20260203000000Z")  // 398 days
        #expect(evaluateAsSystemRoot([short, intermediate], server, root: anchors[0], at: TrustPKI.date(2025, 6, 1)).status == nil)
    }

    @Test("under one of the system's roots, an intermediate whose extended key usage lacks serverAuth is refused; under an app's anchor it is trusted")
    func intermediateUsage() throws {
        var pki = try OpenSSLPKI(intermediateExtensions: OpenSSLPKI.caExtensions + ["extendedKeyUsage=emailProtection"])
        defer { pki.remove() }
        let leaf = try pki.leaf(extensions: [leafConstraints, localhost, "extendedKeyUsage=serverAuth"], to: "20260101000000Z")
        let intermediate = try pki.intermediate, root = try pki.root
        #expect(evaluate([leaf, intermediate], server, anchors: [root], at: TrustPKI.date(2025, 6, 1)).trusted)
        let system = evaluateAsSystemRoot([leaf, intermediate], server, root: root, at: TrustPKI.date(2025, 6, 1))
        #expect(system.status == errSecInvalidExtendedKeyUsage)
        #expect(system.message == "“OpenSSL Test Intermediate CA” certificate is not permitted for this usage")
    }

    @Test("an SSL server policy refuses a SHA-1 signature with errSecInvalidDigestAlgorithm; the basic policy trusts it")
    func sha1Signature() throws {
        var pki = try OpenSSLPKI(keyType: .rsa(bits: 2048))
        defer { pki.remove() }
        let leaf = try pki.leaf(extensions: [leafConstraints, localhost, "extendedKeyUsage=serverAuth"], digest: "sha1")
        let anchors = [try pki.root], intermediate = try pki.intermediate
        let refused = evaluate([leaf, intermediate], server, anchors: anchors)
        #expect(refused.code == Int(errSecInvalidDigestAlgorithm) && refused.code == -67815)
        #expect(refused.message == "“localhost” certificate is using a broken signature algorithm")
        #expect(evaluate([leaf, intermediate], basic, anchors: anchors).trusted)
        let sha256 = try pki.leaf(extensions: [leafConstraints, localhost, "extendedKeyUsage=serverAuth"])
        #expect(evaluate([sha256, intermediate], server, anchors: anchors).trusted)
    }

    @Test("a host name only in the subject's common name does not match (Apple reads names from the subject alternative names only)")
    func commonNameOnly() throws {
        var pki = try OpenSSLPKI()
        defer { pki.remove() }
        let leaf = try pki.leaf(extensions: [leafConstraints, "extendedKeyUsage=serverAuth"])
        let result = evaluate([leaf, try pki.intermediate], server, anchors: [try pki.root])
        #expect(result.code == Int(errSecHostNameMismatch))
        #expect(result.message == "“localhost” certificate name does not match input")
        #expect(evaluate([leaf, try pki.intermediate], SecPolicyCreateSSL(true, nil), anchors: [try pki.root]).trusted)
    }

    @Test("with several failures, Apple's order: not trusted, then usage, then name, then expiry")
    func failureOrder() throws {
        var pki = try OpenSSLPKI()
        defer { pki.remove() }
        let anchors = [try pki.root], intermediate = try pki.intermediate
        let wrongHost = try pki.leaf("other.example", extensions: [leafConstraints, "subjectAltName=DNS:other.example", "extendedKeyUsage=clientAuth"])
        #expect(evaluate([wrongHost, intermediate], server, anchors: anchors).code == Int(errSecInvalidExtendedKeyUsage))
        let expired = try pki.leaf(extensions: [leafConstraints, localhost, "extendedKeyUsage=clientAuth"], from: "20210101000000Z", to: "20220101000000Z")
        #expect(evaluate([expired, intermediate], server, anchors: anchors).code == Int(errSecInvalidExtendedKeyUsage))
        let expiredServer = try pki.leaf(extensions: [leafConstraints, localhost, "extendedKeyUsage=serverAuth"], from: "20210101000000Z", to: "20220101000000Z")
        #expect(evaluate([expiredServer, intermediate], server, anchors: anchors).code == Int(errSecCertificateExpired))
        // No path to an anchor: not trusted, whatever the leaf's usage.
        #expect(evaluate([expired], server, anchors: anchors).code == Int(errSecCreateChainFailed))
    }

    @Test("an RSA key under 2048 bits cannot be made into a SecCertificate, so Apple's key size rule (RSA 2048, P-256) holds by construction")
    func weakKey() throws {
        let pki = try OpenSSLPKI(keyType: .rsa(bits: 2048))
        defer { pki.remove() }
        let name = "weak"
        try pki.makeKey(name, keyType: .rsa(bits: 1024))
        try pki.request(name, subject: "localhost")
        try pki.sign(name, issuer: "intermediate", extensions: [leafConstraints, localhost, "extendedKeyUsage=serverAuth"],
                     from: "20250101000000Z", to: "20270101000000Z", digest: "sha256")
        #expect(SecCertificateCreateWithData(nil, try pki.der(name) as NSData) == nil)
    }
}
#endif
