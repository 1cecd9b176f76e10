#if !canImport(Darwin)
import Crypto
import Foundation
import KeychainEngine
import KeychainServices

/// CryptoKit's Secure Enclave on Linux: P-256 keys made and used inside the process's Secure Enclave token
/// (`KeychainServicesDefaults.secureEnclave`: by default the machine's TPM 2.0), with Apple's API, so code written for
/// Apple platforms builds and runs unchanged.
///
/// ```swift
/// import CryptoKit
///
/// if SecureEnclave.isAvailable {
///     let key = try SecureEnclave.P256.Signing.PrivateKey()
///     let signature = try key.signature(for: message)
///     try save(key.dataRepresentation)   // reload with .init(dataRepresentation:)
/// }
/// ```
///
/// Every call may block on the TPM (and on the person, for keys whose access control asks for an authentication):
/// as on Apple platforms, call them off the main thread and off Swift's cooperative pool where that matters.
///
/// - Important: What protects a key on Linux:
///   - The TPM enforces that the private key never leaves it (it is made there, non-duplicable: fixedTPM,
///     fixedParent) and that the `dataRepresentation` is useless on any other TPM.
///   - `.applicationPassword` is enforced by the TPM: the key is made with the password of the
///     `authenticationContext` (`LAContext.setCredential(_:type: .applicationPassword)`) as its TPM authorization
///     value, and the TPM refuses a use with a wrong one (`errSecAuthFailed`, counted toward its dictionary-attack
///     lockout), also for someone who calls the TPM directly with the `dataRepresentation`.
///   - `.userPresence`, `.biometryAny`, `.biometryCurrentSet`, `.devicePasscode` (with `.privateKeyUsage`): this
///     library asks the person before each use, and the TPM refuses the key without a random secret the default
///     keychain releases only after that evaluation (a generic password of service "Keystone TPM key authorization",
///     which the `dataRepresentation` names but does not hold). Someone who copies the `dataRepresentation` and calls
///     the TPM directly cannot use the key; someone who can read that keychain item, or run code in the app's process
///     after the evaluation, can. The secret item stays until deleted with `SecItemDelete`. Keys made before this
///     release (version-1 `dataRepresentation`) keep the in-process check only.
///   - The accessibility (`kSecAttrAccessible…`) is recorded; it is enforced only for keys bound to a released secret
///     (a locked keychain does not release it: `errSecInteractionNotAllowed`); a key is always this-device-only.
///   - Losing or clearing the TPM (a new mainboard, `tpm2_clear`, a firmware reset) loses every key made in it, with
///     no recovery: keep a way to replace the key (enroll a new public key).
public enum SecureEnclave {
    /// Whether Secure Enclave keys can be made and used now: the process has a Secure Enclave token
    /// (`KeychainServicesDefaults.secureEnclave`) and it answers.
    ///
    /// False without a TPM 2.0, with `KEYSTONE_SECURE_ENCLAVE=none`, in a program that did not install the TPM backend (product `KeychainTPM`, `KeychainServicesDefaults.bootstrap(.tpm)`), or while
    /// the TPM cannot be reached. May open the TPM device (it blocks briefly); it never prompts.
    public static var isAvailable: Bool {
        guard let token = KeychainServicesDefaults.secureEnclave else { return false }
        return token.availability() == nil
    }

    /// Elliptic-curve keys on the NIST P-256 curve, in the Secure Enclave.
    public enum P256 {
        /// P-256 keys for ECDSA signatures, in the Secure Enclave.
        public enum Signing {}
        /// P-256 keys for ECDH key agreement, in the Secure Enclave.
        public enum KeyAgreement {}
    }
}

/// What a `SecureEnclave` private key is: the token that made or loaded it, its envelope, and its public key.
struct EnclaveKeyCore: Sendable {
    let token: any SecureEnclaveToken
    let envelope: KeyEnvelope
    /// The public key, ANSI X9.63 (65 bytes).
    let publicKeyX963: Data
    let authenticationContext: LAContext?
    /// Whether the token enforces the key's `.applicationPassword` (the key was made with the context's password as
    /// its TPM authorization value); false for a key without the flag, or one made before the TPM bound it.
    let passwordBound: Bool
    /// Whether the key's person flags are bound in the TPM through a secret the keychain releases after the
    /// evaluation (envelope version 2, `SecureEnclaveKeySecrets`).
    var secretBound: Bool { envelope.secretAccount != nil }

