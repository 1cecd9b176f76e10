#if os(Linux)
import CTPM
import Crypto
import Foundation
import Synchronization

// MARK: - Errors

/// Why a TPM operation failed.
///
/// ``kind`` is what a caller branches on; ``rc`` is the TSS2 response code when the TPM software stack reported the
/// failure (0 otherwise), and ``message`` says what failed with the response code decoded. No error carries key
/// material.
public struct TPMError: Error, CustomStringConvertible, Sendable, Hashable {
    /// What went wrong, as far as a caller can act on it.
    public enum Kind: Sendable, Hashable, CustomStringConvertible {
        /// No TPM answers: no `/dev/tpmrm0` (or no permission on it), nothing listening at the configured TCTI, or
        /// the TCTI library is missing.
        case unavailable
        /// The key's data representation is not a Keystone TPM key, or it is truncated or corrupted.
        case malformedBlob
        /// The key's data representation is intact but this TPM cannot load it: another TPM created it (or this
        /// TPM's owner hierarchy was cleared since). The key cannot be recovered.
        case wrongTPM
        /// The peer's public key is not a point on P-256.
        case invalidPeerKey
        /// The TPM went away during the operation (the device or the socket broke). The ``TPMDevice`` stays
        /// unusable; open a new one.
        case connectionLost
        /// The key cannot do this: a signing key asked for key agreement, or a key-agreement key asked to sign.
        case wrongKeyUsage
        /// The TPM did not answer a command within the device's ``TPMDevice/timeout``: it keeps the connection
        /// open but does not respond (a wedged chip or driver, a stopped swtpm). The ``TPMDevice`` stays unusable
        /// (every later call fails at once with this kind); open a new one.
        case timedOut
        /// The TPM refused the key's authorization value (a wrong PIN: `TPM_RC_AUTH_FAIL` / `TPM_RC_BAD_AUTH`) and
        /// counted the failure toward its dictionary-attack lockout (``TPMError/lockout`` says how many remain).
        case authFailed
        /// The TPM is in dictionary-attack lockout (`TPM_RC_LOCKOUT`): it refuses every key that needs an
        /// authorization value, right PIN or wrong, until it forgets a failure (``TPMError/lockout`` says when).
        case lockout
        /// The key is well formed but not one Keystone can use (a TSS2 key with a policy, a parent other than the
        /// owner hierarchy, not P-256, ...).
        case unsupported
        /// Anything else (``TPMError/message`` says what).
        case other

        public var description: String {
            switch self {
            case .unavailable: "unavailable"
            case .malformedBlob: "malformedBlob"
            case .wrongTPM: "wrongTPM"
            case .invalidPeerKey: "invalidPeerKey"
            case .connectionLost: "connectionLost"
            case .wrongKeyUsage: "wrongKeyUsage"
            case .timedOut: "timedOut"
            case .authFailed: "authFailed"
            case .lockout: "lockout"
            case .unsupported: "unsupported"
            case .other: "other"
            }
        }
    }

    /// What went wrong.
    public let kind: Kind
    /// The TSS2 response code (`TSS2_RC`), or 0 when the failure is not the TPM software stack's.
    public let rc: UInt32
    /// What failed, with the response code decoded (by `Tss2_RC_Decode`).
    public let message: String
    /// For ``Kind/authFailed`` and ``Kind/lockout``: the TPM's dictionary-attack state read right after (nil when
    /// it could not be read, and for other kinds).
    public let lockout: TPMLockoutState?

    public init(kind: Kind, rc: UInt32 = 0, message: String, lockout: TPMLockoutState? = nil) {
        self.kind = kind
        self.rc = rc
        self.message = message
        self.lockout = lockout
    }

