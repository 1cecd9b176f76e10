#if NIO
import Foundation
import KeychainEngine
import KeychainSealing

/// What `keystone doctor` reports about an etcd keychain: each configured endpoint, the cluster's members and
/// leader, each member's health, the keychain's header, and whether this machine can use it now.
///
/// Gathered by ``diagnose(_:quotaBytes:)``, which never throws: every failure is recorded next to what it concerns. Nothing is
/// written to the cluster and no secret is read or kept (the header holds none).
public struct EtcdDiagnosis: Sendable {
    /// One configured endpoint, as it answered `/v3/maintenance/status`.
    public struct Endpoint: Sendable {
        /// `host:port`.
        public var endpoint: String
        /// Whether it answered.
        public var reachable: Bool
        /// Why it did not answer (nil when it did).
        public var error: String?
        /// The etcd server version, e.g. "3.4.23".
        public var version: String?
        /// The member ID of the member behind the endpoint.
        public var memberID: UInt64?
        /// The size of its database file, in bytes.
        public var dbSize: Int64?
        /// The leader it knows (nil: none or no answer).
        public var leader: UInt64?
        /// Its raft term.
        public var raftTerm: Int64?
        /// The bytes of its database in use (nil: not reported); ``dbSize`` minus what a defragmentation frees.
        public var dbSizeInUse: Int64?
        /// The alarms it reports raised ("NOSPACE", "CORRUPT").
        public var alarms: [String] = []
    }

    /// The backend quota the database sizes are compared with, in bytes: ``quotaBytes`` given to
    /// ``diagnose(_:quotaBytes:)``, else etcd's default (`--quota-backend-bytes`, 2 GiB).
    ///
    /// Decision: etcd's status does not report the quota (only the size), and its alarm list only says once it is
    /// reached; so the operator states it (`keystone doctor` reads `KEYSTONE_ETCD_QUOTA_BYTES`) and etcd's default is
    /// assumed otherwise. A NOSPACE alarm is reported whatever the quota is.
    public var quotaBytes: Int64 = EtcdDiagnosis.defaultQuotaBytes
    /// Whether ``quotaBytes`` was given (false: etcd's default assumed).
    public var quotaConfigured = false
    /// etcd's default `--quota-backend-bytes`: 2 GiB.
    public static let defaultQuotaBytes: Int64 = 2 * 1024 * 1024 * 1024
    /// The share of the quota at which ``quotaWarning`` is raised.
    public static let quotaWarningRatio = 0.8

    /// The largest database of a reachable member.
    public var largestDBSize: Int64? { endpoints.compactMap(\.dbSize).max() }

    /// Whether a member's database is at or above 80% of ``quotaBytes`` (etcd then soon refuses every write).
    public var quotaWarning: Bool {
        guard let size = largestDBSize, quotaBytes > 0 else { return false }
        return Double(size) >= Double(quotaBytes) * Self.quotaWarningRatio
    }

    /// Whether a member reports etcd's NOSPACE alarm (the quota was reached: every write is refused).
    public var noSpaceAlarm: Bool { endpoints.contains { $0.alarms.contains("NOSPACE") } }

    /// One member of the cluster's member list, and whether it answers `status` on its client URLs.
    public struct Member: Sendable {
        /// The member ID.
        public var id: UInt64
        /// Its name (empty for a member added but never started).
        public var name: String
        /// Its client URLs, as it advertises them.
        public var clientURLs: [String]
        /// Whether it answered `status` on one of its client URLs.
        public var healthy: Bool
        /// Why it did not (nil when healthy).
        public var error: String?
        /// Whether it is the leader.
        public var isLeader: Bool
    }

