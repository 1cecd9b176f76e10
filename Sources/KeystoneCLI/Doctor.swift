import ArgumentParser
import Foundation
import KeychainEngine
import KeychainFile
#if canImport(KeychainSecretService)
import KeychainSecretService
#endif
#if canImport(Glibc)
import Glibc
#endif
#if canImport(KeychainTPM)
import KeychainTPM
#endif
#if canImport(KeychainEtcd)
import KeychainEtcd
#endif

// `keystone doctor`: which storage is in use and why, the keychain file, the Secret Service, authentication and
// the TPM.

struct Doctor: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check the keychain storage in use: which one and why, the keychain file, the Secret Service; who can authenticate; the TPM.",
        discussion: """
        Reports (1) the storage in use and why (the argument, KEYSTONE_KEYCHAIN, KEYSTONE_BACKEND, the \
        `default-keychain -s` setting, or the default); (2) the keychain file: path, owner and mode, format, \
        header, password, lock state, unlock cache (kernel keyring), damaged items; (3) the Secret Service: the \
        session bus and where its address came from (DBUS_SESSION_BUS_ADDRESS or $XDG_RUNTIME_DIR/bus), the \
        daemon owning org.freedesktop.secrets (bus name, pid, process), its collections, the `default` alias, \
        the collection's lock state and the session's algorithm; (4) authentication (LAContext, access-controlled \
        items): the `keystone` PAM service or the `other` fallback, the controlling terminal, the fingerprint \
        reader (fprintd, its device and enrolled fingers); (5) the TPM 2.0 (the Secure Enclave on Linux, which \
        `create-keychain --tpm` seals keychains to): the TCTI in use and where it came from (KEYSTONE_TPM_TCTI, \
        TPM2TOOLS_TCTI, TCTI, or tctildr's default), /dev/tpmrm0 and /dev/tpm0 and whether you can open them, the \
        manufacturer, vendor and firmware, or why it cannot be used; (6) for an etcd keychain (etcd://… or \
        etcds://… as the argument, KEYSTONE_KEYCHAIN or KEYSTONE_BACKEND): each endpoint of the URL (reachable or \
        why not, etcd version, member id, database size), the member list with names, the leader, each member's \
        health (it answers status), whether the keychain exists (header format, lock timeout, password) and \
        whether this machine can use it now (unlocked through the unlock cache, or locked: run unlock-keychain). \
        Each problem comes with a fix.

        Changes nothing, never prompts, never prints a secret: a URL with a password (etcd://user:PASSWORD@…, \
        ?password=…) is shown with the password as ***. Exits 1 when a problem blocks the storage in use \
        (problems of the storage not in use are only notes or warnings), else 0.

        --json prints one object: "storage" {"kind": "file", "secret-service" or "etcd", "name": the path, \
        secret-service:[COLLECTION] or the etcd URL, "reason": "argument", "KEYSTONE_KEYCHAIN", "KEYSTONE_BACKEND", \
        "default-keychain" or "default"}; "settings" {"directory", "problem": why its settings files are ignored \
        (others can write the directory), or null}; "file" {"path", "inUse", "exists", "owner", "mode", "format", \
        "locked", "lockState", "sealed", "recoveryPassword", "unlockCache", "findings"}; "secretService" {"inUse", "argument", "available", \
        "busAddress", "addressSource" ("given", "DBUS_SESSION_BUS_ADDRESS", "$XDG_RUNTIME_DIR/bus" or "none"), \
        "daemon" {"name", "pid", "process"}, "collections" [{"path", "label", "locked"}], "defaultCollection", \
        "collection", "locked", "sessionAlgorithm", "findings"}; "authentication" {"pamService", "pamFallback", \
        "terminal", "fingerprint" {"state": "ready", "not-enrolled", "no-device" or "no-daemon", "device", \
        "enrolledFingers", "reason"}, "findings"}; "tpm" {"supported", "disabled", "tcti", "tctiSource" \
        ("KEYSTONE_TPM_TCTI", "TPM2TOOLS_TCTI", "TCTI" or "default"), "devices" [{"path", "exists", "accessible", \
        "owner", "group", "mode"}], "available", "status", "reason", "manufacturer", "vendor", "firmwareVersion", \
        "specification", "findings"}; "etcd" (null unless an etcd keychain is in use) {"url", "endpoints" \
        [{"endpoint", "reachable", "error", "version", "memberID", "dbSize", "leader"}], "members" [{"id", "name", \
        "clientURLs", "healthy", "error", "leader"}], "membersError", "leader" {"id", "name"}, "keychain" \
        {"exists", "error", "status", "headerFormat", "lockAfterTimeout", "emptyPassword", "lockState", \
        "unlockCacheAvailable"}, "findings"} (member ids as etcdctl prints them, hexadecimal); "ok" (false when the exit status is 1; authentication and the TPM never \
        make it false: a sealed keychain the TPM cannot open is the file's problem). Each \
        finding is {"severity": "ok", "note", "warning" or "problem", "check", "detail", "fix"}. Unknown values \
        are null.
        """)
    @Flag(help: "Print one JSON object (its keys are listed above).") var json = false
    @Argument(help: "Keychain name, path, secret-service:[COLLECTION] or etcd://host:port,…/NAME (default: the default keychain).") var keychain: String?
    @Option(name: .customLong("protected-files"), help: "Check this directory of protected files instead (repeatable): temporary files interrupted writes left (exit 1 when any), files in sealed format 1. Changes nothing.")
    var protectedFiles: [String] = []

    mutating func run() throws {
        if !protectedFiles.isEmpty { return try checkProtectedFiles(protectedFiles, json: json) }
        let (spec, reason): (String, ToolConfig.Reason) = keychain.map { (resolveKeychain($0), .argument) } ?? ToolConfig.defaultSelection
        let secretServiceInUse = KeychainSpec.isSecretService(spec)
        let etcdInUse = KeychainSpec.isEtcd(spec)
        let fileInUse = !secretServiceInUse && !etcdInUse
        let file = FileReport.examine(fileInUse ? spec : ToolConfig.defaultFile, inUse: fileInUse)
        let secretService = SecretServiceReport.examine(secretServiceInUse ? spec : Self.secretServiceSpec, inUse: secretServiceInUse)
        let etcd = etcdInUse ? EtcdReport.examine(spec) : nil
        let ok = etcd?.usable ?? (secretServiceInUse ? secretService.usable : file.usable)
        let authentication = AuthenticationReport.examine()
        // After the file: one token, so a TPM that serves one connection at a time (swtpm) is opened once.
        let tpm = TPMReport.examine(needed: file.inUse && file.sealed == true)

        // The settings directory (default-keychain, search-list): ignored when others can write it (SettingsFiles).
        let settingsProblem = SettingsFiles.directoryProblem(ToolConfig.directory)
        // Every string shown passes through Redaction: a keychain URL given with a password (which the etcd client
        // refuses) is shown with it masked, and so is any URL a diagnosis quotes.
        if json {
            printJSON(Redaction.redactedJSON([
                "storage": ["kind": etcdInUse ? "etcd" : secretServiceInUse ? "secret-service" : "file", "name": spec, "reason": reason.rawValue],
                "etcd": etcd?.json ?? NSNull(),
                "file": file.json,
                "secretService": secretService.json,
                "authentication": authentication.json.merging(["findings": authentication.findings.map(\.json)]) { $1 },
                "tpm": tpm.json,
                "settings": ["directory": ToolConfig.directory, "problem": settingsProblem ?? NSNull()] as [String: Any],
                "ok": ok,
            ] as [String: Any]))
        } else {
            var text = "storage: " + (etcdInUse ? "the etcd keychain \(spec)" : secretServiceInUse ? "the Secret Service (\(spec))" : "the keychain file \(spec)")
                + ", \(reason.sentence)\n"
            if let settingsProblem {
                text += "settings: \(ToolConfig.directory)\n" + Self.lines([DoctorFinding(
                    severity: .warning, check: "directory", detail: settingsProblem + "; its default-keychain and search-list are ignored",
                    fix: SettingsFiles.directoryFix(ToolConfig.directory))])
            }
            if let etcd { text += "etcd keychain: \(etcd.url)\n" + Self.lines(etcd.findings) }
            text += "keychain file: \(file.path)\(file.inUse ? "" : " (not in use)")\n" + Self.lines(file.findings)
            text += "Secret Service: \(secretService.argument)\(secretService.inUse ? "" : " (not in use)")\n" + Self.lines(secretService.findings)
            text += "authentication (LAContext, access-controlled items):\n" + Self.lines(authentication.findings)
            text += "TPM 2.0 (Secure Enclave keys, sealed keychains):\n" + Self.lines(tpm.findings)
            text += ok ? "result: ok — the storage in use can be used\n"
                : "result: PROBLEM — the \(etcdInUse ? "etcd keychain" : secretServiceInUse ? "Secret Service" : "keychain file") in use cannot be used as it is; see the fixes above\n"
            writeOut(Redaction.redacted(text))
        }
        if !ok { throw ExitCode(1) }
    }

    /// The Secret Service examined when the file is in use: KEYSTONE_BACKEND's collection, else the default one.
    static var secretServiceSpec: String {
        if case .secretService(let spec)? = (try? ToolConfig.backend()) ?? nil { return spec }
        return KeychainSpec.prefix
    }

    static func lines(_ findings: [DoctorFinding]) -> String {
        var text = ""
        for finding in findings {
            let mark: String
            switch finding.severity {
            case .ok: mark = "ok     "
            case .note: mark = "note   "
            case .warning: mark = "warning"
            case .problem: mark = "PROBLEM"
            }
            text += "  \(mark)  \(finding.check): \(finding.detail)\n"
            if let fix = finding.fix, finding.severity != .ok { text += "           fix: \(fix)\n" }
        }
        return text
    }
}

