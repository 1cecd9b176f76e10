#if os(Linux)
import Crypto
import Foundation
import Glibc
import KeychainEngine
import KeychainTPM
import Swtpm
import Testing

/// TPMDevice against a REAL software TPM (swtpm, one fresh TPM per test: see SwtpmFixture), checked with tools
/// no one here wrote: swift-crypto, `openssl dgst -verify`, `tpm2_getcap`. Every TPM call runs on a thread of its own,
/// never on Swift's cooperative pool.
@Suite("TPM keys on swtpm",
       .enabled(if: SwtpmFixture.unavailableReason == nil,
                Comment(rawValue: SwtpmFixture.unavailableReason ?? "swtpm, tpm2-tools and openssl are installed")))
struct TPMDeviceTests {
    @Test("A signing key: a blob that reads back to the same public key, usage signing")
    func createSigningKey() async throws {
        try await withSwtpm { fixture in
            let device = try TPMDevice(tcti: fixture.tcti)
            let key = try device.createKey(.signing)
            #expect(key.usage == .signing)
            #expect(key.x963Representation.count == 65 && key.x963Representation.first == 0x04)
            #expect(key.dataRepresentation.starts(with: Array("KSTK".utf8)))
            let read = try device.publicKey(of: key.dataRepresentation)
            #expect(read.x963Representation == key.x963Representation)
            #expect(read.usage == .signing)
            #expect(read.signingPublicKey.rawRepresentation == key.signingPublicKey.rawRepresentation)
            let other = try device.createKey(.signing)
            #expect(other.x963Representation != key.x963Representation)
        }
    }

    @Test("A signature over SHA-256(message) verifies with swift-crypto and with openssl dgst -verify")
    func signatureVerifies() async throws {
        try await withSwtpm { fixture in
            let device = try TPMDevice(tcti: fixture.tcti)
            let key = try device.createKey(.signing)
            let message = Data("Keystone signs with a key the TPM never lets go of.".utf8)
            let digest = SHA256.hash(data: message)
            let signature = try device.signature(digest: digest, with: key.dataRepresentation)
            #expect(key.signingPublicKey.isValidSignature(signature, for: message))
            #expect(key.signingPublicKey.isValidSignature(signature, for: digest))
            #expect(!key.signingPublicKey.isValidSignature(signature, for: Data("another message".utf8)))
            let viaData = try device.signature(digest: Data(digest), with: key.dataRepresentation)
            #expect(key.signingPublicKey.isValidSignature(viaData, for: message))

            let directory = fixture.directory
            try key.signingPublicKey.pemRepresentation.write(toFile: "\(directory)/pub.pem", atomically: true,
                                                             encoding: .utf8)
            try signature.derRepresentation.write(to: URL(fileURLWithPath: "\(directory)/sig.der"))
            try message.write(to: URL(fileURLWithPath: "\(directory)/msg"))
            let verified = try fixture.run(SwtpmFixture.opensslPath, [
                "dgst", "-sha256", "-verify", "\(directory)/pub.pem", "-signature", "\(directory)/sig.der",
                "\(directory)/msg",
            ])
            #expect(verified.status == 0, "openssl: \(verified.output)")
            #expect(verified.output.contains("Verified OK"))
            try Data("tampered".utf8).write(to: URL(fileURLWithPath: "\(directory)/msg"))
            let refused = try fixture.run(SwtpmFixture.opensslPath, [
                "dgst", "-sha256", "-verify", "\(directory)/pub.pem", "-signature", "\(directory)/sig.der",
                "\(directory)/msg",
            ])
            #expect(refused.status != 0)
        }
    }

    @Test("ECDH in the TPM agrees with a swift-crypto peer")
    func keyAgreement() async throws {
        try await withSwtpm { fixture in
            let device = try TPMDevice(tcti: fixture.tcti)
            let key = try device.createKey(.keyAgreement)
            #expect(key.usage == .keyAgreement)
            for _ in 0..<3 {
                let peer = P256.KeyAgreement.PrivateKey()
                let tpmX = try device.sharedSecret(with: peer.publicKey, using: key.dataRepresentation)
                let expected = try peer.sharedSecretFromKeyAgreement(with: key.keyAgreementPublicKey)
                #expect(tpmX.count == 32)
                #expect(tpmX == expected.withUnsafeBytes { Data($0) })
            }
        }
    }

