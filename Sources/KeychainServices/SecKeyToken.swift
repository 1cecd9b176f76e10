#if !canImport(Darwin)
import Foundation
import Crypto
import KeychainEngine

// Secure Enclave SecKeys on Linux: `SecKeyCreateRandomKey` with `kSecAttrTokenID: kSecAttrTokenIDSecureEnclave` makes
// a P-256 key inside `KeychainServicesDefaults.secureEnclave` (a TPM 2.0 by default), whose private key never leaves
// it. What Keystone holds of such a key is the token's opaque wrapped blob (`SecureEnclaveKey.dataRepresentation`)
// and its public key; a permanent key is stored as a `kSecClassKey` item with `tkid` = `com.apple.setoken` and the
// blob as its data, as Apple's keychain stores the token object's data.
//
// Apple's behaviour, as Keystone reproduces it (apple-oss-distributions/Security: SecKey.c, SecCTKKey.c,
// SecAccessControl.c; Apple's "Protecting keys with the Secure Enclave"):
// - Only 256-bit EC keys (`kSecAttrKeyTypeECSECPrimeRandom` / `kSecAttrKeyTypeEC`) can be made; the key is a private
//   key that signs (ECDSA), agrees keys (ECDH) and decrypts (ECIES), with Apple's usage flags.
// - `SecKeyCopyExternalRepresentation` of the private key fails with errSecUnimplemented, "export not implemented
//   for key <SecKeyRef:('com.apple.setoken') 0x…>" (SecKey.c: a CTK key has no export); its public key
//   (`SecKeyCopyPublicKey`) is an ordinary software key; `SecKeyCopyAttributes` has no `v_Data` but `tkid` and
//   `toid` (the blob, which CryptoKit's `SecureEnclave…PrivateKey(dataRepresentation:)` takes).
// - Access control: `SecAccessControlCreateWithFlags` gives the key's sign and compute-key operations the
//   authentication constraints only with `.privateKeyUsage`; without it the constraints go to the item's decrypt
//   operation and sign / compute-key have no entry, so the Secure Enclave refuses them. With no authentication flag
//   at all (only an accessibility, or only `.privateKeyUsage`) every use is allowed without asking.
// - A lookup (`SecItemCopyMatching` with `kSecReturnRef`) never prompts; each use of the key does, with the
//   `kSecUseOperationPrompt` and `kSecUseAuthenticationContext` of the lookup (or of the creation) — SecCTKKey.c's
//   `SecItemAuthCopyParams` keeps them with the key.
//
// Decisions where Apple's behaviour is not documented or cannot be reproduced:
// - No Secure Enclave (`KeychainServicesDefaults.secureEnclave` nil) → errSecUnimplemented (-4), the token contract's
//   status for absent hardware (a TPM that is configured but does not answer: errSecNotAvailable, the token's).
//   Wrong key type or size → errSecParam. Apple's message form, "Key generation failed, error <status>", is kept.
//   A key that could not be stored leaves nothing behind: the token keeps nothing of a key (its blob is all there is).
// - An access control with authentication flags but no `.privateKeyUsage`: the key is made (as Apple's is) and every
//   private-key operation fails with errSecAuthFailed, with a message that says to add `.privateKeyUsage`.
// - `.biometryCurrentSet`: the authenticator's `biometryDomainState` is recorded when the key object is made
//   (creation or lookup) and compared before each use (errSecAuthFailed when it changed); the engine also refuses to
//   hand out a stored key after the enrollment changed (its `_bioset` binding). An authenticator that reports no
//   domain state binds nothing here.
// - A stored key is bound to the token configured when it is looked up: a key made by another token (another TPM)
//   fails at its first use with errSecDecode, and the item is left as it is.
// - `kSecReturnData` of a Secure Enclave key item returns the token's opaque blob (Apple returns the token object's
//   data), after the authentication the item's access control asks of any protected item's data.
//
// - `.applicationPassword` (see `SecKeyTokenKey.authorization(for:)`): the key is made with the password of the
//   creation's `kSecUseAuthenticationContext` (`LAContext.setCredential(_:type: .applicationPassword)`) as its TPM
//   authorization value, and each use sends the password of the context of the lookup (or of the creation) to the
//   TPM, which refuses a wrong one itself (errSecAuthFailed, counted toward its dictionary-attack lockout). The
//   other flags (`.userPresence`…) are still asked by the authentication gate first. A key stored with
//   `.applicationPassword` before the TPM bound it (its blob needs no authorization) keeps the gate's check.
// - `.userPresence`, `.biometryAny`, `.biometryCurrentSet`, `.devicePasscode`, `.watch` (with `.privateKeyUsage`, on a
//   token that enforces an authorization value): the key's TPM authorization value is a random secret the keychain
//   releases only after the gate's evaluation (SecureEnclaveKeySecrets.swift); with `.applicationPassword` too, a
//   hash of both. A key stored with such flags before this binding (its blob needs no authorization) keeps the gate.
//
// - Important: What the hardware enforces: the private key cannot leave the TPM, and its blob is useless on any other
//   TPM; for an `.applicationPassword` key, the password (a wrong one is refused and counted by the TPM, also for
//   someone who calls the TPM directly with the blob); for a key with a person flag, the keychain's released secret
//   (someone who copies the blob and calls the TPM directly is refused). What the software enforces: the evaluation
//   of the person itself (the TPM cannot see one), and the release of the secret after it; someone who can read
//   the secret's keychain item, or run code in the process after the evaluation, can use the key.

