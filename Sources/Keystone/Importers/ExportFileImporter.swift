import Foundation

/// A password manager's export file (CSV or JSON), read as typed items.
///
/// Recognised by their header (CSV) or shape (JSON):
///
/// | Source | Layout |
/// |---|---|
/// | Chrome, Edge (CSV) | `name,url,username,password,note` (`note` optional) |
/// | Firefox (CSV) | `url,username,password,httpRealm,formActionOrigin,guid,timeCreated,…` |
/// | Bitwarden (CSV) | `folder,favorite,type,name,notes,fields,reprompt,login_uri,login_username,login_password,login_totp` |
/// | Keystone (CSV) | `class,service,account,server,protocol,port,path,label,comment,password` |
/// | Bitwarden (JSON) | the unencrypted export: `{"encrypted": false, "items": [{"type": 1, "login": {...}}]}` |
/// | Keystone (JSON) | `{"format": "keystone-export", "version": 1, "items": [...]}` (see <doc:Importing>) |
///
/// A URL with a host becomes an ``InternetPassword`` (server, protocol from the scheme, port; browser exports are
/// per origin, so their path is dropped; Keystone's form keeps it); anything else a ``GenericPassword`` whose
/// service is the entry's name. Header names are matched without regard to case, in any column order.
///
/// Decisions: notes, custom fields and TOTP seeds are not imported (they often hold more secrets and would be stored
/// as plain attributes): each result names what was left out. An entry without a password is
/// ``ImportProblem/Kind/unsupported``; an entry without a name or URL, with a bad port, or a row with the wrong
/// number of fields is ``ImportProblem/Kind/invalid``.
public struct ExportFileImportSource: ImportSource {
    /// CSV or JSON.
    public enum Format: String, Sendable, Hashable {
        /// Comma-separated values (RFC 4180).
        case csv
        /// JSON.
        case json
    }

    /// The file's contents.
    public var contents: Data
    /// The file's name, for reports and errors.
    public var fileName: String
    /// How the contents are encoded.
    public var format: Format

