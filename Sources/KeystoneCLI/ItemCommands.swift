import ArgumentParser
import Foundation
import KeychainEngine
import KeychainFile

// Password verbs: add / find / delete, generic and internet.

/// Attributes shared by both password classes.
struct CommonAttributes: ParsableArguments {
    @Option(name: .customShort("a"), help: "Account name.") var account: String?
    @Option(name: .customShort("l"), help: "Label.") var label: String?
    @Option(name: .customShort("j"), help: "Comment.") var comment: String?
    @Option(name: .customShort("D"), help: "Kind (description).") var kind: String?
    @Option(name: .customShort("c"), help: "Creator, a four-character code.") var creator: String?
    @Option(name: .customShort("C"), help: "Type, a four-character code.") var type: String?

    func apply(to query: inout KeychainQuery) throws {
        if let account { query[Key.account] = .string(account) }
        if let label { query[Key.label] = .string(label) }
        if let comment { query[Key.comment] = .string(comment) }
        if let kind { query[Key.description] = .string(kind) }
        if let creator { query[Key.creator] = .number(try fourCC(creator, "-c")) }
        if let type { query[Key.type] = .number(try fourCC(type, "-C")) }
    }
}

func fourCC(_ text: String, _ flag: String) throws -> Int64 {
    let bytes = Array(text.utf8)
    guard bytes.count == 4 else { throw ValidationError("\(flag) takes a four-character code") }
    return bytes.reduce(0) { ($0 << 8) | Int64($1) }
}

/// The secret options of the add verbs.
struct SecretOptions: ParsableArguments {
    @Option(name: .customShort("w"), parsing: .unconditional,
            help: "The password. Last with no value, or absent: prompted for (no echo) on a terminal, else read from standard input.")
    var password: String?
    @Option(name: .customShort("X"), help: "The password as hexadecimal bytes.") var hexPassword: String?
    @Flag(name: .customLong("prompt-password"), help: .hidden) var promptPassword = false

    func secret() throws -> Data {
        if let hexPassword {
            let digits = Array(hexPassword.utf8)
            guard digits.count % 2 == 0 else { throw ValidationError("-X takes an even number of hexadecimal digits") }
            var bytes: [UInt8] = []
            for i in stride(from: 0, to: digits.count, by: 2) {
                guard let byte = UInt8(String(decoding: digits[i..<i + 2], as: UTF8.self), radix: 16) else {
                    throw ValidationError("-X takes hexadecimal digits")
                }
                bytes.append(byte)
            }
            return Data(bytes)
        }
        if let password, !promptPassword { return Data(password.utf8) }
        return Data(try readSecret(prompt: "password data for new item: ", option: "-w").utf8)
    }
}

/// Output choices of the find verbs.
struct FindOutput: ParsableArguments {
    @Flag(name: .customShort("g"), help: "Also print the password (on standard error).") var showPassword = false
    @Flag(name: .customShort("w"), help: "Print only the password.") var onlyPassword = false
    @Flag(help: "Print JSON (the password only with -g or -w).") var json = false
}

enum ItemVerbs {
    /// Adds an item; with `update`, an existing one is updated in place (never deleted and re-added).
    static func add(_ query: KeychainQuery, secret: Data, update: Bool, keychain: String?) throws {
        let path = keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain
        let engine = KeychainEngine(storage: try openStorage(path))
        let function = "SecKeychainItemCreateFromContent (\(keychain == nil ? "<default>" : path))"
        var attributes = query
        attributes[Key.valueData] = .data(secret)
        do {
            try engine.add(attributes)
        } catch let error as EngineError where error.status == Status.duplicateItem && update {
            // The item the add collided with, and no other: its whole primary key as the add stored it (a missing
            // attribute as its empty value), the access group only when given (the engine resolved it).
            let schema = ClassSchema.of(ItemClass(rawValue: query[Key.class]!.stringValue!)!)
            var identity = schema.primaryKeyQuery(of: query)
            identity[Key.class] = query[Key.class]
            identity[Key.accessGroup] = query[Key.accessGroup]
            var changes = query
            changes[Key.class] = nil
            changes[Key.valueData] = .data(secret)
            try call("SecKeychainItemModifyContent") { try engine.update(identity, with: changes) }
        } catch let error as EngineError {
            throw ToolFailure(function: function, status: error.status, reason: withUnlockHint(error.reason, status: error.status, keychain: path))
        }
    }

