import EtcdCluster
import Foundation
#if os(Linux)
import EtcdBaselineClient
import KeychainEngine
import KeychainEtcd
import KeychainServices
#endif

// `keystone-benchmarks etcd [--operations N] [--rounds R] [--items M] [--match-all-operations K] [--rotation-items I] [--profile]`
//
// SecItem calls per second on an etcd keychain against the same client library's raw calls, on ONE private 3-member
// etcd cluster (EtcdTestCluster: data directories under a temporary directory, etcd's defaults but short Raft timings)
// and over ONE client library (KeychainEtcd's EtcdClient: AsyncHTTPClient over etcd's v3 JSON gateway, every read
// linearizable):
// - SecItemAdd of generic passwords (a 64-byte secret, a new account each) on keychain `bench-adds`, after
//   `KeychainServicesDefaults.useEtcd`, against `EtcdClient.put` of keys and values of the size Keystone stores
//   (measured from a stored item) — goal ≥ 0.5×;
// - SecItemCopyMatching of one item (service + account, kSecReturnData) on keychain `bench-reads`, which holds M
//   items, against `EtcdClient.range` of one key — goal ≥ 0.8×. The same read naming kSecAttrAccessGroup too (the
//   whole primary key) is shown beside it;
// - SecItemUpdate of the secret with check-and-set (inside `EtcdKeychain.withCheckAndSet(expectedVersion:)`, the
//   version known from an earlier read, not timed) against `EtcdClient.put` — goal ≥ 0.6×; without a goal the plain
//   update (service + account, and with the access group), and, as the floor of an update made in one round trip,
//   a raw transaction of what an update commits (its compares and its four puts: item, history, HEAD, audit entry);
// - a match-all SecItemCopyMatching (kSecMatchLimitAll, attributes and data) of the M items against a raw prefix
//   range of M keys of the same size — goal ≥ 0.6×; the result is counted as the NSArray SecItem returns;
// - after the table, the rotation of the master key of a keychain of I items (`--rotation-items`, default 1,000; 0
//   skips it): rows re-sealed per second.
// Calls are sequential from one thread (latency-bound). Every round runs every measurement once, N calls each (K for
// the match-alls), the order rotated by one each round; the table shows the median of R rounds and the ratios of the
// medians. Defaults: 300 calls, 5 rounds, 200 items, 20 match-alls: about a minute on a 2-core machine.
// `--profile` runs one batch per measurement instead and prints, per call, the requests etcd's members served (their
// /metrics: gRPC Range, Txn, Put), the bytes they sent to clients, and this process's CPU time against the wall time.

/// The command line of the `etcd` benchmark.
struct EtcdBenchmarkOptions {
    /// Calls per measured batch (adds, puts, point reads, updates).
    var operations = 300
    /// Interleaved rounds; the table shows medians.
    var rounds = 5
    /// Items in the keychain that point reads, updates and match-alls use.
    var items = 200
    /// Match-all searches per batch.
    var matchAllOperations = 20
    /// One batch per measurement with etcd's request counters instead of the rounds.
    var profile = false
    /// Items of the keychain whose master key the rotation measurement rotates (0: no rotation measured).
    var rotationItems = 1000

    static let usage = "usage: keystone-benchmarks etcd [--operations N] [--rounds R] [--items M] [--match-all-operations K] [--rotation-items I] [--profile]"

    /// Parses the arguments after `etcd`; nil (after printing why and the usage) when they are wrong.
    static func parse(_ arguments: ArraySlice<String>) -> EtcdBenchmarkOptions? {
        var options = EtcdBenchmarkOptions()
        let parsed = parseBenchmarkOptions(arguments, command: "etcd", usage: usage, flags: ["--profile"],
                                           valued: ["--operations", "--rounds", "--items", "--match-all-operations", "--rotation-items"]) { name, value in
            if name == "--profile" { options.profile = true; return nil }
            if name == "--rotation-items" {
                guard let number = Int(value ?? ""), number >= 0 else { return "--rotation-items takes a number" }
                options.rotationItems = number
                return nil
            }
            guard let number = positiveNumber(value) else { return "\(name) takes a positive number" }
            switch name {
            case "--operations": options.operations = number
            case "--rounds": options.rounds = number
            case "--items": options.items = number
            default: options.matchAllOperations = number
            }
            return nil
        }
        return parsed ? options : nil
    }
}

