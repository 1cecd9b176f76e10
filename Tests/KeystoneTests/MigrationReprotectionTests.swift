import Foundation
import KeychainEngine
import Keystone
import KeystoneMigrations
import KeystoneTesting
import Testing
#if os(Linux)
import KeychainFile
#endif

@Suite("Re-protection")
struct MigrationReprotectionTests {
    func item(_ account: String, service: String = "com.example.app") -> GenericPassword {
        try! GenericPassword(service: service, account: account)
    }

    @Test("Listed items move to another accessibility in place: same secret and creation date, no delete, no add; missing ones are reported")
    func accessibilityInPlace() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        try keychain.save(secretData, for: item("a"))
        let created = try #require(try keychain.attributes(for: item("a"))?.creationDate)
        memory.clearCalls()

        let report = try keychain.reprotect([item("a"), item("ghost")], to: ReprotectionTarget(accessibility: .afterFirstUnlock))
        #expect(report.moved.map(\.account) == ["a"] && report.moved.first?.accessibility == .afterFirstUnlock)
        #expect(report.missing == [item("ghost").description])
        #expect(report.isComplete)
        #expect(memory.calls(.delete).isEmpty && memory.calls(.add).isEmpty && memory.calls(.update).count == 1)
        #expect(!memory.calls.contains { $0.readsSecret })
        let after = try #require(try keychain.attributes(for: item("a")))
        #expect(after.creationDate == created && after.accessibility == .afterFirstUnlock)
        #expect(try keychain.data(for: item("a")) == secretData)
        #expect(!report.description.contains(secretText))

