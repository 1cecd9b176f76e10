#if !canImport(Darwin)
import CryptoKit
import Foundation
import KeychainEngine
import KeychainServices
import Swtpm
import Testing

/// A digest given as bytes, so a software key can sign what a Secure Enclave token is handed (swift-crypto signs
/// `Digest`s only).
struct RawDigest: Digest {
    static let byteCount = 32
    let bytes: [UInt8]

    init(_ data: Data) { bytes = [UInt8](data) }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes(body)
    }

    func makeIterator() -> IndexingIterator<[UInt8]> { bytes.makeIterator() }

    var description: String { "RawDigest(\(bytes.count) bytes)" }
}

/// A Secure Enclave token in software for the tests that are about the CryptoKit layer rather than the TPM: keys are
/// swift-crypto keys whose "wrapped" form is only usable by the same token instance (`errSecDecode` for any other),
/// usage is enforced, and every call is counted.
///
/// `nonCompactOnly`: makes only keys whose public key has no compact representation.
final class ScriptedToken: SecureEnclaveToken, @unchecked Sendable {
    private static let magic = Array("TEST".utf8)

    let name = "scripted test token"
    let nonCompactOnly: Bool
    private let id = UUID()
    private let lock = NSLock()
    private var counts = (creates: 0, signatures: 0, agreements: 0)

    init(nonCompactOnly: Bool = false) { self.nonCompactOnly = nonCompactOnly }

    var creates: Int { lock.withLock { counts.creates } }
    var signatures: Int { lock.withLock { counts.signatures } }
    var agreements: Int { lock.withLock { counts.agreements } }

    func availability() -> EngineError? { nil }

    func createKey(_ usage: SecureEnclaveKeyUsage) throws(EngineError) -> SecureEnclaveKey {
        lock.withLock { counts.creates += 1 }
        var key = P256.Signing.PrivateKey(compactRepresentable: !nonCompactOnly)
        while nonCompactOnly && key.publicKey.compactRepresentation != nil {
            key = P256.Signing.PrivateKey(compactRepresentable: false)
        }
        var blob = Data(Self.magic)
        withUnsafeBytes(of: id.uuid) { blob.append(contentsOf: $0) }
        blob.append(Self.code(usage))
        blob.append(key.rawRepresentation)
        return SecureEnclaveKey(usage: usage, dataRepresentation: blob, publicKeyX963: key.publicKey.x963Representation)
    }

    func key(dataRepresentation: Data) throws(EngineError) -> SecureEnclaveKey {
        let (usage, key) = try open(dataRepresentation)
        return SecureEnclaveKey(usage: usage, dataRepresentation: dataRepresentation,
                                publicKeyX963: key.publicKey.x963Representation)
    }

    func signature(digest: Data, with dataRepresentation: Data) throws(EngineError) -> Data {
        let (usage, key) = try open(dataRepresentation)
        guard usage != .keyAgreement else { throw EngineError.param("a key-agreement key does not sign") }
        guard digest.count == 32 else { throw EngineError.param("a SHA-256 digest has 32 bytes") }
        lock.withLock { counts.signatures += 1 }
        do {
            return try key.signature(for: RawDigest(digest)).rawRepresentation
        } catch {
            throw EngineError(Status.internalComponent, "\(error)")
        }
    }

    func sharedSecret(peerX963: Data, with dataRepresentation: Data) throws(EngineError) -> Data {
        let (usage, key) = try open(dataRepresentation)
        guard usage != .signing else { throw EngineError.param("a signing key does not agree keys") }
        lock.withLock { counts.agreements += 1 }
        do {
            let agreementKey = try P256.KeyAgreement.PrivateKey(rawRepresentation: key.rawRepresentation)
            let peer = try P256.KeyAgreement.PublicKey(x963Representation: peerX963)
            return try agreementKey.sharedSecretFromKeyAgreement(with: peer).withUnsafeBytes { Data($0) }
        } catch {
            throw EngineError.param("the peer's public key is invalid")
        }
    }

    private func open(_ blob: Data) throws(EngineError) -> (SecureEnclaveKeyUsage, P256.Signing.PrivateKey) {
        let bytes = [UInt8](blob)
        var mine = Self.magic
        withUnsafeBytes(of: id.uuid) { mine.append(contentsOf: $0) }
        guard bytes.count == mine.count + 1 + 32, Array(bytes.prefix(mine.count)) == mine,
              let usage = Self.usage(bytes[mine.count]),
              let key = try? P256.Signing.PrivateKey(rawRepresentation: bytes.suffix(32))
        else { throw EngineError(Status.decode, "not a key of this scripted token") }
        return (usage, key)
    }

