#if !canImport(Darwin)
import Crypto
import Foundation
import KeychainEngine
import KeychainServices

extension SecureEnclave.P256.Signing {
    /// A P-256 private key for ECDSA signatures, made and used inside the Secure Enclave (on Linux, the TPM 2.0 of
    /// `KeychainServicesDefaults.secureEnclave`). Its private key never leaves the TPM.
    ///
    /// Signatures verify with swift-crypto's (CryptoKit's) `P256.Signing.PublicKey`, ``publicKey``.
    ///
    /// - Important: The TPM keeps the private key in it and makes ``dataRepresentation`` useless on any other TPM;
    ///   with `.privateKeyUsage` and a person flag (`.userPresence`…), the person is asked in this process before each
    ///   signature, and the TPM refuses the key without a secret the keychain releases only after that: someone who
    ///   copies ``dataRepresentation`` cannot sign through the TPM directly, but someone who can read that keychain
    ///   item or run code in the app's process can. Clearing or losing the TPM loses the key. See ``SecureEnclave``.
    ///
    /// With `.applicationPassword` (and `.privateKeyUsage`) the key is made with the `authenticationContext`'s
    /// application password (`LAContext.setCredential(_:type: .applicationPassword)`) as its TPM authorization value:
    /// the TPM, not this library, refuses a wrong one. See ``SecureEnclave``.
    public struct PrivateKey: Sendable, CustomStringConvertible, CustomReflectable {
        let core: EnclaveKeyCore

        /// The public key, to verify this key's signatures.
        public let publicKey: Crypto.P256.Signing.PublicKey

        /// The key as bytes to store (for instance in the keychain) and reload with
        /// ``init(dataRepresentation:authenticationContext:)``: the TPM's wrapped key, usable only by the TPM that made
        /// it, in an envelope that also records the access control. Not the private key.
        public var dataRepresentation: Data { core.envelope.encoded() }

        /// Makes a new key in the Secure Enclave.
        ///
        /// - Parameters:
        ///   - compactRepresentable: Whether the public key must have a compact representation
        ///     (`publicKey.compactRepresentation` non-nil). Keys without one are discarded and another is made, at
        ///     most 32 times.
        ///   - accessControl: When the key may be used. Apple's default: `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`,
        ///     no flags (any use, no authentication). With `.privateKeyUsage` and `.userPresence`, `.biometryAny`,
        ///     `.biometryCurrentSet` or `.devicePasscode`, each signature first authenticates the person (or is
        ///     covered by `authenticationContext`'s reuse duration).
        ///   - authenticationContext: The `LAContext` uses of the key authenticate with: an evaluated policy with
        ///     `touchIDAuthenticationAllowableReuseDuration` covers the signatures made within it;
        ///     `interactionNotAllowed` makes a needed prompt fail instead.
        /// - Throws: ``SecureEnclaveError`` with `errSecUnimplemented` (no Secure Enclave: check
        ///   ``SecureEnclave/isAvailable``), `errSecNotAvailable` (the TPM cannot be reached), `errSecParam`
        ///   (authentication flags without `.privateKeyUsage`), `errSecAuthFailed` /
        ///   `errSecInteractionNotAllowed` (`.applicationPassword` and no password on `authenticationContext`),
        ///   `errSecInternalComponent` (the TPM failed).
        /// - Important: Blocks while the TPM makes the key (tens of milliseconds on hardware).
        public init(compactRepresentable: Bool = true,
                    accessControl: SecAccessControl = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly, [], nil)!,
                    authenticationContext: LAContext? = nil) throws {
            try self.init(core: EnclaveKeyCore.create(.signing, compactRepresentable: compactRepresentable,
                                                      accessControl: accessControl,
                                                      authenticationContext: authenticationContext))
        }

        /// Loads a key from its ``dataRepresentation``, with the access control it was made with.
        ///
        /// The Secure Enclave is asked to use the key once (see ``SecureEnclave``): a key of another TPM fails here.
        ///
        /// - Parameters:
        ///   - dataRepresentation: Bytes ``dataRepresentation`` returned.
        ///   - authenticationContext: The `LAContext` the key's uses authenticate with.
        /// - Throws: ``SecureEnclaveError`` with `errSecDecode` (damaged bytes, not a Secure Enclave key, or a key of
        ///   another TPM), `errSecParam` (a key-agreement key's bytes: use
        ///   ``SecureEnclave/P256/KeyAgreement/PrivateKey/init(dataRepresentation:authenticationContext:)``),
        ///   `errSecUnimplemented`, `errSecNotAvailable`.
        public init(dataRepresentation: Data, authenticationContext: LAContext? = nil) throws {
            try self.init(core: EnclaveKeyCore.load(.signing, dataRepresentation: dataRepresentation,
                                                    authenticationContext: authenticationContext))
        }

        private init(core: EnclaveKeyCore) throws(SecureEnclaveError) {
            self.core = core
            self.publicKey = try EnclaveKeyCore.signingPublicKey(core.publicKeyX963, token: core.token)
        }

        /// Signs the SHA-256 digest of `data`.
        ///
        /// - Throws: ``SecureEnclaveError``: `errSecAuthFailed`, `errSecUserCanceled` or `errSecInteractionNotAllowed`
        ///   when the access control's authentication fails; `errSecNotAvailable` when the TPM went away; `errSecDecode`
        ///   when the Secure Enclave is not the one that made the key.
        public func signature<D: DataProtocol>(for data: D) throws -> Crypto.P256.Signing.ECDSASignature {
            try signature(for: Crypto.SHA256.hash(data: data))
        }

        /// Signs a digest. A digest longer than 32 bytes (SHA-384, SHA-512) is used as ECDSA over P-256 uses it, by
        /// its leftmost 32 bytes, so the signature verifies with `publicKey.isValidSignature(_:for: digest)`.
        ///
        /// - Throws: ``SecureEnclaveError``, as for the signature of data (`errSecAuthFailed`, `errSecUserCanceled`,
        ///   `errSecInteractionNotAllowed`, `errSecNotAvailable`, `errSecDecode`).
        public func signature<D: Crypto.Digest>(for digest: D) throws -> Crypto.P256.Signing.ECDSASignature {
            let password = try core.authorize(operation: "sign", defaultPrompt: "Sign with a Secure Enclave key")
            let raw = try core.rawSignature(digest: Data(digest), authorization: password)
            do {
                return try Crypto.P256.Signing.ECDSASignature(rawRepresentation: raw)
            } catch {
                throw SecureEnclaveError(status: Status.internalComponent, reason: "the Secure Enclave gave a malformed signature")
            }
        }

        /// The key's kind, token and access control; never key material.
        public var description: String { core.describe("SecureEnclave.P256.Signing.PrivateKey") }

        /// No children: `dump` shows the ``description`` only.
        public var customMirror: Mirror { Mirror(self, children: [:]) }
    }
}
#endif
