import Foundation
import Testing
import Keystone
import KeystoneMigrations
import KeystoneTesting

@Suite("Migrations: async forms")
struct MigrationAsyncTests {
    @Test("the async re-protection moves the item in place, and the async wipe deletes only the listed service")
    func asyncForms() async throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        let item = try GenericPassword(service: "com.example.app", account: "a")
        let other = try GenericPassword(service: "com.example.other", account: "b")
        try await keychain.save("v", for: item, options: SaveOptions(accessibility: .whenUnlocked))
        try await keychain.save("w", for: other)

        let report = try await keychain.reprotect([item], to: ReprotectionTarget(accessibility: .afterFirstUnlock))
        #expect(report.moved.map(\.account) == ["a"])
        #expect(try await keychain.attributes(for: item)?.accessibility == .afterFirstUnlock)
        #expect(try await keychain.string(for: item) == "v")

        let marker = InMemoryInstallMarker()
        let result = try await keychain.wipeIfFreshInstall(FreshInstallScope(services: ["com.example.app"]), marker: marker)
        guard case .wiped(let wiped) = result else { Issue.record("expected a wipe, got \(result)"); return }
        #expect(wiped.map(\.account) == ["a"])
        #expect(try await keychain.string(for: item) == nil)
        #expect(try await keychain.string(for: other) == "w")
        let again = try await keychain.wipeIfFreshInstall(FreshInstallScope(services: ["com.example.app"]), marker: marker)
        guard case .notFresh = again else { Issue.record("expected notFresh, got \(again)"); return }
    }
}