/// One finding of either diagnosis, as doctor prints it.
struct DoctorFinding {
    let severity: KeychainDiagnosis.Severity
    let check: String
    let detail: String
    let fix: String?

    var json: [String: Any] {
        ["severity": severity.rawValue, "check": check, "detail": detail, "fix": fix ?? NSNull()]
    }

    /// The weight a finding of the storage not in use gets: it blocks nothing.
    func demoted(to ceiling: KeychainDiagnosis.Severity) -> DoctorFinding {
        DoctorFinding(severity: min(severity, ceiling), check: check, detail: detail, fix: fix)
    }
}

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
            let keyringAvailable = findings.contains { $0.check == "keyring" && $0.severity == .ok }
            let cache: String
            if file.isSealedToSecureEnclave && state == .unlocked {
                cache = "not needed: a keychain sealed to the TPM opens unlocked in every process on this machine"
            } else if file.isEmptyPassword {
                cache = "not needed: a keychain with an empty password opens unlocked in every process"
            } else if !keyringAvailable {
                cache = "unavailable (no kernel keyring): each process must unlock the keychain itself"
            } else {
                switch state {
                case .unlocked:
                    cache = "the keys are cached in the kernel keyring: later commands start unlocked until the auto-lock timeout (at most 12 h)"
                case .lockedAfterFirstUnlock:
                    cache = "only the after-first-unlock keys are cached in the kernel keyring"
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
        #if canImport(KeychainSecretService)
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
                                  detail: "this keystone was built without the Secret Service (the package's SecretService trait)",
                                  fix: "Build keystone with the SecretService trait (the default; it needs libsecret-1-dev), or use a keychain file.")]
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
        #if canImport(KeychainTPM)
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
        findings.append(DoctorFinding(severity: missing, check: "support", detail: "this keystone was built without the TPM (the package's TPM trait)",
                                      fix: "build keystone with the TPM trait (the default; it needs libtss2-dev)"))
        #endif
        return report()
    }
}

