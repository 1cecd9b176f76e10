import ArgumentParser
import Foundation
import KeychainEngine
#if NIO && !canImport(Darwin)
import KeychainEtcd
#endif

// Access groups of an etcd keychain as cryptographic boundaries, and key rotation (issue 30): the machine side
// (publish-machine-key, unlock-machine), the administrator side (add-group-member, remove-group-member, list-groups,
// rotate-group-key, rotate-master-key).

/// The verbs of this file, for main.swift's list.
let etcdGroupVerbs: [any ParsableCommand.Type] = [
    PublishMachineKey.self, UnlockMachine.self, AddGroupMember.self, RemoveGroupMember.self, ListGroups.self,
    RotateGroupKey.self, RotateMasterKey.self,
]

#if NIO && !canImport(Darwin)
/// The etcd keychain a verb names (or the default one), refused when it is not an etcd keychain.
private func etcdArgument(_ keychain: String?, verb: String) throws -> (String, EtcdKeychain) {
    let path = keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain
    guard KeychainSpec.isEtcd(path) else {
        throw UsageFailure(message: "keystone: \(verb): \(path) is not an etcd keychain (etcd://host:port,…/NAME): access groups as key domains exist only there")
    }
    return (path, try openEtcd(path, function: verb))
}

/// Unlocks an administrator's keychain with its password when this process does not hold the master key (the unlock
/// cache may hold it): the terminal, the systemd credential, KEYSTONE_PASSWORD_FILE or a line of standard input.
private func administrator(_ etcd: EtcdKeychain, _ path: String, verb: String) throws {
    if etcd.lockState == .unlocked, etcd.enrolledGroups == nil { return }
    let password = try readSecret(prompt: "password to unlock \(path): ", option: "-p", headless: true)
    try call("\(verb) \(path)") { try etcd.unlock(password: password) }
}

/// This machine's key: in its TPM with --tpm, else the software key file.
private func machineKey(tpm: Bool, file: String?, verb: String) throws -> EtcdMachineKey {
    guard let path = file ?? EtcdMachineKey.defaultFile else {
        throw UsageFailure(message: "keystone: \(verb): no place for the machine key (set HOME or KEYSTONE_KEYCHAIN_DIR, or pass --key-file)")
    }
    if tpm {
        guard let token = toolSecureEnclave else {
            throw ToolFailure(function: verb, status: Status.notAvailable, reason: "this build or machine has no TPM (KEYSTONE_TPM_TCTI, /dev/tpmrm0)")
        }
        return try call(verb) { try EtcdMachineKey.token(token, file: path) }
    }
    return try call(verb) { try EtcdMachineKey.software(file: path) }
}
#endif

/// Bytes from hex digits; nil for anything else.
private func groupHexBytes(_ hex: String) -> Data? {
    let digits = Array(hex.utf8)
    guard digits.count % 2 == 0 else { return nil }
    var bytes: [UInt8] = []
    for index in stride(from: 0, to: digits.count, by: 2) {
        guard let byte = UInt8(String(decoding: digits[index..<(index + 2)], as: UTF8.self), radix: 16) else { return nil }
        bytes.append(byte)
    }
    return Data(bytes)
}

private func unsupported(_ verb: String) -> UsageFailure {
    UsageFailure(message: "keystone: \(verb): this build has no etcd keychains (build keystone with the package's NIO trait: swift build --traits NIO)")
}

/// `keystone publish-machine-key URL`: makes this machine's key and publishes its public key for an administrator.
struct PublishMachineKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish-machine-key",
        abstract: "Make this machine's key and publish its public key, for an administrator to enroll it in access groups.",
        discussion: """
        The key is made in this machine's TPM with --tpm, else it is a software P-256 key in a file of mode 0600 \
        ($KEYSTONE_KEYCHAIN_DIR/etcd-machine.key, else ~/.local/share/keystone/etcd-machine.key). Prints the machine's \
        id and the key's fingerprint: compare it with what add-group-member prints (whoever can write to etcd could \
        replace a published key).
        """)
    @Flag(name: .customLong("tpm"), help: "Make the key in this machine's TPM.") var tpm = false
    @Option(name: .customLong("key-file"), help: "Where the machine key (or its TPM blob) is kept.") var keyFile: String?
    @Argument(help: "The etcd keychain: etcd://host:port,…/NAME.") var keychain: String?

    mutating func run() throws {
        #if NIO && !canImport(Darwin)
        let (path, etcd) = try etcdArgument(keychain, verb: "publish-machine-key")
        let key = try machineKey(tpm: tpm, file: keyFile, verb: "publish-machine-key")
        try call("publish-machine-key \(path)") { try etcd.publishMachineKey(key) }
        print("machine \(EtcdKeychain.machineID)\nfingerprint \(key.fingerprint)")
        #else
        throw unsupported("publish-machine-key")
        #endif
    }
}

