import Foundation
import KeychainEngine
import KeychainFile
import KeychainSealing

/// How `unlock-keychain` and `create-keychain` make sure later commands see an unlock: the kernel keyring where it
/// works; else this user's unlock agent, started on demand; else the command says so and fails.
///
/// Decision: `unlock-keychain` never exits 0 for an unlock that later commands will not see. It exits with
/// errSecServiceNotAvailable ("The required service is not available", exit status 255) and a reason naming the fix.
enum UnlockCache {
    /// Prepares the unlock cache before an unlock: where the kernel keyring is refused, starts the agent unless one
    /// answers already or it is turned off. Returns nil when the keys can be kept, else why they cannot (no secret).
    static func prepare() -> String? {
        if KeyringCache.isAvailable { return nil }
        if UnlockAgentLocation.isDisabled() {
            return "the kernel keyring is refused here (a container's seccomp profile?) and the unlock agent is turned off (KEYSTONE_AGENT=0)"
        }
        let client = UnlockAgentClient()
        if (try? client.ping()) != nil { return nil }
        do {
            _ = try AgentLauncher.start(client.location)
            return nil
        } catch let failure as ToolFailure {
            return "the kernel keyring is refused here (a container's seccomp profile?) and the unlock agent could not be started: \(failure.reason)"
        } catch {
            return "the kernel keyring is refused here and the unlock agent could not be started: \(error)"
        }
    }

    /// What fixes `reason` (the reason nothing could keep the keys): only fixes that are true for it.
    static func fix(_ reason: String) -> String {
        var fixes: [String] = []
        if reason.contains("KEYSTONE_AGENT=0") {
            fixes.append("unset KEYSTONE_AGENT (or set it to 1) so that unlock-keychain starts the unlock agent, or start it yourself: eval \"$(keystone agent --daemon)\"")
        } else if reason.contains("directory") || reason.contains("socket") {
            fixes.append("give the unlock agent a private directory: set XDG_RUNTIME_DIR, or KEYSTONE_AGENT_SOCKET=PATH in a directory only you can use (mkdir -m 700), then run unlock-keychain again")
        } else {
            fixes.append("start the unlock agent (eval \"$(keystone agent --daemon)\") and run unlock-keychain again")
        }
        fixes.append("allow keyctl, add_key and request_key in the container's seccomp profile")
        fixes.append("or use a keychain that needs no unlock: one sealed to this machine's TPM (create-keychain --tpm), or an empty password where file permissions are protection enough")
        return "Fix: " + fixes.joined(separator: "; ") + "."
    }

    /// Fails when `problem` says nothing could keep the keys (an unlock that cannot be read back, as etcd's).
    static func refuse(_ problem: String?, function: String) throws {
        guard let problem else { return }
        throw ToolFailure(function: function, status: Status.serviceNotAvailable,
                          reason: "the keychain is unlocked in this command only; later commands will find it locked: \(problem). \(fix(problem))")
    }

    /// After a keychain file's unlock: where its keys were kept, read back as a later command reads them (a fresh
    /// instance of the file). Throws, naming the fix, when later commands would find it locked.
    static func confirm(_ file: KeychainFile, path: String, preparation: String?) throws {
        let function = "SecKeychainUnlock \(path)"
        switch file.unlockSharing {
        case .kernelKeyring?, .agent?:
            let later = try call(function) { try KeychainFile.open(at: path, secureEnclave: nil) }
            guard later.lockState == .unlocked else {
                let problem = "the keys were stored for later commands but could not be read back"
                throw ToolFailure(function: function, status: Status.serviceNotAvailable,
                                  reason: "the keychain is unlocked in this command only; later commands will find it locked: \(problem). \(fix(problem))")
            }
        case .thisProcessOnly(let reason)?:
            // An empty password opens the keychain in every command anyway.
            if file.isEmptyPassword { return }
            let problem = preparation ?? reason
            throw ToolFailure(function: function, status: Status.serviceNotAvailable,
                              reason: "the keychain is unlocked in this command only; later commands will find it locked: \(problem). \(fix(problem))")
        case .notShared?, nil:
            return
        }
    }
}

/// The password `--password-file FILE` gives: the first line of FILE, or with `-` one line of standard input (its
/// newline stripped).
///
/// - Throws: ``UsageFailure`` when standard input ends before a line; ``MessageFailure`` when the file cannot be read.
func passwordFromFile(_ file: String) throws -> String {
    if file == "-" {
        guard let line = readLine(strippingNewline: true) else {
            throw UsageFailure(message: "keystone: --password-file -: standard input ended before a line was read")
        }
        return line.hasSuffix("\r") ? String(line.dropLast()) : line
    }
    return try readPasswordFile(file, source: "--password-file")
}
