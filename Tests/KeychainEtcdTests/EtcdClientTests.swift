#if os(Linux)
import EtcdCluster
import Foundation
import KeychainEngine
@testable import KeychainEtcd
import Testing

/// Why the etcd client tests cannot run here (nil: they can); the suite's trait gives it as the skip reason.
private let etcdClientTestsSkipReason = EtcdTestCluster.unavailableReason

/// A cluster for one test, stopped at its end.
private func withCluster<T>(members: Int = 1, tls: Bool = false, _ body: (EtcdTestCluster) throws -> T) throws -> T {
    let cluster = try EtcdTestCluster.start(.init(members: members, tls: tls))
    defer { cluster.stop() }
    return try body(cluster)
}

private func endpoint(_ text: String) -> EtcdConfiguration.Endpoint {
    let parts = text.split(separator: ":")
    return .init(host: String(parts[0]), port: Int(parts[1])!)
}

/// A client of `cluster`'s members in `order` (default: member order).
private func makeClient(_ cluster: EtcdTestCluster, order: [Int]? = nil, timeout: TimeInterval = 5, name: String = "k",
                        tls: EtcdConfiguration.TLS? = nil, user: String? = nil, password: String? = nil) throws -> EtcdClient {
    let endpoints = (order ?? Array(cluster.clientEndpoints.indices)).map { endpoint(cluster.clientEndpoints[$0]) }
    return try EtcdClient(configuration: EtcdConfiguration(endpoints: endpoints, name: name, tls: tls, user: user,
                                                           password: password, timeout: timeout))
}

private func bytes(_ text: String) -> Data { Data(text.utf8) }

/// Polls `condition` (every 20 ms) until it holds or `limit` seconds passed, a hang guard; returns whether it held.
private func eventually(within limit: TimeInterval = 60, _ condition: () -> Bool) -> Bool {
    let end = Date().addingTimeInterval(limit)
    while Date() < end {
        if condition() { return true }
        Thread.sleep(forTimeInterval: 0.02)
    }
    return false
}

// No test bounds how long a call takes. Where time is the behaviour (a deadline), a test compares with the client's
// own configured timeout from below only (the client's monotonic deadline makes that exact); otherwise a deterministic
// signal (the error's kind, what a paused member was sent) says what happened. A call that hangs is caught by the
// suite's time limit (a watchdog of minutes), not by a clock read after it returned.

/// The index of a member that is not the leader.
private func follower(of cluster: EtcdTestCluster, client: EtcdClient) throws -> Int {
    for (index, text) in cluster.clientEndpoints.enumerated() {
        let status = try client.status(of: endpoint(text))
        if status.leader != status.memberID { return index }
    }
    throw EtcdError.server(code: 0, message: "no follower found")
}

@Suite("etcd client against a real etcd", .enabled(if: etcdClientTestsSkipReason == nil,
                                                     Comment(rawValue: etcdClientTestsSkipReason ?? "etcd is installed")),
       .timeLimit(.minutes(10)))
struct EtcdClientTests {
    @Test("put and range round-trip binary keys and values with every byte 0x00…0xFF, with revisions")
    func binaryRoundTrip() throws {
        try withCluster { cluster in
            let client = try makeClient(cluster)
            defer { client.shutdown() }
            let key = Data([0x00, 0xFF, 0x0A, 0x2F, 0x80]) + Data((0...255).map { UInt8($0) })
            let value = Data((0...255).map { UInt8(255 - $0) }) + Data([0x00])
            let revision = try client.put(key, value)
            #expect(revision > 1)
            let read = try client.range(key)
            #expect(read.kvs.count == 1)
            #expect(read.kvs.first?.key == key)
            #expect(read.kvs.first?.value == value)
            #expect(read.kvs.first?.createRevision == revision)
            #expect(read.kvs.first?.modRevision == revision)
            #expect(read.kvs.first?.version == 1)
            #expect(read.count == 1)
            #expect(read.revision == revision)
            // An empty value and a missing key (etcd omits the fields: zeros, empty).
            _ = try client.put(bytes("empty"), Data())
            #expect(try client.range(bytes("empty")).kvs.first?.value == Data())
            let missing = try client.range(bytes("missing"))
            #expect(missing.kvs.isEmpty && missing.count == 0 && !missing.more)
            #expect(missing.revision >= revision)
            // What etcd stored is what etcdctl sees too.
            _ = try client.put(bytes("plain"), bytes("text"))
            #expect(try cluster.etcdctl(["get", "plain", "--print-value-only"]).trimmingCharacters(in: .whitespacesAndNewlines) == "text")
        }
    }