    @Test("A general key (a Secure Enclave SecKey's) both signs, verifiably, and agrees keys with a swift-crypto peer")
    func generalKey() async throws {
        try await withSwtpm { fixture in
            let device = try TPMDevice(tcti: fixture.tcti)
            let key = try device.createKey(.general)
            #expect(key.usage == .general)
            #expect(try TPMKey(dataRepresentation: key.dataRepresentation).usage == .general)
            let message = Data("general".utf8)
            let signature = try device.signature(digest: SHA256.hash(data: message), with: key.dataRepresentation)
            #expect(key.signingPublicKey.isValidSignature(signature, for: message))
            #expect(!key.signingPublicKey.isValidSignature(signature, for: Data("other".utf8)))
            let peer = P256.KeyAgreement.PrivateKey()
            let tpmX = try device.sharedSecret(with: peer.publicKey, using: key.dataRepresentation)
            let expected = try peer.sharedSecretFromKeyAgreement(with: key.keyAgreementPublicKey)
            #expect(tpmX == expected.withUnsafeBytes { Data($0) })
        }
    }

    @Test("A key from one TPM does not load in another: wrongTPM")
    func wrongTPM() async throws {
        try await withSwtpm { first in
            let blob = try TPMDevice(tcti: first.tcti).createKey(.signing).dataRepresentation
            let agreementBlob = try TPMDevice(tcti: first.tcti).createKey(.keyAgreement).dataRepresentation
            let second = try SwtpmFixture.start()
            defer { second.stop() }
            let other = try TPMDevice(tcti: second.tcti)
            let error = #expect(throws: TPMError.self) {
                _ = try other.signature(digest: SHA256.hash(data: Data("x".utf8)), with: blob)
            }
            #expect(error?.kind == .wrongTPM, "\(String(describing: error))")
            #expect(error?.rc != 0)
            let agreementError = #expect(throws: TPMError.self) {
                _ = try other.sharedSecret(with: P256.KeyAgreement.PrivateKey().publicKey, using: agreementBlob)
            }
            #expect(agreementError?.kind == .wrongTPM)
            // The device still works after the refusal.
            let own = try other.createKey(.signing)
            let message = Data("still works".utf8)
            let signature = try other.signature(digest: SHA256.hash(data: message), with: own.dataRepresentation)
            #expect(own.signingPublicKey.isValidSignature(signature, for: message))
        }
    }

    @Test("A truncated, garbled or foreign blob is malformedBlob, in the TPM call and when read")
    func malformedBlob() async throws {
        try await withSwtpm { fixture in
            let device = try TPMDevice(tcti: fixture.tcti)
            let blob = try device.createKey(.signing).dataRepresentation
            var garbled = blob
            garbled[garbled.count / 2] ^= 0x5A
            var badVersion = blob
            badVersion[4] = 99
            let cases: [(String, Data)] = [
                ("truncated", blob.prefix(blob.count - 7)),
                ("truncated to the header", blob.prefix(10)),
                ("garbled", garbled),
                ("another version", badVersion),
                ("empty", Data()),
                ("not a key", Data((0..<200).map { UInt8(truncatingIfNeeded: $0 &* 37) })),
            ]
            let digest = SHA256.hash(data: Data("x".utf8))
            for (name, data) in cases {
                let error = #expect(throws: TPMError.self, "\(name)") { _ = try device.signature(digest: digest, with: data) }
                #expect(error?.kind == .malformedBlob, "\(name): \(String(describing: error))")
                let readError = #expect(throws: TPMError.self, "\(name)") { _ = try TPMKey(dataRepresentation: data) }
                #expect(readError?.kind == .malformedBlob, "\(name)")
            }
            // The intact blob still signs.
            _ = try device.signature(digest: digest, with: blob)
        }
    }

    @Test("A peer point not on P-256 is invalidPeerKey")
    func invalidPeerKey() async throws {
        try await withSwtpm { fixture in
            let device = try TPMDevice(tcti: fixture.tcti)
            let key = try device.createKey(.keyAgreement)
            var offCurve = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
            offCurve[64] ^= 0x01  // Y changed: (X, Y') is not on the curve
            #expect(throws: (any Error).self) { _ = try P256.KeyAgreement.PublicKey(x963Representation: offCurve) }
            let error = #expect(throws: TPMError.self) {
                _ = try device.sharedSecret(withX963: offCurve, using: key.dataRepresentation)
            }
            #expect(error?.kind == .invalidPeerKey, "\(String(describing: error))")
            #expect(error?.rc != 0, "the TPM itself refused the point")
            var compressed = offCurve
            compressed[0] = 0x02
            let compressedError = #expect(throws: TPMError.self) {
                _ = try device.sharedSecret(withX963: compressed, using: key.dataRepresentation)
            }
            #expect(compressedError?.kind == .invalidPeerKey)
            let shortError = #expect(throws: TPMError.self) {
                _ = try device.sharedSecret(withX963: offCurve.prefix(33), using: key.dataRepresentation)
            }
            #expect(shortError?.kind == .invalidPeerKey)
            // A valid peer still works afterwards.
            let peer = P256.KeyAgreement.PrivateKey()
            let x = try device.sharedSecret(with: peer.publicKey, using: key.dataRepresentation)
            #expect(x == (try peer.sharedSecretFromKeyAgreement(with: key.keyAgreementPublicKey)).withUnsafeBytes { Data($0) })
        }
    }

    @Test("The TPM enforces usage: a signing key refuses ECDH, a key-agreement key refuses to sign")
    func wrongKeyUsage() async throws {
        try await withSwtpm { fixture in
            let device = try TPMDevice(tcti: fixture.tcti)
            let signing = try device.createKey(.signing)
            let agreement = try device.createKey(.keyAgreement)
            let ecdhError = #expect(throws: TPMError.self) {
                _ = try device.sharedSecret(with: P256.KeyAgreement.PrivateKey().publicKey, using: signing.dataRepresentation)
            }
            #expect(ecdhError?.kind == .wrongKeyUsage, "\(String(describing: ecdhError))")
            #expect(ecdhError?.rc != 0, "the TPM itself refused")
            let signError = #expect(throws: TPMError.self) {
                _ = try device.signature(digest: SHA256.hash(data: Data("x".utf8)), with: agreement.dataRepresentation)
            }
            #expect(signError?.kind == .wrongKeyUsage, "\(String(describing: signError))")
            #expect(signError?.rc != 0, "the TPM itself refused")
        }
    }

    @Test("swtpm killed between operations: the next one throws connectionLost at once, and so does the one after")
    func tpmKilled() async throws {
        try await withSwtpm { fixture in
            let device = try TPMDevice(tcti: fixture.tcti)
            let key = try device.createKey(.signing)
            _ = try device.signature(digest: SHA256.hash(data: Data("before".utf8)), with: key.dataRepresentation)
            try fixture.killTPM()
            // The body already runs on a thread of its own: the call returns (the closed socket is the signal), and
            // its outcome is a typed error, never a signature.
            let result = Result { () throws(TPMError) in
                _ = try device.signature(digest: SHA256.hash(data: Data("after".utf8)), with: key.dataRepresentation)
            }
            switch result {
            case .success: Issue.record("signing succeeded on a killed TPM")
            case .failure(let error): #expect([.connectionLost, .unavailable].contains(error.kind), "\(error)")
            }
            let again = #expect(throws: TPMError.self) { _ = try device.createKey(.signing) }
            #expect(again?.kind == .connectionLost)
            #expect(again?.description.contains("open it again") == true)
        }
    }

    @Test("info() reports the manufacturer tpm2_getcap properties-fixed reports")
    func infoMatchesGetcap() async throws {
        try await withSwtpm { fixture in
            // swtpm serves one connection at a time: tpm2_getcap runs before the device opens its connection.
            let getcap = try fixture.run(SwtpmFixture.getcapPath, ["-T", fixture.tcti, "properties-fixed"])
            #expect(getcap.status == 0, "tpm2_getcap: \(getcap.output)")
            let lines = getcap.output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            func field(_ property: String, _ key: String) -> String? {
                guard let start = lines.firstIndex(of: "\(property):") else { return nil }
                return lines[(start + 1)...].prefix(2).first { $0.hasPrefix("\(key):") }
                    .map { String($0.dropFirst(key.count + 1)).trimmingCharacters(in: .whitespaces) }
            }
            let manufacturer = try #require(field("TPM2_PT_MANUFACTURER", "value")).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            let firmware1 = try #require(field("TPM2_PT_FIRMWARE_VERSION_1", "raw"))

            let info = try TPMDevice(tcti: fixture.tcti).info()
            #expect(info.manufacturer == manufacturer)
            #expect(info.manufacturer == "IBM", "swtpm (libtpms) reports IBM")
            #expect(UInt32(firmware1.dropFirst(2), radix: 16) == info.firmwareVersion1)
            #expect(info.specificationRevision >= 116)
            #expect(!info.firmwareVersion.isEmpty)
        }
    }

    @Test("Every path flushes what it loaded: while open at most the primary key and the cached key stay loaded, after successes and refusals alike; after release none")
    func noTransientObjectsLeft() async throws {
        try await withSwtpm { fixture in
            let limit = 1 + TPMDevice.loadedKeyCapacity
            do {
                let device = try TPMDevice(tcti: fixture.tcti)
                let signing = try device.createKey(.signing)
                let agreement = try device.createKey(.keyAgreement)
                let digest = SHA256.hash(data: Data("x".utf8))
                let peer = P256.KeyAgreement.PrivateKey().publicKey
                var offCurve = peer.x963Representation
                offCurve[64] ^= 0x01
                for _ in 0..<3 {  // more than swtpm's 3 transient object slots: a leak would make these fail
                    _ = try device.signature(digest: digest, with: signing.dataRepresentation)
                    _ = try device.sharedSecret(with: peer, using: agreement.dataRepresentation)
                    #expect(try fixture.transientHandles().count <= limit)
                    #expect(throws: TPMError.self) { _ = try device.signature(digest: digest, with: agreement.dataRepresentation) }
                    #expect(throws: TPMError.self) { _ = try device.sharedSecret(with: peer, using: signing.dataRepresentation) }
                    #expect(throws: TPMError.self) { _ = try device.sharedSecret(withX963: offCurve, using: agreement.dataRepresentation) }
                    #expect(try fixture.transientHandles().count <= limit, "after refusals")
                }
                // Another TPM's blob (wrongTPM) loads nothing.
                let foreign = try SwtpmFixture.start()
                let foreignBlob = try TPMDevice(tcti: foreign.tcti).createKey(.signing).dataRepresentation
                foreign.stop()
                let error = #expect(throws: TPMError.self) { _ = try device.signature(digest: digest, with: foreignBlob) }
                #expect(error?.kind == .wrongTPM)
                let handles = try fixture.transientHandles()
                #expect(handles.count <= limit, "after wrongTPM: \(handles)")
                withExtendedLifetime(device) {}
            }  // the device is released here: it flushes its cached key and primary key and closes the connection
            let handles = try fixture.transientHandles()
            #expect(handles.isEmpty, "transient objects left: \(handles)")
        }
    }

    @Test("A key stays loaded between operations: after a signature the TPM holds the primary key and that key; a second key takes its place")
    func loadedKeyReused() async throws {
        try await withSwtpm { fixture in
            let device = try TPMDevice(tcti: fixture.tcti)
            let first = try device.createKey(.signing)
            let second = try device.createKey(.general)
            #expect(try fixture.transientHandles().count == 1, "only the primary key after creating keys")
            let message = Data("cached".utf8)
            for _ in 0..<3 {
                let signature = try device.signature(digest: SHA256.hash(data: message), with: first.dataRepresentation)
                #expect(first.signingPublicKey.isValidSignature(signature, for: message))
            }
            let afterFirst = try fixture.transientHandles()
            #expect(afterFirst.count == 1 + TPMDevice.loadedKeyCapacity, "\(afterFirst)")
            let signature = try device.signature(digest: SHA256.hash(data: message), with: second.dataRepresentation)
            #expect(second.signingPublicKey.isValidSignature(signature, for: message))
            #expect(!first.signingPublicKey.isValidSignature(signature, for: message), "signed with the key asked for, not the cached one")
            let peer = P256.KeyAgreement.PrivateKey()
            let shared = try device.sharedSecret(with: peer.publicKey, using: second.dataRepresentation)
            #expect(shared == (try peer.sharedSecretFromKeyAgreement(with: second.keyAgreementPublicKey)).withUnsafeBytes { Data($0) })
            #expect(try fixture.transientHandles().count == 1 + TPMDevice.loadedKeyCapacity)
            let again = try device.signature(digest: SHA256.hash(data: message), with: first.dataRepresentation)
            #expect(first.signingPublicKey.isValidSignature(again, for: message))
        }
    }

    @Test("TPM out of object slots (another program holds one): creating and loading keys make room by flushing the cached key, never the other program's object")
    func objectMemoryRetry() async throws {
        try await withSwtpm { fixture in
            let device = try TPMDevice(tcti: fixture.tcti)
            let key = try device.createKey(.signing)
            let message = Data("slots".utf8)
            _ = try device.signature(digest: SHA256.hash(data: message), with: key.dataRepresentation)
            let ours = try fixture.transientHandles()
            #expect(ours.count == 2)
            // Another program's primary key takes swtpm's third and last object slot (no resource manager: it stays).
            let other = try fixture.run("/usr/bin/tpm2_createprimary", ["-T", fixture.tcti, "-C", "o", "-G", "ecc256",
                                                                         "-c", "\(fixture.directory)/other.ctx"])
            #expect(other.status == 0, "tpm2_createprimary: \(other.output)")
            let theirs = try fixture.transientHandles().filter { !ours.contains($0) }
            #expect(theirs.count == 1)
            // TPM2_Create needs a free slot: the device flushes its cached key and retries.
            let created = try device.createKey(.signing)
            let signature = try device.signature(digest: SHA256.hash(data: message), with: created.dataRepresentation)
            #expect(created.signingPublicKey.isValidSignature(signature, for: message))
            let first = try device.signature(digest: SHA256.hash(data: message), with: key.dataRepresentation)
            #expect(key.signingPublicKey.isValidSignature(first, for: message))
            let after = try fixture.transientHandles()
            #expect(theirs.allSatisfy(after.contains), "the other program's object is still loaded: \(after)")
            #expect(after.count == 3)
        }
    }

    @Test("Another program flushes every transient object (tpm2_flushcontext -t): the next signature loads the primary key and the key again")
    func flushedBehindTheDevicesBack() async throws {
        try await withSwtpm { fixture in
            let device = try TPMDevice(tcti: fixture.tcti)
            let key = try device.createKey(.signing)
            let message = Data("flushed".utf8)
            _ = try device.signature(digest: SHA256.hash(data: message), with: key.dataRepresentation)
            let flush = try fixture.run("/usr/bin/tpm2_flushcontext", ["-T", fixture.tcti, "-t"])
            #expect(flush.status == 0, "tpm2_flushcontext: \(flush.output)")
            #expect(try fixture.transientHandles().isEmpty)
            let signature = try device.signature(digest: SHA256.hash(data: message), with: key.dataRepresentation)
            #expect(key.signingPublicKey.isValidSignature(signature, for: message))
            #expect(try fixture.transientHandles().count == 2)
            let peer = P256.KeyAgreement.PrivateKey()
            let agreement = try device.createKey(.keyAgreement)
            _ = try fixture.run("/usr/bin/tpm2_flushcontext", ["-T", fixture.tcti, "-t"])
            let shared = try device.sharedSecret(with: peer.publicKey, using: agreement.dataRepresentation)
            #expect(shared == (try peer.sharedSecretFromKeyAgreement(with: agreement.keyAgreementPublicKey)).withUnsafeBytes { Data($0) })
        }
    }

    @Test("swtpm stopped (the connection stays open, nothing answers): the call fails with timedOut once the device's deadline passed, later calls without sending anything; a new device works once swtpm goes on")
    func hungTPM() async throws {
        try await withSwtpm { fixture in
            let deadline = Duration.seconds(2)
            do {
                let device = try TPMDevice(tcti: fixture.tcti, timeout: deadline)
                #expect(device.timeout == deadline)
                let key = try device.createKey(.signing)
                _ = try device.signature(digest: SHA256.hash(data: Data("before".utf8)), with: key.dataRepresentation)
                fixture.suspend()
                defer { fixture.resume() }
                let clock = ContinuousClock()
                let started = clock.now
                let result = Result { () throws(TPMError) in
                    _ = try device.signature(digest: SHA256.hash(data: Data("hung".utf8)), with: key.dataRepresentation)
                }
                let waited = clock.now - started
                switch result {
                case .success: Issue.record("a stopped TPM signed")
                case .failure(let error):
                    #expect(error.kind == .timedOut, "\(error)")
                    #expect(error.description.contains("open it again"))
                }
                // Time is the behaviour: it waited for its own deadline (the TPM may still answer until then; a
                // monotonic wait, so never less). The upper bound is a hang guard, not a measure of speed.
                #expect(waited >= .milliseconds(1_900), "gave up before the 2 s deadline: \(waited)")
                #expect(waited < .seconds(60), "hang guard: the call had not returned after \(waited)")
                // Later calls fail without sending anything (what the stopped swtpm was sent and has not read does not
                // grow), so without a second wait: the device is known to be unusable.
                let sentBefore = fixture.pendingInput()
                let later = #expect(throws: TPMError.self) { _ = try device.createKey(.signing) }
                #expect(later?.kind == .timedOut)
                let info = #expect(throws: TPMError.self) { _ = try device.info() }
                #expect(info?.kind == .timedOut)
                let sentAfter = fixture.pendingInput()
                #expect(sentBefore != nil && sentAfter != nil, "/proc/net/tcp cannot be read")
                if let sentBefore, let sentAfter {
                    #expect(sentAfter - sentBefore < SwtpmFixture.requestFloor,
                            "a later call sent the stopped TPM \(sentAfter - sentBefore) bytes")
                }
            }  // released (nothing is sent to a TPM that timed out), then swtpm goes on
            let fresh = try TPMDevice(tcti: fixture.tcti, timeout: deadline)
            #expect(try fresh.info().manufacturer == "IBM")
        }
    }

    @Test("Opening a stopped swtpm succeeds (nothing is sent yet); its first command times out")
    func openHungTPM() async throws {
        try await withSwtpm { fixture in
            fixture.suspend()
            defer { fixture.resume() }
            let device = try TPMDevice(tcti: fixture.tcti, timeout: .seconds(1))
            let error = #expect(throws: TPMError.self) { _ = try device.info() }
            #expect(error?.kind == .timedOut, "\(String(describing: error))")
        }
    }

    @Test("Four threads signing at once on one TPMDevice: every signature verifies")
    func concurrentSigning() async throws {
        try await withSwtpm { fixture in
            let device = try TPMDevice(tcti: fixture.tcti)
            let key = try device.createKey(.signing)
            let results = Locked<[(Data, Result<P256.Signing.ECDSASignature, TPMError>)]>([])
            let group = DispatchGroup()
            for thread in 0..<4 {
                group.enter()
                let blob = key.dataRepresentation
                Thread {
                    for round in 0..<5 {
                        let message = Data("thread \(thread) round \(round)".utf8)
                        let result = Result { () throws(TPMError) in
                            try device.signature(digest: SHA256.hash(data: message), with: blob)
                        }
                        results.withLock { $0.append((message, result)) }
                    }
                    group.leave()
                }.start()
            }
            group.wait()  // every thread leaves the group once its five signatures returned
            let all = results.withLock { $0 }
            #expect(all.count == 20)
            for (message, result) in all {
                switch result {
                case .success(let signature): #expect(key.signingPublicKey.isValidSignature(signature, for: message))
                case .failure(let error): Issue.record("signing failed: \(error)")
                }
            }
        }
    }

    @Test("Nothing listening at the TCTI: unavailable, with advice")
    func unavailable() async throws {
        let error = try await onThread { () -> TPMError? in
            // A port that was free a moment ago: nothing listens there.
            let port = try #require(SwtpmFixture.freePortPair())
            do throws(TPMError) {
                _ = try TPMDevice(tcti: "swtpm:host=127.0.0.1,port=\(port)")
                return nil
            } catch { return error }
        }
        #expect(error?.kind == .unavailable, "\(String(describing: error))")
        #expect(error?.description.contains("KEYSTONE_TPM_TCTI") == true)
    }
}

