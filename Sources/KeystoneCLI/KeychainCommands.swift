import ArgumentParser
import Foundation
import KeychainEngine
import KeychainFile
import KeychainSealing
#if !canImport(Darwin)
import KeychainSecretService
#endif
#if NIO && !canImport(Darwin)
import KeychainEtcd
#endif
#if !canImport(Darwin)
import KeychainServices
#endif

// Keychain verbs: create, delete, lock, unlock, settings, password, info, lists, default, dump (doctor: Doctor.swift).

/// The Secure Enclave the tool seals keychains to (`create-keychain --tpm`) and opens sealed keychains with: the
/// process's token, `KeychainServicesDefaults.secureEnclave` (the TPM 2.0 that `KEYSTONE_TPM_TCTI`,
/// `TPM2TOOLS_TCTI` or `TCTI` names, else `/dev/tpmrm0`; none with `KEYSTONE_SECURE_ENCLAVE=none` or without the
/// KeychainTPM backend). One token for the whole run: a TPM behind a TCTI that serves one connection at a time
/// (swtpm) is opened once. What the TPM holds for it is flushed when the process exits (CTPM's exit flush), so runs
/// never pile objects up in a TPM without a resource manager.
var toolSecureEnclave: (any SecureEnclaveToken)? {
    #if !canImport(Darwin)
    return KeychainServicesDefaults.secureEnclave
    #else
    return nil
    #endif
}

