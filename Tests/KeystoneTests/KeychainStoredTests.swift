import Foundation
import KeychainEngine
import Keystone
import KeystoneTesting
import Testing

struct Credentials: Codable, Equatable, Sendable {
    var user: String
    var expires: Int
}

@Suite("@KeychainStored: a keychain value read and written like a property")
struct KeychainStoredTests {
    let memory = InMemoryKeychain()
    var keychain: Keychain { Keychain(store: memory) }

    @Test("strings, data and Codable values round-trip; nil deletes; absent reads nil with no error")
    func roundTrip() throws {
        let token = KeychainStored<String>(try GenericPassword(service: "svc", account: "token"), keychain: keychain)
        #expect(token.wrappedValue == nil)
        #expect(token.lastError == nil)
        token.wrappedValue = "t0k3n"
        #expect(token.wrappedValue == "t0k3n")
        // Stored as plain UTF-8, so other keychain code reads it as usual.
        #expect(try keychain.string(for: GenericPassword(service: "svc", account: "token")) == "t0k3n")
        token.wrappedValue = "rotated"  // an update, not delete-then-add
        #expect(try token.read() == "rotated")
        let blob = KeychainStored<Data>(try GenericPassword(service: "svc", account: "blob"), keychain: keychain)
        blob.wrappedValue = Data([0, 1, 2])
        #expect(blob.wrappedValue == Data([0, 1, 2]))
        let credentials = KeychainStored<Credentials>(try GenericPassword(service: "svc", account: "creds"), keychain: keychain)
        credentials.wrappedValue = Credentials(user: "alice", expires: 42)
        #expect(credentials.wrappedValue == Credentials(user: "alice", expires: 42))
        token.wrappedValue = nil
        #expect(token.wrappedValue == nil && token.lastError == nil)
        #expect(try keychain.data(for: GenericPassword(service: "svc", account: "token")) == nil)
    }

    @Test("a locked keychain is an error, not absence: the read records it, and nothing is deleted")
    func lockedIsNotAbsent() throws {
        let item = try GenericPassword(service: "svc", account: "token")
        let token = KeychainStored<String>(item, keychain: keychain)
        token.wrappedValue = "t0k3n"
        memory.lockState = .locked
        #expect(token.wrappedValue == nil)
        #expect(token.lastError == .interactionNotAllowed)
        #expect(token.lastError?.isTransient == true)
        #expect(throws: KeychainError.interactionNotAllowed) { try token.read() }
        token.wrappedValue = "lost?"  // a write while locked fails, visibly
        #expect(token.lastError == .interactionNotAllowed)
        memory.lockState = .unlocked
        #expect(token.wrappedValue == "t0k3n")
        #expect(token.lastError == nil)
    }

    @Test("an injected failure on save is observable through the projected value")
    func writeFailure() throws {
        struct Holder {
            @KeychainStored<String> var token: String?
        }
        let holder = Holder(token: KeychainStored(try GenericPassword(service: "svc", account: "token"), keychain: keychain))
        memory.injectFailure(errSecMissingEntitlementForTests, on: .add)
        holder.token = "t0k3n"
        #expect(holder.$token.lastError?.status == errSecMissingEntitlementForTests)
        #expect(holder.token == nil)
        // The failure was injected once: the next write succeeds and clears the error.
        try holder.$token.write("again")
        #expect(holder.$token.lastError == nil)
        #expect(holder.token == "again")
    }

    @Test("a value of another shape fails with a decoding error, without deleting it")
    func wrongShape() throws {
        let item = try GenericPassword(service: "svc", account: "creds")
        try keychain.save("not json", for: item)
        let credentials = KeychainStored<Credentials>(item, keychain: keychain)
        #expect(credentials.wrappedValue == nil)
        #expect(credentials.lastError != nil)
        #expect(try keychain.string(for: item) == "not json")
    }
}

let errSecMissingEntitlementForTests: Int32 = -34018