        // Idempotent: a second run writes nothing.
        memory.clearCalls()
        let again = try keychain.reprotect([item("a")], to: ReprotectionTarget(accessibility: .afterFirstUnlock))
        #expect(again.alreadyProtected.count == 1 && again.moved.isEmpty && memory.calls(.update).isEmpty)
    }

    @Test("An item not available in the current lock state is skipped with -25308 and left exactly as it was")
    func lockedItemSkipped() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        try keychain.save("available", for: item("bg"), options: SaveOptions(accessibility: .afterFirstUnlock))
        try keychain.save(secretData, for: item("fg"), options: SaveOptions(accessibility: .whenUnlocked))
        memory.lockState = .lockedAfterFirstUnlock

        let report = try keychain.reprotect([item("bg"), item("fg")], to: ReprotectionTarget(accessibility: .afterFirstUnlockThisDeviceOnly))
        #expect(report.moved.map(\.account) == ["bg"])
        #expect(report.skipped.map(\.item) == [item("fg").description])
        #expect(report.skipped.first?.reason == .interactionNotAllowed)
        #expect(!report.isComplete)

        memory.lockState = .unlocked
        #expect(try keychain.attributes(for: item("fg"))?.accessibility == .whenUnlocked)
        #expect(try keychain.data(for: item("fg")) == secretData)
    }

    @Test("A move to a class not available now is refused by the keychain: the item stays, skipped with -25308")
    func targetClassLocked() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        try keychain.save("v", for: item("bg"), options: SaveOptions(accessibility: .afterFirstUnlock))
        memory.lockState = .lockedAfterFirstUnlock
        let report = try keychain.reprotect([item("bg")], to: ReprotectionTarget(accessibility: .whenUnlocked))
        #expect(report.skipped.first?.reason == .interactionNotAllowed && report.moved.isEmpty)
        memory.lockState = .unlocked
        #expect(try keychain.attributes(for: item("bg"))?.accessibility == .afterFirstUnlock)
    }

    @Test("Items move to another access group in place: one copy, in the new group, same secret")
    func accessGroupInPlace() throws {
        let memory = InMemoryKeychain(entitledAccessGroups: ["TEAM.app", "TEAM.shared"])
        let keychain = Keychain(store: memory, options: ItemOptions(accessGroup: "TEAM.app"))
        try keychain.save(secretData, for: item("a"))
        try keychain.save("b", for: item("b"))
        memory.clearCalls()

        let report = try keychain.reprotectAll(service: "com.example.app", to: ReprotectionTarget(accessibility: .afterFirstUnlock, accessGroup: "TEAM.shared"))
        #expect(report.moved.map(\.account).sorted() == ["a", "b"])
        #expect(report.moved.allSatisfy { $0.accessGroup == "TEAM.shared" && $0.accessibility == .afterFirstUnlock })
        #expect(memory.calls(.delete).isEmpty && memory.calls(.add).isEmpty)
        let shared = Keychain(store: memory, options: ItemOptions(accessGroup: "TEAM.shared"))
        #expect(try shared.data(for: item("a")) == secretData)
        #expect(try keychain.accounts(service: "com.example.app").isEmpty)
        #expect(memory.itemCount == 2)
    }

    @Test("A target access group the app is not entitled to fails with -34018 and changes nothing")
    func notEntitled() throws {
        let memory = InMemoryKeychain(entitledAccessGroups: ["TEAM.app"])
        let keychain = Keychain(store: memory)
        try keychain.save("v", for: item("a"))
        memory.clearCalls()
        for call in [{ try keychain.reprotect([item("a")], to: ReprotectionTarget(accessibility: .afterFirstUnlock, accessGroup: "OTHER.group")) },
                     { try keychain.reprotectAll(service: "com.example.app", to: ReprotectionTarget(accessGroup: "OTHER.group")) }] {
            #expect(throws: KeychainError.missingEntitlement) { _ = try call() }
        }
        #expect(memory.calls(.update).isEmpty)
        #expect(try keychain.attributes(for: item("a"))?.accessibility == .whenUnlocked)
        #expect(try keychain.attributes(for: item("a"))?.accessGroup == "TEAM.app")
    }

    @Test("An item whose primary key the target group already holds is skipped with -25299; neither copy changes")
    func duplicateInTargetGroup() throws {
        let memory = InMemoryKeychain(entitledAccessGroups: ["TEAM.app", "TEAM.shared"])
        let app = Keychain(store: memory, options: ItemOptions(accessGroup: "TEAM.app"))
        let shared = Keychain(store: memory, options: ItemOptions(accessGroup: "TEAM.shared"))
        try app.save("old", for: item("a"))
        try shared.save("new", for: item("a"))
        let report = try app.reprotect([item("a")], to: ReprotectionTarget(accessGroup: "TEAM.shared"))
        #expect(report.skipped.first?.reason == .duplicateItem)
        #expect(try app.string(for: item("a")) == "old" && shared.string(for: item("a")) == "new")
    }

    @Test("A synchronizable item is never moved to a ThisDeviceOnly class; local items of the service are")
    func synchronizableKept() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        try keychain.save("local", for: item("local"))
        let syncedItem = try GenericPassword(service: "com.example.app", account: "synced", synchronizable: true)
        try keychain.save("synced", for: syncedItem)
        let report = try keychain.reprotectAll(service: "com.example.app", to: ReprotectionTarget(accessibility: .afterFirstUnlockThisDeviceOnly))
        #expect(report.moved.map(\.account) == ["local"])
        #expect(report.skipped.count == 1 && report.skipped.first?.reason == .invalidItem)
        let synced = try #require(try keychain.attributes(for: syncedItem))
        #expect(synced.accessibility == .whenUnlocked)
    }

    @Test("An access-controlled item keeps its flags; only its protection class changes")
    func accessControlKept() throws {
        let memory = InMemoryKeychain(profile: .simulator)
        let keychain = Keychain(store: memory, options: ItemOptions(accessibility: .whenUnlockedThisDeviceOnly, accessControlFlags: .userPresence))
        try keychain.save("v", for: item("a"))
        let report = try keychain.reprotect([item("a")], to: ReprotectionTarget(accessibility: .whenPasscodeSetThisDeviceOnly))
        #expect(report.moved.first?.accessibility == .whenPasscodeSetThisDeviceOnly)
        #expect(report.moved.first?.hasAccessControl == true)
        #expect(memory.promptCount == 0)
    }

    @Test("Only the named service moves; other services and the internet passwords are untouched")
    func serviceBounded() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        try keychain.save("a", for: item("a"))
        try keychain.save("o", for: item("o", service: "com.example.other"))
        try keychain.save("i", for: InternetPassword(server: "com.example.app", account: "a"))
        _ = try keychain.reprotectAll(service: "com.example.app", to: ReprotectionTarget(accessibility: .afterFirstUnlock))
        #expect(try keychain.attributes(for: item("o", service: "com.example.other"))?.accessibility == .whenUnlocked)
        #expect(try keychain.attributes(for: InternetPassword(server: "com.example.app", account: "a"))?.accessibility == .whenUnlocked)
        for call in memory.calls(.update) { #expect(call.service == "com.example.app" && call.query[Key.class] == .string("genp")) }
    }

    @Test("A service-wide re-protection with some items locked changes none of the locked ones and reports what it could not reach")
    func serviceWideLocked() throws {
        let memory = InMemoryKeychain()
        let keychain = Keychain(store: memory)
        try keychain.save("bg", for: item("bg"), options: SaveOptions(accessibility: .afterFirstUnlock))
        try keychain.save(secretData, for: item("fg"), options: SaveOptions(accessibility: .whenUnlocked))
        memory.lockState = .lockedAfterFirstUnlock

        let report = try keychain.reprotectAll(service: "com.example.app", to: ReprotectionTarget(accessibility: .afterFirstUnlockThisDeviceOnly))
        #expect(report.unreachable.contains(.whenUnlocked))
        #expect(!report.isComplete)
        memory.lockState = .unlocked
        #expect(try keychain.attributes(for: item("fg"))?.accessibility == .whenUnlocked)
        #expect(try keychain.data(for: item("fg")) == secretData)
        #expect(report.moved.map(\.account) == ["bg"])
        // Only the class that holds a locked item: the other locked classes have no item of the service.
        #expect(report.unreachable == [.whenUnlocked])
    }

    @Test("An empty target is refused", arguments: [ReprotectionTarget(), ReprotectionTarget(accessGroup: "")])
    func emptyTarget(target: ReprotectionTarget) throws {
        let keychain = Keychain(store: InMemoryKeychain())
        #expect(throws: KeychainError.invalidItem) { try keychain.reprotect([item("a")], to: target) }
    }

    #if os(Linux)
    @Test("Re-protection against a real keychain file: moved in place, persisted, one copy")
    func keychainFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-reprotect-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("test.keychain-db").path
        let keychain = Keychain(store: KeychainEngine(storage: try KeychainFile.create(at: path, password: "")))
        for account in ["a", "b"] { try keychain.save("v-\(account)", for: item(account)) }

        let report = try keychain.reprotectAll(service: "com.example.app", to: ReprotectionTarget(accessibility: .afterFirstUnlockThisDeviceOnly))
        #expect(report.moved.count == 2 && report.isComplete)
        // A second process's view: reopen the file.
        let file = try KeychainFile.open(at: path)
        if file.lockState != .unlocked { try file.unlock() }
        let reopened = Keychain(store: KeychainEngine(storage: file))
        let accounts = try reopened.accounts(service: "com.example.app")
        #expect(accounts.map(\.account) == ["a", "b"])
        #expect(accounts.allSatisfy { $0.accessibility == .afterFirstUnlockThisDeviceOnly })
        #expect(try reopened.string(for: item("b")) == "v-b")
    }
    #endif
}
