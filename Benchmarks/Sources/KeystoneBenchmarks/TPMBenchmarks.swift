import Foundation
import Swtpm
#if os(Linux)
import CTPMBaseline
import Crypto
import KeychainEngine
import KeychainTPM
#endif

// `keystone-benchmarks tpm [--signatures N] [--rounds R] [--tool-signatures M] [--signers ...]`
//
// ECDSA P-256 signatures per second in a TPM 2.0, all on ONE software TPM (a swtpm of its own, from the Swtpm
// fixture) and with ONE signing key (created by Keystone; its TPM2B_PUBLIC and TPM2B_PRIVATE are what every signer
// loads), for:
// - raw ESAPI: a C program's way (CTPMBaseline): its own ESAPI context through tctildr (tpm2-tss's swtpm TCTI),
//   TPM2_CreatePrimary and TPM2_Load once, then Esys_Sign N times;
// - Keystone TPMDevice: `TPMDevice.signature(digest:with:)` N times with the key's data representation (the device
//   keeps the key loaded after the first);
// - Keystone's Secure Enclave token: `TPMSecureEnclaveToken.signature(digest:with:)` (what SecKey and CryptoKit's
//   SecureEnclave keys call on Linux) N times;
// - tpm2_sign: the key loaded once (tpm2_createprimary, tpm2_load, the primary flushed), then one
//   `tpm2_sign -c <handle> -g sha256 -d` process per signature, M of them (default N/10). (`-c key.ctx` would load
//   the key again in every process, and on a TPM without a resource manager leave it loaded: the fourth fails.)
// - for reference, raw ESAPI loading and flushing the key around every signature (what Keystone did before it kept
//   keys loaded).
// Each signer opens its context, signs 5 times unmeasured, then N times measured, and closes it (swtpm has 3 object
// slots for every client together: signers never overlap). Rounds interleave the signers (each round starts one
// later) and each keeps its best round (the median of its rounds is shown too: on a busy machine single batches vary
// by ±30%). The last signature of each batch is verified with swift-crypto.
// Keystone reaches swtpm through its own transport (it keeps deadlines; tpm2-tss's swtpm TCTI ignores them), raw
// ESAPI and tpm2-tools through tpm2-tss's TCTI: both open one TCP connection per TPM command.

/// The command line of the `tpm` benchmark.
struct TPMBenchmarkOptions {
    /// Signatures per measured batch, for every in-process signer.
    var signatures = 200
    /// Interleaved rounds; each signer keeps its best.
    var rounds = 10
    /// tpm2_sign processes per batch (nil: signatures / 10).
    var toolSignatures: Int?
    /// The signers measured, by tag, in the order of each round (default: all, in the table's order).
    var signers: [String] = []

    static let usage = "usage: keystone-benchmarks tpm [--signatures N] [--rounds R] [--tool-signatures M] "
        + "[--signers esapi,device,token,tpm2_sign,reload]"

    /// Parses the arguments after `tpm`; nil (after printing why and the usage) when they are wrong.
    static func parse(_ arguments: ArraySlice<String>) -> TPMBenchmarkOptions? {
        var options = TPMBenchmarkOptions()
        let parsed = parseBenchmarkOptions(arguments, command: "tpm", usage: usage,
                                           valued: ["--signatures", "--rounds", "--tool-signatures", "--signers"]) { name, value in
            if name == "--signers" {
                let known = ["esapi", "device", "token", "tpm2_sign", "reload"]
                let signers = (value ?? "").split(separator: ",").map(String.init)
                guard !signers.isEmpty, signers.allSatisfy(known.contains) else {
                    return "--signers takes some of \(known.joined(separator: ",")), separated by commas"
                }
                options.signers = signers
                return nil
            }
            guard let number = positiveNumber(value) else { return "\(name) takes a positive number" }
            switch name {
            case "--signatures": options.signatures = number
            case "--rounds": options.rounds = number
            default: options.toolSignatures = number
            }
            return nil
        }
        return parsed ? options : nil
    }
}

