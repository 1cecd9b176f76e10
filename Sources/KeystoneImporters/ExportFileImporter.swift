import Foundation
import Keystone

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
/// A URL with a host becomes an `InternetPassword` (server, protocol from the scheme, port; browser exports are
/// per origin, so their path is dropped; Keystone's form keeps it); anything else a `GenericPassword` whose
/// service is the entry's name. Header names are matched without regard to case, in any column order.
///
/// Decisions: notes, custom fields and TOTP seeds are not imported (they often hold more secrets and would be stored
/// as plain attributes): each result names what was left out. An entry without a password is
/// ``ImportProblem/Kind/unsupported``; an entry without a name or URL, with a bad port, or a row with the wrong
/// number of fields is ``ImportProblem/Kind/invalid``. A header naming a column twice is refused (ambiguous). A CSV
/// file is read incrementally (one record in memory); a field, record or JSON export over the ``limits`` is refused
/// with `errSecDataTooLarge` naming the entry, never showing the value.
public struct ExportFileImportSource: ImportSource {
    /// CSV or JSON.
    public enum Format: String, Sendable, Hashable {
        /// Comma-separated values (RFC 4180).
        case csv
        /// JSON.
        case json
    }

    /// The bytes to read: given, or a file read when the source is read (CSV: incrementally, 64 KiB at a time).
    enum Input {
        case data(Data)
        case file(URL)
    }

    let input: Input
    /// The file's name, for reports and errors (shown escaped).
    public var fileName: String
    /// How the contents are encoded.
    public var format: Format
    /// The size limits on a field, a record and a JSON export (see ``ImportLimits``).
    public var limits: ImportLimits

    /// A source over the file at `url`, read when the source is read (a CSV file incrementally, keeping one record in
    /// memory); the format is `format`, else the file's extension (`.json` is JSON, anything else CSV).
    ///
    /// - Throws: `KeychainError` with `errSecIO` (-36) when the file cannot be opened for reading.
    public init(contentsOf url: URL, format: Format? = nil, limits: ImportLimits = .default) throws {
        do {
            try FileHandle(forReadingFrom: url).close()
        } catch {
            throw KeychainError(status: Status.io, reason: "cannot read \(ReportText.escaped(url.path)): check that it exists and is readable")
        }
        input = .file(url)
        fileName = url.lastPathComponent
        self.format = format ?? (url.pathExtension.lowercased() == "json" ? .json : .csv)
        self.limits = limits
    }

    /// A source over `contents`.
    public init(contents: Data, fileName: String, format: Format, limits: ImportLimits = .default) {
        input = .data(contents)
        self.fileName = fileName
        self.format = format
        self.limits = limits
    }

    public var name: String { format.rawValue }

    /// The file name as reports show it.
    var shownName: String { ReportText.escaped(fileName) }

    /// CSV streams: `Keychain.importItems(from:options:)` reads it twice with one record in memory. JSON is parsed whole.
    public var streamsEntries: Bool { format == .csv }

    /// Parses the file.
    ///
    /// - Throws: `KeychainError.Code.decodingFailed` naming the file (and line) when it is not UTF-8, not valid
    ///   CSV or JSON, has an unknown or ambiguous header (a column named twice) or shape, or is an encrypted Bitwarden
    ///   export; `errSecDataTooLarge` (-25302) when the CSV header or the JSON export is over the ``limits``;
    ///   `errSecIO` when the file cannot be read. An entry over the limits is an invalid entry of the batch, with
    ///   `errSecDataTooLarge` as its ``ImportProblem/status``.
    public func read() throws -> ImportBatch {
        var batch = ImportBatch()
        try forEachEntry { entry in
            switch entry {
            case .candidate(let candidate): batch.candidates.append(candidate)
            case .problem(let problem): batch.problems.append(problem)
            }
        }
        return batch
    }

