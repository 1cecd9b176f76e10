import ArgumentParser
import Foundation
import KeychainEngine
import KeychainFile
#if !canImport(Darwin)
import KeychainSecretService
#endif
#if canImport(Glibc)
import Glibc
#endif
#if os(Linux)
import KeychainTPM
#endif
#if NIO && !canImport(Darwin)
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
        "specification", "findings"}; "credentialHelpers" [findings: git and docker set up to use keystone, \
        their helpers on PATH]; "etcd" (null unless an etcd keychain is in use) {"url", "endpoints" \
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
                "credentialHelpers": CredentialHelpersReport.json,
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
            text += CredentialHelpersReport.section
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
