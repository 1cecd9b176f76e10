#if NIO
import AsyncHTTPClient
import Foundation
import KeychainEngine
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// One key of etcd's key-value store with its revisions.
package struct EtcdKeyValue: Sendable, Hashable {
    package var key: Data
    package var value: Data
    /// The store revision of the key's creation (0 for a key that does not exist).
    package var createRevision: Int64
    /// The store revision of the key's last change.
    package var modRevision: Int64
    /// How many times the key changed since its creation (1 after the first put).
    package var version: Int64

    package init(key: Data, value: Data, createRevision: Int64, modRevision: Int64, version: Int64) {
        self.key = key
        self.value = value
        self.createRevision = createRevision
        self.modRevision = modRevision
        self.version = version
    }
}

/// The answer of a range read.
package struct EtcdRangeResult: Sendable {
    /// The store revision the read saw (one consistent snapshot).
    package var revision: Int64
    package var kvs: [EtcdKeyValue]
    /// True when `limit` cut the answer short.
    package var more: Bool
    /// How many keys the range holds (regardless of `limit`).
    package var count: Int64

    package init(revision: Int64, kvs: [EtcdKeyValue], more: Bool, count: Int64) {
        self.revision = revision
        self.kvs = kvs
        self.more = more
        self.count = count
    }
}

/// A condition of a transaction. A key that does not exist has create and mod revision 0.
package enum EtcdCompare: Sendable, Hashable {
    case createRevision(Data, equals: Int64)
    case modRevision(Data, equals: Int64)
    case value(Data, equals: Data)
    /// No key starting with the prefix was created after `revision` (an etcd compare over the range: every key's
    /// create revision below `revision + 1`; true when no key exists).
    case noKeyCreated(prefix: Data, after: Int64)
}

/// An operation of a transaction.
package enum EtcdOperation: Sendable, Hashable {
    /// Put a key's value.
    case put(Data, Data)
    /// Delete one key.
    case delete(Data)
    /// Delete every key that starts with the prefix.
    case deletePrefix(Data)
    /// Read one key.
    case range(Data)
    /// Read the keys that start with the prefix, in key order, at most `limit` of them (nil: all).
    case rangePrefix(Data, limit: Int?)
}

/// The result of one transaction operation, in the order of the operations.
package enum EtcdOperationResult: Sendable {
    case range(EtcdRangeResult)
    case put
    case delete(deleted: Int64)
}

/// The answer of a transaction.
package struct EtcdTxnResult: Sendable {
    /// The store revision after the transaction.
    package var revision: Int64
    /// Whether every comparison held (and so `success` ran, else `failure`).
    package var succeeded: Bool
    package var responses: [EtcdOperationResult]

    package init(revision: Int64, succeeded: Bool, responses: [EtcdOperationResult]) {
        self.revision = revision
        self.succeeded = succeeded
        self.responses = responses
    }
}

/// A member of the cluster.
package struct EtcdMember: Sendable, Hashable {
    package var id: UInt64
    /// Empty for a member added but not started yet.
    package var name: String
    package var clientURLs: [String]
    package var peerURLs: [String]

    package init(id: UInt64, name: String, clientURLs: [String], peerURLs: [String]) {
        self.id = id
        self.name = name
        self.clientURLs = clientURLs
        self.peerURLs = peerURLs
    }
}

/// One endpoint's own view of the cluster.
package struct EtcdEndpointStatus: Sendable {
    package var endpoint: EtcdConfiguration.Endpoint
    /// The etcd server version, e.g. "3.4.23".
    package var version: String
    /// The size of the member's database file in bytes.
    package var dbSize: Int64
    package var memberID: UInt64
    /// The member ID of the leader this member knows (0: none).
    package var leader: UInt64
    package var raftTerm: Int64
    package var raftIndex: Int64
    /// The bytes of the database in use (0: not reported); the rest a defragmentation would free.
    package var dbSizeInUse: Int64 = 0
    /// The alarms the member reports (etcd's status `errors`: "memberID:… alarm:NOSPACE ").
    package var errors: [String] = []
}

