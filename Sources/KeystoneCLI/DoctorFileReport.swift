import Foundation
import KeychainEngine
import KeychainFile
import KeychainSealing
#if canImport(Glibc)
import Glibc
#endif

// `keystone doctor`'s report on the keychain file.

/// The keychain file: ``KeychainDiagnosis`` with the owner, mode and unlock cache added.
struct FileReport {
    let path: String
    let inUse: Bool
    let exists: Bool
    var owner: String?
    var mode: String?
    var format: Int?
    var lockState: LockState?
    /// Whether the master key is sealed to the TPM, and whether it also has a recovery password (nil: unknown).
    var sealed: Bool?
    var recoveryPassword: Bool?
    var unlockCache: String?
    var findings: [DoctorFinding]
    /// No problem blocks its use.
    let usable: Bool

    static func examine(_ path: String, inUse: Bool) -> FileReport {
        let diagnosis = KeychainDiagnosis.examine(keychainAt: path, secureEnclave: toolSecureEnclave)
        var findings = diagnosis.findings.map { DoctorFinding(severity: $0.severity, check: $0.check, detail: $0.detail, fix: $0.fix) }
        var info = stat()
        var report = FileReport(path: path, inUse: inUse, exists: stat(path, &info) == 0, findings: [],
                                usable: diagnosis.severity < .problem)
        if report.exists {
            let uid = info.st_uid
            let name = getpwuid(uid).flatMap { $0.pointee.pw_name.map { String(cString: $0) } }
            report.owner = name.map { "\($0) (uid \(uid))" } ?? "uid \(uid)"
            report.mode = String(format: "%04o", Int(info.st_mode) & 0o7777)
            let at = (findings.firstIndex { $0.check == "file" } ?? -1) + 1
            findings.insert(DoctorFinding(severity: .ok, check: "owner", detail: "\(report.owner!), mode \(report.mode!)", fix: nil), at: at)
        }
        if let format = findings.first(where: { $0.check == "format" }) {
            report.format = Int(format.detail.dropFirst("format ".count).prefix { $0.isNumber })
        }
        if findings.contains(where: { $0.check == "sealed" }) { report.sealed = true }
        if KeychainFile.isKeychain(at: path), let file = try? KeychainFile.open(at: path, secureEnclave: toolSecureEnclave) {
            let state = file.lockState
            report.lockState = state
            report.sealed = file.isSealedToSecureEnclave
            if file.isSealedToSecureEnclave { report.recoveryPassword = file.hasPassword }
            let cacheStatus = UnlockCacheStatus.current
            let keptIn: String
            switch cacheStatus {
            case .kernelKeyring: keptIn = "the kernel keyring"
            case .agent(let socket, _), .agentOnDemand(let socket): keptIn = "the unlock agent (\(socket))"
            case .none: keptIn = ""
            }
            let cache: String
            if file.isSealedToSecureEnclave && state == .unlocked {
                cache = "not needed: a keychain sealed to the TPM opens unlocked in every process on this machine"
            } else if file.isEmptyPassword {
                cache = "not needed: a keychain with an empty password opens unlocked in every process"
            } else if case .none(let reason) = cacheStatus {
                cache = "unavailable: " + reason
            } else {
                switch state {
                case .unlocked:
                    cache = "the keys are cached in \(keptIn): later commands start unlocked until the auto-lock timeout (at most 12 h)"
                case .lockedAfterFirstUnlock:
                    cache = "only the after-first-unlock keys are cached in \(keptIn)"
                case .locked:
                    cache = "no keys cached: the keychain is locked until `keystone unlock-keychain \(path)`"
                }
            }
            report.unlockCache = cache
            findings.append(DoctorFinding(severity: .ok, check: "unlock cache", detail: cache, fix: nil))
        }
        report.findings = inUse ? findings : findings.map { $0.demoted(to: .warning) }
        return report
    }

    var json: [String: Any] {
        [
            "path": path, "inUse": inUse, "exists": exists,
            "owner": owner ?? NSNull(), "mode": mode ?? NSNull(), "format": format ?? NSNull(),
            "locked": lockState.map { $0 != .unlocked } ?? NSNull(), "lockState": lockState?.rawValue ?? NSNull(),
            "sealed": sealed ?? NSNull(), "recoveryPassword": recoveryPassword ?? NSNull(),
            "unlockCache": unlockCache ?? NSNull(),
            "findings": findings.map(\.json),
        ]
    }
}
