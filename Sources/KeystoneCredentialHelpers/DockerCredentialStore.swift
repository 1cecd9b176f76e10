import Foundation
import KeychainEngine

/// The docker-credential-helpers protocol (`store`, `get`, `erase`, `list`, `version`) over a keychain.
///
/// Decisions:
/// - **Items** are internet passwords as docker-credential-osxkeychain keeps them: the registry's URL parsed (`https://`
///   assumed when it has no scheme) into `kSecAttrServer` (host), `kSecAttrProtocol` (`htps` or `http`), `kSecAttrPort`
///   and `kSecAttrPath`; `kSecAttrAccount` = the username; `kSecAttrLabel` = `Docker Credentials` (osxkeychain's and
///   secretservice's label). Two more mark them as docker's and keep what docker gave: `kSecAttrSecurityDomain` =
///   `docker` (a primary-key attribute, so a docker item never collides with git's item for the same host and user)
///   and `kSecAttrComment` = the server URL exactly as docker gave it (what `list` prints).
/// - **One credential per registry**, as docker expects: `store` updates the registry's item in place (username,
///   secret and URL) when there is one, else adds one; never deletes and re-adds.
/// - **Identity tokens** are stored as docker gives them: username `<token>`, the token as the secret; `get` returns
///   them unchanged, so docker sends the token as an identity token.
/// - **Not found** (`get`, `erase`): `credentials not found in native keychain` on standard output, exit status 1:
///   the exact text the docker CLI looks for. Other errors are printed on standard output too (docker shows them).
public enum DockerCredentialStore {
    public static let label = "Docker Credentials"
    public static let securityDomain = "docker"
    public static let notFoundMessage = "credentials not found in native keychain"
    public static let version = "0.9.0"

    /// What a verb prints and the exit status it ends with.
    public struct Outcome: Equatable, Sendable {
        public var output: String
        public var status: Int32
        public init(_ output: String, _ status: Int32 = 0) {
            self.output = output
            self.status = status
        }
        public static let notFound = Outcome(notFoundMessage + "\n", 1)
    }

    public enum Verb: String, CaseIterable, Sendable {
        case store, get, erase, list, version
    }

    /// Whether an item is docker's (its security domain).
    static func isDockerItem(_ item: KeychainQuery) -> Bool {
        item[Key.securityDomain]?.stringValue == securityDomain
    }

    /// The item attributes a registry URL names (nil when it has no host).
    static func query(forServer server: String) -> KeychainQuery? {
        let trimmed = server.trimmingCharacters(in: .whitespacesAndNewlines)
        let withScheme = trimmed.contains("://") ? trimmed : "https://" + trimmed
        guard let components = URLComponents(string: withScheme), let host = components.host, !host.isEmpty else { return nil }
        let code = components.scheme?.lowercased() == "http" ? "http" : "htps"
        var query: KeychainQuery = [
            Key.class: .string(ItemClass.internetPassword.rawValue), Key.server: .string(host), Key.protocol: .string(code),
            Key.securityDomain: .string(securityDomain),
        ]
        if let port = components.port { query[Key.port] = .number(Int64(port)) }
        if !components.path.isEmpty { query[Key.path] = .string(components.path) }
        return query
    }

