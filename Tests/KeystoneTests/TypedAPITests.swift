import Foundation
import Testing
import Keystone
import KeychainEngine
import KeystoneTesting

@Suite("Save, read, update, delete")
struct RoundTripTests {
    @Test("Data saved is read back", arguments: Backend.allCases)
    func dataRoundTrip(backend: Backend) throws {
        let f = backend.make()
        try f.keychain.save(secretData, for: generic())
        #expect(try f.keychain.data(for: generic()) == secretData)
    }

    @Test("A string saved is read back, and reading a missing item gives nil", arguments: Backend.allCases)
    func stringRoundTrip(backend: Backend) throws {
        let f = backend.make()
        #expect(try f.keychain.string(for: generic()) == nil)
        try f.keychain.save("héllo ✓", for: generic())
        #expect(try f.keychain.string(for: generic()) == "héllo ✓")
        #expect(try f.keychain.string(for: generic("bob")) == nil)
    }

    @Test("Saving twice updates the one item and keeps its creation date (never delete-then-add)", arguments: Backend.allCases)
    func saveTwiceUpdates(backend: Backend) throws {
        let f = backend.make()
        try f.keychain.save("first", for: generic())
        let before = try #require(try f.keychain.attributes(for: generic()))
        f.clock.advance(60)
        try f.keychain.save("second", for: generic())
        let after = try #require(try f.keychain.attributes(for: generic()))

        #expect(try f.keychain.string(for: generic()) == "second")
        #expect(try f.keychain.accounts(service: "com.example.api").count == 1)
        #expect(after.creationDate == before.creationDate)
        #expect(after.modificationDate == before.creationDate!.addingTimeInterval(60))
        #expect(f.recorder.entries(.delete).isEmpty)
        #expect(f.recorder.log.map(\.operation).filter { $0 != .copy } == [.add, .add, .update])
    }

    @Test("Updating an existing item changes its secret; updating a missing one throws itemNotFound", arguments: Backend.allCases)
    func update(backend: Backend) throws {
        let f = backend.make()
        #expect(throws: KeychainError.itemNotFound) { try f.keychain.update("x", for: generic()) }
        #expect(try f.keychain.exists(generic()) == false)
        try f.keychain.save("old", for: generic())
        try f.keychain.update("new", for: generic())
        #expect(try f.keychain.string(for: generic()) == "new")
    }

    @Test("Deleting removes the item; deleting a missing item is done, not an error", arguments: Backend.allCases)
    func delete(backend: Backend) throws {
        let f = backend.make()
        try f.keychain.save("v", for: generic())
        #expect(try f.keychain.delete(generic()) == true)
        #expect(try f.keychain.data(for: generic()) == nil)
        #expect(try f.keychain.delete(generic()) == false)
    }

    @Test("Items differ by account, service and access group", arguments: Backend.allCases)
    func identity(backend: Backend) throws {
        let f = backend.make()
        let a = generic("a"), b = generic("b"), other = generic("a", service: "com.example.other")
        let grouped = try GenericPassword(service: "com.example.api", account: "a", accessGroup: "team.shared")
        try f.keychain.save("1", for: a)
        try f.keychain.save("2", for: b)
        try f.keychain.save("3", for: other)
        try f.keychain.save("4", for: grouped)
        #expect(try f.keychain.string(for: a) == "1")
        #expect(try f.keychain.string(for: b) == "2")
        #expect(try f.keychain.string(for: other) == "3")
        #expect(try f.keychain.string(for: grouped) == "4")
    }

    @Test("Internet passwords round-trip, and protocols tell items apart", arguments: Backend.allCases)
    func internetPasswords(backend: Backend) throws {
        let f = backend.make()
        let https = try InternetPassword(server: "example.com", account: "alice", protocol: .https, authenticationType: .htmlForm, port: 443, path: "/login")
        let ftp = try InternetPassword(server: "example.com", account: "alice", protocol: .ftp)
        try f.keychain.save("web", for: https)
        try f.keychain.save("files", for: ftp)
        #expect(try f.keychain.string(for: https) == "web")
        #expect(try f.keychain.string(for: ftp) == "files")
        try f.keychain.save("web2", for: https)
        #expect(try f.keychain.string(for: ftp) == "files")
        #expect(try f.keychain.delete(ftp))
        #expect(try f.keychain.string(for: https) == "web2")
        let stored = try #require(f.recorder.entries(.add).first?.query)
        #expect(stored[Key.protocol] == .string("htps"))
        #expect(stored[Key.authenticationType] == .string("form"))
        #expect(stored[Key.port] == .number(443))
    }
}