    /// How many keys `compactRepresentable: true` makes at most before it gives up. About half of all keys have a
    /// compact representation, so 32 attempts all fail with probability 2⁻³²: only a token that keeps making keys
    /// without one (broken or scripted) reaches the bound.
    static let compactAttempts = 32

    /// The message whose SHA-256 digest the load check signs: fixed and domain-separated, no protocol uses it.
    static let checkMessage = Data("Keystone CryptoKit SecureEnclave key check, v1".utf8)

    // MARK: Making and loading

    /// Makes a key of `kind` in the current Secure Enclave token.
    ///
    /// Decision (Apple: ``SecureEnclave/P256/Signing/PrivateKey/init(compactRepresentable:accessControl:authenticationContext:)``
    /// documents only that the key is made "with the structure to enable compact point encoding"): with
    /// `compactRepresentable`, keys whose public key has no compact representation are discarded (a TPM key is only a
    /// blob: nothing stays behind) and another is made, at most ``compactAttempts`` times; past that the call fails
    /// with `errSecInternalComponent` rather than return a key whose `compactRepresentation` is nil.
    static func create(_ kind: KeyEnvelope.Kind, compactRepresentable: Bool, accessControl: SecAccessControl,
                       authenticationContext: LAContext?) throws(SecureEnclaveError) -> EnclaveKeyCore {
        let access = accessControl.accessControl
        try validate(access)
        let token = try currentToken()
        // `.biometryCurrentSet`: the enrollment the key is bound to (Apple binds it in the Secure Enclave's ACL).
        let domainState = access.flags.contains(.biometryCurrentSet)
            ? KeychainServicesDefaults.currentAuthenticator().biometryDomainState : nil
        // `.applicationPassword`: the context's password becomes the key's TPM authorization value.
        let password = access.flags.contains(.applicationPassword)
            ? try applicationPassword(authenticationContext, operation: "making the key") : nil
        // The person's flags bound in the TPM: a random secret the keychain releases after the evaluation.
        // Decision: a CryptoKit key's secret is always stored in the default keychain (the app keeps the
        // dataRepresentation and may load it in another process); it stays there until deleted with SecItemDelete
        // (service "Keystone TPM key authorization"), as the key has no deletion of its own (Apple's neither).
        let bindsPerson = SecureEnclaveKeySecrets.binds(access.flags, on: token)
        for _ in 0..<(compactRepresentable ? compactAttempts : 1) {
            let key: SecureEnclaveKey
            var secret: Data?
            do {
                if bindsPerson {
                    let random = try SecureEnclaveKeySecrets.newSecret()
                    key = try token.createKey(kind.usage,
                                              authorization: SecureEnclaveKeySecrets.authorizationValue(secret: random, password: password),
                                              binding: password == nil ? .releasedSecret : .releasedSecretAndPassword)
                    secret = random
                } else if let password {
                    key = try token.createKey(kind.usage, authorization: password)
                } else {
                    key = try token.createKey(kind.usage)
                }
            } catch {
                throw SecureEnclaveError(error)
            }
            guard key.usage == kind.usage else {
                throw SecureEnclaveError(status: Status.internalComponent,
                                         reason: "the Secure Enclave (\(token.name)) made a key of usage \(key.usage), not \(kind.usage)")
            }
            let publicKey = try signingPublicKey(key.publicKeyX963, token: token)
            if compactRepresentable && publicKey.compactRepresentation == nil { continue }
            if let secret {
                do {
                    try SecureEnclaveKeySecrets.store(secret, publicKeyX963: key.publicKeyX963, accessControl: access)
                } catch let error as EngineError {
                    throw SecureEnclaveError(status: error.status, reason: "storing the key's authorization secret in the keychain failed: \(error.reason)")
                } catch {
                    throw SecureEnclaveError(status: Status.internalComponent, reason: "storing the key's authorization secret in the keychain failed: \(error)")
                }
            }
            let envelope = KeyEnvelope(kind: kind, accessControl: access, biometryDomainState: domainState,
                                       tokenBlob: key.dataRepresentation,
                                       secretAccount: secret == nil ? nil : SecureEnclaveKeySecrets.account(publicKeyX963: key.publicKeyX963))
            return EnclaveKeyCore(token: token, envelope: envelope, publicKeyX963: key.publicKeyX963,
                                  authenticationContext: authenticationContext, passwordBound: password != nil)
        }
        throw SecureEnclaveError(status: Status.internalComponent,
                                 reason: "the Secure Enclave (\(token.name)) made \(compactAttempts) keys and none has a compact representation (pass compactRepresentable: false to accept any key)")
    }

