#if NIO && !canImport(Darwin) && os(Linux)
import Foundation
import Testing
import EtcdCluster
import KeychainEngine
import KeychainEtcd
import KeychainTPM
import Swtpm

@Suite("etcd keychain: machines that unlock with their TPM", .enabled(if: etcdMissing == nil && SwtpmFixture.unavailableReason == nil,
       Comment(rawValue: etcdMissing ?? SwtpmFixture.unavailableReason ?? "etcd and swtpm are installed")))
struct EtcdMachineEnrollmentTests {
    @Test("an enrolled machine unlocks with its TPM and no password; another TPM, an unenrolled or removed machine cannot")
    func enrollment() throws {
        let cluster = try EtcdTestCluster.shared()
        let configuration = try EtcdConfiguration(url: cluster.url(name: "tpm-\(UUID().uuidString)"), environment: [:])
        let machineA = try SwtpmFixture.start()
        defer { machineA.stop() }
        let machineB = try SwtpmFixture.start()
        defer { machineB.stop() }
        let tokenA = TPMSecureEnclaveToken(tcti: machineA.tcti)
        let tokenB = TPMSecureEnclaveToken(tcti: machineB.tcti)

        let keychain = try EtcdKeychain.create(configuration, password: "fleet-password")
        try KeychainEngine(storage: keychain).add(genp("svc", "a", [Key.valueData: .data(Data("sealed-to-a".utf8))]))
        try keychain.enrollMachine(tokenA, machineID: "machine-a")

        keychain.lock()
        #expect(status { try keychain.enrollMachine(tokenB, machineID: "machine-b") } == Status.interactionNotAllowed)
        try keychain.unlock(with: tokenA, machineID: "machine-a")
        #expect(keychain.lockState == .unlocked)
        #expect(try KeychainEngine(storage: keychain).copyMatching(genp("svc", "a", [Key.returnData: .bool(true)]))?.data == Data("sealed-to-a".utf8))

        keychain.lock()
        // Machine A's entry under another machine's TPM (a copied machine id, a cleared TPM): errSecDecode.
        #expect(status { try keychain.unlock(with: tokenB, machineID: "machine-a") } == Status.decode)
        // A machine that never enrolled: errSecAuthFailed, and it stays locked.
        #expect(status { try keychain.unlock(with: tokenB, machineID: "machine-b") } == Status.authFailed)
        #expect(keychain.lockState == .locked)

        // The cluster holds no host name: only a digest of the machine id.
        let listed = try cluster.etcdctl(["get", "--prefix", "keystone/v1/\(configuration.name)/machine/", "--keys-only"])
        #expect(!listed.isEmpty && !listed.contains("machine-a"))

        try keychain.removeMachine("machine-a")
        #expect(status { try keychain.unlock(with: tokenA, machineID: "machine-a") } == Status.authFailed)
        #expect(status { try keychain.removeMachine("machine-a") } == Status.itemNotFound)
        try keychain.unlock(password: "fleet-password")
        #expect(keychain.lockState == .unlocked)
    }
}
#endif