    init(_ error: ks_tpm_error) {
        let kind: Kind = switch error.kind {
        case KS_TPM_ERR_UNAVAILABLE: .unavailable
        case KS_TPM_ERR_MALFORMED_BLOB: .malformedBlob
        case KS_TPM_ERR_WRONG_TPM: .wrongTPM
        case KS_TPM_ERR_INVALID_PEER_KEY: .invalidPeerKey
        case KS_TPM_ERR_CONNECTION_LOST: .connectionLost
        case KS_TPM_ERR_WRONG_USAGE: .wrongKeyUsage
        case KS_TPM_ERR_TIMED_OUT: .timedOut
        case KS_TPM_ERR_AUTH_FAILED: .authFailed
        case KS_TPM_ERR_LOCKOUT: .lockout
        case KS_TPM_ERR_UNSUPPORTED: .unsupported
        default: .other
        }
        let message = withUnsafeBytes(of: error.message) { bytes in
            String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        let state = error.lockout
        let lockout = (kind == .authFailed || kind == .lockout) && state.max_tries > 0
            ? TPMLockoutState(state) : nil
        self.init(kind: kind, rc: error.rc, message: message.isEmpty ? "TPM operation failed" : message, lockout: lockout)
    }

    /// The message and what to do about it.
    public var description: String {
        let advice: String = switch kind {
        case .unavailable:
            "Check that the machine has a TPM 2.0 (/dev/tpmrm0) and that this user may open it (usually the tss group), "
                + "or set KEYSTONE_TPM_TCTI (for example swtpm:host=127.0.0.1,port=2321)."
        case .malformedBlob:
            "The stored key data is damaged or is not a Keystone TPM key."
        case .wrongTPM:
            "TPM keys work only on the TPM that created them (they cannot be copied to another machine, and clearing "
                + "the TPM destroys them): create a new key."
        case .invalidPeerKey:
            "The other party's public key is invalid."
        case .connectionLost:
            "The TPM stopped answering; open it again."
        case .wrongKeyUsage:
            "Create the key with the usage the operation needs."
        case .timedOut:
            "The TPM stopped answering; open it again (if it keeps timing out, check the TPM, its driver or the "
                + "software TPM, or allow more time with TPMDevice(tcti:timeout:))."
        case .authFailed:
            "Give the key's PIN; every wrong one counts toward the TPM's lockout."
        case .lockout:
            "Wait for the TPM to forget failures (see the time above); its owner can reset the lockout "
                + "(tpm2_dictionarylockout --clear-lockout)."
        case .unsupported:
            "Use a P-256 TPM key without a policy whose parent is the owner hierarchy (0x40000001)."
        case .other:
            ""
        }
        let code = rc == 0 ? "" : String(format: " [TSS2_RC 0x%x]", rc)
        return advice.isEmpty ? "TPM error (\(kind)): \(message)\(code)" : "TPM error (\(kind)): \(message)\(code). \(advice)"
    }
}

// MARK: - Dictionary-attack state

/// The TPM's dictionary-attack protection state (`TPM2_GetCapability`, `TPM_PT_LOCKOUT_*`).
///
/// A key with an authorization value (a PIN) is subject to it: each wrong value increments ``failedTries``; when it
/// reaches ``maxTries`` the TPM refuses every such key (``TPMError/Kind/lockout``) until it forgets a failure,
/// one every ``lockoutInterval``. Its owner can set these (`tpm2_dictionarylockout --setup-parameters`) and reset the
/// counter (`--clear-lockout`).
public struct TPMLockoutState: Sendable, Hashable {
    /// Failed authorizations the TPM currently counts (`TPM_PT_LOCKOUT_COUNTER`).
    public let failedTries: UInt32
    /// The count at which it locks out (`TPM_PT_MAX_AUTH_FAIL`).
    public let maxTries: UInt32
    /// How long until it forgets one failure (`TPM_PT_LOCKOUT_INTERVAL`); zero: it never does by itself.
    public let lockoutInterval: Duration
    /// How long after a failed lockout authorization it accepts another (`TPM_PT_LOCKOUT_RECOVERY`).
    public let lockoutRecovery: Duration

    /// Whether the TPM refuses DA-protected keys now.
    public var isLockedOut: Bool { maxTries > 0 && failedTries >= maxTries }
    /// Wrong values it still accepts before locking out.
    public var remainingTries: UInt32 { failedTries >= maxTries ? 0 : maxTries - failedTries }
    /// When locked out: the longest wait until it accepts an attempt again (one ``lockoutInterval``, as the TPM
    /// does not say how much of the current interval has passed); nil when not locked out or never by itself.
    public var timeToRecovery: Duration? {
        isLockedOut && lockoutInterval > .zero ? lockoutInterval : nil
    }

