// Apple platforms: URLSession asks its delegate about server trust; the system has already built the SecTrust
// (with the SSL policy for the host), so the hooks evaluate it and then check the pins.
#if canImport(Darwin)
import Foundation
import Security

extension PinningPolicy {
    /// Applies the policy to a URLSession authentication challenge, for delegates that already exist.
    ///
    /// Server-trust challenges (`NSURLAuthenticationMethodServerTrust`) are evaluated with
    /// `SecTrustEvaluateWithError` and then this policy's pins: the handler gets `.useCredential` when both pass,
    /// `.cancelAuthenticationChallenge` otherwise. Other challenges get `.performDefaultHandling`.
    ///
    /// - Important: Call it from the delegate's callback (the session's delegate queue): evaluation may block
    ///   while the system fetches revocation data.
    /// - Parameters:
    ///   - challenge: The challenge the session gave the delegate.
    ///   - completionHandler: The delegate's completion handler.
    /// - Returns: Whether the challenge was a server-trust challenge (handled either way).
    @discardableResult
    public func handle(
        _ challenge: URLAuthenticationChallenge,
        completionHandler: (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) -> Bool {
        guard challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust,
              let trust = challenge.protectionSpace.serverTrust else {
            completionHandler(.performDefaultHandling, nil)
            return false
        }
        let host = challenge.protectionSpace.host
        var error: CFError?
        guard SecTrustEvaluateWithError(trust, &error) else {
            completionHandler(.cancelAuthenticationChallenge, nil)
            return true
        }
        let chain = (SecTrustCopyCertificateChain(trust) as? [SecCertificate] ?? []).map { SecCertificateCopyData($0) as Data }
        do {
            try checkPins(validatedChain: chain, host: host)
            completionHandler(.useCredential, URLCredential(trust: trust))
        } catch {
            completionHandler(.cancelAuthenticationChallenge, nil)
        }
        return true
    }
}

/// A URLSession delegate that applies a ``PinningPolicy`` to server-trust challenges.
///
/// ```swift
/// let session = URLSession(configuration: .default, delegate: PinningURLSessionDelegate(policy: policy), delegateQueue: nil)
/// ```
///
/// - Important: URLSession keeps a strong reference to its delegate until the session is invalidated.
public final class PinningURLSessionDelegate: NSObject, URLSessionDelegate, Sendable {
    /// The policy applied to every server-trust challenge.
    public let policy: PinningPolicy

    /// A delegate applying `policy`.
    public init(policy: PinningPolicy) {
        self.policy = policy
    }

    public func urlSession(
        _ session: URLSession,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        policy.handle(challenge, completionHandler: completionHandler)
    }
}
#endif
