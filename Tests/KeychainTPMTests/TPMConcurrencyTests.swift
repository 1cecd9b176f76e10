#if os(Linux)
import Crypto
import Foundation
import KeychainEngine
import KeychainTPM
import Swtpm
import Synchronization
import Testing

/// How many signatures the concurrency test makes in all: `KEYSTONE_TPM_CONCURRENT_SIGNATURES` (the figure
/// is 10,000: about a minute on swtpm), else 320 (a few seconds, for CI).
let concurrentSignatureCount: Int = {
    if let value = ProcessInfo.processInfo.environment["KEYSTONE_TPM_CONCURRENT_SIGNATURES"], let count = Int(value),
       count > 0 { return count }
    return 320
}()

/// Sixteen signers on ONE swtpm (no resource manager, 3 object slots, one connection): through one token, whose
/// device serializes the TPM commands of every thread. Each signer has its own key, so the single cached key keeps
/// changing (a TPM2_Load and a flush for most signatures: the worst case for object slots).
@Suite("TPM concurrency on swtpm",
       .enabled(if: SwtpmFixture.unavailableReason == nil,
                Comment(rawValue: SwtpmFixture.unavailableReason ?? "swtpm, tpm2-tools and openssl are installed")))
struct TPMConcurrencyTests {
    @Test("16 threads signing through one token, each with its own key (and half of them with a PIN): 0 failures, every signature verifies, nothing left loaded")
    func sixteenSigners() async throws {
        // The body runs on the fixture's thread: it returns what it saw, and the test asserts in its own task (an
        // expectation recorded on another thread is not attributed to this test).
        let (seen, verifiedCount, perSigner, signers, handles) = try await withSwtpm { fixture in
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti)
            let signers = 16
            let keys = try (0..<signers).map { index in
                index % 2 == 0 ? try token.createKey(.signing) : try token.createKey(.signing, pin: "pin-\(index)")
            }
            let perSigner = max(1, concurrentSignatureCount / signers)
            let failures = Mutex<[String]>([])
            let verified = Atomic<Int>(0)
            let group = DispatchGroup()
            for index in 0..<signers {
                group.enter()
                let thread = Thread {
                    defer { group.leave() }
                    let key = keys[index]
                    let publicKey = try! P256.Signing.PublicKey(x963Representation: key.publicKeyX963)
                    for round in 0..<perSigner {
                        let message = Data("signer \(index) round \(round)".utf8)
                        do {
                            let raw = try token.signature(digest: Data(SHA256.hash(data: message)), with: key.dataRepresentation,
                                                          pin: index % 2 == 0 ? nil : "pin-\(index)")
                            let signature = try P256.Signing.ECDSASignature(rawRepresentation: raw)
                            if publicKey.isValidSignature(signature, for: message) {
                                verified.add(1, ordering: .relaxed)
                            } else {
                                failures.withLock { $0.append("signer \(index) round \(round): does not verify") }
                            }
                        } catch {
                            failures.withLock { $0.append("signer \(index) round \(round): \(error)") }
                        }
                    }
                }
                thread.stackSize = 1 << 20
                thread.start()
            }
            group.wait()
            // What the device holds afterwards, for the check that the TPM still has room.
            let handles = try fixture.tpm2("tpm2_getcap", ["handles-transient"]).output
            return (failures.withLock { $0 }, verified.load(ordering: .relaxed), perSigner, signers, handles)
        }
        #expect(seen.isEmpty, "\(seen.count) failures, first: \(seen.prefix(3))")
        #expect(verifiedCount == perSigner * signers)
        // The TPM still has room: another client can load its own objects (what the device holds is at most the
        // primary key and one cached key).
        #expect(handles.split(separator: "\n").filter { $0.contains("0x80") }.count <= 2, "\(handles)")
    }
}
#endif