    /// Finds the first match in the given keychains (else the search list).
    static func find(_ query: KeychainQuery, keychains: [String], withSecret: Bool) throws -> (KeychainQuery, String) {
        let paths = keychains.isEmpty ? ToolConfig.searchList : keychains.map(resolveKeychain)
        var firstError: (status: Int32, reason: String)?
        for path in paths {
            var search = query
            search[Key.returnAttributes] = .bool(true)
            search[Key.returnPersistentRef] = .bool(true)
            if withSecret { search[Key.returnData] = .bool(true) }
            do {
                let engine = KeychainEngine(storage: try openStorage(path))
                if let attributes = try engine.copyMatching(search)?.attributes { return (attributes, path) }
            } catch let error as EngineError where error.status == Status.itemNotFound {
                continue
            } catch let error as EngineError {
                firstError = firstError ?? (error.status, withUnlockHint(error.reason, status: error.status, keychain: path))
            } catch let failure as ToolFailure {
                firstError = firstError ?? (failure.status, failure.reason)
            }
        }
        throw ToolFailure(function: "SecKeychainSearchCopyNext", status: firstError?.status ?? Status.itemNotFound,
                          reason: firstError?.reason ?? "")
    }

    static func printFound(_ attributes: KeychainQuery, keychain: String, output: FindOutput) {
        let secret = attributes[Key.valueData]?.dataValue ?? Data()
        if output.json {
            printJSON(jsonObject(attributes, keychain: keychain, secret: (output.showPassword || output.onlyPassword) ? secret : nil))
            return
        }
        if output.onlyPassword {
            writeOut(passwordForW(secret) + "\n")
            return
        }
        writeOut(attributeBlock(attributes, keychain: keychain))
        if output.showPassword { writeErr("password: \(securityQuoted(secret))\n") }
    }

    /// Deletes the first match, as `security` does: find it, then delete it by its persistent reference.
    static func delete(_ query: KeychainQuery, keychains: [String]) throws {
        let (attributes, path) = try find(query, keychains: keychains, withSecret: false)
        guard let reference = attributes[Key.valuePersistentRef]?.dataValue else { throw ToolFailure(function: "SecKeychainItemDelete", status: Status.itemNotFound) }
        let engine = KeychainEngine(storage: try openStorage(path))
        try call("SecKeychainItemDelete") { try engine.delete([Key.class: query[Key.class]!, Key.valuePersistentRef: .data(reference)]) }
        writeOut(attributeBlock(attributes, keychain: path))
        writeOut("password has been deleted.\n")
    }
}

// MARK: - The three verbs, once for both classes

/// The attributes of one password class, as its verbs take them.
protocol PasswordAttributes: ParsableArguments {
    /// The class's name in verbs and help: "generic" or "internet".
    static var kind: String { get }
    /// The query these options describe.
    func query() throws -> KeychainQuery
}

extension PasswordAttributes {
    /// "a generic" or "an internet".
    static var withArticle: String { ("aeiou".contains(kind.first!) ? "an " : "a ") + kind }
}