/// A private-key operation of a Secure Enclave key, named as LocalAuthentication's `LAAccessControlOperation` cases.
enum SecKeyTokenOperation: String, Sendable {
    case sign = "useKeySign"
    case decrypt = "useKeyDecrypt"
    case keyExchange = "useKeyKeyExchange"

    var words: String {
        switch self {
        case .sign: "signing"
        case .decrypt: "decrypting"
        case .keyExchange: "a key exchange"
        }
    }
}

/// What a Secure Enclave key authenticates each use with: the `kSecUseAuthenticationContext`,
/// `kSecUseOperationPrompt` and `kSecUseAuthenticationUI` of its creation or of the lookup that found it.
struct SecKeyTokenUse: Sendable {
    /// The context whose successful authentication a use may reuse (an `LAContext`'s).
    var context: AuthenticationContext?
    /// The prompt: `kSecUseOperationPrompt`, else the `LAContext`'s `localizedReason` when it has one.
    var prompt: String?
    /// False with `kSecUseAuthenticationUIFail` / `…Skip` (or `kSecUseNoAuthenticationUI`): a use that needs a
    /// prompt fails with errSecInteractionNotAllowed.
    var allowsInteraction = true
    /// The `LAContext` passed, whose application password (`setCredential(_:type: .applicationPassword)`) an
    /// `.applicationPassword` key sends to the token; read at each use, as the app may set it after the lookup.
    var credentialContext: LAContext?

    init(context: AuthenticationContext? = nil, prompt: String? = nil, allowsInteraction: Bool = true) {
        self.context = context
        self.prompt = prompt
        self.allowsInteraction = allowsInteraction
    }

    /// From Apple-style parameters (`value` reads one).
    init(_ value: (CFString) -> Any?) {
        var reason: String?
        switch value(kSecUseAuthenticationContext) {
        case let laContext as LAContext:
            context = laContext.context
            credentialContext = laContext
            reason = laContext.localizedReason.isEmpty ? nil : laContext.localizedReason
        case let authenticationContext as AuthenticationContext:
            context = authenticationContext
        default:
            break
        }
        prompt = (value(kSecUseOperationPrompt) as? String) ?? reason
        let ui = value(kSecUseAuthenticationUI) as? String
        allowsInteraction = ui != kSecUseAuthenticationUIFail && ui != kSecUseAuthenticationUISkip
            && SecKeyParameters.bool(value(kSecUseNoAuthenticationUI)) != true
    }
}

/// A P-256 private key inside a ``SecureEnclaveToken``: the token, what it gave out for the key (its blob and public
/// key), the key's access control, and how each use authenticates.
final class SecKeyTokenKey: Sendable {
    /// `toid`: Apple's attribute for a token key's object data, in ``SecKeyCopyAttributes(_:)``.
    static let tokenObjectIDAttribute: CFString = "toid"