/// An etcd keychain: ``EtcdDiagnosis`` as findings and JSON.
struct EtcdReport {
    /// The URL examined (the canonical one when it parses; never a password).
    var url: String
    var findings: [DoctorFinding] = []
    var json: [String: Any] = [:]
    /// No problem blocks its use.
    var usable: Bool { !findings.contains { $0.severity == .problem } }

    static func hex(_ id: UInt64) -> String { String(id, radix: 16) }

    static func size(_ bytes: Int64) -> String {
        if bytes < 1024 { return "\(bytes) bytes" }
        if bytes < 1024 * 1024 { return String(format: "%.1f KiB", Double(bytes) / 1024) }
        return String(format: "%.1f MiB", Double(bytes) / 1_048_576)
    }

    static func examine(_ spec: String) -> EtcdReport {
        var report = EtcdReport(url: spec)
        #if canImport(KeychainEtcd)
        let configuration: EtcdConfiguration
        do {
            configuration = try EtcdConfiguration(url: spec)
        } catch {
            let reason = (error as? EngineError)?.reason ?? "\(error)"
            report.findings = [DoctorFinding(severity: .problem, check: "url", detail: reason,
                                             fix: "write etcd://host:port,…/NAME[?user=NAME] (password in KEYSTONE_ETCD_PASSWORD) or etcds://…/NAME?ca=…&cert=…&key=…")]
            report.json = ["url": spec, "endpoints": [Any](), "members": [Any](), "membersError": NSNull(), "leader": NSNull(),
                           "keychain": NSNull(), "findings": report.findings.map(\.json)]
            return report
        }
        report.url = configuration.url
        let diagnosis = EtcdDiagnosis.diagnose(configuration)
        report.add(diagnosis)
        #else
        report.findings = [DoctorFinding(severity: .problem, check: "support", detail: "this keystone was built without etcd support (the package's Etcd trait)",
                                         fix: "build keystone with the Etcd trait (the default)")]
        report.json = ["url": spec, "endpoints": [Any](), "members": [Any](), "membersError": NSNull(), "leader": NSNull(),
                       "keychain": NSNull(), "findings": report.findings.map(\.json)]
        #endif
        return report
    }

