import Crypto
import Foundation

/// Whether ``SigningKeyFactory`` may fall back to a software key.
public enum SigningKeyPolicy: String, Sendable, Hashable, CaseIterable {
    /// A hardware key where the keychain's device has an available Secure Enclave, else a software key, with the
    /// reason in ``SigningKeyResult/fallbackReason``. The default.
    case preferHardware
    /// A hardware key or an error: never a software key (and a stored software key is refused, not used).
    case requireHardware
}

/// Why ``SigningKeyFactory`` returned a software key: log it, and act on it where it says so.
public enum SigningKeyFallbackReason: Sendable, Hashable, CustomStringConvertible {
    /// The keychain's device has no Secure Enclave: a simulator, a Mac without one, a Linux program that did not
    /// install the TPM backend (`KeychainServicesDefaults.bootstrap(.tpm)`) or a process with `KEYSTONE_SECURE_ENCLAVE=none` (``KeychainStore/secureEnclave`` is nil).
    case noSecureEnclave
    /// There is a Secure Enclave, but it cannot be used now (`errSecUnimplemented`: no TPM on this machine;
    /// `errSecNotAvailable`: a TPM that does not answer or that this user may not open).
    case secureEnclaveUnavailable(KeychainError)
    /// The Secure Enclave was available but failed to make the key.
    case hardwareKeyCreationFailed(KeychainError)
    /// A software key was stored under the tag before (when no Secure Enclave could be used) and was kept, although
    /// one can be used now: replacing it would change the public key. `SigningKeyFactory.replaceKey()` moves to
    /// a hardware key when the app can re-register the new public key.
    case softwareKeyStored

    /// What happened and what to do; names statuses, never key bytes.
    public var description: String {
        switch self {
        case .noSecureEnclave:
            return "No Secure Enclave on this device or build (a simulator; on Linux a program that did not install the TPM backend (KeychainServicesDefaults.bootstrap(.tpm)), or KEYSTONE_SECURE_ENCLAVE=none): the signing key is a software key kept in the keychain."
        case .secureEnclaveUnavailable(let error):
            return "The Secure Enclave cannot be used now (\(error.name), \(error.status)\(error.reason.isEmpty ? "" : ": \(error.reason)")): the signing key is a software key kept in the keychain. On Linux run `keystone doctor` (the TPM device /dev/tpmrm0 needs the tss group, or set KEYSTONE_TPM_TCTI); once it works, replaceKey() moves to a hardware key."
        case .hardwareKeyCreationFailed(let error):
            return "The Secure Enclave failed to make the key (\(error.name), \(error.status)\(error.reason.isEmpty ? "" : ": \(error.reason)")): the signing key is a software key kept in the keychain. Once the Secure Enclave works, replaceKey() moves to a hardware key."
        case .softwareKeyStored:
            return "A software key stored before a Secure Enclave could be used was kept, so that the public key does not change. Call replaceKey() to move to a hardware key (its public key is new: register it again)."
        }
    }

    /// The error that ``SigningKeyPolicy/requireHardware`` throws instead of falling back.
    var requiredHardwareError: KeychainError {
        switch self {
        case .noSecureEnclave:
            return KeychainError(status: Status.unimplemented, reason: "a hardware signing key is required, but this device (or build) has no Secure Enclave")
        case .secureEnclaveUnavailable(let error), .hardwareKeyCreationFailed(let error):
            return error
        case .softwareKeyStored:
            return KeychainError(code: .keyTypeMismatch, reason: "a hardware signing key is required, but a software key is stored under the tag; it was left intact (replaceKey() makes a hardware key)")
        }
    }
}

/// The signing key ``SigningKeyFactory`` found or made, and why it is not a hardware key when it is not.
public struct SigningKeyResult: Sendable, CustomStringConvertible {
    /// The key.
    public let key: any SigningKeyProvider
    /// Nil for a hardware key; for a software key, why (log it: see ``SigningKeyFallbackReason``).
    public let fallbackReason: SigningKeyFallbackReason?
    /// Whether the key was made by this call (false: it was loaded from the keychain).
    public let wasCreated: Bool

    /// Bundles a key with its origin (for test doubles of code that takes a result).
    public init(key: any SigningKeyProvider, fallbackReason: SigningKeyFallbackReason?, wasCreated: Bool) {
        self.key = key
        self.fallbackReason = fallbackReason
        self.wasCreated = wasCreated
    }

    /// `hardware key (created)`, `software key (loaded; <reason>)`: never key bytes.
    public var description: String {
        let origin = wasCreated ? "created" : "loaded"
        return "\(key.kind) key (\(origin)\(fallbackReason.map { "; \($0)" } ?? "")): \(key)"
    }
}

