#if !canImport(Darwin)
import CSecretService
import Foundation
import KeychainEngine
import KeystoneCredentialHelpers
#if canImport(Glibc)
import Glibc
#endif

// The credential helpers on the Secret Service (`--keychain secret-service:[COLLECTION]`), in the formats of the
// helpers already there, so that each finds what the other stored.
//
// Decision: on the Secret Service the helpers do not store Keystone rows (KeychainSecretService's schema): they store
// the items git-credential-libsecret and docker-credential-secretservice store, read from their sources:
// - git (contrib/credential/libsecret): attributes `user`, `protocol` (git's name: `https`, not Apple's `htps`),
//   `server`, `port` (only when git gives one), `object` (the path, only when given), schema
//   `org.gnome.keyring.NetworkPassword` (git 2.39's; git ≥ 2.41 writes `org.git.Password` and searches without
//   matching the schema, so both find these), label `Git: https://host/path`; the secret is the password, then git's
//   `\npassword_expiry_utc=` / `\noauth_refresh_token=` lines (git ≥ 2.41). Searches match no schema, so items of
//   either git version are found.
// - docker (docker-credential-helpers' secretservice): schema `io.docker.Credentials`, attributes `label` = `Docker
//   Credentials`, `server` = the registry URL exactly as docker gave it, `username`, `docker_cli` = `1`; item label
//   = the URL. Registries are matched by that exact string there (secretservice's rule), where the keychain-file
//   items parse the URL (osxkeychain's rule): `registry.example.com` and `https://registry.example.com` are two
//   registries on the Secret Service.
// A replace creates the new item before deleting the old one (never delete-then-add). The collection is never
// unlocked from here: a locked one fails at once (its unlock is the desktop's prompt).
final class CredentialSecretService {
    static let gitSchema = "org.gnome.keyring.NetworkPassword"
    static let dockerSchema = "io.docker.Credentials"

    private let service: OpaquePointer
    let spec: String
    let collection: String

