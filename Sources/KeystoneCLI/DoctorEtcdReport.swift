import Foundation
import KeychainEngine
import KeychainFile
import KeychainSealing
#if NIO && !canImport(Darwin)
import KeychainEtcd
#endif

// `keystone doctor`'s report on an etcd keychain.

/// An etcd keychain: ``EtcdDiagnosis`` as findings and JSON.
struct EtcdReport {
    /// The URL examined (the canonical one when it parses; never a password).
    var url: String
    var findings: [DoctorFinding] = []
    var json: [String: Any] = [:]
    /// No problem blocks its use.
    var usable: Bool { !findings.contains { $0.severity == .problem } }

    static func hex(_ id: UInt64) -> String { String(id, radix: 16) }

    static func size(_ bytes: Int64) -> String {
        if bytes < 1024 { return "\(bytes) bytes" }
        if bytes < 1024 * 1024 { return String(format: "%.1f KiB", Double(bytes) / 1024) }
        return String(format: "%.1f MiB", Double(bytes) / 1_048_576)
    }

    static func examine(_ spec: String) -> EtcdReport {
        var report = EtcdReport(url: spec)
        #if NIO && !canImport(Darwin)
        let configuration: EtcdConfiguration
        do {
            configuration = try EtcdConfiguration(url: spec)
        } catch {
            let reason = (error as? EngineError)?.reason ?? "\(error)"
            report.findings = [DoctorFinding(severity: .problem, check: "url", detail: reason,
                                             fix: "write etcd://host:port,…/NAME[?user=NAME] (password in KEYSTONE_ETCD_PASSWORD) or etcds://…/NAME?ca=…&cert=…&key=…")]
            report.json = ["url": spec, "endpoints": [Any](), "members": [Any](), "membersError": NSNull(), "leader": NSNull(),
                           "keychain": NSNull(), "findings": report.findings.map(\.json)]
            return report
        }
        report.url = configuration.url
        let diagnosis = EtcdDiagnosis.diagnose(configuration, quotaBytes: quotaFromEnvironment())
        report.add(diagnosis)
        #else
        report.findings = [DoctorFinding(severity: .problem, check: "support", detail: "this keystone was built without etcd support (the package's NIO trait)",
                                         fix: "build keystone with `swift build --traits NIO`")]
        report.json = ["url": spec, "endpoints": [Any](), "members": [Any](), "membersError": NSNull(), "leader": NSNull(),
                       "keychain": NSNull(), "findings": report.findings.map(\.json)]
        #endif
        return report
    }

