#if !canImport(Darwin)
import DefaultKeychainLock
import Foundation
import KeychainServices
@testable import Keystone
import KeystoneImporters
import KeystoneTesting
import Testing

/// The production stack: `Keychain()` → `SystemKeychain` → `SecItem*` → the process's default keychain, here a fresh
/// keychain file in a temporary folder (never the user's), whose engine asks `authenticator` for every protected read.
private struct KeychainFileStack {
    let directory: URL
    let authenticator: ScriptedAuthenticator

    /// Installs the stack; every authentication succeeds (so a read that should not happen would succeed, and show).
    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-access-control-\(UUID().uuidString)")
        let engine = try KeychainServicesDefaults.fileEngine(at: directory.appendingPathComponent("login.keychain-db").path)
        authenticator = ScriptedAuthenticator(defaultOutcome: .success)
        engine.authenticator = authenticator
        KeychainServicesDefaults.setEngine(engine)
    }

    /// Puts a memory keychain back as the default and removes the file.
    func remove() {
        KeychainServicesDefaults.useMemoryKeychain()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs `body` over a fresh stack, then removes it.
    static func with(_ body: (KeychainFileStack) throws -> Void) throws {
        let stack = try KeychainFileStack()
        defer { stack.remove() }
        try body(stack)
    }
}

/// What KeychainAccess passes to `SecItemAdd` for `Keychain(service:).accessibility(.afterFirstUnlock,
/// authenticationPolicy: .userPresence)[key] = value` (an access control instead of `kSecAttrAccessible`), or, without
/// a policy, for `Keychain(service:)[key] = value`.
private func addKeychainAccessItem(service: String, key: String, value: String, userPresence: Bool) throws {
    var attributes: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: key,
        kSecValueData as String: Data(value.utf8), kSecAttrSynchronizable as String: false,
    ]
    if userPresence {
        var error: Unmanaged<CFError>?
        let control = try #require(SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleAfterFirstUnlock, .userPresence, &error))
        attributes[kSecAttrAccessControl as String] = control
    } else {
        attributes[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlock
    }
    #expect(SecItemAdd(attributes as CFDictionary, nil) == errSecSuccess)
}

@Suite("Access control on the production stack: Keychain() over SecItem over a keychain file", .serialized, .ownsDefaultKeychain)
struct ProductionAccessControlTests {
    @Test("a .userPresence item saved through Keychain() reads back with hasAccessControl true; an unprotected one false; neither prompts")
    func typedAttributes() throws {
        try KeychainFileStack.with { stack in
            let plainKeychain = Keychain()
            #expect(plainKeychain.store is SystemKeychain)
            let protectedKeychain = Keychain(options: ItemOptions(accessControlFlags: .userPresence))
            let protected = try GenericPassword(service: "com.example.access-control", account: "protected")
            let plain = try GenericPassword(service: "com.example.access-control", account: "plain")
            try protectedKeychain.save(Data("guarded".utf8), for: protected)
            try plainKeychain.save(Data("open".utf8), for: plain)

            let protectedAttributes = try #require(try plainKeychain.attributes(for: protected))
            #expect(protectedAttributes.hasAccessControl == true)
            #expect(protectedAttributes.accessibility == .whenUnlocked)
            let plainAttributes = try #require(try plainKeychain.attributes(for: plain))
            #expect(plainAttributes.hasAccessControl == false)
            // Listing reports the same, one row per item.
            let listed = try plainKeychain.accounts(service: "com.example.access-control")
            #expect(listed.map(\.account) == ["plain", "protected"])
            #expect(listed.map(\.hasAccessControl) == [false, true])
            #expect(stack.authenticator.promptCount == 0)

            // Control: the stack does guard the secret (a read prompts), so a prompt count of 0 means "not read".
            #expect(try protectedKeychain.data(for: protected) == Data("guarded".utf8))
            #expect(stack.authenticator.promptCount == 1)
        }
    }

    @Test("InMemoryKeychain reports the same: hasAccessControl true for a .userPresence item, false for an unprotected one")
    func inMemorySame() throws {
        let store = InMemoryKeychain()
        let protected = try GenericPassword(service: "com.example.access-control", account: "protected")
        let plain = try GenericPassword(service: "com.example.access-control", account: "plain")
        try Keychain(store: store, options: ItemOptions(accessControlFlags: .userPresence)).save(Data("guarded".utf8), for: protected)
        try Keychain(store: store).save(Data("open".utf8), for: plain)
        #expect(try Keychain(store: store).attributes(for: protected)?.hasAccessControl == true)
        #expect(try Keychain(store: store).attributes(for: plain)?.hasAccessControl == false)
    }

