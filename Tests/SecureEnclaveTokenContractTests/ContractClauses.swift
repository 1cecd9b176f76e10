import Crypto
import Foundation
import KeychainEngine
import Testing

/// A token under test, with what the contract's clauses need besides it: another instance of the same kind (another
/// TPM, another emulated enclave) and a way to make the token go away mid-way.
struct TokenUnderTest: Sendable {
    let token: any SecureEnclaveToken
    /// A second, independent token of the same kind.
    let makeOther: @Sendable () throws -> any SecureEnclaveToken
    /// Makes ``token`` unreachable (kills the TPM, makes the emulation unavailable).
    let lose: @Sendable () throws -> Void
    /// Clauses this token is known to break (reported as known issues, and as a failure once they no longer happen).
    var knownIssues: Set<KnownContractIssue> = []
}

/// A contract clause a conformer is known to break, until it is fixed.
enum KnownContractIssue: String, Sendable, Hashable {
    /// `TPMSecureEnclaveToken.availability()` answers from its cached device: right after the TPM goes away it still
    /// says nil, until a call fails with `errSecNotAvailable` and drops the device. Fix: make availability() ask the
    /// TPM (a `TPM2_GetCapability` round trip through `run`), so a lost connection is seen and the device dropped.
    case availabilityStaleAfterLoss = "availability() still says nil right after the TPM went away (it answers from the cached device)"
}