    #if NIO && !canImport(Darwin)
    private mutating func add(_ diagnosis: EtcdDiagnosis) {
        var findings: [DoctorFinding] = []
        if let clientError = diagnosis.clientError {
            findings.append(DoctorFinding(severity: .problem, check: "client", detail: clientError, fix: "check the ca=, cert= and key= files of the URL"))
        }
        let reachable = diagnosis.endpoints.filter(\.reachable).count
        for endpoint in diagnosis.endpoints {
            if endpoint.reachable {
                let detail = "\(endpoint.endpoint): reachable, etcd \(endpoint.version ?? "?"), member \(endpoint.memberID.map(Self.hex) ?? "?"), database \(endpoint.dbSize.map(Self.size) ?? "?")"
                findings.append(DoctorFinding(severity: .ok, check: "endpoint", detail: detail, fix: nil))
            } else {
                findings.append(DoctorFinding(severity: reachable == 0 ? .problem : .warning, check: "endpoint",
                                              detail: "\(endpoint.endpoint): unreachable: \(endpoint.error ?? "no answer")",
                                              fix: "check that the etcd member there runs and that this machine reaches it (firewall, address, TLS)"))
            }
        }
        findings += Self.quotaFindings(diagnosis)
        if let error = diagnosis.membersError {
            findings.append(DoctorFinding(severity: .problem, check: "members", detail: "the member list could not be read: \(error)",
                                          fix: "check that a majority of the etcd members run"))
        } else if diagnosis.clientError == nil {
            let names = diagnosis.members.map { "\($0.name.isEmpty ? "(unstarted)" : $0.name) (\(Self.hex($0.id)))" }
            findings.append(DoctorFinding(severity: .ok, check: "members", detail: "\(diagnosis.members.count): " + names.joined(separator: ", "), fix: nil))
        }
        if let leader = diagnosis.leaderID {
            findings.append(DoctorFinding(severity: .ok, check: "leader", detail: "\(diagnosis.leaderName ?? "unknown name") (\(Self.hex(leader)))", fix: nil))
        } else if diagnosis.clientError == nil {
            findings.append(DoctorFinding(severity: .problem, check: "leader", detail: "no member reachable from here knows a leader",
                                          fix: "start enough members for a quorum (a majority of the member list)"))
        }
        let healthy = diagnosis.members.filter(\.healthy).count
        let quorum = diagnosis.members.count / 2 + 1
        for member in diagnosis.members {
            let name = member.name.isEmpty ? Self.hex(member.id) : member.name
            if member.healthy {
                findings.append(DoctorFinding(severity: .ok, check: "member \(name)", detail: "healthy (answers status at \(member.clientURLs.joined(separator: ", ")))\(member.isLeader ? ", leader" : "")", fix: nil))
            } else {
                findings.append(DoctorFinding(severity: healthy < quorum ? .problem : .warning, check: "member \(name)",
                                              detail: "down: \(member.error ?? "no answer")" + (healthy >= quorum ? " (the \(healthy) others keep a quorum)" : " (no quorum: \(healthy) of \(diagnosis.members.count) answer)"),
                                              fix: "restart it (etcd keeps its data directory), or replace it with etcdctl member remove/add"))
            }
        }
        let keychain = diagnosis.keychain
        let configuration = diagnosis.configuration
        if keychain.exists == true, keychain.error == nil {
            let timeout = keychain.lockAfterTimeout.map { "locks after \(wholeSeconds($0)) s" } ?? "no lock timeout"
            findings.append(DoctorFinding(severity: .ok, check: "keychain",
                                          detail: "\(configuration.name) exists: header format \(keychain.headerFormat.map(String.init) ?? "?"), \(timeout)", fix: nil))
        } else if keychain.exists == false {
            findings.append(DoctorFinding(severity: .problem, check: "keychain", detail: keychain.error ?? "\(configuration.name) does not exist",
                                          fix: "create it with `keystone create-keychain \(url)`"))
        } else if diagnosis.clientError == nil {
            findings.append(DoctorFinding(severity: .problem, check: "keychain", detail: "\(configuration.name) could not be read: \(keychain.error ?? "unknown")",
                                          fix: keychain.status == Status.authFailed || keychain.status == Status.wrPerm
                                            ? "check ?user= and KEYSTONE_ETCD_PASSWORD, and the user's role on the keychain's keys"
                                            : "check that a majority of the etcd members run"))
        }
        if keychain.emptyPassword == true {
            findings.append(DoctorFinding(severity: .warning, check: "password", detail: "empty: anyone who can read the cluster can read the items",
                                          fix: "set a password with `keystone set-keychain-password \(url)`"))
        }
        switch keychain.lockState {
        case .unlocked?:
            let how = keychain.emptyPassword == true ? "its password is empty" : keychain.unlockCacheAvailable ? "through this machine's unlock cache (the kernel keyring, or the unlock agent where the keyring is refused)" : "in this process"
            findings.append(DoctorFinding(severity: .ok, check: "this machine", detail: "unlocked for you here (\(how)): this machine can use it now", fix: nil))
        case .lockedAfterFirstUnlock?:
            findings.append(DoctorFinding(severity: .note, check: "this machine", detail: "locked after the timeout (only after-first-unlock items are available here)",
                                          fix: "run `keystone unlock-keychain \(url)`"))
        case .locked?:
            findings.append(DoctorFinding(severity: .note, check: "this machine", detail: "locked for you on this machine",
                                          fix: "run `keystone unlock-keychain \(url)` (the keychain password, at the prompt or on standard input)"))
        case nil:
            break
        }
        if !keychain.unlockCacheAvailable {
            findings.append(DoctorFinding(severity: .note, check: "unlock cache", detail: "unavailable: " + UnlockCacheStatus.current.summary, fix: nil))
        }
        self.findings = findings
        json = [
            "url": url,
            "clientError": diagnosis.clientError ?? NSNull(),
            "endpoints": diagnosis.endpoints.map { endpoint -> [String: Any] in
                ["endpoint": endpoint.endpoint, "reachable": endpoint.reachable, "error": endpoint.error ?? NSNull(),
                 "version": endpoint.version ?? NSNull(), "memberID": endpoint.memberID.map(Self.hex) ?? NSNull(),
                 "dbSize": endpoint.dbSize.map { Int($0) } ?? NSNull(), "leader": endpoint.leader.map(Self.hex) ?? NSNull()]
            },
            "members": diagnosis.members.map { member -> [String: Any] in
                ["id": Self.hex(member.id), "name": member.name, "clientURLs": member.clientURLs, "healthy": member.healthy,
                 "error": member.error ?? NSNull(), "leader": member.isLeader]
            },
            "membersError": diagnosis.membersError ?? NSNull(),
            "quota": ["bytes": Int(diagnosis.quotaBytes), "configured": diagnosis.quotaConfigured,
                      "largestDBSize": diagnosis.largestDBSize.map { Int($0) } ?? NSNull(),
                      "warning": diagnosis.quotaWarning, "noSpaceAlarm": diagnosis.noSpaceAlarm] as [String: Any],
            "leader": diagnosis.leaderID.map { ["id": Self.hex($0), "name": diagnosis.leaderName ?? NSNull()] as [String: Any] } ?? NSNull(),
            "keychain": [
                "exists": keychain.exists ?? NSNull(), "error": keychain.error ?? NSNull(), "status": keychain.status.map { Int($0) } ?? NSNull(),
                "headerFormat": keychain.headerFormat ?? NSNull(), "lockAfterTimeout": keychain.lockAfterTimeout ?? NSNull(),
                "emptyPassword": keychain.emptyPassword ?? NSNull(), "lockState": keychain.lockState?.rawValue ?? NSNull(),
                "unlockCacheAvailable": keychain.unlockCacheAvailable,
            ] as [String: Any],
            "findings": findings.map(\.json),
        ]
    }

