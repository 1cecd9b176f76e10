import Foundation
import SecretServiceDaemon
import Testing

private let daemonSkipReason: String? = SecretServiceDaemon.unavailableReason

@Suite("keystone CLI: import --from secret-service (secret-tool and Python keyring items, a private daemon)",
       .enabled(if: daemonSkipReason == nil, Comment(rawValue: daemonSkipReason ?? "")))
struct ImportFromSecretServiceTests {
    @Test("items written by secret-tool and Python keyring become generic passwords; Keystone's own items are not imported")
    func secretToolAndKeyring() throws {
        let daemon = try SecretServiceDaemon.start()
        defer { daemon.stop() }
        let stored = try daemon.run(["secret-tool", "store", "--label=Work VPN", "service", "vpn.example", "account", "alice"], input: Data("vpn-pw".utf8))
        #expect(stored.status == 0, "\(String(decoding: stored.stderr, as: UTF8.self))")
        let python = try daemon.run(["env", "PYTHON_KEYRING_BACKEND=keyring.backends.SecretService.Keyring", "/usr/bin/python3", "-c",
                                     "import keyring, sys; keyring.set_password('pypi.example', 'bob', sys.stdin.read())"], input: Data("py-pw".utf8))
        #expect(python.status == 0, "\(String(decoding: python.stderr, as: UTF8.self))")

        var environment = daemon.environment
        for key in environment.keys where key.hasPrefix("KEYSTONE_") { environment[key] = nil }
        let binary = try #require(Sandbox.binary, "the keystone binary is built by `swift build`")
        let own = try Run.launch(binary, ["add-generic-password", "-s", "keystone.own", "-a", "k", "-w", "own-pw", "secret-service:"], environment: environment)
        #expect(own.status == 0, "\(own.stderr)")

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-import-ss-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let keychain = dir.appendingPathComponent("target.keychain-db").path
        let created = try Run.launch(binary, ["create-keychain", "-p", "", keychain], environment: environment)
        #expect(created.status == 0, "\(created.stderr)")

        let run = try Run.launch(binary, ["import", "--from", "secret-service:", "-k", keychain], environment: environment)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("add genp service=\"vpn.example\" account=\"alice\""))
        #expect(run.stdout.contains("add genp service=\"pypi.example\" account=\"bob\""))
        #expect(!run.stdout.contains("keystone.own"))
        for secret in ["vpn-pw", "py-pw", "own-pw"] { #expect(!run.stdout.contains(secret) && !run.stderr.contains(secret)) }
        let vpn = try Run.launch(binary, ["find-generic-password", "-s", "vpn.example", "-a", "alice", "-w", keychain], environment: environment)
        #expect(vpn.stdout == "vpn-pw\n")
        let attributes = try Run.launch(binary, ["find-generic-password", "-s", "vpn.example", "-a", "alice", keychain], environment: environment)
        #expect(attributes.stdout.contains("0x00000007 <blob>=\"Work VPN\""))
        let pypi = try Run.launch(binary, ["find-generic-password", "-s", "pypi.example", "-a", "bob", "-w", keychain], environment: environment)
        #expect(pypi.stdout == "py-pw\n")
    }
}
