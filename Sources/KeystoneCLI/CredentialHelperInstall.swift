import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif

// `keystone credential-helper install git|docker [--keychain K] [--uninstall]`.

extension CredentialHelper {
    struct InstallHelper: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "install",
            abstract: "Make keystone git's or docker's credential helper (or, with --uninstall, stop it being one).",
            discussion: """
            git: sets `credential.helper` in ~/.gitconfig (`git config --global`), replacing an earlier keystone line \
            and keeping other helpers. docker: sets "credsStore": "keystone" in $DOCKER_CONFIG/config.json \
            (~/.docker/config.json), keeping the rest of the file, written atomically with mode 0600. When \
            git-credential-keystone / docker-credential-keystone is beside keystone but not on PATH, a symbolic link to \
            it is made in ~/.local/bin. --uninstall removes keystone's line or credsStore (and that link).
            """)
        @Argument(help: "git or docker.") var client: String
        @Option(help: "The keychain the helper uses (default: the default keychain when the helper runs).") var keychain: String?
        @Flag(help: "Remove the configuration instead.") var uninstall = false

        mutating func run() throws {
            guard let kind = CredentialHelperInstallation.Client(rawValue: client) else {
                throw UsageFailure(message: "keystone: credential-helper install: \(client) is not a client: use git or docker")
            }
            if kind == .docker, keychain != nil {
                throw UsageFailure(message: "keystone: credential-helper install docker: docker names a helper, not its arguments; choose the keychain with KEYSTONE_KEYCHAIN or `keystone default-keychain -s` instead of --keychain")
            }
            let installation = CredentialHelperInstallation(client: kind)
            if uninstall {
                try installation.uninstall()
            } else {
                try installation.install(keychain: keychain)
            }
        }
    }
}

/// Where a helper is configured and found.
struct CredentialHelperInstallation {
    enum Client: String { case git, docker }
    let client: Client

    var executableName: String { "\(client.rawValue)-credential-keystone" }
    var environment: [String: String] { ProcessInfo.processInfo.environment }
    var home: String { environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory() }

    /// docker's configuration file: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
    var dockerConfig: String {
        (environment["DOCKER_CONFIG"].flatMap { $0.isEmpty ? nil : $0 } ?? home + "/.docker") + "/config.json"
    }

    /// The helper's executable on `PATH` (nil when none).
    var onPath: String? { Self.search(executableName, in: environment["PATH"] ?? "") }

    /// The helper's executable beside the running `keystone`.
    var besideKeystone: String? {
        guard let me = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
        let path = URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent(executableName).path
        return access(path, X_OK) == 0 ? path : nil
    }

    var linkPath: String { home + "/.local/bin/" + executableName }

    static func search(_ name: String, in path: String) -> String? {
        for directory in path.split(separator: ":") where !directory.isEmpty {
            let candidate = String(directory) + "/" + name
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// The `credential.helper` value: `keystone [--keychain K]`, quoted for git's shell-like splitting.
    static func gitHelperLine(keychain: String?) -> String {
        guard let keychain else { return "keystone" }
        return "keystone --keychain '" + keychain.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    func install(keychain: String?) throws {
        try ensureReachable()
        switch client {
        case .git:
            let line = Self.gitHelperLine(keychain: keychain)
            try git(["config", "--global", "--replace-all", "credential.helper", line, "^keystone( |$)"], allowing: [0])
            writeOut("git: credential.helper = \(line) (in ~/.gitconfig)\n")
        case .docker:
            try editDockerConfig { $0["credsStore"] = "keystone" }
            writeOut("docker: \"credsStore\": \"keystone\" in \(dockerConfig)\n")
        }
    }

    func uninstall() throws {
        switch client {
        case .git:
            // Exit status 5: no such line, which is what was asked.
            try git(["config", "--global", "--unset-all", "credential.helper", "^keystone( |$)"], allowing: [0, 5])
            writeOut("git: keystone's credential.helper line removed\n")
        case .docker:
            if FileManager.default.fileExists(atPath: dockerConfig) {
                try editDockerConfig { if $0["credsStore"] as? String == "keystone" { $0["credsStore"] = nil } }
            }
            writeOut("docker: credsStore keystone removed from \(dockerConfig)\n")
        }
        if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: linkPath), target.hasSuffix("/" + executableName) {
            try? FileManager.default.removeItem(atPath: linkPath)
        }
    }

    /// Makes the helper reachable on `PATH`: a link in ~/.local/bin to the one beside keystone when it is not.
    func ensureReachable() throws {
        if onPath != nil { return }
        guard let source = besideKeystone else {
            writeErr("keystone: warning: \(executableName) is not on PATH nor beside keystone: \(client.rawValue) will not find it. Install it (it is built with keystone: `swift build --product \(executableName)`) in a directory on PATH.\n")
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: home + "/.local/bin", withIntermediateDirectories: true)
            try? FileManager.default.removeItem(atPath: linkPath)
            try FileManager.default.createSymbolicLink(atPath: linkPath, withDestinationPath: source)
        } catch {
            throw MessageFailure(message: "keystone: credential-helper install: could not link \(linkPath) to \(source): \(error.localizedDescription)", exitCode: 1)
        }
        writeOut("linked \(linkPath) -> \(source)\n")
        if Self.search(executableName, in: environment["PATH"] ?? "") == nil {
            writeErr("keystone: warning: \(home)/.local/bin is not on PATH: add it (export PATH=\"$HOME/.local/bin:$PATH\") so that \(client.rawValue) finds \(executableName)\n")
        }
    }

    func git(_ arguments: [String], allowing: Set<Int32>) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git"] + arguments
        do { try process.run() } catch {
            throw MessageFailure(message: "keystone: credential-helper install: git could not be run: \(error.localizedDescription)", exitCode: 1)
        }
        process.waitUntilExit()
        guard allowing.contains(process.terminationStatus) else {
            throw MessageFailure(message: "keystone: credential-helper install: `git \(arguments.joined(separator: " "))` failed with status \(process.terminationStatus)", exitCode: 1)
        }
    }

    /// Changes docker's configuration: the rest of the file is kept; written to a temporary file in the same directory
    /// (mode 0600) and renamed over the old one, so a reader sees the old file or the new one, never half of one.
    func editDockerConfig(_ change: (inout [String: Any]) -> Void) throws {
        let path = dockerConfig
        var object: [String: Any] = [:]
        if let data = FileManager.default.contents(atPath: path), !data.isEmpty {
            guard let parsed = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                throw MessageFailure(message: "keystone: credential-helper install: \(path) is not a JSON object; it was left as it is: correct it and run this again", exitCode: 1)
            }
            object = parsed
        }
        change(&object)
        let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw MessageFailure(message: "keystone: credential-helper install: could not create \(directory): \(error.localizedDescription)", exitCode: 1)
        }
        let temporary = directory + "/.config.json.keystone-\(getpid())"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw MessageFailure(message: "keystone: credential-helper install: could not write in \(directory): \(String(cString: strerror(errno)))", exitCode: 1)
        }
        let bytes = data + Data("\n".utf8)
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        let synced = fsync(descriptor) == 0
        close(descriptor)
        guard written == bytes.count, synced, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw MessageFailure(message: "keystone: credential-helper install: could not replace \(path): \(String(cString: strerror(errno)))", exitCode: 1)
        }
    }
}
