import EtcdCluster
import Foundation
#if os(Linux)
import AsyncHTTPClient
import Configuration
import EtcdBaselineClient
import KeychainEngine
import KeychainEtcd
import KeychainServices
import KeystoneConfiguration
import NIOCore
#endif

// `keystone-benchmarks rotation [--rotations N]`
//
// Rotation propagation on etcd (issue 28): from a SecItemUpdate of a generic password on one "machine" to the new value
// seen by a watching KeystoneConfigProvider on another, against etcd's own watch latency for a raw put, in the same
// run, on ONE private 3-member cluster (EtcdTestCluster):
// - Keystone: machine A (its own EtcdKeychain, member 0 first, the process's SecItem engine) runs SecItemUpdate of
//   the item's data; machine B (another EtcdKeychain of the same keychain, its own client, member 2 first, unlocked with
//   the password) holds a KeystoneConfigProvider (changes: .automatic, the provider's etcd watch) and a ConfigReader
//   watching the key (`watchString(forKey:isSecret:)`, as the example server does). Latency: from just before
//   SecItemUpdate is called to the moment the watch hands the new value to the reader's handler.
// - Raw baseline: KeychainEtcd's own client (EtcdBaselineClient) puts a value of the same size on member 0; a raw etcd
//   watch (POST /v3/watch on etcd's JSON gateway, member 2, the same HTTP client library, AsyncHTTPClient) receives the
//   event. Latency: from just before the put to the event's arrival.
// Rotations alternate (Keystone, raw, Keystone, …), one at a time: each waits for its value before the next starts.
// Goal (issue 28): Keystone's p99 ≤ 1.5× the raw p99 and ≤ 1 s. Default 200 rotations each.

/// The command line of the `rotation` benchmark.
struct RotationBenchmarkOptions {
    /// Rotations of each kind (Keystone, raw).
    var rotations = 200

    static let usage = "usage: keystone-benchmarks rotation [--rotations N]"

    /// Parses the arguments after `rotation`; nil (after printing why and the usage) when they are wrong.
    static func parse(_ arguments: ArraySlice<String>) -> RotationBenchmarkOptions? {
        var options = RotationBenchmarkOptions()
        let parsed = parseBenchmarkOptions(arguments, command: "rotation", usage: usage, valued: ["--rotations"]) { name, value in
            guard let number = positiveNumber(value) else { return "\(name) takes a positive number" }
            options.rotations = number
            return nil
        }
        return parsed ? options : nil
    }
}

/// Runs the benchmark and prints its table; the exit status (1 when a rotation was lost or the cluster did not start).
func runRotationBenchmarks(_ options: RotationBenchmarkOptions) -> Int32 {
    #if os(Linux)
    if let reason = EtcdTestCluster.unavailableReason {
        print("rotation benchmark skipped: \(reason)")
        return 1
    }
    let cluster: EtcdTestCluster
    do {
        cluster = try EtcdTestCluster.start(EtcdTestCluster.Options(members: 3))
    } catch {
        print("rotation benchmark: the private cluster did not start: \(error)")
        return 1
    }
    defer { cluster.stop() }
    do {
        try RotationBench(cluster: cluster, options: options).run()
        return 0
    } catch {
        print("rotation benchmark failed: \(error)")
        return 1
    }
    #else
    print("The rotation benchmark needs Linux (KeychainEtcd).")
    return 1
    #endif
}

#if os(Linux)

private struct RotationBenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// When each awaited value arrived (uptime nanoseconds), filled by the watchers, waited for by the rotating thread.
private final class Arrivals: @unchecked Sendable {
    // @unchecked Sendable: `seen` is reached only while `condition` is locked.
    private let condition = NSCondition()
    private var seen: [String: UInt64] = [:]

    func record(_ value: String) {
        let now = DispatchTime.now().uptimeNanoseconds
        condition.lock()
        if seen[value] == nil { seen[value] = now }
        condition.broadcast()
        condition.unlock()
    }

    /// The arrival time of `value`, waiting at most `timeout` seconds (a guard against a lost event).
    func wait(for value: String, timeout: TimeInterval) -> UInt64? {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while seen[value] == nil {
            if !condition.wait(until: deadline) { break }
        }
        return seen[value]
    }
}

