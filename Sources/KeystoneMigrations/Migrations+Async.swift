import Foundation
import Keystone

// The async forms of the migrations that take Sendable inputs: the same blocking keychain work, run off the caller's
// actor and off Swift's cooperative pool (BlockingCalls), as Keychain's other async forms are. The UserDefaults
// migration has no async form: its source (`UserDefaults`, a dictionary) is not Sendable, and it is meant to run once,
// synchronously, at launch.

extension Keychain {
    /// Moves `items` to `target` in place, off the caller's actor.
    ///
    /// - Throws: as the synchronous `reprotect(_:to:)`, or `CancellationError` before it starts.
    public func reprotect(_ items: [any KeychainItem], to target: ReprotectionTarget) async throws -> ReprotectionReport {
        try await offActor { try self.reprotect(items, to: target) }
    }

    /// Moves every generic password of `service` to `target` in place, off the caller's actor.
    ///
    /// - Throws: as the synchronous `reprotectAll(service:accessGroup:to:)`.
    public func reprotectAll(service: String, accessGroup: String? = nil, to target: ReprotectionTarget) async throws -> ReprotectionReport {
        try await offActor { try self.reprotectAll(service: service, accessGroup: accessGroup, to: target) }
    }

    /// Wipes the previous install's items of `scope` on a fresh install, off the caller's actor.
    ///
    /// - Throws: as the synchronous `wipeIfFreshInstall(_:marker:onSharedKeychain:)`.
    public func wipeIfFreshInstall(_ scope: FreshInstallScope, marker: some InstallMarkerStore,
                                   onSharedKeychain: SharedKeychainPolicy = .refuse) async throws -> FreshInstallResult {
        try await offActor { try self.wipeIfFreshInstall(scope, marker: marker, onSharedKeychain: onSharedKeychain) }
    }
}