struct CreateKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create-keychain", abstract: "Create a keychain and add it to the search list.",
        discussion: """
        --tpm seals the keychain to this machine's TPM 2.0 (KEYSTONE_TPM_TCTI, TPM2TOOLS_TCTI or TCTI, else \
        /dev/tpmrm0) instead of a password: it opens unlocked on this machine without a password and cannot be \
        opened on any other. Losing or clearing the TPM, or moving the file to another machine, loses the keychain \
        and everything in it, with no recovery — unless a recovery password is given too (-p or -P with --tpm), \
        which opens it on any machine.
        """)

    @Option(name: .customShort("p"), parsing: .unconditional, help: "The new keychain's password (prompted for when absent); with --tpm, its recovery password.")
    var password: String?
    @Flag(name: .customShort("P"), help: "Prompt for the password (with --tpm: for a recovery password).") var prompt = false
    @Flag(name: .customLong("prompt-password"), help: .hidden) var promptPassword = false
    @Option(name: .customLong("password-file"), parsing: .unconditional,
            help: "Read the password from the first line of FILE ('-': one line of standard input).") var passwordFile: String?
    @Flag(name: .customLong("tpm"), help: "Seal the keychain to this machine's TPM: no password here, unusable anywhere else.") var tpm = false
    @Argument(help: "Keychain names or paths.") var keychains: [String]

    /// The password -p or --password-file gives; nil when neither does (it is then prompted for or read).
    private var givenPassword: String?

    mutating func run() throws {
        if passwordFile != nil && (password != nil || prompt || promptPassword) {
            throw UsageFailure(message: "keystone: create-keychain: --password-file cannot be combined with -p or -P: give the password one way")
        }
        if let passwordFile {
            givenPassword = try passwordFromFile(passwordFile)
        } else if password != nil && !prompt && !promptPassword {
            givenPassword = password
        }
        // Where the kernel keyring is refused, the unlock agent keeps the new keychain unlocked for later
        // commands, as macOS leaves a created keychain unlocked.
        let cacheProblem = (tpm || keychains.allSatisfy(KeychainSpec.isEtcd)) ? nil : UnlockCache.prepare()
        for argument in keychains {
            if KeychainSpec.isEtcd(argument) {
                try createEtcd(argument)
                continue
            }
            let path = try KeychainSpec.file(argument, verb: "create-keychain",
                                             what: "its collections are created in the desktop's keyring manager (Seahorse)")
            if tpm {
                try createSealed(at: path)
            } else {
                let secret = try givenPassword ?? readSecret(prompt: "password for new keychain: ", option: "-p")
                let file = try call("SecKeychainCreate \(path)") { try KeychainFile.create(at: path, password: secret) }
                if case .thisProcessOnly(let reason)? = file.unlockSharing, !file.isEmptyPassword {
                    // Decision: creating succeeded, so this exits 0; the note says the keychain is locked for later commands.
                    writeErr("keystone: note: \(path) was created, but later commands will find it locked: \(cacheProblem ?? reason). \(UnlockCache.fix(cacheProblem ?? reason))\n")
                }
            }
            let list = ToolConfig.read("search-list")
            if !list.contains(path) { ToolConfig.updateSearchList((list.isEmpty ? [ToolConfig.defaultKeychain] : list) + [path]) }
        }
    }

    /// An etcd keychain: created on the cluster (the etcd credentials from `?user=` and `KEYSTONE_ETCD_PASSWORD`),
    /// protected by the keychain password (-p, else prompted for or read from standard input), and added to the
    /// search list as a keychain file is.
    private func createEtcd(_ spec: String) throws {
        let function = "SecKeychainCreate \(spec)"
        if tpm {
            throw UsageFailure(message: "keystone: create-keychain: --tpm seals a keychain file to this machine's TPM; \(spec) is an etcd keychain shared by many machines: give it a password")
        }
        #if NIO && !canImport(Darwin)
        let configuration = try etcdConfiguration(spec, function: function)
        let secret = try givenPassword ?? readSecret(prompt: "password for new keychain: ", option: "-p")
        _ = try call(function) { try EtcdKeychain.create(configuration, password: secret) }
        let list = ToolConfig.read("search-list")
        if !list.contains(spec) { ToolConfig.updateSearchList((list.isEmpty ? [ToolConfig.defaultKeychain] : list) + [spec]) }
        #else
        throw etcdUnsupported(spec, function: function)
        #endif
    }

    /// `--tpm`: checks the TPM answers, says what sealing costs (on standard error, before anything is created),
    /// then seals. Decision: no password is asked for unless -p or -P asks for a recovery password.
    private func createSealed(at path: String) throws {
        let function = "SecKeychainCreate \(path)"
        guard let token = toolSecureEnclave else {
            throw ToolFailure(function: function, status: Status.unimplemented,
                              reason: "no TPM support here: KEYSTONE_SECURE_ENCLAVE=none, or keystone was built without the TPM backend (KeychainTPM)")
        }
        if let unavailable = token.availability() {
            throw ToolFailure(function: function, status: unavailable.status,
                              reason: "\(unavailable.reason.trimmingCharacters(in: CharacterSet(charactersIn: ". "))). Nothing was created; `keystone doctor` shows the TPM and why it cannot be used")
        }
        var info = stat()
        if lstat(path, &info) == 0 {
            throw ToolFailure(function: function, status: Status.duplicateKeychain, reason: "a keychain already exists at \(path)")
        }
        // A recovery password to prompt for (-P, or -p last) is asked for after the warning.
        let recovery: String? = givenPassword
        let asksRecovery = recovery != nil || prompt || promptPassword
        writeErr("""
            keystone: WARNING: \(path) will be sealed to this machine's TPM (\(token.name)). Losing or clearing the TPM \
            (a firmware reset, "Clear TPM", a new main board), or moving the file or a backup of it to another machine, \
            loses this keychain and everything in it\(asksRecovery ? " unless you have its recovery password" : ", with no recovery: create it with a recovery password (--tpm -p) to keep a way back").

            """)
        let secret = try recovery ?? (asksRecovery ? readSecret(prompt: "recovery password for new keychain: ", option: "-p") : nil)
        _ = try call(function) { try KeychainFile.create(at: path, sealedTo: token, recoveryPassword: secret) }
    }
}

struct DeleteKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete-keychain", abstract: "Delete keychains and remove them from the search list.")
    @Argument(help: "Keychain names or paths.") var keychains: [String]

    mutating func run() throws {
        for argument in keychains {
            if KeychainSpec.isEtcd(argument) {
                #if NIO && !canImport(Darwin)
                let configuration = try etcdConfiguration(argument, function: "SecKeychainDelete")
                try call("SecKeychainDelete") { try EtcdKeychain.delete(configuration) }
                #else
                throw etcdUnsupported(argument, function: "SecKeychainDelete")
                #endif
                let list = ToolConfig.read("search-list")
                if list.contains(argument) { ToolConfig.updateSearchList(list.filter { $0 != argument }) }
                continue
            }
            let path = try KeychainSpec.file(argument, verb: "delete-keychain",
                                             what: "keystone never deletes a Secret Service collection")
            try call("SecKeychainDelete") { try KeychainFile.delete(at: path) }
            let list = ToolConfig.read("search-list")
            if list.contains(path) { ToolConfig.updateSearchList(list.filter { $0 != path }) }
        }
    }
}

