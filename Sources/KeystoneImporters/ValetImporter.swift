import Foundation
import Keystone

/// Items written by square/Valet, moved to typed generic passwords.
///
/// Valet writes a generic password with `kSecAttrAccount` = the key, `kSecValueData` = the value (a String as
/// UTF-8), and a service that names its configuration:
///
/// - `Valet.valet(with:accessibility:)`: `VAL_VALValet_initWithIdentifier:accessibility:_<identifier>_<Accessible…>`
/// - `Valet.iCloudValet(with:accessibility:)`: `VAL_VALSynchronizableValet_initWithIdentifier:accessibility:_…`
///   (and `kSecAttrSynchronizable` true)
/// - `Valet.sharedGroupValet(with:accessibility:)`: `…_initWithSharedAccessGroupIdentifier:accessibility:_<group>_…`
///   (and `kSecAttrAccessGroup` = `<app id prefix>.<group>`)
/// - Secure Enclave Valets: `VAL_VALSecureEnclaveValet_…` / `VAL_VALSinglePromptSecureEnclaveValet_…` with the access
///   control's name appended, and a `kSecAttrAccessControl`.
///
/// where `<Accessible…>` is `AccessibleWhenUnlocked`, `AccessibleAfterFirstUnlock`,
/// `AccessibleWhenPasscodeSetThisDeviceOnly`, `AccessibleWhenUnlockedThisDeviceOnly` or
/// `AccessibleAfterFirstUnlockThisDeviceOnly`. Each item becomes `GenericPassword(service: targetService ?? identifier,
/// account: key)` with Valet's accessibility, access group and synchronizable. Secure Enclave items need the user to be
/// read: they are reported ``ImportProblem/Kind/unsupported`` and left in place.
public struct ValetImportSource: ImportSource {
    /// The store Valet wrote into.
    public var store: any KeychainStore
    /// Only this Valet identifier (or shared group identifier), or nil for every Valet's items.
    public var identifier: String?
    /// The service the typed items get; nil uses each item's Valet identifier.
    public var targetService: String?

    /// A Valet source.
    public init(store: any KeychainStore, identifier: String? = nil, targetService: String? = nil) {
        self.store = store
        self.identifier = identifier
        self.targetService = targetService
    }

    public var name: String { "valet" }

    /// A Valet service string, parsed: the configuration, whether it is a shared access group Valet, the identifier.
    public struct ServiceName: Sendable, Hashable {
        /// `VALValet`, `VALSynchronizableValet`, `VALSecureEnclaveValet` or `VALSinglePromptSecureEnclaveValet`.
        public var configuration: String
        /// Whether the Valet was made with a shared access group identifier.
        public var sharedAccessGroup: Bool
        /// The Valet's identifier (or shared group identifier).
        public var identifier: String
        /// Valet's accessibility name with whatever follows it (the access control's name for Secure Enclave Valets).
        public var accessibility: String

        static let configurations = ["VALValet", "VALSynchronizableValet", "VALSecureEnclaveValet", "VALSinglePromptSecureEnclaveValet"]

        /// Parses `service`; nil when it is not a Valet service.
        public init?(_ service: String) {
            guard service.hasPrefix("VAL_") else { return nil }
            let rest = service.dropFirst(4)
            guard let configuration = Self.configurations.first(where: { rest.hasPrefix($0 + "_") }) else { return nil }
            var tail = rest.dropFirst(configuration.count + 1)
            if tail.hasPrefix("initWithIdentifier:accessibility:_") {
                tail = tail.dropFirst("initWithIdentifier:accessibility:_".count)
                sharedAccessGroup = false
            } else if tail.hasPrefix("initWithSharedAccessGroupIdentifier:accessibility:_") {
                tail = tail.dropFirst("initWithSharedAccessGroupIdentifier:accessibility:_".count)
                sharedAccessGroup = true
            } else {
                return nil
            }
            // The identifier may hold underscores; the accessibility name never does: split at the last one.
            guard let split = tail.lastIndex(of: "_"), tail[tail.index(after: split)...].hasPrefix("Accessible") else { return nil }
            self.configuration = configuration
            identifier = String(tail[..<split])
            accessibility = String(tail[tail.index(after: split)...])
            guard !identifier.isEmpty else { return nil }
        }
    }

    /// Every Valet item (of ``identifier`` when set).
    ///
    /// - Throws: keychain statuses (`errSecInteractionNotAllowed` when locked).
    public func read() throws -> ImportBatch {
        var batch = ImportBatch()
        for legacy in try LegacyKeychainItems.list(in: store, itemClass: .genericPassword) {
            guard let service = legacy.service, let parsed = ServiceName(service) else { continue }
            if let identifier, parsed.identifier != identifier { continue }
            let origin = "Valet \(ReportText.escaped(parsed.identifier)) key \(ReportText.quoted(legacy.account))"
            if parsed.configuration.contains("SecureEnclave") {
                batch.problems.append(ImportProblem(.unsupported, origin: origin, reason: "a Secure Enclave Valet item needs the user to be read: move it with Valet (migrateObjects); it was left in place"))
                continue
            }
            LegacyKeychainItems.candidate(legacy, as: LegacyKeychainItems.generic(service: targetService ?? parsed.identifier, account: legacy.account,
                                                                                  accessGroup: legacy.accessGroup, origin: origin),
                                          origin: origin, into: &batch)
        }
        return batch
    }
}
