// A child process of the tpm2-abrmd concurrency tests (Tests/KeychainTPMTests/TPMBrokerConcurrencyTests.swift): one
// client of the access broker, signing with TPM keys from several threads at once. It runs in an environment the
// test made (DBUS_SESSION_BUS_ADDRESS of a private session bus, KEYSTONE_TPM_TCTI naming the tabrmd TCTI), which the
// shared test process itself must not set.
//
// usage: TPMSignWorker --keys FILE --rounds N --client NAME --mode devices|token
//
// FILE has one key a line: the key's data representation in base64, a space, and its PIN (or "-" for none). One
// thread per key signs SHA-256("client NAME signer I round R") for R in 0..<N:
// - devices: each thread opens its own TPMDevice on TPMDevice.defaultTCTI() (one broker connection per thread: the
//   broker queues the commands and swaps the objects of 16 connections in and out of swtpm's 3 slots);
// - token: every thread signs through the process's token, TPMSecureEnclaveToken.standard() (the Secure Enclave token
//   an app gets from KEYSTONE_TPM_TCTI: one connection, Keystone serializes the threads on it).
// The threads open their device first, then start signing together.
//
// Output (standard output, once every thread ended), one line each:
//   tcti VALUE                          the TCTI configuration it used
//   sig I R HEX                         a signature (raw r || s, 64 bytes) of signer I, round R
//   fail I R RC DESCRIPTION             a failure (RC: the TSS2 response code in hex, 0 when none was reported)
//   end SIGNATURES FAILURES
// Exit status: 0 without failures, 1 with some, 2 for a usage error. The worker does not verify signatures: the test
// does, with public keys it got from the TPM itself.
#if os(Linux)
import Crypto
import Foundation
import KeychainEngine
import KeychainTPM
import Synchronization

func argument(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func usageFailure(_ message: String) -> Never {
    FileHandle.standardError.write(Data("TPMSignWorker: \(message)\n".utf8))
    exit(2)
}

/// The TSS2 response code in an error's description ("[TSS2_RC 0x922]"), or 0.
func responseCode(in text: String) -> UInt32 {
    guard let range = text.range(of: "TSS2_RC 0x") else { return 0 }
    return UInt32(text[range.upperBound...].prefix { $0.isHexDigit }, radix: 16) ?? 0
}

struct SignerKey: Sendable {
    let blob: Data
    let pin: String?
}

/// Signs with the device opened per thread, or with the process's token.
enum Signer: Sendable {
    case device(TPMDevice)
    case token(TPMSecureEnclaveToken)

    func sign(_ digest: Data, with key: SignerKey) throws -> Data {
        switch self {
        case .device(let device):
            try device.signature(digest: digest, with: key.blob,
                                 authorization: key.pin.map(TPMDevice.authorizationValue(pin:))).rawRepresentation
        case .token(let token):
            try token.signature(digest: digest, with: key.blob, pin: key.pin)
        }
    }
}

func failureLine(_ signer: Int, _ round: Int, _ error: any Error) -> String {
    let rc = (error as? TPMError)?.rc ?? responseCode(in: "\(error)")
    let text = "\(error)".replacingOccurrences(of: "\n", with: " ")
    return "fail \(signer) \(round) \(String(rc, radix: 16)) \(text)"
}

func run() -> Int32 {
    guard let keysPath = argument("--keys"), let rounds = argument("--rounds").flatMap(Int.init), rounds > 0,
          let client = argument("--client"), let mode = argument("--mode"), mode == "devices" || mode == "token"
    else { usageFailure("usage: TPMSignWorker --keys FILE --rounds N --client NAME --mode devices|token") }
    guard let text = try? String(contentsOfFile: keysPath, encoding: .utf8) else { usageFailure("cannot read \(keysPath)") }
    let keys: [SignerKey] = text.split(separator: "\n").map { line in
        let fields = line.split(separator: " ")
        guard fields.count == 2, let blob = Data(base64Encoded: String(fields[0])) else { usageFailure("bad key line") }
        return SignerKey(blob: blob, pin: fields[1] == "-" ? nil : String(fields[1]))
    }
    let tcti = TPMDevice.defaultTCTI()
    var lines = ["tcti \(tcti ?? "(none: the default device)")"]
    let token = mode == "token" ? TPMSecureEnclaveToken.standard() : nil
    if mode == "token" && token == nil { usageFailure("no token: KEYSTONE_SECURE_ENCLAVE=none") }

    let results = Mutex<[String]>([])
    let signatures = Atomic<Int>(0)
    let failures = Atomic<Int>(0)
    let ready = DispatchGroup()
    let done = DispatchGroup()
    let go = DispatchSemaphore(value: 0)
    for index in keys.indices {
        ready.enter()
        done.enter()
        let thread = Thread {
            defer { done.leave() }
            let signer: Signer?
            var mine: [String] = []
            if let token {
                signer = .token(token)
            } else {
                do {
                    signer = .device(try TPMDevice(tcti: tcti))
                } catch {
                    signer = nil
                    mine.append(failureLine(index, -1, error))
                    failures.add(rounds, ordering: .relaxed)
                }
            }
            ready.leave()
            go.wait()
            if let signer {
                for round in 0..<rounds {
                    let digest = Data(SHA256.hash(data: Data("client \(client) signer \(index) round \(round)".utf8)))
                    do {
                        let raw = try signer.sign(digest, with: keys[index])
                        mine.append("sig \(index) \(round) \(raw.map { String(format: "%02x", $0) }.joined())")
                        signatures.add(1, ordering: .relaxed)
                    } catch {
                        mine.append(failureLine(index, round, error))
                        failures.add(1, ordering: .relaxed)
                    }
                }
            }
            results.withLock { $0 += mine }
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    ready.wait()
    for _ in keys.indices { go.signal() }
    done.wait()
    lines += results.withLock { $0 }
    let failed = failures.load(ordering: .relaxed)
    lines.append("end \(signatures.load(ordering: .relaxed)) \(failed)")
    FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
    return failed == 0 ? 0 : 1
}

exit(run())
#else
print("TPMSignWorker needs Linux")
#endif