struct LockKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "lock-keychain", abstract: "Lock a keychain (its keys leave this process and the kernel keyring).")
    @Flag(name: .customShort("a"), help: "Lock every keychain in the search list.") var all = false
    @Argument(help: "Keychain name, path, secret-service:[COLLECTION] or etcd://host:port,…/NAME (default: the default keychain).") var keychain: String?

    mutating func run() throws {
        let paths = all ? ToolConfig.searchList : [keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain]
        for path in paths {
            if KeychainSpec.isSecretService(path) {
                #if !canImport(Darwin)
                let storage = try openSecretService(path, function: "SecKeychainLock")
                try call("SecKeychainLock \(path)") { try storage.lock() }
                #else
                _ = try openStorage(path, function: "SecKeychainLock")
                #endif
                continue
            }
            if KeychainSpec.isEtcd(path) {
                // This machine only: other machines of the fleet keep their own unlock.
                #if NIO && !canImport(Darwin)
                try openEtcd(path, function: "SecKeychainLock").lock()
                #else
                throw etcdUnsupported(path, function: "SecKeychainLock")
                #endif
                continue
            }
            try openKeychain(path, function: "SecKeychainLock").lock()
        }
    }
}

struct UnlockKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "unlock-keychain", abstract: "Unlock a keychain for this and later commands.")
    @Option(name: .customShort("p"), parsing: .unconditional, help: "The password (prompted for, or read from standard input, when absent).")
    var password: String?
    @Flag(name: .customShort("u"), help: "Prompt for the password.") var prompt = false
    @Flag(name: .customLong("prompt-password"), help: .hidden) var promptPassword = false
    @Option(name: .customLong("password-file"), parsing: .unconditional,
            help: "Read the password from the first line of FILE ('-': one line of standard input).") var passwordFile: String?
    @Flag(name: .customLong("tpm"), help: "An etcd keychain: unlock with this machine's TPM, without the password (after `keystone enroll-machine`).") var tpm = false
    @Argument(help: "Keychain name, path, secret-service:[COLLECTION] or etcd://host:port,…/NAME (default: the default keychain).") var keychain: String?

    /// The password -p or --password-file gives; nil when neither does (it is then prompted for or read).
    private var givenPassword: String?

    mutating func run() throws {
        if passwordFile != nil && (password != nil || prompt || promptPassword) {
            throw UsageFailure(message: "keystone: unlock-keychain: --password-file cannot be combined with -p or -u: give the password one way")
        }
        let path = keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain
        if let passwordFile {
            if tpm || KeychainSpec.isSecretService(path) {
                throw UsageFailure(message: "keystone: unlock-keychain: --password-file gives a keychain password; \(tpm ? "--tpm unlocks without one" : "the Secret Service asks for its own")")
            }
            givenPassword = try passwordFromFile(passwordFile)
        } else if password != nil && !prompt && !promptPassword {
            givenPassword = password
        }
        if tpm {
            guard KeychainSpec.isEtcd(path), password == nil, !prompt, !promptPassword else {
                throw UsageFailure(message: "keystone: unlock-keychain: --tpm unlocks an etcd keychain with this machine's TPM, without a password (a keychain file sealed to the TPM unlocks without --tpm)")
            }
            #if NIO && !canImport(Darwin)
            let keychain = try openEtcd(path, function: "SecKeychainUnlock")
            guard let token = toolSecureEnclave else {
                throw ToolFailure(function: "SecKeychainUnlock \(path)", status: Status.notAvailable, reason: "this build or machine has no TPM to unlock with (KEYSTONE_TPM_TCTI, /dev/tpmrm0)")
            }
            let cacheProblem = UnlockCache.prepare()
            try call("SecKeychainUnlock \(path)") { try keychain.unlock(with: token) }
            try UnlockCache.refuse(cacheProblem, function: "SecKeychainUnlock \(path)")
            #else
            throw etcdUnsupported(path, function: "SecKeychainUnlock")
            #endif
            return
        }
        if KeychainSpec.isSecretService(path) {
            // The Secret Service asks for its own password, in its own prompt: keystone never handles it.
            if password != nil || promptPassword {
                throw UsageFailure(message: "keystone: unlock-keychain: -p cannot be used with the Secret Service (\(path)): it asks for its own password in its own prompt. Run `keystone unlock-keychain \(path)` without -p.")
            }
            #if !canImport(Darwin)
            let storage = try openSecretService(path, function: "SecKeychainUnlock")
            try call("SecKeychainUnlock \(path)") {
                if try storage.isLocked() { try storage.unlockWithPrompt() }
            }
            #else
            _ = try openStorage(path, function: "SecKeychainUnlock")
            #endif
            return
        }
        if KeychainSpec.isEtcd(path) {
            #if NIO && !canImport(Darwin)
            let keychain = try openEtcd(path, function: "SecKeychainUnlock")
            let secret = try givenPassword ?? readSecret(prompt: "password to unlock \(path): ", option: "-p")
            let cacheProblem = UnlockCache.prepare()
            try call("SecKeychainUnlock \(path)") { try keychain.unlock(password: secret) }
            // Decision: an etcd keychain's unlock is not read back (its cache entries are the etcd library's); the
            // command fails when neither the kernel keyring nor an agent could have kept them.
            try UnlockCache.refuse(cacheProblem, function: "SecKeychainUnlock \(path)")
            #else
            throw etcdUnsupported(path, function: "SecKeychainUnlock")
            #endif
            return
        }
        let file = try openKeychain(path, function: "SecKeychainUnlock")
        if file.isSealedToSecureEnclave {
            try unlockSealed(file, path: path)
            return
        }
        let secret = try givenPassword ?? readSecret(prompt: "password to unlock \(path): ", option: "-p")
        let cacheProblem = UnlockCache.prepare()
        try call("SecKeychainUnlock \(path)") { try file.unlock(password: secret) }
        try UnlockCache.confirm(file, path: path, preparation: cacheProblem)
    }

    /// A keychain sealed to the TPM: unlocked by the TPM, no password asked; with -p (or -u), by its recovery
    /// password (which also serves later commands, through the kernel keyring, where the TPM cannot open it).
    private func unlockSealed(_ file: KeychainFile, path: String) throws {
        let givesPassword = givenPassword != nil || prompt || promptPassword
        if givesPassword {
            guard file.hasPassword else {
                throw UsageFailure(message: "keystone: unlock-keychain: \(path) is sealed to this machine's TPM and has no password: run `keystone unlock-keychain \(path)` without -p.")
            }
            let secret = try givenPassword ?? readSecret(prompt: "recovery password to unlock \(path): ", option: "-p")
            let cacheProblem = UnlockCache.prepare()
            try call("SecKeychainUnlock \(path)") { try file.unlock(password: secret) }
            try UnlockCache.confirm(file, path: path, preparation: cacheProblem)
            return
        }
        do {
            try call("SecKeychainUnlock \(path)") { try file.unlock() }
        } catch var failure as ToolFailure where file.hasPassword {
            failure.reason += ". It has a recovery password: `keystone unlock-keychain -p <recovery password> \(path)`"
            throw failure
        }
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
        let seconds: TimeInterval? = timeout.map(TimeInterval.init) ?? (lockAfterTimeout ? 300 : nil)
        if let spec = keychain.map(resolveKeychain) ?? etcdDefault, KeychainSpec.isEtcd(spec) {
            #if NIO && !canImport(Darwin)
            // For every machine of the fleet: the timeout is in the keychain's header. (-l is not kept: Linux gives no
            // sleep signal, and a keychain file only records it.)
            let keychain = try openEtcd(spec, function: "SecKeychainSetSettings")
            try call("SecKeychainSetSettings \(spec)") { try keychain.setLockAfterTimeout(seconds) }
            #else
            throw etcdUnsupported(spec, function: "SecKeychainSetSettings")
            #endif
            return
        }
        let path = try KeychainSpec.file(keychain, verb: "set-keychain-settings",
                                         what: "its auto-lock is set in the desktop's keyring settings")
        let file = try openKeychain(path, function: "SecKeychainSetSettings")
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
        if let spec = keychain.map(resolveKeychain) ?? etcdDefault, KeychainSpec.isEtcd(spec) {
            #if NIO && !canImport(Darwin)
            // For every machine of the fleet: the master key is wrapped again in the header (compare-and-swap).
            let keychain = try openEtcd(spec, function: "SecKeychainChangePassword")
            let oldSecret = try old ?? readSecret(prompt: "Old Password: ", option: "-o")
            let newSecret = (new != nil && !promptPassword) ? new! : try readSecret(prompt: "New Password: ", option: "-p")
            try call("SecKeychainChangePassword \(spec)") { try keychain.changePassword(old: oldSecret, new: newSecret) }
            #else
            throw etcdUnsupported(spec, function: "SecKeychainChangePassword")
            #endif
            return
        }
        let path = try KeychainSpec.file(keychain, verb: "set-keychain-password",
                                         what: "its password is changed in the desktop's keyring manager (Seahorse: Change Password)")
        let file = try openKeychain(path, function: "SecKeychainChangePassword")
        if file.isSealedToSecureEnclave && !file.hasPassword {
            // Refused before any prompt (the library refuses too, with errSecParam).
            try call("SecKeychainChangePassword \(path)") { try file.changePassword(old: "", new: new ?? "") }
        }
        let oldSecret = try old ?? readSecret(prompt: "Old Password: ", option: "-o")
        let newSecret = (new != nil && !promptPassword) ? new! : try readSecret(prompt: "New Password: ", option: "-p")
        try call("SecKeychainChangePassword \(path)") { try file.changePassword(old: oldSecret, new: newSecret) }
    }
}

