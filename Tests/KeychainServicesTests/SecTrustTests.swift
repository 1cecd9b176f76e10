// Linux-only: KeychainServices' own SecTrust and SecPolicy, over certificates the tests make.
#if !canImport(Darwin)
import Crypto
import Foundation
import KeychainEngine
@testable import KeychainServices
import SwiftASN1
import Testing
import X509

/// A private PKI made in the test: a root CA, an intermediate CA, and leaves issued by the intermediate.
/// Every date is fixed, and every evaluation sets its verify date, so nothing depends on today's date.
struct TrustPKI {
    static func date(_ year: Int, _ month: Int = 1, _ day: Int = 1) -> Date {
        var components = DateComponents()
        (components.year, components.month, components.day) = (year, month, day)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.date(from: components)!
    }

    /// Inside every "valid" certificate's validity.
    static let now = date(2026, 6, 1)

    let rootKey = P256.Signing.PrivateKey()
    let intermediateKey = P256.Signing.PrivateKey()
    let root: Certificate
    let intermediate: Certificate

    init(rootName: String = "Keystone Test Root CA") throws {
        root = try Self.ca(name: rootName, key: rootKey, issuer: nil)
        intermediate = try Self.ca(name: "Keystone Test Intermediate CA", key: intermediateKey,
                                   issuer: (root.subject, rootKey))
    }

    static func ca(name: String, key: P256.Signing.PrivateKey,
                   issuer: (name: DistinguishedName, key: P256.Signing.PrivateKey)?) throws -> Certificate {
        let subject = try DistinguishedName { CommonName(name) }
        return try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: date(2020), notValidAfter: date(2040),
            issuer: issuer?.name ?? subject, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(issuer?.key ?? key))
    }

    /// A leaf issued by the intermediate (or self-signed), for `names` (DNS names, or IP literals), for TLS servers
    /// (extended key usage serverAuth: Apple's SSL policy requires it of a leaf issued after July 2019).
    func leaf(_ commonName: String = "localhost", names: [String] = ["localhost", "127.0.0.1"],
              from notBefore: Date = date(2025), to notAfter: Date = date(2027),
              key: P256.Signing.PrivateKey = .init(), selfSigned: Bool = false) throws -> Certificate {
        let subject = try DistinguishedName { CommonName(commonName) }
        let alternativeNames = names.map { name -> GeneralName in
            let v4 = name.split(separator: ".").compactMap { UInt8($0) }
            return v4.count == 4 ? .ipAddress(ASN1OctetString(contentBytes: ArraySlice(v4))) : .dnsName(name)
        }
        return try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: notBefore, notValidAfter: notAfter,
            issuer: selfSigned ? subject : intermediate.subject, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(alternativeNames)
            },
            issuerPrivateKey: .init(selfSigned ? key : intermediateKey))
    }

    static func sec(_ certificate: Certificate) -> SecCertificate {
        var serializer = DER.Serializer()
        try! serializer.serialize(certificate)
        return SecCertificateCreateWithData(nil, Data(serializer.serializedBytes) as NSData)!
    }

    /// A trust for `certificates` (leaf first) under `policy`, anchored at this PKI's root, at ``now``.
    func trust(_ certificates: [Certificate], policy: SecPolicy = SecPolicyCreateSSL(true, "localhost"),
               anchors: [Certificate]? = nil, date: Date = TrustPKI.now) -> SecTrust {
        var trust: SecTrust?
        let status = SecTrustCreateWithCertificates(certificates.map(Self.sec) as NSArray, policy, &trust)
        precondition(status == errSecSuccess)
        #expect(SecTrustSetAnchorCertificates(trust!, (anchors ?? [root]).map(Self.sec) as NSArray) == errSecSuccess)
        #expect(SecTrustSetVerifyDate(trust!, date as NSDate) == errSecSuccess)
        return trust!
    }
}

/// Evaluates; the CFError's code and message when it fails.
func evaluate(_ trust: SecTrust) -> (trusted: Bool, code: Int?, message: String?) {
    var error: CFError?
    let trusted = SecTrustEvaluateWithError(trust, &error)
    return (trusted, error.map { CFErrorGetCode($0) }, error.map { CFErrorCopyDescription($0) })
}

