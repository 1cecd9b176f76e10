import Crypto
import Foundation
import KeychainEngine

/// A Secure Enclave in software for tests: a `SecureEnclaveToken` whose P-256 private keys never leave it.
///
/// It keeps the whole token contract (the shared token suite runs it next to the TPM), so code that uses a hardware
/// key can be tested on any machine, with controls no hardware offers: ``makeUnavailable(status:reason:)`` plays a
/// device without a Secure Enclave or a TPM that went away, ``refuseKeyUse(status:reason:)`` a TPM that is there but
/// refuses to sign or agree keys for a reason of its own, ``keyShape`` decides whether new keys have a compact
/// representation, and the counters (``createdKeyCount``, ``signatureCount``, ``keyAgreementCount``) show what the
/// code under test asked of it.
///
/// ```swift
/// let enclave = EmulatedSecureEnclave()
/// let key = try enclave.createKey(.signing)
/// let signature = try enclave.signature(digest: Data(SHA256.hash(data: message)), with: key.dataRepresentation)
/// ```
///
/// How keys are kept: each instance draws a random 256-bit wrapping key that exists only in its memory. A key's
/// `SecureEnclaveKey.dataRepresentation` is the private scalar sealed with AES-GCM (swift-crypto) under that
/// wrapping key, with the blob's header, usage and public key as authenticated data. So a blob works only with the
/// instance that made it — another instance (another "device", or the same test run again) fails with
/// `errSecDecode`, as any damaged or truncated blob does — and changing its usage or public key is detected.
///
/// `InMemoryKeychain(profile: .device)` has one (``InMemoryKeychain/emulatedSecureEnclave``); the simulator profile
/// has none, as a simulator has no Secure Enclave.
///
/// - Important: This is an emulation for tests: the private keys are in this process's memory, where a debugger or
///   a memory dump can read them. The public API never returns them, and ``description`` and reflection show no
///   key bytes. Never use it to protect real keys.
public final class EmulatedSecureEnclave: SecureEnclaveToken, CustomStringConvertible, CustomReflectable {
    /// Which P-256 keys ``createKey(_:)`` makes, by whether their public key has a compact representation
    /// (`P256.Signing.PublicKey.compactRepresentation`, only for keys whose y is the smaller of the two for their x).
    ///
    /// CryptoKit's `compactRepresentable: true` (its default) asks for such a key: the code making the key retries
    /// until the enclave gives one, and gives up after a bound. ``withoutCompactRepresentation`` tests that bound.
    public enum KeyShape: Sendable, Hashable, CustomStringConvertible {
        /// Any key, as a Secure Enclave or a TPM makes them: about half have a compact representation. The default.
        case any
        /// Only keys whose public key has a compact representation: a caller's retries are never needed.
        case compactRepresentable
        /// Only keys whose public key has no compact representation: a caller asking for a compact one retries
        /// until it gives up.
        case withoutCompactRepresentation

        /// `any`, `compactRepresentable` or `withoutCompactRepresentation`.
        public var description: String {
            switch self {
            case .any: "any"
            case .compactRepresentable: "compactRepresentable"
            case .withoutCompactRepresentation: "withoutCompactRepresentation"
            }
        }
    }

    private struct State {
        var unavailable: EngineError?
        var refusal: EngineError?
        var keyShape: KeyShape
        var createdKeys = 0
        var signatures = 0
        var keyAgreements = 0
    }

    /// A short name for logs (`SecureEnclaveToken.name`).
    public let name: String
    /// The wrapping key: random, in this instance's memory only.
    private let wrappingKey = SymmetricKey(size: .bits256)
    private let state: Locked<State>

    /// Creates an emulated enclave, available, with a wrapping key of its own.
    ///
    /// - Parameters:
    ///   - name: what ``name`` (and `keystone doctor`-style reports) call it. Default: `"emulated Secure Enclave"`.
    ///   - keyShape: which keys ``createKey(_:)`` makes (``keyShape``). Default: ``KeyShape/any``, as hardware.
    public init(name: String = "emulated Secure Enclave", keyShape: KeyShape = .any) {
        self.name = name
        self.state = Locked(State(keyShape: keyShape))
    }

    // MARK: - Controls

