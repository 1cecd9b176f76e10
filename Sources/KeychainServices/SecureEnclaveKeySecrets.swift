#if !canImport(Darwin)
import Crypto
import Foundation
import KeychainEngine

// The person's access control bound in the TPM (issue 31): a Secure Enclave key made with `.userPresence`,
// `.biometryAny`, `.biometryCurrentSet`, `.devicePasscode` or `.watch` (and `.privateKeyUsage`) on a token that enforces
// an authorization value (the TPM) gets 32 random bytes as its TPM authorization value. The TPM refuses every use
// without them, so whoever copies the key's blob (its `toid`, a CryptoKit `dataRepresentation`) and calls the TPM
// directly (ESAPI, tpm2_sign, openssl's tpm2 provider) cannot use the key.
//
// The secret is not kept next to the blob: it is a generic password of the default keychain (the engine SecItem*
// uses), service ``SecureEnclaveKeySecrets/service``, account the hex of the key's application label (`klbl`, SHA-1
// of its public key), with the key's own accessibility and person flags as its access control. Each use of the key
// first runs the key's evaluation (the authentication gate, as before: same prompt, operation, LAContext reuse), and
// only after it succeeds is the secret read and sent to the TPM.
//
// Decision: the account is the key's application label (Apple's `kSecAttrApplicationLabel` of an EC key, SHA-1 of the
// public key), not a SHA-256 of it: `SecItemDelete` of a key item must find the secret of each key it deletes from
// the attributes it can read without an authentication, and `klbl` is one of them (the blob is the item's data,
// which needs one). SHA-1 serves here as a name, not as a protection: the public key is the TPM's, no one chooses it.
//
// Decision: the secret item's access control carries the key's person flags (without `.privateKeyUsage` and
// `.applicationPassword`, which mean nothing for a password item), so any other reader (another process of the
// user through SecItem*, `keystone get`, Secret Service) is asked what the key asks. The key's own use reads it with
// a context made for that one read, on which the gate's success is recorded (`AuthenticationContext.recordSuccess`),
// so the person is asked once per use, as before this binding.
//
// Decision: a key that is not permanent (`kSecAttrIsPermanent` false) keeps its secret in the key object only (in
// process memory, never in the keychain): the key lives as long as the object, and nothing is left behind in the
// keychain for a key no one can find again.