@Suite("SecTrust and SecPolicy on Linux")
struct SecTrustTests {
    let pki: TrustPKI
    init() throws { pki = try TrustPKI() }

    @Test("a leaf for the host, with its intermediate, is trusted; the chain is leaf, intermediate, anchor")
    func validChain() throws {
        let leaf = try pki.leaf()
        let trust = pki.trust([leaf, pki.intermediate])
        let result = evaluate(trust)
        #expect(result.trusted && result.code == nil)
        let chain = try #require(SecTrustCopyCertificateChain(trust) as? [SecCertificate])
        #expect(chain == [leaf, pki.intermediate, pki.root].map(TrustPKI.sec))
        #expect(SecTrustGetCertificateCount(trust) == 3)
        #expect(SecTrustGetCertificateAtIndex(trust, 2) == TrustPKI.sec(pki.root))
        #expect(SecTrustGetCertificateAtIndex(trust, 3) == nil)
        var resultType = SecTrustResultType.invalid
        #expect(SecTrustGetTrustResult(trust, &resultType) == errSecSuccess && resultType == .unspecified)
    }

    @Test("the SSL policy matches IP literals against IP address names", arguments: ["127.0.0.1", "localhost"])
    func hostForms(host: String) throws {
        let trust = pki.trust([try pki.leaf(), pki.intermediate], policy: SecPolicyCreateSSL(true, host as CFString))
        #expect(evaluate(trust).trusted)
    }

    @Test("the intermediates may come in any order after the leaf")
    func intermediatesInAnyOrder() throws {
        let leaf = try pki.leaf()
        let unrelated = try TrustPKI(rootName: "Unrelated CA").intermediate
        let trust = pki.trust([leaf, unrelated, pki.intermediate])
        #expect(evaluate(trust).trusted)
        #expect((SecTrustCopyCertificateChain(trust) as? [SecCertificate]) == [leaf, pki.intermediate, pki.root].map(TrustPKI.sec))
    }

    @Test("a missing intermediate is errSecCreateChainFailed (Apple's MissingIntermediate), named as not trusted")
    func missingIntermediate() throws {
        let trust = pki.trust([try pki.leaf()])
        let result = evaluate(trust)
        #expect(!result.trusted)
        #expect(result.code == Int(errSecCreateChainFailed) && result.code == -25318)
        #expect(result.message == "“localhost” certificate is not trusted")
        #expect(SecTrustGetCertificateCount(trust) == 1)
        var resultType = SecTrustResultType.invalid
        #expect(SecTrustGetTrustResult(trust, &resultType) == errSecSuccess && resultType == .recoverableTrustFailure)
    }

    @Test("a chain to a root that is not an anchor is not trusted, naming that root")
    func untrustedRoot() throws {
        let other = try TrustPKI(rootName: "Other Root CA")
        let trust = other.trust([try other.leaf(), other.intermediate, other.root], anchors: [pki.root])
        let result = evaluate(trust)
        #expect(result.code == Int(errSecNotTrusted) && result.code == -67843)
        #expect(result.message == "“Other Root CA” certificate is not trusted")
        #expect((SecTrustCopyCertificateChain(trust) as? [SecCertificate])?.count == 3)
        // Without its root, the partial chain ends at the intermediate, which the message names.
        let partial = evaluate(other.trust([try other.leaf(), other.intermediate], anchors: [pki.root]))
        #expect(partial.code == Int(errSecCreateChainFailed))
        #expect(partial.message == "“Keystone Test Intermediate CA” certificate is not trusted")
    }

    @Test("a self-signed leaf is not trusted unless it is an anchor itself")
    func selfSigned() throws {
        let leaf = try pki.leaf("Self Signed", selfSigned: true)
        let result = evaluate(pki.trust([leaf]))
        #expect(result.code == Int(errSecNotTrusted) && result.message == "“Self Signed” certificate is not trusted")
        #expect(evaluate(pki.trust([leaf], anchors: [leaf])).trusted)
        // An anchor leaf still has its dates and its names checked.
        #expect(evaluate(pki.trust([leaf], policy: SecPolicyCreateSSL(true, "other.example"), anchors: [leaf])).code == Int(errSecHostNameMismatch))
        #expect(evaluate(pki.trust([leaf], anchors: [leaf], date: TrustPKI.date(2030))).code == Int(errSecCertificateExpired))
    }