/// The clauses of `SecureEnclaveToken`'s contract (Sources/KeychainEngine/SecureEnclaveToken.swift), each a check that
/// every conformer must pass. Each check runs on a thread of its own (tokens block) and records what it finds in a
/// ``Findings``, which the test reports from its own task.
enum ContractClause: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case availableNow = "availability() is nil when keys can be made, and the name says what the token is"
    case createdKeys = "created keys carry their usage, a 65-byte X9.63 public key on P-256, and differ from each other"
    case readsBack = "key(dataRepresentation:) returns the same usage and public key"
    case signaturesVerify = "signing and general keys sign 32-byte digests as r || s that swift-crypto verifies with the public key"
    case keyAgreement = "key-agreement and general keys agree the same secret as a swift-crypto peer"
    case usageRefusals = "a key-agreement key refuses to sign and a signing key refuses ECDH, with errSecParam"
    case digestLength = "a digest that is not 32 bytes is refused with errSecParam"
    case invalidPeer = "a peer key that is not an uncompressed P-256 point is refused with errSecParam"
    case otherInstance = "another instance's key fails with errSecDecode and never answers as another key"
    case damagedBlob = "a damaged, truncated or foreign blob fails with errSecDecode, from key(dataRepresentation:) and from use"
    case concurrentSigning = "signatures from 4 threads at once all verify"
    case noPrivateKeyBytes = "no call returns the private key: no 32-byte window of any output is the private scalar"
    case lost = "a token that goes away fails with errSecNotAvailable, at once, and says so in availability()"

    var testDescription: String { rawValue }

    func check(_ subject: TokenUnderTest, _ findings: Findings) throws {
        let token = subject.token
        switch self {
        case .availableNow:
            findings.expect(token.availability() == nil, "availability() = \(String(describing: token.availability()))")
            findings.expect(!token.name.isEmpty, "the token has no name")

        case .createdKeys:
            for usage in SecureEnclaveKeyUsage.allCases {
                let first = try token.createKey(usage)
                let second = try token.createKey(usage)
                findings.expect(first.usage == usage, "\(usage): created with usage \(first.usage)")
                findings.expect(first.publicKeyX963.count == 65 && first.publicKeyX963.first == 0x04,
                                "\(usage): the public key is \(first.publicKeyX963.count) bytes, not 0x04 || X || Y")
                findings.expect((try? P256.Signing.PublicKey(x963Representation: first.publicKeyX963)) != nil,
                                "\(usage): the public key is not a P-256 point")
                findings.expect(!first.dataRepresentation.isEmpty, "\(usage): empty data representation")
                findings.expect(first.publicKeyX963 != second.publicKeyX963, "\(usage): two keys share a public key")
                findings.expect(first.dataRepresentation != second.dataRepresentation, "\(usage): two keys share a blob")
            }

        case .readsBack:
            for usage in SecureEnclaveKeyUsage.allCases {
                let key = try token.createKey(usage)
                let read = try token.key(dataRepresentation: key.dataRepresentation)
                findings.expect(read.usage == usage, "\(usage): read back as \(read.usage)")
                findings.expect(read.publicKeyX963 == key.publicKeyX963, "\(usage): read back with another public key")
                findings.expect(read.dataRepresentation == key.dataRepresentation, "\(usage): read back with another blob")
                // A slice with a non-zero start index reads the same (tokens must not assume index 0).
                let padded = Data([0xAA]) + key.dataRepresentation
                let slice = padded[padded.index(after: padded.startIndex)...]
                let fromSlice = try token.key(dataRepresentation: slice)
                findings.expect(fromSlice.publicKeyX963 == key.publicKeyX963, "\(usage): a slice read back as another key")
            }

        case .signaturesVerify:
            for usage in [SecureEnclaveKeyUsage.signing, .general] {
                let key = try token.createKey(usage)
                let publicKey = try P256.Signing.PublicKey(x963Representation: key.publicKeyX963)
                let message = Data("the token signs \(usage)".utf8)
                let raw = try token.signature(digest: Data(SHA256.hash(data: message)), with: key.dataRepresentation)
                findings.expect(raw.count == 64, "\(usage): the signature is \(raw.count) bytes, not r || s")
                let signature = try P256.Signing.ECDSASignature(rawRepresentation: raw)
                findings.expect(publicKey.isValidSignature(signature, for: message), "\(usage): the signature does not verify")
                findings.expect(!publicKey.isValidSignature(signature, for: Data("another message".utf8)),
                                "\(usage): the signature verifies for another message")
                let other = try P256.Signing.PublicKey(x963Representation: token.createKey(usage).publicKeyX963)
                findings.expect(!other.isValidSignature(signature, for: message), "\(usage): another key's public key verifies it")
            }

        case .keyAgreement:
            for usage in [SecureEnclaveKeyUsage.keyAgreement, .general] {
                let key = try token.createKey(usage)
                let tokenPublic = try P256.KeyAgreement.PublicKey(x963Representation: key.publicKeyX963)
                for _ in 0..<2 {
                    let peer = P256.KeyAgreement.PrivateKey()
                    let secret = try token.sharedSecret(peerX963: peer.publicKey.x963Representation, with: key.dataRepresentation)
                    let expected = try peer.sharedSecretFromKeyAgreement(with: tokenPublic).withUnsafeBytes { Data($0) }
                    findings.expect(secret.count == 32, "\(usage): the shared secret is \(secret.count) bytes")
                    findings.expect(secret == expected, "\(usage): the shared secret differs from the peer's")
                }
            }

        case .usageRefusals:
            let signing = try token.createKey(.signing)
            let agreement = try token.createKey(.keyAgreement)
            let peer = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
            findings.expectFailure(Status.param, "ECDH with a signing key") {
                try token.sharedSecret(peerX963: peer, with: signing.dataRepresentation)
            }
            findings.expectFailure(Status.param, "a signature with a key-agreement key") {
                try token.signature(digest: Data(SHA256.hash(data: Data("x".utf8))), with: agreement.dataRepresentation)
            }
            // The refusals leave the token working.
            _ = try token.signature(digest: Data(SHA256.hash(data: Data("x".utf8))), with: signing.dataRepresentation)

        case .digestLength:
            for usage in [SecureEnclaveKeyUsage.signing, .general] {
                let key = try token.createKey(usage)
                for length in [0, 20, 31, 33, 48, 64] {
                    findings.expectFailure(Status.param, "\(usage): a \(length)-byte digest") {
                        try token.signature(digest: Data(repeating: 0x5A, count: length), with: key.dataRepresentation)
                    }
                }
            }

        case .invalidPeer:
            let valid = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
            var offCurve = valid
            offCurve[offCurve.index(before: offCurve.endIndex)] ^= 0x01  // y changed: no longer on the curve
            var wrongPrefix = valid
            wrongPrefix[wrongPrefix.startIndex] = 0x05
            let compressed = P256.KeyAgreement.PrivateKey().publicKey.compressedRepresentation
            let peers: [(String, Data)] = [
                ("a point off the curve", offCurve),
                ("a wrong prefix", wrongPrefix),
                ("65 zero bytes", Data(repeating: 0, count: 65)),
                ("the raw X || Y without prefix", Data(valid.dropFirst())),
                ("a compressed point", compressed),
                ("a truncated point", Data(valid.prefix(64))),
                ("no bytes", Data()),
            ]
            for usage in [SecureEnclaveKeyUsage.keyAgreement, .general] {
                let key = try token.createKey(usage)
                for (what, peer) in peers {
                    findings.expectFailure(Status.param, "\(usage): \(what)") {
                        try token.sharedSecret(peerX963: peer, with: key.dataRepresentation)
                    }
                }
                _ = try token.sharedSecret(peerX963: valid, with: key.dataRepresentation)
            }

        case .otherInstance:
            let other = try subject.makeOther()
            for usage in SecureEnclaveKeyUsage.allCases {
                let foreign = try other.createKey(usage)
                // Reading may need no hardware (a TPM blob's public part is readable offline): then it must answer
                // with the key's own usage and public key; a token that checks the blob refuses it with errSecDecode.
                do throws(EngineError) {
                    let read = try token.key(dataRepresentation: foreign.dataRepresentation)
                    findings.expect(read.publicKeyX963 == foreign.publicKeyX963 && read.usage == usage,
                                    "\(usage): another instance's key read back as another key")
                } catch {
                    findings.expect(error.status == Status.decode, "\(usage): reading another instance's key: \(error)")
                }
                if usage != .keyAgreement {
                    findings.expectFailure(Status.decode, "\(usage): signing with another instance's key") {
                        try token.signature(digest: Data(SHA256.hash(data: Data("x".utf8))), with: foreign.dataRepresentation)
                    }
                }
                if usage != .signing {
                    findings.expectFailure(Status.decode, "\(usage): ECDH with another instance's key") {
                        try token.sharedSecret(peerX963: P256.KeyAgreement.PrivateKey().publicKey.x963Representation,
                                               with: foreign.dataRepresentation)
                    }
                }
            }
            // The token still works after the refusals.
            let own = try token.createKey(.signing)
            _ = try token.signature(digest: Data(SHA256.hash(data: Data("x".utf8))), with: own.dataRepresentation)

        case .damagedBlob:
            let key = try token.createKey(.general)
            let blob = key.dataRepresentation
            let digest = Data(SHA256.hash(data: Data("x".utf8)))
            var damaged: [(String, Data)] = [
                ("no bytes", Data()),
                ("one byte", Data(blob.prefix(1))),
                ("the first half", Data(blob.prefix(blob.count / 2))),
                ("all but the last byte", Data(blob.dropLast())),
                ("all but the first byte", Data(blob.dropFirst())),
                ("a byte appended", blob + Data([0])),
                ("random bytes of the same length", Data((0..<blob.count).map { _ in UInt8.random(in: 0...255) })),
                ("a software key's X9.63 private key", P256.Signing.PrivateKey().x963Representation),
            ]
            // Every single-byte change, wherever it is: reading must refuse each.
            for index in 0..<blob.count {
                var flipped = Data(blob)
                flipped[index] ^= 0x01
                damaged.append(("bit 0 of byte \(index) flipped", flipped))
            }
            for (what, bytes) in damaged {
                findings.expectFailure(Status.decode, "key(dataRepresentation:) of \(what)") {
                    try token.key(dataRepresentation: bytes)
                }
            }
            // Using one: a sample (each use may be a hardware round trip).
            let uses = damaged.prefix(8) + [damaged[damaged.count / 2 + 4], damaged[damaged.count - 1]]
            for (what, bytes) in uses {
                findings.expectFailure(Status.decode, "signing with \(what)") {
                    try token.signature(digest: digest, with: bytes)
                }
            }
            findings.expectFailure(Status.decode, "ECDH with a truncated blob") {
                try token.sharedSecret(peerX963: P256.KeyAgreement.PrivateKey().publicKey.x963Representation,
                                       with: Data(blob.dropLast()))
            }
            // The intact blob still works.
            _ = try token.signature(digest: digest, with: blob)

        case .concurrentSigning:
            let key = try token.createKey(.signing)
            let publicKey = try P256.Signing.PublicKey(x963Representation: key.publicKeyX963)
            let group = DispatchGroup()
            let results = ResultBox()
            for thread in 0..<4 {
                group.enter()
                let worker = Thread {
                    defer { group.leave() }
                    for round in 0..<6 {
                        let message = Data("thread \(thread) round \(round)".utf8)
                        do {
                            let raw = try token.signature(digest: Data(SHA256.hash(data: message)), with: key.dataRepresentation)
                            let signature = try P256.Signing.ECDSASignature(rawRepresentation: raw)
                            results.add(publicKey.isValidSignature(signature, for: message) ? nil : "thread \(thread) round \(round): does not verify")
                        } catch {
                            results.add("thread \(thread) round \(round): \(error)")
                        }
                    }
                }
                worker.stackSize = 1 << 20
                worker.start()
            }
            // The threads' own completion is the signal (a token call never hangs: the contract's own clause,
            // and the TPM's command deadline).
            group.wait()
            findings.expect(results.count == 24, "\(results.count) of 24 signatures came back")
            for failure in results.failures { findings.fail(failure) }

        case .noPrivateKeyBytes:
            for usage in SecureEnclaveKeyUsage.allCases {
                let key = try token.createKey(usage)
                var outputs: [(String, Data)] = [
                    ("the data representation", key.dataRepresentation),
                    ("the public key", key.publicKeyX963),
                    ("the data representation read back", try token.key(dataRepresentation: key.dataRepresentation).dataRepresentation),
                ]
                if usage != .keyAgreement {
                    outputs.append(("a signature", try token.signature(digest: Data(SHA256.hash(data: Data("x".utf8))), with: key.dataRepresentation)))
                }
                if usage != .signing {
                    outputs.append(("a shared secret", try token.sharedSecret(peerX963: P256.KeyAgreement.PrivateKey().publicKey.x963Representation,
                                                                             with: key.dataRepresentation)))
                }
                for (what, bytes) in outputs {
                    let window = privateScalarWindow(in: bytes, publicKey: key.publicKeyX963)
                    findings.expect(window == nil, "\(usage): \(what) holds the private key at offset \(window ?? -1)")
                }
            }

        case .lost:
            let signing = try token.createKey(.signing)
            let agreement = try token.createKey(.keyAgreement)
            try subject.lose()
            let immediately = token.availability()
            findings.expect(immediately?.status == Status.notAvailable,
                            "availability() right after the loss: \(String(describing: immediately))",
                            known: subject.knownIssues.contains(.availabilityStaleAfterLoss) ? .availabilityStaleAfterLoss : nil)
            findings.expectFailure(Status.notAvailable, "creating a key after the loss") { try token.createKey(.signing) }
            findings.expectFailure(Status.notAvailable, "signing after the loss") {
                try token.signature(digest: Data(SHA256.hash(data: Data("x".utf8))), with: signing.dataRepresentation)
            }
            findings.expectFailure(Status.notAvailable, "ECDH after the loss") {
                try token.sharedSecret(peerX963: P256.KeyAgreement.PrivateKey().publicKey.x963Representation,
                                       with: agreement.dataRepresentation)
            }
            let afterFailures = token.availability()
            findings.expect(afterFailures?.status == Status.notAvailable,
                            "availability() after calls failed: \(String(describing: afterFailures))")
        }
    }
}

