import Foundation
import Testing

/// docker-credential-keystone through a real client of the docker-credential-helpers protocol: the Python `docker`
/// package's credential store (`docker.credentials.Store`), which runs `docker-credential-<name>` as the docker CLI
/// does (the docker CLI itself needs a daemon for `login`, and none runs here).
@Suite("docker-credential-keystone: docker's credential-helper protocol through a real client", .serialized)
struct DockerCredentialTests {
    /// A Python with the `docker` package (Debian's python3-docker, or pip's).
    static let python: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin"
        for candidate in [CredentialHome.search("python3", path), "/usr/bin/python3"].compactMap({ $0 }) {
            if let run = try? Run.launch(candidate, ["-c", "import docker.credentials"]), run.status == 0 { return candidate }
        }
        return nil
    }()
    static var skipReason: String? {
        if CredentialHome.binaries == nil { return "docker-credential-keystone is not built (swift build --build-tests)" }
        if python == nil { return "no Python with the docker package (apt-get install python3-docker)" }
        return nil
    }

    @Test("docker's credential store stores, gets, lists across registries and erases; identity tokens keep <token>; a miss is CredentialsNotFound",
          .disabled(if: skipReason != nil, Comment(rawValue: skipReason ?? "")))
    func pythonClient() throws {
        let home = try CredentialHome()
        defer { home.remove() }
        let script = """
        import json, sys
        from docker.credentials import Store, errors
        store = Store("keystone")
        store.store(server="https://index.docker.io/v1/", username="alice", secret="hub-pw")
        store.store(server="registry.example.com:5000", username="<token>", secret="identity-token-9")
        store.store(server="http://localhost:5001", username="bob", secret="local-pw")
        store.store(server="https://index.docker.io/v1/", username="alice2", secret="hub-pw-2")
        print(json.dumps(store.get("https://index.docker.io/v1/"), sort_keys=True))
        print(json.dumps(store.get("registry.example.com:5000"), sort_keys=True))
        print(json.dumps(store.list(), sort_keys=True))
        store.erase("http://localhost:5001")
        for server in ["http://localhost:5001", "https://nothing.example.com"]:
            try:
                store.get(server); print("FOUND", server)
            except errors.CredentialsNotFound:
                print("NOTFOUND", server)
        try:
            store.erase("http://localhost:5001"); print("ERASED-AGAIN")
        except errors.CredentialsNotFound:
            print("NOTFOUND-ERASE")
        """
        let run = try home.run(try #require(Self.python), ["-c", script])
        #expect(run.status == 0, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 6, "\(run.stdout)")
        guard lines.count == 6 else { return }
        // One credential per registry: the second store replaced the first.
        #expect(lines[0] == #"{"Secret": "hub-pw-2", "ServerURL": "https://index.docker.io/v1/", "Username": "alice2"}"#)
        #expect(lines[1] == #"{"Secret": "identity-token-9", "ServerURL": "registry.example.com:5000", "Username": "<token>"}"#)
        #expect(lines[2] == #"{"http://localhost:5001": "bob", "https://index.docker.io/v1/": "alice2", "registry.example.com:5000": "<token>"}"#)
        #expect(lines[3] == "NOTFOUND http://localhost:5001")
        #expect(lines[4] == "NOTFOUND https://nothing.example.com")
        #expect(lines[5] == "NOTFOUND-ERASE")
    }

    @Test("docker items are internet passwords marked as docker's (label, security domain), which git's helper never returns",
          .disabled(if: CredentialHome.binaries == nil))
    func itemShape() throws {
        let home = try CredentialHome()
        defer { home.remove() }
        let stored = try home.dockerHelper("store", #"{"ServerURL":"https://registry.example.com","Username":"carol","Secret":"reg-pw"}"#)
        #expect(stored.status == 0, "\(stored.stdout) \(stored.stderr)")
        let found = try home.run("keystone", ["find-internet-password", "-s", "registry.example.com", "-r", "htps", "-d", "docker", "-a", "carol", "-l", "Docker Credentials", "-w"])
        #expect(found.stdout == "reg-pw\n", "\(found.stderr)")
        let git = try home.gitHelper("get", ["protocol=https", "host=registry.example.com"])
        #expect(git.stdout.isEmpty)
        // git's item for the same host and user is another item.
        _ = try home.gitHelper("store", ["protocol=https", "host=registry.example.com", "username=carol", "password=git-pw"])
        #expect(try home.gitHelper("get", ["protocol=https", "host=registry.example.com"]).stdout.contains("password=git-pw"))
        #expect(try home.dockerHelper("get", "https://registry.example.com").stdout.contains(#""Secret":"reg-pw""#))
        // Bad input is reported on standard output (where docker reads it), exit 1.
        let bad = try home.dockerHelper("store", "not json")
        #expect(bad.status == 1 && bad.stdout.contains("not a JSON object"))
        #expect(try home.dockerHelper("version").stdout.hasPrefix("docker-credential-keystone"))
    }

    @Test("a locked keychain with no terminal: get answers 'credentials not found in native keychain' at once, the fix on standard error",
          .disabled(if: CredentialHome.binaries == nil))
    func lockedHeadless() throws {
        let home = try CredentialHome()
        defer { home.remove() }
        let keychain = try home.makeKeychain("ci.keychain-db", password: "kc-password", locked: false)
        let stored = try home.dockerHelper("store", #"{"ServerURL":"r.example.com","Username":"u","Secret":"locked-secret"}"#, changes: ["KEYSTONE_KEYCHAIN": keychain])
        #expect(stored.status == 0, "\(stored.stdout) \(stored.stderr)")
        #expect(try home.run("keystone", ["lock-keychain", keychain]).status == 0)
        let start = DispatchTime.now()
        let get = try home.run("/usr/bin/setsid", ["-w", "docker-credential-keystone", "get"], input: "r.example.com\n", changes: ["KEYSTONE_KEYCHAIN": keychain])
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
        #expect(get.status == 1)
        #expect(get.stdout == "credentials not found in native keychain\n")
        #expect(get.stderr.contains("is locked and there is no terminal"))
        #expect(!get.stderr.contains("locked-secret") && !get.stdout.contains("locked-secret"))
        #expect(seconds < failFastLimit, "answered in \(seconds) s")
        // A store needs the keychain unlocked: refused at once, the message on standard output for docker.
        let store = try home.run("/usr/bin/setsid", ["-w", "docker-credential-keystone", "store"],
                                 input: #"{"ServerURL":"r.example.com","Username":"u","Secret":"new-secret"}"#, changes: ["KEYSTONE_KEYCHAIN": keychain])
        #expect(store.status == 1 && store.stdout.contains("is locked"))
        #expect(!store.stdout.contains("new-secret") && !store.stderr.contains("new-secret"))
    }

    @Test("install docker sets credsStore keeping the rest of config.json; --uninstall removes only it",
          .disabled(if: CredentialHome.binaries == nil))
    func installDocker() throws {
        let home = try CredentialHome()
        defer { home.remove() }
        let config = home.root.appendingPathComponent("docker/config.json")
        try FileManager.default.createDirectory(at: config.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(#"{"auths": {"r.example.com": {}}, "credHelpers": {"gcr.io": "gcloud"}, "psFormat": "table {{.ID}}"}"#.utf8).write(to: config)
        let install = try home.run("keystone", ["credential-helper", "install", "docker"])
        #expect(install.status == 0, "\(install.stderr)")
        let installed = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: config)) as? [String: Any])
        #expect(installed["credsStore"] as? String == "keystone")
        #expect((installed["credHelpers"] as? [String: String]) == ["gcr.io": "gcloud"])
        #expect(installed["psFormat"] as? String == "table {{.ID}}")
        #expect(installed["auths"] is [String: Any])
        let mode = try FileManager.default.attributesOfItem(atPath: config.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let uninstall = try home.run("keystone", ["credential-helper", "install", "docker", "--uninstall"])
        #expect(uninstall.status == 0, "\(uninstall.stderr)")
        let after = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: config)) as? [String: Any])
        #expect(after["credsStore"] == nil)
        #expect((after["credHelpers"] as? [String: String]) == ["gcr.io": "gcloud"])
        // A file that is not JSON is left alone.
        try Data("not json".utf8).write(to: config)
        let refused = try home.run("keystone", ["credential-helper", "install", "docker"])
        #expect(refused.status == 1 && refused.stderr.contains("not a JSON object"))
        #expect(try String(contentsOf: config, encoding: .utf8) == "not json")
    }

    @Test("install git sets credential.helper keystone (with --keychain when given), keeps other helpers; --uninstall removes it",
          .disabled(if: CredentialHome.binaries == nil || GitCredentialTests.git == nil))
    func installGit() throws {
        let home = try CredentialHome()
        defer { home.remove() }
        _ = try home.run("git", ["config", "--global", "--add", "credential.helper", "cache"])
        #expect(try home.run("keystone", ["credential-helper", "install", "git"]).status == 0)
        #expect(try home.run("keystone", ["credential-helper", "install", "git", "--keychain", "secret-service:"]).status == 0)
        let helpers = try home.run("git", ["config", "--global", "--get-all", "credential.helper"]).stdout
        #expect(helpers == "cache\nkeystone --keychain 'secret-service:'\n")
        #expect(try home.run("keystone", ["credential-helper", "install", "git", "--uninstall"]).status == 0)
        #expect(try home.run("git", ["config", "--global", "--get-all", "credential.helper"]).stdout == "cache\n")
    }
    @Test("doctor reports whether git and docker use keystone and whether their helpers are on PATH",
          .disabled(if: CredentialHome.binaries == nil || GitCredentialTests.git == nil))
    func doctorSection() throws {
        let home = try CredentialHome()
        defer { home.remove() }
        func findings() throws -> [String: String] {
            let run = try home.run("keystone", ["doctor", "--json"])
            let object = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.stdout) \(run.stderr)")
            let list = try #require(object["credentialHelpers"] as? [[String: Any]])
            return Dictionary(uniqueKeysWithValues: list.map { ($0["check"] as? String ?? "", $0["severity"] as? String ?? "") })
        }
        #expect(try findings() == ["git": "note", "docker": "note"])
        #expect(try home.run("keystone", ["credential-helper", "install", "docker"]).status == 0)
        #expect(try home.run("keystone", ["credential-helper", "install", "git"]).status == 0)
        #expect(try findings() == ["git": "ok", "docker": "ok"])
        // Set up, but the helper is not on PATH: a warning.
        let path = try #require(CredentialHome.search("git", home.environment["PATH"] ?? "")).split(separator: "/").dropLast().joined(separator: "/")
        let run = try home.run(try #require(CredentialHome.binaries) + "/keystone", ["doctor"], changes: ["PATH": "/" + path])
        #expect(run.stdout.contains("warning  git: is set to use keystone, but git-credential-keystone is not on PATH"), "\(run.stdout)")
    }
}
