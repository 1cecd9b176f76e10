import Foundation
import SecretServiceDaemon
import Testing

/// The helpers on a private Secret Service (`--keychain secret-service:`), with the helpers people already have there:
/// git-credential-libsecret (built by the test from the source Debian's git package ships) and
/// docker-credential-secretservice (Debian's golang-docker-credential-helpers).
@Suite("credential helpers on the Secret Service: interop with git-credential-libsecret and docker-credential-secretservice", .serialized)
struct SecretServiceCredentialTests {
    static let libsecretSource = "/usr/share/doc/git/contrib/credential/libsecret/git-credential-libsecret.c"
    static let dockerSecretService = ["/usr/bin/docker-credential-secretservice"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// git's libsecret helper, compiled once per test process.
    static let libsecretHelper: String? = {
        guard FileManager.default.fileExists(atPath: libsecretSource) else { return nil }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("git-credential-libsecret-\(getpid())").path
        let command = "cc -o '\(output)' '\(libsecretSource)' $(pkg-config --cflags --libs libsecret-1 glib-2.0)"
        guard let run = try? Run.launch("/bin/sh", ["-c", command]), run.status == 0 else { return nil }
        return output
    }()

    static var skipReason: String? {
        if let reason = SecretServiceDaemon.unavailableReason { return reason }
        if CredentialHome.binaries == nil { return "the credential helpers are not built (swift build --build-tests)" }
        return nil
    }

    /// The daemon's environment with the helpers' `PATH` and git's test settings.
    func environment(_ daemon: SecretServiceDaemon, _ home: CredentialHome) -> [String: String?] {
        var changes: [String: String?] = [:]
        for (key, value) in daemon.environment where key.hasPrefix("DBUS") || key.hasPrefix("XDG_RUNTIME") { changes[key] = value }
        return changes
    }

    func request(_ lines: String...) -> String { lines.joined(separator: "\n") + "\n\n" }

    @Test("git-credential-libsecret finds what git-credential-keystone stored on the Secret Service, and the reverse (port, path, erase)",
          .disabled(if: skipReason != nil || libsecretHelper == nil, Comment(rawValue: skipReason ?? "git's libsecret helper could not be compiled from \(libsecretSource) (Debian's git package ships it)")))
    func gitInterop() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        let home = try CredentialHome()
        defer { home.remove() }
        let env = environment(daemon, home)
        let libsecret = try #require(Self.libsecretHelper)
        let keystone = ["--keychain", "secret-service:"]

        let stored = try home.gitHelper("store", ["protocol=https", "host=git.example.com", "username=alice", "password=from-keystone"], arguments: keystone, changes: env)
        #expect(stored.status == 0, "\(stored.stderr)")
        let byLibsecret = try home.run(libsecret, ["get"], input: request("protocol=https", "host=git.example.com"), changes: env)
        #expect(byLibsecret.stdout.contains("username=alice") && byLibsecret.stdout.contains("password=from-keystone"), "\(byLibsecret.stdout) \(byLibsecret.stderr)")

        _ = try home.run(libsecret, ["store"], input: request("protocol=https", "host=other.example.com:8443", "path=team/repo.git", "username=bob", "password=from-libsecret"), changes: env)
        let byKeystone = try home.gitHelper("get", ["protocol=https", "host=other.example.com:8443", "path=team/repo.git"], arguments: keystone, changes: env)
        #expect(byKeystone.stdout == "username=bob\npassword=from-libsecret\n", "\(byKeystone.stderr)")
        // Another port is another credential for both.
        #expect(try home.gitHelper("get", ["protocol=https", "host=other.example.com:9443", "path=team/repo.git"], arguments: keystone, changes: env).stdout.isEmpty)

        // Through real git, with the helper line `install --keychain` writes.
        let fill = try home.run("git", ["-c", "credential.helper=keystone --keychain secret-service:", "credential", "fill"],
                                input: request("protocol=https", "host=git.example.com"), changes: env)
        #expect(fill.stdout.contains("password=from-keystone"), "\(fill.stderr)")

        // Erase by keystone of libsecret's item (holding git's password): libsecret no longer finds it.
        _ = try home.gitHelper("erase", ["protocol=https", "host=other.example.com:8443", "path=team/repo.git", "username=bob", "password=from-libsecret"], arguments: keystone, changes: env)
        #expect(try home.run(libsecret, ["get"], input: request("protocol=https", "host=other.example.com:8443", "path=team/repo.git"), changes: env).stdout.isEmpty)
        // Erase by libsecret of keystone's item.
        _ = try home.run(libsecret, ["erase"], input: request("protocol=https", "host=git.example.com", "username=alice"), changes: env)
        #expect(try home.gitHelper("get", ["protocol=https", "host=git.example.com"], arguments: keystone, changes: env).stdout.isEmpty)
    }