    @Test("an expired or not yet valid leaf is errSecCertificateExpired, named in the message", arguments: [
        (TrustPKI.date(2021), TrustPKI.date(2022)), (TrustPKI.date(2090), TrustPKI.date(2091)),
    ])
    func outsideValidity(from: Date, to: Date) throws {
        let leaf = try pki.leaf("expired.localhost", names: ["localhost"], from: from, to: to)
        let result = evaluate(pki.trust([leaf, pki.intermediate]))
        #expect(!result.trusted)
        #expect(result.code == Int(errSecCertificateExpired) && result.code == -67818)
        #expect(result.message == "“expired.localhost” certificate is expired")
    }

    @Test("the verify date moves validity: the same chain fails before and after the leaf's dates and passes within")
    func verifyDate() throws {
        let leaf = try pki.leaf()
        let trust = pki.trust([leaf, pki.intermediate], date: TrustPKI.date(2024))
        #expect(evaluate(trust).code == Int(errSecCertificateExpired))
        #expect(SecTrustSetVerifyDate(trust, TrustPKI.date(2026) as NSDate) == errSecSuccess)
        #expect(evaluate(trust).trusted)
        #expect(SecTrustSetVerifyDate(trust, TrustPKI.date(2028) as NSDate) == errSecSuccess)
        #expect(evaluate(trust).code == Int(errSecCertificateExpired))
    }

    @Test("a leaf for another host is errSecHostNameMismatch under SSL, and trusted under the basic policy")
    func wrongHost() throws {
        let leaf = try pki.leaf("other.example", names: ["other.example"])
        let ssl = evaluate(pki.trust([leaf, pki.intermediate]))
        #expect(ssl.code == Int(errSecHostNameMismatch) && ssl.code == -67602)
        #expect(ssl.message == "“other.example” certificate name does not match input")
        #expect(evaluate(pki.trust([leaf, pki.intermediate], policy: SecPolicyCreateBasicX509())).trusted)
        #expect(evaluate(pki.trust([leaf, pki.intermediate], policy: SecPolicyCreateSSL(true, nil))).trusted)
    }