/// A raw etcd watch on one key over the JSON gateway: every PUT event's value is recorded as text.
private func rawWatch(client: HTTPClient, endpoint: String, key: Data, arrivals: Arrivals, created: Arrivals) async throws {
    var request = HTTPClientRequest(url: "http://\(endpoint)/v3/watch")
    request.method = .POST
    let body = "{\"create_request\":{\"key\":\"\(key.base64EncodedString())\"}}"
    request.body = .bytes(ByteBuffer(string: body))
    let response = try await client.execute(request, timeout: .hours(24))
    guard response.status == .ok else { throw RotationBenchError("raw watch: HTTP \(response.status.code)") }
    var pending = Data()
    for try await chunk in response.body {
        pending.append(contentsOf: chunk.readableBytesView)
        while let newline = pending.firstIndex(of: 10) {
            let line = pending[pending.startIndex..<newline]
            pending = Data(pending[pending.index(after: newline)...])
            guard let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any],
                  let result = object["result"] as? [String: Any] else { continue }
            if result["created"] as? Bool == true { created.record("created") }
            for event in result["events"] as? [[String: Any]] ?? [] {
                guard let kv = event["kv"] as? [String: Any], let encoded = kv["value"] as? String,
                      let value = Data(base64Encoded: encoded) else { continue }
                arrivals.record(String(decoding: value, as: UTF8.self))
            }
        }
    }
}

private final class RotationBench {
    let cluster: EtcdTestCluster
    let options: RotationBenchmarkOptions
    static let service = "com.example.bench-rotation"
    static let account = "api.token"

    init(cluster: EtcdTestCluster, options: RotationBenchmarkOptions) {
        self.cluster = cluster
        self.options = options
    }

    /// The keychain's URL with member `first` tried first.
    private func url(_ name: String, first: Int) -> String {
        let endpoints = cluster.clientEndpoints
        return "etcd://" + (0..<endpoints.count).map { endpoints[(first + $0) % endpoints.count] }.joined(separator: ",") + "/" + name
    }

    /// A token of the size an API token has (48 characters), distinct per rotation.
    private func token(_ prefix: String, _ i: Int) -> String {
        let text = "\(prefix)-\(i)-\(UUID().uuidString)"
        return text.count >= 48 ? String(text.prefix(48)) : text + String(repeating: "x", count: 48 - text.count)
    }

    func run() throws {
        let started = DispatchTime.now().uptimeNanoseconds
        // Machine A: creates the keychain and is the process's SecItem engine.
        let password = UUID().uuidString  // a throwaway password for a throwaway cluster; never printed
        let writer = try KeychainEtcd.EtcdConfiguration(url: url("bench-rotation", first: 0), environment: [:])
        _ = try EtcdKeychain.create(writer, password: password)
        try KeychainServicesDefaults.useEtcd(writer, password: password)
        defer {
            (try? EtcdKeychain.open(writer))?.lock()
            KeychainServicesDefaults.setEngine(nil)
        }
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: Self.service,
                                    kSecAttrAccount as String: Self.account]
        var add = query
        let first = token("k", 0)
        add[kSecValueData as String] = Data(first.utf8)
        let added = SecItemAdd(add as CFDictionary, nil)
        guard added == errSecSuccess else { throw RotationBenchError("SecItemAdd: OSStatus \(added)") }

