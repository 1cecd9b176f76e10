#if os(Linux)
import Crypto
import Foundation
import KeychainTPM
import Swtpm
import Testing

/// The signing worker (Tests/TPMSignWorker), built next to the test bundle by `swift build --build-tests`.
let tpmSignWorkerPath: String? = {
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent("TPMSignWorker").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    return nil
}()

/// Concurrent signers through a REAL tpm2-abrmd in front of ONE swtpm. The signers run in child processes
/// (Tests/TPMSignWorker) whose environment names the broker (`DBUS_SESSION_BUS_ADDRESS` of a private session bus,
/// `KEYSTONE_TPM_TCTI=tabrmd:bus_type=session`): the tabrmd TCTI finds its bus only there, and this process, shared by
/// every suite, must not `setenv`.
///
/// The keys are made by this process directly on swtpm before the broker starts (their public keys come from the
/// TPM, not from the worker); every signature the workers print is verified with swift-crypto (what Keystone's
/// `SecKeyVerifySignature` uses) and a sample with `openssl dgst -verify`. Size: `KEYSTONE_TPM_CONCURRENT_SIGNATURES`
/// per worker (default 320: 16 threads × 20), as the direct suite ("TPM concurrency on swtpm").
@Suite("tpm2-abrmd: concurrent signers through the access broker on swtpm",
       .enabled(if: TPMBrokerFixture.unavailableReason == nil,
                Comment(rawValue: TPMBrokerFixture.unavailableReason ?? "swtpm, tpm2-tools, openssl, tpm2-abrmd, its TCTI and dbus-daemon are installed")))
struct TPMBrokerConcurrencyTests {
    static let signers = 16
    static var rounds: Int { max(1, concurrentSignatureCount / signers) }

    // Every check runs in the test's own task: `withSwtpm`'s body runs on a thread of its own, where Swift Testing
    // cannot tell which test an expectation belongs to; the body returns what it found instead.

    @Test("16 threads of one process, each with its own connection to tpm2-abrmd (half the keys with a TPM-enforced PIN): 0 failures, every signature verifies")
    func sixteenConnections() async throws {
        let worker = try #require(tpmSignWorkerPath, "build TPMSignWorker first (swift build --build-tests --traits NIO)")
        let problems = try await withSwtpm { fixture in
            let keys = try BrokerSigningKeys.make(on: fixture, count: Self.signers)
            let broker = try TPMBrokerFixture.start(swtpm: fixture)
            defer { broker.stop() }
            let run = try SignerRun.start(worker: worker, client: "A", mode: "devices", keysFile: keys.file,
                                          rounds: Self.rounds, directory: fixture.directory,
                                          environment: broker.clientEnvironment()).wait()
            return broker.withLog(run.problems(keys: keys.publicKeys, rounds: Self.rounds, tcti: broker.tcti)
                + (try keys.verifyWithOpenSSL(run, on: fixture)) + broker.problems)
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "; "))")
    }

    @Test("two processes at once, each signing from 16 threads through its Secure Enclave token (KEYSTONE_TPM_TCTI names tpm2-abrmd): both succeed, every signature verifies")
    func twoClients() async throws {
        let worker = try #require(tpmSignWorkerPath, "build TPMSignWorker first (swift build --build-tests --traits NIO)")
        let problems = try await withSwtpm { fixture in
            let keys = try BrokerSigningKeys.make(on: fixture, count: Self.signers)
            let broker = try TPMBrokerFixture.start(swtpm: fixture)
            defer { broker.stop() }
            // Both started before either is waited for: they sign at the same time.
            let started = try ["A", "B"].map { client in
                try SignerRun.start(worker: worker, client: client, mode: "token", keysFile: keys.file, rounds: Self.rounds,
                                    directory: fixture.directory, environment: broker.clientEnvironment())
            }
            var problems: [String] = []
            for run in try started.map({ try $0.wait() }) {
                problems += (run.problems(keys: keys.publicKeys, rounds: Self.rounds, tcti: broker.tcti)
                    + (try keys.verifyWithOpenSSL(run, on: fixture))).map { "client \(run.client): \($0)" }
            }
            return broker.withLog(problems + broker.problems)
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "; "))")
    }

    @Test("a worker whose session bus has no tpm2-abrmd: every signer fails with the TPM unavailable, and the check reports it")
    func noBroker() async throws {
        let worker = try #require(tpmSignWorkerPath, "build TPMSignWorker first (swift build --build-tests --traits NIO)")
        let (status, problems) = try await withSwtpm { fixture in
            let keys = try BrokerSigningKeys.make(on: fixture, count: 2)
            var environment = ProcessInfo.processInfo.environment
            environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(fixture.directory)/no-such-bus"
            environment["KEYSTONE_TPM_TCTI"] = "tabrmd:bus_type=session"
            let run = try SignerRun.start(worker: worker, client: "A", mode: "devices", keysFile: keys.file, rounds: 3,
                                          directory: fixture.directory, environment: environment).wait()
            return (run.status, run.problems(keys: keys.publicKeys, rounds: 3, tcti: "tabrmd:bus_type=session"))
        }
        #expect(status == 1)
        #expect(problems.contains { $0.contains("6 failures") && $0.contains("unavailable") }, "\(problems)")
        #expect(problems.contains { $0.contains("0 of 6 signatures verify") }, "\(problems)")
    }
}