    @Test("a prefix range returns exactly the keys under the prefix, in order, with limit, more and paging")
    func prefixRange() throws {
        try withCluster { cluster in
            let client = try makeClient(cluster)
            defer { client.shutdown() }
            let prefix = Data([0x6B, 0xFF])   // "k\xFF": the prefix end carries into the first byte
            for byte in [UInt8(0x00), 0x01, 0x7F, 0xFE, 0xFF] {
                _ = try client.put(prefix + Data([byte]), Data([byte]))
            }
            _ = try client.put(Data([0x6B]), bytes("outside"))
            _ = try client.put(Data([0x6C]), bytes("outside"))
            _ = try client.put(Data([0x6B, 0xFE, 0xFF]), bytes("outside"))
            let all = try client.range(prefix: prefix)
            #expect(all.kvs.map(\.value) == [Data([0x00]), Data([0x01]), Data([0x7F]), Data([0xFE]), Data([0xFF])])
            #expect(all.count == 5 && !all.more)
            let page1 = try client.range(prefix: prefix, limit: 2)
            #expect(page1.kvs.map(\.value) == [Data([0x00]), Data([0x01])])
            #expect(page1.more && page1.count == 5)
            let page2 = try client.range(prefix: prefix, revision: page1.revision, limit: 2, startingAfter: page1.kvs.last!.key)
            #expect(page2.kvs.map(\.value) == [Data([0x7F]), Data([0xFE])])
            let page3 = try client.range(prefix: prefix, revision: page1.revision, limit: 2, startingAfter: page2.kvs.last!.key)
            #expect(page3.kvs.map(\.value) == [Data([0xFF])])
            #expect(!page3.more)
        }
    }

