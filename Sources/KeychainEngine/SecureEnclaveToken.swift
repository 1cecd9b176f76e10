import Foundation

/// What a hardware key is for: P-256 ECDSA signatures or P-256 ECDH.
public enum SecureEnclaveKeyUsage: String, Sendable, Hashable, CaseIterable {
    /// ECDSA with P-256 (`SecureEnclave.P256.Signing`, `kSecKeyAlgorithmECDSASignature…`).
    case signing
    /// ECDH with P-256 (`SecureEnclave.P256.KeyAgreement`, `kSecKeyAlgorithmECDHKeyExchange…`).
    case keyAgreement
    /// Both: a `kSecAttrTokenIDSecureEnclave` SecKey, which Apple lets sign and agree keys.
    case general
}

/// What a hardware key's authorization value is, when the token enforces one (``SecureEnclaveToken/binding(of:)``).
public enum SecureEnclaveKeyBinding: Sendable, Hashable {
    /// None: any use of the key is allowed by the token (the layers above may still ask the person first).
    case none
    /// An `.applicationPassword` password (a PIN): a wrong one is refused by the token and counts toward its
    /// dictionary-attack lockout.
    case password
    /// A random secret the keychain holds and releases only after the person's evaluation (`.userPresence`,
    /// `.biometry…`, `.devicePasscode`): whoever holds only the key's data representation cannot use it.
    case releasedSecret
    /// Derived from such a secret and the `.applicationPassword` password: both are needed.
    case releasedSecretAndPassword
}

/// A P-256 private key held by a ``SecureEnclaveToken``: what the token gave out for it, and its public key.
public struct SecureEnclaveKey: Sendable, Hashable {
    /// What the key is for. A token refuses the other use.
    public let usage: SecureEnclaveKeyUsage
    /// The token's opaque, wrapped form of the private key: usable only with the token that made it.
    public let dataRepresentation: Data
    /// The public key, ANSI X9.63 (0x04 || X || Y, 65 bytes).
    public let publicKeyX963: Data

    /// A key as a token describes it.
    public init(usage: SecureEnclaveKeyUsage, dataRepresentation: Data, publicKeyX963: Data) {
        self.usage = usage
        self.dataRepresentation = dataRepresentation
        self.publicKeyX963 = publicKeyX963
    }
}

/// A token that makes and uses P-256 private keys that never leave it: Apple's Secure Enclave, on Linux a TPM 2.0,
/// in tests an emulation. `kSecAttrTokenIDSecureEnclave` keys, CryptoKit's `SecureEnclave` keys and Keystone's
/// hardware signing keys are all made by one.
///
/// The contract, which every conformer passes (the shared token suite):
/// - ``availability()`` answers without making a key: nil when keys can be made now, else the reason
///   (`errSecUnimplemented` when there is no such hardware, `errSecNotAvailable` when it is there but cannot be
///   reached). It may block briefly (opening a device); it never prompts.
/// - ``createKey(_:)`` generates the key inside the token. Its ``SecureEnclaveKey/dataRepresentation`` is the only
///   thing that leaves, wrapped so that it is useless without this token: any other token (another TPM, another
///   emulated enclave) fails to use it with `errSecDecode`. No call of a token ever returns private key bytes.
/// - ``key(dataRepresentation:)`` checks and reads a data representation (its usage and public key); bytes that are
///   not one fail with `errSecDecode`, never with another key's answer.
/// - ``signature(digest:with:)`` signs a 32-byte SHA-256 digest and returns the raw signature (r || s, 64 bytes),
///   verifiable with the public key; a key-agreement-only key refuses (`errSecParam`).
/// - ``sharedSecret(peerX963:with:)`` returns the ECDH shared secret (the x coordinate, 32 bytes); a peer key that
///   is not a point on P-256 fails with `errSecParam`; a signing-only key refuses (`errSecParam`).
/// - A token that was reachable and is lost mid-way fails with `errSecNotAvailable`; a call never hangs on a token
///   that went away. A failure never leaves the token holding what the call loaded.
/// - Calls are thread safe. They block (hardware, I/O): call them off Swift's cooperative pool.
/// - Access control is not the token's: the layers above (SecKey, CryptoKit's `SecureEnclave`) authenticate the
///   person before each use of a key made with `.privateKeyUsage` and an authentication flag. The one exception is
///   an authorization value (``createKey(_:authorization:)``): a token that can enforce one (the TPM) refuses a use
///   without the right value itself; the layers above give it an `.applicationPassword` key's password, or, for a key
///   with a person flag (``SecureEnclaveKeyBinding/releasedSecret``), a random secret the keychain releases only
///   after the person's evaluation.
public protocol SecureEnclaveToken: Sendable {
    /// A short description for logs and `keystone doctor` ("TPM 2.0 at swtpm:port=2321", "emulated"). Never secret.
    var name: String { get }
    /// Nil when keys can be made and used now, else why not (an ``EngineError`` with its status).
    func availability() -> EngineError?
    /// Makes a P-256 key inside the token.
    /// - Throws: `errSecUnimplemented` / `errSecNotAvailable` when the token is absent or unreachable.
    func createKey(_ usage: SecureEnclaveKeyUsage) throws(EngineError) -> SecureEnclaveKey
    /// Reads a key's usage and public key from its data representation.
    /// - Throws: `errSecDecode` when the bytes are not a key of this kind of token.
    func key(dataRepresentation: Data) throws(EngineError) -> SecureEnclaveKey
    /// Signs a SHA-256 digest (32 bytes) with the key; returns r || s (64 bytes).
    /// - Throws: `errSecDecode` (not this token's key), `errSecParam` (wrong usage, digest not 32 bytes),
    ///   `errSecNotAvailable` (token unreachable).
    func signature(digest: Data, with dataRepresentation: Data) throws(EngineError) -> Data
    /// ECDH with a peer's public key (ANSI X9.63, 65 bytes); returns the shared x coordinate (32 bytes).
    /// - Throws: `errSecDecode` (not this token's key), `errSecParam` (wrong usage, invalid peer key),
    ///   `errSecNotAvailable` (token unreachable).
    func sharedSecret(peerX963: Data, with dataRepresentation: Data) throws(EngineError) -> Data

