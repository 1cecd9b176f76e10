#if !canImport(Darwin)
import DefaultKeychainLock
import Foundation
import KeychainServices
import Keystone
import KeystoneImporters
import Testing

/// The migration article's code (Sources/Keystone/Keystone.docc/MovingFromOtherLibraries.md): each "before" block runs
/// against a stand-in of its library that stores what the library stores (MigrationGuideStandIns.swift), each "after"
/// block is Keystone's code, verbatim, and reads those same items from the process's keychain (a memory keychain).
@Suite("Migration article: what KeychainAccess, Valet and keychain-swift stored, the article's Keystone code reads",
       .serialized, .ownsDefaultKeychain)
struct MigrationGuideTests {
    init() { KeychainServicesDefaults.useMemoryKeychain() }

    @Test("KeychainAccess: Keystone reads its string, data and shared synchronizable items, and KeychainAccess reads Keystone's update")
    func keychainAccess() throws {
        let before = try KeychainAccessStandIn.before()
        #expect(before.token == "s3cret" && before.blob == Data([0x01, 0x02]))

        // article: keychainaccess-after
        let keychain = Keychain(options: ItemOptions(accessibility: .afterFirstUnlock))   // KeychainAccess's default
        let token = try GenericPassword(service: "com.example.app", account: "token")     // service = service, account = key
        let secret = try keychain.string(for: token)                                      // KeychainAccess's item; nil when absent
        try keychain.save("rotated", for: token)                                          // updated in place, never deleted
        let blob = try keychain.data(for: GenericPassword(service: "com.example.app", account: "blob"))
        try keychain.delete(GenericPassword(service: "com.example.app", account: "old"))  // absent counts as deleted

        let shared = Keychain(options: ItemOptions(accessibility: .afterFirstUnlock, synchronizable: true,
                                                   accessGroup: "TEAMID.com.example.shared"))
        let syncToken = try shared.string(for: GenericPassword(service: "com.example.app", account: "sync-token"))
        // article: end

        #expect(secret == "s3cret")
        #expect(blob == Data([0x01, 0x02]))
        #expect(syncToken == "s3cret")
        #expect(try KeychainAccessStandIn.read("token") == "rotated")
        #expect(try keychain.attributes(for: token)?.accessibility == .afterFirstUnlock)
    }

    @Test("KeychainAccess: removeAll and deleteAll(service:) remove the same items")
    func keychainAccessRemoveAll() throws {
        _ = try KeychainAccessStandIn.before()
        let keychain = Keychain()
        // article: keychainaccess-removeall-after
        try keychain.deleteAll(service: "com.example.app")  // every account of the service, any access group, synced or not
        // article: end
        #expect(try KeychainAccessStandIn.read("token") == nil)
        #expect(try Self.remaining(service: "com.example.app") == 0)

        _ = try KeychainAccessStandIn.before()
        #expect(try Self.remaining(service: "com.example.app") == 3)
        try KeychainAccessStandIn.removeAllBefore()
        #expect(try Self.remaining(service: "com.example.app") == 0)
    }

    @Test("Valet: Keystone reads its items under the Valet's service string, iCloud and shared-group Valets included")
    func valet() throws {
        let before = try ValetStandIn.before()
        #expect(before.token == "s3cret" && before.blob == Data([0x01, 0x02]))

        // article: valet-after
        let keychain = Keychain()                                                         // whenUnlocked, as this Valet
        let valet = "VAL_VALValet_initWithIdentifier:accessibility:_Druidia_AccessibleWhenUnlocked"
        let token = try GenericPassword(service: valet, account: "token")                 // service = Valet's, account = key
        let secret = try keychain.string(for: token)                                      // nil when absent: nothing to catch
        try keychain.save("rotated", for: token)
        let blob = try keychain.data(for: GenericPassword(service: valet, account: "blob"))
        try keychain.delete(GenericPassword(service: valet, account: "old"))

        let synced = Keychain(options: ItemOptions(accessibility: .afterFirstUnlock, synchronizable: true))
        let syncToken = try synced.string(for: GenericPassword(
            service: "VAL_VALSynchronizableValet_initWithIdentifier:accessibility:_Druidia_AccessibleAfterFirstUnlock",
            account: "sync-token"))
        let shared = Keychain(options: ItemOptions(accessGroup: "TEAMID.com.example.shared"))
        let sharedToken = try shared.string(for: GenericPassword(
            service: "VAL_VALValet_initWithSharedAccessGroupIdentifier:accessibility:_com.example.shared_AccessibleWhenUnlocked",
            account: "shared-token"))
        // article: end

        #expect(secret == "s3cret")
        #expect(blob == Data([0x01, 0x02]))
        #expect(syncToken == "s3cret")
        #expect(sharedToken == "s3cret")
        #expect(try ValetStandIn.read("token") == "rotated")
    }

    @Test("Valet: removeAllObjects and deleteAll(service:) remove the same items")
    func valetRemoveAll() throws {
        let service = "VAL_VALValet_initWithIdentifier:accessibility:_Druidia_AccessibleWhenUnlocked"
        _ = try ValetStandIn.before()
        let keychain = Keychain()
        // article: valet-removeall-after
        try keychain.deleteAll(service: "VAL_VALValet_initWithIdentifier:accessibility:_Druidia_AccessibleWhenUnlocked")
        // article: end
        #expect(try ValetStandIn.read("token") == nil)
        #expect(try Self.remaining(service: service) == 0)

        _ = try ValetStandIn.before()
        #expect(try Self.remaining(service: service) == 2)
        try ValetStandIn.removeAllBefore()
        #expect(try Self.remaining(service: service) == 0)
    }

