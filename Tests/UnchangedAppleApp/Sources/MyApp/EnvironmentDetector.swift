// Code written for Apple platforms: part of an iOS app's keychain layer, copied unchanged, `import` lines included.
// This package exists to prove that such code builds and its tests pass on Linux against Keystone's `Security`,
// `LocalAuthentication` and `CryptoKit` products (scripts/check-unchanged-apple-code.sh). Never edit the copied code
// to make it build here: a failure is a Keystone bug.
//
// Runtime detection of the simulator and of a test run.
//
// Glue (not part of the copied code):
// - the copied code shows no `import` lines: the imports below are the ones it needs on Apple platforms too.
import Foundation

// ---- copied unchanged from here ----
// Runtime detection via ProcessInfo
struct EnvironmentDetector {
    static var isSimulator: Bool {
        ProcessInfo.processInfo.environment["SIMULATOR_DEVICE_NAME"] != nil
    }
    static var isRunningTests: Bool {
        ProcessInfo.processInfo.environment["XCTestConfigurationFilePath"] != nil
    }
}
// ---- end of the copied code ----