    /// Loads a key of `kind` from its `dataRepresentation`, and checks that the current token can use it.
    ///
    /// Decision: as Apple's `init(dataRepresentation:)` asks the Secure Enclave, this one asks the token: a signing key
    /// signs ``checkMessage`` (verified with the key's public key), a key-agreement key agrees with the curve's
    /// generator (whose shared x is the key's own public x). A key of another TPM, or whose public key does not
    /// match, fails here (`errSecDecode`) rather than at its first use. The check releases nothing a caller can use
    /// and needs no authentication.
    static func load(_ kind: KeyEnvelope.Kind, dataRepresentation: Data,
                     authenticationContext: LAContext?) throws(SecureEnclaveError) -> EnclaveKeyCore {
        let envelope = try KeyEnvelope.decode(dataRepresentation)
        guard envelope.kind == kind else {
            throw SecureEnclaveError(status: Status.param,
                                     reason: "the dataRepresentation is a key for \(envelope.kind == .signing ? "signing" : "key agreement"): load it with \(envelope.kind.typeName)(dataRepresentation:)")
        }
        do {
            try validate(envelope.accessControl)
        } catch {
            throw SecureEnclaveError(status: Status.decode, reason: "the dataRepresentation records an access control no Secure Enclave key has")
        }
        let token = try currentToken()
        let key: SecureEnclaveKey
        do {
            key = try token.key(dataRepresentation: envelope.tokenBlob)
        } catch {
            throw SecureEnclaveError(error)
        }
        guard key.usage == kind.usage else {
            throw SecureEnclaveError(status: Status.decode,
                                     reason: "the dataRepresentation's key has usage \(key.usage), not \(kind.usage)")
        }
        _ = try signingPublicKey(key.publicKeyX963, token: token)
        let binding: SecureEnclaveKeyBinding
        do {
            binding = try token.binding(of: envelope.tokenBlob)
        } catch {
            throw SecureEnclaveError(error)
        }
        if let account = envelope.secretAccount {
            // Version 2 names the secret of this very key, and the token's blob is bound to one.
            guard account == SecureEnclaveKeySecrets.account(publicKeyX963: key.publicKeyX963),
                  binding == .releasedSecret || binding == .releasedSecretAndPassword else {
                throw SecureEnclaveError(status: Status.decode, reason: "the dataRepresentation's authorization secret item does not belong to its key")
            }
        }
        let bound = envelope.accessControl.flags.contains(.applicationPassword)
            && (binding == .password || binding == .releasedSecretAndPassword)
        let core = EnclaveKeyCore(token: token, envelope: envelope, publicKeyX963: key.publicKeyX963,
                                  authenticationContext: authenticationContext, passwordBound: bound)
        // Decision: a key bound to its application password is not used by the load check: the check would need the
        // password (Apple's init(dataRepresentation:) asks for nothing) and a wrong one would count toward the TPM's
        // lockout. Its blob is still read (token.key above); a key of another TPM fails at its first use (errSecDecode).
        // The same for a key bound to a released secret: the check would need the person's evaluation.
        if !bound && !core.secretBound && binding == .none { try core.checkUsable() }
        return core
    }

    /// The process's Secure Enclave token, or `errSecUnimplemented`.
    private static func currentToken() throws(SecureEnclaveError) -> any SecureEnclaveToken {
        guard let token = KeychainServicesDefaults.secureEnclave else {
            throw SecureEnclaveError(status: Status.unimplemented, reason: "this process has no Secure Enclave: install the TPM backend (product KeychainTPM, KeychainServicesDefaults.bootstrap(.tpm)) at start-up")
        }
        return token
    }

