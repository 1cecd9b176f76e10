import ArgumentParser
import Foundation
import KeychainEngine
import KeychainFile

// Keychain verbs: create, delete, lock, unlock, settings, password, info, lists, default, dump.

struct CreateKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "create-keychain", abstract: "Create a keychain and add it to the search list.")

    @Option(name: .customShort("p"), parsing: .unconditional, help: "The new keychain's password (prompted for when absent).")
    var password: String?
    @Flag(name: .customShort("P"), help: "Prompt for the password.") var prompt = false
    @Flag(name: .customLong("prompt-password"), help: .hidden) var promptPassword = false
    @Argument(help: "Keychain names or paths.") var keychains: [String]

    mutating func run() throws {
        for argument in keychains {
            let path = resolveKeychain(argument)
            let secret = (password != nil && !prompt && !promptPassword) ? password! : try readSecret(prompt: "password for new keychain: ", option: "-p")
            _ = try call("SecKeychainCreate \(path)") { try KeychainFile.create(at: path, password: secret) }
            let list = ToolConfig.read("search-list")
            if !list.contains(path) { try? ToolConfig.write("search-list", (list.isEmpty ? [ToolConfig.defaultKeychain] : list) + [path]) }
        }
    }
}

struct DeleteKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete-keychain", abstract: "Delete keychains and remove them from the search list.")
    @Argument(help: "Keychain names or paths.") var keychains: [String]

    mutating func run() throws {
        for argument in keychains {
            let path = resolveKeychain(argument)
            try call("SecKeychainDelete") { try KeychainFile.delete(at: path) }
            let list = ToolConfig.read("search-list")
            if list.contains(path) { try? ToolConfig.write("search-list", list.filter { $0 != path }) }
        }
    }
}

struct LockKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "lock-keychain", abstract: "Lock a keychain (its keys leave this process and the kernel keyring).")
    @Flag(name: .customShort("a"), help: "Lock every keychain in the search list.") var all = false
    @Argument(help: "Keychain name or path (default: the default keychain).") var keychain: String?

    mutating func run() throws {
        let paths = all ? ToolConfig.searchList : [keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain]
        for path in paths { try openKeychain(path, function: "SecKeychainLock").lock() }
    }
}

struct UnlockKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "unlock-keychain", abstract: "Unlock a keychain for this and later commands.")
    @Option(name: .customShort("p"), parsing: .unconditional, help: "The password (prompted for, or read from standard input, when absent).")
    var password: String?
    @Flag(name: .customShort("u"), help: "Prompt for the password.") var prompt = false
    @Flag(name: .customLong("prompt-password"), help: .hidden) var promptPassword = false
    @Argument(help: "Keychain name or path (default: the default keychain).") var keychain: String?

    mutating func run() throws {
        let path = keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain
        let file = try openKeychain(path, function: "SecKeychainUnlock")
        let secret = (password != nil && !prompt && !promptPassword) ? password! : try readSecret(prompt: "password to unlock \(path): ", option: "-p")
        try call("SecKeychainUnlock \(path)") { try file.unlock(password: secret) }
    }
}

struct SetKeychainSettings: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "set-keychain-settings",
        abstract: "Set a keychain's auto-lock: -u locks after the timeout (-t seconds, 300 by default); neither: no timeout.")
    @Flag(name: .customShort("l"), help: "Lock when the system sleeps (recorded; Linux gives no sleep signal).") var lockOnSleep = false
    @Flag(name: .customShort("u"), help: "Lock after the timeout.") var lockAfterTimeout = false
    @Option(name: .customShort("t"), help: "The timeout in seconds.") var timeout: Int?
    @Argument(help: "Keychain name or path (default: the default keychain).") var keychain: String?

    mutating func run() throws {
        let path = keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain
        let file = try openKeychain(path, function: "SecKeychainSetSettings")
        let seconds: TimeInterval? = timeout.map(TimeInterval.init) ?? (lockAfterTimeout ? 300 : nil)
        try call("SecKeychainSetSettings \(path)") { try file.setSettings(KeychainSettings(lockAfterTimeout: seconds, lockOnSleep: lockOnSleep)) }
    }
}

struct SetKeychainPassword: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "set-keychain-password", abstract: "Change a keychain's password (its items are not re-encrypted).")
    @Option(name: .customShort("o"), parsing: .unconditional, help: "The old password.") var old: String?
    @Option(name: .customShort("p"), parsing: .unconditional, help: "The new password.") var new: String?
    @Flag(name: .customLong("prompt-password"), help: .hidden) var promptPassword = false
    @Argument(help: "Keychain name or path (default: the default keychain).") var keychain: String?

    mutating func run() throws {
        let path = keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain
        let file = try openKeychain(path, function: "SecKeychainChangePassword")
        let oldSecret = try old ?? readSecret(prompt: "Old Password: ", option: "-o")
        let newSecret = (new != nil && !promptPassword) ? new! : try readSecret(prompt: "New Password: ", option: "-p")
        try call("SecKeychainChangePassword \(path)") { try file.changePassword(old: oldSecret, new: newSecret) }
    }
}

