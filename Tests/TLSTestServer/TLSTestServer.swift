#if !canImport(Darwin)
import Crypto
import Foundation
import NIOCore
import NIOPosix
import NIOSSL

/// A TLS server on 127.0.0.1, on a port the system picks, presenting a given chain to every client. It completes
/// handshakes and then answers nothing. Start it in the test, stop it at the end.
public final class TLSTestServer: Sendable {
    /// The port the server listens on.
    public let port: Int
    private let channel: any Channel

    private init(channel: any Channel, port: Int) {
        self.channel = channel
        self.port = port
    }

    /// Starts a server presenting `chain` (leaf first, DER) with the leaf's private `key`.
    public static func start(chain: [Data], key: P256.Signing.PrivateKey) async throws -> TLSTestServer {
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: try chain.map { .certificate(try NIOSSLCertificate(bytes: Array($0), format: .der)) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(key.pemRepresentation.utf8), format: .pem))
        )
        let context = try NIOSSLContext(configuration: configuration)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try child.pipeline.syncOperations.addHandler(CloseOnError())
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        guard let port = channel.localAddress?.port else { throw ChannelError.inappropriateOperationForState }
        return TLSTestServer(channel: channel, port: port)
    }

    /// Starts a server presenting `identities` (leaf first); the first one's key is the server's.
    public static func start(presenting identities: [TestPKI.Identity]) async throws -> TLSTestServer {
        try await start(chain: identities.map(\.der), key: identities[0].key)
    }

    /// Stops listening (connections in progress end with their clients).
    public func stop() async throws {
        try await channel.close()
    }
}

/// A client refusing the chain ends the handshake with an alert: close quietly.
private final class CloseOnError: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
#endif
