// Linux: swift-nio-ssl is the TLS stack, so pinning hooks into its custom verification callback. (On Apple platforms
// URLSession and Network.framework evaluate trust: see URLSessionPinning.swift.)
#if NIO && !canImport(Darwin)
import Foundation
import NIOCore
import NIOPosix
import NIOSSL

extension PinningPolicy {
    /// swift-nio-ssl's custom verification callback: normal trust evaluation and then this policy's pins, on the
    /// chain the server presented.
    ///
    /// The callback replaces BoringSSL's own verification (so `evaluator` is the whole of trust evaluation). The
    /// evaluation runs in a task; the handshake waits for it.
    ///
    /// - Parameters:
    ///   - host: The host connected to (the server name the leaf must carry, and the policy's key).
    ///   - evaluator: Normal trust evaluation; ``TrustEvaluator/system(anchors:anchorsOnly:verifyDate:)`` by default.
    ///   - onFailure: Called with the reason when the chain is refused (a ``PinningError`` or the evaluator's
    ///     ``TrustEvaluationError``): the handshake itself fails with swift-nio-ssl's generic handshake error.
    /// - Returns: A callback for `NIOSSLClientHandler(context:serverHostname:customVerificationCallbackWithMetadata:)`.
    public func verificationCallback(
        host: String,
        evaluator: TrustEvaluator = .system(),
        onFailure: (@Sendable (any Error) -> Void)? = nil
    ) -> NIOSSLCustomVerificationCallbackWithMetadata {
        { certificates, promise in
            let chain: [Data]
            do {
                chain = try certificates.map { Data(try $0.toDERBytes()) }
            } catch {
                onFailure?(error)
                promise.succeed(.failed)
                return
            }
            Task {
                do {
                    let validated = try await self.evaluate(chain: chain, host: host, evaluator: evaluator)
                    let nioChain = try validated.map { try NIOSSLCertificate(bytes: Array($0), format: .der) }
                    promise.succeed(.certificateVerified(VerificationMetadata(ValidatedCertificateChain(nioChain))))
                } catch {
                    onFailure?(error)
                    promise.succeed(.failed)
                }
            }
        }
    }

    /// A client TLS configuration for pinned connections: `base` with certificate verification on (the
    /// verification callback of ``makeSSLHandler(host:configuration:evaluator:onFailure:)`` only runs when
    /// verification is enabled).
    ///
    /// - Parameter base: The configuration to start from (`TLSConfiguration.makeClientConfiguration()` by default).
    public func clientTLSConfiguration(base: TLSConfiguration = .makeClientConfiguration()) -> TLSConfiguration {
        var configuration = base
        configuration.certificateVerification = .fullVerification
        return configuration
    }

    /// A client TLS handler for a connection to `host` that applies normal trust evaluation and this policy.
    ///
    /// ```swift
    /// let handler = try policy.makeSSLHandler(host: "api.example.com")
    /// try channel.pipeline.syncOperations.addHandler(handler)
    /// ```
    ///
    /// - Parameters:
    ///   - host: The host connected to; sent as the TLS server name (SNI) unless it is an IP address.
    ///   - configuration: The TLS configuration; ``clientTLSConfiguration(base:)`` by default.
    ///   - evaluator: Normal trust evaluation.
    ///   - onFailure: Called with the reason a chain is refused.
    /// - Throws: swift-nio-ssl's errors creating the context or the handler.
    public func makeSSLHandler(
        host: String,
        configuration: TLSConfiguration? = nil,
        evaluator: TrustEvaluator = .system(),
        onFailure: (@Sendable (any Error) -> Void)? = nil
    ) throws -> NIOSSLClientHandler {
        let context = try NIOSSLContext(configuration: configuration ?? clientTLSConfiguration())
        return try NIOSSLClientHandler(
            context: context,
            serverHostname: isIPAddress(host) ? nil : host,
            customVerificationCallbackWithMetadata: verificationCallback(host: host, evaluator: evaluator, onFailure: onFailure)
        )
    }
}