/// Runs the benchmark and prints its table; the process's exit status (1 when a call failed or the cluster did not start).
func runEtcdBenchmarks(_ options: EtcdBenchmarkOptions) -> Int32 {
    #if os(Linux)
    if let reason = EtcdTestCluster.unavailableReason {
        print("etcd benchmark skipped: \(reason)")
        return 1
    }
    let started = DispatchTime.now().uptimeNanoseconds
    let cluster: EtcdTestCluster
    do {
        cluster = try EtcdTestCluster.start(EtcdTestCluster.Options(members: 3))
    } catch {
        print("etcd benchmark: the private cluster did not start: \(error)")
        return 1
    }
    defer { cluster.stop() }
    do {
        let bench = try EtcdBench(cluster: cluster, options: options)
        defer { bench.close() }
        if options.profile {
            try bench.profile()
        } else {
            try bench.run()
            bench.printTable()
            if options.rotationItems > 0 { try bench.rotation() }
        }
    } catch {
        print("etcd benchmark failed: \(error)")
        return 1
    }
    print(String(format: "\n(%.0f s in all, cluster start included)", Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9))
    return 0
    #else
    print("The etcd benchmark needs Linux (KeychainEtcd).")
    return 1
    #endif
}

#if os(Linux)

struct EtcdBenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// What is measured, in the table's order.
enum EtcdMeasurement: String, CaseIterable {
    case secItemAdd = "SecItemAdd (generic password, 64-byte secret)"
    case rawPut = "raw EtcdClient.put (same key and value size)"
    case pointRead = "SecItemCopyMatching service+account, kSecReturnData"
    case pointReadGroup = "  … naming kSecAttrAccessGroup too (whole primary key)"
    case rawRange = "raw EtcdClient.range of one key"
    case update = "SecItemUpdate of the secret, service+account"
    case updateGroup = "  … naming kSecAttrAccessGroup too"
    case updateCheckAndSet = "SecItemUpdate with check-and-set (version stated)"
    case rawUpdateTransaction = "raw EtcdClient.txn of what an update commits"
    case matchAll = "SecItemCopyMatching kSecMatchLimitAll, attributes+data"
    case rawPrefix = "raw EtcdClient.range of a prefix"

    var isMatchAll: Bool { self == .matchAll || self == .rawPrefix }
    var tag: String {
        switch self {
        case .secItemAdd: "add"
        case .rawPut: "put"
        case .pointRead: "read"
        case .pointReadGroup: "read+group"
        case .rawRange: "range"
        case .update: "update"
        case .updateGroup: "update+group"
        case .updateCheckAndSet: "update+cas"
        case .rawUpdateTransaction: "update-txn"
        case .matchAll: "match-all"
        case .rawPrefix: "prefix"
        }
    }
}

