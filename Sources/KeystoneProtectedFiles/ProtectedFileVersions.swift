import Crypto
import Foundation
import Keystone

// Rollback protection of sealed protected files: a monotonic counter per file identity in the keychain.
//
// With `ProtectedFiles(rollbackProtection: true)`, each write of a file reads its counter c (absent: 0), writes the
// file with version c + 1 in its (authenticated) header, renames it into place, then records c + 1 in the keychain.
// A read refuses (errSecDecode) a file whose version is below the counter: an older copy put back. A file whose
// version is above the counter (a writer that died between its rename and recording the counter) is accepted, and
// once all of it verified the counter is advanced to it, so the older file it replaced cannot come back either.
// Removing a file advances the counter too, so a removed file put back is refused.
//
// The counter: a generic password under the protected files' service, account "file-version:" + the first 32 hex
// digits of SHA-256(the identity's bound bytes), its value the version as 8 bytes big-endian, label naming the
// identity (not a secret). afterFirstUnlockThisDeviceOnly: usable whenever a file of any class can be written (a
// completeUnlessOpen file is written while locked after the first unlock), and never in a backup, like the class keys.
//
// Decision (what it cannot stop, documented in ProtectingFilesAtRest.md): rolling back the keychain together with the file
// (a restored backup of both, a copied keychain file), deleting the file (a read then fails with errSecItemNotFound),
// a reader configured without rollback protection, and a file written by two processes at once (both may record
// the same version; the last rename wins, as without counters). Recording the counter after the rename can fail
// (the keychain locked meanwhile): the write is not reported as failed then (the new file is in place), and the
// next read of the file advances the counter.

/// The rollback counters of the files under one service.
struct ProtectedFileVersions {
    let keychain: Keychain
    let service: String

    func item(_ identity: SealedFileIdentity) throws -> GenericPassword {
        let digest = SHA256.hash(data: identity.bound).map { String(format: "%02x", $0) }.joined()
        return try GenericPassword(service: service, account: "file-version:" + digest.prefix(32))
    }

    /// The counter of `identity`; 0 when none was recorded.
    ///
    /// - Throws: `KeychainError` from the keychain (`errSecInteractionNotAllowed` when locked), or
    ///   `KeychainError.decodingFailed` when the item does not hold a counter (it is left unchanged).
    func current(_ identity: SealedFileIdentity) throws -> UInt64 {
        let item = try item(identity)
        guard let data = try keychain.data(for: item) else { return 0 }
        guard data.count == 8 else {
            throw KeychainError(code: .decodingFailed, reason: "\(item) does not hold a protected file's version (8 bytes); it was left unchanged")
        }
        return data.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// Records `version` for `identity` unless the counter is already there or beyond (never lowers it).
    ///
    /// - Throws: `KeychainError` from the keychain.
    func advance(_ identity: SealedFileIdentity, to version: UInt64) throws {
        guard try current(identity) < version else { return }
        var bytes = Data()
        withUnsafeBytes(of: version.bigEndian) { bytes.append(contentsOf: $0) }
        let options = SaveOptions(accessibility: .afterFirstUnlockThisDeviceOnly,
                                  label: "Keystone protected file version (\(identity.description))")
        try keychain.save(bytes, for: item(identity), options: options)
    }
}