/// Runs the benchmark and prints its table; the process's exit status (0 also when skipped, with the reason).
func runTPMBenchmarks(_ options: TPMBenchmarkOptions) -> Int32 {
    #if os(Linux)
    if let reason = SwtpmFixture.unavailableReason {
        print("TPM benchmark skipped: \(reason)")
        return 0
    }
    for tool in ["tpm2_createprimary", "tpm2_load", "tpm2_sign", "tpm2_flushcontext"]
    where !FileManager.default.isExecutableFile(atPath: "/usr/bin/\(tool)") {
        print("TPM benchmark skipped: /usr/bin/\(tool) is missing (apt-get install tpm2-tools)")
        return 0
    }
    let fixture: SwtpmFixture
    do {
        fixture = try SwtpmFixture.start()
    } catch {
        print("TPM benchmark: swtpm did not start: \(error)")
        return 1
    }
    defer { fixture.stop() }
    do {
        let bench = try TPMBench(fixture: fixture, options: options)
        try bench.run()
        bench.printTable()
        return bench.failures.isEmpty ? 0 : 1
    } catch {
        print("TPM benchmark failed: \(error)")
        return 1
    }
    #else
    print("TPM benchmark skipped: it needs Linux (KeychainTPM, libtss2-dev).")
    return 0
    #endif
}

#if os(Linux)

/// The signers compared, in the order of the table.
enum TPMSigner: String, CaseIterable {
    case esapi = "raw ESAPI (C; key loaded once)"
    case device = "Keystone TPMDevice"
    case token = "Keystone TPMSecureEnclaveToken"
    case tool = "tpm2_sign (1 process per signature)"
    case reloading = "raw ESAPI, Load+Sign+Flush per signature"

    var tag: String {
        switch self {
        case .esapi: "esapi"
        case .device: "device"
        case .token: "token"
        case .tool: "tpm2_sign"
        case .reloading: "reload"
        }
    }
}

struct TPMBenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One measured batch.
struct TPMBatch {
    /// Signatures per second.
    var rate: Double
    /// This process's CPU time per signature (user and system), in microseconds; nil for tpm2_sign.
    var cpuMicroseconds: Double?
    /// This process's resident memory after the batch minus before it, in bytes; nil for tpm2_sign.
    var residentGrowth: Int?
}

final class TPMBench {
    let fixture: SwtpmFixture
    let options: TPMBenchmarkOptions
    /// The signing key, as Keystone stores it.
    let key: TPMKey
    /// Its marshalled TPM2B_PUBLIC and TPM2B_PRIVATE (the Keystone envelope's contents).
    let publicPart: [UInt8]
    let privatePart: [UInt8]
    let digest = SHA256.hash(data: Data("Keystone TPM benchmark".utf8))
    /// Best batch per signer.
    private(set) var best: [TPMSigner: TPMBatch] = [:]
    /// Every batch's rate per signer.
    private(set) var rates: [TPMSigner: [Double]] = [:]
    private(set) var failures: [String] = []
    /// The largest resident set of a tpm2-tools process (ru_maxrss of the children), in bytes.
    private(set) var toolPeakResident = 0

    var toolSignatures: Int { options.toolSignatures ?? max(1, options.signatures / 10) }

