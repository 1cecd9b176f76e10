#if os(Linux)
import EtcdCluster
import Foundation
import Glibc
import Testing

/// The etcd test cluster itself (EtcdTestCluster), against real etcd 3.4 members: what the storage tests rely on.
/// Every test runs on a thread of its own (starting, killing and polling members blocks), never on Swift's
/// cooperative pool; a test's cluster is stopped when it ends.
@Suite("etcd test cluster", .enabled(if: etcdAvailable,
                                     Comment(rawValue: EtcdTestCluster.unavailableReason ?? "etcd and etcdctl run")))
struct EtcdClusterTests {
    @Test("Three members: a value put through any member's endpoint reads back through every endpoint")
    func putAndGetThroughEveryEndpoint() async throws {
        try await withCluster { cluster in
            #expect(cluster.clientEndpoints.count == 3)
            #expect(Set(cluster.clientEndpoints).count == 3)
            let members = try cluster.etcdctl(["member", "list"])
            #expect(members.split(separator: "\n").count == 3, "member list: \(members)")
            for (index, endpoint) in cluster.clientEndpoints.enumerated() {
                try cluster.etcdctl(["--endpoints=\(endpoint)", "put", "key\(index)", "value \(index)"])
            }
            for endpoint in cluster.clientEndpoints {
                for index in 0..<3 {
                    let read = try cluster.etcdctl(["--endpoints=\(endpoint)", "get", "key\(index)", "--print-value-only"])
                    #expect(read == "value \(index)\n", "key\(index) through \(endpoint)")
                }
            }
            #expect(try cluster.etcdctl(["get", "missing"]) == "")
            for directory in cluster.dataDirectories {
                #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("member").path))
            }
        }
    }