    /// Connects to the Secret Service on the session bus and finds the collection `spec` names: `secret-service:` (the
    /// `default` alias), `secret-service:NAME` (an alias, else a collection's label, else an object path).
    ///
    /// - Throws: ``CredentialHelperError`` (`errSecNotAvailable`) when there is no bus, no service or no such collection.
    init(spec: String) throws {
        let environment = ProcessInfo.processInfo.environment
        var address = environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""
        if address.isEmpty, let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            var info = stat()
            if stat(runtime + "/bus", &info) == 0, (info.st_mode & S_IFMT) == S_IFSOCK { address = "unix:path=\(runtime)/bus" }
        }
        guard !address.isEmpty else {
            throw CredentialHelperError(Status.notAvailable, "keystone: credential-helper: no D-Bus session bus for the Secret Service (\(spec)): DBUS_SESSION_BUS_ADDRESS is not set and $XDG_RUNTIME_DIR/bus does not exist")
        }
        var error = ks_error()
        guard let service = ks_service_open(address, 5_000, nil, &error) else {
            defer { ks_error_clear(&error) }
            throw CredentialHelperError(Status.notAvailable, "keystone: credential-helper: the Secret Service (\(spec)) cannot be reached: \(Self.message(error))")
        }
        self.service = service
        self.spec = spec
        let name = spec.hasPrefix("secret-service:") ? String(spec.dropFirst("secret-service:".count)) : ""
        guard let path = Self.collection(service, name.isEmpty ? "default" : name) else {
            ks_service_free(service)
            throw CredentialHelperError(Status.notAvailable, "keystone: credential-helper: the Secret Service has no collection \(name.isEmpty ? "for its default alias" : name) (\(spec))")
        }
        collection = path
    }

    /// A collection by alias, label or object path.
    private static func collection(_ service: OpaquePointer, _ name: String) -> String? {
        var error = ks_error()
        defer { ks_error_clear(&error) }
        if let alias = ks_read_alias(service, name, nil, &error) {
            defer { ks_free(alias) }
            let path = String(cString: alias)
            if path != "/" { return path }
        }
        ks_error_clear(&error)
        guard let all = ks_collections(service, nil, &error) else { return nil }
        defer { ks_strfreev(all) }
        var index = 0
        while let entry = all[index] {
            let path = String(cString: entry)
            index += 1
            if path == name { return path }
            var label: UnsafeMutablePointer<CChar>?
            var locked: Int32 = 0
            if ks_collection_info(service, path, &label, &locked, nil, &error) == 0, let label {
                defer { ks_free(label) }
                if String(cString: label) == name { return path }
            }
            ks_error_clear(&error)
        }
        return nil
    }

    deinit { ks_service_free(service) }

    static func message(_ error: ks_error) -> String { error.message.map { String(cString: $0) } ?? "error \(error.kind.rawValue)" }

    func failure(_ what: String, _ error: inout ks_error) -> CredentialHelperError {
        defer { ks_error_clear(&error) }
        if error.kind == KS_LOCKED { return lockedFailure() }
        return CredentialHelperError(Status.notAvailable, "keystone: credential-helper: \(what) on the Secret Service (\(spec)) failed: \(Self.message(error))")
    }

    func lockedFailure() -> CredentialHelperError {
        CredentialHelperError(Status.interactionNotAllowed, "keystone: credential-helper: the Secret Service collection \(spec) is locked: unlock it with `keystone unlock-keychain \(spec)` (the Secret Service shows its own prompt), in Seahorse, or by logging in to the desktop")
    }

    /// Fails at once when the collection is locked.
    func requireUnlocked() throws {
        var error = ks_error()
        var locked: Int32 = 0
        guard ks_collection_locked(service, collection, &locked, nil, &error) == 0 else { throw failure("reading the lock state", &error) }
        if locked != 0 { throw lockedFailure() }
    }

    private func withStrings<T>(_ pairs: [(String, String)], _ body: ([UnsafePointer<CChar>?], [UnsafePointer<CChar>?]) throws -> T) rethrows -> T {
        let keys = pairs.map { strdup($0.0) }, values = pairs.map { strdup($0.1) }
        defer { (keys + values).forEach { free($0) } }
        return try body(keys.map { UnsafePointer($0) }, values.map { UnsafePointer($0) })
    }

    /// The items holding every attribute of `pairs`, with their attributes and (when `secrets`) their secrets.
    func search(_ pairs: [(String, String)], secrets: Bool) throws -> [(path: String, attributes: [String: String], secret: Data?)] {
        try requireUnlocked()
        var error = ks_error()
        let found = withStrings(pairs) { keys, values in ks_search(service, collection, keys, values, pairs.count, nil, &error) }
        guard let found else { throw failure("a search", &error) }
        defer { ks_strfreev(found) }
        var paths: [String] = []
        var index = 0
        while let path = found[index] { paths.append(String(cString: path)); index += 1 }
        var items: [(path: String, attributes: [String: String], secret: Data?)] = []
        for path in paths.sorted() {
            var info = ks_item_info()
            guard ks_item_info_get(service, path, &info, nil, &error) == 0 else {
                ks_error_clear(&error)
                continue   // deleted meanwhile
            }
            var attributes: [String: String] = [:]
            for i in 0..<info.count { attributes[String(cString: info.keys[i]!)] = String(cString: info.values[i]!) }
            ks_item_info_clear(&info)
            items.append((path, attributes, nil))
        }
        guard secrets, !items.isEmpty else { return items }
        let cPaths = items.map { strdup($0.path) }
        defer { cPaths.forEach { free($0) } }
        var buffers = [UnsafeMutablePointer<UInt8>?](repeating: nil, count: items.count)
        var lengths = [Int](repeating: 0, count: items.count)
        let status = cPaths.map { UnsafePointer($0) }.withUnsafeBufferPointer { pathPointer in
            ks_get_secrets(service, pathPointer.baseAddress, items.count, &buffers, &lengths, nil, &error)
        }
        guard status == 0 else { throw failure("reading secrets", &error) }
        for i in items.indices {
            guard let buffer = buffers[i] else { continue }
            items[i].secret = Data(bytes: buffer, count: lengths[i])
            ks_secret_free(buffer, lengths[i])
        }
        return items
    }

    /// Creates an item, then deletes `replacing` (the items it replaces).
    func create(label: String, attributes: [(String, String)], secret: Data, replacing: [String]) throws {
        try requireUnlocked()
        var error = ks_error()
        let path = withStrings(attributes) { keys, values in
            secret.withUnsafeBytes { bytes in
                ks_create_item(service, collection, label, keys, values, attributes.count,
                               bytes.bindMemory(to: UInt8.self).baseAddress, secret.count, "text/plain", nil, &error)
            }
        }
        guard let path else { throw failure("storing", &error) }
        let created = String(cString: path)
        ks_free(path)
        for old in replacing where old != created { try delete(old) }
    }

    func delete(_ path: String) throws {
        var error = ks_error()
        if ks_delete_item(service, path, nil, &error) != 0 {
            if error.kind == KS_NO_SUCH_OBJECT { ks_error_clear(&error); return }
            throw failure("deleting", &error)
        }
    }

    // MARK: git

    static func gitAttributes(_ credential: GitCredential) -> [(String, String)]? {
        guard let protocolName = credential.protocolName, let host = credential.host else { return nil }
        var pairs = [("protocol", protocolName), ("server", host)]
        if let port = credential.port { pairs.append(("port", String(port))) }
        if let path = credential.path, !path.isEmpty { pairs.append(("object", path)) }
        if let username = credential.username { pairs.append(("user", username)) }
        return pairs
    }

    func gitGet(_ credential: GitCredential, now: Date = Date()) throws -> String {
        guard !credential.quit, let pairs = Self.gitAttributes(credential) else { return "" }
        for item in try search(pairs, secrets: true) {
            guard let data = item.secret else { continue }
            let secret = GitCredentialSecret(data)
            if let expiry = secret.passwordExpiryUTC, Double(expiry) <= now.timeIntervalSince1970 { continue }
            var reply = GitCredential()
            reply.username = item.attributes["user"] ?? credential.username
            reply.password = secret.password
            reply.passwordExpiryUTC = secret.passwordExpiryUTC
            reply.oauthRefreshToken = secret.oauthRefreshToken
            return reply.reply
        }
        return ""
    }

    func gitStore(_ credential: GitCredential) throws {
        guard !credential.quit, var pairs = Self.gitAttributes(credential), credential.username != nil, let password = credential.password else { return }
        // The same attributes as libsecret's secret_password_storev (its replace matches them all).
        let existing = try search(pairs, secrets: false).filter { item in
            (item.attributes["port"] == nil) == (credential.port == nil) && (item.attributes["object"] == nil) == ((credential.path ?? "").isEmpty)
        }.map(\.path)
        pairs.append(("xdg:schema", Self.gitSchema))
        let port = credential.port.map { ":\($0)" } ?? ""
        let label = "Git: \(credential.protocolName ?? "")://\(credential.host ?? "")\(port)/\(credential.path ?? "")"
        let secret = GitCredentialSecret(password: password, passwordExpiryUTC: credential.passwordExpiryUTC, oauthRefreshToken: credential.oauthRefreshToken)
        try create(label: label, attributes: pairs, secret: secret.encoded, replacing: existing)
    }

    func gitErase(_ credential: GitCredential) throws {
        guard !credential.quit, let pairs = Self.gitAttributes(credential) else { return }
        for item in try search(pairs, secrets: credential.password != nil) {
            if let password = credential.password, GitCredentialSecret(item.secret ?? Data()).password != password { continue }
            try delete(item.path)
        }
    }

    // MARK: docker

    func docker(_ verb: DockerCredentialStore.Verb, input: Data) throws -> DockerCredentialStore.Outcome {
        let server = String(decoding: input, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        switch verb {
        case .version:
            return .init("docker-credential-keystone (keystone) \(DockerCredentialStore.version)\n")
        case .store:
            guard let object = try? JSONSerialization.jsonObject(with: input) as? [String: Any] else {
                return .init("error reading credentials from stdin: the input is not a JSON object\n", 1)
            }
            let url = object["ServerURL"] as? String ?? "", username = object["Username"] as? String ?? ""
            guard !url.isEmpty else { return .init("no credentials server URL\n", 1) }
            guard !username.isEmpty else { return .init("no credentials username\n", 1) }
            let existing = try search([("xdg:schema", Self.dockerSchema), ("server", url)], secrets: false).map(\.path)
            try create(label: url, attributes: [("xdg:schema", Self.dockerSchema), ("label", DockerCredentialStore.label), ("server", url),
                                                ("username", username), ("docker_cli", "1")],
                       secret: Data((object["Secret"] as? String ?? "").utf8), replacing: existing)
            return .init("")
        case .get:
            guard !server.isEmpty else { return .init("no credentials server URL\n", 1) }
            guard let item = try search([("xdg:schema", Self.dockerSchema), ("server", server)], secrets: true).first(where: { $0.secret != nil }) else {
                return .notFound
            }
            let reply = ["ServerURL": server, "Username": item.attributes["username"] ?? "", "Secret": String(decoding: item.secret!, as: UTF8.self)]
            return .init(String(decoding: try JSONSerialization.data(withJSONObject: reply, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self) + "\n")
        case .erase:
            guard !server.isEmpty else { return .init("no credentials server URL\n", 1) }
            let items = try search([("xdg:schema", Self.dockerSchema), ("server", server)], secrets: false)
            guard !items.isEmpty else { return .notFound }
            for item in items { try delete(item.path) }
            return .init("")
        case .list:
            var listing: [String: String] = [:]
            for item in try search([("xdg:schema", Self.dockerSchema), ("docker_cli", "1")], secrets: false) {
                if let url = item.attributes["server"] { listing[url] = item.attributes["username"] ?? "" }
            }
            return .init(String(decoding: try JSONSerialization.data(withJSONObject: listing, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self) + "\n")
        }
    }
}
#endif
