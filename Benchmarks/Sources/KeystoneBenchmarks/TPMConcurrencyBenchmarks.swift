import Foundation
import Swtpm
#if os(Linux)
import CTPMBaseline
import Crypto
import Glibc
import KeychainEngine
import KeychainTPM
import Synchronization
#endif

// `keystone-benchmarks tpm-concurrent [--signatures N] [--threads T]`
//
// Concurrent ECDSA P-256 signing on ONE swtpm (a fresh one), N signatures in all (default 10,000) from T threads
// (default 16), each signature's latency measured; the table shows throughput, p50 and p99 and the failures (the
// issue's bar: 0). Signers:
// - direct to swtpm (no resource manager: 3 object slots, one connection), first:
//   - Keystone TPMSecureEnclaveToken, one key without a PIN, T threads (the token's device serializes them);
//   - the same with a key that has a TPM-enforced PIN (the authorization value in a password session);
//   - raw ESAPI (C, CTPMBaseline): one ESAPI context with the key loaded, shared by T threads under a mutex (an ESAPI
//     context is not thread-safe; swtpm has no room for T contexts with their keys);
// - then through tpm2-abrmd (its own D-Bus session bus: dbus-daemon --session, tpm2-abrmd --session), when installed:
//   - Keystone: T TPMDevices, one per thread (the broker virtualizes the object slots and queues the commands);
//   - raw ESAPI: T ESAPI contexts, one per thread, each with the key loaded.
// Each signature is verified at the end (the last of each thread with swift-crypto).

struct TPMConcurrencyOptions {
    var signatures = 10_000
    var threads = 16

    static let usage = "usage: keystone-benchmarks tpm-concurrent [--signatures N] [--threads T]"

    static func parse(_ arguments: ArraySlice<String>) -> TPMConcurrencyOptions? {
        var options = TPMConcurrencyOptions()
        let parsed = parseBenchmarkOptions(arguments, command: "tpm-concurrent", usage: usage,
                                           valued: ["--signatures", "--threads"]) { name, value in
            guard let number = positiveNumber(value) else { return "\(name) takes a positive number" }
            if name == "--signatures" { options.signatures = number } else { options.threads = number }
            return nil
        }
        return parsed ? options : nil
    }
}

func runTPMConcurrencyBenchmarks(_ options: TPMConcurrencyOptions) -> Int32 {
    #if os(Linux)
    if let reason = SwtpmFixture.unavailableReason {
        print("TPM concurrency benchmark skipped: \(reason)")
        return 0
    }
    if !FileManager.default.fileExists(atPath: "/dev/tpmrm0") && !FileManager.default.fileExists(atPath: "/dev/tpm0") {
        // SecureEnclave.isAvailable's work on a machine without a TPM (no TCTI configured): a fresh token each time.
        var times: [Double] = []
        for _ in 0..<20 {
            let begin = TPMConcurrencyBench.now()
            _ = TPMSecureEnclaveToken(tcti: nil).availability()
            times.append((TPMConcurrencyBench.now() - begin) * 1000)
        }
        times.sort()
        print(String(format: "no TPM, no TCTI configured: the availability probe answers in %.3f ms (median of 20; max %.3f ms)\n",
                     times[times.count / 2], times.last!))
    }
    let fixture: SwtpmFixture
    do {
        fixture = try SwtpmFixture.start()
    } catch {
        print("TPM concurrency benchmark: swtpm did not start: \(error)")
        return 1
    }
    defer { fixture.stop() }
    do {
        return try TPMConcurrencyBench(fixture: fixture, options: options).run()
    } catch {
        print("TPM concurrency benchmark failed: \(error)")
        return 1
    }
    #else
    print("TPM concurrency benchmark skipped: it needs Linux.")
    return 0
    #endif
}

#if os(Linux)

/// One row: signatures per second, latency percentiles, failures.
struct ConcurrentRow {
    let name: String
    let rate: Double
    let p50: Double
    let p99: Double
    let failures: Int
    let firstFailure: String?
}

final class TPMConcurrencyBench {
    let fixture: SwtpmFixture
    let options: TPMConcurrencyOptions
    static let message = Data("Keystone TPM concurrency benchmark".utf8)
    let digest = Data(SHA256.hash(data: TPMConcurrencyBench.message))
    let pin = "482916"

    init(fixture: SwtpmFixture, options: TPMConcurrencyOptions) throws {
        self.fixture = fixture
        self.options = options
    }

