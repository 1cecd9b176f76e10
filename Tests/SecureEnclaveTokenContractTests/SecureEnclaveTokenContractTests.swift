import Foundation
import KeychainEngine
import KeystoneTesting
import Testing
#if os(Linux)
import KeychainTPM
import Swtpm
#endif

/// `SecureEnclaveToken`'s contract, checked clause by clause (``ContractClause``) on every conformer: KeystoneTesting's
/// emulated enclave everywhere, and on Linux the TPM token on a real software TPM (a fresh swtpm per clause; skipped,
/// with the reason, where swtpm is not installed).
@Suite("SecureEnclaveToken contract")
struct SecureEnclaveTokenContractTests {
    @Test("The emulated Secure Enclave keeps the clause", arguments: ContractClause.allCases)
    func emulated(_ clause: ContractClause) async throws {
        let findings = Findings()
        try await onOwnThread {
            let enclave = EmulatedSecureEnclave()
            let subject = TokenUnderTest(token: enclave, makeOther: { EmulatedSecureEnclave() }, lose: { enclave.makeUnavailable() })
            try clause.check(subject, findings)
        }
        findings.report()
    }

    #if os(Linux)
    @Test("The TPM token on swtpm keeps the clause",
          .enabled(if: SwtpmFixture.unavailableReason == nil,
                   Comment(rawValue: SwtpmFixture.unavailableReason ?? "swtpm, tpm2-tools and openssl are installed")),
          arguments: ContractClause.allCases)
    func tpm(_ clause: ContractClause) async throws {
        let findings = Findings()
        try await withSwtpm { fixture in
            // Other TPMs this clause starts, stopped when it ends.
            let others = Locked<[SwtpmFixture]>([])
            defer { for other in others.current { other.stop() } }
            let subject = TokenUnderTest(
                token: TPMSecureEnclaveToken(tcti: fixture.tcti),
                makeOther: {
                    let other = try SwtpmFixture.start()
                    others.withLock { $0.append(other) }
                    return TPMSecureEnclaveToken(tcti: other.tcti)
                },
                lose: { try fixture.killTPM() },
                knownIssues: [])
            try clause.check(subject, findings)
        }
        findings.report()
    }
    #endif
}
