#if !canImport(Darwin)
import Crypto
import Foundation
import KeychainEngine
import KeychainServices

extension SecureEnclave.P256.KeyAgreement {
    /// A P-256 private key for ECDH key agreement, made and used inside the Secure Enclave (on Linux, the TPM 2.0 of
    /// `KeychainServicesDefaults.secureEnclave`). Its private key never leaves the TPM.
    ///
    /// The shared secret is swift-crypto's (CryptoKit's) `SharedSecret`, equal to the one the peer computes with
    /// `sharedSecretFromKeyAgreement(with:)`: derive keys from it with `hkdfDerivedSymmetricKey` or
    /// `x963DerivedSymmetricKey` as with any other key.
    ///
    /// - Important: The TPM keeps the private key in it and makes ``dataRepresentation`` useless on any other TPM;
    ///   with `.privateKeyUsage` and a person flag (`.userPresence`…), the person is asked in this process before each
    ///   agreement, and the TPM refuses the key without a secret the keychain releases only after that: someone who
    ///   copies ``dataRepresentation`` cannot use it through the TPM directly, but someone who can read that keychain
    ///   item or run code in the app's process can. Clearing or losing the TPM loses the key. See ``SecureEnclave``.
    ///
    /// With `.applicationPassword` (and `.privateKeyUsage`) the key is made with the `authenticationContext`'s
    /// application password (`LAContext.setCredential(_:type: .applicationPassword)`) as its TPM authorization value:
    /// the TPM, not this library, refuses a wrong one. See ``SecureEnclave``.
    public struct PrivateKey: Sendable, CustomStringConvertible, CustomReflectable {
        let core: EnclaveKeyCore

        /// The public key, to give the other party.
        public let publicKey: Crypto.P256.KeyAgreement.PublicKey

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
        ///     `.biometryCurrentSet` or `.devicePasscode`, each agreement first authenticates the person (or is
        ///     covered by `authenticationContext`'s reuse duration).
        ///   - authenticationContext: The `LAContext` uses of the key authenticate with.
        /// - Throws: ``SecureEnclaveError`` with `errSecUnimplemented` (no Secure Enclave: check
        ///   ``SecureEnclave/isAvailable``), `errSecNotAvailable` (the TPM cannot be reached), `errSecParam`
        ///   (authentication flags without `.privateKeyUsage`), `errSecAuthFailed` /
        ///   `errSecInteractionNotAllowed` (`.applicationPassword` and no password on `authenticationContext`),
        ///   `errSecInternalComponent` (the TPM failed).
        /// - Important: Blocks while the TPM makes the key (tens of milliseconds on hardware).
        public init(compactRepresentable: Bool = true,
                    accessControl: SecAccessControl = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly, [], nil)!,
                    authenticationContext: LAContext? = nil) throws {
            try self.init(core: EnclaveKeyCore.create(.keyAgreement, compactRepresentable: compactRepresentable,
                                                      accessControl: accessControl,
                                                      authenticationContext: authenticationContext))
        }

        /// Loads a key from its ``dataRepresentation``, with the access control it was made with.
        ///
        /// The Secure Enclave is asked to use the key once (see ``SecureEnclave``): a key of another TPM fails here.
        ///
        /// - Throws: ``SecureEnclaveError`` with `errSecDecode` (damaged bytes, not a Secure Enclave key, or a key of
        ///   another TPM), `errSecParam` (a signing key's bytes: use
        ///   ``SecureEnclave/P256/Signing/PrivateKey/init(dataRepresentation:authenticationContext:)``),
        ///   `errSecUnimplemented`, `errSecNotAvailable`.
        public init(dataRepresentation: Data, authenticationContext: LAContext? = nil) throws {
            try self.init(core: EnclaveKeyCore.load(.keyAgreement, dataRepresentation: dataRepresentation,
                                                    authenticationContext: authenticationContext))
        }

        private init(core: EnclaveKeyCore) throws(SecureEnclaveError) {
            self.core = core
            do {
                self.publicKey = try Crypto.P256.KeyAgreement.PublicKey(x963Representation: core.publicKeyX963)
            } catch {
                throw SecureEnclaveError(status: Status.internalComponent,
                                         reason: "the Secure Enclave (\(core.token.name)) gave a public key that is not a P-256 point")
            }
        }

        /// ECDH with the other party's public key, in the Secure Enclave.
        ///
        /// - Throws: ``SecureEnclaveError``: `errSecAuthFailed`, `errSecUserCanceled` or `errSecInteractionNotAllowed`
        ///   when the access control's authentication fails; `errSecParam` when `publicKeyShare` is not a valid
        ///   P-256 point; `errSecNotAvailable` when the TPM went away; `errSecDecode` when the Secure Enclave is not the
        ///   one that made the key.
        public func sharedSecretFromKeyAgreement(with publicKeyShare: Crypto.P256.KeyAgreement.PublicKey) throws -> SharedSecret {
            let password = try core.authorize(operation: "derive", defaultPrompt: "Agree on a key with a Secure Enclave key")
            let x = try core.sharedX(peerX963: publicKeyShare.x963Representation, authorization: password)
            // swift-crypto's SharedSecret has no public initialiser. The TPM gave the shared point's x coordinate;
            // agreeing the scalar 1 with a point of that x (either y: both share the x) yields exactly those bytes as
            // a SharedSecret, through swift-crypto's own ECDH (no ECDH here).
            do {
                let point = try Crypto.P256.KeyAgreement.PublicKey(compressedRepresentation: [0x02] + x)
                return try EnclaveKeyCore.one.sharedSecretFromKeyAgreement(with: point)
            } catch {
                throw SecureEnclaveError(status: Status.internalComponent,
                                         reason: "the Secure Enclave gave a shared secret that is not the x coordinate of a P-256 point")
            }
        }

        /// The key's kind, token and access control; never key material.
        public var description: String { core.describe("SecureEnclave.P256.KeyAgreement.PrivateKey") }

        /// No children: `dump` shows the ``description`` only.
        public var customMirror: Mirror { Mirror(self, children: [:]) }
    }
}
#endif