/// Loads the app's P-256 signing key from the keychain, or makes one: in the keychain's Secure Enclave (a TPM 2.0
/// on Linux) where there is one, else in software, with the reason.
///
/// ```swift
/// let factory = try SigningKeyFactory(keychain: Keychain(), tag: "com.example.device-key")
/// let result = try factory.signingKey()
/// if let reason = result.fallbackReason { logger.notice("software signing key: \(reason)") }
/// let signature = try result.key.signature(for: payload)
/// ```
///
/// The rules:
/// - **The same key every launch.** A hardware key's ``SecureEnclaveSigningKey/dataRepresentation`` (the wrapped
///   blob, not the private key) is kept in the keychain as a generic password: service = the tag, account
///   `"secure-enclave-p256-signing"`, `kSecAttrGeneric` = `"keystone.secureenclave.p256.signing"`. A software key is
///   kept as the key item ``softwareItem`` (`kSecClassKey`, application tag = the tag: see `CryptoKeyItem`). A
///   stored key is always returned before anything is made; a stored hardware key before a stored software key.
/// - **Where the hardware is.** A new key is a hardware key when ``Keychain/store``'s
///   ``KeychainStore/secureEnclave`` is there and available, else (``SigningKeyPolicy/preferHardware``) a software
///   key with a ``SigningKeyFallbackReason``.
/// - **A failed read never replaces a key.** A locked keychain (`errSecInteractionNotAllowed`), a hardware key this
///   device's token refuses (`errSecDecode`: the keychain was restored onto another device, or the TPM was cleared;
///   a loaded hardware key is proven with one signature), a Secure Enclave that went away (`errSecNotAvailable`): the
///   error is thrown and the item is left intact. Only `replaceKey()` (and
///   ``deleteKey()``) remove a key, when the app decides to.
/// - **A stored software key is kept when hardware becomes available** (decision: a new key would change the
///   public key that servers know): the result says ``SigningKeyFallbackReason/softwareKeyStored``;
///   `replaceKey()` moves to hardware.
/// - **This device only.** Both items are stored with the keychain's ``ItemOptions`` except that the accessibility
///   is made its `ThisDeviceOnly` form and synchronization is off: a hardware key is useless on another device, and
///   a signing key identifies this device. The options' access control (`accessControlFlags`) applies to both
///   items: reading the key then needs the user.
/// - **Two processes at once** get the same key: a key is added, never saved over an existing item; the one that
///   loses the race discards its new key and returns the stored one.
///
/// - Important: Calls block (keychain I/O, the TPM): call the `async` forms from the main actor. A software key's
///   private key is readable by whoever can read its item; prefer devices with a Secure Enclave for keys that must
///   not be copied.
public struct SigningKeyFactory: Sendable {
    /// The keychain the key lives in (and whose store's Secure Enclave makes hardware keys).
    public let keychain: Keychain
    /// The name of the key: the software item's application tag and the hardware item's service.
    public let tag: String
    /// Whether a software key may be used.
    public let policy: SigningKeyPolicy
    /// The key item a software key is kept in.
    public let softwareItem: CryptoKeyItem<P256.Signing.PrivateKey>
    /// The generic password a hardware key's data representation is kept in.
    let hardwareItem: CryptoKeyItem<SecureEnclaveKeyBlob>
    /// ``keychain`` with the items' options (this device only, not synchronizable).
    let itemKeychain: Keychain

    /// The account of the hardware key's generic password.
    static let hardwareAccount = "secure-enclave-p256-signing"

    /// A factory for the key named `tag` in `keychain`.
    ///
    /// - Parameters:
    ///   - keychain: where the key is kept; its store's ``KeychainStore/secureEnclave`` makes hardware keys.
    ///   - tag: the key's name, usually reverse-DNS (`"com.example.device-key"`); not empty.
    ///   - accessGroup: an access group the app is entitled to, or nil for the keychain's.
    ///   - policy: whether a software key may be used. Default ``SigningKeyPolicy/preferHardware``.
    /// - Throws: ``KeychainError/invalidItem`` when `tag` or `accessGroup` is empty.
    public init(keychain: Keychain = Keychain(), tag: String, accessGroup: String? = nil,
                policy: SigningKeyPolicy = .preferHardware) throws(KeychainError) {
        self.keychain = keychain
        self.tag = tag
        self.policy = policy
        softwareItem = try CryptoKeyItem(tag: tag, accessGroup: accessGroup)
        hardwareItem = try CryptoKeyItem(service: tag, account: Self.hardwareAccount, accessGroup: accessGroup)
        var itemKeychain = keychain
        itemKeychain.options.accessibility = Self.thisDeviceOnly(keychain.options.accessibility)
        itemKeychain.options.synchronizable = false
        self.itemKeychain = itemKeychain
    }