    /// The access controls a Secure Enclave key can have.
    ///
    /// Decision (Apple's `SecAccessControlCreateWithFlags` puts the authentication of flags without
    /// `.privateKeyUsage` on the decrypt operation, and a Secure Enclave key made with them cannot sign or agree keys):
    /// authentication flags without `.privateKeyUsage` are refused when the key is made (`errSecParam`, saying to add
    /// it) rather than giving a key whose every use fails. No flags (Apple's default) or `.privateKeyUsage` alone: any
    /// use, no authentication. `.or` with `.and`: `errSecParam`, as Apple's.
    static func validate(_ access: AccessControl) throws(SecureEnclaveError) {
        let flags = access.flags
        if flags.requiresAuthentication && !flags.contains(.privateKeyUsage) {
            throw SecureEnclaveError(status: Status.param,
                                     reason: "a Secure Enclave key's access control must contain .privateKeyUsage when it asks for an authentication (flags 0x\(String(flags.rawValue, radix: 16))): add .privateKeyUsage to the flags")
        }
        if flags.contains(.or) && flags.contains(.and) {
            throw SecureEnclaveError(status: Status.param, reason: "an access control has .or or .and, not both")
        }
    }

    /// The public key, or `errSecInternalComponent` when the token's bytes are not a P-256 point.
    static func signingPublicKey(_ x963: Data, token: any SecureEnclaveToken) throws(SecureEnclaveError) -> Crypto.P256.Signing.PublicKey {
        do {
            return try Crypto.P256.Signing.PublicKey(x963Representation: x963)
        } catch {
            throw SecureEnclaveError(status: Status.internalComponent,
                                     reason: "the Secure Enclave (\(token.name)) gave a public key that is not a P-256 point")
        }
    }

    /// Uses the key once on a fixed input (see ``load(_:dataRepresentation:authenticationContext:)``).
    private func checkUsable() throws(SecureEnclaveError) {
        let mismatch = SecureEnclaveError(status: Status.decode,
                                          reason: "the dataRepresentation's private key does not match its public key")
        switch envelope.kind {
        case .signing:
            let raw = try rawSignature(digest: Data(Crypto.SHA256.hash(data: Self.checkMessage)))
            guard let signature = try? Crypto.P256.Signing.ECDSASignature(rawRepresentation: raw),
                  let publicKey = try? Crypto.P256.Signing.PublicKey(x963Representation: publicKeyX963),
                  publicKey.isValidSignature(signature, for: Self.checkMessage)
            else { throw mismatch }
        case .keyAgreement:
            let generator = Self.one.publicKey.x963Representation
            let x = try sharedX(peerX963: generator)
            guard x == publicKeyX963.dropFirst().prefix(32) else { throw mismatch }
        }
    }

    // MARK: Using

    /// The application password of `context` (`LAContext.setCredential(_:type: .applicationPassword)`).
    ///
    /// Decision (as SecKey's, see SecKeyToken.swift): Apple shows its own password dialog when the context has no
    /// application password; Keystone has none, so without one the call fails: `errSecInteractionNotAllowed` when the
    /// context does not allow interaction (as Apple's would), else `errSecAuthFailed`, naming `setCredential`.
    /// Nothing reaches the TPM then (no lockout count).
    static func applicationPassword(_ context: LAContext?, operation: String) throws(SecureEnclaveError) -> Data {
        if let password = context?.applicationPasswordCredential { return password }
        if context?.interactionNotAllowed == true {
            throw SecureEnclaveError(status: Status.interactionNotAllowed,
                                     reason: "\(operation) needs the key's application password (.applicationPassword) and the LAContext does not allow interaction: set it with LAContext.setCredential(_:type: .applicationPassword)")
        }
        if context?.context.isInvalidated == true {
            throw SecureEnclaveError(status: Status.authFailed, reason: "\(operation): the key's LAContext was invalidated")
        }
        throw SecureEnclaveError(status: Status.authFailed,
                                 reason: "\(operation) needs the key's application password (.applicationPassword), and Keystone shows no password dialog: set it with LAContext.setCredential(_:type: .applicationPassword) on the authenticationContext passed")
    }