    /// Runs `verb` with its standard input.
    ///
    /// - Throws: `EngineError` from the keychain (`errSecInteractionNotAllowed` when it is locked).
    public static func run(_ verb: Verb, input: Data, engine: KeychainEngine) throws -> Outcome {
        switch verb {
        case .version:
            return Outcome("docker-credential-keystone (keystone) \(version)\n")
        case .store:
            guard let object = try? JSONSerialization.jsonObject(with: input) as? [String: Any] else {
                return Outcome("error reading credentials from stdin: the input is not a JSON object\n", 1)
            }
            let server = object["ServerURL"] as? String ?? ""
            let username = object["Username"] as? String ?? ""
            let secret = object["Secret"] as? String ?? ""
            guard !server.isEmpty else { return Outcome("no credentials server URL\n", 1) }
            guard !username.isEmpty else { return Outcome("no credentials username\n", 1) }
            guard let query = query(forServer: server) else { return Outcome("invalid server URL: no host\n", 1) }
            try store(query, server: server, username: username, secret: secret, engine: engine)
            return Outcome("")
        case .get:
            let server = String(decoding: input, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !server.isEmpty else { return Outcome("no credentials server URL\n", 1) }
            guard let query = query(forServer: server), let item = try matches(query, engine: engine).first else { return .notFound }
            let reply: [String: String] = [
                "ServerURL": server,
                "Username": item[Key.account]?.stringValue ?? "",
                "Secret": String(decoding: item[Key.valueData]?.dataValue ?? Data(), as: UTF8.self),
            ]
            return Outcome(json(reply) + "\n")
        case .erase:
            let server = String(decoding: input, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !server.isEmpty else { return Outcome("no credentials server URL\n", 1) }
            guard let query = query(forServer: server) else { return .notFound }
            var deleted = 0
            for item in try matches(query, engine: engine) {
                guard let reference = item[Key.valuePersistentRef]?.dataValue else { continue }
                do {
                    try engine.delete([Key.class: .string(ItemClass.internetPassword.rawValue), Key.valuePersistentRef: .data(reference)])
                    deleted += 1
                } catch let error as EngineError where error.status == Status.itemNotFound {
                    continue
                }
            }
            return deleted == 0 ? .notFound : Outcome("")
        case .list:
            let all: KeychainQuery = [Key.class: .string(ItemClass.internetPassword.rawValue), Key.securityDomain: .string(securityDomain)]
            var listing: [String: String] = [:]
            for item in try matches(all, engine: engine, withData: false) {
                listing[serverURL(of: item)] = item[Key.account]?.stringValue ?? ""
            }
            return Outcome(json(listing) + "\n")
        }
    }

    static func store(_ query: KeychainQuery, server: String, username: String, secret: String, engine: KeychainEngine) throws {
        let changes: KeychainQuery = [
            Key.account: .string(username), Key.valueData: .data(Data(secret.utf8)), Key.comment: .string(server),
            Key.label: .string(label),
        ]
        for _ in 0..<3 {
            if let existing = try matches(query, engine: engine, withData: false).first,
               let reference = existing[Key.valuePersistentRef]?.dataValue {
                do {
                    try engine.update([Key.class: query[Key.class]!, Key.valuePersistentRef: .data(reference)], with: changes)
                    return
                } catch let error as EngineError where error.status == Status.itemNotFound {
                    continue   // erased meanwhile: look again
                }
            }
            var attributes = query
            attributes.merge(changes) { $1 }
            do {
                try engine.add(attributes)
                return
            } catch let error as EngineError where error.status == Status.duplicateItem {
                continue   // another process stored it meanwhile: update that one
            }
        }
        throw EngineError(Status.duplicateItem, "the registry's credentials kept changing while they were stored; try again")
    }

    static func matches(_ query: KeychainQuery, engine: KeychainEngine, withData: Bool = true) throws -> [KeychainQuery] {
        var search = query
        search[Key.returnAttributes] = .bool(true)
        search[Key.returnPersistentRef] = .bool(true)
        if withData { search[Key.returnData] = .bool(true) }
        search[Key.matchLimit] = .string(Key.matchLimitAll)
        let found: [KeychainQuery]
        do {
            found = (try engine.copyMatching(search)?.array ?? []).compactMap(\.attributes)
        } catch let error as EngineError where error.status == Status.itemNotFound {
            return []
        }
        // A registry's URL names one port and one path: an item with another port (or with one when the URL has none)
        // is another registry's.
        guard query[Key.server] != nil else { return found }
        let port = query[Key.port]?.integerValue ?? 0
        let path = query[Key.path]?.stringValue ?? ""
        return found.filter { ($0[Key.port]?.integerValue ?? 0) == port && ($0[Key.path]?.stringValue ?? "") == path }
    }

    /// The URL docker gave (the item's comment), else one made of its attributes.
    static func serverURL(of item: KeychainQuery) -> String {
        if let comment = item[Key.comment]?.stringValue, !comment.isEmpty { return comment }
        var url = (item[Key.protocol]?.stringValue == "http" ? "http://" : "https://") + (item[Key.server]?.stringValue ?? "")
        if let port = item[Key.port]?.integerValue, port != 0 { url += ":\(port)" }
        return url + (item[Key.path]?.stringValue ?? "")
    }

    static func json(_ object: [String: String]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