/// `keystone unlock-machine URL`: unlocks with this machine's key (a machine enrolled for access groups).
struct UnlockMachine: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock-machine",
        abstract: "Unlock an etcd keychain on this machine with its machine key (a machine enrolled for access groups).",
        discussion: """
        The machine then holds its groups' keys (never the master key): it sees the items of its access groups only. \
        Other processes of this user find it unlocked (the unlock cache) and read the keys again with the software \
        machine key; a TPM key must be given to each process.
        """)
    @Flag(name: .customLong("tpm"), help: "The machine key is in this machine's TPM.") var tpm = false
    @Option(name: .customLong("key-file"), help: "Where the machine key (or its TPM blob) is kept.") var keyFile: String?
    @Argument(help: "The etcd keychain: etcd://host:port,…/NAME.") var keychain: String?

    mutating func run() throws {
        #if NIO && !canImport(Darwin)
        let (path, etcd) = try etcdArgument(keychain, verb: "unlock-machine")
        let key = try machineKey(tpm: tpm, file: keyFile, verb: "unlock-machine")
        try call("unlock-machine \(path)") { try etcd.unlock(machineKey: key) }
        print("groups \((etcd.enrolledGroups ?? []).joined(separator: " "))")
        #else
        throw unsupported("unlock-machine")
        #endif
    }
}

/// `keystone add-group-member --machine ID --group G… URL`.
struct AddGroupMember: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-group-member",
        abstract: "Enroll a machine for access groups of an etcd keychain (it gets their keys, never the master key).",
        discussion: """
        Seals each group's keys to the machine's public key (the one it published with publish-machine-key, or \
        --public-key HEX). A group that is not a cryptographic group yet becomes one: its items are re-sealed under a \
        new group key. Needs the keychain password (or the unlock cache of an administrator).
        """)
    @Option(name: .customLong("machine"), help: "The machine's id (as publish-machine-key printed it).") var machine: String
    @Option(name: .customLong("group"), help: "An access group (repeat for several; the first is where its adds without a group go).") var groups: [String] = []
    @Option(name: .customLong("public-key"), help: "The machine's public key, X9.63 in hex, instead of the published one.") var publicKey: String?
    @Argument(help: "The etcd keychain: etcd://host:port,…/NAME.") var keychain: String?

    mutating func run() throws {
        #if NIO && !canImport(Darwin)
        guard !groups.isEmpty else { throw UsageFailure(message: "keystone: add-group-member: name at least one --group") }
        let (path, etcd) = try etcdArgument(keychain, verb: "add-group-member")
        try administrator(etcd, path, verb: "add-group-member")
        let machine = machine, groups = groups
        var key: Data?
        if let publicKey {
            guard let bytes = groupHexBytes(publicKey), bytes.count == 65 else {
                throw UsageFailure(message: "keystone: add-group-member: --public-key must be 65 bytes in hex (X9.63)")
            }
            key = bytes
        } else {
            key = try call("add-group-member \(path)") { try etcd.publishedMachineKey(machine) }
        }
        if let key { print("fingerprint \(EtcdMachineKey.fingerprint(of: key))") }
        try call("add-group-member \(path)") { try etcd.enrollMachine(machine, publicKey: key, groups: groups) }
        #else
        throw unsupported("add-group-member")
        #endif
    }
}

/// `keystone remove-group-member --machine ID --group G URL`.
struct RemoveGroupMember: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove-group-member",
        abstract: "Remove a machine from an access group of an etcd keychain, and rotate the group's key.",
        discussion: """
        The machine's bundle is sealed again without the group's keys; then the group's key is rotated (unless \
        --no-rotate) so that what the machine kept opens no version written from now on. Versions it already read \
        stay known to it.
        """)
    @Option(name: .customLong("machine"), help: "The machine's id.") var machine: String
    @Option(name: .customLong("group"), help: "The access group.") var group: String
    @Flag(name: .customLong("no-rotate"), help: "Do not rotate the group's key (the machine's old key keeps opening new versions).") var noRotate = false
    @Argument(help: "The etcd keychain: etcd://host:port,…/NAME.") var keychain: String?

    mutating func run() throws {
        #if NIO && !canImport(Darwin)
        let (path, etcd) = try etcdArgument(keychain, verb: "remove-group-member")
        try administrator(etcd, path, verb: "remove-group-member")
        let machine = machine, group = group, rotate = !noRotate
        try call("remove-group-member \(path)") { try etcd.removeMachine(machine, fromGroup: group, rotate: rotate) }
        #else
        throw unsupported("remove-group-member")
        #endif
    }
}