    private static func code(_ usage: SecureEnclaveKeyUsage) -> UInt8 {
        switch usage {
        case .signing: 1
        case .keyAgreement: 2
        case .general: 3
        }
    }

    private static func usage(_ code: UInt8) -> SecureEnclaveKeyUsage? {
        switch code {
        case 1: .signing
        case 2: .keyAgreement
        case 3: .general
        default: nil
        }
    }
}

/// An authenticator that answers with scripted outcomes (the last one repeats) and records every request.
final class CountingAuthenticator: Authenticator, @unchecked Sendable {
    private let lock = NSLock()
    private var outcomes: [AuthenticationOutcome]
    private var recorded: [AuthenticationRequest] = []
    private var domainState: Data?

    init(_ outcomes: AuthenticationOutcome..., domainState: Data? = nil) {
        self.outcomes = outcomes.isEmpty ? [.success] : outcomes
        self.domainState = domainState
    }

    var requests: [AuthenticationRequest] { lock.withLock { recorded } }
    var count: Int { lock.withLock { recorded.count } }

    func authenticate(_ request: AuthenticationRequest) -> AuthenticationOutcome {
        lock.withLock {
            recorded.append(request)
            if request.cancellation?.isCancelled == true { return .appCancel }
            return outcomes.count > 1 ? outcomes.removeFirst() : outcomes[0]
        }
    }

    func availability(for flags: AccessControlFlags) -> AuthenticationOutcome? { nil }
    var biometryKind: BiometryKind { .fingerprint }
    var biometryDomainState: Data? {
        get { lock.withLock { domainState } }
        set { lock.withLock { domainState = newValue } }
    }
}

/// A clock the test moves by hand.
final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current = Date(timeIntervalSinceReferenceDate: 800_000_000)

    var now: @Sendable () -> Date { { [self] in lock.withLock { current } } }

    func advance(by seconds: TimeInterval) { lock.withLock { current += seconds } }
}

/// Runs `body` on a thread of its own with `token` as the process's Secure Enclave and, for LAContext and key uses, an
/// engine whose authenticator and clock are the test's; restores the previous Secure Enclave and engine after.
///
/// Process-wide state: only suites with `.ownsDefaultKeychain` call it.
func withEnclave<T: Sendable>(_ token: (any SecureEnclaveToken)?, authenticator: any Authenticator = FixedAuthenticator(.success),
                              clock: ManualClock? = nil, _ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await onThread { try inEnclave(token, authenticator: authenticator, clock: clock, body) }
}

/// ``withEnclave(_:authenticator:clock:_:)`` on the calling thread (already one of its own, as in `withSwtpm`).
func inEnclave<T>(_ token: (any SecureEnclaveToken)?, authenticator: any Authenticator = FixedAuthenticator(.success),
                  clock: ManualClock? = nil, _ body: () throws -> T) rethrows -> T {
    let savedToken = KeychainServicesDefaults.secureEnclave
    var configuration = EngineConfiguration()
    if let clock { configuration.now = clock.now }
    KeychainServicesDefaults.setEngine(KeychainEngine(configuration: configuration, authenticator: authenticator))
    KeychainServicesDefaults.useSecureEnclave(token)
    defer {
        KeychainServicesDefaults.useSecureEnclave(savedToken)
        KeychainServicesDefaults.setEngine(nil)
    }
    return try body()
}

/// The ``SecureEnclaveError`` `body` throws, recording an issue when it throws something else or nothing.
func enclaveError(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> SecureEnclaveError? {
    do {
        try body()
        Issue.record("no error was thrown", sourceLocation: sourceLocation)
    } catch let error as SecureEnclaveError {
        return error
    } catch {
        Issue.record("\(type(of: error)) thrown, not SecureEnclaveError: \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// An access control with flags, as apps make it.
func access(_ flags: SecAccessControlCreateFlags, _ protection: CFString = kSecAttrAccessibleWhenUnlockedThisDeviceOnly) -> SecAccessControl {
    SecAccessControlCreateWithFlags(nil, protection, flags, nil)!
}
#endif