/// The offset of a 32-byte window of `bytes` that is the private scalar of `publicKey` (its public key is
/// `publicKey`), or nil. A behavioural check: it needs no knowledge of the token's scalar.
func privateScalarWindow(in bytes: Data, publicKey: Data) -> Int? {
    let array = [UInt8](bytes)
    guard array.count >= 32 else { return nil }
    for offset in 0...(array.count - 32) {
        if let candidate = try? P256.Signing.PrivateKey(rawRepresentation: array[offset..<offset + 32]),
           candidate.publicKey.x963Representation == publicKey {
            return offset
        }
    }
    return nil
}

/// What a check found, collected on its thread and reported by the test's task (where Swift Testing attributes it).
final class Findings: @unchecked Sendable {
    // @unchecked Sendable: `items` is reached only while `lock` is held.
    private let lock = NSLock()
    private var items: [(comment: String, location: SourceLocation)] = []
    private var known: [(issue: KnownContractIssue, happened: Bool, comment: String, location: SourceLocation)] = []

    func fail(_ comment: String, sourceLocation: SourceLocation = #_sourceLocation) {
        lock.lock()
        items.append((comment, sourceLocation))
        lock.unlock()
    }

    func expect(_ condition: Bool, _ comment: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation) {
        if !condition { fail(comment(), sourceLocation: sourceLocation) }
    }

