#if NIO
import AsyncHTTPClient
import Foundation
import KeychainEngine
import NIOCore
import NIOHTTP1

/// What an etcd keychain's watch reports (``EtcdKeychain/changes(after:)``).
public enum EtcdKeychainChange: Sendable, Hashable {
    /// Keys of the keychain changed; `revision` is the newest change's store revision.
    case changed(revision: Int64)
    /// The watch could not resume where it was (etcd compacted the revisions it missed): whatever it missed is
    /// unknown, so read everything again. `revision` is the store's revision when etcd said so.
    case resynchronize(revision: Int64)
}

extension EtcdKeychain {
    /// The cluster's current store revision (one linearizable read of the keychain's header). Blocks.
    ///
    /// Read it before reading the items, then watch with ``changes(after:)`` from it: no change can fall in between.
    /// - Throws: `EngineError` `errSecNotAvailable` without a quorum (the message names the endpoints), `errSecAuthFailed`.
    public func currentRevision() throws -> Int64 {
        do {
            return try client.range(keyspace.meta, limit: 1).revision
        } catch let error as EtcdError {
            throw error.engineError
        }
    }

    /// Every change of this keychain's keys after `revision`, through etcd's watch API: one HTTP stream (the v3 JSON
    /// gateway's `/v3/watch`) for the sequence's life, on the endpoints in turn.
    ///
    /// When the stream breaks (a member killed or restarted, a connection reset), it is made again on the next
    /// endpoint from the revision after the last one seen, so no change is lost; etcd replays what was missed. When
    /// that revision was compacted away, the sequence yields ``EtcdKeychainChange/resynchronize(revision:)`` and
    /// goes on from the store's current revision. Reconnections back off from 25 ms to 1 s while no member answers;
    /// the sequence never ends on its own (cancel the task that iterates it).
    ///
    /// Decision: the watch only tells that something changed (and when); the rows are read again through the
    /// keychain, which decrypts and checks them: the watch never hands out sealed rows.
    ///
    /// - Throws: (from the iteration) `EngineError` `errSecAuthFailed` / `errSecWrPerm` when etcd refuses the
    ///   credentials: those are not retried.
    public func changes(after revision: Int64) -> AsyncThrowingStream<EtcdKeychainChange, any Error> {
        let watch = EtcdWatch(client: client, prefix: keyspace.prefix)
        return AsyncThrowingStream(bufferingPolicy: .unbounded) { continuation in
            let task = Task {
                do {
                    try await watch.run(from: revision + 1) { continuation.yield($0) }
                    continuation.finish()
                } catch let error as EtcdError {
                    continuation.finish(throwing: error.engineError)
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

/// One watch of a key prefix, made again after each break.
struct EtcdWatch: Sendable {
    let client: EtcdClient
    let prefix: Data

    /// How many streams were made (the first one and each reconnection): tests.
    static let streamsOpened = Locked(0)

    func run(from start: Int64, yield: @Sendable (EtcdKeychainChange) -> Void) async throws {
        var next = start
        var index = 0
        var backoff: Duration = .milliseconds(25)
        let endpoints = client.configuration.endpoints
        while !Task.isCancelled {
            let endpoint = endpoints[index % endpoints.count]
            var sawAnswer = false
            do {
                try await stream(endpoint: endpoint, from: next) { message in
                    sawAnswer = true
                    if let error = message.error {
                        throw EtcdError.server(code: error.code ?? 0, message: "etcd at \(endpoint) ended the watch: \(error.message ?? "no message")")
                    }
                    guard let result = message.result else { return }
                    let revision = result.header?.revision?.value ?? 0
                    if let compacted = result.compactRevision?.value, compacted > 0 {
                        // The revisions asked for are gone: read everything again, watch from now on.
                        next = max(next, revision + 1)
                        yield(.resynchronize(revision: revision))
                        throw WatchRestart()
                    }
                    if result.canceled == true {
                        throw WatchRestart()
                    }
                    let events = result.events ?? []
                    guard !events.isEmpty else { return }
                    let newest = events.compactMap { $0.kv?.modRevision?.value }.max() ?? revision
                    next = max(next, newest + 1)
                    yield(.changed(revision: newest))
                }
            } catch is CancellationError {
                return
            } catch is WatchRestart {
                continue
            } catch let error as EtcdError {
                switch error {
                case .authenticationFailed, .permissionDenied: throw error
                default: break
                }
            } catch {
                if Task.isCancelled { return }
            }
            if Task.isCancelled { return }
            // The stream broke: the next endpoint, from the revision after the last one seen.
            index += 1
            if sawAnswer {
                backoff = .milliseconds(25)
            } else {
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(1))
            }
        }
    }

    private struct WatchRestart: Error {}

    /// One HTTP stream: sends the create request, hands each message to `handle` until the stream ends.
    private func stream(endpoint: EtcdConfiguration.Endpoint, from revision: Int64,
                        handle: (Wire.WatchMessage) throws -> Void) async throws {
        let configuration = client.configuration
        var request = HTTPClientRequest(url: "\(configuration.tls == nil ? "http" : "https")://\(endpoint)/v3/watch")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Grpc-Metadata-hasleader", value: "true")
        if configuration.user != nil {
            let client = self.client
            let token = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, any Error>) in
                // The token call blocks (one authenticate request at most): a thread of its own, not the pool.
                let thread = Thread {
                    continuation.resume(with: Result {
                        try client.token(deadline: .now() + .nanoseconds(Int64(configuration.timeout * 1_000_000_000)))
                    })
                }
                thread.start()
            }
            if !token.isEmpty { request.headers.add(name: "Authorization", value: token) }
        }
        let create = Wire.WatchRequest(createRequest: .init(key: prefix, rangeEnd: EtcdClient.prefixEnd(prefix),
                                                            startRevision: WireInt64(revision)))
        request.body = .bytes(ByteBuffer(bytes: try JSONEncoder().encode(create)))
        EtcdWatch.streamsOpened.withLock { $0 += 1 }
        let response = try await client.http.execute(request, deadline: .distantFuture)
        guard response.status == .ok else {
            throw EtcdError.unavailable("etcd at \(endpoint) answered \(response.status.code) to a watch")
        }
        var splitter = JSONObjectSplitter()
        for try await buffer in response.body {
            for object in splitter.feed(buffer.readableBytesView) {
                let message = try JSONDecoder().decode(Wire.WatchMessage.self, from: object)
                try handle(message)
            }
        }
    }
}

/// Cuts a byte stream of concatenated JSON objects (what the gateway streams, one message after another) into objects.
struct JSONObjectSplitter {
    private var pending: [UInt8] = []
    private var depth = 0
    private var inString = false
    private var escaped = false
    private var scanned = 0

    mutating func feed(_ bytes: some Collection<UInt8>) -> [Data] {
        pending.append(contentsOf: bytes)
        var objects: [Data] = []
        var start = 0
        var index = scanned
        while index < pending.count {
            let byte = pending[index]
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
            } else if byte == UInt8(ascii: "\"") {
                inString = true
            } else if byte == UInt8(ascii: "{") {
                if depth == 0 { start = index }
                depth += 1
            } else if byte == UInt8(ascii: "}") {
                depth -= 1
                if depth == 0 {
                    objects.append(Data(pending[start...index]))
                    start = index + 1
                }
            } else if depth == 0 {
                start = index + 1
            }
            index += 1
        }
        let consumed = depth == 0 ? pending.count : start
        pending.removeFirst(consumed)
        scanned = pending.count
        return objects
    }
}

extension Wire {
    struct WatchRequest: Encodable {
        struct Create: Encodable {
            var key: Data
            var rangeEnd: Data
            var startRevision: WireInt64
            enum CodingKeys: String, CodingKey { case key, rangeEnd = "range_end", startRevision = "start_revision" }
        }
        var createRequest: Create
        enum CodingKeys: String, CodingKey { case createRequest = "create_request" }
    }

    struct WatchMessage: Decodable {
        struct Result: Decodable {
            struct Event: Decodable {
                var type: String?
                var kv: KeyValue?
            }
            var header: ResponseHeader?
            var created: Bool?
            var canceled: Bool?
            var compactRevision: WireInt64?
            var cancelReason: String?
            var events: [Event]?
            enum CodingKeys: String, CodingKey {
                case header, created, canceled, events
                case compactRevision = "compact_revision", cancelReason = "cancel_reason"
            }
        }
        struct Failure: Decodable {
            var code: Int?
            var message: String?
        }
        var result: Result?
        var error: Failure?
    }
}
#endif