    @Test("docker-credential-secretservice finds what docker-credential-keystone stored on the Secret Service, and the reverse (get, list, erase)",
          .disabled(if: skipReason != nil || dockerSecretService == nil, Comment(rawValue: skipReason ?? "docker-credential-secretservice is not installed (apt-get install golang-docker-credential-helpers)")))
    func dockerInterop() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        let home = try CredentialHome()
        defer { home.remove() }
        var env = environment(daemon, home)
        env["KEYSTONE_KEYCHAIN"] = "secret-service:"
        let other = try #require(Self.dockerSecretService)

        let stored = try home.dockerHelper("store", #"{"ServerURL":"https://registry.example.com","Username":"alice","Secret":"from-keystone"}"#, changes: env)
        #expect(stored.status == 0, "\(stored.stdout) \(stored.stderr)")
        let got = try home.run(other, ["get"], input: "https://registry.example.com\n", changes: env)
        #expect(got.stdout.contains(#""Username":"alice""#) && got.stdout.contains(#""Secret":"from-keystone""#), "\(got.stdout) \(got.stderr)")

        _ = try home.run(other, ["store"], input: #"{"ServerURL":"localhost:5000","Username":"<token>","Secret":"identity-from-secretservice"}"#, changes: env)
        let mine = try home.dockerHelper("get", "localhost:5000", changes: env)
        #expect(mine.stdout == #"{"Secret":"identity-from-secretservice","ServerURL":"localhost:5000","Username":"<token>"}"# + "\n", "\(mine.stderr)")

        let listed = try home.dockerHelper("list", changes: env)
        #expect(listed.stdout == #"{"https://registry.example.com":"alice","localhost:5000":"<token>"}"# + "\n", "\(listed.stderr)")
        let theirList = try home.run(other, ["list"], changes: env)
        let theirs = try JSONSerialization.jsonObject(with: Data(theirList.stdout.utf8)) as? [String: String]
        #expect(theirs == ["https://registry.example.com": "alice", "localhost:5000": "<token>"], "\(theirList.stdout)")

        // A second store replaces (one credential per registry), seen by the other helper.
        _ = try home.dockerHelper("store", #"{"ServerURL":"https://registry.example.com","Username":"alice2","Secret":"second"}"#, changes: env)
        #expect(try home.run(other, ["get"], input: "https://registry.example.com\n", changes: env).stdout.contains(#""Secret":"second""#))

        _ = try home.dockerHelper("erase", "localhost:5000", changes: env)
        let gone = try home.run(other, ["get"], input: "localhost:5000\n", changes: env)
        #expect(gone.status != 0 && gone.stdout.contains("credentials not found in native keychain"))
        _ = try home.run(other, ["erase"], input: "https://registry.example.com\n", changes: env)
        #expect(try home.dockerHelper("get", "https://registry.example.com", changes: env).stdout == "credentials not found in native keychain\n")
    }

    @Test("a locked collection: git gets no credential and docker 'not found' at once, no prompt, the fix on standard error",
          .disabled(if: skipReason != nil, Comment(rawValue: skipReason ?? "")))
    func lockedCollection() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        let home = try CredentialHome()
        defer { home.remove() }
        let env = environment(daemon, home)
        _ = try home.gitHelper("store", ["protocol=https", "host=l.example.com", "username=u", "password=locked-away"], arguments: ["--keychain", "secret-service:"], changes: env)
        try daemon.lockDefaultCollection()
        let start = DispatchTime.now()
        let get = try home.gitHelper("get", ["protocol=https", "host=l.example.com"], arguments: ["--keychain", "secret-service:"], changes: env)
        let docker = try home.dockerHelper("get", "r.example.com", arguments: ["--keychain", "secret-service:"], changes: env)
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
        #expect(get.status == 0 && get.stdout.isEmpty)
        #expect(get.stderr.contains("is locked") && get.stderr.contains("keystone unlock-keychain secret-service:"))
        #expect(docker.status == 1 && docker.stdout == "credentials not found in native keychain\n")
        #expect(seconds < 2 * failFastLimit, "both answered in \(seconds) s")
    }
}
