import Foundation
import KeychainEngine
import Keystone
import KeystoneMigrations
import KeystoneTesting
import Testing

@Suite("Fresh-install wipe")
struct MigrationFreshInstallTests {
    let app = try! GenericPassword(service: "com.example.app", account: "a")
    let appSynced = try! GenericPassword(service: "com.example.app", account: "synced", synchronizable: true)
    let appServer = try! InternetPassword(server: "api.example.com", account: "a", protocol: .https)
    let other = try! GenericPassword(service: "com.example.other", account: "a")
    let otherServer = try! InternetPassword(server: "com.example.app", account: "a")

    /// A keychain left by a previous install: the app's items and others.
    func leftover() throws -> (InMemoryKeychain, Keychain) {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        try keychain.save("old", for: app)
        try keychain.save("old", for: appSynced)
        try keychain.save("old", for: appServer)
        try keychain.save("keep", for: other)
        try keychain.save("keep", for: otherServer)
        memory.clearCalls()
        return (memory, keychain)
    }

    var scope: FreshInstallScope { FreshInstallScope([.service("com.example.app"), .server("api.example.com")]) }

    @Test("The first run wipes only the listed services (other services and classes survive) and writes the marker; the second wipes nothing")
    func firstAndSecondRun() throws {
        let (memory, keychain) = try leftover()
        let marker = InMemoryInstallMarker()
        guard case .wiped(let deleted) = try keychain.wipeIfFreshInstall(scope, marker: marker) else {
            Issue.record("not wiped"); return
        }
        #expect(deleted.count == 3)
        #expect(Set(deleted.map(\.account)) == ["a", "synced"])
        #expect(marker.exists && marker.writeCount == 1)
        #expect(!memory.calls.contains { $0.readsSecret })
        #expect(try !keychain.exists(app) && !keychain.exists(appServer))
        #expect(try keychain.string(for: other) == "keep" && keychain.string(for: otherServer) == "keep")
        #expect(memory.itemCount == 2)
        // Every delete is bounded: class and service or server, never a match-all.
        for call in memory.calls(.delete) {
            #expect(call.query[Key.class] != nil)
            #expect(call.query[Key.service] == .string("com.example.app") || call.query[Key.server] == .string("api.example.com"))
        }

        try keychain.save("new", for: app)
        memory.clearCalls()
        guard case .notFresh = try keychain.wipeIfFreshInstall(scope, marker: marker) else { Issue.record("wiped twice"); return }
        #expect(memory.calls.isEmpty)
        #expect(try keychain.string(for: app) == "new")
    }

    @Test("A marker that cannot be read is never taken as fresh: deferred, nothing deleted, nothing written")
    func unreadableMarker() throws {
        let (memory, keychain) = try leftover()
        let marker = InMemoryInstallMarker()
        marker.readFailure = KeychainError(status: Status.io, reason: "not readable before the first unlock")
        guard case .deferred(let error) = try keychain.wipeIfFreshInstall(scope, marker: marker) else { Issue.record("not deferred"); return }
        #expect(error.status == Status.io)
        #expect(memory.calls.isEmpty && memory.itemCount == 5 && marker.writeCount == 0)
    }

    @Test("A locked keychain defers the wipe without a marker; the next launch, unlocked, wipes and writes it",
          arguments: [LockState.locked, .lockedAfterFirstUnlock])
    func lockedKeychain(state: LockState) throws {
        let (memory, keychain) = try leftover()
        let marker = InMemoryInstallMarker()
        memory.lockState = state
        guard case .deferred(let error) = try keychain.wipeIfFreshInstall(scope, marker: marker) else { Issue.record("not deferred"); return }
        #expect(error == .interactionNotAllowed)
        #expect(!marker.exists && marker.writeCount == 0)
        memory.lockState = .unlocked
        #expect(try keychain.exists(app))
        guard case .wiped(let deleted) = try keychain.wipeIfFreshInstall(scope, marker: marker) else { Issue.record("not wiped"); return }
        #expect(deleted.count == 3 && marker.exists)
        #expect(memory.itemCount == 2)
    }

