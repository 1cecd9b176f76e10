#if NIO
import Foundation
import KeychainEngine

/// Where and how to reach an etcd cluster, and which keychain on it.
///
/// Written as a URL: `etcd://host:port[,host:port…]/NAME[?user=U&timeout=S]` for plain HTTP, or
/// `etcds://host:port,…/NAME?ca=PATH&cert=PATH&key=PATH` for TLS (client certificate optional). The port defaults to
/// 2379; IPv6 addresses go in brackets (`[::1]:2379`). The password of `user` never appears in a URL: it comes from
/// the environment variable `KEYSTONE_ETCD_PASSWORD`.
public struct EtcdConfiguration: Sendable, Hashable, CustomStringConvertible {
    /// One etcd member's client address.
    public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        /// A host name, an IPv4 address, or an IPv6 address without brackets.
        public var host: String
        /// The client port, 1...65535.
        public var port: Int

        /// An endpoint; ``EtcdConfiguration/init(endpoints:name:tls:user:password:timeout:)`` validates it.
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// `host:port`, or `[v6]:port` for an IPv6 address.
        public var description: String {
            host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        }
    }

    /// TLS towards the cluster: PEM files for the trusted CA and the client certificate.
    public struct TLS: Sendable, Hashable {
        /// The CA certificates (PEM) that sign the members' certificates; nil: the system's roots.
        public var caFile: String?
        /// The client certificate chain (PEM), for etcd's `--client-cert-auth`; needs ``keyFile``.
        public var certificateFile: String?
        /// The client certificate's private key (PEM); needs ``certificateFile``.
        public var keyFile: String?

        /// TLS settings; every file is optional.
        public init(caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil) {
            self.caFile = caFile
            self.certificateFile = certificateFile
            self.keyFile = keyFile
        }
    }

    /// The default client port of etcd.
    public static let defaultPort = 2379
    /// The default deadline of one storage call, in seconds.
    public static let defaultTimeout: TimeInterval = 5
    /// The allowed deadlines, in seconds.
    public static let timeoutRange: ClosedRange<TimeInterval> = 0.1...600
    /// The environment variable that holds the password of the URL's `user`.
    public static let passwordEnvironmentVariable = "KEYSTONE_ETCD_PASSWORD"

    /// The cluster's members, tried in this order (then round-robin from the one that last answered).
    public var endpoints: [Endpoint]
    /// The keychain's name: 1...128 of `[A-Za-z0-9._-]`.
    public var name: String
    /// nil: plain HTTP.
    public var tls: TLS?
    /// The etcd user (etcd's user authentication), or nil.
    public var user: String?
    /// The etcd user's password; never in ``description`` or ``url``.
    public var password: String?
    /// The deadline of one storage call across all endpoints, in seconds: 0.1...600, default 5.
    public var timeout: TimeInterval

    /// A validated configuration.
    ///
    /// - Throws: `EngineError` `errSecParam` when there is no endpoint, an endpoint's host or port is invalid, an
    ///   endpoint is listed twice, the name is not 1...128 of `[A-Za-z0-9._-]`, the timeout is outside 0.1...600 s,
    ///   a user has no password (or a password no user), or a TLS certificate comes without its key.
    public init(endpoints: [Endpoint], name: String, tls: TLS? = nil, user: String? = nil, password: String? = nil,
                timeout: TimeInterval = 5) throws {
        guard !endpoints.isEmpty else { throw EngineError.param("etcd: no endpoint given (etcd://host:port/NAME)") }
        var seen = Set<Endpoint>()
        for endpoint in endpoints {
            try Self.validate(endpoint)
            guard seen.insert(Self.normalized(endpoint)).inserted else {
                throw EngineError.param("etcd: the endpoint \(endpoint) is listed twice")
            }
        }
        try Self.validate(name: name)
        guard timeout.isFinite, Self.timeoutRange.contains(timeout) else {
            throw EngineError.param("etcd: the timeout \(timeout) s is out of range: give 0.1...600 seconds")
        }
        if let user {
            guard !user.isEmpty, !user.contains(where: { $0.isNewline || $0 == "\0" }) else {
                throw EngineError.param("etcd: the user name is empty or holds a control character")
            }
            guard password != nil else {
                throw EngineError.param("etcd: user \(user) needs a password: set \(Self.passwordEnvironmentVariable)")
            }
        } else if password != nil {
            throw EngineError.param("etcd: a password was given without a user (?user=NAME)")
        }
        if let tls {
            if (tls.certificateFile == nil) != (tls.keyFile == nil) {
                throw EngineError.param("etcd: a TLS client certificate needs both cert= and key= (the certificate and its private key)")
            }
            for file in [tls.caFile, tls.certificateFile, tls.keyFile].compactMap({ $0 }) where file.isEmpty {
                throw EngineError.param("etcd: an empty TLS file path was given")
            }
        }
        self.endpoints = endpoints
        self.name = name
        self.tls = tls
        self.user = user
        self.password = password
        self.timeout = timeout
    }

    /// A configuration from an `etcd://` or `etcds://` URL.
    ///
    /// `etcd://host:port[,host:port…]/NAME[?user=U&timeout=S]` (plain) or
    /// `etcds://…/NAME?ca=PATH&cert=PATH&key=PATH` (TLS). Default port 2379. The password comes from
    /// `environment["KEYSTONE_ETCD_PASSWORD"]` when `user` is given, never from the URL.
    ///
    /// - Throws: `EngineError` `errSecParam` naming what is wrong: another scheme, no or a bad endpoint, a port out of
    ///   1...65535, a bad name, an unknown or repeated query parameter, TLS files on `etcd://`, a user without
    ///   `KEYSTONE_ETCD_PASSWORD`, and any `user:password@` in the URL (passwords in URLs end up in process lists and
    ///   shell history).
    public init(url: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        let tlsScheme: Bool
        let rest: Substring
        if let range = url.range(of: "etcds://", options: [.anchored, .caseInsensitive]) {
            tlsScheme = true
            rest = url[range.upperBound...]
        } else if let range = url.range(of: "etcd://", options: [.anchored, .caseInsensitive]) {
            tlsScheme = false
            rest = url[range.upperBound...]
        } else {
            throw EngineError.param("etcd: not an etcd URL (etcd://host:port,…/NAME or etcds://…): \(Self.redacted(url))")
        }
        guard let slash = rest.firstIndex(of: "/") else {
            throw EngineError.param("etcd: the URL names no keychain: etcd://host:port/NAME")
        }
        let authority = rest[..<slash]
        // User information ends at the last `@` before the query: a password holding `/` or `@` is refused whole
        // (an `@` is never valid elsewhere there: names and hosts cannot hold one), and never echoed in a message.
        let beforeQuery = rest.prefix { $0 != "?" && $0 != "#" }
        if let at = beforeQuery.lastIndex(of: "@") {
            let userInfo = beforeQuery[..<at]
            if userInfo.contains(":") {
                throw EngineError.param("etcd: a password in the URL is refused (passwords in URLs end up in process lists and shell history): give ?user=NAME and the password in \(Self.passwordEnvironmentVariable)")
            }
            throw EngineError.param("etcd: give the user as ?user=NAME (and the password in \(Self.passwordEnvironmentVariable)), not as NAME@ in the URL")
        }
        var endpoints: [Endpoint] = []
        for part in authority.split(separator: ",", omittingEmptySubsequences: false) {
            endpoints.append(try Self.parseEndpoint(part))
        }
        let pathAndQuery = rest[rest.index(after: slash)...]
        let name: Substring
        let query: Substring?
        if let question = pathAndQuery.firstIndex(of: "?") {
            name = pathAndQuery[..<question]
            query = pathAndQuery[pathAndQuery.index(after: question)...]
        } else {
            name = pathAndQuery
            query = nil
        }
        if name.contains("#") { throw EngineError.param("etcd: a URL fragment (#…) is not allowed") }

        var parameters: [String: String] = [:]
        if let query, !query.isEmpty {
            for pair in query.split(separator: "&", omittingEmptySubsequences: false) {
                guard let equals = pair.firstIndex(of: "=") else {
                    throw EngineError.param("etcd: the URL parameter '\(pair)' has no value (NAME=VALUE)")
                }
                let key = String(pair[..<equals])
                guard let value = String(pair[pair.index(after: equals)...]).removingPercentEncoding, !value.isEmpty else {
                    throw EngineError.param("etcd: the URL parameter \(key) has an empty or badly percent-encoded value")
                }
                guard ["user", "timeout", "ca", "cert", "key", "password"].contains(key) else {
                    throw EngineError.param("etcd: unknown URL parameter '\(key)' (known: user, timeout, and ca, cert, key with etcds://)")
                }
                guard parameters[key] == nil else { throw EngineError.param("etcd: the URL parameter \(key) is given twice") }
                parameters[key] = value
            }
        }
        if parameters["password"] != nil {
            throw EngineError.param("etcd: a password in the URL is refused (passwords in URLs end up in process lists and shell history): set \(Self.passwordEnvironmentVariable)")
        }
        var timeout = Self.defaultTimeout
        if let text = parameters["timeout"] {
            guard let value = TimeInterval(text), value.isFinite else {
                throw EngineError.param("etcd: the timeout '\(text)' is not a number of seconds")
            }
            timeout = value
        }
        var tls: TLS?
        if tlsScheme {
            tls = TLS(caFile: parameters["ca"], certificateFile: parameters["cert"], keyFile: parameters["key"])
        } else if parameters["ca"] != nil || parameters["cert"] != nil || parameters["key"] != nil {
            throw EngineError.param("etcd: ca=, cert= and key= need TLS: write etcds://")
        }
        let user = parameters["user"]
        var password: String?
        if let user {
            guard let fromEnvironment = environment[Self.passwordEnvironmentVariable] else {
                throw EngineError.param("etcd: user \(user) needs a password: set \(Self.passwordEnvironmentVariable) in the environment")
            }
            password = fromEnvironment
        }
        try self.init(endpoints: endpoints, name: String(name), tls: tls, user: user, password: password, timeout: timeout)
    }

    /// The canonical URL: every endpoint with its port, the name, and the non-default parameters; never the password.
    public var url: String {
        var parameters: [(String, String)] = []
        if let user { parameters.append(("user", user)) }
        if timeout != Self.defaultTimeout { parameters.append(("timeout", Self.format(seconds: timeout))) }
        if let tls {
            if let ca = tls.caFile { parameters.append(("ca", ca)) }
            if let cert = tls.certificateFile { parameters.append(("cert", cert)) }
            if let key = tls.keyFile { parameters.append(("key", key)) }
        }
        var url = (tls == nil ? "etcd://" : "etcds://") + endpoints.map(\.description).joined(separator: ",") + "/" + name
        if !parameters.isEmpty {
            url += "?" + parameters.map { "\($0.0)=\(Self.percentEncode($0.1))" }.joined(separator: "&")
        }
        return url
    }

    /// The canonical ``url`` (no password).
    public var description: String { url }

    // MARK: - Validation and parsing

    static func validate(name: String) throws {
        guard (1...128).contains(name.utf8.count) else {
            throw EngineError.param("etcd: the keychain name must be 1 to 128 characters of A-Z a-z 0-9 . _ - (got \(name.utf8.count))")
        }
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-".utf8)
        guard name.utf8.allSatisfy(allowed.contains) else {
            throw EngineError.param("etcd: the keychain name '\(name)' may only hold A-Z a-z 0-9 . _ -")
        }
    }

    static func validate(_ endpoint: Endpoint) throws {
        guard (1...65535).contains(endpoint.port) else {
            throw EngineError.param("etcd: the port \(endpoint.port) of \(endpoint.host) is out of range 1...65535")
        }
        let host = endpoint.host
        guard !host.isEmpty else { throw EngineError.param("etcd: an endpoint has an empty host") }
        if host.contains(":") {
            let hex = Set("0123456789abcdefABCDEF:.".utf8)
            guard host.utf8.allSatisfy(hex.contains), host.utf8.count <= 45 else {
                throw EngineError.param("etcd: '\(host)' is not an IPv6 address")
            }
        } else {
            let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-".utf8)
            guard host.utf8.allSatisfy(allowed.contains), host.utf8.count <= 253, !host.hasPrefix("-") else {
                throw EngineError.param("etcd: '\(host)' is not a host name or an IP address")
            }
        }
    }

    static func normalized(_ endpoint: Endpoint) -> Endpoint {
        Endpoint(host: endpoint.host.lowercased(), port: endpoint.port)
    }

    static func parseEndpoint(_ text: Substring) throws -> Endpoint {
        guard !text.isEmpty else { throw EngineError.param("etcd: an empty endpoint in the URL (host:port,host:port)") }
        let host: Substring
        let portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw EngineError.param("etcd: the IPv6 endpoint '\(text)' lacks its ']'")
            }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if after.isEmpty {
                portText = nil
            } else if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else {
                throw EngineError.param("etcd: unexpected '\(after)' after the IPv6 address in '\(text)'")
            }
        } else {
            let colons = text.filter { $0 == ":" }.count
            if colons > 1 { throw EngineError.param("etcd: write an IPv6 endpoint in brackets: [\(text)]:2379") }
            if let colon = text.firstIndex(of: ":") {
                host = text[..<colon]
                portText = text[text.index(after: colon)...]
            } else {
                host = text
                portText = nil
            }
        }
        var port = defaultPort
        if let portText {
            guard !portText.isEmpty, portText.allSatisfy({ $0.isASCII && $0.isNumber }), portText.count <= 5, let value = Int(portText) else {
                throw EngineError.param("etcd: the port '\(portText)' of \(host) is not a number 1...65535")
            }
            port = value
        }
        let endpoint = Endpoint(host: String(host), port: port)
        try validate(endpoint)
        return endpoint
    }

    static func format(seconds: TimeInterval) -> String {
        if seconds == seconds.rounded(), abs(seconds) < 1e15 { return String(Int64(seconds)) }
        return String(seconds)
    }

    static func percentEncode(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~/:")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }

    /// A URL for an error message: any `userinfo@` blanked out (up to the last `@` before the query).
    static func redacted(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url.count > 200 ? String(url.prefix(200)) + "…" : url }
        let rest = url[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex { $0 == "?" || $0 == "#" } ?? rest.endIndex
        if let at = rest[..<authorityEnd].lastIndex(of: "@") {
            return String(url[..<schemeEnd.upperBound]) + "***@" + String(rest[rest.index(after: at)...])
        }
        return url
    }
}
#endif
