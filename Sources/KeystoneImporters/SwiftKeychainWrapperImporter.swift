import Foundation
import Keystone

/// Items written by jrendel/SwiftKeychainWrapper (`KeychainWrapper`), as typed generic passwords.
///
/// SwiftKeychainWrapper writes a generic password with `kSecAttrService` = its `serviceName`
/// (`KeychainWrapper.standard`: the bundle identifier, else `"SwiftKeychainWrapper"`), **`kSecAttrAccount` and
/// `kSecAttrGeneric` both = the key's UTF-8 bytes as Data**, `kSecAttrAccessible` (default `whenUnlocked`),
/// `kSecAttrSynchronizable` and, when set, `kSecAttrAccessGroup`. Strings are stored as UTF-8 and Data as is;
/// Int, Double, Bool and NSCoding objects are archived with `NSKeyedArchiver` (a binary property list).
///
/// Decision: strings and Data are imported; archived values (bytes starting `bplist00`) are reported as
/// ``ImportProblem/Kind/unsupported`` and left in place (unarchiving them needs Foundation's NSKeyedUnarchiver and
/// the app's classes). Each item becomes `GenericPassword(service: targetService, account: key)`; with the default
/// target (the same service) the typed item IS the legacy item (the keychain compares a Data account with a String
/// account by their bytes), so it is reported `unchanged` and kept: nothing needs moving.
public struct SwiftKeychainWrapperImportSource: ImportSource {
    /// The store SwiftKeychainWrapper wrote into.
    public var store: any KeychainStore
    /// `KeychainWrapper(serviceName:)`; `KeychainWrapper.standard` uses the bundle identifier or `"SwiftKeychainWrapper"`.
    public var serviceName: String
    /// The service the typed items get; nil keeps ``serviceName``.
    public var targetService: String?
    /// Only items in this access group, or nil for any.
    public var accessGroup: String?

    /// A SwiftKeychainWrapper source.
    public init(store: any KeychainStore, serviceName: String = "SwiftKeychainWrapper", targetService: String? = nil, accessGroup: String? = nil) {
        self.store = store
        self.serviceName = serviceName
        self.targetService = targetService
        self.accessGroup = accessGroup
    }

    public var name: String { "swift-keychain-wrapper" }

    /// The generic passwords of ``serviceName``.
    ///
    /// - Throws: `KeychainError.Code.invalidItem` for an empty service name; keychain statuses.
    public func read() throws -> ImportBatch {
        guard !serviceName.isEmpty else { throw KeychainError(code: .invalidItem, reason: "give SwiftKeychainWrapper's service name (--source-service)") }
        var filter: KeychainQuery = [Key.service: .string(serviceName)]
        if let accessGroup { filter[Key.accessGroup] = .string(accessGroup) }
        var batch = ImportBatch()
        for legacy in try LegacyKeychainItems.list(in: store, itemClass: .genericPassword, filter: filter) {
            let origin = "SwiftKeychainWrapper key \(ReportText.quoted(legacy.account))"
            if let secret = legacy.secret, secret.starts(with: Data("bplist00".utf8)) {
                batch.problems.append(ImportProblem(.unsupported, origin: origin, reason: "the value is an NSKeyedArchiver archive (an Int, Double, Bool or object): read it with KeychainWrapper and save it again; it was left in place"))
                continue
            }
            LegacyKeychainItems.candidate(legacy, as: LegacyKeychainItems.generic(service: targetService ?? serviceName, account: legacy.account,
                                                                                  accessGroup: legacy.accessGroup, origin: origin),
                                          origin: origin, into: &batch)
        }
        return batch
    }
}
