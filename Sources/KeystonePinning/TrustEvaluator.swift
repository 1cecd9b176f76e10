// Normal trust evaluation for KeystonePinning, kept in this one file: SecTrust on every platform (Security on Apple
// platforms; KeychainServices' SecTrust, over swift-certificates' verifier, on Linux, through its `Security` module).
import Foundation
import SwiftASN1
import X509
#if canImport(Darwin)
import Security
#else
// SecTrust on Linux: KeychainServices (not the `Security` shim, so that pinning builds no module of that name).
import KeychainServices
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

    /// The platform's TLS server trust: the chain must lead to a trusted root, be valid at `verifyDate`, the leaf
    /// must name the host and be a server's certificate (Apple's SSL server policy).
    ///
    /// This is `SecTrustEvaluateWithError` with `SecPolicyCreateSSL(true, host)` on every platform: Security's on
    /// Apple platforms, KeychainServices' on Linux (swift-certificates' verifier against the system roots:
    /// `$SSL_CERT_FILE` / `$SSL_CERT_DIR`, else the distribution's CA bundle, with Apple's SSL policy checks). So a
    /// certificate of the pinned CA made for another use (a client certificate, code signing) is refused as the
    /// server's, even when its key is pinned.
    ///
    /// - Parameters:
    ///   - anchors: Extra trusted roots (a private CA), as `SecTrustSetAnchorCertificates`.
    ///   - anchorsOnly: Trust only `anchors`, not the system roots (as `SecTrustSetAnchorCertificatesOnly`). Ignored
    ///     when `anchors` is empty.
    ///   - verifyDate: The date the chain must be valid at (`SecTrustSetVerifyDate`); now when `nil`.
    /// - Returns: An evaluator whose failures are ``TrustEvaluationError``s with Apple's OSStatus: `errSecNotTrusted`
    ///   (-67843), `errSecCreateChainFailed` (-25318), `errSecCertificateExpired` (-67818),
    ///   `errSecCertificateNotValidYet` (-67819), `errSecHostNameMismatch` (-67602), `errSecInvalidExtendedKeyUsage`
    ///   (-67609: the leaf is not a TLS server's certificate), `errSecCertificateValidityPeriodTooLong` (-67901: the
    ///   leaf is valid longer than Apple allows), `errSecInvalidDigestAlgorithm`
    ///   (-67815: SHA-1), `errSecDecode` (-26275) for bytes that are not a certificate.
    /// - Important: A leaf issued after 1 July 2019 by a private CA passed as `anchors` must list serverAuth in its
    ///   extended key usage and be valid for at most 825 days, as on Apple platforms.
    public static func system(anchors: [Certificate] = [], anchorsOnly: Bool = false, verifyDate: Date? = nil) -> TrustEvaluator {
        let anchorsOnly = anchorsOnly && !anchors.isEmpty
        return TrustEvaluator { chain, host in
            // SecTrustEvaluateWithError blocks (on Apple platforms it may fetch revocation data): on a Dispatch
            // thread, never the caller's thread or Swift's cooperative pool.
            try await withCheckedThrowingContinuation { continuation in
                DispatchQueue.global(qos: .userInitiated).async {
                    continuation.resume(with: Result {
                        try evaluateWithSecTrust(chain: chain, host: host, anchors: anchors, anchorsOnly: anchorsOnly, verifyDate: verifyDate)
                    })
                }
            }
        }
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