    /// Visits the entries in file order: a CSV file is read incrementally, one record in memory at a time.
    ///
    /// - Throws: as ``read()``.
    public func forEachEntry(_ body: (ImportEntry) throws -> Void) throws {
        switch format {
        case .csv: try forEachCSVEntry(body)
        case .json:
            let batch = try readJSON()
            for candidate in batch.candidates { try body(.candidate(candidate)) }
            for problem in batch.problems { try body(.problem(problem)) }
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

    /// Runs `body` with a CSV reader over the input (the file opened for the duration).
    func withCSVReader<T>(_ body: (inout CSV.Reader) throws -> T) throws -> T {
        switch input {
        case .data(let data):
            var reader = CSV.Reader(data: data, file: shownName, limits: limits)
            return try body(&reader)
        case .file(let url):
            let handle: FileHandle
            do {
                handle = try FileHandle(forReadingFrom: url)
            } catch {
                throw KeychainError(status: Status.io, reason: "cannot read \(ReportText.escaped(url.path)): check that it exists and is readable")
            }
            defer { try? handle.close() }
            var reader = CSV.Reader(handle: handle, file: shownName, limits: limits)
            return try body(&reader)
        }
    }

    func forEachCSVEntry(_ body: (ImportEntry) throws -> Void) throws {
        try withCSVReader { reader in
            guard let header = try reader.next() else { return }
            if header.oversized != nil {
                throw KeychainError(status: Status.dataTooLarge, reason: "\(shownName) line 1: the header is over the limits (\(ImportLimits.size(limits.maxFieldBytes)) a field, \(ImportLimits.size(limits.maxRecordBytes)) a line, \(CSV.maxFields) fields): not a password export")
            }
            let names = header.fields.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            // Decision: a column named twice is ambiguous (which one holds the password?): the file is refused rather
            // than letting the last one win. Unnamed columns are ignored, so several may be empty.
            var counted: Set<String> = []
            for name in names where !name.isEmpty && !counted.insert(name).inserted {
                throw KeychainError(code: .decodingFailed, reason: "\(shownName) line 1: the column \(ReportText.quoted(name)) appears twice: the header is ambiguous. Remove or rename one of them")
            }
            // Most specific first: Keystone's and Bitwarden's headers also hold name/url-like columns.
            guard let layout = [Layout.keystone, .bitwarden, .firefox, .chrome].first(where: { $0.required.allSatisfy(names.contains) }) else {
                throw KeychainError(code: .decodingFailed, reason: "\(shownName) line 1: unknown header (\(ReportText.escaped(names.joined(separator: ",")))); expected the CSV export of Chrome/Edge, Firefox, Bitwarden or Keystone (class,service,account,server,protocol,port,path,label,comment,password)")
            }
            while let record = try reader.next() {
                let origin = "\(shownName) line \(record.line)"
                if let oversize = record.oversized {
                    let reason: String
                    switch oversize {
                    case .field(let index):
                        let column = index < names.count && !names[index].isEmpty ? "the \(ReportText.quoted(names[index])) field" : "field \(index + 1)"
                        reason = "\(column) is over the \(ImportLimits.size(limits.maxFieldBytes)) limit for a field (ImportLimits.maxFieldBytes, --max-field-size); its value is not shown"
                    case .record:
                        reason = "the record is over the \(ImportLimits.size(limits.maxRecordBytes)) limit for a record or has more than \(CSV.maxFields) fields (ImportLimits.maxRecordBytes, --max-record-size)"
                    }
                    try body(.problem(ImportProblem(.invalid, origin: origin, reason: reason, status: Status.dataTooLarge)))
                    continue
                }
                guard record.fields.count == names.count else {
                    try body(.problem(ImportProblem(.invalid, origin: origin, reason: "\(record.fields.count) fields where the header has \(names.count)")))
                    continue
                }
                var row: [String: String] = [:]
                for (name, value) in zip(names, record.fields) where !name.isEmpty { row[name] = value }
                switch entry(row, layout: layout, origin: origin) {
                case .success(let candidate?): try body(.candidate(candidate))
                case .success(nil): break
                case .failure(let problem): try body(.problem(problem))
                }
            }
        }
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
                return .failure(ImportProblem(.unsupported, origin: origin, reason: "a Bitwarden \(value("type").isEmpty ? "entry without a type" : "'\(ReportText.escaped(value("type")))' entry"): only logins are imported"))
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
                return .failure(ImportProblem(.invalid, origin: origin, reason: "unknown accessibility '\(ReportText.escaped(accessibility))'"))
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
                        return .failure(ImportProblem(.invalid, origin: origin, reason: "unknown protocol '\(ReportText.escaped(protocolName))'"))
                    }
                    ptcl = value
                }
                var portValue: Int?
                if !port.isEmpty {
                    guard let value = Int(port), (0...65535).contains(value) else {
                        return .failure(ImportProblem(.invalid, origin: origin, reason: "the port '\(ReportText.escaped(port))' is not in 0...65535"))
                    }
                    portValue = value == 0 ? nil : value
                }
                var authType: AuthenticationType?
                if !authenticationType.isEmpty {
                    guard let value = AuthenticationType(rawValue: authenticationType) else {
                        return .failure(ImportProblem(.invalid, origin: origin, reason: "unknown authentication type '\(ReportText.escaped(authenticationType))'"))
                    }
                    authType = value
                }
                item = .internet(try InternetPassword(server: server, account: account, protocol: ptcl, authenticationType: authType,
                                                      port: portValue, path: path.nilIfEmpty, securityDomain: securityDomain.nilIfEmpty,
                                                      accessGroup: accessGroup.nilIfEmpty))
            default:
                return .failure(ImportProblem(.invalid, origin: origin, reason: "unknown class '\(ReportText.escaped(itemClass))': use genp or inet"))
            }
        } catch {
            return .failure(ImportProblem(.invalid, origin: origin, reason: KeychainError(converting: error).reason))
        }
        return .success(ImportCandidate(item: item, secret: secret, label: label.nilIfEmpty, comment: comment.nilIfEmpty,
                                        accessibility: accessibilityValue, synchronizable: synchronizable, origin: origin))
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
