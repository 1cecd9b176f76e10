import Foundation
import KeychainEngine
import KeychainSealing
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What `keystone doctor` reports about a keychain file: each check with its outcome and, for a problem, the fix.
public struct KeychainDiagnosis: Sendable {
    /// How a finding weighs: `problem` means the storage cannot be used as it is.
    public typealias Severity = DiagnosisSeverity
    /// One check's outcome.
    public typealias Finding = DiagnosisFinding

    /// The keychain file examined.
    public let path: String
    /// Every check, in the order made.
    public let findings: [Finding]
    /// The worst severity found.
    public var severity: Severity { findings.map(\.severity).max() ?? .ok }

    /// Examines the keychain file at `path` without changing it (an empty-password keychain is opened, so
    /// its items can be checked; so is a keychain sealed to a Secure Enclave, with `secureEnclave`).
    ///
    /// Checks: the file exists and is a Keystone keychain of a format this version reads; its header is valid;
    /// ownership and permissions (as ``KeychainFile/open(at:secureEnclave:)`` checks them); the password, or the TPM it is sealed to; the lock state and the
    /// kernel keyring; every item's integrity (when unlocked); files left by interrupted creations.
    ///
    /// - Parameters:
    ///   - path: the keychain file to examine.
    ///   - secureEnclave: the token that opens a keychain sealed to a Secure Enclave.
    /// - Important: Findings name files, owners, modes, counts and row ids, never an item's contents.
    public static func examine(keychainAt path: String, secureEnclave: (any SecureEnclaveToken)? = nil) -> KeychainDiagnosis {
        var findings: [Finding] = []
        func add(_ severity: Severity, _ check: String, _ detail: String, fix: String? = nil) {
            findings.append(Finding(severity: severity, check: check, detail: detail, fix: fix))
        }
        var info = stat()
        guard stat(path, &info) == 0 else {
            add(path == KeychainFile.defaultPath ? .note : .problem, "file", "there is no keychain at \(path)",
                fix: path == KeychainFile.defaultPath ? "it is created, with an empty password, on first use" : "keystone create-keychain \(path)")
            return KeychainDiagnosis(path: path, findings: findings)
        }
        guard KeychainFile.isKeychain(at: path) else {
            add(.problem, "file", "\(path) is not a Keystone keychain",
                fix: "point KEYSTONE_KEYCHAIN or the keychain argument at a keychain; this file is left as it is")
            return KeychainDiagnosis(path: path, findings: findings)
        }
        add(.ok, "file", "\(path) is a Keystone keychain")
        if let problems = try? FileSafety.problems(keychainAt: path), !problems.isEmpty {
            for problem in problems { add(.problem, "permissions", "\(problem.path): \(problem.reason)", fix: problem.fix ?? "move the keychain to a directory only you can write") }
        } else {
            add(.ok, "permissions", "owned by you, not open to group or others")
        }
        let file: KeychainFile
        do {
            file = try KeychainFile.open(at: path, secureEnclave: secureEnclave)
        } catch let error as EngineError {
            if let header = try? KeychainFile.openChecked(path).1, header.sealed != nil {
                // The header is fine: the TPM it is sealed to cannot open it.
                add(.problem, "sealed", "the keychain is sealed to a TPM and cannot be opened here: \(error.reason)",
                    fix: error.status == Status.decode
                        ? "open it on the machine (and TPM) that created it; without that TPM and with no recovery password its items cannot be recovered"
                        : error.status == Status.notAvailable || error.status == Status.unimplemented
                        ? "make the TPM reachable (see the TPM section: /dev/tpmrm0 and the tss group, or KEYSTONE_TPM_TCTI)"
                        : "the TPM refused for a reason of its own: see the TPM section, and try again")
                return KeychainDiagnosis(path: path, findings: findings)
            }
            add(.problem, "header", error.reason, fix: error.status == Status.wrongSecVersion ? "use a newer Keystone" : "restore the file from a backup")
            return KeychainDiagnosis(path: path, findings: findings)
        } catch {
            add(.problem, "header", "\(error)")
            return KeychainDiagnosis(path: path, findings: findings)
        }
        let (version, emptyPassword, hasPassword, sealed, settings) = file.withMutex {
            (file.header.version, file.header.emptyPassword, file.header.password != nil, file.header.sealed != nil, file.header.settings)
        }
        if version < FileFormat.version {
            add(.note, "format", "format \(version); upgraded to format \(FileFormat.version) at the next unlock with the password")
        } else {
            add(.ok, "format", "format \(version)" + (sealed ? " (sealed to a TPM)" : ""))
        }
        if sealed {
            if file.lockState == .locked {
                let reason = file.unsealFailure() ?? "the TPM did not unseal it"
                add(.warning, "sealed", "the keychain is sealed to a TPM that cannot open it here (\(reason)); it opens only with its recovery password",
                    fix: "open it on the machine that created it, or keystone unlock-keychain -p <recovery password> \(path)")
            } else {
                add(.ok, "sealed", "sealed to this machine's TPM: it opens without a password here and on no other machine")
            }
            if hasPassword {
                add(.ok, "password", "the keychain has a recovery password: it opens on any machine with it")
            } else {
                add(.note, "password", "no recovery password: clearing the TPM or moving the file to another machine loses the keychain and its items")
            }
        } else if emptyPassword {
            add(.warning, "password", "the keychain has an empty password: only its file permissions protect it",
                fix: "keystone set-keychain-password \(path)")
        } else {
            add(.ok, "password", "the keychain has a password")
        }
        add(.ok, "auto-lock", settings.lockAfterTimeout.map { "locks \(Int($0)) s after an unlock" } ?? "no timeout: stays unlocked until locked or the cached keys expire (12 h)")
        let cacheStatus = UnlockCacheStatus.current
        add(cacheStatus.isShared ? .ok : .warning, "keyring", cacheStatus.summary)
        switch file.lockState {
        case .locked:
            add(.note, "lock", "locked: items cannot be checked", fix: "keystone unlock-keychain \(path), then run doctor again")
        case .lockedAfterFirstUnlock, .unlocked:
            add(.ok, "lock", file.lockState == .unlocked ? "unlocked" : "locked after first unlock: only some items can be checked")
            do {
                let report = try file.verify()
                if report.damaged.isEmpty {
                    add(.ok, "items", "\(report.readable) item\(report.readable == 1 ? "" : "s") readable"
                        + (report.locked > 0 ? ", \(report.locked) not readable while locked" : ""))
                } else {
                    let rows = report.damaged.prefix(20).map { "\($0.itemClass.rawValue) row \($0.rowID)" }.joined(separator: ", ")
                    add(.problem, "items", "\(report.damaged.count) damaged items (errSecDecode on every read): \(rows)",
                        fix: "restore the keychain from a backup; Keystone never deletes an item it cannot read")
                }
            } catch let error as EngineError {
                add(.warning, "items", "could not check the items: \(error.reason)")
            } catch {
                add(.warning, "items", "could not check the items: \(error)")
            }
        }
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        if let names = try? FileManager.default.contentsOfDirectory(atPath: directory.isEmpty ? "." : directory) {
            let aside = names.filter { $0.hasPrefix(name + ".interrupted-") }
            if !aside.isEmpty {
                add(.note, "leftovers", "set aside after an interrupted creation: \(aside.joined(separator: ", "))",
                    fix: "remove them once you have checked they hold nothing you need")
            }
        }
        return KeychainDiagnosis(path: path, findings: findings)
    }
}

extension KeychainFile {
    /// Why this instance's token cannot unseal the file, or nil when it can. Changes nothing.
    func unsealFailure() -> String? {
        let header = withMutex { self.header }
        do {
            _ = try unsealMaster(header)  // the TPM, with no lock held
            return nil
        } catch let error as EngineError {
            return error.reason
        } catch {
            return "\(error)"
        }
    }
}