    /// The keychain on the cluster.
    public struct Keychain: Sendable {
        /// Whether the cluster has a keychain of that name (nil: unknown, see ``error``).
        public var exists: Bool?
        /// Why the keychain could not be opened (no such keychain, a damaged header, the cluster's errors).
        public var error: String?
        /// The `OSStatus` of ``error``.
        public var status: Int32?
        /// The header's format.
        public var headerFormat: Int?
        /// Seconds after an unlock when a machine's keys drop to after-first-unlock; nil: never.
        public var lockAfterTimeout: TimeInterval?
        /// Whether its password is empty (its items are then readable by whoever can read the cluster).
        public var emptyPassword: Bool?
        /// Its lock state for this user on this machine (unlocked through the unlock cache, or locked).
        public var lockState: LockState?
        /// Whether an unlock cache carries unlocks between processes here: the kernel keyring, or the unlock agent where
        /// the keyring is refused (running, or started on demand by `keystone unlock-keychain`).
        public var unlockCacheAvailable: Bool
    }

    /// The configuration examined (its ``EtcdConfiguration/url`` never holds the password).
    public var configuration: EtcdConfiguration
    /// Why no client could be made (a TLS file that cannot be read); everything else is then empty.
    public var clientError: String?
    /// The configured endpoints, in the URL's order.
    public var endpoints: [Endpoint] = []
    /// The member list (empty when it could not be read: see ``membersError``).
    public var members: [Member] = []
    /// Why the member list could not be read.
    public var membersError: String?
    /// The leader's member ID, as the reachable endpoints report it (nil: none known).
    public var leaderID: UInt64?
    /// The leader's name from the member list (nil when unknown).
    public var leaderName: String?
    /// The keychain.
    public var keychain: Keychain

    /// Whether the keychain can be used from here now: the cluster answers, has a leader, and the keychain exists.
    /// (A locked keychain is usable: it needs `unlock-keychain`.)
    public var isUsable: Bool {
        clientError == nil && endpoints.contains { $0.reachable } && leaderID != nil && keychain.exists == true && keychain.error == nil
    }