struct ShowKeychainInfo: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show-keychain-info", abstract: "Show a keychain's lock settings.")
    @Argument(help: "Keychain name or path (default: the default keychain).") var keychain: String?

    mutating func run() throws {
        if let spec = keychain.map(resolveKeychain) ?? etcdDefault, KeychainSpec.isEtcd(spec) {
            #if NIO && !canImport(Darwin)
            let timeout = try openEtcd(spec, function: "SecKeychainCopySettings").lockAfterTimeout
            writeOut("Keychain \"\(spec)\"" + (timeout.map { " timeout=\(wholeSeconds($0))s" } ?? " no-timeout") + "\n")
            #else
            throw etcdUnsupported(spec, function: "SecKeychainCopySettings")
            #endif
            return
        }
        let path = try KeychainSpec.file(keychain, verb: "show-keychain-info",
                                         what: "it has no keystone lock settings (`keystone doctor` shows whether it is locked)")
        let settings = try openKeychain(path, function: "SecKeychainCopySettings").settings
        var line = "Keychain \"\(path)\""
        if settings.lockOnSleep { line += " lock-on-sleep" }
        line += settings.lockAfterTimeout.map { " timeout=\(wholeSeconds($0))s" } ?? " no-timeout"
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
            let paths = keychains.map(resolveKeychain)
            if let secret = paths.first(where: Redaction.holdsCredential) {
                throw UsageFailure(message: Self.credentialRefusal("list-keychains", secret))
            }
            try ToolConfig.write("search-list", paths, function: "SecKeychainSetSearchList")
            return
        }
        for path in ToolConfig.searchList { writeOut("    \"\(Redaction.redacted(path))\"\n") }
    }

    /// Why a keychain URL holding a credential is not written to a settings file.
    static func credentialRefusal(_ verb: String, _ spec: String) -> String {
        "keystone: \(verb): \(Redaction.redacted(spec)) holds a password: settings files never keep one. Name the etcd user with ?user=NAME and give its password in KEYSTONE_ETCD_PASSWORD"
    }
}

