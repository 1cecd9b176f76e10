import ArgumentParser
import Foundation
import KeychainEngine

// Issue 30: the history verbs of an etcd keychain (versions, undelete, destroy) and check-and-set for add -U.
// `item-history`, `undelete-item`, `destroy-item` take a generic password's options (-s service, -a account);
// `internet-item-history`, `undelete-internet-item`, `destroy-internet-item` an internet password's.
#if NIO && !canImport(Darwin)
import KeychainEtcd

var etcdHistoryVerbs: [any ParsableCommand.Type] {
    [ItemHistory<GenericAttributes>.self, UndeleteItem<GenericAttributes>.self, DestroyItem<GenericAttributes>.self,
     ItemHistory<InternetAttributes>.self, UndeleteItem<InternetAttributes>.self, DestroyItem<InternetAttributes>.self,
     HistorySettings.self]
}

/// `keystone history-settings`: the versions kept per item, the retention of deleted items, and whether every update
/// must state the version it read (check-and-set), for every machine of an etcd keychain.
struct HistorySettings: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history-settings",
        abstract: "Show or change an etcd keychain's item history settings (versions kept, deleted-item retention, required check-and-set, audited reads).")
    @Option(name: .customLong("max-versions"), help: "Versions kept per item, the current one included (1...100; default 10).") var maxVersions: Int?
    @Option(name: .customLong("retention-days"), help: "Days a deleted item can be undeleted before a later write purges it (default 30).") var retentionDays: Double?
    @Option(name: .customLong("require-check-and-set"), help: "on: every update must state the version it read (add -U --if-version N); off: optional.")
    var requireCheckAndSet: String?
    @Option(name: .customLong("audit-reads"), help: "on: every read that opens an item writes an audit entry first, on every machine from its next unlock (a read then costs a write); off: only changes are audited.")
    var auditReads: String?
    @Argument(help: "The etcd keychain (default: the default keychain).") var keychain: String?

    mutating func run() throws {
        let function = "SecKeychainSetSettings"
        let (etcd, spec) = try HistoryVerbs.keychain(keychain, function: function)
        func onOff(_ value: String?, _ option: String) throws -> Bool? {
            switch value {
            case nil: return nil
            case "on", "yes", "true", "1": return true
            case "off", "no", "false", "0": return false
            default: throw ValidationError("\(option) takes on or off")
            }
        }
        let require = try onOff(requireCheckAndSet, "--require-check-and-set")
        if let audit = try onOff(auditReads, "--audit-reads") {
            try call(function) { try etcd.setAuditsReads(audit) }
        }
        if maxVersions != nil || retentionDays != nil || require != nil {
            let (versions, days) = (maxVersions, retentionDays)
            try call(function) { try etcd.setHistoryPolicy(maxVersions: versions, tombstoneRetention: days.map { $0 * 86_400 }, requireCheckAndSet: require) }
        }
        writeOut("keychain: \"\(spec)\"\nversions kept per item: \(etcd.maxVersions)\ndeleted items kept for: \(etcd.tombstoneRetention / 86_400) days\ncheck-and-set required: \(etcd.requiresCheckAndSet ? "yes" : "no")\nreads audited: \(etcd.auditsReads ? "yes" : "no")\n")
    }
}

/// Runs `body` (an add -U) so that its update checks the item is still at `version` on an etcd keychain.
func withEtcdCheckAndSet<T>(_ version: UInt64?, _ body: () throws -> T) throws -> T {
    guard let version else { return try body() }
    return try EtcdKeychain.withCheckAndSet(expectedVersion: version, body)
}

enum HistoryVerbs {
    /// The etcd keychain a history verb works on: the argument, else the default keychain.
    static func keychain(_ argument: String?, function: String) throws -> (EtcdKeychain, String) {
        let spec = argument.map(resolveKeychain) ?? ToolConfig.defaultKeychain
        guard KeychainSpec.isEtcd(spec) else {
            throw ToolFailure(function: function, status: Status.unimplemented,
                              reason: "\(spec) is not an etcd keychain: item versions, undelete and destroy exist on etcd keychains only (etcd://host:port/NAME)")
        }
        return (try openEtcd(spec, function: function), spec)
    }

    /// The item's class and primary-key attributes the options name.
    static func selector(_ query: KeychainQuery) throws -> (ItemClass, [String: AttributeValue]) {
        guard let tag = query[Key.class]?.stringValue, let cls = ItemClass(rawValue: tag) else { throw ValidationError("no item class") }
        var attributes: [String: AttributeValue] = [:]
        for key in ClassSchema.of(cls).primaryKey {
            switch query[key] {
            case .string(let text)?: attributes[key] = .string(text)
            case .data(let bytes)?: attributes[key] = .data(bytes)
            case .number(let number)?: attributes[key] = .number(number)
            case .bool(let flag)?: attributes[key] = .bool(flag)
            default: continue
            }
        }
        return (cls, attributes)
    }
}

