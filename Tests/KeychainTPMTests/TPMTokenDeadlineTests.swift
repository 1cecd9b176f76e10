#if os(Linux)
import Crypto
import Dispatch
import Foundation
import KeychainEngine
import KeychainTPM
import Swtpm
import Testing

/// A watchdog, not a measure of speed: a call that has not returned after this long never will.
private let watchdogSeconds = 60

/// The Secure Enclave token's own deadline (`TPMSecureEnclaveToken(tcti:timeout:)`) against a REAL software TPM that
/// stops answering (swtpm under SIGSTOP).
@Suite("The TPM token's deadline on swtpm",
       .enabled(if: SwtpmFixture.unavailableReason == nil,
                Comment(rawValue: SwtpmFixture.unavailableReason ?? "swtpm, tpm2-tools and openssl are installed")))
struct TPMTokenDeadlineTests {
    @Test("A token made with a 5 s timeout gives up a stopped swtpm with errSecNotAvailable naming its own deadline (not the device's 30 s default); once swtpm goes on, the next call opens the TPM again and signs")
    func tokenTimeout() async throws {
        try await withSwtpm { fixture in
            // 5 s: far more than swtpm takes on a loaded machine (tests start many at once), far less than 30 s.
            let token = TPMSecureEnclaveToken(tcti: fixture.tcti, timeout: .seconds(5))
            #expect(token.timeout == .seconds(5))
            let key = try token.createKey(.signing)
            let hashed = SHA256.hash(data: Data("deadline".utf8))
            let digest = Data(hashed)
            _ = try token.signature(digest: digest, with: key.dataRepresentation)

            fixture.suspend()
            // The call runs on a thread of its own so that a hang fails the test after the watchdog instead of
            // hanging the run.
            let outcome = Locked<Result<Data, EngineError>?>(nil)
            let returned = DispatchSemaphore(value: 0)
            let blob = key.dataRepresentation
            Thread {
                let result = Result { () throws(EngineError) in try token.signature(digest: digest, with: blob) }
                outcome.withLock { $0 = result }
                returned.signal()
            }.start()
            let finished = returned.wait(timeout: .now() + .seconds(watchdogSeconds)) == .success
            fixture.resume()
            guard finished else {
                Issue.record("the signature on a stopped swtpm had not returned after \(watchdogSeconds) s: a hang")
                return
            }
            switch outcome.current {
            case .success?: Issue.record("a stopped TPM signed")
            case .failure(let error)?:
                #expect(error.status == Status.notAvailable, "\(error)")
                #expect(error.reason.contains("within 5000 ms"), "the reason names another deadline: \(error.reason)")
            case nil: Issue.record("no outcome recorded")
            }

            let signature = try token.signature(digest: digest, with: key.dataRepresentation)
            let publicKey = try P256.Signing.PublicKey(x963Representation: key.publicKeyX963)
            #expect(publicKey.isValidSignature(try P256.Signing.ECDSASignature(rawRepresentation: signature), for: hashed))
        }
    }
}

#endif
