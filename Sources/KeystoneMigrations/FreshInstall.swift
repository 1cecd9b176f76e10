import Foundation
import Keystone
import KeychainServices

/// The keychain items a fresh install wipes: the app's own, named one by one. Never the whole keychain.
///
/// ```swift
/// let scope = FreshInstallScope([.service("com.example.api"), .server("mail.example.com")])
/// ```
public struct FreshInstallScope: Sendable, CustomStringConvertible {
    /// One bounded part of the app's items.
    public enum Target: Sendable, CustomStringConvertible {
        /// Every generic password of the service (synchronizable or not), in the access group given (or the
        /// keychain's `ItemOptions.accessGroup`; every entitled group when both are nil).
        case service(String, accessGroup: String? = nil)
        /// Every internet password of the server (synchronizable or not), in the access group given (or the
        /// keychain's; every entitled group when both are nil).
        case server(String, accessGroup: String? = nil)
        /// One item (synchronizable or not).
        case item(any KeychainItem)

        /// Names only.
        public var description: String {
            switch self {
            case .service(let service, let group): return "genp service=\"\(service)\"" + (group.map { " group=\"\($0)\"" } ?? "")
            case .server(let server, let group): return "inet server=\"\(server)\"" + (group.map { " group=\"\($0)\"" } ?? "")
            case .item(let item): return item.description
            }
        }
    }

    /// The parts, wiped in order.
    public let targets: [Target]

    /// A scope of `targets`.
    public init(_ targets: [Target]) { self.targets = targets }

    /// The generic passwords of `services`.
    public init(services: [String]) { self.targets = services.map { .service($0) } }

    /// The targets, one per line.
    public var description: String { targets.map(\.description).joined(separator: "\n") }
}

/// What `Keychain.wipeIfFreshInstall(_:marker:onSharedKeychain:)` does with a keychain several machines share.
///
/// The install marker is per machine (a file on this machine, this machine's defaults); a shared keychain (an etcd
/// cluster) is the fleet's. A wipe keyed on a per-machine marker would run on every new machine, replica or
/// container with an ephemeral file system, and delete the items the rest of the fleet saved for the service.
public enum SharedKeychainPolicy: Sendable, Hashable {
    /// Refuse: nothing is read or deleted, ``FreshInstallResult/refusedSharedKeychain`` (the default).
    case refuse
    /// Wipe as on a keychain of one machine. Only for an app whose marker is shared as the keychain is (an
    /// ``InstallMarkerStore`` kept in the same cluster), or that wants each new machine to wipe the fleet's items.
    case wipeAnyway
}

/// What `Keychain.wipeIfFreshInstall(_:marker:onSharedKeychain:)` did.
public enum FreshInstallResult: Sendable, CustomStringConvertible {
    /// The marker was there: not a fresh install; nothing was deleted.
    case notFresh
    /// A fresh install: the items listed (attributes, never secrets) were deleted, then the marker written.
    case wiped([ItemAttributes])
    /// Nothing decided this launch, nothing deleted and no marker written: the marker could not be read, or it
    /// cannot be written here (its directory cannot be created or written: a `HOME` that does not exist, a
    /// read-only data directory), or the keychain was locked (-25308) or failed. The next launch tries again. Items
    /// may have been deleted already only when the wipe itself failed midway or the marker's write failed after its
    /// check passed (the wipe is idempotent).
    case deferred(KeychainError)
    /// The keychain is shared by several machines (its storage says so: an etcd keychain) and the call did not ask
    /// for ``SharedKeychainPolicy/wipeAnyway``: nothing was read, deleted or written.
    case refusedSharedKeychain

    /// `notFresh`, `wiped N items`, `deferred: <error>`, `refusedSharedKeychain`.
    public var description: String {
        switch self {
        case .notFresh: return "notFresh"
        case .wiped(let items): return "wiped \(items.count) items"
        case .deferred(let error): return "deferred: \(error)"
        case .refusedSharedKeychain: return "refusedSharedKeychain"
        }
    }
}