    /// As `expect`, but a failure that is `known` is reported as a known issue (and its absence as a failure).
    func expect(_ condition: Bool, _ comment: @autoclosure () -> String, known: KnownContractIssue?,
                sourceLocation: SourceLocation = #_sourceLocation) {
        guard let known else { return expect(condition, comment(), sourceLocation: sourceLocation) }
        lock.lock()
        self.known.append((known, !condition, comment(), sourceLocation))
        lock.unlock()
    }

    /// Expects `body` to fail with an `EngineError` of `status`.
    func expectFailure<T>(_ status: Int32, _ what: String, sourceLocation: SourceLocation = #_sourceLocation,
                          _ body: () throws -> T) {
        let expected = Status.name(for: status) ?? "\(status)"
        do {
            _ = try body()
            fail("\(what): succeeded; expected \(expected)", sourceLocation: sourceLocation)
        } catch let error as EngineError {
            expect(error.status == status, "\(what): \(error); expected \(expected)", sourceLocation: sourceLocation)
        } catch {
            fail("\(what): threw \(type(of: error)), not an EngineError; expected \(expected)", sourceLocation: sourceLocation)
        }
    }

    /// Records every finding as an issue of the current test.
    func report() {
        lock.lock()
        let found = items
        let knownFound = known
        lock.unlock()
        for item in found { Issue.record(Comment(rawValue: item.comment), sourceLocation: item.location) }
        for item in knownFound {
            if item.happened {
                withKnownIssue(Comment(rawValue: item.issue.rawValue)) {
                    Issue.record(Comment(rawValue: item.comment), sourceLocation: item.location)
                }
            } else {
                Issue.record("Known issue fixed, remove it from the token's knownIssues: \(item.issue.rawValue)",
                             sourceLocation: item.location)
            }
        }
    }
}

/// The outcomes of the concurrent signers.
final class ResultBox: @unchecked Sendable {
    // @unchecked Sendable: the arrays are reached only while `lock` is held.
    private let lock = NSLock()
    private var outcomes: [String?] = []

    func add(_ failure: String?) {
        lock.lock()
        outcomes.append(failure)
        lock.unlock()
    }

    var count: Int { lock.lock(); defer { lock.unlock() }; return outcomes.count }
    var failures: [String] { lock.lock(); defer { lock.unlock() }; return outcomes.compactMap { $0 } }
}

/// Runs `body` on a thread of its own: tokens block, and Swift's cooperative pool must not.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.stackSize = 1 << 20
        thread.start()
    }
}
