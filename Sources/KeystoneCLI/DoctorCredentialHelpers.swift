import Foundation

// `keystone doctor`'s credential-helpers section: whether git and docker are set up to use keystone, and whether they
// can find the helpers on PATH. Notes only: a machine without them is fine, so they never make doctor fail.

/// What doctor says about git's and docker's credential helpers.
enum CredentialHelpersReport {
    /// The section doctor prints: a title line and its findings.
    static var section: String { "credential helpers (git, docker):\n" + Doctor.lines(examine()) }

    /// The findings as JSON objects (doctor --json's "credentialHelpers").
    static var json: [[String: Any]] { examine().map(\.json) }

    static func examine() -> [DoctorFinding] {
        var findings: [DoctorFinding] = []
        for client in [CredentialHelperInstallation.Client.git, .docker] {
            let installation = CredentialHelperInstallation(client: client)
            let configured = client == .git ? gitConfigured() : dockerConfigured(installation)
            let install = "keystone credential-helper install \(client.rawValue)"
            switch (configured, installation.onPath) {
            case (true, let path?):
                findings.append(DoctorFinding(severity: .ok, check: client.rawValue, detail: "uses keystone; \(installation.executableName) is \(path)", fix: nil))
            case (true, nil):
                findings.append(DoctorFinding(severity: .warning, check: client.rawValue,
                                              detail: "is set to use keystone, but \(installation.executableName) is not on PATH: \(client.rawValue) cannot run it",
                                              fix: "run `\(install)` (it links the helper into ~/.local/bin), or put \(installation.executableName) on PATH"))
            case (false, _):
                findings.append(DoctorFinding(severity: .note, check: client.rawValue,
                                              detail: "does not use keystone for its credentials" + (installation.onPath == nil ? " (\(installation.executableName) is not on PATH)" : ""),
                                              fix: "run `\(install)` to keep \(client.rawValue)'s credentials in the keychain"))
            }
        }
        return findings
    }

    /// Whether git's global configuration names keystone as a credential helper (`git config --global --get-all`).
    static func gitConfigured() -> Bool {
        guard CredentialHelperInstallation.search("git", in: ProcessInfo.processInfo.environment["PATH"] ?? "") != nil else { return false }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git", "config", "--global", "--get-all", "credential.helper"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).split(separator: "\n").contains { line in
            line == "keystone" || line.hasPrefix("keystone ") || line.hasSuffix("/git-credential-keystone") || line.contains("/git-credential-keystone ")
        }
    }

    /// Whether docker's configuration file has `"credsStore": "keystone"`.
    static func dockerConfigured(_ installation: CredentialHelperInstallation) -> Bool {
        guard let data = FileManager.default.contents(atPath: installation.dockerConfig),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return false }
        return object["credsStore"] as? String == "keystone"
    }
}
