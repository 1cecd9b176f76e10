#if !canImport(Darwin)
@testable import CryptoKit
import Foundation
import KeychainEngine
import KeychainServices
import Testing

/// The `dataRepresentation` envelope, read by the public initialisers: these fail before any Secure Enclave is asked,
/// so they touch no process-wide state and run in parallel with everything.
@Suite("SecureEnclave dataRepresentation envelope")
struct EnvelopeTests {
    static let sample = KeyEnvelope(kind: .signing,
                                    accessControl: AccessControl(accessibility: .whenUnlockedThisDeviceOnly,
                                                                 flags: [.privateKeyUsage, .userPresence]),
                                    biometryDomainState: Data([1, 2, 3]), tokenBlob: Data((0..<100).map { UInt8($0) }))

    @Test("An envelope reads back to the same kind, access control, biometry state and token blob")
    func roundTrip() throws {
        let bytes = Self.sample.encoded()
        #expect(bytes.starts(with: Array("KSSE".utf8)))
        #expect(bytes[4] == 1, "version 1")
        #expect(try KeyEnvelope.decode(bytes) == Self.sample)
        var plain = Self.sample
        plain.kind = .keyAgreement
        plain.biometryDomainState = nil
        plain.accessControl = AccessControl(accessibility: .afterFirstUnlockThisDeviceOnly, flags: [])
        #expect(try KeyEnvelope.decode(plain.encoded()) == plain)
        // A slice (non-zero start index) reads the same.
        let padded = Data([0xFF, 0xFF]) + bytes
        #expect(try KeyEnvelope.decode(padded.dropFirst(2)) == Self.sample)
    }

    @Test("Every truncation of a key's dataRepresentation is errSecDecode through both initialisers, never a crash")
    func truncations() {
        let bytes = Self.sample.encoded()
        for length in 0..<bytes.count {
            let prefix = Data(bytes.prefix(length))
            let signing = enclaveError { _ = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: prefix) }
            #expect(signing?.status == errSecDecode, "length \(length)")
            let agreement = enclaveError { _ = try SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation: prefix) }
            #expect(agreement?.status == errSecDecode, "length \(length)")
        }
    }

    @Test("Foreign magic, a newer version, an unknown kind, accessibility or flag, bad lengths and trailing bytes are errSecDecode")
    func malformedFields() {
        let good = [UInt8](Self.sample.encoded())
        func mutated(_ change: (inout [UInt8]) -> Void) -> Data {
            var bytes = good
            change(&bytes)
            return Data(bytes)
        }
        let cases: [(String, Data, String)] = [
            ("foreign magic", mutated { $0[0] = UInt8(ascii: "X") }, "no Keystone envelope"),
            ("a newer version", mutated { $0[4] = 3 }, "update Keystone"),
            ("an unknown kind", mutated { $0[5] = 9 }, "unknown kind"),
            ("an empty accessibility", mutated { $0[6] = 0 }, "accessibility"),
            ("an unknown accessibility", mutated { $0[7] = UInt8(ascii: "z") }, "unknown accessibility"),
            ("unknown flag bits", mutated { $0[7 + 3 + 3] |= 0x40 }, "flags are unknown"),
            ("a blob length past the end", mutated { $0[$0.count - 101] = 0xFF }, "truncated"),
            ("an empty blob", mutated { bytes in
                let at = bytes.count - 104
                bytes.replaceSubrange(at..., with: [0, 0, 0, 0])
            }, "malformed"),
            ("trailing bytes", Data(good + [0]), "unexpected bytes"),
            ("a raw TPM blob without the envelope", Data(Array("KSTK".utf8) + [1, 1] + [UInt8](repeating: 7, count: 80)), "no Keystone envelope"),
            ("empty", Data(), "no Keystone envelope"),
        ]
        for (name, bytes, words) in cases {
            let error = enclaveError { _ = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: bytes) }
            #expect(error?.status == errSecDecode, "\(name)")
            #expect(error?.reason.contains(words) == true, "\(name): \(error?.reason ?? "")")
        }
    }

    @Test("Random bytes of every length up to 300 are refused with errSecDecode")
    func randomBytes() {
        var generator = SystemRandomNumberGenerator()
        for length in 0...300 {
            var bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            // Half of them with the right magic and version, so the fields behind are read too.
            if length >= 5 && length % 2 == 0 { bytes.replaceSubrange(0..<5, with: Array("KSSE".utf8) + [1]) }
            let error = enclaveError { _ = try SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation: Data(bytes)) }
            #expect(error?.status == errSecDecode, "length \(length)")
        }
    }

    @Test("A signing key's dataRepresentation given to KeyAgreement.PrivateKey is errSecParam naming the right type, and the other way round")
    func wrongKind() {
        let signing = Self.sample.encoded()
        let asAgreement = enclaveError { _ = try SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation: signing) }
        #expect(asAgreement?.status == errSecParam)
        #expect(asAgreement?.reason.contains("SecureEnclave.P256.Signing.PrivateKey(dataRepresentation:)") == true)
        var agreement = Self.sample
        agreement.kind = .keyAgreement
        let asSigning = enclaveError { _ = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: agreement.encoded()) }
        #expect(asSigning?.status == errSecParam)
        #expect(asSigning?.reason.contains("SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation:)") == true)
    }

    @Test("An envelope recording authentication flags without .privateKeyUsage (rewritten bytes) is errSecDecode")
    func impossibleAccessControl() {
        var envelope = Self.sample
        envelope.accessControl.flags = [.userPresence]
        let error = enclaveError { _ = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: envelope.encoded()) }
        #expect(error?.status == errSecDecode)
    }

    @Test("SecureEnclaveError bridges to an NSError in NSOSStatusErrorDomain whose code is the status, with what to do")
    func errorBridging() {
        let error = SecureEnclaveError(status: errSecUnimplemented, reason: "this process has no Secure Enclave")
        let bridged = error as NSError
        #expect(bridged.domain == NSOSStatusErrorDomain)
        #expect(bridged.code == Int(errSecUnimplemented))
        #expect(bridged.localizedDescription.contains("errSecUnimplemented (-4)"))
        #expect(bridged.localizedDescription.contains("fall back to a software key"))
        #expect(error.localizedDescription == error.message)
        #expect("\(error)".contains("SecureEnclave.isAvailable"))
        switch error {
        case errSecUnimplemented: break
        default: Issue.record("~= does not match the status")
        }
        let cancelled = SecureEnclaveError(status: errSecUserCanceled, reason: "")
        #expect(cancelled.message.hasPrefix("errSecUserCanceled (-128): User canceled the operation."))
    }
}
#endif
