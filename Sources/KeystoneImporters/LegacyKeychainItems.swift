import Foundation
import Keystone

/// One item another keychain library wrote: its attributes as stored, its secret, and the exact query naming it.
struct LegacyKeychainItem {
    var attributes: KeychainQuery
    var secret: Data?
    /// Class + primary key exactly as stored (an account given as Data stays Data), for reading and deleting it.
    var identity: KeychainQuery

    var service: String? { attributes[Key.service]?.textValue }
    var account: String { attributes[Key.account]?.textValue ?? "" }
    var accessGroup: String? { attributes[Key.accessGroup]?.stringValue.flatMap { $0.isEmpty ? nil : $0 } }
    var synchronizable: Bool { attributes[Key.synchronizable]?.boolValue ?? false }
    var accessibility: Accessibility? { attributes[Key.accessible]?.stringValue.flatMap(Accessibility.init(rawValue:)) }
    var label: String? { attributes[Key.label]?.textValue }
    var comment: String? { attributes[Key.comment]?.textValue }
    var hasAccessControl: Bool { ItemAttributes(attributes).hasAccessControl }
}

enum LegacyKeychainItems {
    /// Every item of `itemClass` matching `filter` (attributes only, then each secret by its exact identity, so an
    /// access-controlled item is listed but never read: it would prompt).
    ///
    /// - Throws: keychain statuses as `KeychainError` (`errSecInteractionNotAllowed` when locked); none found is
    ///   an empty list.
    static func list(in store: any KeychainStore, itemClass: ItemClass, filter: KeychainQuery = [:]) throws -> [LegacyKeychainItem] {
        var query: KeychainQuery = [
            Key.class: .string(itemClass.rawValue),
            Key.synchronizable: .string(Key.synchronizableAny),
        ]
        for (key, value) in filter { query[key] = value }
        Keychain.addPlatformKeys(&query)
        let rows = try Keychain.attributeRows(in: store, query)
        return try rows.map { attributes in
            var identity: KeychainQuery = [Key.class: .string(itemClass.rawValue)]
            let keys = itemClass == .internetPassword
                ? [Key.server, Key.account, Key.protocol, Key.authenticationType, Key.port, Key.path, Key.securityDomain, Key.accessGroup]
                : [Key.service, Key.account, Key.accessGroup]
            for key in keys { if let value = attributes[key] { identity[key] = value } }
            if itemClass == .genericPassword, identity[Key.service] == nil { identity[Key.service] = .string("") }
            identity[Key.synchronizable] = .bool(attributes[Key.synchronizable]?.boolValue ?? false)
            Keychain.addPlatformKeys(&identity)
            var item = LegacyKeychainItem(attributes: attributes, secret: nil, identity: identity)
            if !item.hasAccessControl {
                var read = identity
                read[Key.returnData] = .bool(true)
                read[Key.matchLimit] = .string(Key.matchLimitOne)
                do {
                    if case .data(let data)? = try store.copyMatching(read) { item.secret = data }
                } catch let error where KeychainError.itemNotFound ~= error {
                    item.secret = nil
                } catch {
                    throw KeychainError(converting: error)
                }
            }
            return item
        }.sorted { ($0.service ?? "", $0.account) < ($1.service ?? "", $1.account) }
    }

    /// A generic password for `service` / `account`, or an invalid-entry problem.
    static func generic(service: String, account: String, accessGroup: String?, origin: String) -> Result<ImportTarget, ImportProblem> {
        do {
            return .success(.generic(try GenericPassword(service: service, account: account, accessGroup: accessGroup)))
        } catch {
            return .failure(ImportProblem(.invalid, origin: origin, reason: KeychainError(converting: error).reason))
        }
    }

    /// The candidate moving `legacy` to `item`, or the problem that keeps it where it is.
    static func candidate(_ legacy: LegacyKeychainItem, as item: Result<ImportTarget, ImportProblem>, origin: String,
                          into batch: inout ImportBatch) {
        switch item {
        case .failure(let problem):
            batch.problems.append(problem)
        case .success(let item):
            guard !legacy.hasAccessControl else {
                batch.problems.append(ImportProblem(.unsupported, origin: origin, reason: "the item has an access control (reading it needs the user): move it with the library itself; it was left in place"))
                return
            }
            guard let secret = legacy.secret else {
                batch.problems.append(ImportProblem(.invalid, origin: origin, reason: "the item has no secret"))
                return
            }
            batch.candidates.append(ImportCandidate(item: item, secret: secret, label: legacy.label, comment: legacy.comment,
                                                    accessibility: legacy.accessibility, synchronizable: legacy.synchronizable,
                                                    origin: origin, legacyItem: legacy.identity))
        }
    }
}