struct ItemHistory<Attributes: PasswordAttributes>: ParsableCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: Attributes.kind == "generic" ? "item-history" : "internet-item-history",
            abstract: "List the versions an etcd keychain keeps of \(Attributes.withArticle) password item, or show one.",
            discussion: """
            Lists version, keychain counter, modification date and state (current, deleted) of each version kept \
            (the keychain's last N, default 10). With --version K, prints that version's attributes (-g: and its \
            password on standard error; -w: only its password). The current version is what --if-version takes.
            """)
    }
    @OptionGroup var attributes: Attributes
    @Option(name: .customLong("version"), help: "Show this version.") var version: UInt64?
    @OptionGroup var output: FindOutput
    @Argument(help: "The etcd keychain (etcd://host:port,…/NAME; default: the default keychain).") var keychain: String?

    mutating func run() throws {
        let function = "SecItemCopyMatching"
        let (etcd, spec) = try HistoryVerbs.keychain(keychain, function: function)
        let (cls, selector) = try HistoryVerbs.selector(try attributes.query())
        if let version {
            let item = try call(function) { try etcd.item(version: version, of: cls, matching: selector) }
            var found: KeychainQuery = item.attributes.mapValues { KeychainValue($0) }
            found[Key.class] = .string(cls.rawValue)
            if let secret = item.secret { found[Key.valueData] = .data(secret) }
            ItemVerbs.printFound(found, keychain: spec, output: output)
            return
        }
        let versions = try call(function) { try etcd.versions(of: cls, matching: selector) }
        let formatter = ISO8601DateFormatter()
        if output.json {
            printJSON(versions.map { entry -> [String: Any] in
                var object: [String: Any] = ["version": entry.version, "counter": entry.counter, "current": entry.isCurrent]
                if let modified = entry.modified { object["modified"] = formatter.string(from: modified) }
                if let deleted = entry.deletedAt { object["deleted"] = formatter.string(from: deleted) }
                return object
            })
            return
        }
        writeOut("keychain: \"\(spec)\"\n")
        for entry in versions {
            var line = "version \(entry.version)  counter \(entry.counter)"
            if let modified = entry.modified { line += "  modified \(formatter.string(from: modified))" }
            if let deleted = entry.deletedAt { line += "  deleted \(formatter.string(from: deleted))" }
            if entry.isCurrent { line += entry.deletedAt == nil ? "  (current)" : "  (deleted: undelete-item brings it back)" }
            writeOut(line + "\n")
        }
    }
}

struct UndeleteItem<Attributes: PasswordAttributes>: ParsableCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: Attributes.kind == "generic" ? "undelete-item" : "undelete-internet-item",
            abstract: "Bring back \(Attributes.withArticle) password item deleted from an etcd keychain (within its retention, default 30 days).")
    }
    @OptionGroup var attributes: Attributes
    @Argument(help: "The etcd keychain (default: the default keychain).") var keychain: String?

    mutating func run() throws {
        let function = "SecItemAdd"
        let (etcd, _) = try HistoryVerbs.keychain(keychain, function: function)
        let (cls, selector) = try HistoryVerbs.selector(try attributes.query())
        let version = try call(function) { try etcd.undelete(cls, matching: selector) }
        writeOut("item undeleted: version \(version).\n")
    }
}

struct DestroyItem<Attributes: PasswordAttributes>: ParsableCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: Attributes.kind == "generic" ? "destroy-item" : "destroy-internet-item",
            abstract: "Erase \(Attributes.withArticle) password item (live or deleted) and every version an etcd keychain keeps of it. Cannot be undone.")
    }
    @OptionGroup var attributes: Attributes
    @Argument(help: "The etcd keychain (default: the default keychain).") var keychain: String?

    mutating func run() throws {
        let function = "SecItemDelete"
        let (etcd, _) = try HistoryVerbs.keychain(keychain, function: function)
        let (cls, selector) = try HistoryVerbs.selector(try attributes.query())
        try call(function) { try etcd.destroy(cls, matching: selector) }
        writeOut("item destroyed with every version.\n")
    }
}
#else
var etcdHistoryVerbs: [any ParsableCommand.Type] { [] }

func withEtcdCheckAndSet<T>(_ version: UInt64?, _ body: () throws -> T) throws -> T {
    guard version == nil else {
        throw ToolFailure(function: "SecItemUpdate", status: Status.unimplemented,
                          reason: "--if-version needs an etcd keychain: this keystone was built without etcd support (the NIO trait)")
    }
    return try body()
}
#endif
