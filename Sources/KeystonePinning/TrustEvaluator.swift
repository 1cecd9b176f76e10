// Normal trust evaluation for KeystonePinning, kept in this one file so that it can be replaced: on Apple
// platforms Security's SecTrust; on Linux, for now, swift-certificates' Verifier (to be switched to
// KeychainServices' SecTrust when that lands).
import Foundation
import SwiftASN1
#if canImport(Darwin)
import X509
import Security
#endif

/// Normal (unpinned) trust evaluation of a server's chain for a host: the seam ``PinningPolicy`` evaluates pins after.
///
/// Decision: the closure is `async` (the brief's seam was synchronous): swift-certificates' verifier is async, and
/// an async seam lets SecTrust's blocking evaluation run off the caller's thread (and off Swift's cooperative pool).
public struct TrustEvaluator: Sendable {
    /// Evaluates `chain` (DER certificates as presented, leaf first) for `host`; returns the validated chain, leaf
    /// first, up to the trusted root.
    public let evaluate: @Sendable (_ chain: [Data], _ host: String) async throws -> [Data]

    /// An evaluator from a closure (a test double, or another trust engine).
    public init(_ evaluate: @escaping @Sendable (_ chain: [Data], _ host: String) async throws -> [Data]) {
        self.evaluate = evaluate
    }

    /// The platform's TLS server trust: the chain must lead to a trusted root, be valid at `verifyDate`, and the
    /// leaf must name the host.
    ///
    /// On Apple platforms this is `SecTrustEvaluateWithError` with `SecPolicyCreateSSL(true, host)`. On Linux it is
    /// swift-certificates' `Verifier` (RFC 5280 and server-identity policies) against the system roots
    /// (`$SSL_CERT_FILE`, else `/etc/ssl/certs/ca-certificates.crt` or `/etc/pki/tls/certs/ca-bundle.crt`).
    ///
    /// - Parameters:
    ///   - anchors: Extra trusted roots (a private CA), as `SecTrustSetAnchorCertificates`.
    ///   - anchorsOnly: Trust only `anchors`, not the system roots (as `SecTrustSetAnchorCertificatesOnly`). Ignored
    ///     when `anchors` is empty.
    ///   - verifyDate: The date the chain must be valid at (`SecTrustSetVerifyDate`); now when `nil`.
    /// - Returns: An evaluator whose failures are ``TrustEvaluationError``s with Apple's OSStatus: `errSecNotTrusted`
    ///   (-67843), `errSecCertificateExpired` (-67818), `errSecCertificateNotValidYet` (-67819),
    ///   `errSecHostNameMismatch` (-67602), `errSecDecode` (-26275) for bytes that are not a certificate.
    public static func system(anchors: [Certificate] = [], anchorsOnly: Bool = false, verifyDate: Date? = nil) -> TrustEvaluator {
        let anchorsOnly = anchorsOnly && !anchors.isEmpty
        #if canImport(Darwin)
        return TrustEvaluator { chain, host in
            // SecTrustEvaluateWithError blocks (it may fetch revocation data): on a Dispatch thread, not the caller's.
            try await withCheckedThrowingContinuation { continuation in
                DispatchQueue.global(qos: .userInitiated).async {
                    continuation.resume(with: Result {
                        try evaluateWithSecTrust(chain: chain, host: host, anchors: anchors, anchorsOnly: anchorsOnly, verifyDate: verifyDate)
                    })
                }
            }
        }
        #else
        return TrustEvaluator { chain, host in
            try await evaluateWithVerifier(chain: chain, host: host, anchors: anchors, anchorsOnly: anchorsOnly, verifyDate: verifyDate)
        }
        #endif
    }
}

/// A chain that normal trust evaluation refused, with Apple's OSStatus and message.
public struct TrustEvaluationError: Error, Hashable, CustomStringConvertible, LocalizedError {
    /// Apple's OSStatus (`errSecNotTrusted`, `errSecCertificateExpired`, `errSecHostNameMismatch`…).
    public let status: Int32
    /// Apple's message for the status, and what was found.
    public let message: String

    public var description: String { message }
    public var errorDescription: String? { message }

    static let notTrusted: Int32 = -67843
    static let certificateExpired: Int32 = -67818
    static let certificateNotValidYet: Int32 = -67819
    static let hostNameMismatch: Int32 = -67602
    static let decode: Int32 = -26275
}