    public init(failedTries: UInt32, maxTries: UInt32, lockoutInterval: Duration, lockoutRecovery: Duration) {
        self.failedTries = failedTries
        self.maxTries = maxTries
        self.lockoutInterval = lockoutInterval
        self.lockoutRecovery = lockoutRecovery
    }

    init(_ state: ks_tpm_lockout) {
        self.init(failedTries: state.counter, maxTries: state.max_tries, lockoutInterval: .seconds(state.interval_s),
                  lockoutRecovery: .seconds(state.recovery_s))
    }
}

// MARK: - Keys

/// What a TPM key's authorization value is, as its blob records it.
public enum TPMKeyBinding: Int32, Sendable, Hashable {
    /// No authorization value: whoever holds the blob and can open the TPM uses the key (`noDA`).
    case none = 0
    /// A PIN or application password (``TPMDevice/createKey(_:authorization:)``), DA-protected: each wrong value
    /// counts toward the TPM's lockout. Blob version 2.
    case password = 1
    /// 32 random bytes the keychain holds and releases only after evaluating the person (`.userPresence`,
    /// `.biometry…`, `.devicePasscode`), `noDA` (no one guesses 256 random bits). Blob version 3.
    case releasedSecret = 2
    /// Derived from such a secret and the application password, DA-protected. Blob version 3.
    case releasedSecretAndPassword = 3
}

/// What a TPM key may do. The TPM enforces it: a signing key cannot agree keys and vice versa.
public enum TPMKeyUsage: Int32, Sendable, Hashable {
    /// ECDSA with SHA-256 (the key has the TPM's `sign` attribute).
    case signing = 1
    /// ECDH (the key has the TPM's `decrypt` attribute).
    case keyAgreement = 2
    /// Both (`sign` and `decrypt`, no fixed scheme): what a `kSecAttrTokenIDSecureEnclave` SecKey is, which Apple
    /// lets sign and agree keys.
    case general = 3
}

/// A P-256 key in a TPM: its data representation (the private part wrapped by the TPM) and its public key.
///
/// - Important: The private key never leaves the TPM in the clear. ``dataRepresentation`` holds it encrypted and
///   integrity-protected by the TPM's storage key (the owner hierarchy's primary key, derived from a seed that never
///   leaves the chip), and the key is `fixedTPM` and `fixedParent`: the TPM refuses to duplicate it. The data
///   representation is therefore safe to store anywhere, and useless on any other TPM (``TPMError/Kind/wrongTPM``).
///   Clearing the TPM's owner hierarchy destroys every such key.
public struct TPMKey: Sendable, Hashable {
    /// What the key may do.
    public let usage: TPMKeyUsage
    /// Whether the TPM asks for the key's authorization value (its PIN) at every use (envelope version 2 or 3).
    public var needsAuthorization: Bool { binding != .none }
    /// What the key's authorization value is (``TPMKeyBinding``).
    public let binding: TPMKeyBinding
    /// The key's data representation: a versioned Keystone envelope around the TPM's `TPM2B_PUBLIC` and wrapped
    /// `TPM2B_PRIVATE`. Give it back to ``TPMDevice`` to use the key.
    public let dataRepresentation: Data
    /// The public key, ANSI X9.63 (0x04 || X || Y).
    public let x963Representation: Data
    /// The public key as an ECDSA verification key.
    public let signingPublicKey: P256.Signing.PublicKey
    /// The public key as a key-agreement key.
    public let keyAgreementPublicKey: P256.KeyAgreement.PublicKey

    public static func == (lhs: TPMKey, rhs: TPMKey) -> Bool {
        lhs.usage == rhs.usage && lhs.dataRepresentation == rhs.dataRepresentation
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(dataRepresentation) }