    @Test("a create-revision compare makes the second of two puts-if-absent fail, and the failure branch reads the winner")
    func putIfAbsent() throws {
        try withCluster { cluster in
            let client = try makeClient(cluster)
            defer { client.shutdown() }
            let key = bytes("item/1")
            let first = try client.txn(compare: [.createRevision(key, equals: 0)], success: [.put(key, bytes("first"))],
                                       failure: [.range(key)])
            #expect(first.succeeded)
            guard case .put = first.responses.first else { Issue.record("expected a put response"); return }
            let second = try client.txn(compare: [.createRevision(key, equals: 0)], success: [.put(key, bytes("second"))],
                                        failure: [.range(key)])
            #expect(!second.succeeded)
            guard case .range(let winner) = second.responses.first else { Issue.record("expected a range response"); return }
            #expect(winner.kvs.first?.value == bytes("first"))
            #expect(try client.range(key).kvs.first?.value == bytes("first"))

            // Compare-and-swap on the mod revision: a stale revision fails, the current one succeeds.
            _ = try client.put(bytes("other/x"), bytes("x"))
            let current = try client.range(key).kvs[0].modRevision
            #expect(try !client.txn(compare: [.modRevision(key, equals: current - 1)], success: [.put(key, bytes("stale"))]).succeeded)
            let swapped = try client.txn(compare: [.modRevision(key, equals: current), .value(key, equals: bytes("first"))],
                                         success: [.put(key, bytes("swapped")), .delete(bytes("none")), .deletePrefix(bytes("other/"))])
            #expect(swapped.succeeded)
            #expect(swapped.revision > current)
            guard swapped.responses.count == 3, case .delete(let none) = swapped.responses[1],
                  case .delete(let deleted) = swapped.responses[2] else {
                Issue.record("expected put, delete, delete: \(swapped.responses)"); return
            }
            #expect(none == 0)
            #expect(deleted == 1)
            #expect(try client.range(key).kvs.first?.value == bytes("swapped"))
            #expect(try client.range(prefix: bytes("other/")).kvs.isEmpty)
            // etcd refuses one txn that puts a key and deletes it too: a server error, not a retry.
            #expect { _ = try client.txn(compare: [], success: [.put(key, bytes("x")), .deletePrefix(bytes("item/"))]) } throws: { error in
                if case EtcdError.server(let code, let message) = error { return code == 3 && message.contains("duplicate key") }
                return false
            }
        }
    }

    @Test("a range at an old revision returns the old value; a compacted revision throws .compacted")
    func oldRevisionAndCompaction() throws {
        try withCluster { cluster in
            let client = try makeClient(cluster)
            defer { client.shutdown() }
            let key = bytes("versioned")
            let old = try client.put(key, bytes("v1"))
            let new = try client.put(key, bytes("v2"))
            #expect(try client.range(key, revision: old).kvs.first?.value == bytes("v1"))
            #expect(try client.range(key).kvs.first?.value == bytes("v2"))
            try cluster.etcdctl(["compact", String(new)])
            #expect {
                _ = try client.range(key, revision: old)
            } throws: { error in
                if case EtcdError.compacted = error { return true }
                return false
            }
            #expect(EtcdError.compacted.engineError.status == Status.notAvailable)
        }
    }

    @Test("etcd's limits: 129 operations in one txn throw .tooManyOperations, a 1.6 MiB value .requestTooLarge")
    func limits() throws {
        try withCluster { cluster in
            let client = try makeClient(cluster)
            defer { client.shutdown() }
            let ops = (0..<129).map { EtcdOperation.put(bytes("op/\($0)"), Data([1])) }
            var caught: (any Error)?
            do { _ = try client.txn(compare: [], success: ops) } catch { caught = error }
            guard case EtcdError.tooManyOperations(let message)? = caught else {
                Issue.record("expected .tooManyOperations, got \(String(describing: caught))"); return
            }
            #expect(message.contains("too many operations"))
            #expect(try client.range(prefix: bytes("op/")).count == 0)
            caught = nil
            do { _ = try client.put(bytes("big"), Data(count: 1_600_000)) } catch { caught = error }
            guard case EtcdError.requestTooLarge? = caught else {
                Issue.record("expected .requestTooLarge, got \(String(describing: caught))"); return
            }
            #expect((caught as? EtcdError)?.engineError.status == Status.dataTooLarge)
        }
    }

    @Test("members and per-endpoint status describe the 3-member cluster and agree on one leader")
    func membersAndStatus() throws {
        try withCluster(members: 3) { cluster in
            let client = try makeClient(cluster)
            defer { client.shutdown() }
            let members = try client.members()
            #expect(members.count == 3)
            #expect(Set(members.flatMap(\.clientURLs)) == Set(cluster.clientEndpoints.map { "http://\($0)" }))
            let statuses = try cluster.clientEndpoints.map { try client.status(of: endpoint($0)) }
            #expect(Set(statuses.map(\.memberID)) == Set(members.map(\.id)))
            #expect(Set(statuses.map(\.leader)).count == 1)
            #expect(members.map(\.id).contains(statuses[0].leader))
            #expect(statuses.allSatisfy { $0.version.hasPrefix("3.") && $0.dbSize > 0 && $0.raftTerm > 0 && $0.raftIndex > 0 })
        }
    }

    @Test("with member 0 killed, a client whose endpoints start at member 0 still reads and writes")
    func failoverOneMemberDown() throws {
        try withCluster(members: 3) { cluster in
            let client = try makeClient(cluster, order: [0, 1, 2], timeout: 10)
            defer { client.shutdown() }
            _ = try client.put(bytes("before"), bytes("1"))
            cluster.kill(member: 0)
            #expect(try client.range(bytes("before")).kvs.first?.value == bytes("1"))
            let revision = try client.put(bytes("after"), bytes("2"))
            #expect(revision > 0)
            #expect(try client.range(bytes("after")).kvs.first?.value == bytes("2"))
            // A new client starting at the dead member too.
            let fresh = try makeClient(cluster, order: [0, 1, 2], timeout: 10)
            defer { fresh.shutdown() }
            #expect(try fresh.range(bytes("after")).kvs.first?.modRevision == revision)
        }
    }

    @Test("with two of three members killed a read throws .unavailable naming all three endpoints once its 1.5 s deadline passed, never before; a write fails too; after restarting them the same client works again")
    func quorumLost() throws {
        try withCluster(members: 3) { cluster in
            let client = try makeClient(cluster, timeout: 1.5)
            defer { client.shutdown() }
            _ = try client.put(bytes("acknowledged"), bytes("yes"))
            cluster.kill(member: 1)
            cluster.kill(member: 2)
            let clock = ContinuousClock()
            let start = clock.now
            var caught: (any Error)?
            do { _ = try client.range(bytes("acknowledged")) } catch { caught = error }
            let elapsed = clock.now - start
            guard case EtcdError.unavailable(let message)? = caught else {
                Issue.record("expected .unavailable, got \(String(describing: caught))"); return
            }
            // Time is the behaviour: the client retries until its own deadline (monotonic, so never sooner), then
            // returns .unavailable with every endpoint's failure.
            #expect(elapsed >= .milliseconds(1_450), "gave up before the 1.5 s deadline: \(elapsed)")
            for text in cluster.clientEndpoints { #expect(message.contains(text), "\(message)") }
            #expect(message.contains("1.5 s"))
            #expect(message.contains("connection refused"), "\(message)")
            let engineError = (caught as? EtcdError)?.engineError
            #expect(engineError?.status == Status.notAvailable)
            // A write fails too, without being reported as applied: .indeterminate when the live member took it and
            // could not commit it, .unavailable when every member refused it; never a revision.
            let write = #expect(throws: EtcdError.self) { _ = try client.put(bytes("lost"), bytes("no")) }
            switch write {
            case .indeterminate?, .unavailable?: break
            default: Issue.record("a write without quorum threw \(String(describing: write))")
            }

            try cluster.restart(member: 1)
            try cluster.restart(member: 2)
            #expect(eventually { (try? client.range(bytes("acknowledged")))?.kvs.first?.value == bytes("yes") })
            #expect(eventually { (try? client.put(bytes("again"), bytes("works"))) != nil })
            #expect(try client.range(bytes("again")).kvs.first?.value == bytes("works"))
        }
    }

    @Test("a paused (SIGSTOP) first member does not stop reads: the client fails over after the per-request timeout")
    func pausedFirstMember() throws {
        try withCluster(members: 3) { cluster in
            let probe = try makeClient(cluster)
            defer { probe.shutdown() }
            _ = try probe.put(bytes("key"), bytes("value"))
            // A follower goes first, so the test sees the failover and not a leader election.
            let first = try follower(of: cluster, client: probe)
            let order = [first] + cluster.clientEndpoints.indices.filter { $0 != first }
            let client = try makeClient(cluster, order: order, timeout: 4)
            defer { client.shutdown() }
            #expect(try client.range(bytes("key")).kvs.first?.value == bytes("value"))   // a pooled connection to the first member
            cluster.pause(member: first)
            defer { cluster.resume(member: first) }
            let fresh = try makeClient(cluster, order: order, timeout: 4)
            defer { fresh.shutdown() }
            let clock = ContinuousClock()
            for reader in [client, fresh] {
                let sentBefore = cluster.pendingInput(member: first)
                let start = clock.now
                // Success is the signal: the paused member never answers, and the call's whole deadline is 4 s, so
                // only the 2 s per-request timeout can have moved the read on to another member in time.
                #expect(try reader.range(bytes("key")).kvs.first?.value == bytes("value"))
                let elapsed = clock.now - start
                // It went to the paused member first (its unread input grew by the request) and waited the
                // per-request timeout there (monotonic, so never less).
                if let sentBefore, let sentAfter = cluster.pendingInput(member: first) {
                    #expect(sentAfter - sentBefore >= EtcdTestCluster.requestFloor, "the paused member was sent nothing")
                }
                #expect(elapsed >= .milliseconds(1_950), "moved on before the 2 s per-request timeout: \(elapsed)")
                }
            // The next read starts at the member that answered: the paused member is sent nothing more.
            let sentBefore = cluster.pendingInput(member: first)
            #expect(try client.range(bytes("key")).kvs.first?.value == bytes("value"))
            let sentAfter = cluster.pendingInput(member: first)
            #expect(sentBefore != nil && sentAfter != nil, "/proc/net/tcp cannot be read")
            if let sentBefore, let sentAfter {
                #expect(sentAfter - sentBefore < EtcdTestCluster.requestFloor,
                        "the read went to the paused member again (\(sentAfter - sentBefore) bytes sent)")
            }
        }
    }

    @Test("a write sent to a hung member throws .indeterminate without a retry (it may have been applied), a read .unavailable")
    func indeterminateWrite() throws {
        try withCluster { cluster in
            let client = try makeClient(cluster, timeout: 1)
            defer { client.shutdown() }
            _ = try client.put(bytes("key"), bytes("value"))
            cluster.pause(member: 0)
            defer { cluster.resume(member: 0) }
            var caught: (any Error)?
            do { _ = try client.put(bytes("key"), bytes("changed?")) } catch { caught = error }
            // The kind is the signal that it was not retried: a write retried until the deadline ends .unavailable.
            guard case EtcdError.indeterminate(let message)? = caught else {
                Issue.record("expected .indeterminate, got \(String(describing: caught))"); return
            }
            #expect(message.contains(cluster.clientEndpoints[0]))
            #expect((caught as? EtcdError)?.engineError.reason.contains("may or may not have been applied") == true)
            #expect { _ = try client.range(bytes("key")) } throws: { error in
                if case EtcdError.unavailable = error { return true }
                return false
            }
            cluster.resume(member: 0)
            #expect(eventually { (try? client.range(bytes("key"))) != nil })
        }
    }

    @Test("TLS with a client certificate works; without the CA file the handshake fails with a clear error")
    func tls() throws {
        try withCluster(tls: true) { cluster in
            guard let files = cluster.tlsFiles else { Issue.record("the TLS cluster has no files"); return }
            let client = try makeClient(cluster, tls: .init(caFile: files.caFile, certificateFile: files.clientCertificateFile,
                                                            keyFile: files.clientKeyFile))
            defer { client.shutdown() }
            _ = try client.put(bytes("tls"), bytes("ok"))
            #expect(try client.range(bytes("tls")).kvs.first?.value == bytes("ok"))

            let untrusted = try makeClient(cluster, timeout: 1, tls: .init(certificateFile: files.clientCertificateFile,
                                                                           keyFile: files.clientKeyFile))
            defer { untrusted.shutdown() }
            var caught: (any Error)?
            do { _ = try untrusted.range(bytes("tls")) } catch { caught = error }
            guard case EtcdError.unavailable(let message)? = caught else {
                Issue.record("expected .unavailable, got \(String(describing: caught))"); return
            }
            #expect(message.contains("TLS handshake failed"), "\(message)")
            #expect(message.contains("ca="), "\(message)")

            // Plain HTTP against the TLS member fails too, and the HTTPS client without a certificate is refused.
            let noCertificate = try makeClient(cluster, timeout: 1, tls: .init(caFile: files.caFile))
            defer { noCertificate.shutdown() }
            #expect(throws: EtcdError.self) { _ = try noCertificate.range(bytes("tls")) }
        }
    }

    @Test("authentication: the right password works, a wrong one throws .authenticationFailed, a token lost in a restart is renewed")
    func authentication() throws {
        try withCluster { cluster in
            // The throwaway test cluster's root password.
            let password = "root-\(UUID().uuidString)"
            try cluster.enableAuthentication(rootPassword: password)
            let client = try makeClient(cluster, user: "root", password: password)
            defer { client.shutdown() }
            _ = try client.put(bytes("auth"), bytes("ok"))
            #expect(try client.range(bytes("auth")).kvs.first?.value == bytes("ok"))

            let wrong = try makeClient(cluster, user: "root", password: "wrong")
            defer { wrong.shutdown() }
            var caught: (any Error)?
            do { _ = try wrong.range(bytes("auth")) } catch { caught = error }
            guard case EtcdError.authenticationFailed(let message)? = caught else {
                Issue.record("expected .authenticationFailed, got \(String(describing: caught))"); return
            }
            #expect(message.contains("root"))
            #expect(!message.contains("wrong"))
            #expect((caught as? EtcdError)?.engineError.status == Status.authFailed)

            let anonymous = try makeClient(cluster)
            defer { anonymous.shutdown() }
            caught = nil
            do { _ = try anonymous.range(bytes("auth")) } catch { caught = error }
            guard case EtcdError.authenticationFailed? = caught else {
                Issue.record("expected .authenticationFailed without a user, got \(String(describing: caught))"); return
            }

            // etcd's simple tokens live in the member's memory: a restart forgets them, the client gets a new one.
            cluster.kill(member: 0)
            try cluster.restart(member: 0)
            #expect(eventually { (try? client.range(bytes("auth")))?.kvs.first?.value == bytes("ok") })
            _ = try client.put(bytes("auth"), bytes("renewed"))
            #expect(try client.range(bytes("auth")).kvs.first?.value == bytes("renewed"))
        }
    }

    @Test("shutdown is idempotent and later calls throw .unavailable instead of hanging")
    func shutdown() throws {
        try withCluster { cluster in
            let client = try makeClient(cluster)
            _ = try client.put(bytes("k"), bytes("v"))
            client.shutdown()
            client.shutdown()
            #expect { _ = try client.range(bytes("k")) } throws: { error in
                if case EtcdError.unavailable(let message) = error { return message.contains("shut down") }
                return false
            }
        }
    }
}
#endif
