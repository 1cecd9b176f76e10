import EtcdCluster
import Foundation
import Testing

/// The credential helpers on an etcd keychain (`--keychain etcd://…`, `KEYSTONE_KEYCHAIN=etcd://…`), on the shared
/// private cluster of the etcd tests.
@Suite("credential helpers on an etcd keychain", .serialized)
struct EtcdCredentialTests {
    static var skipReason: String? {
        if CredentialHome.binaries == nil { return "the credential helpers are not built (swift build --build-tests)" }
        return EtcdTestCluster.unavailableReason
    }

    @Test("git's and docker's helpers store and get on an etcd keychain; once it is locked they answer at once without a terminal",
          .disabled(if: skipReason != nil, Comment(rawValue: skipReason ?? "")))
    func roundTripAndLocked() throws {
        let cluster = try EtcdTestCluster.shared()
        let home = try CredentialHome()
        defer { home.remove() }
        let url = cluster.url(name: "credentials-\(UUID().uuidString.prefix(8).lowercased())")
        let created = try home.run("keystone", ["create-keychain", url], input: "etcd-kc-pass\n")
        try #require(created.status == 0, "create-keychain: \(created.stderr)")

        let stored = try home.gitHelper("store", ["protocol=https", "host=e.example.com", "username=u", "password=etcd-git-pw"], arguments: ["--keychain", url])
        #expect(stored.status == 0, "\(stored.stderr)")
        #expect(try home.gitHelper("get", ["protocol=https", "host=e.example.com"], arguments: ["--keychain", url]).stdout == "username=u\npassword=etcd-git-pw\n")
        let docker = try home.dockerHelper("store", #"{"ServerURL":"r.example.com","Username":"d","Secret":"etcd-docker-pw"}"#, changes: ["KEYSTONE_KEYCHAIN": url])
        #expect(docker.status == 0, "\(docker.stdout) \(docker.stderr)")
        #expect(try home.dockerHelper("get", "r.example.com", changes: ["KEYSTONE_KEYCHAIN": url]).stdout.contains(#""Secret":"etcd-docker-pw""#))

        #expect(try home.run("keystone", ["lock-keychain", url]).status == 0)
        let get = try home.run("/usr/bin/setsid", ["-w", "git-credential-keystone", "--keychain", url, "get"],
                               input: "protocol=https\nhost=e.example.com\n\n", changes: ["GIT_TERMINAL_PROMPT": nil])
        #expect(get.status == 0 && get.stdout.isEmpty)
        #expect(get.stderr.contains("is locked and there is no terminal"), "\(get.stderr)")
        #expect(!get.stderr.contains("etcd-git-pw") && !get.stderr.contains("etcd-kc-pass"))
    }
}