    init(fixture: SwtpmFixture, options: TPMBenchmarkOptions) throws {
        self.fixture = fixture
        self.options = options
        key = try TPMDevice(tcti: fixture.tcti).createKey(.signing)  // the device is released at once
        // The envelope: "KSTK", version, usage, 2 reserved bytes | TPM2B_PUBLIC | TPM2B_PRIVATE | CRC-32.
        let blob = [UInt8](key.dataRepresentation)
        let body = Array(blob[8..<(blob.count - 4)])
        guard body.count > 2 else { throw TPMBenchError("the key's data representation is too short") }
        let publicLength = 2 + (Int(body[0]) << 8 | Int(body[1]))
        guard publicLength < body.count else { throw TPMBenchError("the key's data representation is malformed") }
        publicPart = Array(body[..<publicLength])
        privatePart = Array(body[publicLength...])
        try Data(publicPart).write(to: URL(fileURLWithPath: "\(fixture.directory)/key.pub"))
        try Data(privatePart).write(to: URL(fileURLWithPath: "\(fixture.directory)/key.priv"))
        try Data(digest).write(to: URL(fileURLWithPath: "\(fixture.directory)/digest.bin"))
    }

    func run() throws {
        print("TPM: ECDSA P-256 signatures per second, one swtpm and one key for every signer")
        print("\(options.signatures) signatures per batch (tpm2_sign: \(toolSignatures) processes); best of "
            + "\(options.rounds) interleaved rounds\n")
        let signers = options.signers.isEmpty ? TPMSigner.allCases
            : options.signers.compactMap { tag in TPMSigner.allCases.first { $0.tag == tag } }
        for round in 0..<options.rounds {
            var line = "  round \(round + 1):"
            for offset in 0..<signers.count {
                let signer = signers[(round + offset) % signers.count]
                do {
                    let batch = try measure(signer)
                    if batch.rate > (best[signer]?.rate ?? 0) { best[signer] = batch }
                    rates[signer, default: []].append(batch.rate)
                    line += " \(signer.tag) " + String(format: "%.1f/s;", batch.rate)
                } catch {
                    let message = "\(signer.tag), round \(round + 1): \(error)"
                    failures.append(message)
                    line += " \(signer.tag) FAILED;"
                }
                // Every signer flushes what it loaded: the next one starts with all of swtpm's object slots free.
                let left = try transientHandles()
                if !left.isEmpty {
                    failures.append("\(signer.tag), round \(round + 1): left \(left.count) transient objects loaded")
                    _ = try fixture.run("/usr/bin/tpm2_flushcontext", ["-T", fixture.tcti, "-t"])
                }
            }
            print(line)
        }
        print("")
    }

    private func measure(_ signer: TPMSigner) throws -> TPMBatch {
        switch signer {
        case .esapi, .reloading: return try measureESAPI(reloading: signer == .reloading)
        case .device: return try measureDevice()
        case .token: return try measureToken()
        case .tool: return try measureTool()
        }
    }

    /// Times `body` (which makes `count` signatures): rate, CPU per signature, resident growth.
    private func timed(_ count: Int, _ body: () throws -> Void) rethrows -> TPMBatch {
        let residentBefore = residentBytes()
        let cpuBefore = Self.processCPU()
        let started = DispatchTime.now().uptimeNanoseconds
        try body()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        let cpu = Self.processCPU() - cpuBefore
        return TPMBatch(rate: Double(count) / seconds, cpuMicroseconds: cpu * 1e6 / Double(count),
                        residentGrowth: residentBytes() - residentBefore)
    }