    @Test("One member killed: the quorum accepts a put; two killed: a put fails; restarted: writes go on, nothing lost")
    func quorum() async throws {
        try await withCluster { cluster in
            try cluster.etcdctl(["put", "before", "1"])
            cluster.kill(member: 2)
            // Member 2 may have been the leader: the others elect one (a put meanwhile would be dropped by raft).
            try cluster.waitUntilHealthy()
            try cluster.etcdctl(["put", "one-down", "2"])
            cluster.kill(member: 1)
            // No quorum: the put is never committed; etcdctl gives up after its command timeout.
            #expect(throws: EtcdTestCluster.Failure.self) {
                try cluster.etcdctl(["--command-timeout=2s", "put", "two-down", "3"])
            }
            try cluster.restart(member: 1)
            try cluster.restart(member: 2)
            try cluster.waitUntilHealthy()
            try cluster.etcdctl(["put", "after", "4"])
            for endpoint in cluster.clientEndpoints {
                let read = try cluster.etcdctl(["--endpoints=\(endpoint)", "get", "", "--prefix", "--keys-only"])
                let keys = Set(read.split(separator: "\n").map(String.init))
                #expect(keys.isSuperset(of: ["before", "one-down", "after"]), "through \(endpoint): \(keys)")
            }
        }
    }

    @Test("A paused member answers nothing and is reported unhealthy; the others go on; resumed, it is healthy again")
    func pauseAndResume() async throws {
        try await withCluster { cluster in
            cluster.pause(member: 0)
            let paused = cluster.clientEndpoints[0]
            let others = cluster.clientEndpoints[1...].joined(separator: ",")
            try cluster.waitUntilHealthy(members: [1, 2])
            try cluster.etcdctl(["--endpoints=\(others)", "put", "while-paused", "1"])
            #expect(throws: EtcdTestCluster.Failure.self) {
                try cluster.etcdctl(["--endpoints=\(paused)", "--dial-timeout=1s", "--command-timeout=1s",
                                     "get", "while-paused"])
            }
            #expect(throws: EtcdTestCluster.Failure.self) { try cluster.waitUntilHealthy(members: [0], timeout: 1) }
            cluster.resume(member: 0)
            try cluster.waitUntilHealthy()
            let read = try cluster.etcdctl(["--endpoints=\(paused)", "get", "while-paused", "--print-value-only"])
            #expect(read == "1\n")
        }
    }

    @Test("TLS: a client without a certificate is refused, one with the cluster's client certificate is served")
    func tls() async throws {
        try await withCluster(.init(members: 1, tls: true)) { cluster in
            let files = try #require(cluster.tlsFiles)
            let url = "https://127.0.0.1:\(cluster.clientEndpoints[0].split(separator: ":")[1])/v3/kv/put"
            let body = #"{"key":"Zm9v","value":"YmFy"}"#  // foo = bar
            let withoutCertificate = try curl(["--cacert", files.caFile, "-d", body, url])
            #expect(withoutCertificate.status != 0, "served without a certificate: \(withoutCertificate.output)")
            let withCertificate = try curl(["--cacert", files.caFile, "--cert", files.clientCertificateFile,
                                            "--key", files.clientKeyFile, "-d", body, url])
            #expect(withCertificate.status == 0)
            #expect(withCertificate.output.contains(#""revision":"#), "\(withCertificate.output)")
            let plain = try curl(["-d", body, "http://\(cluster.clientEndpoints[0])/v3/kv/put"])
            #expect(plain.status != 0 || !plain.output.contains(#""revision":"#), "plain http served: \(plain.output)")
            // etcdctl gets the certificate flags from the cluster.
            #expect(try cluster.etcdctl(["get", "foo", "--print-value-only"]) == "bar\n")
        }
    }

    @Test("Authentication: without credentials a put fails, with a wrong password too, as root it succeeds")
    func authentication() async throws {
        try await withCluster(.init(members: 1)) { cluster in
            // A throwaway password of a throwaway cluster.
            try cluster.enableAuthentication(rootPassword: "throwaway-\(UUID().uuidString)")
            #expect(throws: EtcdTestCluster.Failure.self) {
                try cluster.etcdctl(["put", "k", "anonymous"], environment: ["ETCDCTL_USER": ""])
            }
            #expect(throws: EtcdTestCluster.Failure.self) {
                try cluster.etcdctl(["put", "k", "wrong"], environment: ["ETCDCTL_USER": "root:wrong"])
            }
            let gateway = try curl(["-d", #"{"key":"aw==","value":"dg=="}"#, "http://\(cluster.clientEndpoints[0])/v3/kv/put"])
            #expect(!gateway.output.contains(#""revision":"#), "the gateway served a put without a token: \(gateway.output)")
            try cluster.etcdctl(["put", "k", "root"])
            #expect(try cluster.etcdctl(["get", "k", "--print-value-only"]) == "root\n")
            try cluster.waitUntilHealthy()
        }
    }

    @Test("stop() kills every member, removes the directory, and may be called again")
    func stopLeavesNothing() async throws {
        try await onThread {
            let cluster = try EtcdTestCluster.start(.init(members: 3))
            let directory = cluster.directory.path
            #expect(etcdProcesses(naming: directory).count == 3)
            cluster.pause(member: 1)
            cluster.kill(member: 2)
            #expect(etcdProcesses(naming: directory).count == 2)
            cluster.stop()
            #expect(!FileManager.default.fileExists(atPath: directory))
            #expect(etcdProcesses(naming: directory).isEmpty)
            cluster.stop()
            #expect(throws: EtcdTestCluster.Failure.self) { try cluster.etcdctl(["get", "k"]) }
        }
    }

    @Test("Clusters started at the same moment get distinct ports and run side by side")
    func parallelClusters() async throws {
        try await withThrowingTaskGroup(of: [String].self) { group in
            for _ in 0..<3 {
                group.addTask {
                    try await withCluster(.init(members: 1)) { cluster in
                        try cluster.etcdctl(["put", "k", cluster.directory.lastPathComponent])
                        #expect(try cluster.etcdctl(["get", "k", "--print-value-only"])
                            == cluster.directory.lastPathComponent + "\n")
                        return cluster.clientEndpoints
                    }
                }
            }
            var endpoints: [String] = []
            for try await some in group { endpoints += some }
            #expect(Set(endpoints).count == 3)
        }
    }
}

/// Whether etcd runs here; prints why not, once.
private let etcdAvailable: Bool = {
    if let reason = EtcdTestCluster.unavailableReason { print("EtcdClusterTests skipped: \(reason)") }
    return EtcdTestCluster.unavailableReason == nil
}()

/// Runs `body` on a thread of its own (never on Swift's cooperative pool: the cluster blocks).
private func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.stackSize = 1 << 20
        thread.start()
    }
}

/// Starts a cluster for `body` (on a thread of its own) and stops it after.
private func withCluster<T: Sendable>(_ options: EtcdTestCluster.Options = .init(),
                                      _ body: @escaping @Sendable (EtcdTestCluster) throws -> T) async throws -> T {
    try await onThread {
        let cluster = try EtcdTestCluster.start(options)
        defer { cluster.stop() }
        return try body(cluster)
    }
}

/// The pids of running etcd processes whose command line names `directory`.
private func etcdProcesses(naming directory: String) -> [Int32] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { entry -> Int32? in
        guard let pid = Int32(entry),
              let cmdline = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { return nil }
        let arguments = cmdline.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        guard arguments.first?.hasSuffix("etcd") == true,
              arguments.contains(where: { $0.contains(directory) }) else { return nil }
        // A zombie (killed, not yet reaped) has an empty cmdline already; a stopped member still counts.
        return pid
    }
}

/// Runs curl (at most 10 s per request) and returns its status and standard output.
private func curl(_ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: EtcdTestCluster.curlPath)
    process.arguments = ["-s", "--max-time", "10"] + arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}
#endif