    /// Reads the file at `url`; the format is `format`, else the file's extension (`.json` is JSON, anything else CSV).
    ///
    /// - Throws: ``KeychainError`` with `errSecIO` (-36) when the file cannot be read.
    public init(contentsOf url: URL, format: Format? = nil) throws {
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw KeychainError(status: Status.io, reason: "cannot read \(url.path): check that it exists and is readable")
        }
        self.init(contents: data, fileName: url.lastPathComponent, format: format ?? (url.pathExtension.lowercased() == "json" ? .json : .csv))
    }

    /// A source over `contents`.
    public init(contents: Data, fileName: String, format: Format) {
        self.contents = contents
        self.fileName = fileName
        self.format = format
    }

    public var name: String { format.rawValue }

    /// Parses the file.
    ///
    /// - Throws: ``KeychainError/Code/decodingFailed`` naming the file (and line) when it is not UTF-8, not valid
    ///   CSV or JSON, has an unknown header or shape, or is an encrypted Bitwarden export.
    public func read() throws -> ImportBatch {
        guard let text = String(data: contents, encoding: .utf8) else {
            throw KeychainError(code: .decodingFailed, reason: "\(fileName) is not UTF-8 text")
        }
        switch format {
        case .csv: return try readCSV(text)
        case .json: return try readJSON()
        }
    }

    // MARK: - CSV

    enum Layout: String, CaseIterable {
        case chrome, firefox, bitwarden, keystone

        var required: [String] {
            switch self {
            case .chrome: ["name", "url", "username", "password"]
            case .firefox: ["url", "username", "password", "httprealm"]
            case .bitwarden: ["type", "name", "login_uri", "login_username", "login_password"]
            case .keystone: ["class", "service", "account", "server", "protocol", "port", "path", "label", "comment", "password"]
            }
        }
    }

    func readCSV(_ text: String) throws -> ImportBatch {
        let records = try CSV.parse(text, file: fileName)
        guard let header = records.first else { return ImportBatch() }
        let names = header.fields.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        // Most specific first: Keystone's and Bitwarden's headers also hold name/url-like columns.
        guard let layout = [Layout.keystone, .bitwarden, .firefox, .chrome].first(where: { $0.required.allSatisfy(names.contains) }) else {
            throw KeychainError(code: .decodingFailed, reason: "\(fileName) line 1: unknown header (\(names.joined(separator: ","))); expected the CSV export of Chrome/Edge, Firefox, Bitwarden or Keystone (class,service,account,server,protocol,port,path,label,comment,password)")
        }
        var batch = ImportBatch()
        for record in records.dropFirst() {
            let origin = "\(fileName) line \(record.line)"
            guard record.fields.count == names.count else {
                batch.problems.append(ImportProblem(.invalid, origin: origin, reason: "\(record.fields.count) fields where the header has \(names.count)"))
                continue
            }
            var row: [String: String] = [:]
            for (name, value) in zip(names, record.fields) { row[name] = value }
            switch entry(row, layout: layout, origin: origin) {
            case .success(let candidate?): batch.candidates.append(candidate)
            case .success(nil): break
            case .failure(let problem): batch.problems.append(problem)
            }
        }
        return batch
    }

    /// One row as a candidate; nil for a row to ignore silently (none so far); a problem otherwise.
    func entry(_ row: [String: String], layout: Layout, origin: String) -> Result<ImportCandidate?, ImportProblem> {
        func value(_ key: String) -> String { row[key] ?? "" }
        var notes: [String] = []
        switch layout {
        case .chrome:
            if !value("note").isEmpty { notes.append("a note") }
            return Self.web(url: value("url"), name: value("name"), account: value("username"), password: value("password"),
                            realm: nil, label: value("name").nilIfEmpty, notes: notes, origin: origin)
        case .firefox:
            return Self.web(url: value("url"), name: "", account: value("username"), password: value("password"),
                            realm: value("httprealm").nilIfEmpty, label: nil, notes: notes, origin: origin)
        case .bitwarden:
            guard value("type").lowercased() == "login" else {
                return .failure(ImportProblem(.unsupported, origin: origin, reason: "a Bitwarden \(value("type").isEmpty ? "entry without a type" : "'\(value("type"))' entry"): only logins are imported"))
            }
            if !value("notes").isEmpty { notes.append("a note") }
            if !value("fields").isEmpty { notes.append("custom fields") }
            if !value("login_totp").isEmpty { notes.append("a TOTP seed") }
            // Bitwarden joins several URIs with commas: the first is the login's.
            let uri = value("login_uri").split(separator: ",").first.map { String($0).trimmingCharacters(in: .whitespaces) } ?? ""
            return Self.web(url: uri, name: value("name"), account: value("login_username"), password: value("login_password"),
                            realm: nil, label: value("name").nilIfEmpty, notes: notes, origin: origin)
        case .keystone:
            return Self.keystoneEntry(itemClass: value("class"), service: value("service"), account: value("account"), server: value("server"),
                                      protocolName: value("protocol"), port: value("port"), path: value("path"),
                                      securityDomain: "", authenticationType: "", accessGroup: "",
                                      label: value("label"), comment: value("comment"), accessibility: "", synchronizable: nil,
                                      secret: Data(value("password").utf8), origin: origin)
        }
    }

    /// A browser or password-manager login: an internet password when `url` has a host, else a generic password
    /// named `name` (or the URL).
    static func web(url: String, name: String, account: String, password: String, realm: String?, label: String?,
                    notes: [String], origin: String) -> Result<ImportCandidate?, ImportProblem> {
        guard !password.isEmpty else {
            return .failure(ImportProblem(.unsupported, origin: origin, reason: "no password (a site saved as 'never' or a passkey)"))
        }
        if let components = URLComponents(string: url), let host = components.host, !host.isEmpty {
            let ptcl = components.scheme.flatMap { InternetProtocol(scheme: $0) }
            do {
                let item = try InternetPassword(server: host, account: account, protocol: ptcl,
                                                authenticationType: realm == nil ? nil : .httpBasic, port: components.port,
                                                securityDomain: realm)
                return .success(ImportCandidate(item: .internet(item), secret: Data(password.utf8), label: label, origin: origin, notes: notes))
            } catch {
                return .failure(ImportProblem(.invalid, origin: origin, reason: KeychainError(converting: error).reason))
            }
        }
        let service = name.isEmpty ? url : name
        guard !service.isEmpty else {
            return .failure(ImportProblem(.invalid, origin: origin, reason: "neither a URL with a host nor a name: the item would have an empty service"))
        }
        do {
            let item = try GenericPassword(service: service, account: account)
            return .success(ImportCandidate(item: .generic(item), secret: Data(password.utf8), label: label, origin: origin, notes: notes))
        } catch {
            return .failure(ImportProblem(.invalid, origin: origin, reason: KeychainError(converting: error).reason))
        }
    }

    /// Keystone's own entry (CSV row or JSON object).
    static func keystoneEntry(itemClass: String, service: String, account: String, server: String, protocolName: String,
                              port: String, path: String, securityDomain: String, authenticationType: String, accessGroup: String,
                              label: String, comment: String, accessibility: String, synchronizable: Bool?,
                              secret: Data, origin: String) -> Result<ImportCandidate?, ImportProblem> {
        var accessibilityValue: Accessibility?
        if !accessibility.isEmpty {
            guard let value = Accessibility(rawValue: accessibility) ?? Accessibility.named(accessibility) else {
                return .failure(ImportProblem(.invalid, origin: origin, reason: "unknown accessibility '\(accessibility)'"))
            }
            accessibilityValue = value
        }
        let item: ImportTarget
        do {
            switch itemClass.lowercased() {
            case "genp", "generic", "generic-password", "":
                guard !service.isEmpty else {
                    return .failure(ImportProblem(.invalid, origin: origin, reason: "an empty service: a generic password needs one"))
                }
                item = .generic(try GenericPassword(service: service, account: account, accessGroup: accessGroup.nilIfEmpty))
            case "inet", "internet", "internet-password":
                guard !server.isEmpty else {
                    return .failure(ImportProblem(.invalid, origin: origin, reason: "an empty server: an internet password needs one"))
                }
                var ptcl: InternetProtocol?
                if !protocolName.isEmpty {
                    guard let value = InternetProtocol(rawValue: protocolName) ?? InternetProtocol(scheme: protocolName) else {
                        return .failure(ImportProblem(.invalid, origin: origin, reason: "unknown protocol '\(protocolName)'"))
                    }
                    ptcl = value
                }
                var portValue: Int?
                if !port.isEmpty {
                    guard let value = Int(port), (0...65535).contains(value) else {
                        return .failure(ImportProblem(.invalid, origin: origin, reason: "the port '\(port)' is not in 0...65535"))
                    }
                    portValue = value == 0 ? nil : value
                }
                var authType: AuthenticationType?
                if !authenticationType.isEmpty {
                    guard let value = AuthenticationType(rawValue: authenticationType) else {
                        return .failure(ImportProblem(.invalid, origin: origin, reason: "unknown authentication type '\(authenticationType)'"))
                    }
                    authType = value
                }
                item = .internet(try InternetPassword(server: server, account: account, protocol: ptcl, authenticationType: authType,
                                                      port: portValue, path: path.nilIfEmpty, securityDomain: securityDomain.nilIfEmpty,
                                                      accessGroup: accessGroup.nilIfEmpty))
            default:
                return .failure(ImportProblem(.invalid, origin: origin, reason: "unknown class '\(itemClass)': use genp or inet"))
            }
        } catch {
            return .failure(ImportProblem(.invalid, origin: origin, reason: KeychainError(converting: error).reason))
        }
        return .success(ImportCandidate(item: item, secret: secret, label: label.nilIfEmpty, comment: comment.nilIfEmpty,
                                        accessibility: accessibilityValue, synchronizable: synchronizable, origin: origin))
    }

    // MARK: - JSON

    func readJSON() throws -> ImportBatch {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: contents)
        } catch {
            // JSONSerialization's message names a character offset only, never the content.
            throw KeychainError(code: .decodingFailed, reason: "\(fileName) is not valid JSON")
        }
        if let root = object as? [String: Any], root["format"] as? String == "keystone-export" {
            return try readKeystoneJSON(root)
        }
        if let root = object as? [String: Any], root["items"] is [Any], root["encrypted"] != nil || root["folders"] != nil {
            return try readBitwardenJSON(root)
        }
        throw KeychainError(code: .decodingFailed, reason: "\(fileName): unknown JSON export; expected Bitwarden's unencrypted export or Keystone's (\"format\": \"keystone-export\")")
    }

    func readBitwardenJSON(_ root: [String: Any]) throws -> ImportBatch {
        if root["encrypted"] as? Bool == true {
            throw KeychainError(code: .decodingFailed, reason: "\(fileName) is an encrypted Bitwarden export: export again as unencrypted JSON (File > Export vault > .json), import it, then delete it")
        }
        var batch = ImportBatch()
        for (index, element) in ((root["items"] as? [Any]) ?? []).enumerated() {
            let item = element as? [String: Any] ?? [:]
            let name = item["name"] as? String ?? ""
            let origin = "\(fileName) item \(index + 1)" + (name.isEmpty ? "" : " (\"\(name)\")")
            guard (item["type"] as? Int) == 1, let login = item["login"] as? [String: Any] else {
                batch.problems.append(ImportProblem(.unsupported, origin: origin, reason: "not a login (a note, card or identity): only logins are imported"))
                continue
            }
            var notes: [String] = []
            if let text = item["notes"] as? String, !text.isEmpty { notes.append("a note") }
            if let fields = item["fields"] as? [Any], !fields.isEmpty { notes.append("custom fields") }
            if let totp = login["totp"] as? String, !totp.isEmpty { notes.append("a TOTP seed") }
            let uri = ((login["uris"] as? [Any])?.first as? [String: Any])?["uri"] as? String ?? ""
            switch Self.web(url: uri, name: name, account: login["username"] as? String ?? "", password: login["password"] as? String ?? "",
                            realm: nil, label: name.nilIfEmpty, notes: notes, origin: origin) {
            case .success(let candidate?): batch.candidates.append(candidate)
            case .success(nil): break
            case .failure(let problem): batch.problems.append(problem)
            }
        }
        return batch
    }

    func readKeystoneJSON(_ root: [String: Any]) throws -> ImportBatch {
        guard (root["version"] as? Int) == 1 else {
            throw KeychainError(code: .decodingFailed, reason: "\(fileName): unsupported keystone-export version (this Keystone reads version 1)")
        }
        var batch = ImportBatch()
        for (index, element) in ((root["items"] as? [Any]) ?? []).enumerated() {
            let origin = "\(fileName) item \(index + 1)"
            guard let item = element as? [String: Any] else {
                batch.problems.append(ImportProblem(.invalid, origin: origin, reason: "not an object"))
                continue
            }
            func text(_ key: String) -> String {
                if let s = item[key] as? String { return s }
                if let n = item[key] as? Int { return String(n) }
                return ""
            }
            let secret: Data
            if let password = item["password"] as? String {
                secret = Data(password.utf8)
            } else if let base64 = item["passwordBase64"] as? String, let data = Data(base64Encoded: base64) {
                secret = data
            } else {
                batch.problems.append(ImportProblem(.invalid, origin: origin, reason: "no \"password\" (UTF-8 text) or \"passwordBase64\""))
                continue
            }
            switch Self.keystoneEntry(itemClass: text("class"), service: text("service"), account: text("account"), server: text("server"),
                                      protocolName: text("protocol"), port: text("port"), path: text("path"),
                                      securityDomain: text("securityDomain"), authenticationType: text("authenticationType"),
                                      accessGroup: text("accessGroup"), label: text("label"), comment: text("comment"),
                                      accessibility: text("accessibility"), synchronizable: item["synchronizable"] as? Bool,
                                      secret: secret, origin: origin) {
            case .success(let candidate?): batch.candidates.append(candidate)
            case .success(nil): break
            case .failure(let problem): batch.problems.append(problem)
            }
        }
        return batch
    }
}

