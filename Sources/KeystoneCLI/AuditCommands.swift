import ArgumentParser
import Foundation
import KeychainEngine
#if NIO && !canImport(Darwin)
import KeychainEtcd
#endif

// `keystone audit`: an etcd keychain's tamper-evident audit log (print, verify, trim).

/// `keystone audit [list] KEYCHAIN`, `keystone audit verify KEYCHAIN`, `keystone audit trim --keep N KEYCHAIN`.
struct Audit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Print, verify or trim an etcd keychain's audit log.",
        discussion: """
        Every change to an etcd keychain writes an audit entry in the same etcd transaction (a change whose entry \
        cannot be written is not made): the time, the machine (a digest of its /etc/machine-id, as enroll-machine \
        names it), the user (uid and login name), the operation and the item's digest (never a name or a secret). \
        Entries are chained by hash and MACed under a key only machines that unlocked the keychain hold. \
        `keystone audit URL` prints them; `keystone audit verify URL` checks the chain, the MACs and the HEAD and \
        exits 1 naming each entry removed, reordered, edited or truncated; `keystone audit trim --keep N URL` \
        removes all but the last N entries behind a signed checkpoint (entries are etcd keys: etcd's compaction \
        never removes them).
        """,
        subcommands: [AuditList.self, AuditVerify.self, AuditTrim.self],
        defaultSubcommand: AuditList.self)
}

/// The keychain argument of an audit verb: an etcd keychain, else a usage error.
private func auditedKeychain(_ argument: String?, verb: String) throws -> String {
    let path = argument.map(resolveKeychain) ?? ToolConfig.defaultKeychain
    guard KeychainSpec.isEtcd(path) else {
        throw UsageFailure(message: "keystone: audit \(verb): \(path) is not an etcd keychain (only etcd keychains keep an audit log)")
    }
    return path
}

struct AuditList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Print the audit log: counter, time, machine, user, operation and item digest of each entry.",
        discussion: "Needs no password: entries hold no secret. Use `keystone audit verify` to check them.")
    @Flag(name: .customLong("json"), help: "Print one JSON object per entry, one per line.") var json = false
    @Argument(help: "The etcd keychain: etcd://host:port,…/NAME.") var keychain: String?

    mutating func run() throws {
        #if NIO && !canImport(Darwin)
        let path = try auditedKeychain(keychain, verb: "list")
        let etcd = try openEtcd(path, function: "audit \(path)")
        let report = try call("audit \(path)") { try etcd.auditLog(verify: false) }
        if let checkpoint = report.checkpointCounter, !json {
            writeOut("(entries up to \(checkpoint) were trimmed)\n")
        }
        for entry in report.entries {
            writeOut((json ? AuditFormat.json(entry) : AuditFormat.line(entry)) + "\n")
        }
        #else
        throw UsageFailure(message: "keystone: audit: this build has no etcd keychains (build keystone with the package's NIO trait: swift build --traits NIO)")
        #endif
    }
}

struct AuditVerify: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check the whole audit log and the HEAD; exit 1 naming each entry removed, reordered, edited or truncated.",
        discussion: """
        Needs the keychain unlocked on this machine (the MAC key). Prints `intact: …` and exits 0, or one `problem:` \
        line per finding and exits 1.
        """)
    @Argument(help: "The etcd keychain: etcd://host:port,…/NAME.") var keychain: String?

    mutating func run() throws {
        #if NIO && !canImport(Darwin)
        let path = try auditedKeychain(keychain, verb: "verify")
        let etcd = try openEtcd(path, function: "audit verify \(path)")
        let report = try call("audit verify \(path)") {
            do { return try etcd.auditLog(verify: true) } catch let error as EngineError {
                throw EngineError(error.status, withUnlockHint(error.reason, status: error.status, keychain: path))
            }
        }
        let range = report.entries.isEmpty ? "no entries" : "entries \(report.entries.first!.counter) to \(report.entries.last!.counter)"
        let trimmed = report.checkpointCounter.map { ", trimmed up to \($0) (checkpoint verified)" } ?? ""
        let head = report.headCounter.map { "HEAD at \($0)" } ?? "no HEAD"
        if report.isIntact {
            writeOut("intact: \(report.entries.count) \(report.entries.count == 1 ? "entry" : "entries") (\(range)\(trimmed)), \(head)\n")
            return
        }
        for problem in report.problems { writeOut("problem: \(problem.kind.rawValue): \(problem.detail)\n") }
        throw MessageFailure(message: "keystone: audit verify: the audit log of \(path) was tampered with: \(report.problems.count) \(report.problems.count == 1 ? "problem" : "problems") (\(range), \(head))", exitCode: 1)
        #else
        throw UsageFailure(message: "keystone: audit verify: this build has no etcd keychains (build keystone with the package's NIO trait: swift build --traits NIO)")
        #endif
    }
}

struct AuditTrim: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trim",
        abstract: "Remove all but the last N audit entries, behind a signed checkpoint.",
        discussion: """
        Verifies the log first (refuses a log that does not verify), then removes the oldest entries in \
        transactions of at most 100, each also writing the checkpoint (the counter and chain hash of the last \
        entry removed, MACed), so `audit verify` still checks what is kept. Needs the keychain unlocked here.
        """)
    @Option(name: .customLong("keep"), help: "How many of the newest entries to keep (at least 1).") var keep: Int
    @Argument(help: "The etcd keychain: etcd://host:port,…/NAME.") var keychain: String?

    mutating func run() throws {
        #if NIO && !canImport(Darwin)
        guard keep >= 1 else { throw UsageFailure(message: "keystone: audit trim: --keep must be at least 1") }
        let path = try auditedKeychain(keychain, verb: "trim")
        let etcd = try openEtcd(path, function: "audit trim \(path)")
        let keep = keep
        let removed = try call("audit trim \(path)") {
            do { return try etcd.trimAuditLog(keeping: keep) } catch let error as EngineError {
                throw EngineError(error.status, withUnlockHint(error.reason, status: error.status, keychain: path))
            }
        }
        writeOut("removed \(removed) \(removed == 1 ? "entry" : "entries")\n")
        #else
        throw UsageFailure(message: "keystone: audit trim: this build has no etcd keychains (build keystone with the package's NIO trait: swift build --traits NIO)")
        #endif
    }
}

#if NIO && !canImport(Darwin)
/// How `keystone audit` prints an entry.
enum AuditFormat {
    /// UTC, milliseconds: `2026-11-27T20:30:00.123Z`.
    static func stamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: TimeZone(identifier: "UTC")!))
    }

    /// `#12 2026-11-27T20:30:00.123Z machine 3f2a… uid 1000 (alice) add genp 0a1b…/v1; …`
    static func line(_ entry: EtcdAuditEntry) -> String {
        let events = entry.events.map { "\($0.operation) \($0.itemClass) \($0.item) v\($0.version)" }.joined(separator: "; ")
        return "#\(entry.counter) \(stamp(entry.time)) machine \(entry.machine) uid \(entry.uid) (\(entry.user.isEmpty ? "?" : entry.user)) \(events.isEmpty ? "(no item)" : events)"
    }

    static func json(_ entry: EtcdAuditEntry) -> String {
        let object: [String: Any] = [
            "counter": entry.counter, "time": stamp(entry.time), "machine": entry.machine, "uid": entry.uid,
            "user": entry.user, "revision": entry.revision,
            "events": entry.events.map { ["operation": $0.operation, "class": $0.itemClass, "item": $0.item, "version": $0.version] as [String: Any] },
        ]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
#endif