    private func check(_ rs: [UInt8], _ signer: TPMSigner) throws {
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: rs)
        guard key.signingPublicKey.isValidSignature(signature, for: digest) else {
            throw TPMBenchError("\(signer.tag)'s signature does not verify")
        }
    }

    private func measureESAPI(reloading: Bool) throws -> TPMBatch {
        var error = [CChar](repeating: 0, count: 256)
        var handle: OpaquePointer?
        let parts = publicPart + privatePart
        guard ks_baseline_tpm_open(fixture.tcti, parts, parts.count, &handle, &error, Int32(error.count)) == 0,
              let handle else {
            throw TPMBenchError("opening raw ESAPI: \(TPMBench.message(error))")
        }
        defer { ks_baseline_tpm_close(handle) }
        let input = [UInt8](digest)
        var rs = [UInt8](repeating: 0, count: 64)
        let count = Int32(options.signatures)
        let sign = reloading ? ks_baseline_tpm_sign_reloading : ks_baseline_tpm_sign
        guard sign(handle, input, 5, &rs, &error, Int32(error.count)) == 5 else {
            throw TPMBenchError("raw ESAPI: \(TPMBench.message(error))")
        }
        var made: Int32 = 0
        let batch = timed(options.signatures) { made = sign(handle, input, count, &rs, &error, Int32(error.count)) }
        guard made == count else { throw TPMBenchError("raw ESAPI made \(made) of \(count) signatures: \(TPMBench.message(error))") }
        try check(rs, reloading ? .reloading : .esapi)
        return batch
    }

    private func measureDevice() throws -> TPMBatch {
        let device = try TPMDevice(tcti: fixture.tcti)
        let blob = key.dataRepresentation
        for _ in 0..<5 { _ = try device.signature(digest: digest, with: blob) }
        var last: P256.Signing.ECDSASignature?
        let batch = try timed(options.signatures) {
            for _ in 0..<options.signatures { last = try device.signature(digest: digest, with: blob) }
        }
        guard let last, key.signingPublicKey.isValidSignature(last, for: digest) else {
            throw TPMBenchError("TPMDevice's signature does not verify")
        }
        withExtendedLifetime(device) {}
        return batch
    }

    private func measureToken() throws -> TPMBatch {
        let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
        let blob = key.dataRepresentation
        let input = Data(digest)
        for _ in 0..<5 { _ = try token.signature(digest: input, with: blob) }
        var last = Data()
        let batch = try timed(options.signatures) {
            for _ in 0..<options.signatures { last = try token.signature(digest: input, with: blob) }
        }
        try check([UInt8](last), .token)
        withExtendedLifetime(token) {}
        return batch
    }

    /// tpm2-tools: the primary key and the key loaded once (the primary flushed again), then one tpm2_sign per
    /// signature with the key's handle; everything flushed after.
    private func measureTool() throws -> TPMBatch {
        let directory = fixture.directory
        func tool(_ name: String, _ arguments: [String]) throws {
            let result = try fixture.run("/usr/bin/\(name)", ["-T", fixture.tcti] + arguments)
            guard result.status == 0 else { throw TPMBenchError("\(name) failed: \(result.output)") }
        }
        try tool("tpm2_createprimary", ["-C", "o", "-G", "ecc256:aes128cfb", "-g", "sha256", "-a",
                                        "restricted|decrypt|fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda",
                                        "-c", "\(directory)/primary.ctx"])
        let primary = try transientHandles()
        guard primary.count == 1 else { throw TPMBenchError("expected one transient object, found \(primary)") }
        try tool("tpm2_load", ["-C", primary[0], "-u", "\(directory)/key.pub", "-r", "\(directory)/key.priv",
                               "-c", "\(directory)/key.ctx"])
        try tool("tpm2_flushcontext", [primary[0]])
        defer { _ = try? fixture.run("/usr/bin/tpm2_flushcontext", ["-T", fixture.tcti, "-t"]) }
        let loaded = try transientHandles()
        guard loaded.count == 1 else { throw TPMBenchError("expected the key alone loaded, found \(loaded)") }
        let arguments = ["-T", fixture.tcti, "-c", loaded[0], "-g", "sha256", "-d", "-f", "plain",
                         "-o", "\(directory)/sig.der", "\(directory)/digest.bin"]
        guard Self.spawn("/usr/bin/tpm2_sign", arguments) == 0 else {  // warm-up: the executable in the page cache
            throw TPMBenchError("tpm2_sign failed: \(try fixture.run("/usr/bin/tpm2_sign", arguments).output)")
        }
        var failed = 0
        var batch = timed(toolSignatures) {
            for _ in 0..<toolSignatures where Self.spawn("/usr/bin/tpm2_sign", arguments) != 0 { failed += 1 }
        }
        guard failed == 0 else { throw TPMBenchError("\(failed) of \(toolSignatures) tpm2_sign processes failed") }
        let der = try Data(contentsOf: URL(fileURLWithPath: "\(directory)/sig.der"))
        guard key.signingPublicKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: der), for: digest)
        else { throw TPMBenchError("tpm2_sign's signature does not verify") }
        var usage = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &usage)
        toolPeakResident = max(toolPeakResident, usage.ru_maxrss * 1024)
        batch.cpuMicroseconds = nil
        batch.residentGrowth = nil
        return batch
    }

    /// The TPM's transient object handles (`tpm2_getcap handles-transient`).
    private func transientHandles() throws -> [String] {
        let result = try fixture.run(SwtpmFixture.getcapPath, ["-T", fixture.tcti, "handles-transient"])
        guard result.status == 0 else { throw TPMBenchError("tpm2_getcap failed: \(result.output)") }
        return result.output.split(separator: "\n").compactMap { line in
            line.split(separator: " ").last.map(String.init).flatMap { $0.hasPrefix("0x80") ? $0 : nil }
        }
    }

    /// Runs a program (its output discarded) and waits for it with waitpid: its exit status, or -1.
    static func spawn(_ path: String, _ arguments: [String]) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, path, &actions, nil, argv, environ) == 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return -1 }
        }
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
    }

    /// The NUL-terminated message a C function wrote into `buffer`.
    static func message(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// This process's CPU seconds (user and system).
    static func processCPU() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    /// The table: per signer the best rate, its ratio to raw ESAPI and to tpm2_sign, the median rate, this process's
    /// CPU time per signature and resident growth over the best batch, and Keystone's goal (≥ 0.9× raw ESAPI, best
    /// against best).
    func printTable() {
        var rows: [[String]] = [["signer", "signatures/s", "× raw ESAPI", "× tpm2_sign", "median/s (× raw ESAPI)",
                                 "client CPU/signature", "RSS growth", "goal (≥ 0.9× raw ESAPI)"]]
        func median(_ signer: TPMSigner) -> Double? {
            guard let all = rates[signer]?.sorted(), !all.isEmpty else { return nil }
            return all.count % 2 == 1 ? all[all.count / 2] : (all[all.count / 2 - 1] + all[all.count / 2]) / 2
        }
        for signer in TPMSigner.allCases {
            guard let batch = best[signer] else { continue }
            let raw = best[.esapi].map { batch.rate / $0.rate }
            let tool = best[.tool].map { batch.rate / $0.rate }
            var goal = "—"
            if signer == .device || signer == .token {
                // The exact ratio when the goal is missed, so a 0.896× shown as 0.90× is not mistaken for met.
                goal = raw.map { $0 >= 0.9 ? "met" : String(format: "NOT met (%.3f×)", $0) } ?? "?"
            }
            let memory = batch.residentGrowth.map { String(format: "%+.0f KiB", Double($0) / 1024) }
                ?? (toolPeakResident > 0 ? String(format: "%.1f MiB peak per process", Double(toolPeakResident) / 1_048_576) : "—")
            let medianText = median(signer).map { value in
                String(format: "%.1f", value) + (median(.esapi).map { String(format: " (%.2f×)", value / $0) } ?? "")
            } ?? "—"
            rows.append([signer.rawValue, String(format: "%.1f", batch.rate), raw.map { String(format: "%.2f×", $0) } ?? "—",
                         tool.map { String(format: "%.1f×", $0) } ?? "—", medianText,
                         batch.cpuMicroseconds.map { String(format: "%.0f µs", $0) } ?? "—", memory, goal])
        }
        let widths = (0..<rows[0].count).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            let line = zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
            print(line.replacingOccurrences(of: " +$", with: "", options: .regularExpression))
        }
        if !failures.isEmpty {
            print("\nFailures:")
            for failure in failures { print("  " + failure) }
        }
    }
}

#endif
