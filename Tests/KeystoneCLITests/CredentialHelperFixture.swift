import Foundation
import Testing

/// A temporary HOME for git's and docker's credential helpers: its own keychain directory, git configuration
/// (no system configuration), docker configuration, and `PATH` starting with the build folder (where `keystone`,
/// `git-credential-keystone` and `docker-credential-keystone` are).
struct CredentialHome {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-credentials-\(UUID().uuidString)")

    init() throws {
        try FileManager.default.createDirectory(at: root.appendingPathComponent("home"), withIntermediateDirectories: true)
    }

    /// The build folder holding the three binaries (an absolute path: the programs run in other directories).
    static let binaries: String? = {
        guard let keystone = Sandbox.binary else { return nil }
        let directory = URL(fileURLWithPath: keystone).standardizedFileURL.deletingLastPathComponent().path
        let needed = ["git-credential-keystone", "docker-credential-keystone"]
        return needed.allSatisfy { FileManager.default.isExecutableFile(atPath: directory + "/" + $0) } ? directory : nil
    }()

    var home: String { root.appendingPathComponent("home").path }
    var keychainDirectory: String { root.appendingPathComponent("data/keystone").path }
    var loginKeychain: String { keychainDirectory + "/login.keychain-db" }

    var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["HOME"] = home
        env["XDG_DATA_HOME"] = root.appendingPathComponent("data").path
        env["XDG_CONFIG_HOME"] = root.appendingPathComponent("config").path
        env["DOCKER_CONFIG"] = root.appendingPathComponent("docker").path
        env["GIT_CONFIG_NOSYSTEM"] = "1"
        env["GIT_TERMINAL_PROMPT"] = "0"
        env["GIT_ASKPASS"] = nil
        env["SSH_ASKPASS"] = nil
        for name in ["KEYSTONE_KEYCHAIN", "KEYSTONE_BACKEND", "KEYSTONE_KEYCHAIN_DIR", "GIT_DIR", "GIT_WORK_TREE"] { env[name] = nil }
        env["PATH"] = (Self.binaries.map { $0 + ":" } ?? "") + (env["PATH"] ?? "/usr/bin:/bin")
        return env
    }

    /// Runs a program found on this home's `PATH`.
    @discardableResult
    func run(_ program: String, _ arguments: [String], input: String? = nil, changes: [String: String?] = [:]) throws -> Run {
        var env = environment
        for (key, value) in changes { env[key] = value }
        let executable = program.hasPrefix("/") ? program : try #require(Self.search(program, env["PATH"] ?? ""), "\(program) is on PATH")
        return try Run.launch(executable, arguments, in: root, environment: env, input: input.map { Data($0.utf8) })
    }

    static func search(_ program: String, _ path: String) -> String? {
        path.split(separator: ":").map { String($0) + "/" + program }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// `git-credential-keystone VERB` with a request of `key=value` lines.
    func gitHelper(_ verb: String, _ lines: [String], arguments: [String] = [], changes: [String: String?] = [:]) throws -> Run {
        try run("git-credential-keystone", arguments + [verb], input: lines.joined(separator: "\n") + "\n\n", changes: changes)
    }

    /// `docker-credential-keystone VERB` with its standard input.
    func dockerHelper(_ verb: String, _ input: String = "", arguments: [String] = [], changes: [String: String?] = [:]) throws -> Run {
        try run("docker-credential-keystone", arguments + [verb], input: input, changes: changes)
    }

    /// Makes a keychain with a password (and, when `locked`, locks it).
    func makeKeychain(_ name: String, password: String, locked: Bool) throws -> String {
        let path = keychainDirectory + "/" + name
        let created = try run("keystone", ["create-keychain", path], input: password + "\n")
        #expect(created.status == 0, "create-keychain: \(created.stderr)")
        if locked {
            let lock = try run("keystone", ["lock-keychain", path])
            #expect(lock.status == 0, "lock-keychain: \(lock.stderr)")
        }
        return path
    }

    func remove() { try? FileManager.default.removeItem(at: root) }
}