    @Test("A marker that cannot be written defers before deleting anything; once writable, the wipe runs and writes it")
    func markerWriteFails() throws {
        let (memory, keychain) = try leftover()
        let marker = InMemoryInstallMarker()
        marker.writeFailure = KeychainError(status: Status.io)
        guard case .deferred(let error) = try keychain.wipeIfFreshInstall(scope, marker: marker) else { Issue.record("not deferred"); return }
        #expect(error.status == Status.io)
        #expect(memory.itemCount == 5 && memory.calls(.delete).isEmpty && !marker.exists && marker.checkCount == 1)
        marker.writeFailure = nil
        guard case .wiped(let deleted) = try keychain.wipeIfFreshInstall(scope, marker: marker) else { Issue.record("not wiped"); return }
        #expect(deleted.count == 3 && marker.exists && memory.itemCount == 2)
    }

    @Test("A marker write that fails after its check passed defers; the rerun wipes again (nothing more to delete) and writes it")
    func markerWriteFailsAfterCheck() throws {
        let (memory, keychain) = try leftover()
        let marker = InMemoryInstallMarker()
        marker.writeFailureAfterCheck = KeychainError(status: Status.io)
        guard case .deferred = try keychain.wipeIfFreshInstall(scope, marker: marker) else { Issue.record("not deferred"); return }
        #expect(memory.itemCount == 2 && !marker.exists)
        marker.writeFailureAfterCheck = nil
        guard case .wiped(let deleted) = try keychain.wipeIfFreshInstall(scope, marker: marker) else { Issue.record("not wiped"); return }
        #expect(deleted.isEmpty && marker.exists && memory.itemCount == 2)
    }

    @Test("A single listed item is wiped by its identity alone")
    func singleItem() throws {
        let (memory, keychain) = try leftover()
        let scope = FreshInstallScope([.item(app)])
        guard case .wiped(let deleted) = try keychain.wipeIfFreshInstall(scope, marker: InMemoryInstallMarker()) else { Issue.record("not wiped"); return }
        #expect(deleted.map(\.account) == ["a"] && memory.itemCount == 4)
        // The service's other accounts stay.
        #expect(try Keychain(store: memory).exists(appSynced))
    }

    @Test("A scope that would widen a delete is refused before anything is read", arguments: [
        FreshInstallScope(services: [""]), FreshInstallScope([.server("")]), FreshInstallScope([.service("s", accessGroup: "")]),
    ])
    func widening(scope: FreshInstallScope) throws {
        let (memory, keychain) = try leftover()
        let marker = InMemoryInstallMarker()
        #expect(throws: KeychainError.invalidItem) { try keychain.wipeIfFreshInstall(scope, marker: marker) }
        #expect(memory.calls.isEmpty && marker.readCount == 0)
    }

    @Test("The marker file: absent until written, then present; written 0600 in a 0700 directory, never partial")
    func markerFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-marker-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let marker = FileInstallMarker(url: directory.appendingPathComponent("app/marker"))
        #expect(try marker.markerExists() == false)
        try marker.writeMarker()
        #expect(try marker.markerExists())
        let file = try FileManager.default.attributesOfItem(atPath: marker.url.path)
        let folder = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("app").path)
        #expect((file[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect((folder[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        // Only the marker is left in the directory (no temporary file).
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("app").path) == ["marker"])
        try marker.writeMarker()  // idempotent
        #expect(try marker.markerExists())
    }

    @Test("A marker file whose existence cannot be told throws instead of answering absent")
    func markerFileUnknown() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-marker-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // A regular file where a directory should be: stat fails with ENOTDIR, not ENOENT.
        let blocker = directory.appendingPathComponent("not-a-directory")
        try Data().write(to: blocker)
        let marker = FileInstallMarker(url: blocker.appendingPathComponent("marker"))
        #expect(throws: KeychainError(status: Status.io)) { try marker.markerExists() }
        let (memory, keychain) = try leftover()
        guard case .deferred = try keychain.wipeIfFreshInstall(scope, marker: marker) else { Issue.record("not deferred"); return }
        #expect(memory.itemCount == 5)
    }

    @Test("A marker named by the app lives under the app's data directory", arguments: ["", "a/b", ".."])
    func markerNames(identifier: String) throws {
        #expect(throws: KeychainError.invalidItem) { try FileInstallMarker(appIdentifier: identifier) }
    }
}
