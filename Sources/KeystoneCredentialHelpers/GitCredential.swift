import Foundation
import KeychainEngine

/// A request of git's credential-helper protocol (`git help credential`, "INPUT/OUTPUT FORMAT"): `key=value` lines up
/// to a blank line or the end of input.
///
/// Decisions, from git's Documentation/git-credential.txt:
/// - Unknown attributes are ignored, as git requires of helpers (newer git versions add some).
/// - `host` may carry a port (`example.com:8080`, `[::1]:8080`): it is split, as git-credential-osxkeychain does.
/// - `wwwauth[]` (the server's `WWW-Authenticate` headers) and `capability[]` are read and not used: this helper stores
///   a username and a password (and git's `password_expiry_utc` and `oauth_refresh_token`), never a pre-encoded
///   `credential` with an `authtype`, so it announces no capability (git then never sends it such a credential to
///   store, and never expects `state[]` or `continue` back).
/// - A line without `=` is refused (git's own helpers die on it).
public struct GitCredential: Sendable, Equatable {
    public var protocolName: String?
    public var host: String?
    public var port: Int?
    public var path: String?
    public var username: String?
    public var password: String?
    /// Seconds since 1970 (UTC) after which the password must not be used.
    public var passwordExpiryUTC: Int64?
    public var oauthRefreshToken: String?
    /// `quit=1`: the caller asks that nothing more be done.
    public var quit = false
    public var capabilities: [String] = []
    public var wwwAuthenticate: [String] = []

    public init() {}

    /// Parses a request.
    ///
    /// - Throws: ``CredentialHelperError`` (`errSecParam`) for a line without `=` or a port that is not a number;
    ///   the message never quotes a value (it may be the password).
    public static func parse(_ data: Data) throws -> GitCredential {
        var credential = GitCredential()
        let text = String(decoding: data, as: UTF8.self)
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine
            if line.isEmpty { break }
            guard let equals = line.firstIndex(of: "=") else {
                throw CredentialHelperError(Status.param, "git-credential-keystone: bad input: a line without '=' (git's credential protocol sends key=value lines)")
            }
            let key = String(line[..<equals])
            let value = String(line[line.index(after: equals)...])
            switch key {
            case "protocol": credential.protocolName = value
            case "host":
                let (host, port) = try splitHost(value)
                credential.host = host
                credential.port = port
            case "path": credential.path = value
            case "username": credential.username = value
            case "password": credential.password = value
            case "password_expiry_utc": credential.passwordExpiryUTC = Int64(value)
            case "oauth_refresh_token": credential.oauthRefreshToken = value
            case "quit": credential.quit = ["1", "true", "yes", "on"].contains(value.lowercased())
            case "capability[]": credential.capabilities.append(value)
            case "wwwauth[]": credential.wwwAuthenticate.append(value)
            case "url": credential.apply(url: value)
            default: continue   // unknown attributes are ignored, as git requires
            }
        }
        return credential
    }

    /// `host` as git sends it: a name or address with an optional `:port`; an IPv6 address in brackets.
    static func splitHost(_ value: String) throws -> (String, Int?) {
        var host = Substring(value)
        var portText: Substring?
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            let rest = host[host.index(after: close)...]
            if rest.hasPrefix(":") { portText = rest.dropFirst() }
            host = host[...close]
        } else if let colon = host.lastIndex(of: ":") {
            portText = host[host.index(after: colon)...]
            host = host[..<colon]
        }
        guard let portText else { return (String(host), nil) }
        if portText.isEmpty { return (String(host), nil) }
        guard let port = Int(portText), (1...65535).contains(port) else {
            throw CredentialHelperError(Status.param, "git-credential-keystone: bad input: the port of host is not a number from 1 to 65535")
        }
        return (String(host), port)
    }

    /// `url=…`: git sends it only through `git credential` callers; its parts, as git itself splits them.
    mutating func apply(url: String) {
        guard let components = URLComponents(string: url) else { return }
        if let scheme = components.scheme { protocolName = scheme }
        if let host = components.host { self.host = host }
        if let port = components.port { self.port = port }
        if let user = components.user { username = user }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        if !path.isEmpty { self.path = path }
    }

    /// The reply to `get`: `username`, `password` and, when stored, `password_expiry_utc` and `oauth_refresh_token`.
    public var reply: String {
        var lines: [String] = []
        if let username { lines.append("username=\(username)") }
        if let password { lines.append("password=\(password)") }
        if let passwordExpiryUTC { lines.append("password_expiry_utc=\(passwordExpiryUTC)") }
        if let oauthRefreshToken { lines.append("oauth_refresh_token=\(oauthRefreshToken)") }
        return lines.isEmpty ? "" : lines.joined(separator: "\n") + "\n"
    }
}

/// A failure of a credential helper: an OSStatus (`errSec…`) and a message that never holds a secret.
public struct CredentialHelperError: Error, CustomStringConvertible {
    public let status: Int32
    public let message: String
    public init(_ status: Int32, _ message: String) {
        self.status = status
        self.message = message
    }
    public var description: String { message }
}
