import Testing

/// One suite at a time owns the process-wide default keychain (`KeychainServicesDefaults`) that the SecItem
/// functions use on Linux.
///
/// Test targets share one test process, and Swift Testing runs suites in parallel: `.serialized` orders the tests
/// of one suite, not two suites. A suite whose tests replace the default keychain (`useMemoryKeychain()`) or call
/// SecItem functions carries this trait, and runs only while no other such suite does.
///
/// ```swift
/// @Suite(.serialized, .ownsDefaultKeychain) struct MyTests { init() { KeychainServicesDefaults.useMemoryKeychain() } }
/// ```
public struct DefaultKeychainOwnership: SuiteTrait, TestScoping {
    /// The trait scopes the suite as a whole, not each test in it.
    public var isRecursive: Bool { false }

    /// The suite itself; none for its tests.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> DefaultKeychainOwnership? {
        test.isSuite ? self : nil
    }

    /// Runs the whole suite while holding the default keychain.
    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        await DefaultKeychainQueue.shared.acquire()
        do {
            try await function()
        } catch {
            await DefaultKeychainQueue.shared.release()
            throw error
        }
        await DefaultKeychainQueue.shared.release()
    }
}

extension Trait where Self == DefaultKeychainOwnership {
    /// The suite runs while no other suite with this trait runs: it may replace and use the default keychain.
    public static var ownsDefaultKeychain: Self { DefaultKeychainOwnership() }
}

/// A first-come, first-served lock for suites: waiting suspends, it never blocks a thread.
actor DefaultKeychainQueue {
    static let shared = DefaultKeychainQueue()

    private var held = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func acquire() async {
        guard held else {
            held = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    /// Hands the lock to the next waiting suite, if any.
    func release() {
        if waiting.isEmpty {
            held = false
        } else {
            waiting.removeFirst().resume()
        }
    }
}