struct AddPassword<Attributes: PasswordAttributes>: ParsableCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: "add-\(Attributes.kind)-password", abstract: "Add \(Attributes.withArticle) password item.")
    }
    @OptionGroup var attributes: Attributes
    @OptionGroup var secret: SecretOptions
    @Flag(name: .customShort("U"), help: "Update the item if it exists.") var update = false
    @Option(name: .customShort("T"), help: "An application allowed to access the item (accepted; Linux has no per-application ACL).") var applications: [String] = []
    @Flag(name: .customShort("A"), help: "Allow any application (accepted; the default here).") var anyApplication = false
    @Argument(help: "Keychain name, path, secret-service:[COLLECTION] or etcd://host:port,…/NAME (default: the default keychain).") var keychain: String?

    @Option(name: .customLong("if-version"), help: "With -U on an etcd keychain: update only if the item is still at this version (check-and-set; see item-history).")
    var ifVersion: UInt64?

    mutating func run() throws {
        let (query, data, update, keychain) = (try attributes.query(), try secret.secret(), update, keychain)
        try withEtcdCheckAndSet(ifVersion) { try ItemVerbs.add(query, secret: data, update: update, keychain: keychain) }
    }
}

struct FindPassword<Attributes: PasswordAttributes>: ParsableCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: "find-\(Attributes.kind)-password", abstract: "Find \(Attributes.withArticle) password item.")
    }
    @OptionGroup var attributes: Attributes
    @OptionGroup var output: FindOutput
    @Argument(help: "Keychains to search (default: the search list).") var keychains: [String] = []

    mutating func run() throws {
        let wantsSecret = output.showPassword || output.onlyPassword
        let (found, path) = try ItemVerbs.find(try attributes.query(), keychains: keychains, withSecret: wantsSecret)
        ItemVerbs.printFound(found, keychain: path, output: output)
    }
}

struct DeletePassword<Attributes: PasswordAttributes>: ParsableCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: "delete-\(Attributes.kind)-password", abstract: "Delete the first \(Attributes.kind) password item that matches.")
    }
    @OptionGroup var attributes: Attributes
    @Argument(help: "Keychains to search (default: the search list).") var keychains: [String] = []

    mutating func run() throws { try ItemVerbs.delete(try attributes.query(), keychains: keychains) }
}

// MARK: - Generic passwords

struct GenericAttributes: PasswordAttributes {
    static let kind = "generic"
    @OptionGroup var common: CommonAttributes
    @Option(name: .customShort("s"), help: "Service name.") var service: String?
    @Option(name: .customShort("G"), help: "Generic attribute value.") var generic: String?

    func query() throws -> KeychainQuery {
        var query: KeychainQuery = [Key.class: .string("genp")]
        try common.apply(to: &query)
        if let service { query[Key.service] = .string(service) }
        if let generic { query[Key.generic] = .data(Data(generic.utf8)) }
        return query
    }
}

// MARK: - Internet passwords

struct InternetAttributes: PasswordAttributes {
    static let kind = "internet"
    @OptionGroup var common: CommonAttributes
    @Option(name: .customShort("s"), help: "Server name.") var server: String?
    @Option(name: .customShort("r"), help: "Protocol, a four-character code (e.g. 'http', 'htps', 'ftp ').") var protocolCode: String?
    @Option(name: .customShort("P"), help: "Port number.") var port: Int?
    @Option(name: .customShort("p"), help: "Path.") var path: String?
    @Option(name: .customShort("d"), help: "Security domain.") var securityDomain: String?
    @Option(name: .customShort("t"), help: "Authentication type, a four-character code (e.g. 'dflt', 'form').") var authenticationType: String?

    func query() throws -> KeychainQuery {
        var query: KeychainQuery = [Key.class: .string("inet")]
        try common.apply(to: &query)
        if let server { query[Key.server] = .string(server) }
        if let protocolCode {
            guard protocolCode.utf8.count == 4 else { throw ValidationError("-r takes a four-character protocol code") }
            query[Key.protocol] = .string(protocolCode)
        }
        if let port { query[Key.port] = .number(Int64(port)) }
        if let path { query[Key.path] = .string(path) }
        if let securityDomain { query[Key.securityDomain] = .string(securityDomain) }
        if let authenticationType {
            guard authenticationType.utf8.count == 4 else { throw ValidationError("-t takes a four-character authentication type") }
            query[Key.authenticationType] = .string(authenticationType)
        }
        return query
    }
}