/// Keys made directly on swtpm (its device closed after), half of them with a PIN, and the worker's key file.
struct BrokerSigningKeys {
    let publicKeys: [P256.Signing.PublicKey]
    let file: String

    static func make(on fixture: SwtpmFixture, count: Int) throws -> BrokerSigningKeys {
        var publicKeys: [P256.Signing.PublicKey] = []
        var lines: [String] = []
        // Released before the broker connects: swtpm serves one connection at a time.
        do {
            let device = try TPMDevice(tcti: fixture.tcti)
            for index in 0..<count {
                let pin = index % 2 == 0 ? nil : "pin-\(index)"
                let key = try device.createKey(.signing, authorization: pin.map(TPMDevice.authorizationValue(pin:)))
                publicKeys.append(key.signingPublicKey)
                lines.append("\(key.dataRepresentation.base64EncodedString()) \(pin ?? "-")")
            }
        }
        let file = "\(fixture.directory)/broker-keys-\(UUID().uuidString)"
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        return BrokerSigningKeys(publicKeys: publicKeys, file: file)
    }

    /// `openssl dgst -sha256 -verify` on the last signature of signers 0, 1 (a PIN key) and the last one: what is
    /// wrong (empty: the three verify).
    func verifyWithOpenSSL(_ run: SignerRun, on fixture: SwtpmFixture) throws -> [String] {
        var problems: [String] = []
        let last = run.signatures.filter { $0.round == run.rounds - 1 }
        let sample = [0, 1, publicKeys.count - 1].compactMap { signer in last.first { $0.signer == signer } }
        if sample.count != 3 { problems.append("\(sample.count) of 3 signatures to check with openssl") }
        for signature in sample {
            let base = "\(fixture.directory)/openssl-\(run.client)-\(signature.signer)"
            try publicKeys[signature.signer].pemRepresentation.write(toFile: "\(base).pem", atomically: true, encoding: .utf8)
            try P256.Signing.ECDSASignature(rawRepresentation: signature.raw).derRepresentation
                .write(to: URL(fileURLWithPath: "\(base).der"))
            try run.message(signer: signature.signer, round: signature.round).write(to: URL(fileURLWithPath: "\(base).msg"))
            let verified = try fixture.run(SwtpmFixture.opensslPath, [
                "dgst", "-sha256", "-verify", "\(base).pem", "-signature", "\(base).der", "\(base).msg",
            ])
            if verified.status != 0 || !verified.output.contains("Verified OK") {
                problems.append("signer \(signature.signer): openssl dgst -verify: \(verified.output)")
            }
        }
        return problems
    }
}

/// One worker process: started, then waited for and its output parsed.
struct SignerRun {
    struct Signature {
        let signer: Int
        let round: Int
        let raw: Data
    }

    struct Failure {
        let signer: Int
        let round: Int
        let rc: UInt32
        let text: String
    }

    final class Started {
        let process: Process
        let client: String
        let rounds: Int
        let outputPath: String
        let errorPath: String

        init(process: Process, client: String, rounds: Int, outputPath: String, errorPath: String) {
            self.process = process
            self.client = client
            self.rounds = rounds
            self.outputPath = outputPath
            self.errorPath = errorPath
        }

        func wait() throws -> SignerRun {
            process.waitUntilExit()
            let output = try String(contentsOfFile: outputPath, encoding: .utf8)
            let standardError = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
            return SignerRun(client: client, rounds: rounds, status: process.terminationStatus, output: output,
                             standardError: standardError)
        }
    }

    let client: String
    let rounds: Int
    let status: Int32
    let tcti: String?
    let signatures: [Signature]
    let failures: [Failure]
    /// The worker's own totals ("end SIGNATURES FAILURES"), nil when it printed none.
    let totals: (signatures: Int, failures: Int)?
    let standardError: String