    /// Reads a key's usage and public key from its data representation, without a TPM.
    /// - Throws: ``TPMError`` with ``TPMError/Kind/malformedBlob`` when the data is not an intact Keystone TPM key.
    public init(dataRepresentation: Data) throws(TPMError) {
        var x963 = [UInt8](repeating: 0, count: 65)
        var usage: Int32 = 0
        var error = ks_tpm_error()
        let status = dataRepresentation.withUnsafeBytes { blob in
            ks_tpm_blob_public(blob.baseAddress?.assumingMemoryBound(to: UInt8.self), blob.count, &x963, &usage, &error)
        }
        guard status == 0 else { throw TPMError(error) }
        let binding = dataRepresentation.withUnsafeBytes { blob in
            ks_tpm_blob_binding(blob.baseAddress?.assumingMemoryBound(to: UInt8.self), blob.count, &error)
        }
        guard binding >= 0 else { throw TPMError(error) }
        try self.init(usage: TPMKeyUsage(rawValue: usage) ?? .signing, dataRepresentation: dataRepresentation,
                      x963: Data(x963), binding: TPMKeyBinding(rawValue: binding) ?? .password)
    }

    init(usage: TPMKeyUsage, dataRepresentation: Data, x963: Data, needsAuthorization: Bool = false) throws(TPMError) {
        try self.init(usage: usage, dataRepresentation: dataRepresentation, x963: x963,
                      binding: needsAuthorization ? .password : .none)
    }

    init(usage: TPMKeyUsage, dataRepresentation: Data, x963: Data, binding: TPMKeyBinding) throws(TPMError) {
        self.binding = binding
        do {
            signingPublicKey = try P256.Signing.PublicKey(x963Representation: x963)
            keyAgreementPublicKey = try P256.KeyAgreement.PublicKey(x963Representation: x963)
        } catch {
            throw TPMError(kind: .malformedBlob, message: "the key's public key is not a valid P-256 point")
        }
        self.usage = usage
        self.dataRepresentation = dataRepresentation
        x963Representation = x963
    }
}

/// What a TPM says about itself (`TPM2_GetCapability`, the fixed TPM properties).
public struct TPMInfo: Sendable, Hashable {
    /// `TPM_PT_MANUFACTURER` as text: "IBM" (swtpm), "INTC", "IFX", "STM ", "NTC", "AMD", "MSFT", ...
    public let manufacturer: String
    /// `TPM_PT_VENDOR_STRING_1...4` joined.
    public let vendor: String
    /// `TPM_PT_FIRMWARE_VERSION_1` and `_2`, as the TPM reports them.
    public let firmwareVersion1: UInt32
    public let firmwareVersion2: UInt32
    /// The TPM 2.0 specification revision (`TPM_PT_REVISION`, 164 = 1.64) and year (`TPM_PT_YEAR`).
    public let specificationRevision: UInt32
    public let specificationYear: UInt32

