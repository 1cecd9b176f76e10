import Testing
import Keystone
import KeystoneTesting

/// The README's testing example, kept compiling and passing.
@Suite("README examples")
struct ReadmeExampleTests {
    @Test("a locked device never loses the token")
    func lockedDevice() throws {
        let memory = InMemoryKeychain(profile: .device)
        let keychain = Keychain(store: memory)
        let token = try GenericPassword(service: "com.example.api", account: "alice")
        try keychain.save("t0k3n", for: token)
        memory.lockState = .locked
        #expect(throws: KeychainError.interactionNotAllowed) { try keychain.string(for: token) }
        memory.lockState = .unlocked
        #expect(try keychain.string(for: token) == "t0k3n")
    }

    @Test("the round trip on the README's first screen")
    func roundTrip() throws {
        let keychain = Keychain(store: InMemoryKeychain())
        let token = try GenericPassword(service: "com.example.api", account: "alice")
        try keychain.save("s3cret", for: token)
        #expect(try keychain.string(for: token) == "s3cret")
        try keychain.update("rotated", for: token)
        #expect(try keychain.string(for: token) == "rotated")
        #expect(try keychain.delete(token))
        #expect(try keychain.string(for: token) == nil)
    }

    @Test("the README's property wrapper line")
    func propertyWrapper() throws {
        let keychain = Keychain(store: InMemoryKeychain())
        @KeychainStored(try GenericPassword(service: "com.example.api", account: "token"), keychain: keychain) var apiToken: String?
        apiToken = "t0k3n"
        #expect(apiToken == "t0k3n")
        #expect($apiToken.lastError == nil)
        #expect(try $apiToken.read() == "t0k3n")
    }
}