    /// Makes a P-256 key whose every use needs `authorization`, enforced by the token itself (not by this process):
    /// the TPM refuses a wrong value and counts it toward its dictionary-attack lockout.
    /// - Throws: `errSecUnimplemented` for a token that cannot enforce an authorization value (the default
    ///   implementation); `errSecParam` for an empty value; as ``createKey(_:)``.
    func createKey(_ usage: SecureEnclaveKeyUsage, authorization: Data) throws(EngineError) -> SecureEnclaveKey
    /// Whether the key needs an authorization value (made with ``createKey(_:authorization:)``). Default: false.
    /// - Throws: `errSecDecode` when the bytes are not a key of this kind of token.
    func requiresAuthorization(_ dataRepresentation: Data) throws(EngineError) -> Bool
    /// ``signature(digest:with:)`` with the key's authorization value (nil for a key that needs none).
    /// - Throws: `errSecAuthFailed` when the token refuses the value (or is locked out); `errSecUnimplemented` for a
    ///   value given to a token that cannot enforce one (the default implementation); as ``signature(digest:with:)``.
    func signature(digest: Data, with dataRepresentation: Data, authorization: Data?) throws(EngineError) -> Data
    /// ``sharedSecret(peerX963:with:)`` with the key's authorization value (nil for a key that needs none).
    /// - Throws: as ``signature(digest:with:authorization:)``.
    func sharedSecret(peerX963: Data, with dataRepresentation: Data, authorization: Data?) throws(EngineError) -> Data

    /// Whether the token itself enforces an authorization value (a TPM: true). Default: false.
    var enforcesAuthorization: Bool { get }
    /// ``createKey(_:authorization:)`` recording what the value is (``SecureEnclaveKeyBinding``); a token may treat
    /// the kinds differently (the TPM makes a ``SecureEnclaveKeyBinding/releasedSecret`` key exempt from its
    /// dictionary-attack lockout: the value is random, no one guesses it).
    /// - Throws: as ``createKey(_:authorization:)``; `errSecParam` for ``SecureEnclaveKeyBinding/none``.
    func createKey(_ usage: SecureEnclaveKeyUsage, authorization: Data, binding: SecureEnclaveKeyBinding) throws(EngineError) -> SecureEnclaveKey
    /// What the key's authorization value is. Default: ``SecureEnclaveKeyBinding/password`` when
    /// ``requiresAuthorization(_:)``, else ``SecureEnclaveKeyBinding/none``.
    /// - Throws: `errSecDecode` when the bytes are not a key of this kind of token.
    func binding(of dataRepresentation: Data) throws(EngineError) -> SecureEnclaveKeyBinding
}

// Decision: a token that cannot enforce an authorization value (the emulated and software tokens) refuses keys that
// need one (errSecUnimplemented) rather than emulate it by a comparison in this process: that would be exactly the
// software check the engine's authentication gate already is, presented as hardware enforcement. An app that wants
// `.applicationPassword` without a TPM gets the engine's gate (the key made without the flag's binding is refused,
// so it notices).
extension SecureEnclaveToken {
    public func createKey(_ usage: SecureEnclaveKeyUsage, authorization: Data) throws(EngineError) -> SecureEnclaveKey {
        throw EngineError(Status.unimplemented, "\(name) cannot bind a key to an authorization value (a password enforced by the hardware): use a TPM")
    }

    public func requiresAuthorization(_ dataRepresentation: Data) throws(EngineError) -> Bool { false }

    public var enforcesAuthorization: Bool { false }

    public func createKey(_ usage: SecureEnclaveKeyUsage, authorization: Data,
                          binding: SecureEnclaveKeyBinding) throws(EngineError) -> SecureEnclaveKey {
        guard binding == .password else {
            throw EngineError(Status.unimplemented, "\(name) cannot bind a key to an authorization value the keychain releases: use a TPM")
        }
        return try createKey(usage, authorization: authorization)
    }

    public func binding(of dataRepresentation: Data) throws(EngineError) -> SecureEnclaveKeyBinding {
        try requiresAuthorization(dataRepresentation) ? .password : .none
    }

    public func signature(digest: Data, with dataRepresentation: Data, authorization: Data?) throws(EngineError) -> Data {
        guard authorization == nil else {
            throw EngineError(Status.unimplemented, "\(name) cannot check a key's authorization value")
        }
        return try signature(digest: digest, with: dataRepresentation)
    }

    public func sharedSecret(peerX963: Data, with dataRepresentation: Data, authorization: Data?) throws(EngineError) -> Data {
        guard authorization == nil else {
            throw EngineError(Status.unimplemented, "\(name) cannot check a key's authorization value")
        }
        return try sharedSecret(peerX963: peerX963, with: dataRepresentation)
    }
}