    /// The firmware version as the four 16-bit halves of the two version words ("major.minor.x.y"), the way most
    /// manufacturers number it.
    public var firmwareVersion: String {
        "\(firmwareVersion1 >> 16).\(firmwareVersion1 & 0xFFFF).\(firmwareVersion2 >> 16).\(firmwareVersion2 & 0xFFFF)"
    }
}

// MARK: - The device

/// A TPM 2.0, through tpm2-tss's ESAPI: creates P-256 keys that never leave it, signs and agrees keys with them.
///
/// Every method blocks the calling thread until the TPM answers (milliseconds for a software TPM, up to about a
/// second for key creation on a hardware TPM), each TPM command at most ``timeout``. One ESAPI context serves the
/// whole device and is not thread-safe: calls from several threads are serialized by a lock.
///
/// Loaded keys: the device keeps the owner hierarchy's primary key loaded, and the last key it used
/// (``loadedKeyCapacity`` keys, found again by their data representation's bytes): signing again with the same key
/// is one TPM command, as in a program that loads its key once. Releasing the device flushes them.
///
/// - Important: Do not call these methods from Swift's cooperative thread pool (an `async` function, a task):
///   call them from a thread of your own (`Thread`, a `DispatchQueue`). A lost TPM connection fails at once
///   (``TPMError/Kind/connectionLost``); a TPM that stops answering without closing the connection fails the call
///   after ``timeout`` (``TPMError/Kind/timedOut``), and the device is unusable from then on.
/// - Important: On a TPM without a resource manager (swtpm, `/dev/tpm0`; `/dev/tpmrm0`, the default, has one), the
///   few object slots (3 on swtpm) and the object handles are shared by every program using the TPM: a device holds
///   up to 1 + ``loadedKeyCapacity`` of them while it is open (so open one device per TPM and process), and a
///   program that flushes every transient object (`tpm2_flushcontext -t`) flushes the device's too (the device
///   loads them again). A device that timed out cannot flush what it loaded: the next device this process opens
///   on the same TPM flushes those objects (when they still hold the same names) once the TPM runs out of slots.
/// - Important: What the TPM enforces: the private key is generated inside the TPM (`sensitiveDataOrigin`) and
///   never leaves it in the clear; it is `fixedTPM` and `fixedParent` (never duplicated); the blob it returns is
///   wrapped by this TPM's storage key, so it works only with this TPM. A key made without an authorization value
///   (`userWithAuth` with an empty one, `noDA`): whoever can open the TPM and holds the blob can use the key. A key
///   made with one (``createKey(_:authorization:)``, a PIN): the TPM refuses every use without it and counts each
///   wrong value toward its dictionary-attack lockout (``TPMLockoutState``).
///
/// tpm2-tss's own log lines (`ERROR:esys:...` on standard error) are off: every failure is reported as a
/// ``TPMError``. `KEYSTONE_LOG_LEVEL=debug` (or `trace`), or `TSS2_LOG` set to any value, keeps tpm2-tss's logging.
public final class TPMDevice: Sendable {
    /// The C handle.
    ///
    /// `@unchecked Sendable`: the pointer is used only inside `handle.withLock` (tpm2-tss's ESYS context is not
    /// thread-safe): that lock is what makes sharing it sound.
    private struct Handle: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    private let handle: Mutex<Handle>
    /// The TCTI configuration the device was opened with (nil: the default, `/dev/tpmrm0`, else `/dev/tpm0`).
    public let tcti: String?
    /// The most each TPM command may take (a call sends one, or a few when it loads a key); see
    /// ``init(tcti:timeout:)``.
    public let timeout: Duration

    /// The default ``timeout``: 30 seconds, far more than any TPM 2.0 takes to create or use a P-256 key.
    public static let defaultTimeout: Duration = .seconds(30)

    /// How many keys a device keeps loaded after using them, besides the primary key.
    public static let loadedKeyCapacity = Int(KS_TPM_KEY_CACHE_SIZE)

    /// Opens the TPM.
    /// - Parameters:
    ///   - tcti: a tctildr configuration: `"device:/dev/tpmrm0"`, `"swtpm:host=127.0.0.1,port=2321"`,
    ///     `"tabrmd"`, ...; nil for `/dev/tpmrm0`, else `/dev/tpm0` (not tctildr's own search, which also tries the
    ///     tabrmd TCTI, whose GLib code prints to standard error when no broker runs, then mssim and swtpm). See
    ///     ``defaultTCTI(environment:)``. `swtpm` configurations (`host=`, `port=`, `path=`) use Keystone's own
    ///     transport to swtpm, which keeps the deadline (tpm2-tss's swtpm TCTI ignores it).
    ///   - timeout: the most each TPM command may take, at least a millisecond (milliseconds are what the TPM
    ///     software stack counts). A TPM that has not answered by then fails the call with
    ///     ``TPMError/Kind/timedOut``, and the device is unusable from then on.
    /// - Throws: ``TPMError`` with ``TPMError/Kind/unavailable`` when no TPM answers there;
    ///   ``TPMError/Kind/other`` when `timeout` is under a millisecond.
    public init(tcti: String?, timeout: Duration = TPMDevice.defaultTimeout) throws(TPMError) {
        guard timeout >= .milliseconds(1) else {
            throw TPMError(kind: .other, message: "the TPM timeout must be at least 1 ms, not \(timeout)")
        }
        let (seconds, attoseconds) = timeout.components
        let milliseconds = Int32(min(Double(Int32.max), ((Double(seconds) + Double(attoseconds) / 1e18) * 1000).rounded(.up)))
        var error = ks_tpm_error()
        var tpm: OpaquePointer?
        let status: Int32 = if let tcti {
            ks_tpm_open_with_timeout(tcti, milliseconds, &tpm, &error)
        } else {
            ks_tpm_open_with_timeout(nil, milliseconds, &tpm, &error)
        }
        guard status == 0, let tpm else { throw TPMError(error) }
        handle = Mutex(Handle(pointer: tpm))
        self.tcti = tcti
        self.timeout = timeout
    }