    /// The authentication one use of the key needs (see `AuthenticationGate`), asked of the current authenticator
    /// with this key's context; returns the application password the token checks, for a key bound to one.
    @discardableResult
    func authorize(operation: String, defaultPrompt: String) throws(SecureEnclaveError) -> Data? {
        var flags = envelope.accessControl.flags
        guard flags.requiresAuthentication || secretBound else { return nil }
        var password: Data?
        if passwordBound {
            // The TPM checks the password: the gate asks only the other flags.
            password = try Self.applicationPassword(authenticationContext, operation: operation == "sign" ? "signing" : "a key agreement")
            flags.remove(.applicationPassword)
            guard flags.requiresAuthentication || secretBound else { return password }
        }
        let authenticator = KeychainServicesDefaults.currentAuthenticator()
        let reason = authenticationContext?.localizedReason ?? ""
        let evaluate = { (flags: AccessControlFlags) throws(SecureEnclaveError) in
            if flags.contains(.biometryCurrentSet), let recorded = self.envelope.biometryDomainState,
               authenticator.biometryDomainState != recorded {
                throw SecureEnclaveError(status: Status.authFailed,
                                         reason: "the enrolled biometry changed since this .biometryCurrentSet key was made, so it can no longer be used: make a new key")
            }
            do {
                try AuthenticationGate.authorize(flags, itemClass: .key, operation: operation,
                                                 prompt: reason.isEmpty ? defaultPrompt : reason,
                                                 context: self.authenticationContext?.context, authenticator: authenticator,
                                                 now: KeychainServicesDefaults.currentClock()())
            } catch let error as EngineError {
                throw SecureEnclaveError(error)
            } catch {
                throw SecureEnclaveError(status: Status.internalComponent, reason: "\(error)")
            }
        }
        guard secretBound else {
            try evaluate(flags)
            return password
        }
        // The TPM needs the secret the keychain releases only after the evaluation of the secret item's own flags.
        let secret: Data
        do {
            secret = try SecureEnclaveKeySecrets.release(publicKeyX963: publicKeyX963) { stored in
                var asked = stored
                asked.remove(.applicationPassword)
                try evaluate(asked)
            }
        } catch let error as SecureEnclaveError {
            throw error
        } catch let error as EngineError {
            throw SecureEnclaveError(error)
        } catch {
            throw SecureEnclaveError(status: Status.internalComponent, reason: "\(error)")
        }
        return SecureEnclaveKeySecrets.authorizationValue(secret: secret, password: password)
    }

    /// r || s (64 bytes) over `digest` as ECDSA uses it: a digest longer than the curve's 32 bytes is cut to its
    /// leftmost 32 (FIPS 186-4 §6.4), a shorter one is the same integer on 32 bytes (zeros in front).
    func rawSignature(digest: Data, authorization: Data? = nil) throws(SecureEnclaveError) -> Data {
        let normalized = digest.count >= 32 ? Data(digest.prefix(32)) : Data(count: 32 - digest.count) + digest
        let raw: Data
        do {
            raw = try token.signature(digest: normalized, with: envelope.tokenBlob, authorization: authorization)
        } catch {
            throw SecureEnclaveError(error)
        }
        guard raw.count == 64 else {
            throw SecureEnclaveError(status: Status.internalComponent,
                                     reason: "the Secure Enclave (\(token.name)) gave a signature of \(raw.count) bytes, not 64")
        }
        return raw
    }

    /// The ECDH shared x coordinate (32 bytes) with a peer's public key (ANSI X9.63).
    func sharedX(peerX963: Data, authorization: Data? = nil) throws(SecureEnclaveError) -> Data {
        let x: Data
        do {
            x = try token.sharedSecret(peerX963: peerX963, with: envelope.tokenBlob, authorization: authorization)
        } catch {
            throw SecureEnclaveError(error)
        }
        guard x.count == 32 else {
            throw SecureEnclaveError(status: Status.internalComponent,
                                     reason: "the Secure Enclave (\(token.name)) gave a shared secret of \(x.count) bytes, not 32")
        }
        return x
    }

    /// The scalar 1 as a swift-crypto key: its public key is the generator, and its agreement with a point P is P's x.
    static let one: Crypto.P256.KeyAgreement.PrivateKey = {
        // 1 is a valid P-256 scalar (0 < 1 < n): this initialiser cannot fail.
        try! Crypto.P256.KeyAgreement.PrivateKey(rawRepresentation: Data(count: 31) + [1])
    }()

    /// A description without key material.
    func describe(_ typeName: String) -> String {
        let access = envelope.accessControl
        return "\(typeName)(token: \(token.name), accessibility: \(access.accessibility.rawValue), flags: 0x\(String(access.flags.rawValue, radix: 16)))"
    }
}
#endif