    /// Makes every later call that needs the enclave fail with `status` (and ``availability()`` report it), as a
    /// device without a Secure Enclave (`errSecUnimplemented`) or a TPM that went away (`errSecNotAvailable`, the
    /// default) does. Keys made before stay valid once ``makeAvailable()`` is called.
    ///
    /// ``key(dataRepresentation:)`` keeps working while unavailable: reading a blob's usage and public key needs no
    /// hardware, as with the TPM.
    ///
    /// - Parameters:
    ///   - status: the `OSStatus` calls fail with. Default: `errSecNotAvailable` (-25291).
    ///   - reason: the error's reason.
    public func makeUnavailable(status: Int32 = Status.notAvailable, reason: String = "the emulated Secure Enclave was made unavailable") {
        state.withLock { $0.unavailable = EngineError(status, reason) }
    }

    /// Makes the enclave available again (the keys it made before work again).
    public func makeAvailable() {
        state.withLock { $0.unavailable = nil }
    }

    /// Whether keys can be made and used now (false after ``makeUnavailable(status:reason:)``).
    public var isAvailable: Bool { state.current.unavailable == nil }

    /// Makes every later signature and key agreement fail with `status`, as a TPM that is present but refuses an
    /// operation for a reason of its own (out of memory for object contexts, in lockout, a failed self-test), until
    /// ``allowKeyUse()``.
    ///
    /// Unlike ``makeUnavailable(status:reason:)``, the enclave stays available: ``availability()`` reports nil,
    /// ``isAvailable`` stays true, and ``createKey(_:)`` and ``key(dataRepresentation:)`` keep working, so code can
    /// be tested that must keep a refusal's own status (and not report the key as another device's, or the enclave
    /// as gone). While unavailable, unavailability wins. Refused calls are not counted.
    ///
    /// - Parameters:
    ///   - status: the `OSStatus` signatures and key agreements fail with. Default: `errSecInternalComponent` (-2070).
    ///   - reason: the error's reason.
    public func refuseKeyUse(status: Int32 = Status.internalComponent,
                             reason: String = "the emulated Secure Enclave was told to refuse key use") {
        state.withLock { $0.refusal = EngineError(status, reason) }
    }

    /// Ends ``refuseKeyUse(status:reason:)``: keys sign and agree keys again.
    public func allowKeyUse() {
        state.withLock { $0.refusal = nil }
    }

    /// Whether signatures and key agreements are refused now (after ``refuseKeyUse(status:reason:)``).
    public var isRefusingKeyUse: Bool { state.current.refusal != nil }

    /// Which keys ``createKey(_:)`` makes from now on (keys made before are unchanged). Set it, or pass it to
    /// ``init(name:keyShape:)``.
    public var keyShape: KeyShape {
        get { state.current.keyShape }
        set { state.withLock { $0.keyShape = newValue } }
    }

    /// How many keys ``createKey(_:)`` made.
    public var createdKeyCount: Int { state.current.createdKeys }
    /// How many signatures ``signature(digest:with:)`` returned.
    public var signatureCount: Int { state.current.signatures }
    /// How many shared secrets ``sharedSecret(peerX963:with:)`` returned.
    public var keyAgreementCount: Int { state.current.keyAgreements }

    /// `EmulatedSecureEnclave("name", available)`, with `refusing key use: <status>` and `keyShape: <shape>` when
    /// set: never key bytes.
    public var description: String {
        let current = state.current
        var parts = [current.unavailable.map { "unavailable: \($0.status)" } ?? "available"]
        if let refusal = current.refusal { parts.append("refusing key use: \(refusal.status)") }
        if current.keyShape != .any { parts.append("keyShape: \(current.keyShape)") }
        return "EmulatedSecureEnclave(\"\(name)\", \(parts.joined(separator: ", ")))"
    }

    /// No children: `dump()` and debuggers' summaries do not reach the wrapping key through reflection.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .class) }

    // MARK: - SecureEnclaveToken

    /// Nil when available, else the error of ``makeUnavailable(status:reason:)``.
    public func availability() -> EngineError? { state.current.unavailable }