    let token: any SecureEnclaveToken
    let key: SecureEnclaveKey
    let publicKey: ECPublicKey
    let accessControl: AccessControl?
    let use: SecKeyTokenUse
    /// The authenticator's biometry domain state when the key object was made, for `.biometryCurrentSet`.
    let biometryBinding: Data?
    /// Whether the token enforces the key's `.applicationPassword` (the key was made with it in its authorization
    /// value); false for a key that needs none, whose `.applicationPassword` the authentication gate asks.
    let passwordBound: Bool
    /// What the key's authorization value in the token is (read from its blob).
    let binding: SecureEnclaveKeyBinding
    /// The released secret of a key that is not permanent (``SecureEnclaveKeySecrets``: kept in this object only);
    /// nil for a permanent key, whose secret the keychain holds.
    let heldSecret: Data?

    /// - Throws: ``SecKeyFailure`` (errSecDecode) when the token's public key is not a P-256 point.
    init(token: any SecureEnclaveToken, key: SecureEnclaveKey, accessControl: AccessControl?, use: SecKeyTokenUse,
         heldSecret: Data? = nil) throws {
        guard let publicKey = try? ECPublicKey(x963: key.publicKeyX963), publicKey.curve == .p256 else {
            throw SecKeyFailure(errSecDecode, "the Secure Enclave key's public key is not a P-256 point")
        }
        self.token = token
        self.key = key
        self.publicKey = publicKey
        self.accessControl = accessControl
        self.use = use
        biometryBinding = accessControl?.flags.contains(.biometryCurrentSet) == true
            ? KeychainServicesDefaults.currentAuthenticator().biometryDomainState : nil
        // A blob the token cannot read binds nothing here; its use fails with the token's errSecDecode.
        binding = (try? token.binding(of: key.dataRepresentation)) ?? .none
        passwordBound = accessControl?.flags.contains(.applicationPassword) == true
            && (binding == .password || binding == .releasedSecretAndPassword)
        self.heldSecret = heldSecret
    }

    // MARK: Creation and lookup

