import Crypto
import Foundation
import KeychainEngine
import KeychainSealing

// Unlocking, locking and changing the password.
//
// Key derivation (scrypt, about 50 ms to a second; a TPM unseal, milliseconds to seconds when the TPM is busy) runs
// with no lock held: the header is read under the mutex, the keys are derived from that copy, and the mutex is taken
// again to install them, only if the header still holds the same protectors and key check (another process may have
// changed the password or replaced the file meanwhile). Keys are never installed for a header they were not derived
// from: a changed header means deriving again, from the new one.

extension KeychainFile {
    /// Where an unlock's keys are kept for this user's later processes (``KeychainFile/unlockSharing``).
    public enum SharedUnlock: Sendable, Equatable {
        /// The Linux kernel user keyring.
        case kernelKeyring
        /// This user's unlock agent (`keystone agent`), listening at `socket`: the kernel keyring is refused here.
        case agent(socket: String)
        /// Not shared, by design: keys a Secure Enclave unsealed stay in the process that unsealed them.
        case notShared
        /// Nowhere: later processes will find the keychain locked, for `reason` (which never holds a secret).
        case thisProcessOnly(reason: String)

        /// Whether later processes of this user will find the keychain unlocked.
        public var persists: Bool {
            switch self {
            case .kernelKeyring, .agent: return true
            case .notShared, .thisProcessOnly: return false
            }
        }

        init(_ persistence: UnlockPersistence) {
            switch persistence {
            case .kernelKeyring: self = .kernelKeyring
            case .agent(let socket): self = .agent(socket: socket)
            case .thisProcessOnly(let reason): self = .thisProcessOnly(reason: reason)
            }
        }
    }

    /// Hooks a test sets (under the mutex) to observe or hold an operation at a point where it holds no lock.
    /// Test-only in spirit: production code never sets them, and they are not public.
    struct TestHooks {
        /// Called with no lock held as an unlock or password change starts deriving keys (scrypt, the TPM unseal).
        var beforeKeyDerivation: (@Sendable () -> Void)?
        /// Called with no lock held before each wait of an operation that met another connection's lock.
        var busyWait: (@Sendable (BusyWait) -> Void)?
        /// Called with no lock held by a writer that leads a flush of the log, just before it flushes (group commit).
        var beforeLogFlush: (@Sendable () -> Void)?
    }

    /// Where keys are derived from: a copy of the header and the file it was read from.
    private struct KeySource {
        let header: Header
        let device: UInt64
        let inode: UInt64
    }

    /// Derives keys from the header as it is now with no lock held (`derive`: scrypt, the TPM), then runs `commit`
    /// under the mutex when the file and its header's protectors and key check are still those the keys were derived
    /// from. When they changed meanwhile, derives again (three times at most).
    ///
    /// - Throws: what `derive` and `commit` throw; `EngineError` with `errSecNotAvailable` when the header kept
    ///   changing.
    private func deriveOutsideMutex<Derived>(_ what: String, derive: (Header) throws -> Derived,
                                             commit: (Derived) throws -> Void) throws {
        for _ in 0..<3 {
            let (source, hook) = try withMutexWaitingOutside {
                try refresh()
                return (KeySource(header: header, device: device, inode: inode), testHooks.beforeKeyDerivation)
            }
            hook?()
            let derived = try derive(source.header)
            let committed = try withMutexWaitingOutside { () throws -> Bool in
                try refresh()
                guard device == source.device, inode == source.inode, header.holdsSameKeys(as: source.header) else { return false }
                try commit(derived)
                return true
            }
            if committed { return }
            KeystoneLog.logger.notice("the keychain's header changed while its keys were derived; deriving again", metadata: ["path": "\(path)"])
        }
        throw EngineError(Status.notAvailable, "the keychain \(path) kept changing (its password, protectors or file) while \(what); try again")
    }

