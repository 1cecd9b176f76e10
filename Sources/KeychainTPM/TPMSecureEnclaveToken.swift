#if os(Linux)
import Crypto
import Foundation
import KeychainEngine
import Synchronization

/// The TPM 2.0 as the keychain's Secure Enclave: `kSecAttrTokenIDSecureEnclave` keys and CryptoKit's
/// `SecureEnclave` keys live in it on Linux.
///
/// The device is opened on first use and kept while the token lives, ONE per TCTI configuration in the process:
/// tokens on the same TPM alive at the same time share it (it closes, flushing what it holds, when the last of them
/// goes). A TPM without a resource manager (swtpm, `/dev/tpm0`) has only a few object slots for everyone, and
/// each open device keeps the primary storage key and its last key loaded; two devices of one process on one such
/// TPM would already fill it (`TPM_RC_OBJECT_MEMORY`). What the device holds is flushed when the process exits.
/// When the TPM goes away mid-way (``TPMError/Kind/connectionLost``) or
/// stops answering (``TPMError/Kind/timedOut``) the call fails with `errSecNotAvailable` and the next call opens it
/// again.
///
/// Status codes (``TPMError`` kinds): no TPM at all (no TCTI configured and no `/dev/tpmrm0` or `/dev/tpm0`) →
/// `errSecUnimplemented`, as on a device without a Secure Enclave; a TPM configured or present but not answering,
/// lost, or timed out → `errSecNotAvailable`; a blob that is damaged or belongs to another TPM → `errSecDecode`; a wrong usage
/// or an invalid peer key → `errSecParam`; anything else the TPM refuses → `errSecInternalComponent`. The reason
/// keeps the TPM's own message.
///
/// A wrong PIN (a key made with ``createKey(_:pin:)``) or a TPM in dictionary-attack lockout → `errSecAuthFailed`, the
/// reason saying which (and, for a lockout, within how many seconds the TPM accepts an attempt again); a TSS2 key
/// Keystone cannot use → `errSecUnimplemented`.
///
/// - Important: What the TPM enforces and what it does not: see ``TPMDevice``. A key made with ``createKey(_:)`` has
///   no authorization value in the TPM. A key made with ``createKey(_:pin:)`` needs its PIN, enforced by the TPM. A
///   key made with ``createKey(_:authorization:binding:)`` and `SecureEnclaveKeyBinding.releasedSecret` (what SecKey
///   and CryptoKit do for `.userPresence`, `.biometry…`, `.devicePasscode`) needs the keychain's random secret,
///   enforced by the TPM; asking the person before the keychain releases it is the software layers' part.
public final class TPMSecureEnclaveToken: SecureEnclaveToken {
    /// The tctildr configuration (nil: the default, `/dev/tpmrm0`, else `/dev/tpm0`).
    public let tcti: String?
    /// The most each TPM command of this token's calls may take (its device's ``TPMDevice/timeout``).
    public let timeout: Duration

    /// The device this token uses (kept alive by it).
    private let device = Mutex<TPMDevice?>(nil)

    /// A device some live token uses, held weakly.
    private struct Shared: Sendable {
        weak let device: TPMDevice?
    }

    /// The process's open devices, by TCTI configuration ("" for tctildr's default) and timeout.
    private static let devices = Mutex<[String: Shared]>([:])

    /// A token on the TPM at `tcti` (default: ``TPMDevice/defaultTCTI(environment:)``). Opens nothing yet.
    ///
    /// - Parameters:
    ///   - tcti: a tctildr configuration (`"device:/dev/tpmrm0"`, `"swtpm:host=127.0.0.1,port=2321"`, …); nil for
    ///     tctildr's default.
    ///   - timeout: the most each TPM command may take (``TPMDevice/init(tcti:timeout:)``; default
    ///     ``TPMDevice/defaultTimeout``, 30 s). A call sends one command, or a few when it loads a key (or opens the
    ///     TPM again). A TPM that has not answered by then fails the call with `errSecNotAvailable`, and the next call
    ///     opens it again. Tokens share a device only when their TCTI configuration and timeout are the same.
    public init(tcti: String? = TPMDevice.defaultTCTI(), timeout: Duration = TPMDevice.defaultTimeout) {
        self.tcti = tcti
        self.timeout = timeout
    }

    /// The key of ``devices`` for this token.
    private var deviceKey: String { "\(tcti ?? "")#\(timeout)" }

    public var name: String { "TPM 2.0 at \(tcti ?? "/dev/tpmrm0 (default)")" }

    /// Asks the TPM (one `TPM2_GetCapability`, through the device kept open), so a TPM that went away since the
    /// last call is reported at once; a device lost or timed out is dropped and the TPM opened again, once.
    public func availability() -> EngineError? {
        for attempt in 0..<2 {
            do {
                _ = try run { (tpm) throws(TPMError) in try tpm.info() }
                return nil
            } catch {
                let dropped = error.status == Status.notAvailable && attempt == 0
                if !dropped { return error }
            }
        }
        return nil
    }