struct DefaultKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "default-keychain", abstract: "Show or set the default keychain.")
    @Option(name: .customShort("d"), help: "Domain: user, system, common or dynamic (one default here).") var domain: String?
    @Option(name: .customShort("s"), help: "Make this keychain the default.") var keychain: String?

    mutating func run() throws {
        if let keychain {
            let path = resolveKeychain(keychain)
            if Redaction.holdsCredential(path) {
                throw UsageFailure(message: ListKeychains.credentialRefusal("default-keychain", path))
            }
            try ToolConfig.write("default-keychain", [path], function: "SecKeychainSetDefault")
            return
        }
        writeOut("    \"\(Redaction.redacted(ToolConfig.defaultKeychain))\"\n")
    }
}

struct DumpKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump-keychain", abstract: "Show every password item's attributes (and, with -d, its secret).",
        discussion: """
        Values are shown as they are stored, escaped: text that is not printable (control characters, bytes that are \
        not UTF-8) is shown as hex and octal escapes, never sent to the terminal raw. A date no calendar can show \
        (outside the years 0001-9999, NaN, infinity: anything another program could plant in a shared storage) is \
        shown as <invalid date>, and as null with --json.
        """)
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
            let engine = KeychainEngine(storage: try openStorage(path, function: "SecKeychainItemCopyContent"))
            defer { if engine.damagedItemsSeen > 0 { damaged.append((path, engine.damagedItemsSeen)) } }
            for cls in ["genp", "inet"] {
                var query: KeychainQuery = [Key.class: .string(cls), Key.matchLimit: .string(Key.matchLimitAll),
                                            Key.returnAttributes: .bool(true), Key.synchronizable: .string(Key.synchronizableAny)]
                if withData { query[Key.returnData] = .bool(true) }
                let result: ItemResult?
                do { result = try engine.copyMatching(query) } catch let error as EngineError where error.status == Status.itemNotFound { continue }
                    catch let error as EngineError {
                        throw ToolFailure(function: "SecKeychainItemCopyContent", status: error.status,
                                          reason: withUnlockHint(error.reason, status: error.status, keychain: path))
                    }
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


/// The default keychain when it is an etcd keychain (`KEYSTONE_KEYCHAIN`, `KEYSTONE_BACKEND`, `default-keychain -s`),
/// for the verbs that otherwise take keychain files only; nil otherwise.
var etcdDefault: String? {
    let spec = ToolConfig.defaultKeychain
    return KeychainSpec.isEtcd(spec) ? spec : nil
}

/// `keystone enroll-machine URL`: lets this machine unlock an etcd keychain with its TPM (`unlock-keychain --tpm`).
struct EnrollMachine: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enroll-machine",
        abstract: "Let this machine unlock an etcd keychain with its TPM, without the password.",
        discussion: """
        Seals the keychain's master key to a key made in this machine's TPM 2.0 and stores it in the cluster under a \
        digest of this machine's id (/etc/machine-id): `keystone unlock-keychain --tpm URL` then unlocks here without \
        the password. The keychain must be unlocked (with its password) first. --remove ID removes a machine's \
        enrollment (its id as `keystone enroll-machine --show-id` prints it on that machine). Whoever can use this \
        machine's TPM and read the cluster can then open the keychain: remove machines that leave the fleet.
        """)
    @Option(name: .customLong("remove"), help: "Remove the enrollment of the machine with this id instead.") var remove: String?
    @Flag(name: .customLong("show-id"), help: "Print this machine's id and exit.") var showID = false
    @Argument(help: "The etcd keychain: etcd://host:port,…/NAME.") var keychain: String?

    mutating func run() throws {
        #if NIO && !canImport(Darwin)
        if showID {
            print(EtcdKeychain.machineID)
            return
        }
        let path = keychain.map(resolveKeychain) ?? ToolConfig.defaultKeychain
        guard KeychainSpec.isEtcd(path) else {
            throw UsageFailure(message: "keystone: enroll-machine: \(path) is not an etcd keychain (a keychain file is sealed to a TPM with create-keychain --tpm)")
        }
        let etcd = try openEtcd(path, function: "enroll-machine")
        if let remove {
            try call("enroll-machine --remove \(path)") { try etcd.removeMachine(remove) }
            return
        }
        guard let token = toolSecureEnclave else {
            throw ToolFailure(function: "enroll-machine \(path)", status: Status.notAvailable, reason: "this build or machine has no TPM (KEYSTONE_TPM_TCTI, /dev/tpmrm0)")
        }
        try call("enroll-machine \(path)") { try etcd.enrollMachine(token) }
        #else
        throw UsageFailure(message: "keystone: enroll-machine: this build has no etcd keychains (build keystone with the package's NIO trait: swift build --traits NIO)")
        #endif
    }
}
