#if canImport(XCTest)
import XCTest
import Keystone
import KeystoneTesting

final class KeychainTestCaseTests: KeychainTestCase {
    func testEachTestHasAnEmptyIsolatedKeychain() throws {
        XCTAssertEqual(isolatedKeychain.memory?.itemCount, 0)
        try isolatedKeychain.keychain.save("v", for: isolatedKeychain.item("a"))
        XCTAssertEqual(try isolatedKeychain.keychain.string(for: isolatedKeychain.item("a")), "v")
    }

    func testWithIsolatedKeychainWorksInXCTest() throws {
        let memory = try withIsolatedKeychain { isolated -> InMemoryKeychain? in
            try isolated.keychain.save("v", for: isolated.item("a"))
            XCTAssertEqual(isolated.memory?.itemCount, 1)
            return isolated.memory
        }
        XCTAssertEqual(memory?.itemCount, 0)
    }
}
#endif