    #if canImport(KeychainEtcd)
    private mutating func add(_ diagnosis: EtcdDiagnosis) {
        var findings: [DoctorFinding] = []
        if let clientError = diagnosis.clientError {
            findings.append(DoctorFinding(severity: .problem, check: "client", detail: clientError, fix: "check the ca=, cert= and key= files of the URL"))
        }
        let reachable = diagnosis.endpoints.filter(\.reachable).count
        for endpoint in diagnosis.endpoints {
            if endpoint.reachable {
                let detail = "\(endpoint.endpoint): reachable, etcd \(endpoint.version ?? "?"), member \(endpoint.memberID.map(Self.hex) ?? "?"), database \(endpoint.dbSize.map(Self.size) ?? "?")"
                findings.append(DoctorFinding(severity: .ok, check: "endpoint", detail: detail, fix: nil))
            } else {
                findings.append(DoctorFinding(severity: reachable == 0 ? .problem : .warning, check: "endpoint",
                                              detail: "\(endpoint.endpoint): unreachable: \(endpoint.error ?? "no answer")",
                                              fix: "check that the etcd member there runs and that this machine reaches it (firewall, address, TLS)"))
            }
        }
        if let error = diagnosis.membersError {
            findings.append(DoctorFinding(severity: .problem, check: "members", detail: "the member list could not be read: \(error)",
                                          fix: "check that a majority of the etcd members run"))
        } else if diagnosis.clientError == nil {
            let names = diagnosis.members.map { "\($0.name.isEmpty ? "(unstarted)" : $0.name) (\(Self.hex($0.id)))" }
            findings.append(DoctorFinding(severity: .ok, check: "members", detail: "\(diagnosis.members.count): " + names.joined(separator: ", "), fix: nil))
        }
        if let leader = diagnosis.leaderID {
            findings.append(DoctorFinding(severity: .ok, check: "leader", detail: "\(diagnosis.leaderName ?? "unknown name") (\(Self.hex(leader)))", fix: nil))
        } else if diagnosis.clientError == nil {
            findings.append(DoctorFinding(severity: .problem, check: "leader", detail: "no member reachable from here knows a leader",
                                          fix: "start enough members for a quorum (a majority of the member list)"))
        }
        let healthy = diagnosis.members.filter(\.healthy).count
        let quorum = diagnosis.members.count / 2 + 1
        for member in diagnosis.members {
            let name = member.name.isEmpty ? Self.hex(member.id) : member.name
            if member.healthy {
                findings.append(DoctorFinding(severity: .ok, check: "member \(name)", detail: "healthy (answers status at \(member.clientURLs.joined(separator: ", ")))\(member.isLeader ? ", leader" : "")", fix: nil))
            } else {
                findings.append(DoctorFinding(severity: healthy < quorum ? .problem : .warning, check: "member \(name)",
                                              detail: "down: \(member.error ?? "no answer")" + (healthy >= quorum ? " (the \(healthy) others keep a quorum)" : " (no quorum: \(healthy) of \(diagnosis.members.count) answer)"),
                                              fix: "restart it (etcd keeps its data directory), or replace it with etcdctl member remove/add"))
            }
        }
        let keychain = diagnosis.keychain
        let configuration = diagnosis.configuration
        if keychain.exists == true, keychain.error == nil {
            let timeout = keychain.lockAfterTimeout.map { "locks after \(wholeSeconds($0)) s" } ?? "no lock timeout"
            findings.append(DoctorFinding(severity: .ok, check: "keychain",
                                          detail: "\(configuration.name) exists: header format \(keychain.headerFormat.map(String.init) ?? "?"), \(timeout)", fix: nil))
        } else if keychain.exists == false {
            findings.append(DoctorFinding(severity: .problem, check: "keychain", detail: keychain.error ?? "\(configuration.name) does not exist",
                                          fix: "create it with `keystone create-keychain \(url)`"))
        } else if diagnosis.clientError == nil {
            findings.append(DoctorFinding(severity: .problem, check: "keychain", detail: "\(configuration.name) could not be read: \(keychain.error ?? "unknown")",
                                          fix: keychain.status == Status.authFailed || keychain.status == Status.wrPerm
                                            ? "check ?user= and KEYSTONE_ETCD_PASSWORD, and the user's role on the keychain's keys"
                                            : "check that a majority of the etcd members run"))
        }
        if keychain.emptyPassword == true {
            findings.append(DoctorFinding(severity: .warning, check: "password", detail: "empty: anyone who can read the cluster can read the items",
                                          fix: "set a password with `keystone set-keychain-password \(url)`"))
        }
        switch keychain.lockState {
        case .unlocked?:
            let how = keychain.emptyPassword == true ? "its password is empty" : keychain.unlockCacheAvailable ? "through the unlock cache in the kernel keyring" : "in this process"
            findings.append(DoctorFinding(severity: .ok, check: "this machine", detail: "unlocked for you here (\(how)): this machine can use it now", fix: nil))
        case .lockedAfterFirstUnlock?:
            findings.append(DoctorFinding(severity: .note, check: "this machine", detail: "locked after the timeout (only after-first-unlock items are available here)",
                                          fix: "run `keystone unlock-keychain \(url)`"))
        case .locked?:
            findings.append(DoctorFinding(severity: .note, check: "this machine", detail: "locked for you on this machine",
                                          fix: "run `keystone unlock-keychain \(url)` (the keychain password, at the prompt or on standard input)"))
        case nil:
            break
        }
        if !keychain.unlockCacheAvailable {
            findings.append(DoctorFinding(severity: .note, check: "unlock cache", detail: "unavailable (no kernel keyring): each process must unlock the keychain itself", fix: nil))
        }
        self.findings = findings
        json = [
            "url": url,
            "clientError": diagnosis.clientError ?? NSNull(),
            "endpoints": diagnosis.endpoints.map { endpoint -> [String: Any] in
                ["endpoint": endpoint.endpoint, "reachable": endpoint.reachable, "error": endpoint.error ?? NSNull(),
                 "version": endpoint.version ?? NSNull(), "memberID": endpoint.memberID.map(Self.hex) ?? NSNull(),
                 "dbSize": endpoint.dbSize.map { Int($0) } ?? NSNull(), "leader": endpoint.leader.map(Self.hex) ?? NSNull()]
            },
            "members": diagnosis.members.map { member -> [String: Any] in
                ["id": Self.hex(member.id), "name": member.name, "clientURLs": member.clientURLs, "healthy": member.healthy,
                 "error": member.error ?? NSNull(), "leader": member.isLeader]
            },
            "membersError": diagnosis.membersError ?? NSNull(),
            "leader": diagnosis.leaderID.map { ["id": Self.hex($0), "name": diagnosis.leaderName ?? NSNull()] as [String: Any] } ?? NSNull(),
            "keychain": [
                "exists": keychain.exists ?? NSNull(), "error": keychain.error ?? NSNull(), "status": keychain.status.map { Int($0) } ?? NSNull(),
                "headerFormat": keychain.headerFormat ?? NSNull(), "lockAfterTimeout": keychain.lockAfterTimeout ?? NSNull(),
                "emptyPassword": keychain.emptyPassword ?? NSNull(), "lockState": keychain.lockState?.rawValue ?? NSNull(),
                "unlockCacheAvailable": keychain.unlockCacheAvailable,
            ] as [String: Any],
            "findings": findings.map(\.json),
        ]
    }
    #endif
}