@Suite("Whole services, listing and existence")
struct ServiceTests {
    @Test("Deleting a service deletes all its accounts and nothing of other services", arguments: Backend.allCases)
    func deleteAllOfOneService(backend: Backend) throws {
        let f = backend.make()
        for account in ["a", "b", "c"] { try f.keychain.save(account, for: generic(account)) }
        try f.keychain.save("keep", for: generic("a", service: "com.example.other"))
        try f.keychain.save("keep-web", for: InternetPassword(server: "com.example.api", account: "a"))
        try f.keychain.save("synced", for: generic("d"), options: ItemOptions(synchronizable: true))

        #expect(try f.keychain.deleteAll(service: "com.example.api"))
        #expect(try f.keychain.accounts(service: "com.example.api").isEmpty)
        #expect(try f.keychain.string(for: generic("a", service: "com.example.other")) == "keep")
        #expect(try f.keychain.string(for: InternetPassword(server: "com.example.api", account: "a")) == "keep-web")
        #expect(try f.keychain.deleteAll(service: "com.example.api") == false)

        let query = try #require(f.recorder.entries(.delete).first?.query)
        #expect(query[Key.class] == .string("genp"))
        #expect(query[Key.service] == .string("com.example.api"))
        #expect(query[Key.account] == nil)
    }

    @Test("Deleting a service in an access group leaves the same service in other groups", arguments: Backend.allCases)
    func deleteAllInOneGroup(backend: Backend) throws {
        let f = backend.make()
        let team = f.keychain(options: ItemOptions(accessGroup: "team.shared"))
        try team.save("team", for: generic())
        try f.keychain.save("app", for: generic(), options: ItemOptions(accessGroup: "app.private"))
        try team.deleteAll(service: "com.example.api")
        #expect(try team.data(for: generic()) == nil)
        #expect(try f.keychain(options: ItemOptions(accessGroup: "app.private")).string(for: generic()) == "app")
        #expect(f.recorder.entries(.delete).last?.query[Key.accessGroup] == .string("team.shared"))
    }

    @Test("Listing accounts returns their attributes and never a secret", arguments: Backend.allCases)
    func listAccounts(backend: Backend) throws {
        let f = backend.make()
        let labelled = f.keychain(options: ItemOptions(accessibility: .afterFirstUnlock, label: "Alice's token", comment: "for the API"))
        try labelled.save(secretData, for: generic("alice"))
        try f.keychain.save(secretData, for: generic("bob"), options: ItemOptions(synchronizable: true))

        let accounts = try f.keychain.accounts(service: "com.example.api")
        #expect(accounts.map(\.account) == ["alice", "bob"])
        let alice = accounts[0]
        #expect(alice.label == "Alice's token")
        #expect(alice.comment == "for the API")
        #expect(alice.accessibility == .afterFirstUnlock)
        #expect(alice.creationDate == f.clock.now)
        #expect(alice.modificationDate == f.clock.now)
        #expect(alice.synchronizable == false)
        #expect(accounts[1].synchronizable == true)

        let listing = try #require(f.recorder.entries(.copy).last)
        #expect(listing.query[Key.returnData] == nil)
        #expect(listing.query[Key.returnAttributes] == .bool(true))
        #expect(listing.query[Key.matchLimit] == .string(Key.matchLimitAll))
        let rows = try #require(listing.result?.array)
        #expect(rows.count == 2)
        #expect(rows.allSatisfy { $0.attributes?[Key.valueData] == nil })
    }

    @Test("Listing a service without items gives an empty list", arguments: Backend.allCases)
    func listEmpty(backend: Backend) throws {
        #expect(try backend.make().keychain.accounts(service: "com.example.none").isEmpty)
    }

    @Test("exists reads attributes only and never prompts, even for a biometry-protected item", arguments: Backend.allCases)
    func existsNeverPrompts(backend: Backend) throws {
        let f = backend.make()
        let protected = f.keychain(options: ItemOptions(accessibility: .whenUnlockedThisDeviceOnly, accessControlFlags: .biometryCurrentSet))
        try protected.save(secretData, for: generic())
        #expect(try protected.exists(generic()))
        #expect(try protected.exists(generic("nobody")) == false)
        #expect(try protected.attributes(for: generic())?.account == "alice")
        #expect(f.authenticator.promptCount == 0)
        #expect(f.recorder.entries(.copy).allSatisfy { $0.query[Key.returnData] == nil })
        // Reading the secret does prompt.
        _ = try protected.data(for: generic())
        #expect(f.authenticator.promptCount == 1)
    }
}