    /// Unlocks with `password` (for a file sealed to a Secure Enclave: its recovery password, which works on any
    /// machine; the keys then stay in this process only).
    ///
    /// A version 1 file is upgraded to the current format on its first full unlock (every row re-sealed in
    /// one transaction), and outdated key-derivation parameters are raised. The key derivation (scrypt) runs with no
    /// lock held: other threads keep using this instance meanwhile.
    ///
    /// - Throws: `EngineError` with `errSecAuthFailed` when the password is wrong (nothing is written);
    ///   `errSecParam` when the file is sealed to a Secure Enclave and has no password (use ``unlock()``);
    ///   `errSecInvalidKeychain` when the header is damaged; `errSecQuotaExceeded` when the keys could not be
    ///   cached for other processes: the keychain is then unlocked in this process only; `errSecNotAvailable` when
    ///   the file stayed busy longer than ``busyTimeout``, or its password kept changing meanwhile.
    ///
    /// Where the keys were kept for later processes (the kernel keyring, else the unlock agent when one answers,
    /// else nowhere: later processes then find the keychain locked, which is not an error here) is in
    /// ``unlockSharing`` afterwards.
    public func unlock(password: String) throws {
        try engineErrors {
            try deriveOutsideMutex("unlocking it") { header -> (SymmetricKey, PasswordProtector?) in
                let master = try Self.unwrapMaster(header, password)
                // Outdated parameters: the stronger wrapping is made here too, with no lock held.
                let stronger = header.password?.kdf.isOutdated == true ? try? PasswordProtector(sealing: master, password: password) : nil
                return (master, stronger)
            } commit: { derived in
                let (master, stronger) = derived
                if header.version < FileFormat.version {
                    try upgrade(master: master)
                }
                if let stronger, let current = header.password {
                    // Only over the wrapping the keys came from: never over a password another process just set.
                    try? updateHeader { if $0.password == current { $0.password = stronger } }
                }
                try install(KeySet(master: master), at: clock())
            }
        }
    }

    /// Unlocks without a password: a file sealed to a Secure Enclave with the token it was opened with (the TPM
    /// computes the key that opens the master key); a file with an empty password with that password.
    ///
    /// Blocks while the token works, with no lock held: other threads keep using this instance. Writes nothing.
    /// - Throws: `EngineError` with `errSecNotAvailable` when the TPM cannot be reached (or no token was given),
    ///   `errSecUnimplemented` when this machine has no TPM, `errSecDecode` when the file was sealed to another TPM
    ///   (or its sealed header fields were edited): the file is never modified; `errSecAuthFailed` when the file
    ///   is protected by a password only (use ``unlock(password:)``).
    public func unlock() throws {
        try engineErrors {
            let (sealed, empty) = try withMutexWaitingOutside {
                try refresh()
                return (header.sealed != nil, header.emptyPassword)
            }
            if sealed {
                try deriveOutsideMutex("unsealing it") { header in
                    try unsealMaster(header)
                } commit: { master in
                    try install(KeySet(master: master), at: clock(), share: false)
                }
            } else if empty {
                try unlock(password: "")
            } else {
                throw EngineError(Status.authFailed, "the keychain is protected by a password: unlock it with its password")
            }
        }
    }

    /// Locks: discards every key here, removes the unlock cache's entries (the kernel keyring's, the unlock agent's)
    /// and tells other open instances.
    ///
    /// The keys are gone when this returns. Telling other instances writes the file: when another process holds
    /// its lock, that write waits (with no lock of this instance held) up to ``busyTimeout``, and is given up with a
    /// logged warning after it; other processes then notice the lock when their cached keys expire.
    public func lock() {
        withMutex {
            keys = nil
            unlockedAt = nil
            sharing = nil
            caches.clearRows()
            keyring?.remove()
        }
        do {
            try withMutexWaitingOutside {
                try updateHeader { $0.epoch += 1 }
                epoch = max(epoch, header.epoch)
            }
        } catch {
            KeystoneLog.logger.warning("the keychain is locked here, but other instances could not be told (the file stayed busy)",
                                       metadata: ["path": "\(path)"])
        }
    }

