import Foundation
import Keystone
import KeychainEngine

/// A keychain of its own for one test: a unique service, a store, and cleanup when the test ends.
///
/// Get one with `withIsolatedKeychain(_:_:)` (any test framework) or the Swift Testing trait
/// `@Test(.isolatedKeychain)` and ``IsolatedKeychain/current``.
public struct IsolatedKeychain: Sendable {
    /// Where an isolated keychain's items live.
    public enum Backend: Sendable, Hashable {
        /// A fresh ``InMemoryKeychain`` with this device profile.
        case inMemory(InMemoryKeychain.DeviceProfile = .device)
        /// The platform keychain (`SystemKeychain`), under a unique service deleted afterwards.
        case system
    }

    /// The unique service of this test: every item it saves should use it.
    public let service: String
    /// The typed keychain over the store.
    public let keychain: Keychain
    /// The in-memory keychain, when the backend is ``Backend/inMemory(_:)``: its controls.
    public let memory: InMemoryKeychain?

    /// The isolated keychain of the running test, set by the `.isolatedKeychain` trait and by
    /// `withIsolatedKeychain(_:_:)`.
    @TaskLocal public static var current: IsolatedKeychain?

    /// Creates an isolated keychain on `backend` with a unique service starting with `prefix`.
    public init(_ backend: Backend = .inMemory(), prefix: String = "keystone-test") {
        service = "\(prefix).\(UUID().uuidString)"
        switch backend {
        case .inMemory(let profile):
            let memory = InMemoryKeychain(profile: profile)
            self.memory = memory
            keychain = Keychain(store: memory)
        case .system:
            memory = nil
            keychain = Keychain(store: SystemKeychain())
        }
    }

    /// The generic password `account` of this test's service.
    public func item(_ account: String) -> GenericPassword {
        // The service is never empty.
        try! GenericPassword(service: service, account: account)
    }

    /// Deletes every item of this test's service (and nothing else).
    ///
    /// - Throws: `KeychainError` (`errSecInteractionNotAllowed` when the keychain is locked).
    public func cleanUp() throws {
        if let memory, memory.lockState != .unlocked { memory.lockState = .unlocked }
        try keychain.deleteAll(service: service)
    }

    /// ``cleanUp()`` for async code: the deletion (file I/O with the system keychain) runs on a thread of its own,
    /// never on Swift's cooperative pool. Failures are ignored, as the synchronous scopes ignore them.
    func cleanUpOffThePool() async {
        if let memory, memory.lockState != .unlocked { memory.lockState = .unlocked }
        _ = try? await keychain.deleteAll(service: service)
    }
}

/// Runs `body` with a fresh isolated keychain (also as ``IsolatedKeychain/current``), then deletes
/// everything of its service, even when `body` throws.
///
/// ```swift
/// func testSavesToken() throws {      // XCTest
///     try withIsolatedKeychain { isolated in
///         try TokenStore(keychain: isolated.keychain, service: isolated.service).save("t")
///     }
/// }
/// ```
///
/// - Throws: what `body` throws.
public func withIsolatedKeychain<Result>(_ backend: IsolatedKeychain.Backend = .inMemory(),
                                         _ body: (IsolatedKeychain) throws -> Result) rethrows -> Result {
    let isolated = IsolatedKeychain(backend)
    defer { try? isolated.cleanUp() }
    return try IsolatedKeychain.$current.withValue(isolated) { try body(isolated) }
}

/// The async form of `withIsolatedKeychain(_:_:)`.
///
/// - Throws: what `body` throws.
public func withIsolatedKeychain<Result>(_ backend: IsolatedKeychain.Backend = .inMemory(),
                                         _ body: (IsolatedKeychain) async throws -> Result) async rethrows -> Result {
    let isolated = IsolatedKeychain(backend)
    do {
        let result = try await IsolatedKeychain.$current.withValue(isolated) { try await body(isolated) }
        await isolated.cleanUpOffThePool()
        return result
    } catch {
        await isolated.cleanUpOffThePool()
        throw error
    }
}

#if canImport(Testing)
import Testing

/// A Swift Testing trait giving each test (each case of a parameterized test) its own keychain:
/// `@Test(.isolatedKeychain)`, then ``IsolatedKeychain/current`` inside the test.
///
/// ```swift
/// @Test(.isolatedKeychain) func savesToken() throws {
///     let isolated = try #require(IsolatedKeychain.current)
///     try isolated.keychain.save("t", for: isolated.item("token"))
/// }
/// ```
///
/// On a suite it applies to every test in it. Items of the test's service are deleted afterwards.
public struct IsolatedKeychainTrait: TestTrait, SuiteTrait, TestScoping {
    /// Where the items live.
    public let backend: IsolatedKeychain.Backend

    /// Applies to every test of a suite.
    public var isRecursive: Bool { true }

    /// One scope per test case; none for suites themselves.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> IsolatedKeychainTrait? {
        test.isSuite || testCase == nil ? nil : self
    }

    /// Runs the test with a fresh ``IsolatedKeychain`` as ``IsolatedKeychain/current``, then cleans up.
    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        let isolated = IsolatedKeychain(backend)
        do {
            try await IsolatedKeychain.$current.withValue(isolated) { try await function() }
        } catch {
            await isolated.cleanUpOffThePool()
            throw error
        }
        await isolated.cleanUpOffThePool()
    }
}

extension Trait where Self == IsolatedKeychainTrait {
    /// Each test gets its own in-memory keychain and service (device profile).
    public static var isolatedKeychain: Self { IsolatedKeychainTrait(backend: .inMemory()) }

    /// Each test gets its own keychain on `backend` and a unique service, cleaned up afterwards.
    public static func isolatedKeychain(_ backend: IsolatedKeychain.Backend) -> Self { IsolatedKeychainTrait(backend: backend) }
}
#endif

#if canImport(XCTest)
import XCTest

/// An XCTest base class giving each test method its own isolated keychain, cleaned up in tear-down.
///
/// ```swift
/// final class TokenStoreTests: KeychainTestCase {
///     func testSavesToken() throws {
///         try isolatedKeychain.keychain.save("t", for: isolatedKeychain.item("token"))
///     }
/// }
/// ```
///
/// Override ``keychainBackend`` to use the platform keychain. Tests that do not subclass can call
/// `withIsolatedKeychain(_:_:)` instead.
open class KeychainTestCase: XCTestCase {
    // A lock-protected box rather than a mutable stored property: test cases may be Sendable.
    private let box = Locked<IsolatedKeychain?>(nil)

    /// Where each test's keychain lives: a fresh in-memory keychain by default.
    open var keychainBackend: IsolatedKeychain.Backend { .inMemory() }

    /// The isolated keychain of the running test (set in `setUpWithError`).
    public var isolatedKeychain: IsolatedKeychain {
        guard let isolated = box.current else {
            preconditionFailure("isolatedKeychain is available between setUpWithError and tearDownWithError")
        }
        return isolated
    }

    /// Creates the test's isolated keychain.
    open override func setUpWithError() throws {
        try super.setUpWithError()
        let isolated = IsolatedKeychain(keychainBackend)
        box.withLock { $0 = isolated }
    }

    /// Deletes every item of the test's service.
    open override func tearDownWithError() throws {
        let isolated = box.withLock { value -> IsolatedKeychain? in
            defer { value = nil }
            return value
        }
        try isolated?.cleanUp()
        try super.tearDownWithError()
    }
}
#endif