    @Test("SystemKeychain turns a SecAccessControl in a SecItem result into the access control it holds")
    func conversion() throws {
        var error: Unmanaged<CFError>?
        let guarded = try #require(SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenUnlocked, .biometryAny, &error))
        let open = try #require(SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenUnlocked, [], &error))
        let rows: NSArray = [
            ["class": "genp", "acct": "guarded", "pdmn": "ak", "accc": guarded] as NSDictionary,
            ["class": "genp", "acct": "open", "pdmn": "ak", "accc": open] as NSDictionary,
            ["class": "genp", "acct": "none", "pdmn": "ak"] as NSDictionary,
        ]
        let converted = try #require(try SystemKeychain.itemResult(rows, itemClass: .genericPassword)?.array?.compactMap(\.attributes))
        #expect(converted.first?[Key.accessControl] == .accessControl(AccessControl(accessibility: .whenUnlocked, flags: .biometryAny)))
        #expect(converted.map { ItemAttributes($0).hasAccessControl } == [true, false, false])
    }

    @Test("an access control whose flags cannot be read (Apple's opaque SecAccessControl with constraints) counts as protected")
    func unreadableFlagsCountAsProtected() {
        #expect(ItemAttributes([Key.class: .string("genp"), Key.accessControl: .bool(true)]).hasAccessControl == true)
        #expect(ItemAttributes([Key.class: .string("genp"), Key.accessControl: .accessControl(AccessControl(accessibility: .afterFirstUnlock, flags: []))]).hasAccessControl == false)
        #expect(ItemAttributes([Key.class: .string("genp")]).hasAccessControl == false)
    }

    @Test("the KeychainAccess importer on the production stack never reads a .userPresence item: it is reported and left in place; the unprotected one moves")
    func importerLeavesProtectedItem() throws {
        try KeychainFileStack.with { stack in
            try addKeychainAccessItem(service: "com.example.legacy", key: "guarded", value: "protected-secret", userPresence: true)
            try addKeychainAccessItem(service: "com.example.legacy", key: "open", value: "plain-secret", userPresence: false)
            let keychain = Keychain()
            let source = KeychainAccessImportSource(store: SystemKeychain(), layout: .service("com.example.legacy"),
                                                    targetService: "com.example.app")

            let report = try keychain.importItems(from: source)

            // No prompt: the engine asks the authenticator before it releases a protected secret, so none was read.
            #expect(stack.authenticator.promptCount == 0)
            #expect(report.results.map(\.item.account) == ["open"])
            #expect(report.results.map(\.action) == [.add])
            #expect(report.problems.count == 1)
            let problem = try #require(report.problems.first)
            #expect(problem.kind == .unsupported)
            #expect(problem.origin.contains("guarded"))
            #expect(problem.reason.contains("access control"))
            #expect(!report.description.contains("protected-secret"))
            // The protected item is where it was, still protected; the unprotected one moved.
            let legacy = try GenericPassword(service: "com.example.legacy", account: "guarded")
            #expect(try keychain.attributes(for: legacy)?.hasAccessControl == true)
            #expect(try keychain.attributes(for: GenericPassword(service: "com.example.legacy", account: "open")) == nil)
            #expect(try keychain.string(for: GenericPassword(service: "com.example.app", account: "open")) == "plain-secret")
            #expect(try keychain.attributes(for: GenericPassword(service: "com.example.app", account: "guarded")) == nil)
            #expect(stack.authenticator.promptCount == 0)
        }
    }

    @Test("an import onto an existing .userPresence target item does not read it to compare: it is a conflict, with no prompt")
    func importerDoesNotReadProtectedTarget() throws {
        try KeychainFileStack.with { stack in
            let target = try GenericPassword(service: "com.example.app", account: "token")
            try Keychain(options: ItemOptions(accessControlFlags: .userPresence)).save(Data("same".utf8), for: target)
            try addKeychainAccessItem(service: "com.example.legacy", key: "token", value: "same", userPresence: false)
            let source = KeychainAccessImportSource(store: SystemKeychain(), layout: .service("com.example.legacy"),
                                                    targetService: "com.example.app")

            let report = try Keychain().importItems(from: source)

            #expect(stack.authenticator.promptCount == 0)
            #expect(report.results.map(\.action) == [.conflict])
            #expect(try Keychain().attributes(for: target)?.hasAccessControl == true)
        }
    }
}
#endif