struct ToolFailure: Error, CustomStringConvertible {
    let description: String
}

extension SwtpmFixture {
    /// The TPM's transient object handles (`tpm2_getcap handles-transient`), for instance "0x80000000".
    func transientHandles() throws -> [String] {
        let result = try run(SwtpmFixture.getcapPath, ["-T", tcti, "handles-transient"])
        guard result.status == 0 else {
            throw ToolFailure(description: "tpm2_getcap handles-transient failed: \(result.output)")
        }
        return result.output.split(separator: "\n").compactMap { line in
            line.split(separator: " ").last.map(String.init).flatMap { $0.hasPrefix("0x80") ? $0 : nil }
        }
    }
}

@Suite("TPM configuration")
struct TPMConfigurationTests {
    @Test("defaultTCTI: KEYSTONE_TPM_TCTI, then TPM2TOOLS_TCTI, then TCTI, else tctildr's default")
    func defaultTCTI() {
        #expect(TPMDevice.defaultTCTI(environment: [:]) == nil)
        #expect(TPMDevice.defaultTCTI(environment: ["TCTI": "device:/dev/tpm0"]) == "device:/dev/tpm0")
        #expect(TPMDevice.defaultTCTI(environment: ["TCTI": "a", "TPM2TOOLS_TCTI": "b"]) == "b")
        #expect(TPMDevice.defaultTCTI(environment: ["TCTI": "a", "TPM2TOOLS_TCTI": "b", "KEYSTONE_TPM_TCTI": "c"]) == "c")
        #expect(TPMDevice.defaultTCTI(environment: ["KEYSTONE_TPM_TCTI": "", "TPM2TOOLS_TCTI": "b"]) == "b")
    }