extension InternetProtocol {
    /// The protocol of a URL scheme (`https` → `.https`), or nil for a scheme without one.
    public init?(scheme: String) {
        switch scheme.lowercased() {
        case "http": self = .http
        case "https": self = .https
        case "ftp": self = .ftp
        case "ftps": self = .ftps
        case "ssh", "sftp": self = .ssh
        case "smtp": self = .smtp
        case "imap": self = .imap
        case "imaps": self = .imaps
        case "pop3", "pop": self = .pop3
        case "pop3s", "pops": self = .pop3S
        case "ldap": self = .ldap
        case "ldaps": self = .ldaps
        case "smb": self = .smb
        case "telnet": self = .telnet
        case "irc": self = .irc
        case "ircs": self = .ircs
        case "nntp", "news": self = .nntp
        case "afp": self = .afp
        case "rtsp": self = .rtsp
        case "ipp": self = .ipp
        case "socks", "socks5": self = .socks
        default: return nil
        }
    }
}

extension Accessibility {
    /// The accessibility named as in Swift (`whenUnlocked`, `afterFirstUnlockThisDeviceOnly`…), or nil.
    static func named(_ name: String) -> Accessibility? {
        let all: [Accessibility] = [.whenUnlocked, .afterFirstUnlock, .always, .whenUnlockedThisDeviceOnly,
                                    .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly, .whenPasscodeSetThisDeviceOnly]
        return all.first { "\($0)" == name }
    }
}

extension String {
    var nilIfEmpty: String? { isEmpty ? nil : self }
}
