import Foundation

/// The keychain items a fresh install wipes: the app's own, named one by one. Never the whole keychain.
///
/// ```swift
/// let scope = FreshInstallScope([.service("com.example.api"), .server("mail.example.com")])
/// ```
public struct FreshInstallScope: Sendable, CustomStringConvertible {
    /// One bounded part of the app's items.
    public enum Target: Sendable, CustomStringConvertible {
        /// Every generic password of the service (synchronizable or not), in the access group given (or the
        /// keychain's ``ItemOptions/accessGroup``; every entitled group when both are nil).
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

/// What ``Keychain/wipeIfFreshInstall(_:marker:)`` did.
public enum FreshInstallResult: Sendable, CustomStringConvertible {
    /// The marker was there: not a fresh install; nothing was deleted.
    case notFresh
    /// A fresh install: the items listed (attributes, never secrets) were deleted, then the marker written.
    case wiped([ItemAttributes])
    /// Nothing decided this launch: the marker could not be read, the keychain was locked (-25308) or failed, or
    /// the marker could not be written. No marker was written: the next launch tries again. Items may have been
    /// deleted already (the wipe is idempotent).
    case deferred(KeychainError)

    /// `notFresh`, `wiped N items`, `deferred: <error>`.
    public var description: String {
        switch self {
        case .notFresh: return "notFresh"
        case .wiped(let items): return "wiped \(items.count) items"
        case .deferred(let error): return "deferred: \(error)"
        }
    }
}

extension Keychain {
    /// Deletes the app's own items left by a previous install (the keychain outlives an uninstall), once per
    /// install: when `marker` is absent, wipes every target of `scope`, then writes the marker.
    ///
    /// - Each delete is bounded by class and service or server (and access group), or is one item's identity:
    ///   never a match-all delete; other services and classes are untouched.
    /// - The order is wipe, then marker: a crash in between wipes again at the next launch (deleting nothing
    ///   more), then writes the marker.
    /// - A marker that cannot be read is never "fresh": ``FreshInstallResult/deferred(_:)``, nothing deleted.
    /// - A locked keychain (-25308) or any keychain failure during the wipe: ``FreshInstallResult/deferred(_:)``,
    ///   no marker written, so the next launch retries.
    ///
    /// ```swift
    /// // Early at launch, after the first unlock:
    /// let marker = try FileInstallMarker(appIdentifier: "com.example.app")
    /// switch keychain.wipeIfFreshInstall(FreshInstallScope(services: ["com.example.api"]), marker: marker) {
    /// case .notFresh, .wiped: break
    /// case .deferred: break  // try again at the next launch (or after protectedDataDidBecomeAvailable)
    /// }
    /// ```
    ///
    /// - Returns: what happened.
    /// - Throws: ``KeychainError/invalidItem`` for a scope naming an empty service, server or access group
    ///   (which would widen a delete), before anything is read or deleted.
    /// - Important: Use ``FileInstallMarker`` (or a store as durable): a `UserDefaults` marker can read as absent
    ///   before the first unlock, which would wipe the items of a user who never reinstalled.
    /// - Important: Adopting this in an app already shipped: every existing user has no marker yet and would be
    ///   wiped once. Before the first call, write the marker yourself (`marker.writeMarker()`) when the app's own
    ///   data shows an existing install (a file only a launched app writes, a defaults key read after the first
    ///   unlock).
    public func wipeIfFreshInstall(_ scope: FreshInstallScope, marker: some InstallMarkerStore) throws(KeychainError) -> FreshInstallResult {
        let queries = try scope.targets.map { target throws(KeychainError) in try wipeQuery(target) }
        do {
            if try marker.markerExists() { return .notFresh }
        } catch {
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
            return .deferred(error)
        }
        return .wiped(deleted)
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
            var query = identity(of: item, options)
            query[Key.synchronizable] = .string(Key.synchronizableAny)
            return query
        }
    }
}
