import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The recipes of "Headless Linux: containers, CI, services" (Examples/systemd, Examples/container, Examples/ci), run
/// as written: the unit checked by `systemd-analyze verify` and its Exec lines run with the environment systemd gives
/// them; the container's entry point and command with the Dockerfile's environment under the seccomp filter Docker
/// applies; the CI script with no terminal.
@Suite("Headless recipes: the systemd unit, the container and the CI script, run as written", .serialized)
struct HeadlessRecipesTests {
    /// The repository's root (this file is Tests/KeystoneCLITests/HeadlessRecipesTests.swift).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let unitPath = root.appendingPathComponent("Examples/systemd/keystone-example.service").path
    static let dockerfilePath = root.appendingPathComponent("Examples/container/Dockerfile").path
    static let entrypointPath = root.appendingPathComponent("Examples/container/entrypoint.sh").path
    static let ciScriptPath = root.appendingPathComponent("Examples/ci/keychain-round-trip.sh").path

    /// A directory holding `keystone`, a link to the built binary, for recipes that call it by name (PATH).
    static func binDirectory(_ box: CellDirectory, keystone: String) throws -> String {
        let bin = try box.directory("bin", mode: 0o755)
        try FileManager.default.createSymbolicLink(atPath: bin + "/keystone", withDestinationPath: keystone)
        return bin
    }

    // MARK: - systemd

