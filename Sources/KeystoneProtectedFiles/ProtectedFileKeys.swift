import Crypto
import Foundation
import Keystone

// The class keys of sealed protected files, in the keychain. Created on first use, add-only: two writers creating
// a class key at once never overwrite each other (the loser reads the winner's key), because overwriting a class
// key would make every file sealed under it unreadable.
//
// - complete: a 256-bit SymmetricKey, generic password (service, account "complete"), whenUnlockedThisDeviceOnly.
// - completeUntilFirstUserAuthentication: the same, account "completeUntilFirstUserAuthentication",
//   afterFirstUnlockThisDeviceOnly.
// - completeUnlessOpen: a P-256 key-agreement private key, key item with tag "<service>.completeUnlessOpen",
//   whenUnlockedThisDeviceOnly; and its public key (not a secret) as a generic password (service, account
//   "completeUnlessOpen.publicKey"), afterFirstUnlockThisDeviceOnly, so that files can be created while the device
//   is locked after its first unlock, as with Apple's NSFileProtectionCompleteUnlessOpen. Creating the pair needs
//   the keychain unlocked once.
//
// Decision: the class keys are `ThisDeviceOnly` (never in backups or iCloud), like Apple's class keys; a protected
// file restored on another device cannot be read there.

/// The keychain items of the class keys under one service.
struct ProtectedFileKeys {
    let keychain: Keychain
    let service: String

    init(keychain: Keychain, service: String) {
        // The class keys are local and need no prompt: the options that would make them otherwise are dropped.
        var keychain = keychain
        keychain.options.synchronizable = false
        keychain.options.accessControlFlags = nil
        keychain.options.label = nil
        keychain.options.comment = nil
        self.keychain = keychain
        self.service = service
    }

    static func accessibility(_ protection: FileProtection) -> Accessibility {
        switch protection {
        case .complete, .completeUnlessOpen: return .whenUnlockedThisDeviceOnly
        case .completeUntilFirstUserAuthentication: return .afterFirstUnlockThisDeviceOnly
        }
    }

    func symmetricItem(_ protection: FileProtection) throws -> CryptoKeyItem<SymmetricKey> {
        try CryptoKeyItem<SymmetricKey>(service: service, account: protection.rawValue)
    }

    func privateItem() throws -> CryptoKeyItem<P256.KeyAgreement.PrivateKey> {
        try CryptoKeyItem<P256.KeyAgreement.PrivateKey>(tag: service + ".completeUnlessOpen")
    }

    func publicItem() throws -> GenericPassword {
        try GenericPassword(service: service, account: "completeUnlessOpen.publicKey")
    }

    /// The class symmetric key, created (add-only) when absent and `create` is true.
    ///
    /// - Throws: `KeychainError` from the keychain unchanged (`errSecInteractionNotAllowed` when locked).
    func symmetricKey(_ protection: FileProtection, create: Bool) throws -> SymmetricKey? {
        let item = try symmetricItem(protection)
        if let key = try keychain.key(for: item) { return key }
        guard create else { return nil }
        return try addOnce(SymmetricKey(size: .bits256), for: item, accessibility: Self.accessibility(protection))
    }

    /// The completeUnlessOpen class public key: readable after the first unlock. Creates the pair when absent.
    ///
    /// - Throws: `KeychainError` with `errSecInteractionNotAllowed` when the public key is not readable now, or
    ///   when the pair must be created and the keychain is locked.
    func agreementPublicKey() throws -> P256.KeyAgreement.PublicKey {
        let item = try publicItem()
        if let data = try keychain.data(for: item) {
            do { return try P256.KeyAgreement.PublicKey(x963Representation: data) } catch {
                throw KeychainError(code: .decodingFailed, reason: "\(item) is not a P-256 public key; it was left unchanged")
            }
        }
        // No public key: the private key is read (or created), which needs the keychain unlocked.
        let privateKey = try agreementPrivateKey(create: true)!
        try savePublic(privateKey.publicKey)
        return privateKey.publicKey
    }

    /// The completeUnlessOpen class private key, created (add-only) with its public key when absent and `create`.
    func agreementPrivateKey(create: Bool) throws -> P256.KeyAgreement.PrivateKey? {
        let item = try privateItem()
        if let key = try keychain.key(for: item) { return key }
        guard create else { return nil }
        let key = try addOnce(P256.KeyAgreement.PrivateKey(), for: item, accessibility: .whenUnlockedThisDeviceOnly)
        try savePublic(key.publicKey)
        return key
    }

    private func savePublic(_ publicKey: P256.KeyAgreement.PublicKey) throws {
        // Add-or-update is right here: the value is derived from the one private key that won the add.
        try keychain.save(publicKey.x963Representation, for: publicItem(),
                          options: SaveOptions(accessibility: .afterFirstUnlockThisDeviceOnly))
    }

    /// Adds `key` for `item`; when another writer added one first (errSecDuplicateItem), returns that one.
    private func addOnce<StoredKey>(_ key: StoredKey, for item: CryptoKeyItem<StoredKey>, accessibility: Accessibility) throws -> StoredKey {
        var options = keychain.options
        options.accessibility = accessibility
        var attributes = keychain.ownedQuery(item)
        attributes[Key.valueData] = .data(key.keychainRepresentation)
        for (name, value) in Keychain.storedAttributes(options) { attributes[name] = value }
        do {
            _ = try keychain.store.add(attributes)
            return key
        } catch let error where KeychainError.duplicateItem ~= error {
            guard let existing = try keychain.key(for: item) else {
                throw KeychainError(status: Status.duplicateItem, reason: "\(item) exists but holds no \(StoredKey.self); it was left unchanged")
            }
            return existing
        } catch {
            throw KeychainError(converting: error)
        }
    }
}