    /// Makes a P-256 key inside the emulated enclave.
    ///
    /// Its public key has a compact representation or not as ``keyShape`` says; a refusal of
    /// ``refuseKeyUse(status:reason:)`` does not stop it.
    ///
    /// - Throws: the status of ``makeUnavailable(status:reason:)`` while unavailable.
    public func createKey(_ usage: SecureEnclaveKeyUsage) throws(EngineError) -> SecureEnclaveKey {
        try checkAvailable()
        let privateKey = Self.newKey(state.current.keyShape)
        let publicKey = privateKey.publicKey.x963Representation
        let header = Self.header(usage: usage, publicKey: publicKey)
        let sealed: Data
        do {
            guard let combined = try AES.GCM.seal(privateKey.rawRepresentation, using: wrappingKey,
                                                  authenticating: header).combined else {
                throw EngineError(Status.internalComponent, "AES-GCM gave no combined form")
            }
            sealed = combined
        } catch {
            throw EngineError(Status.internalComponent, "the emulated enclave could not seal a new key")
        }
        state.withLock { $0.createdKeys += 1 }
        return SecureEnclaveKey(usage: usage, dataRepresentation: header + sealed, publicKeyX963: publicKey)
    }

    /// Reads a key's usage and public key, after checking that this instance sealed it.
    ///
    /// - Throws: `errSecDecode` for a blob of another instance, or damaged, truncated or not a blob at all.
    public func key(dataRepresentation: Data) throws(EngineError) -> SecureEnclaveKey {
        let opened = try open(dataRepresentation)
        return opened.key
    }

    /// Signs a 32-byte digest with the key; returns r || s.
    ///
    /// - Throws: `errSecParam` (digest not 32 bytes, a key-agreement key), `errSecDecode` (not this instance's
    ///   key), the status of ``makeUnavailable(status:reason:)`` or of ``refuseKeyUse(status:reason:)``.
    public func signature(digest: Data, with dataRepresentation: Data) throws(EngineError) -> Data {
        guard digest.count == 32 else { throw EngineError.param("a SHA-256 digest has 32 bytes, not \(digest.count)") }
        try checkKeyUse()
        let opened = try open(dataRepresentation)
        guard opened.key.usage != .keyAgreement else {
            throw EngineError.param("the key is for key agreement only; it cannot sign")
        }
        let signature: P256.Signing.ECDSASignature
        do {
            let privateKey = try P256.Signing.PrivateKey(rawRepresentation: opened.scalar)
            signature = try privateKey.signature(for: RawSHA256Digest(bytes: Array(digest)))
        } catch {
            throw EngineError(Status.internalComponent, "the emulated enclave could not sign")
        }
        state.withLock { $0.signatures += 1 }
        return signature.rawRepresentation
    }

    /// ECDH with a peer's X9.63 public key; returns the shared x coordinate.
    ///
    /// - Throws: `errSecParam` (a signing-only key, a peer key that is not a P-256 point), `errSecDecode` (not this
    ///   instance's key), the status of ``makeUnavailable(status:reason:)`` or of ``refuseKeyUse(status:reason:)``.
    public func sharedSecret(peerX963: Data, with dataRepresentation: Data) throws(EngineError) -> Data {
        try checkKeyUse()
        let opened = try open(dataRepresentation)
        guard opened.key.usage != .signing else {
            throw EngineError.param("the key is for signing only; it cannot agree keys")
        }
        // Only the uncompressed form (0x04 || X || Y) the contract names; swift-crypto checks the point is on the curve.
        guard peerX963.count == 65, peerX963.first == 0x04,
              let peer = try? P256.KeyAgreement.PublicKey(x963Representation: peerX963) else {
            throw EngineError.param("the peer key is not an uncompressed P-256 point (ANSI X9.63, 65 bytes)")
        }
        let secret: Data
        do {
            let privateKey = try P256.KeyAgreement.PrivateKey(rawRepresentation: opened.scalar)
            secret = try privateKey.sharedSecretFromKeyAgreement(with: peer).withUnsafeBytes { Data($0) }
        } catch {
            throw EngineError(Status.internalComponent, "the emulated enclave could not agree a key")
        }
        state.withLock { $0.keyAgreements += 1 }
        return secret
    }

    // MARK: - Blobs