        // Machine B: its own keychain object and client (member 2 first), unlocked with the password, and the provider.
        let watcherStorage = try EtcdKeychain.open(KeychainEtcd.EtcdConfiguration(url: url("bench-rotation", first: 2), environment: [:]))
        try watcherStorage.unlock(password: password)
        let watcherEngine = KeychainEngine(storage: watcherStorage, configuration: KeychainServicesDefaults.standardConfiguration())
        let provider = KeystoneConfigProvider(engine: watcherEngine, mapping: .service(Self.service), changes: .automatic)
        let keystoneArrivals = Arrivals()
        let rawArrivals = Arrivals()
        let rawCreated = Arrivals()
        let reader = ConfigReader(provider: provider)
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { try? http.syncShutdown() }
        let rawKey = Data("bench-rotation-raw/\(UUID().uuidString)".utf8)
        let endpoints = cluster.clientEndpoints
        let tasks = Task {
            do {
                try await watchers()
            } catch is CancellationError {
            } catch {
                print("rotation benchmark: a watcher failed: \(error)")
            }
        }
        @Sendable func watchers() async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                try await provider.reload()
                group.addTask { try await provider.run() }
                group.addTask {
                    try await reader.watchString(forKey: "api.token", isSecret: true) { updates in
                        for await value in updates { if let value { keystoneArrivals.record(value) } }
                    }
                }
                group.addTask {
                    try await rawWatch(client: http, endpoint: endpoints[2], key: rawKey, arrivals: rawArrivals, created: rawCreated)
                }
                try await group.waitForAll()
            }
        }
        defer { tasks.cancel() }
        guard keystoneArrivals.wait(for: first, timeout: 60) != nil else {
            throw RotationBenchError("the provider never delivered the first value")
        }
        guard rawCreated.wait(for: "created", timeout: 60) != nil else { throw RotationBenchError("the raw watch was not created") }
        let raw = try EtcdBaselineClient.EtcdClient(
            configuration: try EtcdBaselineClient.EtcdConfiguration(url: url("bench-raw", first: 0), environment: [:]))
        defer { raw.shutdown() }

        var keystone: [Double] = [], rawLatencies: [Double] = [], updateCalls: [Double] = [], putCalls: [Double] = []
        // From the call's return to the value's arrival (negative when the watch was faster than the call's answer).
        var keystoneAfterReturn: [Double] = [], rawAfterReturn: [Double] = []
        var lost = 0
        // A few unmeasured rotations of each kind first (connections, caches).
        let warmUp = 5
        for i in 1...(options.rotations + warmUp) {
            let value = token("k", i)
            let before = DispatchTime.now().uptimeNanoseconds
            let status = SecItemUpdate(query as CFDictionary, [kSecValueData as String: Data(value.utf8)] as CFDictionary)
            let updated = DispatchTime.now().uptimeNanoseconds
            guard status == errSecSuccess else { throw RotationBenchError("SecItemUpdate: OSStatus \(status)") }
            if let seen = keystoneArrivals.wait(for: value, timeout: 10) {
                if i > warmUp {
                    keystone.append(Double(seen - before))
                    updateCalls.append(Double(updated - before))
                    keystoneAfterReturn.append(Double(Int64(bitPattern: seen &- updated)))
                }
            } else {
                lost += 1
            }

            let rawValue = token("r", i)
            let rawBefore = DispatchTime.now().uptimeNanoseconds
            _ = try raw.put(rawKey, Data(rawValue.utf8))
            let put = DispatchTime.now().uptimeNanoseconds
            if let seen = rawArrivals.wait(for: rawValue, timeout: 10) {
                if i > warmUp {
                    rawLatencies.append(Double(seen - rawBefore))
                    putCalls.append(Double(put - rawBefore))
                    rawAfterReturn.append(Double(Int64(bitPattern: seen &- put)))
                }
            } else {
                lost += 1
            }
        }

        func percentile(_ samples: [Double], _ q: Double) -> Double {
            let sorted = samples.sorted()
            guard !sorted.isEmpty else { return .nan }
            return sorted[max(0, Int((q * Double(sorted.count)).rounded(.up)) - 1)]
        }
        var report = Report()
        report.add("Rotation propagation on etcd (3 members, 127.0.0.1)", "p50 / p99 / max", "\(options.rotations) rotations each, alternating")
        for (name, samples) in [("Keystone: SecItemUpdate on A → provider watch on B", keystone),
                                ("raw: EtcdClient.put → etcd watch (JSON gateway)", rawLatencies),
                                ("  Keystone: SecItemUpdate's own call", updateCalls),
                                ("  raw: EtcdClient.put's own call", putCalls),
                                ("  Keystone: from SecItemUpdate's return to the value", keystoneAfterReturn),
                                ("  raw: from put's return to the event", rawAfterReturn)] {
            func show(_ ns: Double) -> String { ns < 0 ? "-" + formatNanos(-ns) : formatNanos(ns) }
            report.add(name, "\(show(percentile(samples, 0.5))) / \(show(percentile(samples, 0.99))) / \(show(samples.max() ?? .nan))")
        }
        let ratio = percentile(keystone, 0.99) / percentile(rawLatencies, 0.99)
        let absolute = percentile(keystone, 0.99)
        report.add("p99 ratio Keystone / raw", String(format: "%.2f×", ratio), ratio <= 1.5 ? "goal ≤ 1.5×: met" : "goal ≤ 1.5×: MISSED")
        report.add("Keystone p99 absolute", formatNanos(absolute), absolute <= 1e9 ? "goal ≤ 1 s: met" : "goal ≤ 1 s: MISSED")
        report.add("lost rotations (not seen within 10 s)", "\(lost)")
        report.print()
        print(String(format: "\n(%.0f s in all)", Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9))
        if lost > 0 { throw RotationBenchError("\(lost) rotations were not seen within 10 s") }
    }
}
#endif