    static func now() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    /// Runs `sign(thread)` N/T times on each of T threads; latencies in milliseconds.
    func measure(_ name: String, setUp: (Int) throws -> Void = { _ in }, sign: @escaping @Sendable (Int) throws -> Data,
                 verify: @escaping @Sendable (Data) -> Bool) throws -> ConcurrentRow {
        let threads = options.threads
        let perThread = max(1, options.signatures / threads)
        for thread in 0..<threads { try setUp(thread) }
        // Warm-up, unmeasured: each thread's first signatures load its key (and, through the broker, open its context).
        for thread in 0..<threads { for _ in 0..<3 { _ = try sign(thread) } }
        let latencies = Mutex<[Double]>([])
        let failures = Mutex<[String]>([])
        let group = DispatchGroup()
        let start = Self.now()
        for thread in 0..<threads {
            group.enter()
            let worker = Thread {
                defer { group.leave() }
                var mine: [Double] = []
                mine.reserveCapacity(perThread)
                var last = Data()
                for _ in 0..<perThread {
                    let begin = Self.now()
                    do {
                        last = try sign(thread)
                        mine.append((Self.now() - begin) * 1000)
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
                if !last.isEmpty && !verify(last) { failures.withLock { $0.append("a signature does not verify") } }
                latencies.withLock { $0 += mine }
            }
            worker.stackSize = 1 << 20
            worker.start()
        }
        group.wait()
        let elapsed = Self.now() - start
        let sorted = latencies.withLock { $0 }.sorted()
        func percentile(_ p: Double) -> Double {
            sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
        }
        let failed = failures.withLock { $0 }
        let row = ConcurrentRow(name: name, rate: Double(sorted.count) / elapsed, p50: percentile(0.5), p99: percentile(0.99),
                                failures: failed.count, firstFailure: failed.first)
        print("  " + row.name.padding(toLength: 58, withPad: " ", startingAt: 0)
            + String(format: " %8.1f/s  p50 %6.2f ms  p99 %6.2f ms  failures %d", row.rate, row.p50, row.p99, row.failures)
            + (row.firstFailure.map { " (first: \($0))" } ?? ""))
        return row
    }

    func run() throws -> Int32 {
        print("TPM: \(options.signatures) ECDSA P-256 signatures from \(options.threads) threads on one swtpm\n")
        var rows: [ConcurrentRow] = []
        let digest = self.digest
        let pin = self.pin
        // Keys made by Keystone (the token's device is the only client of swtpm until the abrmd part).
        let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
        let plain = try token.createKey(.signing)
        let protected = try token.createKey(.signing, pin: pin)
        let plainKey = try P256.Signing.PublicKey(x963Representation: plain.publicKeyX963)
        let protectedKey = try P256.Signing.PublicKey(x963Representation: protected.publicKeyX963)
        let verifyPlain: @Sendable (Data) -> Bool = { raw in
            (try? P256.Signing.ECDSASignature(rawRepresentation: raw)).map { plainKey.isValidSignature($0, for: TPMConcurrencyBench.message) } ?? false
        }
        let verifyProtected: @Sendable (Data) -> Bool = { raw in
            (try? P256.Signing.ECDSASignature(rawRepresentation: raw)).map { protectedKey.isValidSignature($0, for: TPMConcurrencyBench.message) } ?? false
        }
        print("direct to swtpm:")
        // A single thread first, for the PIN's own cost without contention.
        let single = try TPMConcurrencyBench(fixture: fixture, options: TPMConcurrencyOptions(signatures: max(1, options.signatures / 10), threads: 1))
        rows.append(try single.measure("Keystone token, 1 thread, no PIN", sign: { _ in
            try token.signature(digest: digest, with: plain.dataRepresentation) }, verify: verifyPlain))
        rows.append(try single.measure("Keystone token, 1 thread, TPM-enforced PIN", sign: { _ in
            try token.signature(digest: digest, with: protected.dataRepresentation, pin: pin) }, verify: verifyProtected))
        rows.append(try measure("Keystone token, \(options.threads) threads, no PIN", sign: { _ in
            try token.signature(digest: digest, with: plain.dataRepresentation) }, verify: verifyPlain))
        rows.append(try measure("Keystone token, \(options.threads) threads, TPM-enforced PIN", sign: { _ in
            try token.signature(digest: digest, with: protected.dataRepresentation, pin: pin) }, verify: verifyProtected))
        // Raw ESAPI needs swtpm's object slots: what Keystone's device holds is flushed first (the token stays alive
        // until the end, so that its device never flushes handles the TPM gave to others meanwhile).
        let parts = try Self.parts(of: plain.dataRepresentation)
        var tools = ProcessInfo.processInfo.environment
        tools["TPM2TOOLS_TCTI"] = fixture.tcti
        _ = try fixture.run("/usr/bin/tpm2_flushcontext", ["-t"], environment: tools)
        defer { withExtendedLifetime(token) {} }
        let shared = try ESAPIContext(tcti: fixture.tcti, parts: parts)
        rows.append(try measure("raw ESAPI, \(options.threads) threads, one context + mutex", sign: { _ in
            try shared.sign(digest) }, verify: verifyPlain))
        shared.close()

        print("\nthrough tpm2-abrmd:")
        if let broker = try? Self.startBroker(swtpm: fixture.tcti) {
            defer { broker.stop() }
            let tcti = "tabrmd:bus_type=session"
            let devices = Mutex<[Int: TPMDevice]>([:])
            rows.append(try measure("Keystone TPMDevice, one per thread (\(options.threads))", setUp: { thread in
                let device = try TPMDevice(tcti: tcti)
                devices.withLock { $0[thread] = device }
            }, sign: { thread in
                let device = devices.withLock { $0[thread]! }
                return try device.signature(digest: digest, with: plain.dataRepresentation).rawRepresentation
            }, verify: verifyPlain))
            devices.withLock { $0.removeAll() }
            let contexts = Mutex<[Int: ESAPIContext]>([:])
            rows.append(try measure("raw ESAPI, one context per thread (\(options.threads))", setUp: { thread in
                let context = try ESAPIContext(tcti: tcti, parts: parts)
                contexts.withLock { $0[thread] = context }
            }, sign: { thread in
                try contexts.withLock { $0[thread]! }.sign(digest)
            }, verify: verifyPlain))
            contexts.withLock { $0.values.forEach { $0.close() }; $0.removeAll() }
        } else {
            print("  skipped: tpm2-abrmd, its TCTI or dbus-daemon is missing or did not start (apt-get install tpm2-abrmd libtss2-tcti-tabrmd0 dbus)")
        }
        let failed = rows.reduce(0) { $0 + $1.failures }
        print("\n\(failed) failures in all")
        return failed == 0 ? 0 : 1
    }

    /// The marshalled TPM2B_PUBLIC || TPM2B_PRIVATE inside a Keystone blob (what CTPMBaseline loads).
    static func parts(of blob: Data) throws -> [UInt8] {
        let bytes = [UInt8](blob)
        guard bytes.count > 12 else { throw TPMBenchError("the key's data representation is too short") }
        return Array(bytes[8..<(bytes.count - 4)])
    }

    /// A private D-Bus session bus with tpm2-abrmd on it, in this process's environment (set before any thread
    /// that reads it starts: the broker part runs after the direct part's threads ended).
    struct Broker {
        let bus: Process
        let broker: Process
        func stop() {
            for process in [broker, bus] where process.isRunning {
                kill(process.processIdentifier, SIGTERM)
                process.waitUntilExit()
            }
        }
    }

    static func startBroker(swtpm: String) throws -> Broker {
        for tool in ["/usr/bin/dbus-daemon", "/usr/sbin/tpm2-abrmd"] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw TPMBenchError("\(tool) missing")
        }
        let bus = Process()
        bus.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        bus.arguments = ["--session", "--nofork", "--print-address=1"]
        let pipe = Pipe()
        bus.standardOutput = pipe
        bus.standardError = FileHandle.nullDevice
        try bus.run()
        var address = Data()
        while !address.contains(UInt8(ascii: "\n")) {
            let chunk = pipe.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            address.append(chunk)
        }
        let text = String(decoding: address, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw TPMBenchError("dbus-daemon printed no address") }
        setenv("DBUS_SESSION_BUS_ADDRESS", text, 1)
        let broker = Process()
        broker.executableURL = URL(fileURLWithPath: "/usr/sbin/tpm2-abrmd")
        broker.arguments = ["--session", "--tcti=\(swtpm)", "--allow-root", "--flush-all"]
        broker.standardOutput = FileHandle.nullDevice
        broker.standardError = FileHandle.nullDevice
        try broker.run()
        let started = Broker(bus: bus, broker: broker)
        for _ in 0..<100 {
            if (try? TPMDevice(tcti: "tabrmd:bus_type=session").info()) != nil { return started }
            usleep(100_000)
        }
        started.stop()
        throw TPMBenchError("tpm2-abrmd did not answer within 10 s")
    }
}

/// One raw ESAPI context (CTPMBaseline) with the key loaded; `sign` holds a lock (ESAPI is not thread-safe).
final class ESAPIContext: @unchecked Sendable {
    // @unchecked Sendable: the handle is used only under `lock`.
    private let lock = NSLock()
    private var handle: OpaquePointer?

    init(tcti: String, parts: [UInt8]) throws {
        var error = [CChar](repeating: 0, count: 256)
        guard ks_baseline_tpm_open(tcti, parts, parts.count, &handle, &error, Int32(error.count)) == 0 else {
            throw TPMBenchError("opening raw ESAPI: \(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
        }
    }

    func sign(_ digest: Data) throws -> Data {
        lock.lock()
        defer { lock.unlock() }
        var error = [CChar](repeating: 0, count: 256)
        var rs = [UInt8](repeating: 0, count: 64)
        guard let handle, ks_baseline_tpm_sign(handle, [UInt8](digest), 1, &rs, &error, Int32(error.count)) == 1 else {
            throw TPMBenchError("raw ESAPI: \(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
        }
        return Data(rs)
    }

    func close() {
        lock.lock()
        defer { lock.unlock() }
        ks_baseline_tpm_close(handle)
        handle = nil
    }
}
#endif
