import Testing
import KeychainEngine
import KeychainStorageTesting

/// Runs `clause` on `factory`; a clause the factory cannot run (a capability it lacks) is a skip that says why, so
/// no clause drops out of the report unseen.
func run(_ clause: StorageContract.Clause, on factory: StorageFactory) throws {
    if let reason = clause.reasonNotApplicable(to: factory) {
        Issue.record(Comment(rawValue: "skipped, clause not run: \(reason)"), severity: .warning)
        try Test.cancel(Comment(rawValue: "clause not run: \(reason)"))
    }
    try StorageContract.run(clause, on: factory)
}

@Suite("Storage contract: every backend Keystone ships keeps every clause")
struct StorageContractTests {
    @Test("memory storage", arguments: StorageContract.clauses)
    func memory(_ clause: StorageContract.Clause) throws {
        try run(clause, on: Backends.memory)
    }

    @Test("keychain file", arguments: StorageContract.clauses)
    func keychainFile(_ clause: StorageContract.Clause) throws {
        try run(clause, on: Backends.keychainFile)
    }

    @Test("Secret Service (a private gnome-keyring per test)",
          .enabled(if: Backends.secretServiceUnavailableReason == nil,
                   Comment(rawValue: "Secret Service backend skipped: \(Backends.secretServiceUnavailableReason ?? "")")),
          arguments: StorageContract.clauses)
    func secretService(_ clause: StorageContract.Clause) throws {
        try run(clause, on: Backends.secretService)
    }

    @Test("etcd cluster (3 members, a fresh keychain name per test)",
          .enabled(if: Backends.etcdUnavailableReason == nil,
                   Comment(rawValue: "etcd backend skipped: \(Backends.etcdUnavailableReason ?? "")")),
          arguments: StorageContract.clauses)
    func etcd(_ clause: StorageContract.Clause) throws {
        try run(clause, on: Backends.etcd)
    }
}
