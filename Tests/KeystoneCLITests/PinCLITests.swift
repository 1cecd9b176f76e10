#if !canImport(Darwin)
import Foundation
import Testing
import TLSTestServer

/// Runs blocking work (a child process) on a thread of its own, off Swift's cooperative pool.
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

@Suite("keystone pin: SPKI pins of a server's chain and of certificate files")
struct PinCLITests {
    /// The pin openssl computes for a PEM certificate file, or nil without openssl.
    static func opensslPin(_ pemFile: String) throws -> String? {
        let openssl = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let openssl else { return nil }
        let pipeline = "\(openssl) x509 -pubkey -noout -in '\(pemFile)' | \(openssl) pkey -pubin -outform der | \(openssl) dgst -sha256 -binary | base64"
        let run = try Run.launch("/bin/sh", ["-c", pipeline])
        #expect(run.status == 0, "\(run.stderr)")
        return run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static var hasOpenSSL: Bool {
        ["/usr/bin/openssl", "/usr/local/bin/openssl"].contains { FileManager.default.isExecutableFile(atPath: $0) }
    }

    @Test("keystone pin HOST:PORT prints the presented chain's pins, the same as openssl's pipeline and as pin --file",
          .enabled(if: hasOpenSSL, "openssl is not installed: the pins are compared with openssl's"))
    func serverPinsMatchOpenSSL() async throws {
        let box = Sandbox()
        try FileManager.default.createDirectory(at: box.root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: box.root) }
        let pki = try TestPKI(name: "cli")
        let leaf = try pki.leaf(hosts: ["pin.example.test"])
        let leafFile = box.root.appendingPathComponent("leaf.pem").path
        let chainFile = box.root.appendingPathComponent("chain.pem").path
        let intermediateFile = box.root.appendingPathComponent("intermediate.pem").path
        let derFile = box.root.appendingPathComponent("leaf.der").path
        try leaf.pem.write(toFile: leafFile, atomically: true, encoding: .utf8)
        try pki.intermediate.pem.write(toFile: intermediateFile, atomically: true, encoding: .utf8)
        try (leaf.pem + "\n" + pki.intermediate.pem).write(toFile: chainFile, atomically: true, encoding: .utf8)
        try leaf.der.write(to: URL(fileURLWithPath: derFile))
        let leafPin = try #require(try Self.opensslPin(leafFile))
        let intermediatePin = try #require(try Self.opensslPin(intermediateFile))
        #expect(leafPin.count == 44)

        let server = try await TLSTestServer.start(presenting: pki.chain(for: leaf))
        let port = server.port
        let fromServer: Run
        do {
            fromServer = try await offPool { try box.run(["pin", "127.0.0.1:\(port)", "--servername", "pin.example.test"]) }
        } catch { try await server.stop(); throw error }
        try await server.stop()
        #expect(fromServer.status == 0, "\(fromServer.stderr)")
        let expected = """
        0: \(leaf.certificate.subject)
           sha256/\(leafPin)
        1: \(pki.intermediate.certificate.subject)
           sha256/\(intermediatePin)

        """
        #expect(fromServer.stdout == expected)

        let fromFile = try await offPool { try box.run(["pin", "--file", chainFile]) }
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        #expect(fromFile.stdout == expected)
        let fromDER = try await offPool { try box.run(["pin", "--file", derFile, "--json"]) }
        #expect(fromDER.status == 0, "\(fromDER.stderr)")
        let objects = try #require(try JSONSerialization.jsonObject(with: Data(fromDER.stdout.utf8)) as? [[String: Any]])
        #expect(objects.count == 1)
        #expect(objects.first?["pin"] as? String == "sha256/" + leafPin)
        #expect(objects.first?["subject"] as? String == "\(leaf.certificate.subject)")
    }

    @Test("pin fails with the reason, and exit status 1, for a closed port and for a file that is not a certificate")
    func failures() async throws {
        let box = Sandbox()
        try FileManager.default.createDirectory(at: box.root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: box.root) }
        // A port that was just free: a server started and stopped.
        let pki = try TestPKI(name: "closed")
        let server = try await TLSTestServer.start(presenting: pki.chain(for: try pki.leaf(hosts: ["x.test"])))
        let port = server.port
        try await server.stop()
        let closed = try await offPool { try box.run(["pin", "127.0.0.1:\(port)"]) }
        #expect(closed.status == 1)
        #expect(closed.stderr.hasPrefix("keystone: pin: 127.0.0.1:\(port): "))
        let junk = box.root.appendingPathComponent("junk.pem").path
        try "not a certificate".write(toFile: junk, atomically: true, encoding: .utf8)
        let notCertificate = try await offPool { try box.run(["pin", "--file", junk]) }
        #expect(notCertificate.status == 1)
        #expect(notCertificate.stderr.contains("not a PEM or DER certificate"))
        let usage = try await offPool { try box.run(["pin"]) }
        #expect(usage.status != 0 && usage.status != 1)
    }
}
#endif