    init(client: String, rounds: Int, status: Int32, output: String, standardError: String) {
        self.client = client
        self.rounds = rounds
        self.status = status
        self.standardError = standardError
        var tcti: String?
        var signatures: [Signature] = []
        var failures: [Failure] = []
        var totals: (Int, Int)?
        for line in output.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 4).map(String.init)
            switch fields.first {
            case "tcti": tcti = fields.dropFirst().joined(separator: " ")
            case "sig" where fields.count == 4:
                if let signer = Int(fields[1]), let round = Int(fields[2]), let raw = Self.bytes(hex: fields[3]) {
                    signatures.append(Signature(signer: signer, round: round, raw: raw))
                }
            case "fail" where fields.count >= 4:
                failures.append(Failure(signer: Int(fields[1]) ?? -1, round: Int(fields[2]) ?? -1,
                                        rc: UInt32(fields[3], radix: 16) ?? 0, text: fields.count > 4 ? fields[4] : ""))
            case "end" where fields.count == 3:
                if let s = Int(fields[1]), let f = Int(fields[2]) { totals = (s, f) }
            default: break
            }
        }
        self.tcti = tcti
        self.signatures = signatures
        self.failures = failures
        self.totals = totals
    }

    static func start(worker: String, client: String, mode: String, keysFile: String, rounds: Int, directory: String,
                      environment: [String: String]) throws -> Started {
        let base = "\(directory)/worker-\(client)-\(UUID().uuidString)"
        guard FileManager.default.createFile(atPath: "\(base).out", contents: nil),
              FileManager.default.createFile(atPath: "\(base).err", contents: nil),
              let output = FileHandle(forWritingAtPath: "\(base).out"), let error = FileHandle(forWritingAtPath: "\(base).err")
        else { throw WorkerFailure(description: "cannot create \(base).out") }
        defer {
            try? output.close()
            try? error.close()
        }
        let process = Process()
        // A worker that hangs is killed (and its missing "end" line fails the test) rather than hanging the suite:
        // after 2 minutes, and a second more per 2 rounds for the big runs (swtpm signs a few hundred a second).
        process.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        process.arguments = ["-s", "KILL", String(120 + rounds / 2), worker, "--keys", keysFile, "--rounds", String(rounds),
                             "--client", client, "--mode", mode]
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = error
        try process.run()
        return Started(process: process, client: client, rounds: rounds, outputPath: "\(base).out", errorPath: "\(base).err")
    }

    /// The message the worker signs for signer `signer`, round `round`.
    func message(signer: Int, round: Int) -> Data { Data("client \(client) signer \(signer) round \(round)".utf8) }

    /// What is wrong with the run (empty: every signer signed every round, each signature verifies with its key, no
    /// failure, through `tcti`). Failures are counted by kind: TPM_RC_RETRY (and YIELDED, TESTING), object or session
    /// memory (TPM_RC_OBJECT_MEMORY, SESSION_MEMORY, MEMORY), and the rest.
    func problems(keys: [P256.Signing.PublicKey], rounds: Int, tcti expectedTCTI: String) -> [String] {
        var problems: [String] = []
        if tcti != expectedTCTI { problems.append("the worker used the TCTI \(tcti ?? "(none printed)"), not \(expectedTCTI)") }
        let expected = keys.count * rounds
        var seen = Set<[Int]>()
        var verified = 0
        var invalid: [String] = []
        for signature in signatures where seen.insert([signature.signer, signature.round]).inserted {
            guard keys.indices.contains(signature.signer), let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature.raw),
                  keys[signature.signer].isValidSignature(parsed, for: message(signer: signature.signer, round: signature.round))
            else {
                invalid.append("signer \(signature.signer) round \(signature.round)")
                continue
            }
            verified += 1
        }
        if verified != expected {
            problems.append("\(verified) of \(expected) signatures verify (\(signatures.count) printed, \(invalid.count) invalid: \(invalid.prefix(3)))")
        }
        let reported = totals?.failures ?? failures.count
        if !failures.isEmpty || reported != 0 {
            let codes = failures.map { $0.rc & 0xFFF }
            let retry = codes.filter { [0x922, 0x908, 0x90A].contains($0) }.count
            let memory = codes.filter { [0x902, 0x903, 0x904].contains($0) }.count
            let first = failures.prefix(3).map { "signer \($0.signer) round \($0.round): \($0.text)" }
            problems.append("\(reported) failures (of the \(failures.count) failure lines, TPM retry: \(retry), object/session memory: \(memory), other: \(failures.count - retry - memory)); first: \(first)")
        }
        if totals == nil { problems.append("the worker printed no totals (killed or crashed? exit status \(status)); standard error: \(standardError.suffix(800))") }
        if status != 0 { problems.append("exit status \(status); standard error: \(standardError.suffix(800))") }
        return problems
    }

    static func bytes(hex: String) -> Data? {
        guard hex.count % 2 == 0 else { return nil }
        var data = Data(capacity: hex.count / 2)
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            data.append(byte)
            index = next
        }
        return data
    }
}

struct WorkerFailure: Error, CustomStringConvertible {
    let description: String
}

extension TPMBrokerFixture {
    /// What is wrong with the broker after a run (empty: it still runs), with the end of its log.
    var problems: [String] { isRunning ? [] : ["tpm2-abrmd exited"] }

    /// `problems` and, when there are some, the end of the broker's log.
    func withLog(_ problems: [String]) -> [String] {
        problems.isEmpty ? [] : problems + ["tpm2-abrmd's log: \(((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "").suffix(1000))"]
    }
}
#endif