extension Keychain {
    /// Deletes the app's own items left by a previous install (the keychain outlives an uninstall), once per
    /// install: when `marker` is absent, wipes every target of `scope`, then writes the marker.
    ///
    /// - Each delete is bounded by class and service or server (and access group), or is one item's identity:
    ///   never a match-all delete; other services and classes are untouched.
    /// - Before deleting anything it proves the marker can be written (``InstallMarkerStore/checkWritable()``:
    ///   for a file, its directory is created and a temporary file written there and removed). When it cannot, the
    ///   wipe is ``FreshInstallResult/deferred(_:)``, nothing is deleted, and the reason is logged (`KeystoneLog`):
    ///   a marker that can never be written (a daemon whose `HOME` does not exist, a read-only data directory)
    ///   would otherwise make every launch delete what the previous one saved.
    /// - The order is wipe, then marker: a crash in between wipes again at the next launch (deleting nothing
    ///   more), then writes the marker.
    /// - A marker that cannot be read is never "fresh": ``FreshInstallResult/deferred(_:)``, nothing deleted.
    /// - A locked keychain (-25308) or any keychain failure during the wipe: ``FreshInstallResult/deferred(_:)``,
    ///   no marker written, so the next launch retries.
    /// - A keychain shared by several machines (`KeychainEngine`'s storage reports
    ///   `isSharedAcrossMachines`: an etcd keychain, or a storage of the app's own) is refused
    ///   (``FreshInstallResult/refusedSharedKeychain``, logged) unless `onSharedKeychain` is
    ///   ``SharedKeychainPolicy/wipeAnyway``: the marker is per machine, the keychain is not, so every new machine
    ///   would wipe the fleet's items.
    ///
    /// ```swift
    /// // Early at launch, after the first unlock:
    /// let marker = try FileInstallMarker(appIdentifier: "com.example.app")
    /// switch try keychain.wipeIfFreshInstall(FreshInstallScope(services: ["com.example.api"]), marker: marker) {
    /// case .notFresh, .wiped: break
    /// case .deferred: break  // try again at the next launch (or after protectedDataDidBecomeAvailable)
    /// case .refusedSharedKeychain: break  // a fleet's keychain: wipe per install some other way, or not at all
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - scope: the app's items to wipe.
    ///   - marker: where this install records that it ran.
    ///   - onSharedKeychain: what to do when several machines share the keychain; ``SharedKeychainPolicy/refuse``
    ///     by default.
    /// - Returns: what happened.
    /// - Throws: `KeychainError.invalidItem` for a scope naming an empty service, server or access group
    ///   (which would widen a delete), before anything is read or deleted.
    /// - Important: Use ``FileInstallMarker`` (or a store as durable): a `UserDefaults` marker can read as absent
    ///   before the first unlock, which would wipe the items of a user who never reinstalled.
    /// - Important: Adopting this in an app already shipped: every existing user has no marker yet and would be
    ///   wiped once. Before the first call, write the marker yourself (`marker.writeMarker()`) when the app's own
    ///   data shows an existing install (a file only a launched app writes, a defaults key read after the first
    ///   unlock).
    public func wipeIfFreshInstall(_ scope: FreshInstallScope, marker: some InstallMarkerStore,
                                   onSharedKeychain: SharedKeychainPolicy = .refuse) throws(KeychainError) -> FreshInstallResult {
        let queries = try scope.targets.map { target throws(KeychainError) in try wipeQuery(target) }
        if onSharedKeychain == .refuse {
            let shared: Bool
            do {
                shared = try storageIsSharedAcrossMachines()
            } catch {
                return .deferred(error)
            }
            if shared {
                // Decision: refused before the marker is even read, so the outcome does not depend on this
                // machine's state: the app learns it on its first launch, on every machine.
                KeystoneLog.logger.warning("fresh-install wipe refused: the keychain is shared by several machines and the install marker is per machine; pass onSharedKeychain: .wipeAnyway to wipe anyway",
                                           metadata: ["scope": "\(scope.targets.count) targets"])
                return .refusedSharedKeychain
            }
        }
        do {
            if try marker.markerExists() { return .notFresh }
        } catch {
            return .deferred(error)
        }
        do {
            try marker.checkWritable()
        } catch {
            KeystoneLog.logger.warning("fresh-install wipe deferred: the install marker cannot be written, so nothing was deleted",
                                       metadata: ["reason": "\(error.reason)", "status": "\(error.status)"])
            return .deferred(error)
        }
        var deleted: [ItemAttributes] = []
        for query in queries {
            do {
                let rows = try attributeRows(query)
                guard !rows.isEmpty else { continue }
                _ = try reportsExistence { try store.delete(query) }
                deleted += rows.map(ItemAttributes.init)
            } catch {
                return .deferred(KeychainError(converting: error))
            }
        }
        do {
            try marker.writeMarker()
        } catch {
            KeystoneLog.logger.warning("fresh-install wipe: the install marker could not be written after the wipe; the next launch wipes again",
                                       metadata: ["reason": "\(error.reason)", "status": "\(error.status)", "deleted": "\(deleted.count)"])
            return .deferred(error)
        }
        return .wiped(deleted)
    }

    /// Whether several machines share this keychain's rows: the storage of the engine behind ``store`` (on Linux,
    /// `SystemKeychain`'s is the process's default keychain) says so. False for a store Keystone cannot see into.
    func storageIsSharedAcrossMachines() throws(KeychainError) -> Bool {
        if let engine = Self.engine(behind: store) { return engine.storage.isSharedAcrossMachines }
        #if !canImport(Darwin)
        if store is SystemKeychain {
            do {
                return try KeychainServicesDefaults.currentEngine().storage.isSharedAcrossMachines
            } catch {
                throw KeychainError(converting: error)
            }
        }
        #endif
        return false
    }

    /// The bounded delete query of one target.
    func wipeQuery(_ target: FreshInstallScope.Target) throws(KeychainError) -> KeychainQuery {
        switch target {
        case .service(let service, let group):
            do {
                return try serviceQuery(service, accessGroup: group)
            } catch {
                throw KeychainError(converting: error)
            }
        case .server(let server, let group):
            guard !server.isEmpty else { throw KeychainError(code: .invalidItem, reason: "a fresh-install wipe needs a non-empty server") }
            var query: KeychainQuery = [
                Key.class: .string(ItemClass.internetPassword.rawValue),
                Key.server: .string(server),
                Key.synchronizable: .string(Key.synchronizableAny),
            ]
            if let group = group ?? options.accessGroup {
                guard !group.isEmpty else { throw KeychainError(code: .invalidItem, reason: "the access group must not be empty") }
                query[Key.accessGroup] = .string(group)
            }
            Self.addPlatformKeys(&query)
            return query
        case .item(let item):
            var query = identity(of: item)
            query[Key.synchronizable] = .string(Key.synchronizableAny)
            return query
        }
    }
}
