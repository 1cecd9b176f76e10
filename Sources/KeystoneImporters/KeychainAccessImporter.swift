import Foundation
import Keystone

/// Items written by kishikawakatsumi/KeychainAccess (`Keychain`), as typed items.
///
/// `Keychain(service:)` writes a generic password with `kSecAttrService` = the service (`Keychain()`: the bundle
/// identifier, or `""` when there is none), `kSecAttrAccount` = the key, `kSecAttrAccessible` (default
/// `afterFirstUnlock`), `kSecAttrSynchronizable` (default false), and label, comment and access group when set.
/// `Keychain(server:protocolType:authenticationType:)` writes an internet password with `kSecAttrServer` = the URL's
/// host, `kSecAttrPort` = its port (absent when the URL has none), `kSecAttrProtocol` and `kSecAttrAuthenticationType`
/// (default `.default`).
///
/// Those items are already Keystone's layout: imported into the same keychain with the same service they are
/// reported `unchanged` and kept. Give ``targetService`` to move generic passwords to another service (needed for
/// `Keychain()` without a bundle identifier, whose items have an empty service).
public struct KeychainAccessImportSource: ImportSource {
    /// Which KeychainAccess keychain.
    public enum Layout: Sendable, Hashable {
        /// `Keychain(service:)` (`""` for `Keychain()` without a bundle identifier).
        case service(String)
        /// `Keychain(server:protocolType:authenticationType:)`: the URL's host, protocol and authentication type.
        case server(String, protocol: InternetProtocol, authenticationType: AuthenticationType = .default)
    }

    /// The store KeychainAccess wrote into.
    public var store: any KeychainStore
    /// Which items.
    public var layout: Layout
    /// For ``Layout/service(_:)``: the service the typed items get; nil keeps the source service.
    public var targetService: String?
    /// Only items in this access group, or nil for any.
    public var accessGroup: String?

    /// A KeychainAccess source.
    public init(store: any KeychainStore, layout: Layout, targetService: String? = nil, accessGroup: String? = nil) {
        self.store = store
        self.layout = layout
        self.targetService = targetService
        self.accessGroup = accessGroup
    }

    public var name: String { "keychain-access" }

    /// The items of ``layout``.
    ///
    /// - Throws: keychain statuses (`errSecInteractionNotAllowed` when locked). Items of an empty service without a
    ///   ``targetService`` are invalid entries.
    public func read() throws -> ImportBatch {
        var filter: KeychainQuery = [:]
        if let accessGroup { filter[Key.accessGroup] = .string(accessGroup) }
        var batch = ImportBatch()
        switch layout {
        case .service(let service):
            // An empty service: the engine stores a missing service as empty, so list them all and keep the empty ones.
            if !service.isEmpty { filter[Key.service] = .string(service) }
            for legacy in try LegacyKeychainItems.list(in: store, itemClass: .genericPassword, filter: filter) where (legacy.service ?? "") == service {
                let origin = "KeychainAccess service \(ReportText.quoted(service)) key \(ReportText.quoted(legacy.account))"
                LegacyKeychainItems.candidate(legacy, as: LegacyKeychainItems.generic(service: targetService ?? service, account: legacy.account,
                                                                                      accessGroup: legacy.accessGroup, origin: origin),
                                              origin: origin, into: &batch)
            }
        case .server(let server, let ptcl, let authenticationType):
            filter[Key.server] = .string(server)
            filter[Key.protocol] = .string(ptcl.rawValue)
            filter[Key.authenticationType] = .string(authenticationType.rawValue)
            for legacy in try LegacyKeychainItems.list(in: store, itemClass: .internetPassword, filter: filter) {
                let origin = "KeychainAccess server \(ReportText.quoted(server)) key \(ReportText.quoted(legacy.account))"
                let port = legacy.attributes[Key.port]?.integerValue.flatMap { $0 == 0 ? nil : Int($0) }
                let path = legacy.attributes[Key.path]?.textValue.flatMap { $0.isEmpty ? nil : $0 }
                let item: Result<ImportTarget, ImportProblem>
                do {
                    item = .success(.internet(try InternetPassword(server: server, account: legacy.account, protocol: ptcl,
                                                                   authenticationType: authenticationType, port: port, path: path,
                                                                   accessGroup: legacy.accessGroup)))
                } catch {
                    item = .failure(ImportProblem(.invalid, origin: origin, reason: KeychainError(converting: error).reason))
                }
                LegacyKeychainItems.candidate(legacy, as: item, origin: origin, into: &batch)
            }
        }
        return batch
    }
}