struct ShowKeychainInfo: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show-keychain-info", abstract: "Show a keychain's lock settings.")
    @Argument(help: "Keychain name or path (default: the default keychain).") var keychain: String?

    mutating func run() throws {
        let path = keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain
        let settings = try openKeychain(path, function: "SecKeychainCopySettings").settings
        var line = "Keychain \"\(path)\""
        if settings.lockOnSleep { line += " lock-on-sleep" }
        line += settings.lockAfterTimeout.map { " timeout=\(Int($0))s" } ?? " no-timeout"
        writeOut(line + "\n")
    }
}

struct ListKeychains: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list-keychains", abstract: "Show or set the keychain search list.")
    @Option(name: .customShort("d"), help: "Domain: user, system, common or dynamic (one search list here).") var domain: String?
    @Flag(name: .customShort("s"), help: "Set the search list to the keychains given.") var set = false
    @Argument(help: "Keychains, with -s.") var keychains: [String] = []

    mutating func run() throws {
        if set {
            try call("SecKeychainSetSearchList") {
                do { try ToolConfig.write("search-list", keychains.map(resolveKeychain)) } catch { throw EngineError(Status.wrPerm) }
            }
            return
        }
        for path in ToolConfig.searchList { writeOut("    \"\(path)\"\n") }
    }
}

struct DefaultKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "default-keychain", abstract: "Show or set the default keychain.")
    @Option(name: .customShort("d"), help: "Domain: user, system, common or dynamic (one default here).") var domain: String?
    @Option(name: .customShort("s"), help: "Make this keychain the default.") var keychain: String?

    mutating func run() throws {
        if let keychain {
            let path = resolveKeychain(keychain)
            try call("SecKeychainSetDefault") {
                do { try ToolConfig.write("default-keychain", [path]) } catch { throw EngineError(Status.wrPerm) }
            }
            return
        }
        writeOut("    \"\(ToolConfig.defaultKeychain)\"\n")
    }
}

struct DumpKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "dump-keychain", abstract: "Show every password item's attributes (and, with -d, its secret).")
    @Flag(name: .customShort("d"), help: "Include the secrets.") var withData = false
    @Flag(help: "Print JSON.") var json = false
    @Argument(help: "Keychains (default: the search list).") var keychains: [String] = []

    mutating func run() throws {
        let paths = keychains.isEmpty ? ToolConfig.searchList : keychains.map(resolveKeychain)
        var objects: [[String: Any]] = []
        var damaged: [(String, Int)] = []
        defer {
            // Never silent: items that fail their integrity check are left out of the dump (as Apple's query loop
            // skips items it cannot decode) and counted here, on standard error.
            for (path, count) in damaged {
                writeErr("keystone: dump-keychain: \(count) damaged item\(count == 1 ? "" : "s") in \"\(path)\" could not be read and \(count == 1 ? "is" : "are") not shown; run `keystone doctor \(path)`\n")
            }
        }
        for path in paths {
            let engine = KeychainEngine(storage: try openKeychain(path, function: "SecKeychainItemCopyContent"))
            defer { if engine.damagedItemsSeen > 0 { damaged.append((path, engine.damagedItemsSeen)) } }
            for cls in ["genp", "inet"] {
                var query: KeychainQuery = [Key.class: .string(cls), Key.matchLimit: .string(Key.matchLimitAll),
                                            Key.returnAttributes: .bool(true), Key.synchronizable: .string(Key.synchronizableAny)]
                if withData { query[Key.returnData] = .bool(true) }
                let result: ItemResult?
                do { result = try engine.copyMatching(query) } catch let error as EngineError where error.status == Status.itemNotFound { continue }
                    catch let error as EngineError { throw ToolFailure(function: "SecKeychainItemCopyContent", status: error.status, reason: error.reason) }
                for item in result?.array ?? [] {
                    guard let attributes = item.attributes else { continue }
                    let secret = withData ? attributes[Key.valueData]?.dataValue : nil
                    if json {
                        objects.append(jsonObject(attributes, keychain: path, secret: secret))
                    } else {
                        var text = attributeBlock(attributes, keychain: path)
                        if withData { text += "data:\n" + (secret.map(securityQuoted) ?? "") + "\n" }
                        writeOut(text)
                    }
                }
            }
        }
        if json { printJSON(objects) }
    }
}

struct Doctor: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check a keychain file: format, header, ownership and permissions, password, lock state, damaged items.",
        discussion: "Changes nothing. Exits 0 when nothing is wrong, 1 when a problem is found. Never prints an item's contents.")
    @Argument(help: "Keychain name or path (default: the default keychain).") var keychain: String?

    mutating func run() throws {
        let path = keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain
        let diagnosis = KeychainDiagnosis.examine(keychainAt: path)
        writeOut("keychain: \(path)\n")
        for finding in diagnosis.findings {
            let mark: String
            switch finding.severity {
            case .ok: mark = "ok     "
            case .note: mark = "note   "
            case .warning: mark = "warning"
            case .problem: mark = "PROBLEM"
            }
            writeOut("  \(mark)  \(finding.check): \(finding.detail)\n")
            if let fix = finding.fix, finding.severity != .ok { writeOut("           fix: \(fix)\n") }
        }
        if diagnosis.severity == .problem { throw ExitCode(1) }
    }
}