    /// The TPM's manufacturer and firmware (for `keystone doctor`).
    public func info() throws(EngineError) -> TPMInfo {
        try run { (tpm) throws(TPMError) in try tpm.info() }
    }

    public func createKey(_ usage: SecureEnclaveKeyUsage) throws(EngineError) -> SecureEnclaveKey {
        let key = try run { (tpm) throws(TPMError) in try tpm.createKey(Self.tpmUsage(usage)) }
        return SecureEnclaveKey(usage: usage, dataRepresentation: key.dataRepresentation, publicKeyX963: key.x963Representation)
    }

    public func key(dataRepresentation: Data) throws(EngineError) -> SecureEnclaveKey {
        do {
            let key = try TPMKey(dataRepresentation: dataRepresentation)
            return SecureEnclaveKey(usage: Self.tokenUsage(key.usage),
                                    dataRepresentation: dataRepresentation, publicKeyX963: key.x963Representation)
        } catch {
            throw Self.engineError(error, tcti: tcti)
        }
    }

    public func signature(digest: Data, with dataRepresentation: Data) throws(EngineError) -> Data {
        guard digest.count == 32 else { throw EngineError.param("a SHA-256 digest has 32 bytes, not \(digest.count)") }
        return try run { (tpm) throws(TPMError) in try tpm.signature(digest: digest, with: dataRepresentation).rawRepresentation }
    }

    public func sharedSecret(peerX963: Data, with dataRepresentation: Data) throws(EngineError) -> Data {
        try run { (tpm) throws(TPMError) in try tpm.sharedSecret(withX963: peerX963, using: dataRepresentation) }
    }

    // MARK: TPM-enforced PINs

    /// Makes a key whose every use needs `pin`, enforced by the TPM: a wrong PIN is refused by the TPM itself (also
    /// for someone who copies the data representation and calls the TPM directly) and counts toward its
    /// dictionary-attack lockout. The TPM's authorization value is ``TPMDevice/authorizationValue(pin:)``.
    /// - Throws: `errSecParam` for an empty PIN; as ``createKey(_:)``.
    public func createKey(_ usage: SecureEnclaveKeyUsage, pin: String) throws(EngineError) -> SecureEnclaveKey {
        guard !pin.isEmpty else { throw EngineError.param("a key's PIN cannot be empty") }
        return try createKey(usage, authorization: Data(pin.utf8))
    }

    /// The TPM authorization value of a credential: its bytes when they fit the TPM's 32 (the PIN's UTF-8, as
    /// tpm2-tools' `-p` and tpm2-openssl's `-passin` send it), else their SHA-256. The same rule as
    /// ``TPMDevice/authorizationValue(pin:)``, so a key made with an `.applicationPassword` credential is used with
    /// that password as its PIN by every tool.
    static func authorizationValue(_ credential: Data) -> Data {
        credential.count <= 32 ? credential : Data(SHA256.hash(data: credential))
    }

    /// Makes a key whose every use needs `authorization` (an `.applicationPassword` credential, a PIN's UTF-8),
    /// enforced by the TPM as for ``createKey(_:pin:)``.
    /// - Throws: `errSecParam` for an empty value; as ``createKey(_:)``.
    public func createKey(_ usage: SecureEnclaveKeyUsage, authorization: Data) throws(EngineError) -> SecureEnclaveKey {
        guard !authorization.isEmpty else { throw EngineError.param("a key's authorization value (its password) cannot be empty") }
        let value = Self.authorizationValue(authorization)
        let key = try run { (tpm) throws(TPMError) in try tpm.createKey(Self.tpmUsage(usage), authorization: value) }
        return SecureEnclaveKey(usage: usage, dataRepresentation: key.dataRepresentation, publicKeyX963: key.x963Representation)
    }

    /// True: the TPM refuses a use without the key's authorization value itself.
    public var enforcesAuthorization: Bool { true }