#if canImport(Darwin)
private func evaluateWithSecTrust(chain: [Data], host: String, anchors: [Certificate], anchorsOnly: Bool, verifyDate: Date?) throws -> [Data] {
    func secCertificates(_ ders: [Data]) throws -> [SecCertificate] {
        try ders.map {
            guard let certificate = SecCertificateCreateWithData(nil, $0 as CFData) else {
                throw TrustEvaluationError(status: TrustEvaluationError.decode, message: "Unable to decode the provided data.")
            }
            return certificate
        }
    }
    var trust: SecTrust?
    var status = SecTrustCreateWithCertificates(try secCertificates(chain) as CFArray, SecPolicyCreateSSL(true, host as CFString), &trust)
    guard status == errSecSuccess, let trust else {
        throw TrustEvaluationError(status: status, message: SecCopyErrorMessageString(status, nil) as String? ?? "OSStatus \(status)")
    }
    if !anchors.isEmpty {
        let ders = try anchors.map { certificate -> Data in
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return Data(serializer.serializedBytes)
        }
        status = SecTrustSetAnchorCertificates(trust, try secCertificates(ders) as CFArray)
        if status == errSecSuccess { status = SecTrustSetAnchorCertificatesOnly(trust, anchorsOnly) }
    }
    if status == errSecSuccess, let verifyDate { status = SecTrustSetVerifyDate(trust, verifyDate as CFDate) }
    guard status == errSecSuccess else {
        throw TrustEvaluationError(status: status, message: SecCopyErrorMessageString(status, nil) as String? ?? "OSStatus \(status)")
    }
    var error: CFError?
    guard SecTrustEvaluateWithError(trust, &error) else {
        let code = error.map { Int32(truncatingIfNeeded: CFErrorGetCode($0)) } ?? TrustEvaluationError.notTrusted
        let message = error.map { CFErrorCopyDescription($0) as String } ?? "The trust policy was not trusted."
        throw TrustEvaluationError(status: code, message: message)
    }
    let validated = SecTrustCopyCertificateChain(trust) as? [SecCertificate] ?? []
    return validated.map { SecCertificateCopyData($0) as Data }
}
#else
// The verify date (SecTrustSetVerifyDate) is swift-certificates' fixed expiry validation time, behind an SPI.
@_spi(FixedExpiryValidationTime) import X509

/// The system's trusted roots, read once per process.
private let systemRoots: [Certificate] = {
    var paths = ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"]
    if let file = ProcessInfo.processInfo.environment["SSL_CERT_FILE"], !file.isEmpty { paths.insert(file, at: 0) }
    for path in paths {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              let documents = try? PEMDocument.parseMultiple(pemString: text) else { continue }
        return documents.compactMap { try? Certificate(pemDocument: $0) }
    }
    return []
}()

private func evaluateWithVerifier(chain: [Data], host: String, anchors: [Certificate], anchorsOnly: Bool, verifyDate: Date?) async throws -> [Data] {
    let certificates: [Certificate]
    do {
        certificates = try chain.map { try Certificate(derEncoded: Array($0)) }
    } catch {
        throw TrustEvaluationError(status: TrustEvaluationError.decode, message: "Unable to decode the provided data.")
    }
    guard let leaf = certificates.first else {
        throw TrustEvaluationError(status: TrustEvaluationError.notTrusted, message: "The trust policy was not trusted. (no certificate)")
    }
    let date = verifyDate ?? Date()
    // An IP literal is matched against the leaf's IP addresses, a name against its DNS names.
    let isIP = isIPAddress(host)
    let identity = ServerIdentityPolicy(serverHostname: isIP ? nil : host, serverIP: isIP ? host : nil)
    var verifier = Verifier(rootCertificates: CertificateStore(anchorsOnly ? anchors : anchors + systemRoots)) {
        RFC5280Policy(fixedExpiryValidationTime: date)
        identity
    }
    switch await verifier.validate(leaf: leaf, intermediates: CertificateStore(certificates.dropFirst())) {
    case .validCertificate(let validated):
        return try validated.map { certificate in
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return Data(serializer.serializedBytes)
        }
    case .couldNotValidate:
        // The verifier reports every failed candidate chain; Apple reports one status. Decision: the leaf's dates
        // first, then its names, else not trusted (as SecTrust's result for the leaf-level problems).
        if date > leaf.notValidAfter {
            throw TrustEvaluationError(status: TrustEvaluationError.certificateExpired, message: "An expired certificate was detected. (\(leaf.subject) expired \(leaf.notValidAfter))")
        }
        if date < leaf.notValidBefore {
            throw TrustEvaluationError(status: TrustEvaluationError.certificateNotValidYet, message: "The certificate is not yet valid. (\(leaf.subject) is valid from \(leaf.notValidBefore))")
        }
        if !leafNames(leaf, host: host) {
            throw TrustEvaluationError(status: TrustEvaluationError.hostNameMismatch, message: "A host name mismatch has occurred. (\(leaf.subject) does not name \(host))")
        }
        throw TrustEvaluationError(status: TrustEvaluationError.notTrusted, message: "The trust policy was not trusted. (\(leaf.subject): no chain to a trusted root)")
    }
}

/// Whether the leaf's subject alternative names include `host` (a DNS name, `*.` matching one leftmost label, or
/// an IP address), as the server-identity policy checks it: only to tell a name mismatch apart from other failures.
private func leafNames(_ leaf: Certificate, host: String) -> Bool {
    guard let names = try? leaf.extensions.subjectAlternativeNames else { return false }
    let host = host.lowercased()
    var address = [UInt8](repeating: 0, count: 16)
    let ipBytes: [UInt8]? = host.contains(":")
        ? (inet_pton(AF_INET6, host, &address) == 1 ? address : nil)
        : (inet_pton(AF_INET, host, &address) == 1 ? Array(address.prefix(4)) : nil)
    return names.contains { name in
        switch name {
        case .dnsName(let dns):
            let dns = dns.lowercased()
            if dns == host { return true }
            guard dns.hasPrefix("*."), let dot = host.firstIndex(of: ".") else { return false }
            return host[dot...] == dns.dropFirst()
        case .ipAddress(let bytes):
            return ipBytes.map { Array(bytes.bytes) == $0 } ?? false
        default:
            return false
        }
    }
}
#endif