    /// ``SecKeyCreateRandomKey(_:_:)`` with `kSecAttrTokenID` (see the top of this file).
    ///
    /// - Throws: ``SecKeyFailure``: errSecParam (a token other than ``kSecAttrTokenIDSecureEnclave``, not a 256-bit
    ///   EC key, an access control that is not a `SecAccessControl`), errSecUnimplemented (no Secure Enclave, or a
    ///   keychain whose device has none), the token's status (errSecNotAvailable…), the keychain's status for a
    ///   permanent key (errSecDuplicateItem…).
    static func createRandomKey(tokenID: Any, type: CFString, bits: Int?, attribute: (CFString) -> Any?) throws -> SecKey {
        guard let tokenID = tokenID as? String, tokenID == kSecAttrTokenIDSecureEnclave else {
            throw SecKeyFailure(errSecParam, "Key generation failed, error \(errSecParam): kSecAttrTokenID \(tokenID) names no token here; the only token is kSecAttrTokenIDSecureEnclave")
        }
        guard type == kSecAttrKeyTypeECSECPrimeRandom, (bits ?? 256) == 256 else {
            let kind = type == kSecAttrKeyTypeRSA ? "RSA" : "EC"
            throw SecKeyFailure(errSecParam, "Key generation failed, error \(errSecParam): the Secure Enclave makes only 256-bit EC keys (kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits 256), not \(kind) \(bits ?? 0)")
        }
        guard let token = KeychainServicesDefaults.secureEnclave else {
            throw SecKeyFailure(errSecUnimplemented, "Key generation failed, error \(errSecUnimplemented): there is no Secure Enclave (KeychainServicesDefaults.secureEnclave is nil: KEYSTONE_SECURE_ENCLAVE=none, or the TPM backend is not installed: add the product KeychainTPM and call `KeychainServicesDefaults.bootstrap(.tpm)` at start-up); make a software key, or configure a token with KeychainServicesDefaults.useSecureEnclave(_:)")
        }
        let accessControl: AccessControl?
        switch attribute(kSecAttrAccessControl) {
        case nil: accessControl = nil
        case let given as SecAccessControl: accessControl = given.accessControl
        default: throw SecKeyFailure(errSecParam, "Key generation failed, error \(errSecParam): kSecAttrAccessControl must be a SecAccessControl")
        }
        let isPermanent = SecKeyParameters.bool(attribute(kSecAttrIsPermanent)) ?? false
        if isPermanent {
            // Refused before the token works: this keychain plays a device without a Secure Enclave.
            let engine = try KeychainServicesDefaults.currentEngine()
            guard engine.configuration.secureEnclaveAvailable else {
                throw SecKeyFailure(errSecUnimplemented, "Key generation failed, error \(errSecUnimplemented): the default keychain's device has no Secure Enclave (its EngineConfiguration.secureEnclaveAvailable is false)")
            }
        }
        let made: SecureEnclaveKey
        var secret: Data?
        do {
            let flags = accessControl?.flags ?? []
            let password = flags.contains(.applicationPassword)
                ? try applicationPassword(SecKeyTokenUse(attribute), operation: "making the key") : nil
            if SecureEnclaveKeySecrets.binds(flags, on: token) {
                // The person's flags bound in the TPM: a random secret, released by the keychain after the evaluation.
                let random = try SecureEnclaveKeySecrets.newSecret()
                made = try token.createKey(.general,
                                           authorization: SecureEnclaveKeySecrets.authorizationValue(secret: random, password: password),
                                           binding: password == nil ? .releasedSecret : .releasedSecretAndPassword)
                secret = random
            } else if let password {
                made = try token.createKey(.general, authorization: password)
            } else {
                made = try token.createKey(.general)
            }
        } catch let error as SecKeyFailure {
            throw error
        } catch let error as EngineError {
            throw SecKeyFailure(error.status, "Key generation failed, error \(error.status): \(token.name): \(error.reason)")
        }
        let key = SecKey(material: .token(try SecKeyTokenKey(token: token, key: made, accessControl: accessControl,
                                                             use: SecKeyTokenUse(attribute),
                                                             heldSecret: isPermanent ? nil : secret)),
                         applicationTag: SecKeyParameters.data(attribute(kSecAttrApplicationTag)),
                         label: attribute(kSecAttrLabel) as? String,
                         isPermanent: isPermanent)
        // If storing fails nothing remains: the token keeps nothing of the key, whose blob is dropped here (and the
        // secret stored for it is removed again).
        if isPermanent {
            if let secret, let accessControl {
                do {
                    try SecureEnclaveKeySecrets.store(secret, publicKeyX963: made.publicKeyX963, accessControl: accessControl)
                } catch let error as EngineError {
                    throw SecKeyFailure(error.status, "Key generation failed, error \(error.status): storing the key's authorization secret in the keychain failed: \(error.reason)")
                }
            }
            do {
                try storePermanentKey(key, attribute: attribute)
            } catch {
                if secret != nil, let engine = try? KeychainServicesDefaults.currentEngine() {
                    SecureEnclaveKeySecrets.delete(applicationLabel: key.applicationLabel, engine: engine)
                }
                throw error
            }
        }
        return key
    }

    /// The key a stored Secure Enclave key item holds (attributes with `tkid`, the blob as data), bound to
    /// ``KeychainServicesDefaults/secureEnclave``, with the item's access control and `use`.
    ///
    /// - Throws: ``SecKeyFailure``: errSecUnimplemented (no Secure Enclave configured), errSecDecode (the data is not a
    ///   key of the configured token's kind).
    static func storedKey(attributes: CFDictionary, data: Data, use: SecKeyTokenUse) throws -> SecKey {
        guard let token = KeychainServicesDefaults.secureEnclave else {
            throw SecKeyFailure(errSecUnimplemented, "the key is a Secure Enclave key and there is no Secure Enclave (KeychainServicesDefaults.secureEnclave is nil): install the TPM backend (product KeychainTPM, `KeychainServicesDefaults.bootstrap(.tpm)`) or configure the token that made it with KeychainServicesDefaults.useSecureEnclave(_:)")
        }
        let key: SecureEnclaveKey
        do {
            key = try token.key(dataRepresentation: data)
        } catch {
            throw SecKeyFailure(error.status, "the stored Secure Enclave key cannot be read by \(token.name): \(error.reason)")
        }
        let accessControl = (SecKeyParameters.value(attributes, kSecAttrAccessControl) as? SecAccessControl)?.accessControl
        return SecKey(material: .token(try SecKeyTokenKey(token: token, key: key, accessControl: accessControl, use: use)),
                      applicationTag: SecKeyParameters.data(SecKeyParameters.value(attributes, kSecAttrApplicationTag)),
                      label: SecKeyParameters.value(attributes, kSecAttrLabel) as? String,
                      isPermanent: SecKeyParameters.bool(SecKeyParameters.value(attributes, kSecAttrIsPermanent)) ?? false)
    }

