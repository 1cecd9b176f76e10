import Foundation
import Keystone

// Bitwarden's unencrypted JSON export and Keystone's own: parsed whole (JSONSerialization), within
// ImportLimits.maxDocumentBytes, each item's values within ImportLimits.maxFieldBytes.

extension ExportFileImportSource {
    /// The JSON export's bytes, refused over ``ImportLimits/maxDocumentBytes`` (JSON is parsed whole).
    func jsonDocument() throws -> Data {
        let tooLarge = KeychainError(status: Status.dataTooLarge, reason: "\(shownName) is over the \(ImportLimits.size(limits.maxDocumentBytes)) limit for a JSON export (ImportLimits.maxDocumentBytes)")
        switch input {
        case .data(let data):
            guard data.count <= limits.maxDocumentBytes else { throw tooLarge }
            return data
        case .file(let url):
            do {
                let handle = try FileHandle(forReadingFrom: url)
                defer { try? handle.close() }
                let data = try handle.read(upToCount: limits.maxDocumentBytes + 1) ?? Data()
                guard data.count <= limits.maxDocumentBytes else { throw tooLarge }
                return data
            } catch let error as KeychainError {
                throw error
            } catch {
                throw KeychainError(status: Status.io, reason: "cannot read \(ReportText.escaped(url.path)): check that it exists and is readable")
            }
        }
    }

    /// The first string in `value` (an item, recursively) over ``ImportLimits/maxFieldBytes``: its key.
    func oversizedKey(in value: Any, key: String = "") -> String? {
        switch value {
        case let text as String: return text.utf8.count > limits.maxFieldBytes ? key : nil
        case let object as [String: Any]:
            for (name, element) in object.sorted(by: { $0.key < $1.key }) {
                if let found = oversizedKey(in: element, key: name) { return found }
            }
        case let array as [Any]:
            for element in array {
                if let found = oversizedKey(in: element, key: key) { return found }
            }
        default: break
        }
        return nil
    }

    /// The problem of a JSON item with a value over the field limit, or nil.
    func oversizedItem(_ item: Any, origin: String) -> ImportProblem? {
        guard let key = oversizedKey(in: item) else { return nil }
        return ImportProblem(.invalid, origin: origin, reason: "the \(ReportText.quoted(key)) value is over the \(ImportLimits.size(limits.maxFieldBytes)) limit for a field (ImportLimits.maxFieldBytes, --max-field-size); its value is not shown",
                             status: Status.dataTooLarge)
    }

    func readJSON() throws -> ImportBatch {
        let object: Any
        let document = try jsonDocument()
        do {
            object = try JSONSerialization.jsonObject(with: document)
        } catch {
            // JSONSerialization's message names a character offset only, never the content.
            throw KeychainError(code: .decodingFailed, reason: "\(shownName) is not valid JSON")
        }
        if let root = object as? [String: Any], root["format"] as? String == "keystone-export" {
            return try readKeystoneJSON(root)
        }
        if let root = object as? [String: Any], root["items"] is [Any], root["encrypted"] != nil || root["folders"] != nil {
            return try readBitwardenJSON(root)
        }
        throw KeychainError(code: .decodingFailed, reason: "\(shownName): unknown JSON export; expected Bitwarden's unencrypted export or Keystone's (\"format\": \"keystone-export\")")
    }

    func readBitwardenJSON(_ root: [String: Any]) throws -> ImportBatch {
        if root["encrypted"] as? Bool == true {
            throw KeychainError(code: .decodingFailed, reason: "\(shownName) is an encrypted Bitwarden export: export again as unencrypted JSON (File > Export vault > .json), import it, then delete it")
        }
        var batch = ImportBatch()
        for (index, element) in ((root["items"] as? [Any]) ?? []).enumerated() {
            let item = element as? [String: Any] ?? [:]
            let name = item["name"] as? String ?? ""
            let origin = "\(shownName) item \(index + 1)" + (name.isEmpty ? "" : " (\(ReportText.quoted(name)))")
            if let problem = oversizedItem(item, origin: origin) {
                batch.problems.append(problem)
                continue
            }
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
            throw KeychainError(code: .decodingFailed, reason: "\(shownName): unsupported keystone-export version (this Keystone reads version 1)")
        }
        var batch = ImportBatch()
        for (index, element) in ((root["items"] as? [Any]) ?? []).enumerated() {
            let origin = "\(shownName) item \(index + 1)"
            guard let item = element as? [String: Any] else {
                batch.problems.append(ImportProblem(.invalid, origin: origin, reason: "not an object"))
                continue
            }
            if let problem = oversizedItem(item, origin: origin) {
                batch.problems.append(problem)
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