    /// Locks as a device does after its first unlock: `afterFirstUnlock` and `always` items stay available.
    public func lockAfterFirstUnlock() {
        withMutex {
            guard let current = keys else { return }
            keys = current.afterFirstUnlock
            caches.clearRows()
            keyring?.removeFull()
        }
    }

    /// Changes the password by re-wrapping the master key; no item is re-encrypted. For a file sealed to a Secure
    /// Enclave with a recovery password, changes the recovery password (the TPM's copy is untouched). Both key
    /// derivations (scrypt) run with no lock held.
    ///
    /// Decision: a sealed file without a password keeps having none (`errSecParam`): adding a password would add a
    /// way to open it off this machine, which its creator chose not to have. A recovery password is never empty.
    /// - Throws: `EngineError` with `errSecAuthFailed` when `old` is wrong (or another process changed the password
    ///   meanwhile: nothing is changed); `errSecParam` for a sealed file without a password, or an empty new
    ///   recovery password; `errSecNotAvailable` when the file stayed busy longer than ``busyTimeout``.
    public func changePassword(old: String, new: String) throws {
        try engineErrors {
            try deriveOutsideMutex("changing its password") { header -> (SymmetricKey, PasswordProtector, PasswordProtector) in
                if header.sealed != nil && header.password == nil {
                    throw EngineError.param("the keychain is sealed to this machine's TPM and has no password to change: a password would let it be opened on other machines. To have a recovery password, create a keychain with one (create-keychain --tpm -p) and move the items")
                }
                if header.sealed != nil && new.isEmpty {
                    throw EngineError.param("a recovery password cannot be empty: it would let the keychain be opened on any machine without one")
                }
                let master = try Self.unwrapMaster(header, old)
                guard let previous = header.password else { throw EngineError(Status.authFailed, "the keychain has no password") }
                return (master, previous, try PasswordProtector(sealing: master, password: new))
            } commit: { derived in
                let (master, previous, replacement) = derived
                var replaced = false
                // Checked again inside the write transaction: another process may have changed it since `refresh`.
                try updateHeader {
                    if $0.password == previous { $0.password = replacement; replaced = true }
                }
                guard replaced else {
                    throw EngineError(Status.authFailed, "another process changed the keychain's password meanwhile: nothing was changed")
                }
                try install(KeySet(master: master), at: clock())
            }
        }
    }

    /// The master key `password` unwraps from this instance's header (tests use it to forge rows).
    func unwrapMaster(_ password: String) throws -> SymmetricKey {
        try Self.unwrapMaster(withMutex { header }, password)
    }

    /// The master key `password` unwraps from `header`: scrypt. Call it with no lock held.
    static func unwrapMaster(_ header: Header, _ password: String) throws -> SymmetricKey {
        guard let protector = header.password else {
            throw EngineError.param("the keychain is sealed to this machine's TPM and has no password: it unlocks without one (unlock-keychain without -p)")
        }
        return try protector.unwrap(password)
    }

    /// The master key of `header`, unsealed by the token this instance was opened with. Call it with no lock held:
    /// the token may block (a TPM command).
    ///
    /// - Throws: the errors of ``SealedProtector/unseal(with:fileID:)``; `errSecDecode` when the unsealed keys do
    ///   not pass the header's key check.
    func unsealMaster(_ header: Header) throws -> SymmetricKey {
        guard let sealed = header.sealed, let fileID = header.fileID else {
            throw EngineError(Status.authFailed, "the keychain is not sealed to a TPM")
        }
        let master = try sealed.unseal(with: secureEnclave, fileID: fileID)
        guard KeySet(master: master).check(fileID: fileID) == header.keyCheck else {
            throw SealedProtector.sealedElsewhere("the unsealed key is not this keychain's")
        }
        return master
    }
}

extension Header {
    /// Whether keys derived from `other` are this header's keys: the same protectors, file id and key check.
    func holdsSameKeys(as other: Header) -> Bool {
        password == other.password && sealed == other.sealed && fileID == other.fileID && keyCheck == other.keyCheck
    }
}