    /// The `[Service]` settings of the unit, in order: (key, value) pairs.
    static func serviceSettings() throws -> [(key: String, value: String)] {
        let text = try String(contentsOfFile: unitPath, encoding: .utf8)
        var inService = false
        var settings: [(String, String)] = []
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("[") { inService = line == "[Service]"; continue }
            guard inService, !line.isEmpty, !line.hasPrefix("#"), let eq = line.firstIndex(of: "=") else { continue }
            settings.append((String(line[..<eq]), String(line[line.index(after: eq)...])))
        }
        return settings
    }

    /// A command line split as systemd splits Exec lines: words, single- or double-quoted strings.
    static func splitCommand(_ line: String) -> [String] {
        var words: [String] = []
        var current = ""
        var quote: Character?
        var inWord = false
        for c in line {
            if let q = quote {
                if c == q { quote = nil } else { current.append(c) }
            } else if c == "'" || c == "\"" {
                quote = c
                inWord = true
            } else if c == " " || c == "\t" {
                if inWord { words.append(current); current = ""; inWord = false }
            } else {
                current.append(c)
                inWord = true
            }
        }
        if inWord { words.append(current) }
        return words
    }

    @Test("the example unit passes systemd-analyze verify with no warning",
          .enabled(if: systemTool("systemd-analyze") != nil, "systemd-analyze not installed (apt-get install systemd)"))
    func unitVerifies() throws {
        let analyze = try #require(systemTool("systemd-analyze"))
        let keystone = try #require(Sandbox.binary, "the keystone binary is built by `swift build`")
        let box = try CellDirectory()
        defer { box.remove() }
        // The unit as written, its binary the built one (systemd-analyze checks that ExecStart's program exists).
        let text = try String(contentsOfFile: Self.unitPath, encoding: .utf8).replacingOccurrences(of: "/usr/local/bin/keystone", with: keystone)
        let unit = box.path("keystone-example.service")
        try text.write(toFile: unit, atomically: true, encoding: .utf8)
        let run = try cellRun([analyze, "verify", unit], environment: bareEnvironment())
        #expect(run.status == 0 && run.stderr.isEmpty && !run.hung, "systemd-analyze verify: \(run)")
    }

    @Test("the unit keeps the keychain in its StateDirectory and its password in a credential, never in the environment")
    func unitShape() throws {
        let settings = try Self.serviceSettings()
        let values = Dictionary(settings.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a })
        #expect(values["StateDirectory"] == "keystone")
        #expect(settings.contains { $0.key == "Environment" && $0.value == "KEYSTONE_KEYCHAIN_DIR=%S/keystone" })
        #expect(values["LoadCredentialEncrypted"]?.hasPrefix("keystone.keychain-password:") == true)
        #expect(!settings.contains { $0.key == "Environment" && $0.value.contains("PASSWORD=") })
    }

    @Test("the unit's Exec lines, run as systemd runs them (its user, no home, no terminal, stdin /dev/null, the credential), create, unlock and read the secret; Keychain() reads the same keychain",
          .enabled(if: EnvironmentMatrixTests.otherUserUnavailable == nil, Comment(rawValue: EnvironmentMatrixTests.otherUserUnavailable ?? "")))
    func unitCommandsRun() throws {
        let keystone = try #require(Sandbox.binary, "the keystone binary is built by `swift build`")
        let probe = try #require(builtExecutable("EnvironmentProbe"), "EnvironmentProbe is built by `swift build`")
        let setsid = try #require(systemTool("setsid"), "setsid (util-linux)")
        let user = EnvironmentMatrixTests.otherUser
        let box = try CellDirectory()
        defer { box.remove() }
        // What systemd makes: %S (the state root) with StateDirectory=keystone owned by the user, 0700; the decrypted
        // credential in a directory only the service reads.
        let stateRoot = try box.directory("state", mode: 0o755)
        _ = try box.directory("state/keystone", owner: user)
        let credentials = try box.directory("credentials", owner: user, mode: 0o500)
        let credential = credentials + "/keystone.keychain-password"
        try Data("unit-pw".utf8).write(to: URL(fileURLWithPath: credential))
        chown(credential, user, gid_t(user))
        chmod(credential, 0o400)

        let settings = try Self.serviceSettings()
        func expand(_ text: String) -> String {
            text.replacingOccurrences(of: "%S", with: stateRoot).replacingOccurrences(of: "/usr/local/bin/keystone", with: keystone)
        }
        // The service's environment: its Environment= lines, the credentials directory, HOME of a system user with no
        // home, PATH; nothing else (no terminal variables, no bus).
        var environment = ["PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "USER": "keystone-example",
                           "LOGNAME": "keystone-example", "CREDENTIALS_DIRECTORY": credentials]
        for (key, value) in settings where key == "Environment" {
            let pair = expand(value).split(separator: "=", maxSplits: 1).map(String.init)
            environment[pair[0]] = pair.count > 1 ? pair[1] : ""
        }
        let prefix = [systemTool("setpriv")!, "--reuid=\(user)", "--regid=\(user)", "--clear-groups", setsid, "-w"]
        func exec(_ key: String) throws -> [CellRun] {
            try settings.filter { $0.key == key }.map { try cellRun(prefix + Self.splitCommand(expand($0.value)), environment: environment) }
        }

        for run in try exec("ExecStartPre") { #expect(run.status == 0 && !run.hung, "ExecStartPre: \(run)") }
        let keychain = stateRoot + "/keystone/login.keychain-db"
        #expect(FileManager.default.fileExists(atPath: keychain), "the first start created the keychain in the state directory")
        // Provisioning, as the unit's comment says (unlock with the credential, the token on standard input).
        let token = try box.file("token", "unit-token\n")
        let store = try cellRun(prefix + ["/bin/sh", "-c", "\(keystone) unlock-keychain && \(keystone) add-generic-password -U -s example.com -a api-token -w"],
                                environment: environment, input: .bytes(try Data(contentsOf: URL(fileURLWithPath: token))))
        #expect(store.status == 0, "storing the token: \(store)")

        let start = try exec("ExecStart")
        #expect(start.count == 1 && start.first?.status == 0 && start.first?.stdout == "unit-token\n", "ExecStart: \(start)")
        // The program's own Keychain() uses the same default keychain, unlocked by ExecStartPre.
        let library = try cellRun(prefix + [probe, "service"], environment: environment)
        #expect(library.status == 0 && library.stdout == "ok\n", "Keychain() in the service: \(library)")
        for run in try exec("ExecStopPost") { #expect(run.status == 0, "ExecStopPost: \(run)") }
        let locked = try cellRun(prefix + [keystone, "find-generic-password", "-s", "example.com", "-a", "api-token", "-w"], environment: environment)
        #expect(locked.status == 36, "after ExecStopPost the keychain is locked: \(locked)")
        // The credential is the password: the keychain does not open with another one.
        let wrong = try cellRun(prefix + [keystone, "unlock-keychain", "-p", "other", "login.keychain-db"], environment: environment)
        #expect(wrong.status == 51, "another password is refused: \(wrong)")
    }

    // MARK: - Container

    /// The Dockerfile's `ENV` settings and its `CMD` (exec form).
    static func dockerfile() throws -> (environment: [String: String], command: [String]) {
        let text = try String(contentsOfFile: dockerfilePath, encoding: .utf8)
        var environment: [String: String] = [:]
        var command: [String] = []
        for line in text.split(separator: "\n") {
            if line.hasPrefix("ENV ") {
                let pair = line.dropFirst(4).split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                if pair.count == 2 { environment[pair[0]] = pair[1] }
            } else if line.hasPrefix("CMD ") {
                command = (try? JSONSerialization.jsonObject(with: Data(line.dropFirst(4).utf8)) as? [String]) ?? []
            }
        }
        return (environment, command)
    }

    /// Why the container recipe cannot run here, or nil.
    static var containerUnavailable: String? {
        if builtExecutable("no-keyring-exec") == nil { return "no-keyring-exec is not built (swift build --build-tests --traits NIO)" }
        return EnvironmentMatrixTests.otherUserUnavailable
    }

    @Test("the container recipe: the entry point and command, with the Dockerfile's environment, a volume and a secret file, under Docker's keyring-less seccomp filter, as a user with no home",
          .enabled(if: containerUnavailable == nil, Comment(rawValue: containerUnavailable ?? "")))
    func containerRecipe() throws {
        let keystone = try #require(Sandbox.binary, "the keystone binary is built by `swift build`")
        let noKeyring = try #require(builtExecutable("no-keyring-exec"))
        let setpriv = try #require(systemTool("setpriv"))
        let (dockerEnvironment, command) = try Self.dockerfile()
        #expect(dockerEnvironment["KEYSTONE_KEYCHAIN_DIR"] == "/var/lib/keystone")
        #expect(dockerEnvironment["KEYSTONE_PASSWORD_FILE"]?.hasPrefix("/run/secrets/") == true)
        #expect(!command.isEmpty, "the Dockerfile has a CMD in exec form")
        let user: uid_t = 10001  // the image's `app` user
        let box = try CellDirectory()
        defer { box.remove() }
        // The volume and the secret, where the container would have them mounted.
        let volume = try box.directory("volume", owner: user)
        _ = try box.directory("secrets", mode: 0o755)
        let secret = try box.file("secrets/keychain-password", "container-pw\n", owner: user)
        let agent = try box.directory("agent", owner: user)
        var environment = bareEnvironment(["PATH": try Self.binDirectory(box, keystone: keystone) + ":/usr/bin:/bin", "HOME": "/nonexistent",
                                           "KEYSTONE_AGENT_SOCKET": agent + "/agent.sock"])
        for (key, value) in dockerEnvironment {
            environment[key] = value.replacingOccurrences(of: "/var/lib/keystone", with: volume)
                .replacingOccurrences(of: "/run/secrets/keychain-password", with: secret)
        }
        let prefix = [noKeyring, setpriv, "--reuid=\(user)", "--regid=\(user)", "--clear-groups", Self.entrypointPath]
        // First run: the entry point creates the keychain on the volume; the token is stored through it.
        let store = try cellRun(prefix + ["keystone", "add-generic-password", "-s", "example.com", "-a", "api-token", "-w", "container-token", "app.keychain-db"],
                                environment: environment)
        #expect(store.status == 0 && !store.hung, "storing through the entry point: \(store)")
        #expect(FileManager.default.fileExists(atPath: volume + "/app.keychain-db"), "the keychain is on the volume")
        // A later run of the image's CMD reads it.
        let read = try cellRun(prefix + command, environment: environment)
        #expect(read.status == 0 && read.stdout == "container-token\n" && !read.hung, "the image's CMD: \(read)")
        _ = try cellRun([noKeyring, setpriv, "--reuid=\(user)", "--regid=\(user)", "--clear-groups", keystone, "lock-keychain", "app.keychain-db"],
                        environment: environment)
    }

    // MARK: - CI

    @Test("the CI recipe (create, unlock, add, find) passes with no terminal, on a host and under the container's seccomp filter")
    func ciRecipe() throws {
        let keystone = try #require(Sandbox.binary, "the keystone binary is built by `swift build`")
        let setsid = try #require(systemTool("setsid"), "setsid (util-linux)")
        var prefixes: [[String]] = [[setsid, "-w"]]
        if let noKeyring = builtExecutable("no-keyring-exec") { prefixes.append([noKeyring, setsid, "-w"]) }
        for (index, prefix) in prefixes.enumerated() {
            let box = try CellDirectory()
            defer { box.remove() }
            let environment = bareEnvironment([
                "PATH": try Self.binDirectory(box, keystone: keystone) + ":/usr/bin:/bin",
                "KEYSTONE_KEYCHAIN_DIR": try box.directory("keychains"),
                "KEYSTONE_PASSWORD_FILE": try box.file("password", "ci-pw\n"),
                "DEPLOY_TOKEN_FILE": try box.file("token", "ci-token\n"),
                "XDG_CONFIG_HOME": try box.directory("config"),
                "KEYSTONE_AGENT_SOCKET": try box.directory("agent") + "/agent.sock",
            ])
            let run = try cellRun(prefix + ["/bin/sh", Self.ciScriptPath], environment: environment)
            #expect(run.status == 0 && !run.hung && run.stdout.contains("read back"),
                    "the CI recipe \(index == 0 ? "on a host" : "under no-keyring-exec"): \(run)")
            #expect(!run.stdout.contains("ci-token") && !run.stderr.contains("ci-token"), "the token is never printed")
        }
    }
}