    /// The stored key, or a new one when none is stored.
    ///
    /// - Returns: the key, whether it was made now, and for a software key why.
    /// - Throws: ``KeychainError``, and nothing is made or replaced:
    ///   - `errSecInteractionNotAllowed` (-25308): the keychain is locked (transient; try again after the unlock);
    ///   - `errSecDecode` (-26275): the stored hardware key is not this device's Secure Enclave's (the keychain was
    ///     restored onto another device, the TPM was cleared): it will never work here; `replaceKey()` makes a new
    ///     one. (A stored hardware key is proven with one signature when loaded: see
    ///     ``SecureEnclaveSigningKey/checkUsable()``);
    ///   - `errSecNotAvailable` (-25291): a hardware key is stored but the Secure Enclave (the TPM) cannot be reached
    ///     now: transient, try again later;
    ///   - `errSecUnimplemented` (-4): a hardware key is stored but this device (or build) has no Secure Enclave;
    ///   - `errSecNotAvailable` (-25291) also with ``SigningKeyPolicy/requireHardware`` when no key is stored and the
    ///     Secure Enclave cannot be used now;
    ///   - ``KeychainError/keyTypeMismatch``: the items hold something else (a password under the tag), or a
    ///     software key is stored and ``SigningKeyPolicy/requireHardware`` is set;
    ///   - `errSecUserCanceled`, `errSecAuthFailed`: the items' access control was not satisfied.
    public func signingKey() throws(KeychainError) -> SigningKeyResult {
        if let stored = try storedKey() { return stored }
        return try makeKey()
    }

    /// Deletes the stored key (hardware and software items) and makes a new one, hardware where possible.
    ///
    /// The public key changes: whatever trusted the old key must be given the new one. If making or storing the
    /// new key fails after the delete, no key is stored and the next `signingKey()` makes one.
    ///
    /// - Throws: ``KeychainError`` as `signingKey()`; `errSecInteractionNotAllowed` when locked (nothing deleted).
    public func replaceKey() throws(KeychainError) -> SigningKeyResult {
        _ = try deleteKey()
        return try makeKey()
    }

    /// Deletes the stored key: the hardware item and the software item. A hardware key's blob is all there is of
    /// it outside the hardware: once deleted, the key is gone.
    ///
    /// - Returns: whether a key was stored.
    /// - Throws: ``KeychainError`` with `errSecInteractionNotAllowed` (locked; nothing deleted),
    ///   `errSecMissingEntitlement`.
    @discardableResult
    public func deleteKey() throws(KeychainError) -> Bool {
        let hardware = try call { try itemKeychain.delete(hardwareItem) }
        let software = try call { try itemKeychain.delete(softwareItem) }
        return hardware || software
    }

    // MARK: - Loading

    /// The stored key: the hardware item first, then the software item; nil when neither exists.
    func storedKey() throws(KeychainError) -> SigningKeyResult? {
        if let blob = try call({ try itemKeychain.key(for: hardwareItem) }) {
            guard let token = keychain.store.secureEnclave else {
                throw KeychainError(status: Status.unimplemented, reason: "\(hardwareItem) holds a hardware signing key, but this keychain's device has no Secure Enclave now; the item was left intact (replaceKey() makes a new key)")
            }
            do {
                let key = try SecureEnclaveSigningKey(dataRepresentation: blob.keychainRepresentation, token: token)
                // Decision: one signature proves the key works here. Apple's Secure Enclave and a TPM read another
                // device's key and refuse it only at its first use; checking now makes a restored or cleared key the
                // same typed error on every platform, when the app asks for its key rather than mid-way.
                try key.checkUsable()
                return SigningKeyResult(key: key, fallbackReason: nil, wasCreated: false)
            } catch {
                throw Self.annotated(error, "the hardware signing key stored in \(hardwareItem) cannot be used with \(token.name); the item was left intact (replaceKey() makes a new key)")
            }
        }
        if let privateKey = try call({ try itemKeychain.key(for: softwareItem) }) {
            if policy == .requireHardware { throw SigningKeyFallbackReason.softwareKeyStored.requiredHardwareError }
            let reason: SigningKeyFallbackReason
            switch hardware() {
            case .available: reason = .softwareKeyStored
            case .unavailable(let why): reason = why
            }
            return SigningKeyResult(key: SoftwareSigningKey(privateKey), fallbackReason: reason, wasCreated: false)
        }
        return nil
    }

    // MARK: - Making

    private enum Hardware {
        case available(any SecureEnclaveToken)
        case unavailable(SigningKeyFallbackReason)
    }

    /// The keychain's Secure Enclave, when it can make keys now.
    private func hardware() -> Hardware {
        guard let token = keychain.store.secureEnclave else { return .unavailable(.noSecureEnclave) }
        if let error = token.availability() { return .unavailable(.secureEnclaveUnavailable(KeychainError(error))) }
        return .available(token)
    }