    /// Opens the TPM that ``defaultTCTI(environment:)`` names for this process's environment.
    /// - Throws: ``TPMError`` with ``TPMError/Kind/unavailable`` when no TPM answers there.
    public convenience init() throws(TPMError) {
        try self.init(tcti: TPMDevice.defaultTCTI())
    }

    /// Flushes the keys the device keeps loaded and its primary key, and closes the connection.
    deinit {
        handle.withLock { ks_tpm_close($0.pointer) }
    }

    /// The TCTI configuration to use: `KEYSTONE_TPM_TCTI`, else `TPM2TOOLS_TCTI` or `TCTI` as tpm2-tools read them,
    /// else nil (the default: `/dev/tpmrm0`, the kernel's resource manager, else `/dev/tpm0`). Empty values count as unset.
    public static func defaultTCTI(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        for name in ["KEYSTONE_TPM_TCTI", "TPM2TOOLS_TCTI", "TCTI"] {
            if let value = environment[name], !value.isEmpty { return value }
        }
        return nil
    }

    /// Creates a P-256 key in the TPM, under the owner hierarchy's primary storage key.
    /// - Throws: ``TPMError``: ``TPMError/Kind/connectionLost`` when the TPM went away; ``TPMError/Kind/timedOut``
    ///   when it stopped answering; ``TPMError/Kind/other`` when the TPM refuses (for instance when the owner
    ///   hierarchy has an authorization value).
    /// - Important: The private key is generated in the TPM and never leaves it; see ``TPMKey``.
    public func createKey(_ usage: TPMKeyUsage) throws(TPMError) -> TPMKey {
        try createKey(usage, authorization: nil)
    }

    /// Creates a P-256 key in the TPM whose every use needs `authorization` (its PIN, see
    /// ``authorizationValue(pin:)``): the TPM itself refuses a wrong value and counts it toward its
    /// dictionary-attack lockout. Nil or empty: a key that needs none (and is exempt from the lockout, `noDA`).
    /// - Throws: ``TPMError``: as ``createKey(_:)``; ``TPMError/Kind/other`` when `authorization` has more than 32
    ///   bytes.
    /// - Important: The authorization value travels to the TPM in a password session (in the clear on the bus or
    ///   socket between this process and the TPM, as with tpm2-tools' `-p`). The TPM enforces it against someone who
    ///   holds the blob and opens the TPM directly; it does not hide the PIN from someone who can watch this
    ///   process or the TPM's bus.
    public func createKey(_ usage: TPMKeyUsage, authorization: Data?) throws(TPMError) -> TPMKey {
        try createKey(usage, authorization: authorization, binding: .password)
    }

    /// Creates a P-256 key whose every use needs `authorization`, recording in its blob what the value is
    /// (``TPMKeyBinding``): a ``TPMKeyBinding/releasedSecret`` key is `noDA`, a ``TPMKeyBinding/password`` or
    /// ``TPMKeyBinding/releasedSecretAndPassword`` key DA-protected. Nil or empty `authorization`: a key that needs
    /// none, whatever `binding` says.
    /// - Throws: as ``createKey(_:authorization:)``.
    public func createKey(_ usage: TPMKeyUsage, authorization: Data?, binding: TPMKeyBinding) throws(TPMError) -> TPMKey {
        var error = ks_tpm_error()
        var x963 = [UInt8](repeating: 0, count: 65)
        var blob: UnsafeMutablePointer<UInt8>?
        var length = 0
        let auth = [UInt8](authorization ?? Data())
        let bound = auth.isEmpty ? TPMKeyBinding.none : binding
        let status = handle.withLock { tpm in
            ks_tpm_create_key_bound(tpm.pointer, usage.rawValue, auth, auth.count, bound.rawValue, &blob, &length,
                                    &x963, &error)
        }
        guard status == 0, let blob else { throw TPMError(error) }
        let data = Data(bytes: blob, count: length)
        ks_tpm_free(blob)
        return try TPMKey(usage: usage, dataRepresentation: data, x963: Data(x963), binding: bound)
    }