@Suite("Codable values")
struct CodableTests {
    struct Credentials: Codable, Equatable, Sendable {
        var user: String
        var token: String
        var expires: Date
    }

    @Test("A Codable value is saved as JSON and decoded back", arguments: Backend.allCases)
    func codableRoundTrip(backend: Backend) throws {
        let f = backend.make()
        let value = Credentials(user: "alice", token: secretText, expires: Date(timeIntervalSince1970: 1_000_000))
        try f.keychain.encode(value, for: generic())
        #expect(try f.keychain.value(Credentials.self, for: generic()) == value)
        #expect(try f.keychain.value(Credentials.self, for: generic("nobody")) == nil)
    }

    @Test("A value of another shape fails with decodingFailed, naming the path but not the bytes", arguments: Backend.allCases)
    func decodingFailure(backend: Backend) throws {
        let f = backend.make()
        try f.keychain.save("{\"user\":\"alice\",\"token\":\"\(secretText)\"}", for: generic())
        let error = try #require(throws: KeychainError.self) { try f.keychain.value(Credentials.self, for: generic()) }
        #expect(error == .decodingFailed)
        #expect(error.reason.contains("expires"))
        #expect(!String(describing: error).contains(secretText))
        #expect(!(error.errorDescription ?? "").contains(secretText))

        try f.keychain.save(secretText + " not json", for: generic())
        let garbage = try #require(throws: KeychainError.self) { try f.keychain.value(Credentials.self, for: generic()) }
        #expect(garbage == .decodingFailed)
        #expect(!String(describing: garbage).contains("XYZZY"))
    }

    @Test("Binary data read as a string fails with stringEncoding, without the bytes", arguments: Backend.allCases)
    func notUTF8(backend: Backend) throws {
        let f = backend.make()
        try f.keychain.save(Data([0xFF, 0xFE, 0x58, 0x59]), for: generic())
        let error = try #require(throws: KeychainError.self) { try f.keychain.string(for: generic()) }
        #expect(error == .stringEncoding)
        #expect(error.description.contains("4 bytes"))
    }
}

@Suite("Items built right")
struct ItemValidationTests {
    @Test("An empty service, server or access group is rejected at construction")
    func emptyRejected() {
        #expect(throws: KeychainError.invalidItem) { try GenericPassword(service: "", account: "a") }
        #expect(throws: KeychainError.invalidItem) { try GenericPassword(service: "s", account: "a", accessGroup: "") }
        #expect(throws: KeychainError.invalidItem) { try InternetPassword(server: "", account: "a") }
        #expect(throws: KeychainError.invalidItem) { try InternetPassword(server: "h", account: "a", port: 70_000) }
        #expect(throws: Never.self) { try GenericPassword(service: "s", account: "") }
    }

    @Test("Deleting or listing an empty service is rejected before any query", arguments: Backend.allCases)
    func emptyServiceQueries(backend: Backend) throws {
        let f = backend.make()
        try f.keychain.save("v", for: generic())
        #expect(throws: KeychainError.invalidItem) { try f.keychain.deleteAll(service: "") }
        #expect(throws: KeychainError.invalidItem) { try f.keychain.accounts(service: "") }
        #expect(f.recorder.entries(.delete).isEmpty)
        #expect(try f.keychain.string(for: generic()) == "v")
    }

    @Test("Every internet protocol and authentication type has Apple's four-character code")
    func fourCharacterCodes() {
        #expect(InternetProtocol.allCases.count == 31)
        #expect(InternetProtocol.allCases.allSatisfy { $0.rawValue.utf8.count == 4 })
        #expect(Set(InternetProtocol.allCases.map(\.rawValue)).count == 31)
        #expect(InternetProtocol.https.rawValue == "htps")
        #expect(InternetProtocol.ssh.rawValue == "ssh ")
        #expect(AuthenticationType.allCases.count == 8)
        #expect(AuthenticationType.httpDigest.rawValue == "httd")
    }

    @Test("Item descriptions name the item but hold no secret")
    func descriptions() throws {
        #expect(generic().description == "genp service=\"com.example.api\" account=\"alice\"")
        let web = try InternetPassword(server: "example.com", account: "bob", protocol: .https, port: 443)
        #expect(web.description.contains("server=\"example.com\""))
        #expect(web.description.contains("port=443"))
    }
}
