import Foundation
import KeychainEngine
import KeychainFile
#if !canImport(Darwin)
import KeychainSecretService
#endif

// `keystone doctor`'s report on the Secret Service.

/// The Secret Service: ``SecretServiceDiagnosis`` (when this keystone has it).
struct SecretServiceReport {
    let argument: String
    let inUse: Bool
    var findings: [DoctorFinding] = []
    var json: [String: Any]
    /// No problem blocks its use.
    var usable = false

    static func examine(_ argument: String, inUse: Bool) -> SecretServiceReport {
        var report = SecretServiceReport(argument: argument, inUse: inUse, json: [:])
        var json: [String: Any] = ["inUse": inUse, "argument": argument]
        var findings: [DoctorFinding]
        #if !canImport(Darwin)
        if let options = SecretServiceStorage.Options(argument: argument) {
            let diagnosis = SecretServiceDiagnosis.examine(options: options)
            findings = diagnosis.findings.map {
                DoctorFinding(severity: KeychainDiagnosis.Severity(rawValue: $0.severity.rawValue) ?? .problem,
                              check: $0.check, detail: $0.detail, fix: $0.fix)
            }
            report.usable = diagnosis.isUsable
            json["available"] = true
            json["busAddress"] = diagnosis.busAddress ?? NSNull()
            json["addressSource"] = diagnosis.addressSource.rawValue
            json["daemon"] = diagnosis.daemon.map {
                ["name": $0.name, "pid": $0.pid.map { Int($0) as Any } ?? NSNull(), "process": $0.process ?? NSNull()] as [String: Any]
            } ?? NSNull()
            json["collections"] = diagnosis.collections.map { ["path": $0.path, "label": $0.label, "locked": $0.locked] as [String: Any] }
            json["defaultCollection"] = diagnosis.defaultCollection ?? NSNull()
            json["collection"] = diagnosis.collection ?? NSNull()
            json["locked"] = diagnosis.locked ?? NSNull()
            json["sessionAlgorithm"] = diagnosis.sessionAlgorithm ?? NSNull()
        } else {
            findings = [DoctorFinding(severity: .problem, check: "argument", detail: "\(argument) names no Secret Service collection", fix: nil)]
        }
        #else
        findings = [DoctorFinding(severity: .problem, check: "support",
                                  detail: "this keystone was built without the Secret Service (the KeychainSecretService backend)",
                                  fix: "Build keystone on Linux (it links KeychainSecretService; libsecret-1-dev), or use a keychain file.")]
        #endif
        if json["available"] == nil {
            json["available"] = false
            for key in ["busAddress", "daemon", "defaultCollection", "collection", "locked", "sessionAlgorithm"] { json[key] = NSNull() }
            json["addressSource"] = "none"
            json["collections"] = [Any]()
        }
        // The Secret Service is optional while the file is in use: what it lacks is worth a note, no more.
        report.findings = inUse ? findings : findings.map { $0.demoted(to: .note) }
        json["findings"] = report.findings.map(\.json)
        report.json = json
        return report
    }
}