    /// The TPM authorization value of a PIN or password: its UTF-8 bytes when they are at most 32, else their
    /// SHA-256 digest (a TPM takes at most its name algorithm's digest size, 32 bytes).
    ///
    /// Decision: the bytes themselves when they fit, so that tpm2-tools and tpm2-openssl use the key with the same PIN
    /// (`tpm2_sign -p PIN`, a TSS2 PEM key without emptyAuth); longer passwords are hashed (then `-p hex:…` of
    /// the digest).
    public static func authorizationValue(pin: String) -> Data {
        let bytes = Data(pin.utf8)
        return bytes.count <= 32 ? bytes : Data(SHA256.hash(data: bytes))
    }

    /// Loads the key once, to check that this TPM can use it (for an imported key).
    /// - Throws: ``TPMError``: ``TPMError/Kind/wrongTPM`` when this TPM cannot load it (another TPM made it, or the key's
    ///   parent is not this TPM's owner-hierarchy storage key), ``TPMError/Kind/malformedBlob``, connection kinds.
    public func checkKey(_ blob: Data) throws(TPMError) {
        var error = ks_tpm_error()
        let status = handle.withLock { tpm in
            blob.withUnsafeBytes { key in
                ks_tpm_check_key(tpm.pointer, key.baseAddress?.assumingMemoryBound(to: UInt8.self), key.count, &error)
            }
        }
        guard status == 0 else { throw TPMError(error) }
    }

    /// The TPM's dictionary-attack state.
    /// - Throws: ``TPMError``: connection kinds, ``TPMError/Kind/other``.
    public func lockoutState() throws(TPMError) -> TPMLockoutState {
        var error = ks_tpm_error()
        var state = ks_tpm_lockout()
        let status = handle.withLock { ks_tpm_lockout_state($0.pointer, &state, &error) }
        guard status == 0 else { throw TPMError(error) }
        return TPMLockoutState(state)
    }

    /// Signs a SHA-256 digest with a signing key (`TPM2_Sign`, ECDSA).
    /// - Parameters:
    ///   - digest: the SHA-256 digest of the message.
    ///   - blob: the key's ``TPMKey/dataRepresentation``.
    /// - Throws: ``TPMError``: ``TPMError/Kind/malformedBlob``, ``TPMError/Kind/wrongTPM``,
    ///   ``TPMError/Kind/wrongKeyUsage`` (a key-agreement key), ``TPMError/Kind/connectionLost``,
    ///   ``TPMError/Kind/timedOut``.
    public func signature(digest: SHA256Digest, with blob: Data) throws(TPMError) -> P256.Signing.ECDSASignature {
        try signature(digest: Data(digest), with: blob)
    }

    /// Signs a 32-byte SHA-256 digest with a signing key (`TPM2_Sign`, ECDSA).
    /// - Throws: ``TPMError``: ``TPMError/Kind/other`` when the digest is not 32 bytes; else as
    ///   ``signature(digest:with:)-(SHA256Digest,_)``.
    public func signature(digest: Data, with blob: Data) throws(TPMError) -> P256.Signing.ECDSASignature {
        try signature(digest: digest, with: blob, authorization: nil)
    }

    /// Signs a 32-byte SHA-256 digest with a key that needs its authorization value (its PIN), or none (nil).
    /// - Throws: ``TPMError``: ``TPMError/Kind/authFailed`` when the TPM refuses the value (counted toward its
    ///   lockout), ``TPMError/Kind/lockout`` when the TPM is locked out; else as ``signature(digest:with:)-(Data,_)``.
    public func signature(digest: Data, with blob: Data, authorization: Data?) throws(TPMError)
        -> P256.Signing.ECDSASignature {
        guard digest.count == 32 else {
            throw TPMError(kind: .other, message: "a SHA-256 digest has 32 bytes, not \(digest.count)")
        }
        var error = ks_tpm_error()
        var rs = [UInt8](repeating: 0, count: 64)
        let input = [UInt8](digest)
        let auth = [UInt8](authorization ?? Data())
        let status = handle.withLock { tpm in
            blob.withUnsafeBytes { key in
                ks_tpm_sign_digest_with_auth(tpm.pointer, key.baseAddress?.assumingMemoryBound(to: UInt8.self), key.count,
                                             auth, auth.count, input, &rs, &error)
            }
        }
        guard status == 0 else { throw TPMError(error) }
        do {
            return try P256.Signing.ECDSASignature(rawRepresentation: rs)
        } catch {
            throw TPMError(kind: .other, message: "the TPM's signature is not a valid P-256 ECDSA signature")
        }
    }

