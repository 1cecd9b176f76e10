#if os(Linux)
import Foundation
import KeychainEngine
@testable import KeychainEtcd
import Testing

@Suite("etcd configuration: URLs and validation")
struct EtcdConfigurationTests {
    private func status(of body: () throws -> Void) -> Int32? {
        do {
            try body()
            return nil
        } catch let error as EngineError {
            return error.status
        } catch {
            return -1
        }
    }

    private func reason(of body: () throws -> Void) -> String {
        do {
            try body()
            return ""
        } catch let error as EngineError {
            return error.reason
        } catch {
            return "\(error)"
        }
    }

    @Test("a plain URL gives its endpoints in order, the default port, the name and the default timeout")
    func plainURL() throws {
        let configuration = try EtcdConfiguration(url: "etcd://10.0.0.1:2380,db.example.com,[::1]:12379/team-keys", environment: [:])
        #expect(configuration.endpoints == [.init(host: "10.0.0.1", port: 2380), .init(host: "db.example.com", port: 2379),
                                            .init(host: "::1", port: 12379)])
        #expect(configuration.name == "team-keys")
        #expect(configuration.tls == nil)
        #expect(configuration.user == nil && configuration.password == nil)
        #expect(configuration.timeout == 5)
        #expect(configuration.url == "etcd://10.0.0.1:2380,db.example.com:2379,[::1]:12379/team-keys")
        #expect(configuration.description == configuration.url)
        #expect(configuration.endpoints[2].description == "[::1]:12379")
    }

    @Test("user and timeout come from the query; the password only from KEYSTONE_ETCD_PASSWORD and never into the URL or description")
    func userAndPassword() throws {
        let configuration = try EtcdConfiguration(url: "etcd://127.0.0.1:2379/k.1_A?user=svc&timeout=1.5",
                                                  environment: ["KEYSTONE_ETCD_PASSWORD": "s3cr3t-Pa55"])
        #expect(configuration.user == "svc")
        #expect(configuration.password == "s3cr3t-Pa55")
        #expect(configuration.timeout == 1.5)
        #expect(configuration.url == "etcd://127.0.0.1:2379/k.1_A?user=svc&timeout=1.5")
        #expect(!configuration.description.contains("s3cr3t"))
        #expect(!"\(configuration)".contains("s3cr3t"))
        // The canonical URL reads back to the same configuration.
        #expect(try EtcdConfiguration(url: configuration.url, environment: ["KEYSTONE_ETCD_PASSWORD": "s3cr3t-Pa55"]) == configuration)
    }

    @Test("a user without KEYSTONE_ETCD_PASSWORD in the environment is refused, naming the variable")
    func userWithoutPassword() {
        let message = reason { _ = try EtcdConfiguration(url: "etcd://127.0.0.1/k?user=svc", environment: [:]) }
        #expect(message.contains("KEYSTONE_ETCD_PASSWORD"))
        #expect(status { _ = try EtcdConfiguration(endpoints: [.init(host: "h", port: 1)], name: "k", user: "u") } == Status.param)
        #expect(status { _ = try EtcdConfiguration(endpoints: [.init(host: "h", port: 1)], name: "k", password: "p") } == Status.param)
    }

    @Test("a password in the URL is refused with errSecParam and the message never repeats it")
    func passwordInURL() {
        for url in ["etcd://svc:hunter2@127.0.0.1:2379/k", "etcds://svc:hunter2@h1,h2/k?ca=/ca.pem", "etcd://127.0.0.1/k?password=hunter2"] {
            var caught: EngineError?
            do { _ = try EtcdConfiguration(url: url, environment: ["KEYSTONE_ETCD_PASSWORD": "x"]) } catch let error as EngineError { caught = error } catch {}
            #expect(caught?.status == Status.param, "\(url)")
            #expect(caught?.reason.contains("password") == true)
            #expect(caught?.reason.contains("hunter2") == false)
        }
        #expect(status { _ = try EtcdConfiguration(url: "etcd://svc@127.0.0.1/k", environment: [:]) } == Status.param)
    }

    @Test("etcds:// carries the CA, the client certificate and its key; etcd:// refuses them")
    func tlsURL() throws {
        let configuration = try EtcdConfiguration(
            url: "etcds://127.0.0.1:2379,127.0.0.2:2379/k?ca=/etc/etcd/ca.pem&cert=/etc/etcd/client%20cert.pem&key=/etc/etcd/client.key",
            environment: [:])
        #expect(configuration.tls == .init(caFile: "/etc/etcd/ca.pem", certificateFile: "/etc/etcd/client cert.pem", keyFile: "/etc/etcd/client.key"))
        #expect(configuration.url.hasPrefix("etcds://127.0.0.1:2379,127.0.0.2:2379/k?ca=/etc/etcd/ca.pem&cert="))
        #expect(try EtcdConfiguration(url: configuration.url, environment: [:]) == configuration)
        // System roots when no CA is given.
        #expect(try EtcdConfiguration(url: "etcds://h/k", environment: [:]).tls == .init())
        #expect(status { _ = try EtcdConfiguration(url: "etcd://h/k?ca=/ca.pem", environment: [:]) } == Status.param)
        #expect(status { _ = try EtcdConfiguration(url: "etcds://h/k?cert=/c.pem", environment: [:]) } == Status.param)
        #expect(status { _ = try EtcdConfiguration(url: "etcds://h/k?key=/k.pem", environment: [:]) } == Status.param)
    }

    @Test("bad names are refused: empty, too long, characters outside A-Z a-z 0-9 . _ -")
    func badNames() throws {
        for url in ["etcd://h:1/", "etcd://h:1", "etcd://h:1/a/b", "etcd://h:1/a b", "etcd://h:1/é", "etcd://h:1/a%2Fb",
                    "etcd://h:1/" + String(repeating: "a", count: 129)] {
            #expect(status { _ = try EtcdConfiguration(url: url, environment: [:]) } == Status.param, "\(url)")
        }
        #expect(try EtcdConfiguration(url: "etcd://h:1/" + String(repeating: "a", count: 128), environment: [:]).name.count == 128)
    }

    @Test("ports 0, 65536, -1 and abc are refused; 1 and 65535 are accepted")
    func ports() throws {
        for port in ["0", "65536", "-1", "abc", "", "99999999999999999999"] {
            #expect(status { _ = try EtcdConfiguration(url: "etcd://127.0.0.1:\(port)/k", environment: [:]) } == Status.param, "\(port)")
        }
        #expect(status { _ = try EtcdConfiguration(endpoints: [.init(host: "h", port: 0)], name: "k") } == Status.param)
        #expect(try EtcdConfiguration(url: "etcd://127.0.0.1:1,127.0.0.1:65535/k", environment: [:]).endpoints.map(\.port) == [1, 65535])
    }

    @Test("malformed URLs are refused: other schemes, empty or duplicate endpoints, bare IPv6, unknown or repeated parameters")
    func malformed() {
        for url in ["http://h/k", "etcd:/h/k", "etcd:///k", "etcd://h1,,h2/k", "etcd://h1:2379,h1:2379/k", "etcd://H1,h1/k",
                    "etcd://::1/k", "etcd://[::1/k", "etcd://h_1/k", "etcd://h/k?foo=1", "etcd://h/k?user=a&user=b",
                    "etcd://h/k?timeout", "etcd://h/k?timeout=", "etcd://h/k#frag"] {
            #expect(status { _ = try EtcdConfiguration(url: url, environment: ["KEYSTONE_ETCD_PASSWORD": "p"]) } == Status.param, "\(url)")
        }
        #expect(reason { _ = try EtcdConfiguration(url: "etcd://h1:2379,h1:2379/k", environment: [:]) }.contains("twice"))
        #expect(status { _ = try EtcdConfiguration(endpoints: [], name: "k") } == Status.param)
    }

    @Test("the timeout must lie within 0.1...600 seconds")
    func timeouts() throws {
        for timeout in ["0", "0.05", "601", "-1", "abc", "nan", "inf"] {
            #expect(status { _ = try EtcdConfiguration(url: "etcd://h/k?timeout=\(timeout)", environment: [:]) } == Status.param, "\(timeout)")
        }
        #expect(try EtcdConfiguration(url: "etcd://h/k?timeout=0.1", environment: [:]).timeout == 0.1)
        #expect(try EtcdConfiguration(url: "etcd://h/k?timeout=600", environment: [:]).url == "etcd://h:2379/k?timeout=600")
    }

    @Test("the prefix end increments the last byte below 0xFF and drops trailing 0xFF bytes")
    func prefixEnd() {
        #expect(EtcdClient.prefixEnd(Data([0x61, 0x62])) == Data([0x61, 0x63]))
        #expect(EtcdClient.prefixEnd(Data([0x61, 0xFF, 0xFF])) == Data([0x62]))
        #expect(EtcdClient.prefixEnd(Data([0xFF])) == Data([0]))
        #expect(EtcdClient.prefixEnd(Data()) == Data([0]))
    }

    @Test("etcd errors map to the keychain's status codes with messages that say what to do")
    func engineErrors() {
        #expect(EtcdError.unavailable("etcd at a:1 did not answer").engineError.status == Status.notAvailable)
        let indeterminate = EtcdError.indeterminate("etcd at a:1 got a write and did not answer it").engineError
        #expect(indeterminate.status == Status.notAvailable)
        #expect(indeterminate.reason.contains("may or may not have been applied"))
        #expect(EtcdError.compacted.engineError.status == Status.notAvailable)
        #expect(EtcdError.tooManyOperations("x").engineError.status == Status.quotaExceeded)
        #expect(EtcdError.requestTooLarge("x").engineError.status == Status.dataTooLarge)
        #expect(EtcdError.authenticationFailed("x").engineError.status == Status.authFailed)
        #expect(EtcdError.permissionDenied("x").engineError.status == Status.wrPerm)
        #expect(EtcdError.server(code: 2, message: "x").engineError.status == Status.io)
    }

    @Test("the client refuses unreadable TLS files with errSecParam naming the file")
    func unreadableTLSFiles() throws {
        let missing = "/nonexistent/keystone-ca.pem"
        let configuration = try EtcdConfiguration(endpoints: [.init(host: "127.0.0.1", port: 2379)], name: "k",
                                                  tls: .init(caFile: missing))
        var caught: EngineError?
        do { _ = try EtcdClient(configuration: configuration) } catch let error as EngineError { caught = error }
        #expect(caught?.status == Status.param)
        #expect(caught?.reason.contains(missing) == true)

        let notPEM = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-not-pem-\(UUID().uuidString).pem")
        try Data("not a certificate".utf8).write(to: notPEM)
        defer { try? FileManager.default.removeItem(at: notPEM) }
        let bad = try EtcdConfiguration(endpoints: [.init(host: "127.0.0.1", port: 2379)], name: "k",
                                        tls: .init(certificateFile: notPEM.path, keyFile: notPEM.path))
        caught = nil
        do { _ = try EtcdClient(configuration: bad) } catch let error as EngineError { caught = error }
        #expect(caught?.status == Status.param)
        #expect(caught?.reason.contains(notPEM.path) == true)
    }
}
#endif
