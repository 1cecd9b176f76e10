import Foundation
import KeychainEngine
import Keystone
import KeystoneMigrations
import KeystoneTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A storage several machines share (as an etcd keychain is): memory rows, `isSharedAcrossMachines` true.
final class FleetStorage: KeychainStorage {
    let rows = MemoryStorage()
    var lockState: LockState { rows.lockState }
    func read<T>(_ body: (any StorageReader) throws -> T) throws -> T { try rows.read(body) }
    func write<T>(_ body: (any StorageWriter) throws -> T) throws -> T { try rows.write(body) }
    var isSharedAcrossMachines: Bool { true }
}

/// The fresh-install wipe's two guards: a marker that cannot be written, a keychain shared by several machines.
@Suite("Fresh-install wipe: unwritable markers and shared keychains")
struct MigrationFreshInstallSafetyTests {
    let scope = FreshInstallScope(services: ["com.example.app"])
    let app = try! GenericPassword(service: "com.example.app", account: "a")
    let other = try! GenericPassword(service: "com.example.other", account: "a")

    func keychain(over storage: any KeychainStorage) throws -> Keychain {
        let keychain = Keychain(store: KeychainEngine(storage: storage))
        try keychain.save("saved-by-another-machine", for: app)
        try keychain.save("keep", for: other)
        return keychain
    }

    /// A directory that does not exist and that no one, root included, can create: under /sys (sysfs refuses
    /// mkdir). Nil where that does not hold.
    static func uncreatableDirectory() -> URL? {
        let url = URL(fileURLWithPath: "/sys/fs/keystone-test-\(UUID().uuidString)/app")
        var info = stat()
        guard stat(url.path, &info) != 0, errno == ENOENT else { return nil }
        guard mkdir(url.deletingLastPathComponent().path, 0o700) != 0 else {
            rmdir(url.deletingLastPathComponent().path)
            return nil
        }
        return url
    }

    @Test("A marker file whose directory cannot be created defers the wipe with errSecIO naming it, and deletes nothing")
    func uncreatableMarkerDirectory() throws {
        let directory = try #require(Self.uncreatableDirectory(), "no uncreatable directory on this system")
        let marker = FileInstallMarker(url: directory.appendingPathComponent("keystone-install-marker"))
        #expect(try marker.markerExists() == false)
        let keychain = try keychain(over: MemoryStorage())
        let result = try keychain.wipeIfFreshInstall(scope, marker: marker)
        guard case .deferred(let error) = result else { Issue.record("not deferred: \(result)"); return }
        #expect(error.status == Status.io && error.reason.contains(directory.path))
        #expect(try keychain.string(for: app) == "saved-by-another-machine" && keychain.string(for: other) == "keep")
        // Every launch defers the same way: what the app saves in between survives.
        guard case .deferred = try keychain.wipeIfFreshInstall(scope, marker: marker) else { Issue.record("not deferred"); return }
        #expect(try keychain.exists(app))
    }

    @Test("Checking a marker file creates its directory 0700 and leaves no file behind")
    func checkWritableLeavesNothing() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-marker-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let marker = FileInstallMarker(url: root.appendingPathComponent("app/keystone-install-marker"))
        try marker.checkWritable()
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("app").path).isEmpty)
        let folder = try FileManager.default.attributesOfItem(atPath: root.appendingPathComponent("app").path)
        #expect((folder[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        #expect(try marker.markerExists() == false)
    }

    @Test("On a keychain its storage reports shared by several machines, the wipe is refused: nothing read, deleted or written")
    func sharedKeychainRefused() throws {
        let keychain = try keychain(over: FleetStorage())
        let marker = InMemoryInstallMarker()
        let result = try keychain.wipeIfFreshInstall(scope, marker: marker)
        guard case .refusedSharedKeychain = result else { Issue.record("not refused: \(result)"); return }
        #expect(try keychain.string(for: app) == "saved-by-another-machine")
        #expect(marker.readCount == 0 && marker.writeCount == 0 && !marker.exists)
    }

    @Test("On a shared keychain the app can ask for the wipe explicitly (wipeAnyway): it then wipes as on one machine")
    func sharedKeychainWipedWhenAsked() throws {
        let keychain = try keychain(over: FleetStorage())
        let marker = InMemoryInstallMarker()
        let result = try keychain.wipeIfFreshInstall(scope, marker: marker, onSharedKeychain: .wipeAnyway)
        guard case .wiped(let deleted) = result else { Issue.record("not wiped: \(result)"); return }
        #expect(deleted.map(\.account) == ["a"] && marker.exists)
        #expect(try !keychain.exists(app) && keychain.string(for: other) == "keep")
    }

    @Test("The async wipe refuses a shared keychain too, and wipes one machine's")
    func asyncForms() async throws {
        let shared = try keychain(over: FleetStorage())
        let refused = try await shared.wipeIfFreshInstall(scope, marker: InMemoryInstallMarker())
        guard case .refusedSharedKeychain = refused else { Issue.record("not refused: \(refused)"); return }
        let local = try keychain(over: MemoryStorage())
        let wiped = try await local.wipeIfFreshInstall(scope, marker: InMemoryInstallMarker())
        guard case .wiped = wiped else { Issue.record("not wiped: \(wiped)"); return }
    }

    @Test("Storages report whether several machines share them: memory, no; the default is no")
    func storageFlag() {
        #expect(!MemoryStorage().isSharedAcrossMachines)
        #expect(FleetStorage().isSharedAcrossMachines)
    }
}