/// The keychain's random secrets that bind Secure Enclave keys' person flags in the TPM (see the top of this file).
package enum SecureEnclaveKeySecrets {
    /// The service of the generic-password items holding the secrets (reserved: do not use it for other items).
    package static let service = "Keystone TPM key authorization"

    /// The flags that ask for the person (what the TPM cannot see, so the keychain releases a secret for it).
    package static let personFlags: AccessControlFlags = [.userPresence, .biometryAny, .biometryCurrentSet,
                                                           .devicePasscode, .watch]

    /// Whether a key made with `flags` on `token` is bound to a released secret: the token enforces an
    /// authorization value, and the flags ask for the person for private-key use (`.privateKeyUsage`).
    package static func binds(_ flags: AccessControlFlags, on token: any SecureEnclaveToken) -> Bool {
        token.enforcesAuthorization && flags.contains(.privateKeyUsage) && !flags.intersection(personFlags).isEmpty
    }

    /// 32 random bytes.
    /// - Throws: `errSecInternalComponent` when the system's generator fails.
    package static func newSecret() throws(EngineError) -> Data {
        var bytes = [UInt8](repeating: 0, count: 32)
        guard SecRandomCopyBytes(kSecRandomDefault, bytes.count, &bytes) == errSecSuccess else {
            throw EngineError(Status.internalComponent, "the system's random generator failed")
        }
        return Data(bytes)
    }

    /// The key's TPM authorization value: the secret, or for a key that also has `.applicationPassword`
    /// SHA-256(domain ‖ secret ‖ password), so that both are needed (32 bytes either way, as the TPM takes).
    package static func authorizationValue(secret: Data, password: Data?) -> Data {
        guard let password else { return secret }
        var hash = SHA256()
        hash.update(data: Data("Keystone TPM key authorization: secret and application password, v1".utf8))
        hash.update(data: secret)
        hash.update(data: password)
        return Data(hash.finalize())
    }

    /// The secret item's account for the key with this public key (ANSI X9.63): the hex of its application label.
    package static func account(publicKeyX963: Data) -> String {
        account(applicationLabel: Data(Insecure.SHA1.hash(data: publicKeyX963)))
    }

    static func account(applicationLabel: Data) -> String {
        applicationLabel.map { String(format: "%02x", $0) }.joined()
    }

    /// Stores the secret of the key with this public key in the default keychain, protected by the key's
    /// accessibility and person flags.
    /// - Throws: ``EngineError`` with the keychain's status (`errSecDuplicateItem`, `errSecInteractionNotAllowed`…).
    package static func store(_ secret: Data, publicKeyX963: Data, accessControl: AccessControl) throws {
        let engine = try KeychainServicesDefaults.currentEngine()
        var flags = accessControl.flags
        flags.remove(.privateKeyUsage)
        flags.remove(.applicationPassword)
        let item: KeychainQuery = [
            Key.class: .string(ItemClass.genericPassword.rawValue),
            Key.service: .string(service),
            Key.account: .string(account(publicKeyX963: publicKeyX963)),
            Key.label: .string("Keystone TPM key authorization (do not delete while the key is used)"),
            Key.accessControl: .accessControl(AccessControl(accessibility: accessControl.accessibility, flags: flags)),
            Key.valueData: .data(secret),
        ]
        _ = try engine.add(item)
    }

    /// Releases the secret of the key with this public key: reads the secret item's access control (its
    /// attributes: no authentication), runs `evaluate` with its flags (the key's evaluation: the authentication
    /// gate), and only when that succeeds reads the secret, with a context made for that one read, invalidated after.
    ///
    /// Decision: the evaluation asks what the secret item's stored access control asks (the keychain's record,
    /// encrypted and authenticated with the item), not what the key's envelope says: a CryptoKit
    /// `dataRepresentation` is not authenticated, and someone who rewrites its flags must not weaken what releases
    /// the secret.
    /// - Throws: what `evaluate` throws (the secret is not read then); ``EngineError`` with `errSecAuthFailed` when
    ///   the keychain has no such secret (the item was deleted: the key can no longer be used) or it is damaged,
    ///   else the keychain's status (`errSecInteractionNotAllowed` when it is locked, `errSecAuthFailed` when
    ///   `.biometryCurrentSet`'s enrollment changed).
    package static func release(publicKeyX963: Data, evaluate: (AccessControlFlags) throws -> Void) throws -> Data {
        let engine = try KeychainServicesDefaults.currentEngine()
        let name = account(publicKeyX963: publicKeyX963)
        let item: KeychainQuery = [
            Key.class: .string(ItemClass.genericPassword.rawValue),
            Key.service: .string(service),
            Key.account: .string(name),
        ]
        let flags: AccessControlFlags
        do {
            var lookup = item
            lookup[Key.returnAttributes] = .bool(true)
            guard case .attributes(let attributes)? = try engine.copyMatching(lookup),
                  case .accessControl(let access)? = attributes[Key.accessControl] else {
                throw EngineError(Status.authFailed, "the key's authorization secret in the keychain is damaged (service \"\(service)\", account \(name))")
            }
            flags = access.flags
        } catch let error as EngineError where error.status == Status.itemNotFound {
            throw EngineError(Status.authFailed, "the key's authorization secret is not in the keychain (a generic password of service \"\(service)\", account \(name)): it was deleted, or the key was made with another keychain; the TPM refuses the key without it, so the key cannot be used any more")
        }
        try evaluate(flags)
        let oneRead = AuthenticationContext(reuseDuration: 300)
        oneRead.recordSuccess(at: engine.configuration.now())
        defer { oneRead.invalidate() }
        var read = item
        read[Key.returnData] = .bool(true)
        read[Key.useAuthenticationContext] = .authenticationContext(oneRead)
        guard case .data(let secret)? = try engine.copyMatching(read), secret.count == 32 else {
            throw EngineError(Status.authFailed, "the key's authorization secret in the keychain is damaged (service \"\(service)\", account \(name))")
        }
        return secret
    }

    /// Deletes the secret of the key with this application label (`klbl`); none there is no error.
    package static func delete(applicationLabel: Data, engine: KeychainEngine) {
        let query: KeychainQuery = [
            Key.class: .string(ItemClass.genericPassword.rawValue),
            Key.service: .string(service),
            Key.account: .string(account(applicationLabel: applicationLabel)),
        ]
        // Decision: a secret that cannot be deleted (the keychain is locked, read-only) is left behind rather than
        // failing the key's deletion, which has happened: it is 32 random bytes useless without the key's blob.
        try? engine.delete(query)
    }

    /// The application labels of the Secure Enclave key items `query` (a `SecItemDelete` query) matches, read
    /// before they are deleted (attributes only: no authentication); empty for a query of another class.
    static func secureEnclaveKeyLabels(matching query: KeychainQuery, engine: KeychainEngine) -> [Data] {
        guard query[Key.class]?.stringValue == ItemClass.key.rawValue else { return [] }
        var lookup = query.filter { !$0.key.hasPrefix("r_") && !$0.key.hasPrefix("m_") && $0.key != Key.valueData }
        lookup[Key.returnAttributes] = .bool(true)
        lookup[Key.matchLimit] = .string(Key.matchLimitAll)
        lookup[Key.tokenID] = .string(Key.tokenIDSecureEnclave)
        guard let found = try? engine.copyMatching(lookup) else { return [] }
        let rows: [ItemResult]
        if case .array(let many) = found { rows = many } else { rows = [found] }
        return rows.compactMap { row in
            guard case .attributes(let attributes) = row else { return nil }
            return attributes[Key.applicationLabel]?.dataValue
        }
    }

    /// `SecItemDelete`'s general path: deletes the matching items, then the secrets of the Secure Enclave keys among
    /// them. A failed deletion deletes no secret.
    static func delete(_ query: KeychainQuery, engine: KeychainEngine) throws {
        let labels = secureEnclaveKeyLabels(matching: query, engine: engine)
        try engine.delete(query)
        for label in labels { delete(applicationLabel: label, engine: engine) }
    }
}
#endif
