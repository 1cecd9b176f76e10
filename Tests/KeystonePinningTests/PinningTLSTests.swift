#if !canImport(Darwin)
import Crypto
import Foundation
import KeystonePinning
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization
import Testing
@testable import TLSTestServer
import X509

/// What a callback received, read after the handshake.
final class Collected<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])
    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
}

/// Completes when the TLS handshake does, fails with the handshake's error or the connection's end.
private final class HandshakeWaiter: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny
    let promise: EventLoopPromise<Void>
    init(promise: EventLoopPromise<Void>) { self.promise = promise }
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event { promise.succeed() }
        context.fireUserInboundEventTriggered(event)
    }
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }
    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(ChannelError.eof)
        context.fireChannelInactive()
    }
}

/// Connects to the test server on 127.0.0.1 as `host` with `policy`; throws the reason the chain was refused.
func connect(port: Int, host: String, policy: PinningPolicy, evaluator: TrustEvaluator) async throws {
    let reasons = Collected<any Error>()
    let loop = MultiThreadedEventLoopGroup.singleton.next()
    let handshake = loop.makePromise(of: Void.self)
    let channel = try await ClientBootstrap(group: loop)
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                let handler = try policy.makeSSLHandler(host: host, evaluator: evaluator) { reasons.append($0) }
                try channel.pipeline.syncOperations.addHandler(handler)
                try channel.pipeline.syncOperations.addHandler(HandshakeWaiter(promise: handshake))
            }
        }
        .connect(host: "127.0.0.1", port: port)
        .get()
    defer { channel.close(promise: nil) }
    do {
        try await handshake.futureResult.get()
    } catch {
        if let reason = reasons.all.first { throw reason }
        throw error
    }
    #expect(reasons.all.isEmpty)
}

@Suite("Pinning against a real TLS server (swift-nio-ssl on 127.0.0.1, a private CA)")
struct PinningTLSTests {
    let pki: TestPKI
    let evaluator: TrustEvaluator
    static let host = "api.example.test"
    /// Leaves are valid 800 days from TestPKI.notBefore (2025-01-01): within the 825 days Apple's SSL policy allows
    /// a leaf issued after 1 July 2019 under an app's anchor. Evaluated a year in (2026-01-01).
    static let leafNotAfter = TestPKI.notBefore.addingTimeInterval(800 * 86_400)
    static let verifyDate = TestPKI.notBefore.addingTimeInterval(365 * 86_400)

    init() throws {
        pki = try TestPKI(name: "pinning")
        evaluator = .system(anchors: [pki.root.certificate], anchorsOnly: true, verifyDate: Self.verifyDate)
    }

    /// A server leaf for `hosts` (EKU serverAuth) from the pinned PKI's intermediate.
    func leaf(hosts: [String], key: P256.Signing.PrivateKey = .init(), notAfter: Date = Self.leafNotAfter) throws -> TestPKI.Identity {
        try pki.leaf(hosts: hosts, key: key, notAfter: notAfter)
    }