    /// Makes a key whose every use needs `authorization`, its blob recording what the value is: a
    /// `SecureEnclaveKeyBinding.releasedSecret` key (the keychain's random secret, released after the person's
    /// evaluation) is `noDA`; `SecureEnclaveKeyBinding.password` and
    /// `SecureEnclaveKeyBinding.releasedSecretAndPassword` keys are DA-protected.
    /// - Throws: `errSecParam` for an empty value or `SecureEnclaveKeyBinding.none`; as ``createKey(_:)``.
    public func createKey(_ usage: SecureEnclaveKeyUsage, authorization: Data,
                          binding: SecureEnclaveKeyBinding) throws(EngineError) -> SecureEnclaveKey {
        guard !authorization.isEmpty else { throw EngineError.param("a key's authorization value cannot be empty") }
        let tpmBinding: TPMKeyBinding
        switch binding {
        case .none: throw EngineError.param("a key made with an authorization value needs a binding other than none")
        case .password: tpmBinding = .password
        case .releasedSecret: tpmBinding = .releasedSecret
        case .releasedSecretAndPassword: tpmBinding = .releasedSecretAndPassword
        }
        let value = Self.authorizationValue(authorization)
        let key = try run { (tpm) throws(TPMError) in
            try tpm.createKey(Self.tpmUsage(usage), authorization: value, binding: tpmBinding)
        }
        return SecureEnclaveKey(usage: usage, dataRepresentation: key.dataRepresentation, publicKeyX963: key.x963Representation)
    }

    /// What the key's authorization value is, from its blob (nothing is sent to the TPM).
    /// - Throws: `errSecDecode` when the bytes are not a TPM key.
    public func binding(of dataRepresentation: Data) throws(EngineError) -> SecureEnclaveKeyBinding {
        let key: TPMKey
        do {
            key = try TPMKey(dataRepresentation: dataRepresentation)
        } catch {
            throw Self.engineError(error, tcti: tcti)
        }
        switch key.binding {
        case .none: return .none
        case .password: return .password
        case .releasedSecret: return .releasedSecret
        case .releasedSecretAndPassword: return .releasedSecretAndPassword
        }
    }

    /// Whether the key needs its PIN (made with ``createKey(_:pin:)``, or imported without `emptyAuth`).
    /// - Throws: `errSecDecode` when the bytes are not a TPM key.
    public func needsPIN(_ dataRepresentation: Data) throws(EngineError) -> Bool {
        do {
            return try TPMKey(dataRepresentation: dataRepresentation).needsAuthorization
        } catch {
            throw Self.engineError(error, tcti: tcti)
        }
    }

    /// ``needsPIN(_:)``, for the `SecureEnclaveToken` protocol.
    public func requiresAuthorization(_ dataRepresentation: Data) throws(EngineError) -> Bool {
        try needsPIN(dataRepresentation)
    }

    /// Signs with a key that needs its PIN (nil: a key without one).
    /// - Throws: `errSecAuthFailed` when the TPM refuses the PIN (the reason says how many attempts remain before
    ///   the lockout) or is locked out (the reason says "lockout" and within how many seconds it accepts a new
    ///   attempt); else as ``signature(digest:with:)``.
    public func signature(digest: Data, with dataRepresentation: Data, pin: String?) throws(EngineError) -> Data {
        try signature(digest: digest, with: dataRepresentation, authorization: pin.map { Data($0.utf8) })
    }

    /// Signs with a key that needs its authorization value (nil: a key without one).
    /// - Throws: as ``signature(digest:with:pin:)``.
    public func signature(digest: Data, with dataRepresentation: Data, authorization: Data?) throws(EngineError) -> Data {
        guard digest.count == 32 else { throw EngineError.param("a SHA-256 digest has 32 bytes, not \(digest.count)") }
        let value = authorization.map(Self.authorizationValue)
        return try run { (tpm) throws(TPMError) in
            try tpm.signature(digest: digest, with: dataRepresentation, authorization: value).rawRepresentation
        }
    }

    /// ECDH with a key that needs its PIN (nil: a key without one).
    /// - Throws: as ``signature(digest:with:pin:)``.
    public func sharedSecret(peerX963: Data, with dataRepresentation: Data, pin: String?) throws(EngineError) -> Data {
        try sharedSecret(peerX963: peerX963, with: dataRepresentation, authorization: pin.map { Data($0.utf8) })
    }

    /// ECDH with a key that needs its authorization value (nil: a key without one).
    /// - Throws: as ``signature(digest:with:pin:)``.
    public func sharedSecret(peerX963: Data, with dataRepresentation: Data, authorization: Data?) throws(EngineError) -> Data {
        let value = authorization.map(Self.authorizationValue)
        return try run { (tpm) throws(TPMError) in
            try tpm.sharedSecret(withX963: peerX963, using: dataRepresentation, authorization: value)
        }
    }

    /// The TPM's dictionary-attack state (failures counted, the lockout threshold, the time to recovery).
    public func lockoutState() throws(EngineError) -> TPMLockoutState {
        try run { (tpm) throws(TPMError) in try tpm.lockoutState() }
    }

    // MARK: TSS2 PEM