    /// Makes and stores a new key (hardware where possible); when another caller stored one first, returns that.
    private func makeKey() throws(KeychainError) -> SigningKeyResult {
        let fallback: SigningKeyFallbackReason
        switch hardware() {
        case .available(let token):
            let key: SecureEnclaveSigningKey
            do {
                key = try SecureEnclaveSigningKey(token: token)
            } catch {
                fallback = .hardwareKeyCreationFailed(error)
                break
            }
            if try itemKeychain.addKey(SecureEnclaveKeyBlob(key.dataRepresentation), for: hardwareItem) {
                return SigningKeyResult(key: key, fallbackReason: nil, wasCreated: true)
            }
            // Another caller stored a key meanwhile: this one is dropped (its blob was all there was of it).
            return try storedAfterRace()
        case .unavailable(let why):
            fallback = why
        }
        if policy == .requireHardware { throw fallback.requiredHardwareError }
        let privateKey = P256.Signing.PrivateKey()
        if try itemKeychain.addKey(privateKey, for: softwareItem) {
            return SigningKeyResult(key: SoftwareSigningKey(privateKey), fallbackReason: fallback, wasCreated: true)
        }
        return try storedAfterRace()
    }

    /// The key another caller stored while this one made its own.
    private func storedAfterRace() throws(KeychainError) -> SigningKeyResult {
        guard let stored = try storedKey() else {
            throw KeychainError(status: Status.duplicateItem, reason: "another caller stored and removed a key under \"\(tag)\" while this one was made; try again")
        }
        return stored
    }

    // MARK: - Helpers

    /// The `ThisDeviceOnly` form of an accessibility.
    static func thisDeviceOnly(_ accessibility: Accessibility) -> Accessibility {
        switch accessibility {
        case .whenUnlocked: .whenUnlockedThisDeviceOnly
        case .afterFirstUnlock: .afterFirstUnlockThisDeviceOnly
        case .always: .alwaysThisDeviceOnly
        case .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly, .whenPasscodeSetThisDeviceOnly:
            accessibility
        }
    }

    /// `error` with `context` before its reason; the code (and `OSStatus`) kept.
    static func annotated(_ error: KeychainError, _ context: String) -> KeychainError {
        KeychainError(code: error.code, reason: error.reason.isEmpty ? context : "\(context): \(error.reason)")
    }

    private func call<T>(_ body: () throws -> T) throws(KeychainError) -> T {
        do {
            return try body()
        } catch {
            throw KeychainError(converting: error)
        }
    }
}

extension SigningKeyFactory {
    /// `signingKey()` off the caller's actor.
    ///
    /// - Throws: as `signingKey()`, or `CancellationError` before it starts.
    public func signingKey() async throws -> SigningKeyResult {
        try await offActor { try self.signingKey() }
    }

    /// `replaceKey()` off the caller's actor.
    ///
    /// - Throws: as `replaceKey()`, or `CancellationError` before it starts.
    public func replaceKey() async throws -> SigningKeyResult {
        try await offActor { try self.replaceKey() }
    }
}

extension Keychain {
    /// The signing key named `tag`: loaded, or made in the Secure Enclave where there is one, else in software.
    /// Shorthand for ``SigningKeyFactory``'s `SigningKeyFactory.signingKey()`; see it for the rules.
    ///
    /// - Throws: ``KeychainError/invalidItem`` for an empty tag, else as `SigningKeyFactory.signingKey()`.
    public func signingKey(tag: String, accessGroup: String? = nil, policy: SigningKeyPolicy = .preferHardware) throws(KeychainError) -> SigningKeyResult {
        try SigningKeyFactory(keychain: self, tag: tag, accessGroup: accessGroup, policy: policy).signingKey()
    }

    /// Adds `key` as `item` with the keychain's options, never over an existing item.
    ///
    /// - Returns: false when the item exists (`errSecDuplicateItem`): nothing was changed.
    func addKey<StoredKey>(_ key: StoredKey, for item: CryptoKeyItem<StoredKey>) throws(KeychainError) -> Bool {
        var attributes = ownedQuery(item)
        attributes[Key.valueData] = .data(key.keychainRepresentation)
        for (name, value) in Self.storedAttributes(options) { attributes[name] = value }
        do {
            _ = try store.add(attributes)
            return true
        } catch let error where KeychainError.duplicateItem ~= error {
            return false
        } catch {
            throw KeychainError(converting: error)
        }
    }
}

/// A hardware key's data representation as the data of a generic-password item (with its marker).
struct SecureEnclaveKeyBlob: KeychainStorableGenericPasswordKey {
    static var keychainMarker: String { "keystone.secureenclave.p256.signing" }
    let keychainRepresentation: Data

    init(_ data: Data) { keychainRepresentation = data }

    init(keychainRepresentation data: Data) throws {
        guard !data.isEmpty else { throw InvalidStoredKey() }
        keychainRepresentation = data
    }
}