    /// A client certificate for `host` (EKU clientAuth only) from the pinned PKI's intermediate.
    func clientLeaf(host: String) throws -> TestPKI.Identity {
        let key = P256.Signing.PrivateKey()
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: TestPKI.notBefore, notValidAfter: Self.leafNotAfter,
            issuer: pki.intermediate.certificate.subject, subject: try DistinguishedName { CommonName(host) },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.clientAuth])
                SubjectAlternativeNames([.dnsName(host)])
            },
            issuerPrivateKey: .init(pki.intermediate.key))
        return TestPKI.Identity(certificate: certificate, key: key)
    }

    func pin(_ identity: TestPKI.Identity) -> String { SPKIPin(certificate: identity.certificate).description }

    func withServer(_ leaf: TestPKI.Identity, _ body: (Int) async throws -> Void) async throws {
        let server = try await TLSTestServer.start(presenting: pki.chain(for: leaf))
        do { try await body(server.port) } catch { try await server.stop(); throw error }
        try await server.stop()
    }

    @Test("a chain with a pinned key passes, whether the pin is the leaf's or the intermediate's", arguments: [true, false])
    func matchingPin(pinLeaf: Bool) async throws {
        let leaf = try leaf(hosts: [Self.host])
        let policy = try PinningPolicy([
            .init(host: Self.host, pins: [pinLeaf ? pin(leaf) : pin(pki.intermediate), pinText(1)]),
        ])
        try await withServer(leaf) { port in
            try await connect(port: port, host: Self.host, policy: policy, evaluator: evaluator)
        }
    }

    @Test("a trusted chain with no pinned key fails closed, naming the host and the pins seen")
    func noMatchingPin() async throws {
        let leaf = try leaf(hosts: [Self.host])
        let reports = Collected<PinningFailureReport>()
        let policy = try PinningPolicy([.init(host: Self.host, pins: [pinText(1), pinText(2)])], onFailure: { reports.append($0) })
        let seen = [leaf, pki.intermediate, pki.root].map { SPKIPin(certificate: $0.certificate) }
        try await withServer(leaf) { port in
            await #expect(throws: PinningError.pinMismatch(host: Self.host, seen: seen)) {
                try await connect(port: port, host: Self.host, policy: policy, evaluator: evaluator)
            }
        }
        #expect(reports.all == [PinningFailureReport(host: Self.host, seen: seen, enforced: true)])
        let message = PinningError.pinMismatch(host: Self.host, seen: seen).description
        #expect(message.contains(Self.host) && seen.allSatisfy { message.contains($0.description) })
    }

    @Test("the backup pin keeps the app online after the server rotates to the backup key; a third key fails")
    func rotation() async throws {
        let backupKey = P256.Signing.PrivateKey()
        let current = try leaf(hosts: [Self.host])
        let backupPin = SPKIPin(subjectPublicKeyInfo: backupKey.publicKey.derRepresentation).description
        let policy = try PinningPolicy([.init(host: Self.host, pins: [pin(current), backupPin])])
        try await withServer(current) { port in
            try await connect(port: port, host: Self.host, policy: policy, evaluator: evaluator)
        }
        try await withServer(try leaf(hosts: [Self.host], key: backupKey)) { port in
            try await connect(port: port, host: Self.host, policy: policy, evaluator: evaluator)
        }
        try await withServer(try leaf(hosts: [Self.host])) { port in
            await #expect(throws: PinningError.self) {
                try await connect(port: port, host: Self.host, policy: policy, evaluator: evaluator)
            }
        }
    }

    @Test("an expired policy no longer enforces its pins; before its expiration it does", arguments: [true, false])
    func expiredPolicy(expired: Bool) async throws {
        let leaf = try leaf(hosts: [Self.host])
        let expiration = Date(timeIntervalSince1970: 1_900_000_000)
        let policy = try PinningPolicy(
            [.init(host: Self.host, pins: [pinText(1), pinText(2)], expiration: expiration)],
            now: { expired ? expiration.addingTimeInterval(1) : expiration.addingTimeInterval(-1) })
        try await withServer(leaf) { port in
            if expired {
                try await connect(port: port, host: Self.host, policy: policy, evaluator: evaluator)
            } else {
                await #expect(throws: PinningError.self) {
                    try await connect(port: port, host: Self.host, policy: policy, evaluator: evaluator)
                }
            }
        }
    }

    @Test("report-only allows a chain without a pinned key and reports it")
    func reportOnly() async throws {
        let leaf = try leaf(hosts: [Self.host])
        let reports = Collected<PinningFailureReport>()
        let policy = try PinningPolicy([.init(host: Self.host, pins: [pinText(1), pinText(2)])],
                                       mode: .reportOnly, onFailure: { reports.append($0) })
        try await withServer(leaf) { port in
            try await connect(port: port, host: Self.host, policy: policy, evaluator: evaluator)
        }
        let seen = [leaf, pki.intermediate, pki.root].map { SPKIPin(certificate: $0.certificate) }
        #expect(reports.all == [PinningFailureReport(host: Self.host, seen: seen, enforced: false)])
    }

    @Test("a host outside the policy gets normal trust only")
    func hostOutsidePolicy() async throws {
        let leaf = try leaf(hosts: [Self.host, "other.example.test"])
        let policy = try PinningPolicy([.init(host: Self.host, pins: [pinText(1), pinText(2)])])
        try await withServer(leaf) { port in
            try await connect(port: port, host: "other.example.test", policy: policy, evaluator: evaluator)
            await #expect(throws: PinningError.self) {
                try await connect(port: port, host: Self.host, policy: policy, evaluator: evaluator)
            }
        }
    }

    enum TrustCase: String, CaseIterable { case wrongHost, expiredLeaf, unknownRoot }

    @Test("normal trust is enforced first, even in report-only mode, with Apple's OSStatus", arguments: TrustCase.allCases)
    func trustFailures(trustCase: TrustCase) async throws {
        let leaf = try leaf(hosts: [trustCase == .wrongHost ? "elsewhere.example.test" : Self.host],
                                notAfter: trustCase == .expiredLeaf ? Self.verifyDate.addingTimeInterval(-86_400) : Self.leafNotAfter)
        let other = try TestPKI(name: "other")
        let evaluator = trustCase == .unknownRoot
            ? TrustEvaluator.system(anchors: [other.root.certificate], anchorsOnly: true, verifyDate: Self.verifyDate)
            : self.evaluator
        let policy = try PinningPolicy([.init(host: Self.host, pins: [pin(leaf), pinText(2)])], mode: .reportOnly)
        let status: Int32 = switch trustCase {
        case .wrongHost: -67602  // errSecHostNameMismatch
        case .expiredLeaf: -67818  // errSecCertificateExpired
        // The server presents leaf and intermediate; the intermediate's issuer is no anchor: SecTrust's
        // MissingIntermediate check (Apple's SecPolicyChecks.list), errSecCreateChainFailed.
        case .unknownRoot: -25318
        }
        try await withServer(leaf) { port in
            do {
                try await connect(port: port, host: Self.host, policy: policy, evaluator: evaluator)
                Issue.record("the handshake succeeded")
            } catch let error as TrustEvaluationError {
                #expect(error.status == status)
            }
        }
    }

    @Test("a client certificate (EKU clientAuth only) from the pinned CA is refused as a server, with errSecInvalidExtendedKeyUsage, even with its key pinned")
    func clientCertificateAsServer() async throws {
        let client = try clientLeaf(host: Self.host)
        let policy = try PinningPolicy([.init(host: Self.host, pins: [pin(client), pin(pki.intermediate)])])
        try await withServer(client) { port in
            do {
                try await connect(port: port, host: Self.host, policy: policy, evaluator: evaluator)
                Issue.record("the handshake succeeded with a client certificate as the server's")
            } catch let error as TrustEvaluationError {
                #expect(error.status == -67609)  // errSecInvalidExtendedKeyUsage
                #expect(error.message == "“\(Self.host)” certificate is not permitted for this usage")
            }
        }
        // The same CA's server certificate for the host passes: only the usage differs.
        let server = try leaf(hosts: [Self.host])
        let serverPolicy = try PinningPolicy([.init(host: Self.host, pins: [pin(server), pin(pki.intermediate)])])
        try await withServer(server) { port in
            try await connect(port: port, host: Self.host, policy: serverPolicy, evaluator: evaluator)
        }
    }

    // Time is the behaviour here: a deadline must fire. The listener never answers, so only the deadline can end
    // the fetch; a short deadline keeps the test quick and cannot race a real answer.
    @Test("fetching the presented chain from a port that accepts and never answers fails with HandshakeTimedOut")
    func silentServer() async throws {
        let silent = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { _ in MultiThreadedEventLoopGroup.singleton.any().makeSucceededVoidFuture() }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { silent.close(promise: nil) }
        let port = try #require(silent.localAddress?.port)
        await #expect(throws: HandshakeTimedOut.self) {
            _ = try await PresentedChain.fetch(host: "127.0.0.1", port: port, serverName: Self.host,
                                               group: MultiThreadedEventLoopGroup.singleton, handshakeTimeout: .milliseconds(300)).get()
        }
    }
}
#endif
