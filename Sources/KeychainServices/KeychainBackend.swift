#if !canImport(Darwin)
import Foundation
import KeychainEngine

/// A backend a program installs at start-up with ``KeychainServicesDefaults/bootstrap(_:)``,
/// as swift-log's handlers are installed with `LoggingSystem.bootstrap`.
///
/// The core (`KeychainServices`, `Keystone`) has the keychain file and the memory storage. Everything that needs a
/// system library or a network stack is a product of its own that provides a value of this type:
///
/// | Value | Product | What it provides |
/// |---|---|---|
/// | `.secretService` | `KeychainSecretService` | the storage `KEYSTONE_BACKEND=secret-service[:COLLECTION]` names |
/// | `.etcd` | `KeychainEtcd` (the `NIO` trait) | the storage `KEYSTONE_KEYCHAIN=etcd://…` names |
/// | `.tpm` | `KeychainTPM` | the Secure Enclave (`kSecAttrTokenIDSecureEnclave`, CryptoKit's `SecureEnclave`, TPM-sealed files) |
/// | `.systemAuthentication` | `SystemAuthentication` | who `LAContext` asks: PAM and fprintd |
/// | `.pkcs12` | `KeychainPKCS12` (the `NIO` trait) | `SecPKCS12Import`'s reader |
///
/// A backend may provide several of these; what it does not provide stays nil.
public struct KeychainBackend: Sendable, CustomStringConvertible {
    /// The backend's name, its key among the installed backends: installing another with the same name replaces it.
    public let name: String
    /// The library product that provides it, named in messages.
    public let product: String

    /// Opens the storage a `KEYSTONE_BACKEND` value or a `KEYSTONE_KEYCHAIN` argument names; returns nil when the
    /// argument is not this backend's (another backend may take it).
    public var storage: (@Sendable (_ argument: String, _ environment: [String: String]) throws -> (any KeychainStorage)?)?
    /// Who authenticates the person (for `LAContext` and access-controlled items).
    public var authenticator: (@Sendable () -> any Authenticator)?
    /// The Secure Enclave token the environment selects; nil: none (for example `KEYSTONE_SECURE_ENCLAVE=none`).
    public var secureEnclave: (@Sendable (_ environment: [String: String]) -> (any SecureEnclaveToken)?)?
    /// Reads a PKCS#12 file with its password: the private key and the certificates. Throws on a wrong password or a
    /// malformed file (`SecPKCS12Import` tells them apart).
    public var pkcs12: (@Sendable (_ data: Data, _ password: String) throws -> PKCS12Contents)?

    /// A backend named `name`, from `product`, providing what is not nil.
    public init(name: String, product: String,
                storage: (@Sendable (_ argument: String, _ environment: [String: String]) throws -> (any KeychainStorage)?)? = nil,
                authenticator: (@Sendable () -> any Authenticator)? = nil,
                secureEnclave: (@Sendable (_ environment: [String: String]) -> (any SecureEnclaveToken)?)? = nil,
                pkcs12: (@Sendable (_ data: Data, _ password: String) throws -> PKCS12Contents)? = nil) {
        self.name = name
        self.product = product
        self.storage = storage
        self.authenticator = authenticator
        self.secureEnclave = secureEnclave
        self.pkcs12 = pkcs12
    }

    public var description: String { "KeychainBackend(\(name), product \(product))" }

    /// A backend the program asked for without installing it: what to add, for the error message.
    package struct Missing: Sendable {
        /// What the program asked for, in words.
        package let feature: String
        /// The product to depend on.
        package let product: String
        /// The value to pass to `bootstrap`.
        package let value: String
        /// Whether the product needs the package's `NIO` trait.
        package let needsNIO: Bool

        /// A sentence naming the product and the call that installs it.
        package var message: String {
            let trait = needsNIO ? " (with the Keystone package's \"NIO\" trait: `.package(url: …, traits: [\"NIO\"])`)" : ""
            return "\(feature) needs the \(product) backend, which this program did not install: add the product \(product)\(trait) to the target and call `KeychainServicesDefaults.bootstrap(.\(value))` at start-up"
        }

        package static let secretService = Missing(feature: "the Secret Service", product: "KeychainSecretService", value: "secretService", needsNIO: false)
        package static let etcd = Missing(feature: "an etcd keychain", product: "KeychainEtcd", value: "etcd", needsNIO: true)
        package static let secureEnclave = Missing(feature: "the Secure Enclave (a TPM 2.0 on Linux)", product: "KeychainTPM", value: "tpm", needsNIO: false)
        package static let authentication = Missing(feature: "LAContext (the login password, fingerprints)", product: "SystemAuthentication", value: "systemAuthentication", needsNIO: false)
        package static let pkcs12 = Missing(feature: "SecPKCS12Import", product: "KeychainPKCS12", value: "pkcs12", needsNIO: true)
    }
}

/// What a PKCS#12 file holds, as ``KeychainBackend/pkcs12`` reads it.
public struct PKCS12Contents: Sendable {
    /// The private key in DER: SEC1, PKCS#1 or PKCS#8.
    public var privateKeyDER: Data
    /// The certificates in DER, in the file's order.
    public var certificates: [Data]

    /// The private key and the certificates of a PKCS#12 file.
    public init(privateKeyDER: Data, certificates: [Data]) {
        self.privateKeyDER = privateKeyDER
        self.certificates = certificates
    }
}
#endif