/// A blocking client of etcd's v3 JSON gateway with failover across the configured endpoints.
///
/// Every call blocks the calling thread until AsyncHTTPClient's `EventLoopFuture` completes (a semaphore the future's
/// callback signals, never longer than the request's deadline) while the client's own NIO thread does the I/O.
/// A call made on a SwiftNIO event-loop thread is refused with ``EtcdError/calledOnEventLoop(_:)`` before anything is
/// sent: on the client's own loop it would wait for itself forever, on another loop it would stall every channel of
/// that loop. A call has one deadline (``EtcdConfiguration/timeout``, from its
/// start) across every endpoint; each HTTP request gets min(remaining, max(0.5 s, timeout / 2)) so one hung member
/// cannot eat it all. Calls start at the endpoint that last answered (after a write that got no answer, the next one) and go round-robin.
///
/// Reads are retried on any endpoint until the deadline. Writes are retried on another endpoint only when they surely
/// were not applied (not connected, "no leader", "not capable"); a write that was sent and got no answer, or an answer
/// that leaves its fate open ("request timed out", "leader changed"), throws ``EtcdError/indeterminate(_:)`` at once.
package final class EtcdClient: Sendable {
    /// Where the client goes.
    package let configuration: EtcdConfiguration

    private let group: MultiThreadedEventLoopGroup
    let http: HTTPClient  // internal: the watch stream (EtcdWatch.swift) uses the same connections and TLS
    private let state = Locked(State())
    private let perRequestTimeout: TimeInterval
    private let sent = Atomic<Int>(0)

    /// HTTP requests this client has sent (every endpoint, every kind): how many round trips a call took.
    package var requestsSent: Int { sent.load(ordering: .relaxed) }

    private struct State {
        /// The endpoint that answered last: calls start there.
        var preferred = 0
        /// The authentication token of `configuration.user`.
        var token: String?
        var isShutDown = false
    }

    private enum CallKind {
        case read
        case write
        /// `/v3/auth/authenticate`: idempotent, sent without a token.
        case authenticate
        var isWrite: Bool { if case .write = self { true } else { false } }
    }

    /// A client for `configuration`, with its own event loop thread and connection pool (HTTP/1.1 keep-alive).
    ///
    /// - Throws: `EngineError` `errSecParam` when a TLS file cannot be read or parsed (the message names the file).
    package init(configuration: EtcdConfiguration) throws {
        self.configuration = configuration
        self.perRequestTimeout = max(0.5, configuration.timeout / 2)
        var httpConfiguration = HTTPClient.Configuration()
        if let tls = configuration.tls {
            httpConfiguration.tlsConfiguration = try Self.makeTLSConfiguration(tls)
        }
        httpConfiguration.httpVersion = .http1Only
        httpConfiguration.redirectConfiguration = .disallow
        httpConfiguration.decompression = .disabled
        httpConfiguration.timeout = HTTPClient.Configuration.Timeout(
            connect: .nanoseconds(Int64(perRequestTimeout * 1_000_000_000)))
        // A refused connection fails the request at once so the call moves on to the next endpoint, instead of the
        // pool retrying the same member with back-off until the request's deadline.
        httpConfiguration.connectionPool.retryConnectionEstablishment = false
        httpConfiguration.connectionPool.idleTimeout = .seconds(60)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.group = group
        self.http = HTTPClient(eventLoopGroupProvider: .shared(group), configuration: httpConfiguration)
    }

    deinit {
        shutdown()
    }

    /// Closes the connections and stops the client's event loop thread. Idempotent; later calls throw
    /// ``EtcdError/unavailable(_:)``.
    ///
    /// Waits until both are closed, except on a SwiftNIO event-loop thread (for instance when the last reference to a
    /// keychain is dropped there): there it starts the shutdown and returns, since waiting on the client's own loop
    /// would wait for itself, and NIO refuses to block any loop.
    package func shutdown() {
        let wasShutDown = state.withLock { state in
            defer { state.isShutDown = true }
            return state.isShutDown
        }
        guard !wasShutDown else { return }
        if MultiThreadedEventLoopGroup.currentEventLoop != nil {
            let group = self.group
            http.shutdown { _ in group.shutdownGracefully { _ in } }
            return
        }
        try? http.syncShutdown()
        try? group.syncShutdownGracefully()
    }

    /// Refuses a call made on a SwiftNIO event-loop thread.
    ///
    /// Decision: every event loop is refused, not only the client's own: on its own loop the call would deadlock (the
    /// answer is delivered by the thread that waits for it); on any other it would hold that loop's thread, and every
    /// channel it serves, for up to the call's deadline.
    /// - Throws: ``EtcdError/calledOnEventLoop(_:)``.
    private func refuseOnEventLoop() throws {
        guard let current = MultiThreadedEventLoopGroup.currentEventLoop else { return }
        let own = group.makeIterator().contains { $0.inEventLoop }
        if own {
            throw EtcdError.calledOnEventLoop("etcd: a call to \(configuration.endpointList) was made on the etcd client's own event-loop thread (\(current)); it would wait forever for an answer only that thread can deliver, so nothing was sent")
        }
        throw EtcdError.calledOnEventLoop("etcd: a call to \(configuration.endpointList) was made on a SwiftNIO event-loop thread (\(current)); it would block that loop, and every connection it serves, for up to \(EtcdConfiguration.format(seconds: configuration.timeout)) s, so nothing was sent")
    }

    /// Runs `body` on the client's own event-loop thread (tests: a call made there must fail at once, not deadlock).
    package func onEventLoop(_ body: @escaping @Sendable () -> Void) {
        group.next().execute(body)
    }

    // MARK: - Key-value calls

    /// A linearizable range read: one key when `rangeEnd` is nil, else `[key, rangeEnd)` (etcd's `range_end`).
    ///
    /// At `revision` when given (a snapshot read). Retried on every endpoint until the deadline.
    /// - Throws: ``EtcdError``: `.compacted` when `revision` was compacted away, `.unavailable` after the deadline.
    package func range(_ key: Data, rangeEnd: Data? = nil, revision: Int64? = nil, limit: Int? = nil) throws -> EtcdRangeResult {
        let request = Wire.RangeRequest(key: key, rangeEnd: rangeEnd, limit: limit.map { WireInt64(Int64($0)) },
                                        revision: revision.map(WireInt64.init))
        let response: Wire.RangeResponse = try call("/v3/kv/range", request, kind: .read)
        return response.result
    }

    /// A prefix read: every key that starts with `prefix` (range end: the prefix with its last byte incremented).
    ///
    /// - Parameters:
    ///   - startingAfter: Only keys after this one (for paging with `limit`).
    /// - Throws: ``EtcdError`` as ``range(_:rangeEnd:revision:limit:)``.
    package func range(prefix: Data, revision: Int64? = nil, limit: Int? = nil, startingAfter: Data? = nil) throws -> EtcdRangeResult {
        var start = prefix.isEmpty ? Data([0]) : prefix
        if let startingAfter { start = startingAfter + Data([0]) }
        return try range(start, rangeEnd: Self.prefixEnd(prefix), revision: revision, limit: limit)
    }

    /// An atomic transaction: when every comparison holds, `success` runs, else `failure`.
    ///
    /// A transaction that only reads (no comparison, only ranges) is a read: one linearizable snapshot of several
    /// keys, retried on every endpoint until the deadline like ``range(_:rangeEnd:revision:limit:)``.
    ///
    /// - Throws: ``EtcdError``: `.indeterminate` when a transaction that writes was sent and its fate is unknown,
    ///   `.tooManyOperations`, `.requestTooLarge`, `.unavailable` after the deadline.
    package func txn(compare: [EtcdCompare], success: [EtcdOperation], failure: [EtcdOperation] = []) throws -> EtcdTxnResult {
        let request = Wire.TxnRequest(compare: compare.map(\.wire), success: success.map(\.wire), failure: failure.map(\.wire))
        let readsOnly = compare.isEmpty && failure.isEmpty && success.allSatisfy {
            switch $0 {
            case .range, .rangePrefix: true
            case .put, .delete, .deletePrefix: false
            }
        }
        let response: Wire.TxnResponse = try call("/v3/kv/txn", request, kind: readsOnly ? .read : .write)
        let revision = response.header?.revision?.value ?? 0
        let results: [EtcdOperationResult] = (response.responses ?? []).map { op in
            if let range = op.responseRange { return .range(range.result) }
            if let delete = op.responseDeleteRange { return .delete(deleted: delete.deleted?.value ?? 0) }
            if op.responsePut != nil { return .put }
            // An operation whose answer is all zero fields arrives as {}: which one it was follows from the request.
            return .put
        }
        return EtcdTxnResult(revision: revision, succeeded: response.succeeded ?? false,
                             responses: Self.fill(results, ops: (response.succeeded ?? false) ? success : failure, revision: revision))
    }

    /// Puts `value` at `key` unconditionally.
    ///
    /// - Returns: The store revision of the put.
    /// - Throws: ``EtcdError`` as ``txn(compare:success:failure:)``.
    package func put(_ key: Data, _ value: Data) throws -> Int64 {
        let response: Wire.PutResponse = try call("/v3/kv/put", Wire.PutRequest(key: key, value: value), kind: .write)
        return response.header?.revision?.value ?? 0
    }

    /// The cluster's members.
    ///
    /// - Throws: ``EtcdError``: `.unavailable` after the deadline.
    package func members() throws -> [EtcdMember] {
        let response: Wire.MemberListResponse = try call("/v3/cluster/member/list", Wire.Empty(), kind: .read)
        return (response.members ?? []).map {
            EtcdMember(id: $0.id?.value ?? 0, name: $0.name ?? "", clientURLs: $0.clientURLs ?? [], peerURLs: $0.peerURLs ?? [])
        }
    }

    /// What `endpoint` says of itself (version, database size, leader, raft term and index). That endpoint only, no
    /// failover; one attempt within the configured timeout.
    ///
    /// - Throws: ``EtcdError``: `.unavailable` naming the endpoint when it does not answer.
    package func status(of endpoint: EtcdConfiguration.Endpoint) throws -> EtcdEndpointStatus {
        let response: Wire.StatusResponse = try call("/v3/maintenance/status", Wire.Empty(), kind: .read, only: endpoint)
        return EtcdEndpointStatus(endpoint: endpoint, version: response.version ?? "", dbSize: response.dbSize?.value ?? 0,
                                  memberID: response.header?.memberID?.value ?? 0, leader: response.leader?.value ?? 0,
                                  raftTerm: response.raftTerm?.value ?? 0, raftIndex: response.raftIndex?.value ?? 0,
                                  dbSizeInUse: response.dbSizeInUse?.value ?? 0, errors: response.errors ?? [])
    }

    /// The end of the range of keys starting with `prefix`: the prefix with its last byte below 0xFF incremented (and
    /// the 0xFF bytes after it dropped); `\0` (every key) when there is none.
    package static func prefixEnd(_ prefix: Data) -> Data {
        var end = Array(prefix)
        while let last = end.last {
            if last < 0xFF {
                end[end.count - 1] = last + 1
                return Data(end)
            }
            end.removeLast()
        }
        return Data([0])
    }

    /// An operation answered with only zero fields comes back as `{}`; name it after the request's operation.
    private static func fill(_ results: [EtcdOperationResult], ops: [EtcdOperation], revision: Int64) -> [EtcdOperationResult] {
        guard results.count == ops.count else { return results }
        return zip(results, ops).map { result, op in
            switch (result, op) {
            case (.put, .delete), (.put, .deletePrefix): .delete(deleted: 0)
            case (.put, .range), (.put, .rangePrefix): .range(EtcdRangeResult(revision: revision, kvs: [], more: false, count: 0))
            default: result
            }
        }
    }

    // MARK: - Calls with failover

    private enum Outcome {
        /// An HTTP answer.
        case answer(status: Int, body: Data)
        /// The request surely did not reach the member (not connected, TLS handshake failed, …).
        case notSent(String)
        /// The request may have reached the member; no answer came.
        case noAnswer(String)
    }

    private func call<Request: Encodable, Response: Decodable>(
        _ path: String, _ request: Request, kind: CallKind, only: EtcdConfiguration.Endpoint? = nil
    ) throws -> Response {
        try refuseOnEventLoop()
        let body: Data
        do {
            body = try JSONEncoder().encode(request)
        } catch {
            throw EtcdError.server(code: 0, message: "cannot encode the request: \(error)")
        }
        let start = NIODeadline.now()
        let deadline = start + .nanoseconds(Int64(configuration.timeout * 1_000_000_000))
        let endpoints = only.map { [$0] } ?? configuration.endpoints
        var index = only == nil ? state.withLock { $0.preferred } % endpoints.count : 0
        var lastFailure = [String?](repeating: nil, count: endpoints.count)
        var attemptsInRound = 0
        var backoff: TimeInterval = 0.025
        var renewedToken = false

        func unavailable() -> EtcdError {
            let names = endpoints.map(\.description).joined(separator: ", ")
            let details = zip(endpoints, lastFailure).map { "\($0): \($1 ?? "not tried")" }.joined(separator: "; ")
            let within = only == nil ? "within \(EtcdConfiguration.format(seconds: configuration.timeout)) s" : ""
            return .unavailable("etcd at \(names) did not answer\(within.isEmpty ? "" : " " + within): \(details)")
        }

        while true {
            let remaining = deadline - NIODeadline.now()
            if remaining <= .zero { throw unavailable() }
            if isShutDown { throw EtcdError.unavailable("the etcd client for \(configuration) was shut down") }
            let endpoint = endpoints[index]

            var token: String?
            if kind != .authenticate, configuration.user != nil {
                token = try self.token(deadline: deadline)
            }
            let requestTimeout = min(remaining, .nanoseconds(Int64(perRequestTimeout * 1_000_000_000)))
            let outcome = send(path, body: body, to: endpoint, token: token, timeout: requestTimeout)

            var failure: String
            switch outcome {
            case .answer(let status, let data) where status == 200:
                do {
                    let response = try JSONDecoder().decode(Response.self, from: data)
                    if only == nil { state.withLock { $0.preferred = index } }
                    return response
                } catch {
                    throw EtcdError.server(code: status, message: "etcd at \(endpoint) gave an answer that is not what \(path) returns: \(error)")
                }
            case .answer(let status, let data):
                let answer = try? JSONDecoder().decode(Wire.ErrorResponse.self, from: data)
                let message = answer?.message ?? answer?.error ?? String(decoding: data.prefix(300), as: UTF8.self)
                let code = answer?.code ?? status
                switch classify(message, httpStatus: status, isEtcdAnswer: answer?.code != nil || answer?.message != nil) {
                case .compacted:
                    throw EtcdError.compacted
                case .tooManyOperations:
                    throw EtcdError.tooManyOperations("etcd at \(endpoint): \(message)")
                case .requestTooLarge:
                    throw EtcdError.requestTooLarge("etcd at \(endpoint): \(message)")
                case .noSpace:
                    throw EtcdError.noSpace("etcd at \(endpoint): \(message)")
                case .renewToken where kind != .authenticate && configuration.user != nil && !renewedToken:
                    renewedToken = true
                    if let token { state.withLock { if $0.token == token { $0.token = nil } } }
                    continue
                case .renewToken, .authenticationFailed:
                    throw EtcdError.authenticationFailed(authenticationMessage(message, endpoint: endpoint))
                case .permissionDenied:
                    throw EtcdError.permissionDenied("etcd at \(endpoint): \(message) (user \(configuration.user ?? "none"))")
                case .notApplied:
                    failure = message
                case .maybeApplied:
                    if kind.isWrite {
                        throw EtcdError.indeterminate("etcd at \(endpoint) answered \"\(message)\" to a write")
                    }
                    failure = message
                case .other:
                    throw EtcdError.server(code: code, message: "etcd at \(endpoint): \(message)")
                }
            case .notSent(let reason):
                failure = reason
            case .noAnswer(let reason):
                if kind.isWrite {
                    // The next call (the writer's resolution of this one first) starts at another member: this one
                    // did not answer, and a request queued behind this write there would wait as long.
                    if only == nil { state.withLock { if $0.preferred == index { $0.preferred = (index + 1) % endpoints.count } } }
                    throw EtcdError.indeterminate("etcd at \(endpoint) got a write and did not answer it (\(reason))")
                }
                failure = reason
            }

            lastFailure[index] = failure
            if only != nil { throw unavailable() }
            index = (index + 1) % endpoints.count
            attemptsInRound += 1
            if attemptsInRound >= endpoints.count {
                // Every endpoint failed once: pause before the next round instead of spinning on refused connections.
                attemptsInRound = 0
                let left = Double((deadline - NIODeadline.now()).nanoseconds) / 1e9
                if left > 0 { Thread.sleep(forTimeInterval: min(backoff, left)) }
                backoff = min(backoff * 2, 0.4)
            }
        }
    }

    private var isShutDown: Bool { state.withLock { $0.isShutDown } }

    private func authenticationMessage(_ message: String, endpoint: EtcdConfiguration.Endpoint) -> String {
        let lowered = message.lowercased()
        if let user = configuration.user {
            if lowered.contains("not enabled") {
                return "etcd at \(endpoint): user \(user) was given but the cluster has no authentication enabled (\(message)); drop ?user="
            }
            return "etcd at \(endpoint) refused user \(user): \(message)"
        }
        return "etcd at \(endpoint) requires authentication (\(message)): give ?user=NAME and the password in \(EtcdConfiguration.passwordEnvironmentVariable)"
    }

    /// The cached token, or a new one from `/v3/auth/authenticate`.
    func token(deadline: NIODeadline) throws -> String {
        if let token = state.withLock({ $0.token }) { return token }
        guard let user = configuration.user, let password = configuration.password else { return "" }
        let remaining = Double((deadline - NIODeadline.now()).nanoseconds) / 1e9
        guard remaining > 0 else { throw EtcdError.unavailable("etcd: no time left to authenticate user \(user)") }
        let response: Wire.AuthenticateResponse = try call(
            "/v3/auth/authenticate", Wire.AuthenticateRequest(name: user, password: password), kind: .authenticate)
        guard let token = response.token, !token.isEmpty else {
            throw EtcdError.authenticationFailed("etcd gave no token to user \(user): is authentication enabled?")
        }
        state.withLock { $0.token = token }
        return token
    }

    private enum ErrorClass {
        case compacted, tooManyOperations, requestTooLarge, noSpace, renewToken, authenticationFailed, permissionDenied
        /// Rejected before anything was proposed: any request may go to another member.
        case notApplied
        /// A write may have been applied; a read may go to another member.
        case maybeApplied
        case other
    }

    private func classify(_ message: String, httpStatus: Int, isEtcdAnswer: Bool) -> ErrorClass {
        let text = message.lowercased()
        if text.contains("required revision has been compacted") { return .compacted }
        if text.contains("too many operations in txn request") { return .tooManyOperations }
        if text.contains("request is too large") || text.contains("larger than max") { return .requestTooLarge }
        if text.contains("database space exceeded") { return .noSpace }  // NOSPACE: refused before it was applied
        if text.contains("invalid auth token") || text.contains("revision of auth store is old") { return .renewToken }
        if text.contains("user name is empty") { return configuration.user == nil ? .authenticationFailed : .renewToken }
        if text.contains("authentication failed") || text.contains("authentication is not enabled")
            || text.contains("invalid user id or password") { return .authenticationFailed }
        if text.contains("permission denied") { return .permissionDenied }
        if text.contains("no leader") || text.contains("not capable") || text.contains("too many requests") { return .notApplied }
        if text.contains("timed out") || text.contains("leader changed") || text.contains("server stopped")
            || text.contains("unhealthy cluster") || text.contains("connection lost") { return .maybeApplied }
        if httpStatus == 502 || httpStatus == 503 {
            // Unavailable from etcd with a message not known above: its fate is open. A proxy's bare 502/503: not applied.
            return isEtcdAnswer ? .maybeApplied : .notApplied
        }
        if httpStatus == 504 { return .maybeApplied }
        return .other
    }

    // MARK: - One HTTP request

    private func send(_ path: String, body: Data, to endpoint: EtcdConfiguration.Endpoint, token: String?,
                      timeout: TimeAmount) -> Outcome {
        sent.add(1, ordering: .relaxed)
        let scheme = configuration.tls == nil ? "http" : "https"
        let request: HTTPClient.Request
        do {
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/json")
            // etcd answers "no leader" at once instead of waiting for one (grpc metadata "hasleader").
            headers.add(name: "Grpc-Metadata-hasleader", value: "true")
            if let token, !token.isEmpty { headers.add(name: "Authorization", value: token) }
            request = try HTTPClient.Request(url: "\(scheme)://\(endpoint)\(path)", method: .POST, headers: headers,
                                             body: .byteBuffer(ByteBuffer(bytes: body)))
        } catch {
            return .notSent("bad request URL: \(error)")
        }
        let collector = ResponseCollector()
        let deadline = NIODeadline.now() + timeout
        let task = http.execute(request: request, delegate: collector, deadline: deadline)
        // AsyncHTTPClient fails the request at its deadline; the grace only matters should it not.
        guard let result = Self.wait(for: task.futureResult, until: deadline + Self.waitGrace) else {
            task.cancel()
            return .noAnswer("no answer within \(EtcdConfiguration.format(seconds: Double(timeout.nanoseconds) / 1e9)) s")
        }
        switch result {
        case .success(let (status, data)):
            return .answer(status: status, body: data)
        case .failure(let error):
            let reason = Self.describe(error, timeout: timeout)
            if !collector.requestSent, !Self.mayHaveBeenSent(error) { return .notSent(reason) }
            return .noAnswer(reason)
        }
    }

    /// How long past a request's deadline the calling thread still waits for AsyncHTTPClient to report it.
    private static let waitGrace: TimeAmount = .seconds(1)

    /// Blocks the calling thread (never an event loop: ``refuseOnEventLoop()`` ran) until `future` completes or
    /// `deadline` passes, on a semaphore the future's callback signals; NIO's `wait()` is not used, as it has no
    /// bound and stops the process when called on the future's own loop.
    ///
    /// - Returns: the future's result; nil when the deadline passed first.
    private static func wait<Value: Sendable>(for future: EventLoopFuture<Value>, until deadline: NIODeadline) -> Result<Value, any Error>? {
        let result = Locked<Result<Value, any Error>?>(nil)
        let completed = DispatchSemaphore(value: 0)
        future.whenComplete { outcome in
            result.withLock { $0 = outcome }
            completed.signal()
        }
        let left = max(0, (deadline - .now()).nanoseconds)
        guard completed.wait(timeout: .now() + .nanoseconds(Int(clamping: left))) == .success else { return nil }
        return result.current
    }

    /// Errors after which a request that did not report its head as written may still have been sent.
    private static func mayHaveBeenSent(_ error: any Error) -> Bool {
        if let error = error as? HTTPClientError {
            return error == .deadlineExceeded || error == .readTimeout || error == .cancelled
        }
        return false
    }

    private static func describe(_ error: any Error, timeout: TimeAmount) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout:
                return "no answer within \(EtcdConfiguration.format(seconds: Double(timeout.nanoseconds) / 1e9)) s"
            case .connectTimeout, .getConnectionFromPoolTimeout: return "connect timed out"
            case .tlsHandshakeTimeout: return "TLS handshake timed out"
            case .remoteConnectionClosed: return "connection closed"
            case .alreadyShutdown: return "client shut down"
            default: return "\(error)"
            }
        }
        if let error = error as? NIOConnectionError {
            if let first = error.connectionErrors.first { return describe(first.error, timeout: timeout) }
            if let dns = error.dnsAError ?? error.dnsAAAAError { return "cannot resolve \(error.host): \(dns)" }
            return "cannot connect"
        }
        if let error = error as? IOError {
            return String(cString: strerror(error.errnoCode)).lowercased()
        }
        if let error = error as? ChannelError, case .connectTimeout = error { return "connect timed out" }
        if let error = error as? NIOSSLError {
            return "TLS handshake failed: \(error) (check the CA file ca= and the client certificate cert=/key=)"
        }
        if error is NIOSSLExtraError {
            return "TLS: the member's certificate does not match its address: \(error)"
        }
        return "\(error)"
    }

    // MARK: - TLS

    private static func makeTLSConfiguration(_ tls: EtcdConfiguration.TLS) throws -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = .fullVerification
        if let caFile = tls.caFile {
            let roots: [NIOSSLCertificate]
            do {
                roots = try NIOSSLCertificate.fromPEMFile(caFile)
            } catch {
                throw EngineError.param("etcd: cannot read the CA certificates (PEM) in \(caFile): \(error)")
            }
            guard !roots.isEmpty else { throw EngineError.param("etcd: no PEM certificate in the CA file \(caFile)") }
            configuration.trustRoots = .certificates(roots)
        }
        if let certificateFile = tls.certificateFile, let keyFile = tls.keyFile {
            let chain: [NIOSSLCertificate]
            do {
                chain = try NIOSSLCertificate.fromPEMFile(certificateFile)
            } catch {
                throw EngineError.param("etcd: cannot read the client certificate (PEM) in \(certificateFile): \(error)")
            }
            guard !chain.isEmpty else { throw EngineError.param("etcd: no PEM certificate in \(certificateFile)") }
            let key: NIOSSLPrivateKey
            do {
                key = try NIOSSLPrivateKey(file: keyFile, format: .pem)
            } catch {
                throw EngineError.param("etcd: cannot read the client private key (PEM) in \(keyFile): \(error)")
            }
            configuration.certificateChain = chain.map { .certificate($0) }
            configuration.privateKey = .privateKey(key)
        }
        return configuration
    }
}

/// Collects one response's status and body, and whether the request head went out.
///
/// `@unchecked Sendable`: `status` and `body` are written only on the request's event loop (AsyncHTTPClient calls a
/// delegate's methods there, one at a time) and read by `didFinishRequest` on that same loop; `sent`, which the
/// calling thread also reads, is behind a lock.
private final class ResponseCollector: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = (Int, Data)

    private let sent = Locked(false)
    private var status = 0
    private var body = Data()

    var requestSent: Bool { sent.withLock { $0 } }

    func didSendRequestHead(task: HTTPClient.Task<Response>, _ head: HTTPRequestHead) {
        sent.withLock { $0 = true }
    }

    func didReceiveHead(task: HTTPClient.Task<Response>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        status = Int(head.status.code)
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Response>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        body.append(contentsOf: buffer.readableBytesView)
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<Response>) throws -> Response {
        (status, body)
    }
}

#endif