    @Test("A timeout under a millisecond is refused before anything is opened")
    func timeoutTooShort() {
        let error = #expect(throws: TPMError.self) { _ = try TPMDevice(tcti: "swtpm:host=127.0.0.1,port=1", timeout: .zero) }
        #expect(error?.kind == .other)
        #expect(error?.message.contains("at least 1 ms") == true)
        #expect(TPMDevice.defaultTimeout == .seconds(30))
        #expect(TPMDevice.loadedKeyCapacity >= 1)
    }

    @Test("A swtpm configuration with an unknown option is unavailable, naming the options it takes")
    func swtpmBadOption() {
        let error = #expect(throws: TPMError.self) { _ = try TPMDevice(tcti: "swtpm:host=127.0.0.1,speed=fast") }
        #expect(error?.kind == .unavailable)
        #expect(error?.message.contains("host, port, path") == true, "\(String(describing: error))")
    }

    @Test("A swtpm Unix socket where nothing listens is unavailable, naming the socket")
    func swtpmMissingSocket() async throws {
        let error = try await onThread { () -> TPMError? in
            do throws(TPMError) {
                _ = try TPMDevice(tcti: "swtpm:path=/nonexistent/keystone-swtpm.sock")
                return nil
            } catch { return error }
        }
        #expect(error?.kind == .unavailable)
        #expect(error?.message.contains("/nonexistent/keystone-swtpm.sock") == true, "\(String(describing: error))")
    }

    @Test("TPMError says what to do and carries the kind and rc")
    func errorDescription() {
        let error = TPMError(kind: .wrongTPM, rc: 0x1df, message: "integrity check failed")
        #expect(error.description.contains("wrongTPM"))
        #expect(error.description.contains("0x1df"))
        #expect(error.description.contains("create a new key"))
    }
}
#endif
