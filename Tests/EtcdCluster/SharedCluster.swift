import Foundation

extension EtcdTestCluster {
    private static let sharedCluster = Result<EtcdTestCluster, any Error> { try EtcdTestCluster.start(Options(members: 3, maxTxnOps: 4096)) }

    /// One 3-member cluster for the whole test process, started on first use and stopped when the process exits
    /// (its watchdog): the storage contract and the tests that need no member killed share it, each with a keychain
    /// of its own name. It allows transactions of 4,096 operations (`--max-txn-ops`), as the contract's
    /// thousand-row transaction needs; etcd's default, 128, is what the fault tests' own clusters keep.
    ///
    /// - Throws: why the cluster could not start.
    public static func shared() throws -> EtcdTestCluster { try sharedCluster.get() }

    /// `etcd://` URL of this cluster's endpoints (in member order, or the members given) for the keychain `name`.
    public func url(name: String, members: [Int]? = nil, query: String = "") -> String {
        let chosen = members.map { $0.map { clientEndpoints[$0] } } ?? clientEndpoints
        return (tlsFiles == nil ? "etcd://" : "etcds://") + chosen.joined(separator: ",") + "/" + name + (query.isEmpty ? "" : "?" + query)
    }
}