    @Test("with several failures, Apple's order: an untrusted root before a host mismatch, and both before expiry")
    func failureOrder() throws {
        let other = try TrustPKI(rootName: "Other Root CA")
        let leaf = try other.leaf("old.example", names: ["old.example"], from: TrustPKI.date(2021), to: TrustPKI.date(2022))
        // SecTrust.c reports the most important subtype: "not trusted" ranks above "expired".
        #expect(evaluate(other.trust([leaf, other.intermediate], anchors: [pki.root])).code == Int(errSecCreateChainFailed))
        #expect(evaluate(pki.trust([try pki.leaf("old.example", names: ["old.example"], from: TrustPKI.date(2021), to: TrustPKI.date(2022)),
                                    pki.intermediate])).code == Int(errSecHostNameMismatch))
        let wrongHostUntrusted = try other.leaf("other.example", names: ["other.example"])
        #expect(evaluate(other.trust([wrongHostUntrusted, other.intermediate, other.root], anchors: [pki.root])).code == Int(errSecNotTrusted))
    }

    @Test("SecTrustCopyKey is the leaf's public key")
    func copyKey() throws {
        let key = P256.Signing.PrivateKey()
        let trust = pki.trust([try pki.leaf(key: key), pki.intermediate])
        let copied = try #require(SecTrustCopyKey(trust))
        let bytes = try #require(SecKeyCopyExternalRepresentation(copied, nil) as Data?)
        #expect(bytes == key.publicKey.x963Representation)
    }

    @Test("policies: nil means basic X.509; SecTrustSetPolicies replaces them and discards the previous result")
    func policies() throws {
        let leaf = try pki.leaf("other.example", names: ["other.example"])
        var trust: SecTrust?
        #expect(SecTrustCreateWithCertificates(TrustPKI.sec(leaf), nil, &trust) == errSecSuccess)
        let created = try #require(trust)
        _ = SecTrustSetAnchorCertificates(created, [TrustPKI.sec(pki.root), TrustPKI.sec(pki.intermediate)] as NSArray)
        _ = SecTrustSetVerifyDate(created, TrustPKI.now as NSDate)
        #expect(evaluate(created).trusted)
        #expect(SecTrustSetPolicies(created, SecPolicyCreateSSL(true, "localhost" as CFString)) == errSecSuccess)
        #expect(evaluate(created).code == Int(errSecHostNameMismatch))
        var policies: CFArray?
        #expect(SecTrustCopyPolicies(created, &policies) == errSecSuccess)
        #expect((policies as? [SecPolicy]) == [SecPolicyCreateSSL(true, "localhost")])
    }

    @Test("evaluations called from many tasks at once all finish with their own result (none waits for the cooperative pool)",
          .timeLimit(.minutes(1)))
    func concurrentEvaluations() async throws {
        let good = try pki.leaf()
        let wrongHost = try pki.leaf("other.example", names: ["other.example"])
        let pki = pki
        let codes = await withTaskGroup(of: (Int, Int?).self) { group in
            for index in 0..<16 {
                group.addTask {
                    (index, evaluate(pki.trust([index.isMultiple(of: 2) ? good : wrongHost, pki.intermediate])).code)
                }
            }
            var codes: [Int: Int?] = [:]
            for await (index, code) in group { codes[index] = code }
            return codes
        }
        #expect(codes.count == 16)
        for (index, code) in codes {
            #expect(code == (index.isMultiple(of: 2) ? nil : Int(errSecHostNameMismatch)))
        }
    }

    @Test("one trust evaluated from several threads at once gives one result, and an empty anchor list trusts nothing")
    func sharedTrust() throws {
        let trust = pki.trust([try pki.leaf(), pki.intermediate])
        let results = Locked<[Bool]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let trusted = SecTrustEvaluateWithError(trust, nil)
            results.withLock { $0.append(trusted) }
        }
        #expect(results.withLock { $0 } == Array(repeating: true, count: 8))
        #expect(SecTrustSetAnchorCertificates(trust, [] as NSArray) == errSecSuccess)
        #expect(evaluate(trust).code == Int(errSecCreateChainFailed))  // the root is neither given nor an anchor
    }

    @Test("SecTrustCreateWithCertificates refuses what is not certificates and policies", arguments: [0, 1, 2])
    func badArguments(which: Int) throws {
        var trust: SecTrust?
        let leaf = TrustPKI.sec(try pki.leaf())
        let status: OSStatus
        switch which {
        case 0: status = SecTrustCreateWithCertificates([] as NSArray, nil, &trust)
        case 1: status = SecTrustCreateWithCertificates(["not a certificate"] as NSArray, nil, &trust)
        default: status = SecTrustCreateWithCertificates(leaf, [leaf] as NSArray, &trust)
        }
        #expect(status == errSecParam && trust == nil)
    }
}

/// The system's roots: only with a CA bundle installed (Debian: ca-certificates).
@Suite("SecTrust and the system's roots")
struct SecTrustSystemRootsTests {
    static let systemRoot = TrustRoots.system.first