/// The chain a TLS server presents, read without verifying it (for `keystone pin`: what the server shows, trusted
/// or not).
public enum PresentedChain {
    /// Connects to `host`:`port`, completes the TLS handshake's certificate step, and returns the server's chain as
    /// presented (DER, leaf first), then closes the connection.
    ///
    /// - Important: Nothing is verified: the certificates are whatever answered at that address. Check the pins you
    ///   take from them on a trusted network, or against the certificate files themselves.
    /// - Parameters:
    ///   - host: A host name or IP address (the name is also sent as SNI).
    ///   - port: The TCP port.
    ///   - serverName: The SNI name when it differs from `host` (`nil`: `host` unless it is an IP address).
    ///   - group: The event loop group to connect on.
    ///   - handshakeTimeout: How long the server may take, once connected, to present its certificates (a server
    ///     that accepts the connection and never answers fails with ``HandshakeTimedOut`` instead of hanging).
    /// - Returns: A future of the presented chain; it fails with the connection's or the handshake's error.
    public static func fetch(
        host: String, port: Int, serverName: String? = nil,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        handshakeTimeout: TimeAmount = .seconds(15)
    ) -> EventLoopFuture<[Data]> {
        let loop = group.next()
        let chainPromise = loop.makePromise(of: [Data].self)
        do {
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.certificateVerification = .fullVerification  // replaced by the callback below
            let context = try NIOSSLContext(configuration: configuration)
            let name = serverName ?? (isIPAddress(host) ? nil : host)
            let bootstrap = ClientBootstrap(group: loop)
                .connectTimeout(.seconds(10))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let handler = try NIOSSLClientHandler(context: context, serverHostname: name) { certificates, promise in
                            chainPromise.completeWith(Result { try certificates.map { Data(try $0.toDERBytes()) } })
                            promise.succeed(.certificateVerified(VerificationMetadata(nil)))
                        }
                        try channel.pipeline.syncOperations.addHandler(handler)
                        try channel.pipeline.syncOperations.addHandler(HandshakeFailureRelay(promise: chainPromise))
                    }
                }
            bootstrap.connect(host: host, port: port).whenComplete { result in
                switch result {
                case .success(let channel):
                    let deadline = channel.eventLoop.scheduleTask(in: handshakeTimeout) {
                        chainPromise.fail(HandshakeTimedOut(host: host, port: port))
                    }
                    chainPromise.futureResult.whenComplete { _ in
                        deadline.cancel()
                        channel.close(promise: nil)
                    }
                case .failure(let error):
                    chainPromise.fail(error)
                }
            }
        } catch {
            chainPromise.fail(error)
        }
        return chainPromise.futureResult
    }

    /// The async form of `fetch(host:port:serverName:group:)`.
    public static func fetch(host: String, port: Int, serverName: String? = nil) async throws -> [Data] {
        try await fetch(host: host, port: port, serverName: serverName, group: MultiThreadedEventLoopGroup.singleton).get()
    }
}

/// The server accepted the connection but presented no certificate in time.
public struct HandshakeTimedOut: Error, CustomStringConvertible {
    /// The server.
    public let host: String
    /// The port.
    public let port: Int
    public var description: String { "\(host):\(port) accepted the connection but presented no certificate in time (is it a TLS port?)" }
}

/// The server closed the connection before presenting certificates.
public struct NoCertificatePresented: Error, CustomStringConvertible {
    public var description: String { "The server closed the connection without presenting a certificate" }
}

/// Fails the chain promise with the handshake's error or the connection's end (a promise completes once: after the
/// chain arrived these do nothing).
private final class HandshakeFailureRelay: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny
    let promise: EventLoopPromise<[Data]>
    init(promise: EventLoopPromise<[Data]>) { self.promise = promise }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(NoCertificatePresented())
        context.fireChannelInactive()
    }
}

func isIPAddress(_ host: String) -> Bool {
    var v4 = in_addr(), v6 = in6_addr()
    return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
}
#endif