    // "KSEE" | version 1 | usage (1 signing, 2 key agreement, 3 general) | public key (65, X9.63) | AES-GCM combined
    // (nonce 12 | ciphertext 32 | tag 16). Everything before the sealed box is its authenticated data.
    private static let magic = Data("KSEE".utf8)
    private static let headerCount = 4 + 1 + 1 + 65
    private static let blobCount = headerCount + 12 + 32 + 16

    private static func header(usage: SecureEnclaveKeyUsage, publicKey: Data) -> Data {
        magic + Data([1, usageByte(usage)]) + publicKey
    }

    private static func usageByte(_ usage: SecureEnclaveKeyUsage) -> UInt8 {
        switch usage {
        case .signing: 1
        case .keyAgreement: 2
        case .general: 3
        }
    }

    private static func usage(byte: UInt8) -> SecureEnclaveKeyUsage? {
        switch byte {
        case 1: .signing
        case 2: .keyAgreement
        case 3: .general
        default: nil
        }
    }

    /// The key and its private scalar, once the blob is known to be this instance's and intact.
    private func open(_ blob: Data) throws(EngineError) -> (key: SecureEnclaveKey, scalar: Data) {
        let bytes = Data(blob)  // indices from 0, whatever slice was passed
        guard bytes.count == Self.blobCount, bytes.prefix(4) == Self.magic, bytes[4] == 1,
              let usage = Self.usage(byte: bytes[5]) else {
            throw EngineError(Status.decode, "not a key of an emulated Secure Enclave (\(bytes.count) bytes)")
        }
        let header = bytes.prefix(Self.headerCount)
        let publicKey = Data(bytes[6..<Self.headerCount])
        let scalar: Data
        do {
            let box = try AES.GCM.SealedBox(combined: bytes.suffix(from: Self.headerCount))
            scalar = try AES.GCM.open(box, using: wrappingKey, authenticating: header)
        } catch {
            throw EngineError(Status.decode, "the key was made by another emulated Secure Enclave, or is damaged")
        }
        // The authenticated public key must be the scalar's (it is, unless this code sealed a wrong one).
        guard let privateKey = try? P256.Signing.PrivateKey(rawRepresentation: scalar),
              privateKey.publicKey.x963Representation == publicKey else {
            throw EngineError(Status.decode, "the key's public key does not match its private key")
        }
        return (SecureEnclaveKey(usage: usage, dataRepresentation: bytes, publicKeyX963: publicKey), scalar)
    }

    private func checkAvailable() throws(EngineError) {
        if let unavailable = state.current.unavailable { throw unavailable }
    }

    /// Unavailability first (a TPM that is gone refuses nothing), then a refusal. Before the blob is opened, as a TPM
    /// refusing to load a key never reads it.
    private func checkKeyUse() throws(EngineError) {
        let current = state.current
        if let unavailable = current.unavailable { throw unavailable }
        if let refusal = current.refusal { throw refusal }
    }

    /// A new private key of `shape`. For the two restricted shapes about one key in two fits, so the loop ends
    /// quickly (CryptoKit's `compactRepresentable: true` is swift-crypto's own way to draw a compact one).
    private static func newKey(_ shape: KeyShape) -> P256.Signing.PrivateKey {
        switch shape {
        case .any:
            return P256.Signing.PrivateKey(compactRepresentable: false)
        case .compactRepresentable:
            return P256.Signing.PrivateKey(compactRepresentable: true)
        case .withoutCompactRepresentation:
            var key = P256.Signing.PrivateKey(compactRepresentable: false)
            while key.publicKey.compactRepresentation != nil { key = P256.Signing.PrivateKey(compactRepresentable: false) }
            return key
        }
    }
}

/// A caller's 32-byte digest as swift-crypto's `Digest` (its digest types have no public initializer from bytes).
/// ECDSA reads only the bytes.
private struct RawSHA256Digest: Digest {
    let bytes: [UInt8]
    static var byteCount: Int { 32 }
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try bytes.withUnsafeBytes(body) }
    func makeIterator() -> IndexingIterator<[UInt8]> { bytes.makeIterator() }
    var description: String { "RawSHA256Digest(32 bytes)" }
}
