import Foundation
import KeychainEngine
import KeychainFile
#if canImport(Glibc)
import Glibc
#endif
#if os(Linux)
import KeychainTPM
#endif

// `keystone doctor`'s report on the TPM.

/// The TPM 2.0, the Secure Enclave on Linux: the TCTI or device the tool uses, whether this user can open the
/// devices, what the TPM says it is, and why it cannot be used.
struct TPMReport {
    var findings: [DoctorFinding] = []
    var json: [String: Any] = [:]

    static let devices = ["/dev/tpmrm0", "/dev/tpm0"]

    /// - Parameter needed: the keychain in use is sealed to the TPM: a TPM that cannot be used is then a problem
    ///   (else a note: the TPM is optional).
    static func examine(needed: Bool, environment: [String: String] = ProcessInfo.processInfo.environment) -> TPMReport {
        var json: [String: Any] = ["supported": false, "disabled": false, "tcti": NSNull(), "tctiSource": NSNull(),
                                   "devices": [Any](), "available": false, "status": NSNull(), "reason": NSNull(),
                                   "manufacturer": NSNull(), "vendor": NSNull(), "firmwareVersion": NSNull(),
                                   "specification": NSNull()]
        var findings: [DoctorFinding] = []
        let missing: KeychainDiagnosis.Severity = needed ? .problem : .note
        func report() -> TPMReport {
            json["findings"] = findings.map(\.json)
            return TPMReport(findings: findings, json: json)
        }
        #if os(Linux)
        json["supported"] = true
        if environment["KEYSTONE_SECURE_ENCLAVE"] == "none" {
            json["disabled"] = true
            findings.append(DoctorFinding(severity: missing, check: "disabled", detail: "KEYSTONE_SECURE_ENCLAVE=none: keystone uses no TPM (no Secure Enclave keys, no sealed keychains)",
                                          fix: "unset KEYSTONE_SECURE_ENCLAVE to use the TPM"))
            return report()
        }
        // Where the TCTI comes from, in TPMDevice.defaultTCTI's order.
        let source = ["KEYSTONE_TPM_TCTI", "TPM2TOOLS_TCTI", "TCTI"].first { !(environment[$0] ?? "").isEmpty }
        let tcti = TPMDevice.defaultTCTI(environment: environment)
        json["tcti"] = tcti ?? NSNull()
        json["tctiSource"] = source ?? "default"
        if let tcti, let source {
            findings.append(DoctorFinding(severity: .ok, check: "tcti", detail: "\(tcti) (from \(source))", fix: nil))
        } else {
            findings.append(DoctorFinding(severity: .ok, check: "tcti", detail: "none set: tctildr's default, /dev/tpmrm0 (the kernel's resource manager), then /dev/tpm0", fix: nil))
        }
        var deviceJSON: [[String: Any]] = []
        for path in devices {
            var info = stat()
            guard stat(path, &info) == 0 else {
                deviceJSON.append(["path": path, "exists": false, "accessible": false, "owner": NSNull(), "group": NSNull(), "mode": NSNull()])
                if tcti == nil { findings.append(DoctorFinding(severity: .note, check: "device", detail: "\(path): absent", fix: nil)) }
                continue
            }
            let owner = getpwuid(info.st_uid).flatMap { $0.pointee.pw_name.map { String(cString: $0) } } ?? "uid \(info.st_uid)"
            let group = getgrgid(info.st_gid).flatMap { $0.pointee.gr_name.map { String(cString: $0) } } ?? "gid \(info.st_gid)"
            let mode = String(format: "%04o", Int(info.st_mode) & 0o7777)
            let accessible = access(path, R_OK | W_OK) == 0
            deviceJSON.append(["path": path, "exists": true, "accessible": accessible, "owner": owner, "group": group, "mode": mode])
            let detail = "\(path): owner \(owner), group \(group), mode \(mode); " + (accessible ? "you can open it" : "you cannot open it")
            if accessible {
                findings.append(DoctorFinding(severity: .ok, check: "device", detail: detail, fix: nil))
            } else {
                // /dev/tpm0 is the raw device (one user at a time): only the resource manager's matters when both exist.
                let matters = tcti == nil && (path == "/dev/tpmrm0" || !FileManager.default.fileExists(atPath: "/dev/tpmrm0"))
                findings.append(DoctorFinding(severity: matters ? missing : .note, check: "device", detail: detail,
                    fix: "add yourself to the device's group (sudo usermod -aG \(group) $USER; Debian's tpm-udev package makes it tss), then log in again"))
            }
        }
        json["devices"] = deviceJSON
        guard let token = toolSecureEnclave as? TPMSecureEnclaveToken else {
            findings.append(DoctorFinding(severity: missing, check: "tpm", detail: "the Secure Enclave in use is not a TPM", fix: nil))
            return report()
        }
        do throws(EngineError) {
            let info = try token.info()
            json["available"] = true
            json["manufacturer"] = info.manufacturer
            json["vendor"] = info.vendor
            json["firmwareVersion"] = info.firmwareVersion
            let specification = "TPM 2.0 revision \(info.specificationRevision / 100).\(String(format: "%02d", info.specificationRevision % 100)) (\(info.specificationYear))"
            json["specification"] = specification
            findings.append(DoctorFinding(severity: .ok, check: "tpm", detail: "reachable at \(token.name): Secure Enclave keys and sealed keychains can be used", fix: nil))
            findings.append(DoctorFinding(severity: .ok, check: "manufacturer", detail: info.manufacturer, fix: nil))
            findings.append(DoctorFinding(severity: .ok, check: "vendor", detail: info.vendor.isEmpty ? "(none)" : info.vendor, fix: nil))
            findings.append(DoctorFinding(severity: .ok, check: "firmware", detail: info.firmwareVersion, fix: nil))
            findings.append(DoctorFinding(severity: .ok, check: "specification", detail: specification, fix: nil))
        } catch {
            json["status"] = Int(error.status)
            json["reason"] = error.reason
            let fix: String
            if error.status == Status.unimplemented {
                fix = "enable the TPM in the firmware setup (fTPM, Intel PTT), give the VM a vTPM, or set KEYSTONE_TPM_TCTI (e.g. swtpm:host=127.0.0.1,port=2321)"
            } else if tcti != nil {
                fix = "check that a TPM answers at \(tcti!) (tpm2_getcap -T '\(tcti!)' properties-fixed)"
            } else {
                fix = "check you can open /dev/tpmrm0 (see the device lines above), or set KEYSTONE_TPM_TCTI"
            }
            findings.append(DoctorFinding(severity: missing, check: "tpm", detail: "cannot be used: \(error.reason)", fix: fix))
        }
        #else
        findings.append(DoctorFinding(severity: missing, check: "support", detail: "this keystone was built without the TPM backend (KeychainTPM)",
                                      fix: "build keystone on Linux (it links KeychainTPM; libtss2-dev)"))
        #endif
        return report()
    }
}