    /// ECDH between a key-agreement key and a peer's public key (`TPM2_ECDH_ZGen`).
    /// - Returns: the shared point's X coordinate, 32 bytes: the bytes of CryptoKit's `SharedSecret` for P-256
    ///   (derive keys from it with HKDF or X9.63, never use it as a key directly).
    /// - Throws: ``TPMError``: ``TPMError/Kind/malformedBlob``, ``TPMError/Kind/wrongTPM``,
    ///   ``TPMError/Kind/wrongKeyUsage`` (a signing key), ``TPMError/Kind/connectionLost``,
    ///   ``TPMError/Kind/timedOut``.
    public func sharedSecret(with peer: P256.KeyAgreement.PublicKey, using blob: Data) throws(TPMError) -> Data {
        try sharedSecret(withX963: peer.x963Representation, using: blob)
    }

    /// ECDH with a peer's public key given as ANSI X9.63 bytes (0x04 || X || Y), which the TPM validates.
    /// - Throws: ``TPMError``: ``TPMError/Kind/invalidPeerKey`` when the bytes are not 65 bytes of an uncompressed
    ///   point on P-256; else as ``sharedSecret(with:using:)``.
    public func sharedSecret(withX963 peer: Data, using blob: Data) throws(TPMError) -> Data {
        try sharedSecret(withX963: peer, using: blob, authorization: nil)
    }

    /// ECDH with a key that needs its authorization value (its PIN), or none (nil).
    /// - Throws: ``TPMError``: ``TPMError/Kind/authFailed``, ``TPMError/Kind/lockout``; else as
    ///   ``sharedSecret(withX963:using:)``.
    public func sharedSecret(withX963 peer: Data, using blob: Data, authorization: Data?) throws(TPMError) -> Data {
        guard peer.count == 65 else {
            throw TPMError(kind: .invalidPeerKey,
                           message: "the peer's public key has \(peer.count) bytes, not 65 (0x04 || X || Y)")
        }
        var error = ks_tpm_error()
        var x = [UInt8](repeating: 0, count: 32)
        let point = [UInt8](peer)
        let auth = [UInt8](authorization ?? Data())
        let status = handle.withLock { tpm in
            blob.withUnsafeBytes { key in
                ks_tpm_ecdh_with_auth(tpm.pointer, key.baseAddress?.assumingMemoryBound(to: UInt8.self), key.count, auth,
                                      auth.count, point, &x, &error)
            }
        }
        guard status == 0 else { throw TPMError(error) }
        return Data(x)
    }

    /// A key's usage and public key, read from its data representation (the TPM is not asked).
    /// - Throws: ``TPMError`` with ``TPMError/Kind/malformedBlob``.
    public func publicKey(of blob: Data) throws(TPMError) -> TPMKey {
        try TPMKey(dataRepresentation: blob)
    }

    /// The TPM's manufacturer, vendor string, firmware version and specification level.
    /// - Throws: ``TPMError``: ``TPMError/Kind/connectionLost``, ``TPMError/Kind/timedOut``, ``TPMError/Kind/other``.
    public func info() throws(TPMError) -> TPMInfo {
        var error = ks_tpm_error()
        var properties = ks_tpm_properties()
        let status = handle.withLock { ks_tpm_info($0.pointer, &properties, &error) }
        guard status == 0 else { throw TPMError(error) }
        func text<T>(_ tuple: T) -> String {
            withUnsafeBytes(of: tuple) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
        }
        return TPMInfo(manufacturer: text(properties.manufacturer), vendor: text(properties.vendor),
                       firmwareVersion1: properties.firmware_version_1, firmwareVersion2: properties.firmware_version_2,
                       specificationRevision: properties.spec_revision, specificationYear: properties.spec_year)
    }
}
#endif