    @Test("a system root is trusted with no anchors set, and not once anchors are set, unless AnchorCertificatesOnly is false",
          .enabled(if: systemRoot != nil, "no CA bundle in /etc/ssl/certs (Debian: apt-get install ca-certificates)"))
    func systemRootTrust() throws {
        let root = try #require(Self.systemRoot)
        let middle = root.notValidBefore.addingTimeInterval(root.notValidAfter.timeIntervalSince(root.notValidBefore) / 2)
        var created: SecTrust?
        #expect(SecTrustCreateWithCertificates(TrustPKI.sec(root), SecPolicyCreateBasicX509(), &created) == errSecSuccess)
        let trust = try #require(created)
        _ = SecTrustSetVerifyDate(trust, middle as NSDate)
        #expect(evaluate(trust).trusted)
        let pki = try TrustPKI()
        #expect(SecTrustSetAnchorCertificates(trust, [TrustPKI.sec(pki.root)] as NSArray) == errSecSuccess)
        // The chain ends at a root (self-issued) that is no longer an anchor: errSecNotTrusted, as Apple's "“name”
        // certificate is not trusted" (errSecCreateChainFailed is for a chain whose issuer is missing).
        #expect(evaluate(trust).code == Int(errSecNotTrusted))
        var anchors: CFArray?
        #expect(SecTrustCopyCustomAnchorCertificates(trust, &anchors) == errSecSuccess && anchors?.count == 1)
        #expect(SecTrustSetAnchorCertificatesOnly(trust, false) == errSecSuccess)
        #expect(evaluate(trust).trusted)
        #expect(SecTrustSetAnchorCertificates(trust, nil) == errSecSuccess)
        #expect(evaluate(trust).trusted)
    }

    @Test("a self-signed CA made in the test is not trusted by the system's roots (not everything is trusted)",
          .enabled(if: systemRoot != nil, "no CA bundle in /etc/ssl/certs (Debian: apt-get install ca-certificates)"))
    func privateCANotTrusted() throws {
        let pki = try TrustPKI()
        var created: SecTrust?
        #expect(SecTrustCreateWithCertificates([TrustPKI.sec(try pki.leaf()), TrustPKI.sec(pki.intermediate)] as NSArray,
                                               SecPolicyCreateSSL(true, "localhost"), &created) == errSecSuccess)
        let trust = try #require(created)
        _ = SecTrustSetVerifyDate(trust, TrustPKI.now as NSDate)
        let result = evaluate(trust)
        #expect(!result.trusted && result.code == Int(errSecCreateChainFailed))
        #expect(result.message == "“Keystone Test Intermediate CA” certificate is not trusted")
        // With its root given too, the chain ends at a root the system does not trust.
        #expect(SecTrustCreateWithCertificates([try pki.leaf(), pki.intermediate, pki.root].map(TrustPKI.sec) as NSArray,
                                               SecPolicyCreateSSL(true, "localhost"), &created) == errSecSuccess)
        let withRoot = try #require(created)
        _ = SecTrustSetVerifyDate(withRoot, TrustPKI.now as NSDate)
        #expect(evaluate(withRoot).code == Int(errSecNotTrusted))
    }

    @Test("the CA bundle is read from SSL_CERT_FILE when set, skipping what is not a certificate")
    func bundleFile() throws {
        let pki = try TrustPKI()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("trust-roots-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let pem = [pki.root, pki.intermediate].map { certificate -> String in
            var serializer = DER.Serializer()
            try! serializer.serialize(certificate)
            return "-----BEGIN CERTIFICATE-----\n\(Data(serializer.serializedBytes).base64EncodedString(options: .lineLength64Characters))\n-----END CERTIFICATE-----\n"
        }.joined(separator: "junk between blocks\n")
        let file = directory.appendingPathComponent("bundle.pem")
        try Data(pem.utf8).write(to: file)
        #expect(TrustRoots.load(environment: ["SSL_CERT_FILE": file.path]) == [pki.root, pki.intermediate])
        #expect(TrustRoots.load(environment: ["SSL_CERT_FILE": directory.appendingPathComponent("none").path]).isEmpty)
        // SSL_CERT_DIR: every file of the directory, PEM or DER (OpenSSL's hashed names included).
        let certificates = directory.appendingPathComponent("certs")
        try FileManager.default.createDirectory(at: certificates, withIntermediateDirectories: true)
        try Data(pem.utf8).write(to: certificates.appendingPathComponent("a.pem"))
        var serializer = DER.Serializer()
        try serializer.serialize(try pki.leaf())
        try Data(serializer.serializedBytes).write(to: certificates.appendingPathComponent("1a2b3c4d.0"))
        #expect(TrustRoots.load(environment: ["SSL_CERT_DIR": certificates.path]).count == 3)
    }
}
#endif
