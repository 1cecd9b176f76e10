import ArgumentParser
import Foundation

// `keystone pin`: the SPKI SHA-256 pins (HPKP / OkHttp's `sha256/<base64>`) of the certificates a TLS server
// presents, or of certificate files: what `openssl x509 -pubkey | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64` computes. Linux only, as the other
// certificate verbs (KeystonePinning's swift-nio-ssl client is Linux-only).
#if canImport(Darwin)
var pinVerbs: [any ParsableCommand.Type] { [] }
#else
import KeystonePinning
import SwiftASN1
import X509

var pinVerbs: [any ParsableCommand.Type] { [Pin.self] }

struct Pin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Print the SPKI SHA-256 pin of each certificate a TLS server presents, or of certificate files.",
        discussion: """
        For each certificate, leaf first: its index and subject, then its pin, sha256/ followed by the base64 \
        SHA-256 of its DER SubjectPublicKeyInfo (as HPKP and OkHttp write pins; the same as `openssl x509 -pubkey \
        -noout -in cert.pem | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64`). \
        Nothing is verified: the server's chain is printed as presented, trusted or not, so take pins on a network \
        you trust. HOST may be a name, an IPv4 address or [IPv6]; the name is sent as the TLS server name (SNI). \
        Pin two keys per host: the one in use and a backup.
        """)

    @Argument(help: "The server, HOST[:PORT] (port 443 by default).") var server: String?
    @Option(name: .customLong("file"), help: "A certificate file instead of a server: PEM (one or several certificates) or DER. Repeatable.")
    var files: [String] = []
    @Option(name: .customLong("servername"), help: "The TLS server name (SNI) to send, when it differs from HOST.")
    var serverName: String?
    @Flag(help: "Print a JSON array of {index, subject, pin}.") var json = false

    func validate() throws {
        if (server == nil) == files.isEmpty {
            throw ValidationError("Give either HOST[:PORT] or --file FILE.")
        }
    }

    mutating func run() throws {
        var certificates: [Certificate] = []
        if let server {
            let (host, port) = try Self.split(server)
            let chain: [Data]
            do {
                chain = try PresentedChain.fetch(host: host, port: port, serverName: serverName).wait()
            } catch {
                throw MessageFailure(message: "keystone: pin: \(host):\(port): \(error)", exitCode: 1)
            }
            for der in chain {
                do { certificates.append(try Certificate(derEncoded: Array(der))) } catch {
                    throw MessageFailure(message: "keystone: pin: \(host):\(port) presented a certificate that could not be parsed: \(error)", exitCode: 1)
                }
            }
        }
        for file in files { certificates += try Self.read(file) }
        let rows = certificates.enumerated().map { index, certificate in
            (index: index, subject: String(describing: certificate.subject), pin: SPKIPin(certificate: certificate).description)
        }
        if json {
            let objects = rows.map { ["index": $0.index, "subject": $0.subject, "pin": $0.pin] as [String: Any] }
            let data = try JSONSerialization.data(withJSONObject: objects, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
            print(String(decoding: data, as: UTF8.self))
        } else {
            for row in rows { print("\(row.index): \(row.subject)\n   \(row.pin)") }
        }
    }

    /// HOST[:PORT], [IPv6][:PORT], or a bare IPv6 address.
    static func split(_ server: String) throws -> (host: String, port: Int) {
        func port(_ text: Substring) throws -> Int {
            guard let port = Int(text), (1...65535).contains(port) else { throw UsageFailure(message: "keystone: pin: bad port \"\(text)\"") }
            return port
        }
        if server.hasPrefix("["), let close = server.firstIndex(of: "]") {
            let host = String(server[server.index(after: server.startIndex)..<close])
            let rest = server[server.index(after: close)...]
            return (host, rest.isEmpty ? 443 : try port(rest.dropFirst()))
        }
        let colons = server.filter { $0 == ":" }.count
        if colons == 1, let colon = server.firstIndex(of: ":") {
            return (String(server[..<colon]), try port(server[server.index(after: colon)...]))
        }
        return (server, 443)
    }

    /// The certificates of a PEM file (every CERTIFICATE block) or a DER file.
    static func read(_ file: String) throws -> [Certificate] {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: file)) } catch {
            throw MessageFailure(message: "keystone: pin: \(file): \(error.localizedDescription)", exitCode: 1)
        }
        do {
            let text = String(decoding: data, as: UTF8.self)
            if text.contains("-----BEGIN ") {
                let certificates = try PEMDocument.parseMultiple(pemString: text)
                    .filter { $0.discriminator == "CERTIFICATE" || $0.discriminator == "X509 CERTIFICATE" }
                    .map { try Certificate(derEncoded: $0.derBytes) }
                guard !certificates.isEmpty else { throw MessageFailure(message: "keystone: pin: \(file): no CERTIFICATE block", exitCode: 1) }
                return certificates
            }
            return [try Certificate(derEncoded: Array(data))]
        } catch let failure as MessageFailure {
            throw failure
        } catch {
            throw MessageFailure(message: "keystone: pin: \(file): not a PEM or DER certificate (\(error))", exitCode: 1)
        }
    }
}
#endif