    /// `KEYSTONE_ETCD_QUOTA_BYTES`: the cluster's `--quota-backend-bytes`, which etcd does not report (nil: unset or
    /// not a positive number of bytes; etcd's default, 2 GiB, is then assumed).
    static func quotaFromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Int64? {
        environment["KEYSTONE_ETCD_QUOTA_BYTES"].flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }.flatMap { $0 > 0 ? $0 : nil }
    }

    /// The database against the backend quota: a problem when etcd raised NOSPACE, a warning from 80% of the quota.
    static func quotaFindings(_ diagnosis: EtcdDiagnosis) -> [DoctorFinding] {
        let quota = "\(size(diagnosis.quotaBytes))" + (diagnosis.quotaConfigured ? " (KEYSTONE_ETCD_QUOTA_BYTES)" : " (etcd's default --quota-backend-bytes; set KEYSTONE_ETCD_QUOTA_BYTES to the cluster's)")
        let recovery = "raise --quota-backend-bytes on every member (restart them), or compact (`etcdctl compact REVISION`), defragment (`etcdctl defrag --cluster`), then `etcdctl alarm disarm`; run members with --auto-compaction-mode=periodic --auto-compaction-retention=1h"
        if diagnosis.noSpaceAlarm {
            let members = diagnosis.endpoints.filter { $0.alarms.contains("NOSPACE") }.map(\.endpoint).joined(separator: ", ")
            return [DoctorFinding(severity: .problem, check: "quota",
                                  detail: "etcd raised its NOSPACE alarm (\(members)): the database reached the quota and every change is refused (errSecQuotaExceeded); items stay readable",
                                  fix: recovery)]
        }
        guard let largest = diagnosis.largestDBSize else { return [] }
        let percent = Int((Double(largest) / Double(max(1, diagnosis.quotaBytes)) * 100).rounded(.down))
        let inUse = diagnosis.endpoints.compactMap(\.dbSizeInUse).max().map { ", \(size($0)) in use" } ?? ""
        if diagnosis.quotaWarning {
            return [DoctorFinding(severity: .warning, check: "quota",
                                  detail: "the largest member database is \(size(largest))\(inUse): \(percent)% of the quota \(quota); at 100% etcd refuses every change",
                                  fix: recovery)]
        }
        return [DoctorFinding(severity: .ok, check: "quota", detail: "the largest member database is \(size(largest))\(inUse): \(percent)% of the quota \(quota)", fix: nil)]
    }
    #endif
}
