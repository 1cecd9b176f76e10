// Code written for Apple platforms: part of an iOS app's keychain layer, copied unchanged, `import` lines included.
// This package exists to prove that such code builds and its tests pass on Linux against Keystone's `Security`,
// `LocalAuthentication` and `CryptoKit` products (scripts/check-unchanged-apple-code.sh). Never edit the copied code
// to make it build here: a failure is a Keystone bug.
//
// The biometric manager against the mock context: success, and biometry unavailable.
//
// Glue (not part of the copied code):
// - the copied code shows no `import` lines: the imports below are the ones it needs on Apple platforms too.
// - the copied code is test methods shown without their XCTestCase class: the class declaration around them.
import XCTest
@testable import MyApp

final class BiometricAuthManagerTests: XCTestCase {
// ---- copied unchanged from here ----
func testBiometricAuthSuccess() {
    let mock = MockBiometricContext()
    mock.canEvaluateResult = true
    mock.evaluateResult = true
    let manager = BiometricAuthManager(context: mock)

    let exp = expectation(description: "auth")
    manager.authenticate(reason: "Test") { result in
        if case .failure = result { XCTFail("Expected success") }
        exp.fulfill()
    }
    waitForExpectations(timeout: 1)
    XCTAssertTrue(mock.evaluateCalled)
}

func testBiometricAuthUnavailable() {
    let mock = MockBiometricContext()
    mock.canEvaluateResult = false
    let manager = BiometricAuthManager(context: mock)

    let exp = expectation(description: "unavailable")
    manager.authenticate(reason: "Test") { result in
        if case .success = result { XCTFail("Expected failure") }
        exp.fulfill()
    }
    waitForExpectations(timeout: 1)
    XCTAssertFalse(mock.evaluateCalled)  // Should not attempt auth
}
// ---- end of the copied code ----
}