    /// Examines the cluster and the keychain `configuration` names. Blocks the calling thread (each call within the
    /// configuration's timeout): never call it on Swift's cooperative pool or an event loop.
    ///
    /// Never throws: every failure is recorded in the result.
    ///
    /// - Parameters:
    ///   - configuration: the cluster's endpoints and the keychain's name.
    ///   - quotaBytes: the cluster's `--quota-backend-bytes` when known (nil: etcd's default, 2 GiB).
    public static func diagnose(_ configuration: EtcdConfiguration, quotaBytes: Int64? = nil) -> EtcdDiagnosis {
        var diagnosis = EtcdDiagnosis(configuration: configuration,
                                      keychain: Keychain(unlockCacheAvailable: UnlockCacheStatus.current.isShared))
        if let quotaBytes, quotaBytes > 0 {
            diagnosis.quotaBytes = quotaBytes
            diagnosis.quotaConfigured = true
        }
        let client: EtcdClient
        do {
            client = try EtcdClient(configuration: configuration)
        } catch {
            diagnosis.clientError = Self.describe(error)
            return diagnosis
        }
        defer { client.shutdown() }

        for endpoint in configuration.endpoints {
            do {
                let status = try client.status(of: endpoint)
                diagnosis.endpoints.append(Endpoint(endpoint: endpoint.description, reachable: true, version: status.version,
                                                    memberID: status.memberID, dbSize: status.dbSize,
                                                    leader: status.leader == 0 ? nil : status.leader, raftTerm: status.raftTerm,
                                                    dbSizeInUse: status.dbSizeInUse == 0 ? nil : status.dbSizeInUse,
                                                    alarms: Self.alarms(in: status.errors)))
            } catch {
                diagnosis.endpoints.append(Endpoint(endpoint: endpoint.description, reachable: false, error: Self.describe(error)))
            }
        }
        // The leader of the highest term any endpoint reports.
        diagnosis.leaderID = diagnosis.endpoints.filter { $0.leader != nil }.max { ($0.raftTerm ?? 0) < ($1.raftTerm ?? 0) }?.leader

        do {
            let members = try client.members()
            var statusByEndpoint: [String: Endpoint] = [:]
            for endpoint in diagnosis.endpoints { statusByEndpoint[endpoint.endpoint] = endpoint }
            for member in members {
                var healthy = false
                var errors: [String] = []
                for url in member.clientURLs {
                    guard let endpoint = Self.endpoint(fromClientURL: url) else {
                        errors.append("\(url): not a client URL this client can reach")
                        continue
                    }
                    // An endpoint already asked answers for itself; others are asked now.
                    if let known = statusByEndpoint[endpoint.description] {
                        if known.reachable, known.memberID == member.id { healthy = true; break }
                        if let error = known.error { errors.append(error); continue }
                    }
                    do {
                        let status = try client.status(of: endpoint)
                        if status.memberID == member.id {
                            healthy = true
                            if diagnosis.leaderID == nil, status.leader != 0 { diagnosis.leaderID = status.leader }
                            break
                        }
                        errors.append("\(endpoint) answered as member \(String(status.memberID, radix: 16))")
                    } catch {
                        errors.append(Self.describe(error))
                    }
                }
                if member.clientURLs.isEmpty { errors.append("it advertises no client URL (added but never started?)") }
                diagnosis.members.append(Member(id: member.id, name: member.name, clientURLs: member.clientURLs, healthy: healthy,
                                                error: healthy ? nil : errors.joined(separator: "; "), isLeader: false))
            }
            for index in diagnosis.members.indices where diagnosis.members[index].id == diagnosis.leaderID {
                diagnosis.members[index].isLeader = true
                diagnosis.leaderName = diagnosis.members[index].name
            }
        } catch {
            diagnosis.membersError = Self.describe(error)
        }

        do {
            let keyspace = EtcdKeyspace(name: configuration.name)
            let found = try EtcdKeychain.etcd { try client.range(keyspace.meta) }
            if let kv = found.kvs.first {
                diagnosis.keychain.exists = true
                let header = try EtcdKeychainHeader.decode(kv.value)
                diagnosis.keychain.headerFormat = header.format
                diagnosis.keychain.lockAfterTimeout = header.lockAfterTimeout
                diagnosis.keychain.emptyPassword = header.emptyPassword
                let keychain = try EtcdKeychain.open(configuration)
                diagnosis.keychain.lockState = keychain.lockState
            } else {
                diagnosis.keychain.exists = false
                diagnosis.keychain.status = Status.noSuchKeychain
                diagnosis.keychain.error = "there is no keychain named \(configuration.name) on \(configuration.endpointList)"
            }
        } catch let error as EngineError {
            diagnosis.keychain.status = error.status
            diagnosis.keychain.error = error.reason.isEmpty ? Status.message(for: error.status) : error.reason
        } catch {
            diagnosis.keychain.error = Self.describe(error)
        }
        return diagnosis
    }

    /// The alarm names in etcd's status errors ("memberID:8185… alarm:NOSPACE " → "NOSPACE").
    static func alarms(in errors: [String]) -> [String] {
        errors.compactMap { error in
            guard let range = error.range(of: "alarm:") else { return nil }
            let name = error[range.upperBound...].trimmingCharacters(in: .whitespaces)
            return name.isEmpty ? nil : name
        }
    }

    /// `host:port` of a member's client URL (`http://127.0.0.1:2379`, `https://[::1]:2379`, `unix://…`: nil).
    static func endpoint(fromClientURL url: String) -> EtcdConfiguration.Endpoint? {
        guard let scheme = url.range(of: "://") else { return nil }
        guard ["http", "https"].contains(url[..<scheme.lowerBound].lowercased()) else { return nil }
        var authority = url[scheme.upperBound...]
        if let slash = authority.firstIndex(of: "/") { authority = authority[..<slash] }
        return try? EtcdConfiguration.parseEndpoint(authority)
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as EtcdError: error.description
        case let error as EngineError: error.reason.isEmpty ? Status.message(for: error.status) : error.reason
        default: String(describing: error)
        }
    }
}
#endif
