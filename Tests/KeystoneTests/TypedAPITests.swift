import DefaultKeychainLock
import Foundation
import Testing
import Keystone
import KeychainEngine
import KeystoneTesting

/// One stack of ``TypedStack`` with every call of the typed API to its store recorded: the keychain the suites below
/// test (``TypedStackFixture/recordedKeychain(options:authentication:)``). On the production stacks that is the path
/// `Keychain()` takes; on the engine stacks the `addOrUpdate` path (the compiled one is `ProductionStackTypedAPITests`'
/// and `SavePathDifferentialTests`').
///
/// The suites run one test at a time and own the default keychain: the production stacks replace it.
struct StackUnderTest {
    let stack: TypedStackFixture
    let keychain: Keychain
    var recorder: RecordingStore { stack.recorder }
    var clock: TestClock { stack.clock }
    var authenticator: ScriptedAuthenticator { stack.authenticator }

    init(_ stack: TypedStack) throws {
        self.stack = try TypedStackFixture(stack)
        keychain = self.stack.recordedKeychain()
    }

    func keychain(options: ItemOptions = ItemOptions()) -> Keychain { stack.recordedKeychain(options: options) }
    func remove() { stack.remove() }
}

@Suite("Save, read, update, delete", .serialized, .ownsDefaultKeychain)
struct RoundTripTests {
    @Test("Data saved is read back", arguments: TypedStack.available)
    func dataRoundTrip(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
        try f.keychain.save(secretData, for: generic())
        #expect(try f.keychain.data(for: generic()) == secretData)
    }

    @Test("A string saved is read back, and reading a missing item gives nil", arguments: TypedStack.available)
    func stringRoundTrip(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
        #expect(try f.keychain.string(for: generic()) == nil)
        try f.keychain.save("héllo ✓", for: generic())
        #expect(try f.keychain.string(for: generic()) == "héllo ✓")
        #expect(try f.keychain.string(for: generic("bob")) == nil)
    }

    @Test("Saving twice updates the one item and keeps its creation date (never delete-then-add)", arguments: TypedStack.available)
    func saveTwiceUpdates(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
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

    @Test("Updating an existing item changes its secret; updating a missing one throws itemNotFound", arguments: TypedStack.available)
    func update(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
        #expect(throws: KeychainError.itemNotFound) { try f.keychain.update("x", for: generic()) }
        #expect(try f.keychain.exists(generic()) == false)
        try f.keychain.save("old", for: generic())
        try f.keychain.update("new", for: generic())
        #expect(try f.keychain.string(for: generic()) == "new")
    }

    @Test("Deleting removes the item; deleting a missing item is done, not an error", arguments: TypedStack.available)
    func delete(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
        try f.keychain.save("v", for: generic())
        #expect(try f.keychain.delete(generic()) == true)
        #expect(try f.keychain.data(for: generic()) == nil)
        #expect(try f.keychain.delete(generic()) == false)
    }

    @Test("Items differ by account, service and access group", arguments: TypedStack.available)
    func identity(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
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

    @Test("Internet passwords round-trip, and protocols tell items apart", arguments: TypedStack.available)
    func internetPasswords(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
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

@Suite("Whole services, listing and existence", .serialized, .ownsDefaultKeychain)
struct ServiceTests {
    @Test("Deleting a service deletes all its accounts and nothing of other services", arguments: TypedStack.available)
    func deleteAllOfOneService(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
        for account in ["a", "b", "c"] { try f.keychain.save(account, for: generic(account)) }
        try f.keychain.save("keep", for: generic("a", service: "com.example.other"))
        try f.keychain.save("keep-web", for: InternetPassword(server: "com.example.api", account: "a"))
        try f.keychain.save("synced", for: GenericPassword(service: "com.example.api", account: "d", synchronizable: true))

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

    @Test("Deleting a service in an access group leaves the same service in other groups", arguments: TypedStack.available)
    func deleteAllInOneGroup(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
        let team = f.keychain(options: ItemOptions(accessGroup: "team.shared"))
        try team.save("team", for: generic())
        try f.keychain(options: ItemOptions(accessGroup: "app.private")).save("app", for: generic())
        try team.deleteAll(service: "com.example.api")
        #expect(try team.data(for: generic()) == nil)
        #expect(try f.keychain(options: ItemOptions(accessGroup: "app.private")).string(for: generic()) == "app")
        #expect(f.recorder.entries(.delete).last?.query[Key.accessGroup] == .string("team.shared"))
    }

    @Test("Listing accounts returns their attributes and never a secret", arguments: TypedStack.available)
    func listAccounts(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
        let labelled = f.keychain(options: ItemOptions(accessibility: .afterFirstUnlock, label: "Alice's token", comment: "for the API"))
        try labelled.save(secretData, for: generic("alice"))
        try f.keychain.save(secretData, for: GenericPassword(service: "com.example.api", account: "bob", synchronizable: true))

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

    @Test("Listing a service without items gives an empty list", arguments: TypedStack.available)
    func listEmpty(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
        #expect(try f.keychain.accounts(service: "com.example.none").isEmpty)
    }

    @Test("exists reads attributes only and never prompts, even for a biometry-protected item", arguments: TypedStack.available)
    func existsNeverPrompts(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
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

@Suite("Codable values", .serialized, .ownsDefaultKeychain)
struct CodableTests {
    struct Credentials: Codable, Equatable, Sendable {
        var user: String
        var token: String
        var expires: Date
    }

    @Test("A Codable value is saved as JSON and decoded back", arguments: TypedStack.available)
    func codableRoundTrip(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
        let value = Credentials(user: "alice", token: secretText, expires: Date(timeIntervalSince1970: 1_000_000))
        try f.keychain.encode(value, for: generic())
        #expect(try f.keychain.value(Credentials.self, for: generic()) == value)
        #expect(try f.keychain.value(Credentials.self, for: generic("nobody")) == nil)
    }

    @Test("A value of another shape fails with decodingFailed, naming the path but not the bytes", arguments: TypedStack.available)
    func decodingFailure(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
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

    @Test("Binary data read as a string fails with stringEncoding, without the bytes", arguments: TypedStack.available)
    func notUTF8(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
        try f.keychain.save(Data([0xFF, 0xFE, 0x58, 0x59]), for: generic())
        let error = try #require(throws: KeychainError.self) { try f.keychain.string(for: generic()) }
        #expect(error == .stringEncoding)
        #expect(error.description.contains("4 bytes"))
    }
}

@Suite("Items built right", .serialized, .ownsDefaultKeychain)
struct ItemValidationTests {
    @Test("An empty service, server or access group is rejected at construction")
    func emptyRejected() {
        #expect(throws: KeychainError.invalidItem) { try GenericPassword(service: "", account: "a") }
        #expect(throws: KeychainError.invalidItem) { try GenericPassword(service: "s", account: "a", accessGroup: "") }
        #expect(throws: KeychainError.invalidItem) { try InternetPassword(server: "", account: "a") }
        #expect(throws: KeychainError.invalidItem) { try InternetPassword(server: "h", account: "a", port: 70_000) }
        #expect(throws: Never.self) { try GenericPassword(service: "s", account: "") }
    }

    @Test("Deleting or listing an empty service is rejected before any query", arguments: TypedStack.available)
    func emptyServiceQueries(stack: TypedStack) throws {
        let f = try StackUnderTest(stack)
        defer { f.remove() }
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