    /// The key as a "TSS2 PRIVATE KEY" PEM, for tpm2-openssl (`openssl pkeyutl -provider tpm2 -inkey key.pem`),
    /// the kernel and go-tpm-keyfiles. Nothing is sent to the TPM.
    /// - Important: The PEM is the key, as the data representation is (usable with this TPM only).
    /// - Throws: `errSecDecode` when the bytes are not a TPM key.
    public func tss2PEM(dataRepresentation: Data) throws(EngineError) -> String {
        do {
            return try TPMKey(dataRepresentation: dataRepresentation).tss2PEMRepresentation()
        } catch {
            throw Self.engineError(error, tcti: tcti)
        }
    }

    /// Adopts a "TSS2 PRIVATE KEY" PEM made by another tool on this TPM (`openssl genpkey -provider tpm2 -algorithm EC
    /// -pkeyopt group:P-256`, go-tpm-keyfiles): checks that this TPM loads it, and returns it as a key of this token
    /// (a key without `emptyAuth` needs its PIN: ``signature(digest:with:pin:)``).
    /// - Throws: `errSecDecode` when the text is not a TSS2 key or this TPM cannot load it (another TPM's);
    ///   `errSecUnimplemented` for a TSS2 key Keystone cannot use (a policy, another parent, not P-256);
    ///   `errSecNotAvailable` when the TPM cannot be reached.
    public func importTSS2PEM(_ pem: String) throws(EngineError) -> SecureEnclaveKey {
        let key: TPMKey
        do {
            key = try TPMKey(tss2PEMRepresentation: pem)
        } catch {
            throw Self.engineError(error, tcti: tcti)
        }
        try run { (tpm) throws(TPMError) in try tpm.checkKey(key.dataRepresentation) }
        return SecureEnclaveKey(usage: Self.tokenUsage(key.usage), dataRepresentation: key.dataRepresentation,
                                publicKeyX963: key.x963Representation)
    }

    // MARK: -

    private func opened() throws(EngineError) -> TPMDevice {
        if let mine = device.withLock({ $0 }) { return mine }
        let key = deviceKey
        let shared = try Self.devices.withLock { (devices: inout [String: Shared]) throws(EngineError) -> TPMDevice in
            if let current = devices[key]?.device { return current }
            let made: TPMDevice
            do {
                made = try TPMDevice(tcti: tcti, timeout: timeout)
            } catch let error as TPMError {
                throw Self.engineError(error, tcti: tcti)
            } catch {
                throw EngineError(Status.internalComponent, "\(error)")
            }
            devices[key] = Shared(device: made)
            return made
        }
        return device.withLock { mine in
            if let mine { return mine }
            mine = shared
            return shared
        }
    }

    private func run<T>(_ body: (TPMDevice) throws(TPMError) -> T) throws(EngineError) -> T {
        let tpm = try opened()
        do {
            return try body(tpm)
        } catch {
            if error.kind == .connectionLost || error.kind == .timedOut {
                let key = deviceKey
                device.withLock { if $0 === tpm { $0 = nil } }
                Self.devices.withLock { if $0[key]?.device === tpm { $0[key] = nil } }
            }
            throw Self.engineError(error, tcti: tcti)
        }
    }

    static func tpmUsage(_ usage: SecureEnclaveKeyUsage) -> TPMKeyUsage {
        switch usage {
        case .signing: .signing
        case .keyAgreement: .keyAgreement
        case .general: .general
        }
    }

    static func tokenUsage(_ usage: TPMKeyUsage) -> SecureEnclaveKeyUsage {
        switch usage {
        case .signing: .signing
        case .keyAgreement: .keyAgreement
        case .general: .general
        }
    }

    /// The status a ``TPMError`` becomes (see the type's documentation).
    static func engineError(_ error: TPMError, tcti: String?) -> EngineError {
        switch error.kind {
        case .unavailable:
            let present = tcti != nil || FileManager.default.fileExists(atPath: "/dev/tpmrm0")
                || FileManager.default.fileExists(atPath: "/dev/tpm0")
            return EngineError(present ? Status.notAvailable : Status.unimplemented,
                               present ? error.description : "this machine has no TPM 2.0 (no /dev/tpmrm0, no KEYSTONE_TPM_TCTI)")
        case .connectionLost, .timedOut: return EngineError(Status.notAvailable, error.description)
        case .malformedBlob, .wrongTPM: return EngineError(Status.decode, error.description)
        case .invalidPeerKey, .wrongKeyUsage: return EngineError(Status.param, error.description)
        // Decision: a wrong PIN and a lockout are both errSecAuthFailed (Apple has no Security status for a lockout;
        // its Secure Enclave reports a passcode lockout as an authentication failure), told apart by the reason,
        // which for a lockout says "lockout" and the time to recovery. TPMDevice's TPMError keeps the kinds apart.
        case .authFailed, .lockout: return EngineError(Status.authFailed, error.description)
        case .unsupported: return EngineError(Status.unimplemented, error.description)
        case .other: return EngineError(Status.internalComponent, error.description)
        }
    }
}
#endif
