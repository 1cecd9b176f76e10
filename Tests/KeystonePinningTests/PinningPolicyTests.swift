import Crypto
import Foundation
import KeystonePinning
import Testing

/// Pins as text: base64 of 32 bytes.
func pinText(_ byte: UInt8) -> String { Data(repeating: byte, count: 32).base64EncodedString() }

@Suite("Pinning policy: building and host rules")
struct PinningPolicyTests {
    @Test("a host with fewer than two distinct pins is rejected when the policy is built", arguments: [
        [pinText(1)], [pinText(1), pinText(1)], [pinText(1), "sha256/" + pinText(1)],
    ])
    func tooFewPins(pins: [String]) {
        #expect(throws: PinningError.tooFewPins(host: "api.example.test", count: 1)) {
            try PinningPolicy([.init(host: "API.example.test.", pins: pins)])
        }
    }

    @Test("a malformed pin is rejected when the policy is built, naming the host and the pin", arguments: [
        ("not base64!", "not base64"),
        (Data(repeating: 7, count: 31).base64EncodedString(), "31 bytes, a SHA-256 pin has 32"),
        ("sha256/" + Data(repeating: 7, count: 20).base64EncodedString(), "20 bytes, a SHA-256 pin has 32"),
    ])
    func malformedPin(pin: String, reason: String) {
        let expected = PinningError.malformedPin(host: "api.example.test", pin: pin, reason: reason)
        #expect(throws: expected) {
            try PinningPolicy([.init(host: "api.example.test", pins: [pinText(1), pin])])
        }
        #expect(expected.description.contains("api.example.test") && expected.description.contains(pin))
    }

    @Test("the sha256/ prefix is optional and pins print with it")
    func prefix() throws {
        let bare = try SPKIPin(pinText(9))
        let prefixed = try SPKIPin("sha256/" + pinText(9))
        #expect(bare == prefixed)
        #expect(bare.description == "sha256/" + pinText(9))
    }

    @Test("a pin is the SHA-256 of the DER SubjectPublicKeyInfo")
    func spkiDigest() throws {
        let key = P256.Signing.PrivateKey()
        let pin = SPKIPin(subjectPublicKeyInfo: key.publicKey.derRepresentation)
        #expect(pin.digest == Data(SHA256.hash(data: key.publicKey.derRepresentation)))
    }

    @Test("rules apply to their host, and to subdomains only when asked; a more specific rule wins", arguments: [
        ("api.example.test", "exact"),
        ("API.Example.Test.", "exact"),
        ("example.test", "parent"),
        ("cdn.example.test", "parent"),
        ("a.b.example.test", "parent"),
        ("x.api.example.test", "parent"),
        ("v2.api.example.test", "v2"),
        ("notexample.test", nil),
        ("other.test", nil),
    ] as [(String, String?)])
    func hostRules(host: String, rule: String?) throws {
        let policy = try PinningPolicy([
            .init(host: "api.example.test", pins: [pinText(1), pinText(2)]),
            .init(host: "example.test", includeSubdomains: true, pins: [pinText(3), pinText(4)]),
            .init(host: "v2.api.example.test", includeSubdomains: true, pins: [pinText(5), pinText(6)]),
        ])
        let names = ["api.example.test": "exact", "example.test": "parent", "v2.api.example.test": "v2"]
        #expect(policy.rule(for: host).flatMap { names[$0.host] } == rule)
        #expect(policy.activePins(for: host).isEmpty == (rule == nil))
    }

    @Test("after its expiration a rule enforces no pins (the clock is the policy's)")
    func expiration() throws {
        let expiration = Date(timeIntervalSince1970: 2_000_000_000)
        let rules: [PinningPolicy.Rule] = [.init(host: "api.example.test", pins: [pinText(1), pinText(2)], expiration: expiration)]
        let before = try PinningPolicy(rules, now: { expiration.addingTimeInterval(-1) })
        let after = try PinningPolicy(rules, now: { expiration })
        #expect(before.activePins(for: "api.example.test").count == 2)
        #expect(after.activePins(for: "api.example.test").isEmpty)
        #expect(after.rule(for: "api.example.test") != nil)
    }
}
