import Foundation
import KeychainEngine
import KeychainFile
import KeychainSealing
import Testing

@Suite("Unlock agent: its protocol, its location, where an unlock's keys are kept")
struct UnlockAgentProtocolTests {
    @Test("requests survive encoding; malformed ones (unknown operation, foreign name, oversized payload, trailing bytes) are refused")
    func requests() {
        let requests: [UnlockAgentProtocol.Request] = [
            .ping, .get(name: "keystone:abc:full"), .remove(name: "keystone:abc:afu"),
            .put(name: "keystone:abc:full", ttl: 300, payload: [1, 2, 3]),
        ]
        for request in requests {
            let frame = request.encoded()
            #expect(UnlockAgentProtocol.Request.decode(Array(frame.dropFirst(4))) == request)
        }
        func body(_ request: UnlockAgentProtocol.Request) -> [UInt8] { Array(request.encoded().dropFirst(4)) }
        #expect(UnlockAgentProtocol.Request.decode([0x5A]) == nil)
        #expect(UnlockAgentProtocol.Request.decode(body(.get(name: "other:abc"))) == nil)
        #expect(UnlockAgentProtocol.Request.decode(body(.get(name: "keystone:x")) + [0]) == nil)
        #expect(UnlockAgentProtocol.Request.decode(body(.put(name: "keystone:x", ttl: 1, payload: [UInt8](repeating: 7, count: UnlockAgentProtocol.maximumPayload + 1)))) == nil)
        #expect(UnlockAgentProtocol.Request.decode(body(.ping) + [0]) == nil)
    }

    @Test("the socket is KEYSTONE_AGENT_SOCKET, else under XDG_RUNTIME_DIR, else a per-user directory in the temporary directory")
    func location() {
        #expect(UnlockAgentLocation.resolve(["KEYSTONE_AGENT_SOCKET": "/s/a.sock", "XDG_RUNTIME_DIR": "/run/user/1"]).socket == "/s/a.sock")
        #expect(UnlockAgentLocation.resolve(["XDG_RUNTIME_DIR": "/run/user/1"]).socket == "/run/user/1/keystone/agent.sock")
        #expect(UnlockAgentLocation.resolve(["TMPDIR": "/var/tmp"]).socket == "/var/tmp/keystone-\(geteuid())/agent.sock")
        #expect(UnlockAgentLocation.resolve([:]).socket == "/tmp/keystone-\(geteuid())/agent.sock")
        #expect(UnlockAgentLocation.resolve(["XDG_RUNTIME_DIR": "relative"]).socket == "/tmp/keystone-\(geteuid())/agent.sock")
        #expect(UnlockAgentLocation.isDisabled(["KEYSTONE_AGENT": "0"]))
        #expect(!UnlockAgentLocation.isDisabled([:]))
    }

    @Test("a directory open to others, a symbolic link or a missing one is refused by name; a private one is accepted")
    func directoryChecks() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-agentdir-\(UUID().uuidString)").path
        #expect(mkdir(root, 0o700) == 0)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let fresh = UnlockAgentLocation(socket: root + "/fresh/agent.sock")
        #expect(throws: UnlockAgentError.self) { try fresh.checkDirectory() }
        try fresh.prepareDirectory()
        try fresh.checkDirectory()
        #expect(mkdir(root + "/open", 0o700) == 0 && chmod(root + "/open", 0o755) == 0)
        do {
            try UnlockAgentLocation(socket: root + "/open/agent.sock").prepareDirectory()
            Issue.record("a directory open to others was accepted")
        } catch {
            #expect(error.kind == .unsafeDirectory && error.reason.contains(root + "/open"))
            #expect(error.engineError.status == Status.wrPerm)
        }
        #expect(symlink(root + "/fresh", root + "/link") == 0)
        do {
            try UnlockAgentLocation(socket: root + "/link/agent.sock").checkDirectory()
            Issue.record("a symbolic link was accepted")
        } catch {
            #expect(error.kind == .unsafeDirectory && error.reason.contains("symbolic link"))
        }
    }

    @Test("where the kernel keyring works, an unlock's keys are kept there, and the file says so")
    func sharingReported() throws {
        guard KeyringCache.isAvailable else {
            print("skipped: the kernel keyring is refused in this process (the agent path is covered by UnlockAgentCLITests)")
            return
        }
        let dir = TempDir()
        let file = try KeychainFile.create(at: dir.path(), password: "pw")
        #expect(file.unlockSharing == .kernelKeyring)
        file.lock()
        #expect(file.unlockSharing == nil)
        try file.unlock(password: "pw")
        #expect(file.unlockSharing == .kernelKeyring)
        #expect(file.unlockSharing?.persists == true)
        file.lock()
    }

    @Test("with no agent listening, a call to it fails at once as not running")
    func noAgent() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-agentdir-\(UUID().uuidString)").path
        #expect(mkdir(root, 0o700) == 0)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let client = UnlockAgentClient(location: UnlockAgentLocation(socket: root + "/agent.sock"))
        do {
            _ = try client.ping()
            Issue.record("a ping with no agent succeeded")
        } catch {
            #expect(error.kind == .notRunning)
        }
    }
}