final class EtcdBench {
    let cluster: EtcdTestCluster
    let options: EtcdBenchmarkOptions
    let addsConfiguration: KeychainEtcd.EtcdConfiguration
    let readsConfiguration: KeychainEtcd.EtcdConfiguration
    let addsEngine: KeychainEngine
    let readsEngine: KeychainEngine
    /// `bench-reads` as a typed handle: the versions a check-and-set states, and the rotation.
    let readsKeychain: EtcdKeychain
    /// The version each item of `bench-reads` is at, as this process last wrote or read it (check-and-set states it).
    private var versions: [Int: UInt64] = [:]
    /// The raw update transaction's compared revisions: its HEAD-like key, its header-like key, and each item key.
    private var transactionHeadRevision: Int64 = 0
    private var transactionMetaRevision: Int64 = 0
    private var transactionItemRevisions: [Int: Int64] = [:]
    /// The raw baseline's own client (the same library, its own connections): KeychainEtcd's `EtcdClient` source,
    /// compiled again in EtcdBaselineClient because Keystone keeps it at package access.
    let raw: EtcdBaselineClient.EtcdClient
    let secret = Data((0..<64).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) })
    /// The sizes of one stored item's etcd key and value, which the raw keys and values copy.
    private(set) var keySize = 0
    private(set) var valueSize = 0
    /// ops/s of every round, by measurement.
    private(set) var samples: [EtcdMeasurement: [Double]] = [:]
    private var batches = 0
    static let readService = "bench-read"
    static let accessGroup = "default"

    init(cluster: EtcdTestCluster, options: EtcdBenchmarkOptions) throws {
        self.cluster = cluster
        self.options = options
        let endpoints = cluster.clientEndpoints.joined(separator: ",")
        addsConfiguration = try KeychainEtcd.EtcdConfiguration(url: "etcd://\(endpoints)/bench-adds", environment: [:])
        readsConfiguration = try KeychainEtcd.EtcdConfiguration(url: "etcd://\(endpoints)/bench-reads", environment: [:])
        // A throwaway password for a throwaway cluster; never printed.
        let password = UUID().uuidString
        for configuration in [addsConfiguration, readsConfiguration] {
            _ = try EtcdKeychain.create(configuration, password: password)
        }
        addsEngine = try KeychainServicesDefaults.useEtcd(addsConfiguration, password: password)
        readsEngine = try KeychainServicesDefaults.useEtcd(readsConfiguration, password: password)
        readsKeychain = try EtcdKeychain.open(readsConfiguration)
        if readsKeychain.lockState != .unlocked { try readsKeychain.unlock(password: password) }
        raw = try EtcdBaselineClient.EtcdClient(
            configuration: try EtcdBaselineClient.EtcdConfiguration(url: "etcd://\(endpoints)/bench-raw", environment: [:]))
        try prepare()
    }

    /// Locks both keychains (removing this user's unlock-cache entries for them) and closes the raw client.
    func close() {
        for configuration in [addsConfiguration, readsConfiguration] {
            (try? EtcdKeychain.open(configuration))?.lock()
        }
        KeychainServicesDefaults.setEngine(nil)
        raw.shutdown()
    }

    // MARK: - Keys and queries

    private func rawKey(_ name: String) -> Data {
        var key = Data("bench-raw/\(name)/".utf8)
        if key.count < keySize { key.append(Data(repeating: UInt8(ascii: "x"), count: keySize - key.count)) }
        return key
    }

    private func rawValue(_ i: Int) -> Data {
        var value = Data(count: valueSize)
        value.withUnsafeMutableBytes { bytes in
            for j in 0..<bytes.count { bytes[j] = UInt8(truncatingIfNeeded: i &+ j &* 31) }
        }
        return value
    }

    private func itemQuery(_ service: String, _ account: String, group: Bool = false) -> [String: Any] {
        var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                    kSecAttrAccount as String: account]
        if group { query[kSecAttrAccessGroup as String] = Self.accessGroup }
        return query
    }

    private func check(_ status: OSStatus, _ what: String) throws {
        guard status == errSecSuccess else {
            throw EtcdBenchError("\(what): OSStatus \(status) (\(SecCopyErrorMessageString(status, nil).map { "\($0)" } ?? "?"))")
        }
    }

    /// Fills `bench-reads` with the items, writes the raw keys the raw reads use, and measures one stored item.
    private func prepare() throws {
        let started = DispatchTime.now().uptimeNanoseconds
        KeychainServicesDefaults.setEngine(readsEngine)
        for i in 0..<options.items {
            var add = itemQuery(Self.readService, "item-\(i)")
            add[kSecValueData as String] = secret
            try check(SecItemAdd(add as CFDictionary, nil), "filling bench-reads (item \(i))")
        }
        let items = try raw.range(prefix: Data("keystone/v1/bench-reads/k/genp/".utf8), limit: 1)
        guard let stored = items.kvs.first, items.count == Int64(options.items) else {
            throw EtcdBenchError("bench-reads holds \(items.count) item keys, not \(options.items)")
        }
        keySize = stored.key.count
        valueSize = stored.value.count
        for i in 0..<options.items { _ = try raw.put(rawKey("items/\(i)"), rawValue(i)) }
        transactionMetaRevision = try raw.put(rawKey("txn/meta"), Data(count: 300))
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        print(String(format: "  filled bench-reads with %d items and the raw prefix with %d keys (%.1f s); an item is an etcd key of %d bytes and a value of %d bytes",
                     options.items, options.items, seconds, keySize, valueSize))
    }

    // MARK: - Batches

    /// One batch of `measurement`: its calls, checked; returns calls per second.
    private func batch(_ measurement: EtcdMeasurement, calls: Int) throws -> Double {
        batches += 1
        let batch = batches
        let items = options.items
        var failure: String?
        if measurement == .updateCheckAndSet {
            // Not timed: the versions the updates state, as an app knows them from the read it made before.
            for i in 0..<calls {
                let item = (i &* 7919) % items
                if versions[item] == nil {
                    versions[item] = try readsKeychain.currentVersion(of: .genericPassword, matching: [
                        Key.service: .string(Self.readService), Key.account: .string("item-\(item)")])
                }
            }
        }
        let start = DispatchTime.now().uptimeNanoseconds
        switch measurement {
        case .secItemAdd:
            KeychainServicesDefaults.setEngine(addsEngine)
            for i in 0..<calls {
                var add = itemQuery("bench-add", "b\(batch)-\(i)")
                add[kSecValueData as String] = secret
                let status = SecItemAdd(add as CFDictionary, nil)
                if status != errSecSuccess, failure == nil { failure = "SecItemAdd: OSStatus \(status)" }
            }
        case .rawPut:
            for i in 0..<calls { _ = try raw.put(rawKey("puts/b\(batch)-\(i)"), rawValue(i)) }
        case .pointRead, .pointReadGroup:
            KeychainServicesDefaults.setEngine(readsEngine)
            for i in 0..<calls {
                var query = itemQuery(Self.readService, "item-\((i &* 7919) % items)", group: measurement == .pointReadGroup)
                query[kSecReturnData as String] = true
                var result: CFTypeRef?
                let status = SecItemCopyMatching(query as CFDictionary, &result)
                if (status != errSecSuccess || (result as? Data)?.count != secret.count), failure == nil {
                    failure = "SecItemCopyMatching: OSStatus \(status)"
                }
            }
        case .rawRange:
            for i in 0..<calls {
                let found = try raw.range(rawKey("items/\((i &* 7919) % items)"))
                if found.kvs.first?.value.count != valueSize, failure == nil { failure = "range: the key is missing" }
            }
        case .update, .updateGroup:
            KeychainServicesDefaults.setEngine(readsEngine)
            for i in 0..<calls {
                let query = itemQuery(Self.readService, "item-\((i &* 7919) % items)", group: measurement == .updateGroup)
                var changed = secret
                changed[0] = UInt8(truncatingIfNeeded: batch &+ i)
                let status = SecItemUpdate(query as CFDictionary, [kSecValueData as String: changed] as CFDictionary)
                if status != errSecSuccess, failure == nil { failure = "SecItemUpdate: OSStatus \(status)" }
                // The next check-and-set states a version read again.
                versions[(i &* 7919) % items] = nil
            }
        case .rawUpdateTransaction:
            // What one SecItemUpdate commits, in one raw transaction and no read before it (the floor of an update
            // made in one round trip): compares on the item, the HEAD and the header; puts of the item, its previous
            // version (history), the HEAD (73 bytes) and an audit entry (192 bytes).
            for i in 0..<calls {
                let item = (i &* 7919) % items
                let itemKey = rawKey("txn/items/\(item)")
                let result = try raw.txn(compare: [
                    .modRevision(itemKey, equals: transactionItemRevisions[item] ?? 0),
                    .modRevision(rawKey("txn/head"), equals: transactionHeadRevision),
                    .modRevision(rawKey("txn/meta"), equals: transactionMetaRevision),
                ], success: [
                    .put(itemKey, rawValue(i)),
                    .put(rawKey("txn/history/\(item)/b\(batch)-\(i)"), rawValue(i &+ 1)),
                    .put(rawKey("txn/head"), Data(count: 73)),
                    .put(rawKey("txn/audit/b\(batch)-\(i)"), Data(count: 192)),
                ])
                if result.succeeded {
                    transactionHeadRevision = result.revision
                    transactionItemRevisions[item] = result.revision
                } else if failure == nil {
                    failure = "update transaction: a comparison failed"
                }
            }
        case .updateCheckAndSet:
            KeychainServicesDefaults.setEngine(readsEngine)
            for i in 0..<calls {
                let item = (i &* 7919) % items
                let query = itemQuery(Self.readService, "item-\(item)")
                var changed = secret
                changed[0] = UInt8(truncatingIfNeeded: batch &+ i)
                let status = (try? EtcdKeychain.withCheckAndSet(expectedVersion: versions[item] ?? 0) {
                    SecItemUpdate(query as CFDictionary, [kSecValueData as String: changed] as CFDictionary)
                }) ?? errSecInvalidItemRef
                if status == errSecSuccess {
                    versions[item]! += 1
                } else if failure == nil {
                    failure = "SecItemUpdate with check-and-set (version \(versions[item] ?? 0)): OSStatus \(status)"
                }
            }
        case .matchAll:
            KeychainServicesDefaults.setEngine(readsEngine)
            for _ in 0..<calls {
                let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: Self.readService,
                                            kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true,
                                            kSecReturnData as String: true]
                var result: CFTypeRef?
                let status = SecItemCopyMatching(query as CFDictionary, &result)
                // Counted as the NSArray SecItem returns: `as? [Any]` would bridge every result dictionary to Swift
                // (eager on Linux, about 2 ms for 200 items, lazy on Apple's platforms), which is the app's cost, not
                // the call's (the raw side counts its key-values without touching them either).
                let count = (result as? NSArray)?.count ?? 0
                if (status != errSecSuccess || count != items), failure == nil {
                    failure = "match-all: OSStatus \(status), \(count) of \(items) items"
                }
            }
        case .rawPrefix:
            for _ in 0..<calls {
                let found = try raw.range(prefix: Data("bench-raw/items/".utf8))
                if found.kvs.count != items, failure == nil { failure = "prefix range: \(found.kvs.count) of \(items) keys" }
            }
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        if let failure { throw EtcdBenchError("\(measurement.tag), batch \(batch): \(failure)") }
        return Double(calls) / seconds
    }

    private func calls(_ measurement: EtcdMeasurement) -> Int {
        measurement.isMatchAll ? options.matchAllOperations : options.operations
    }

    func run() throws {
        print("etcd: SecItem calls per second on an etcd keychain against raw EtcdClient calls, one private 3-member cluster")
        print("\(options.operations) calls per batch (\(options.matchAllOperations) match-alls over \(options.items) items); "
            + "medians of \(options.rounds) interleaved rounds; sequential calls from one thread\n")
        let all = EtcdMeasurement.allCases
        // Warm-up, not counted: connections to every member, the code paths.
        for measurement in all { _ = try batch(measurement, calls: measurement.isMatchAll ? 2 : 20) }
        for round in 0..<options.rounds {
            var line = "  round \(round + 1):"
            for offset in 0..<all.count {
                let measurement = all[(round + offset) % all.count]
                let rate = try batch(measurement, calls: calls(measurement))
                samples[measurement, default: []].append(rate)
                line += " \(measurement.tag) " + String(format: "%.0f/s;", rate)
            }
            print(line)
        }
        print("")
    }

    /// The median of a measurement's rounds.
    func median(_ measurement: EtcdMeasurement) -> Double? {
        guard let values = samples[measurement]?.sorted(), !values.isEmpty else { return nil }
        return values.count % 2 == 1 ? values[values.count / 2] : (values[values.count / 2 - 1] + values[values.count / 2]) / 2
    }

    func printTable() {
        var rows: [[String]] = [["measurement", "calls/s (median)", "range of rounds", "ms per call", "× raw", "goal"]]
        let baselines: [EtcdMeasurement: (EtcdMeasurement, Double?)] = [
            .secItemAdd: (.rawPut, 0.5), .pointRead: (.rawRange, 0.8), .pointReadGroup: (.rawRange, nil),
            .update: (.rawPut, nil), .updateGroup: (.rawPut, nil), .updateCheckAndSet: (.rawPut, 0.6), .rawUpdateTransaction: (.rawPut, nil), .matchAll: (.rawPrefix, 0.6),
        ]
        for measurement in EtcdMeasurement.allCases {
            guard let rate = median(measurement), let values = samples[measurement] else { continue }
            var ratio = "—", goal = "—"
            if let (baseline, target) = baselines[measurement], let base = median(baseline) {
                ratio = String(format: "%.2f× %@", rate / base, baseline.tag)
                if let target {
                    // The exact ratio when a goal is missed, so a 0.496× shown as 0.50× is not mistaken for met.
                    goal = rate / base >= target ? String(format: "≥ %.1f×: met", target)
                        : String(format: "≥ %.1f×: NOT met (%.3f×)", target, rate / base)
                }
            }
            rows.append([measurement.rawValue, String(format: "%.1f", rate),
                         String(format: "%.1f–%.1f", values.min() ?? 0, values.max() ?? 0),
                         String(format: "%.2f", 1000 / rate), ratio, goal])
        }
        let widths = (0..<rows[0].count).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            let line = zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
            print(line.replacingOccurrences(of: " +$", with: "", options: .regularExpression))
        }
    }

    // MARK: - Rotation

    /// Rotates the master key of a keychain of `rotationItems` items (every row re-sealed under a new generation, in
    /// batches of 64 rows per etcd transaction) and prints the rows re-sealed per second; no other writer runs.
    func rotation() throws {
        let configuration = try KeychainEtcd.EtcdConfiguration(
            url: "etcd://\(cluster.clientEndpoints.joined(separator: ","))/bench-rotation", environment: [:])
        let password = UUID().uuidString
        let keychain = try EtcdKeychain.create(configuration, password: password)
        defer { keychain.lock() }
        let engine = KeychainEngine(storage: keychain)
        for i in 0..<options.rotationItems {
            _ = try engine.add([Key.class: .string("genp"), Key.service: .string("bench-rotation"),
                                Key.account: .string("item-\(i)"), Key.valueData: .data(secret)])
        }
        let start = DispatchTime.now().uptimeNanoseconds
        let report = try keychain.rotateKeys()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        guard report.resealed >= options.rotationItems else {
            throw EtcdBenchError("rotation re-sealed \(report.resealed) of \(options.rotationItems) items")
        }
        print(String(format: "\nrotation of the master key over %d items: %.2f s, %.0f items/s (%d rows re-sealed, %d conflicts, generation %u)",
                     options.rotationItems, seconds, Double(report.resealed) / seconds, report.resealed, report.conflicts,
                     report.generation))
    }

    // MARK: - Profile

    /// etcd's counters summed over every member: gRPC calls handled by method, and bytes sent to clients.
    private func counters() throws -> [String: Double] {
        var total: [String: Double] = [:]
        for endpoint in cluster.clientEndpoints {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: EtcdTestCluster.curlPath)
            process.arguments = ["-s", "--max-time", "5", "http://\(endpoint)/metrics"]
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = FileHandle.nullDevice
            try process.run()
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            for line in String(decoding: data, as: UTF8.self).split(separator: "\n") where !line.hasPrefix("#") {
                guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
                let name = String(line[..<space])
                if name.hasPrefix("grpc_server_handled_total{"), let method = name.range(of: "grpc_method=\"") {
                    let rest = name[method.upperBound...]
                    total["gRPC " + String(rest.prefix { $0 != "\"" }), default: 0] += value
                } else if name == "etcd_network_client_grpc_sent_bytes_total" {
                    total["bytes sent to clients", default: 0] += value
                } else if name == "etcd_network_client_grpc_received_bytes_total" {
                    total["bytes received from clients", default: 0] += value
                }
            }
        }
        return total
    }

    func profile() throws {
        print("etcd profile: per call, what etcd's members served (their /metrics) and this process's CPU time\n")
        for measurement in EtcdMeasurement.allCases { _ = try batch(measurement, calls: measurement.isMatchAll ? 2 : 20) }
        for measurement in EtcdMeasurement.allCases {
            let n = Double(calls(measurement))
            let before = try counters()
            let cpuBefore = EtcdBenchCPU.own()
            let rate = try batch(measurement, calls: calls(measurement))
            let cpu = EtcdBenchCPU.own() - cpuBefore
            let after = try counters()
            print(measurement.rawValue + String(format: ": %.1f calls/s, %.2f ms per call, client CPU %.2f ms per call", rate, 1000 / rate, cpu * 1000 / n))
            for (name, value) in after.sorted(by: { $0.key < $1.key }) {
                let delta = value - (before[name] ?? 0)
                guard delta > 0 else { continue }
                print("    " + name.padding(toLength: 30, withPad: " ", startingAt: 0) + String(format: "%10.2f per call", delta / n))
            }
        }
    }
}

/// This process's CPU time (user and system), in seconds.
enum EtcdBenchCPU {
    static func own() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }
}

#endif