    // MARK: Operations

    /// An ECDSA signature of `digest` by the token: DER (X9.62) or r ‖ s (RFC 4754).
    ///
    /// The token signs 32 bytes. As ECDSA does (SEC 1 §4.1.3, FIPS 186-4 §6.4), a longer digest (SHA-384, SHA-512)
    /// is cut to its leftmost 256 bits, and a shorter one (SHA-1) is the same integer left-padded with zeros; the
    /// signature verifies with the public key and the full digest, as a software key's does.
    func ecdsaSignature(_ digest: any Digest, rfc4754: Bool) throws -> Data {
        var bytes = digest.withUnsafeBytes { Data($0) }
        if bytes.count > 32 { bytes = Data(bytes.prefix(32)) }
        if bytes.count < 32 { bytes = Data(count: 32 - bytes.count) + bytes }
        let raw = try perform(.sign) { (password) throws(EngineError) in
            try token.signature(digest: bytes, with: key.dataRepresentation, authorization: password)
        }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: raw) else {
            throw SecKeyFailure(errSecInternalComponent, "\(token.name) returned a signature that is not r || s of P-256")
        }
        return rfc4754 ? signature.rawRepresentation : signature.derRepresentation
    }

    /// The ECDH shared secret with `peer`, computed by the token.
    func sharedSecret(with peer: ECPublicKey, for operation: SecKeyTokenOperation) throws -> SharedSecret {
        guard case .p256(_, let theirs) = peer else {
            throw SecKeyFailure(errSecParam, "ECDH: the public key is on another curve than the private key")
        }
        let x = try perform(operation) { (password) throws(EngineError) in
            try token.sharedSecret(peerX963: theirs.x963Representation, with: key.dataRepresentation, authorization: password)
        }
        return try Self.sharedSecret(x: x)
    }

    /// swift-crypto's `SharedSecret` holding exactly `x` (the token's ECDH result), made through public API: the
    /// scalar 1 agreeing with the point whose x coordinate is `x` gives that point's x coordinate.
    static func sharedSecret(x: Data) throws -> SharedSecret {
        guard x.count == 32,
              let one = try? P256.KeyAgreement.PrivateKey(rawRepresentation: Data(count: 31) + [1]),
              let point = try? P256.KeyAgreement.PublicKey(compressedRepresentation: [0x02] + x),
              let secret = try? one.sharedSecretFromKeyAgreement(with: point) else {
            throw SecKeyFailure(errSecInternalComponent, "the token's ECDH result is not a P-256 x coordinate")
        }
        return secret
    }

    /// Authenticates the use, then runs `body` against the token with the key's authorization value (nil for a key
    /// the token does not bind to a password); token errors keep their status.
    private func perform<T>(_ operation: SecKeyTokenOperation, _ body: (Data?) throws(EngineError) -> T) throws -> T {
        let password = try authorize(operation)
        do {
            return try body(password)
        } catch {
            switch error.status {
            case Status.decode:
                throw SecKeyFailure(error.status, "\(operation.words) with the Secure Enclave key failed: the key was made by another Secure Enclave than \(token.name), or its data is damaged (\(error.reason)); configure the token that made it with KeychainServicesDefaults.useSecureEnclave(_:)")
            case Status.notAvailable:
                throw SecKeyFailure(error.status, "\(operation.words) with the Secure Enclave key failed: \(token.name) cannot be reached (\(error.reason))")
            default:
                throw SecKeyFailure(error.status, "\(operation.words) with the Secure Enclave key failed: \(error.reason)")
            }
        }
    }

    /// The application password of `use`'s context, for a key the token binds to it.
    ///
    /// Decision: Apple's LocalAuthentication shows its own password dialog when the context carries no application
    /// password ("If not set, the user is prompted for their password when needed"), and fails with
    /// errSecInteractionNotAllowed where it may not show one (`kSecUseAuthenticationUIFail`, an `LAContext` with
    /// `interactionNotAllowed`). Keystone has no such dialog (its authenticators check the login password or a
    /// finger, never an app's own password), so: no UI allowed → errSecInteractionNotAllowed, as Apple's; UI allowed
    /// → errSecAuthFailed, naming `LAContext.setCredential(_:type: .applicationPassword)`. Nothing is sent to the TPM
    /// then, so a missing password never counts toward its lockout.
    /// - Throws: ``SecKeyFailure`` (errSecInteractionNotAllowed, errSecAuthFailed).
    static func applicationPassword(_ use: SecKeyTokenUse, operation: String) throws -> Data {
        if let password = use.credentialContext?.applicationPasswordCredential { return password }
        if !use.allowsInteraction || use.context?.interactionNotAllowed == true {
            throw SecKeyFailure(errSecInteractionNotAllowed, "\(operation) with the Secure Enclave key needs its application password (.applicationPassword) and interaction is not allowed: set it with LAContext.setCredential(_:type: .applicationPassword) on the context passed as kSecUseAuthenticationContext")
        }
        throw SecKeyFailure(errSecAuthFailed, "\(operation) with the Secure Enclave key needs its application password (.applicationPassword), and Keystone shows no password dialog: set it with LAContext.setCredential(_:type: .applicationPassword) on the LAContext passed as kSecUseAuthenticationContext (of the creation or the lookup)")
    }

    /// The authentication the key's access control asks before one use (see the top of this file); returns the
    /// application password the token checks, for a key it binds to one.
    ///
    /// - Throws: ``SecKeyFailure`` with errSecAuthFailed (no `.privateKeyUsage`, biometry changed, invalidated
    ///   context, failed authentication, no application password), errSecUserCanceled, errSecInteractionNotAllowed.
    @discardableResult
    func authorize(_ operation: SecKeyTokenOperation) throws -> Data? {
        guard var flags = accessControl?.flags, flags.requiresAuthentication else { return nil }
        guard flags.contains(.privateKeyUsage) else {
            throw SecKeyFailure(errSecAuthFailed, "\(operation.words) with the Secure Enclave key is not allowed: its access control has authentication flags without .privateKeyUsage, which guard only the item's data; make the key with [.privateKeyUsage, …]")
        }
        var password: Data?
        if passwordBound {
            // The TPM checks the password: the gate asks only the other flags (none: nothing to ask).
            if use.context?.isInvalidated == true {
                throw SecKeyFailure(errSecAuthFailed, "\(operation.words) with the Secure Enclave key is not allowed: its LAContext was invalidated")
            }
            password = try Self.applicationPassword(use, operation: operation.words)
            flags.remove(.applicationPassword)
            guard flags.requiresAuthentication || binding != .password else { return password }
        }
        let authenticator = KeychainServicesDefaults.currentAuthenticator()
        let evaluate = { (flags: AccessControlFlags) throws in
            if flags.contains(.biometryCurrentSet), let bound = self.biometryBinding, authenticator.biometryDomainState != bound {
                throw SecKeyFailure(errSecAuthFailed, "\(operation.words) with the Secure Enclave key is not allowed: the enrolled biometry changed since the key was made or looked up (.biometryCurrentSet)")
            }
            do {
                try AuthenticationGate.authorize(flags, itemClass: .key, operation: operation.rawValue, prompt: self.use.prompt,
                                                 context: self.use.context, allowsInteraction: self.use.allowsInteraction,
                                                 authenticator: authenticator, now: KeychainServicesDefaults.currentClock()())
            } catch let error as EngineError {
                throw SecKeyFailure(error.status, "\(operation.words) with the Secure Enclave key needs an authentication, which did not succeed: \(error.reason)")
            }
        }
        switch binding {
        case .none, .password:
            try evaluate(flags)
            return password
        case .releasedSecret, .releasedSecretAndPassword:
            // The TPM needs the secret the keychain releases only after the evaluation (SecureEnclaveKeySecrets).
            let secret: Data
            if let heldSecret {
                try evaluate(flags)
                secret = heldSecret
            } else {
                do {
                    secret = try SecureEnclaveKeySecrets.release(publicKeyX963: key.publicKeyX963) { stored in
                        var asked = stored
                        asked.remove(.applicationPassword)
                        try evaluate(asked)
                    }
                } catch let error as EngineError {
                    throw SecKeyFailure(error.status, "\(operation.words) with the Secure Enclave key failed: \(error.reason)")
                }
            }
            return SecureEnclaveKeySecrets.authorizationValue(secret: secret, password: password)
        }
    }
}
#endif
