import Foundation
import Keystone

/// Items of a freedesktop Secret Service collection (GNOME Keyring, KWallet, KeePassXC) written by other programs,
/// as generic passwords.
///
/// Build it from the collection's items: the `keystone import --from secret-service[:COLLECTION]` verb reads them with
/// `SecretServiceStorage.foreignItems()` (Linux, `KeychainSecretService`); tests can pass entries directly.
///
/// The mapping:
///
/// - `secret-tool store --label=L service S account A` → `GenericPassword(service: S, account: A)`, label L;
/// - Python `keyring.set_password(S, U, P)` (attributes `service`, `username`, `application`) →
///   `GenericPassword(service: S, account: U)`;
/// - the account is the first of the attributes `account`, `username`, `user`; none gives an empty account.
///
/// Decision: an item without a `service` attribute (a browser's or a network manager's, keyed differently) is
/// ``ImportProblem/Kind/unsupported`` and named by its label: there is no service to give it. Items Keystone itself
/// stored in the collection are not foreign and are never listed.
public struct SecretServiceImportSource: ImportSource {
    /// One item of the collection.
    public struct Entry: Sendable {
        /// The item's label.
        public var label: String
        /// The item's attributes.
        public var attributes: [String: String]
        /// The secret, or nil when the service returned none.
        public var secret: Data?

        /// An entry.
        public init(label: String, attributes: [String: String], secret: Data?) {
            self.label = label
            self.attributes = attributes
            self.secret = secret
        }
    }

    /// The collection's items.
    public var entries: [Entry]
    /// The collection's name, for reports.
    public var collection: String

    /// A source over `entries`.
    public init(entries: [Entry], collection: String = "default") {
        self.entries = entries
        self.collection = collection
    }

    public var name: String { "secret-service" }

    /// The entries as candidates.
    public func read() throws -> ImportBatch {
        var batch = ImportBatch()
        for entry in entries {
            let origin = "secret-service:\(ReportText.escaped(collection)) item \(ReportText.quoted(entry.label))"
            guard let service = entry.attributes["service"], !service.isEmpty else {
                batch.problems.append(ImportProblem(.unsupported, origin: origin, reason: "no 'service' attribute (attributes: \(entry.attributes.keys.sorted().map(ReportText.escaped).joined(separator: ", ")))"))
                continue
            }
            guard let secret = entry.secret else {
                batch.problems.append(ImportProblem(.invalid, origin: origin, reason: "the Secret Service returned no secret (is the collection locked?)"))
                continue
            }
            let account = entry.attributes["account"] ?? entry.attributes["username"] ?? entry.attributes["user"] ?? ""
            do {
                let item = try GenericPassword(service: service, account: account)
                batch.candidates.append(ImportCandidate(item: .generic(item), secret: secret, label: entry.label.nilIfEmpty, origin: origin))
            } catch {
                batch.problems.append(ImportProblem(.invalid, origin: origin, reason: KeychainError(converting: error).reason))
            }
        }
        return batch
    }
}
