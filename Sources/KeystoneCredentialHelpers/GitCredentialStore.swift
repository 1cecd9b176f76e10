import Foundation
import KeychainEngine

/// git's `get`, `store` and `erase` over a keychain, with items as git-credential-osxkeychain keeps them.
///
/// Decisions:
/// - **Items** are internet passwords (`inet`): `kSecAttrServer` = host, `kSecAttrPort` = port (absent when git sends
///   none), `kSecAttrPath` = path, `kSecAttrAccount` = username, `kSecAttrProtocol` = Apple's four-character code of
///   the protocol (`https` → `htps`, `http`, `ftp `, `ftps`, `imap`, `imps`, `smtp`), as git-credential-osxkeychain
///   stores them; any other protocol is not handled (nothing found, nothing stored), as osxkeychain does.
/// - **The secret** is the password, followed by `\npassword_expiry_utc=N` and `\noauth_refresh_token=T` when git
///   gave them: the encoding git's own osxkeychain and libsecret helpers use, so the refresh token (a credential) is
///   never an attribute, and the password alone is what other tools read when there is neither.
/// - **`get`** takes the first matching item that is not docker's (``DockerCredentialStore``) and whose expiry has not
///   passed: an expired one is never returned (git would drop it anyway). Without a port or username, items with any
///   are candidates, as on macOS.
/// - **`store`** needs protocol, host, username and password (osxkeychain's rule); an existing item with the same
///   primary key is updated in place (never deleted and re-added).
/// - **`erase`** deletes only items matching every attribute git gave and, when git gave a password, holding that
///   password (git ≥ 2.44 helpers do the same: a credential that was replaced since is kept).
/// - **`quit=1`** in a request: nothing is done.
public enum GitCredentialStore {
    /// Apple's protocol codes for the protocols git-credential-osxkeychain handles.
    public static let protocolCodes: [String: String] = [
        "https": "htps", "http": "http", "ftp": "ftp ", "ftps": "ftps", "imap": "imap", "imaps": "imps", "smtp": "smtp",
    ]

    /// The attributes shared by every query for `credential` (nil when git's protocol is not handled).
    static func baseQuery(_ credential: GitCredential) -> KeychainQuery? {
        guard let name = credential.protocolName, let code = protocolCodes[name.lowercased()], let host = credential.host else { return nil }
        var query: KeychainQuery = [Key.class: .string(ItemClass.internetPassword.rawValue), Key.server: .string(host), Key.protocol: .string(code)]
        if let port = credential.port { query[Key.port] = .number(Int64(port)) }
        if let path = credential.path, !path.isEmpty { query[Key.path] = .string(path) }
        if let username = credential.username { query[Key.account] = .string(username) }
        return query
    }

    /// Every matching item with its attributes and secret.
    static func matches(_ query: KeychainQuery, engine: KeychainEngine) throws -> [KeychainQuery] {
        var search = query
        search[Key.returnAttributes] = .bool(true)
        search[Key.returnData] = .bool(true)
        search[Key.returnPersistentRef] = .bool(true)
        search[Key.matchLimit] = .string(Key.matchLimitAll)
        do {
            let result = try engine.copyMatching(search)
            return (result?.array ?? []).compactMap(\.attributes)
        } catch let error as EngineError where error.status == Status.itemNotFound {
            return []
        }
    }

    /// `get`: the reply to print (empty when nothing matches).
    ///
    /// - Throws: `EngineError` from the keychain (`errSecInteractionNotAllowed` when it is locked).
    public static func get(_ credential: GitCredential, engine: KeychainEngine, now: Date = Date()) throws -> String {
        guard !credential.quit, let query = baseQuery(credential) else { return "" }
        for item in try matches(query, engine: engine) where !DockerCredentialStore.isDockerItem(item) {
            let secret = GitCredentialSecret(item[Key.valueData]?.dataValue ?? Data())
            if let expiry = secret.passwordExpiryUTC, Double(expiry) <= now.timeIntervalSince1970 { continue }
            var reply = GitCredential()
            reply.username = item[Key.account]?.stringValue ?? credential.username
            reply.password = secret.password
            reply.passwordExpiryUTC = secret.passwordExpiryUTC
            reply.oauthRefreshToken = secret.oauthRefreshToken
            return reply.reply
        }
        return ""
    }

    /// `store`: adds the credential, or updates the item that has its primary key.
    ///
    /// - Throws: `EngineError` from the keychain.
    public static func store(_ credential: GitCredential, engine: KeychainEngine) throws {
        guard !credential.quit, var query = baseQuery(credential), credential.username != nil, let password = credential.password else { return }
        let secret = GitCredentialSecret(password: password, passwordExpiryUTC: credential.passwordExpiryUTC,
                                  oauthRefreshToken: credential.oauthRefreshToken).encoded
        query[Key.valueData] = .data(secret)
        do {
            try engine.add(query)
        } catch let error as EngineError where error.status == Status.duplicateItem {
            var identity = ClassSchema.of(.internetPassword).primaryKeyQuery(of: query)
            identity[Key.class] = query[Key.class]
            // The access group as the add resolved it (the engine's default), not the empty value.
            identity[Key.accessGroup] = nil
            try engine.update(identity, with: [Key.valueData: .data(secret)])
        }
    }

    /// `erase`: deletes the matching items (only those holding git's password, when it gave one).
    ///
    /// - Returns: how many items were deleted.
    /// - Throws: `EngineError` from the keychain.
    @discardableResult
    public static func erase(_ credential: GitCredential, engine: KeychainEngine) throws -> Int {
        guard !credential.quit, let query = baseQuery(credential) else { return 0 }
        var deleted = 0
        for item in try matches(query, engine: engine) where !DockerCredentialStore.isDockerItem(item) {
            if let password = credential.password, GitCredentialSecret(item[Key.valueData]?.dataValue ?? Data()).password != password { continue }
            guard let reference = item[Key.valuePersistentRef]?.dataValue else { continue }
            do {
                try engine.delete([Key.class: .string(ItemClass.internetPassword.rawValue), Key.valuePersistentRef: .data(reference)])
                deleted += 1
            } catch let error as EngineError where error.status == Status.itemNotFound {
                continue   // another process erased it meanwhile
            }
        }
        return deleted
    }
}

/// An item's secret as git's osxkeychain and libsecret helpers encode it: the password, then `key=value` lines.
public struct GitCredentialSecret {
    public var password: String
    public var passwordExpiryUTC: Int64?
    public var oauthRefreshToken: String?

    public init(password: String, passwordExpiryUTC: Int64?, oauthRefreshToken: String?) {
        self.password = password
        self.passwordExpiryUTC = passwordExpiryUTC
        self.oauthRefreshToken = oauthRefreshToken
    }

    /// Decodes a stored secret; lines it does not know are ignored (a newer helper may add some).
    public init(_ data: Data) {
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        password = lines.first.map(String.init) ?? ""
        for line in lines.dropFirst() {
            guard let equals = line.firstIndex(of: "=") else { continue }
            let value = String(line[line.index(after: equals)...])
            switch line[..<equals] {
            case "password_expiry_utc": passwordExpiryUTC = Int64(value)
            case "oauth_refresh_token": oauthRefreshToken = value
            default: continue
            }
        }
    }

    public var encoded: Data {
        var text = password
        if let passwordExpiryUTC { text += "\npassword_expiry_utc=\(passwordExpiryUTC)" }
        if let oauthRefreshToken { text += "\noauth_refresh_token=\(oauthRefreshToken)" }
        return Data(text.utf8)
    }
}