/// `keystone list-groups URL`.
struct ListGroups: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list-groups",
        abstract: "List the cryptographic access groups of an etcd keychain, their key generation and members.")
    @Argument(help: "The etcd keychain: etcd://host:port,…/NAME.") var keychain: String?

    mutating func run() throws {
        #if NIO && !canImport(Darwin)
        let (path, etcd) = try etcdArgument(keychain, verb: "list-groups")
        let groups = try call("list-groups \(path)") { try etcd.groups() }
        for group in groups {
            print("\(group.name)\tgeneration \(group.generation)\t\(group.members.count) member(s)\(group.rotating ? "\trotation unfinished" : "")")
            for member in group.members { print("  machine \(member.prefix(16))") }
        }
        #else
        throw unsupported("list-groups")
        #endif
    }
}

#if NIO && !canImport(Darwin)
/// Runs a rotation, printing one line per batch (`resealed N`) and the summary.
private func rotate(_ etcd: EtcdKeychain, group: String?, batch: Int, path: String, verb: String) throws {
    let started = Date()
    let report = try call("\(verb) \(path)") {
        try etcd.rotateKeys(group: group, batchSize: batch) { count in
            writeOut("resealed \(count)\n")
        }
    }
    let seconds = max(Date().timeIntervalSince(started), 0.001)
    print("generation \(report.generation)\tresealed \(report.resealed) item(s) in \(String(format: "%.2f", seconds)) s (\(Int(Double(report.resealed) / seconds)) items/s), \(report.conflicts) conflict(s)\(report.resumed ? ", resumed" : "")")
}
#endif

/// `keystone rotate-group-key --group G URL`.
struct RotateGroupKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate-group-key",
        abstract: "Rotate an access group's key: every item of the group re-sealed while other machines keep working.",
        discussion: """
        A new key generation is sealed to the group's members, then the group's items are re-sealed in batches \
        (compare-and-swap: another machine's write wins and the batch is read again). Interrupted at any point, every \
        item stays readable; run the command again to resume.
        """)
    @Option(name: .customLong("group"), help: "The access group.") var group: String
    @Option(name: .customLong("batch"), help: "Items per etcd transaction (1-120, default 64).") var batch = 64
    @Argument(help: "The etcd keychain: etcd://host:port,…/NAME.") var keychain: String?

    mutating func run() throws {
        #if NIO && !canImport(Darwin)
        let (path, etcd) = try etcdArgument(keychain, verb: "rotate-group-key")
        try administrator(etcd, path, verb: "rotate-group-key")
        try rotate(etcd, group: group, batch: batch, path: path, verb: "rotate-group-key")
        #else
        throw unsupported("rotate-group-key")
        #endif
    }
}

/// `keystone rotate-master-key URL`.
struct RotateMasterKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate-master-key",
        abstract: "Rotate the key the items outside cryptographic groups are sealed under, while machines keep working.",
        discussion: """
        A new key generation (wrapped under the master key) seals every item that is in no cryptographic access \
        group, re-sealed in batches as rotate-group-key does. The master key itself (what the password and enrolled \
        TPMs unwrap) is not replaced: set-keychain-password changes the password.
        """)
    @Option(name: .customLong("batch"), help: "Items per etcd transaction (1-120, default 64).") var batch = 64
    @Argument(help: "The etcd keychain: etcd://host:port,…/NAME.") var keychain: String?

    mutating func run() throws {
        #if NIO && !canImport(Darwin)
        let (path, etcd) = try etcdArgument(keychain, verb: "rotate-master-key")
        try administrator(etcd, path, verb: "rotate-master-key")
        try rotate(etcd, group: nil, batch: batch, path: path, verb: "rotate-master-key")
        #else
        throw unsupported("rotate-master-key")
        #endif
    }
}