    @Test("keychain-swift: its service-less items move to a service, prefix stripped, accessibility, group and sync kept")
    func keychainSwift() throws {
        let before = KeychainSwiftStandIn.before()
        #expect(before.token == "s3cret" && before.blob == Data([0x01, 0x02]))

        // article: keychainswift-after
        let keychain = Keychain()
        // Once, at launch: keychain-swift's items have no service, and every GenericPassword has one. Each item is
        // copied to the service (key prefix stripped; accessibility, access group and synchronizable kept), read back,
        // then its original is deleted. A second run finds nothing left to move.
        let moved = try keychain.importItems(from: KeychainSwiftImportSource(store: keychain.store, keyPrefix: "myapp_",
                                                                             targetService: "com.example.app"))
        let token = try GenericPassword(service: "com.example.app", account: "token")
        let secret = try keychain.string(for: token)
        try keychain.save("rotated", for: token)
        let blob = try keychain.data(for: GenericPassword(service: "com.example.app", account: "blob"))
        try keychain.delete(GenericPassword(service: "com.example.app", account: "old"))

        let shared = Keychain(options: ItemOptions(synchronizable: true, accessGroup: "TEAMID.com.example.shared"))
        let syncToken = try shared.string(for: GenericPassword(service: "com.example.app", account: "sync-token"))
        // article: end

        #expect(moved.results.map(\.item.account) == ["blob", "sync-token", "token"])
        #expect(secret == "s3cret")
        #expect(blob == Data([0x01, 0x02]))
        #expect(syncToken == "s3cret")
        #expect(try keychain.attributes(for: GenericPassword(service: "com.example.app", account: "blob"))?.accessibility
                == .afterFirstUnlock)
        #expect(KeychainSwiftStandIn.read("token") == nil)        // moved: keychain-swift no longer finds it
        #expect(try keychain.importItems(from: KeychainSwiftImportSource(store: keychain.store, keyPrefix: "myapp_",
                                                                          targetService: "com.example.app")).results.isEmpty)
    }

    @Test("keychain-swift: clear() removes every generic password; deleteAll(service:) only the moved service's")
    func keychainSwiftRemoveAll() throws {
        let keychain = Keychain()
        let other = try GenericPassword(service: "com.example.other", account: "kept")
        try keychain.save("kept", for: other)
        _ = KeychainSwiftStandIn.before()
        _ = try keychain.importItems(from: KeychainSwiftImportSource(store: keychain.store, keyPrefix: "myapp_",
                                                                     targetService: "com.example.app"))
        // article: keychainswift-removeall-after
        try keychain.deleteAll(service: "com.example.app")  // the moved items, and nothing of other services
        // article: end
        #expect(try Self.remaining(service: "com.example.app") == 0)
        #expect(try keychain.string(for: other) == "kept")

        _ = KeychainSwiftStandIn.before()
        KeychainSwiftStandIn.removeAllBefore()
        #expect(KeychainSwiftStandIn.read("token") == nil)
        #expect(try keychain.string(for: other) == nil)        // clear() took the other service's item too
    }

    @Test("the article's code blocks are the test's code, verbatim and in order")
    func articleCodeIsTested() throws {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let article = tests.appendingPathComponent("../../Sources/Keystone/Keystone.docc/MovingFromOtherLibraries.md")
        let blocks = Self.swiftBlocks(try String(contentsOf: article, encoding: .utf8))
        var regions: [String: String] = [:]
        for file in ["MigrationGuideTests.swift", "MigrationGuideStandIns.swift"] {
            let source = try String(contentsOf: tests.appendingPathComponent(file), encoding: .utf8)
            regions.merge(Self.regions(source)) { first, _ in first }
        }
        let order = ["keychainaccess-before", "keychainaccess-after", "keychainaccess-removeall-before",
                     "keychainaccess-removeall-after", "valet-before", "valet-after", "valet-removeall-before",
                     "valet-removeall-after", "keychainswift-before", "keychainswift-after",
                     "keychainswift-removeall-before", "keychainswift-removeall-after"]
        #expect(regions.count == order.count)
        #expect(blocks.count == order.count)
        for (index, name) in order.enumerated() {
            let region = try #require(regions[name], "no region \(name)")
            #expect(index < blocks.count && blocks[index] == region, "article block \(index + 1) differs from region \(name)")
        }
    }

    /// The generic passwords of `service` in the process's keychain, synchronizable or not, in any access group.
    static func remaining(service: String) throws -> Int {
        try Keychain().accounts(service: service).count
    }

    /// The article's ```swift blocks, each without its common indentation.
    static func swiftBlocks(_ markdown: String) -> [String] {
        var blocks: [String] = []
        var current: [String]?
        for line in markdown.components(separatedBy: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if current == nil, trimmed == "```swift" {
                current = []
            } else if let lines = current, trimmed == "```" {
                blocks.append(dedented(lines))
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    /// The regions between `// article: NAME` and `// article: end`, each without its common indentation.
    static func regions(_ source: String) -> [String: String] {
        var regions: [String: String] = [:]
        var name: String?
        var lines: [String] = []
        for line in source.components(separatedBy: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed == "// article: end", let current = name {
                regions[current] = dedented(lines)
                name = nil
            } else if trimmed.hasPrefix("// article: ") {
                name = String(trimmed.dropFirst("// article: ".count))
                lines = []
            } else if name != nil {
                lines.append(line)
            }
        }
        return regions
    }

    static func dedented(_ lines: [String]) -> String {
        let indent = lines.filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
            .map { $0.prefix { $0 == " " }.count }.min() ?? 0
        return lines.map { line in
            String(line.dropFirst(min(indent, line.prefix { $0 == " " }.count)))
                .replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
        }.joined(separator: "\n")
    }
}
#endif
