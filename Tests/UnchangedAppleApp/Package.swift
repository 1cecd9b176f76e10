// swift-tools-version: 6.1
import PackageDescription

// An iOS app's keychain layer as written for Apple platforms (a keychain protocol, its error, a mock and the real
// service; a Secure Enclave signing key with a software fallback; biometric authentication behind a protocol; a
// UserDefaults-to-keychain migration) and its XCTest and Swift Testing tests, copied unchanged with their `import`
// lines (`Foundation`, `Security`, `CryptoKit`, `LocalAuthentication`, `XCTest`, `Testing`).
//
// A package of its own, as an app is: it depends on Keystone's `Security`, `LocalAuthentication` and `CryptoKit`
// products on Linux only (on Apple platforms those imports are the SDK's frameworks), and proves that such code builds
// and its tests pass on Linux against the default keychain (a keychain file). Run it with
// scripts/check-unchanged-apple-code.sh from the repository's root: it builds in its own folder
// (Tests/UnchangedAppleApp/.build) and keeps the tests off the user's keychain.
//
// The app's code in Swift 6 language mode (the default of this tools version), the strictest check of Keystone's API,
// without Keystone's ExistentialAny setting: it names protocols as types without `any`, as app code does. On Apple
// platforms it needs Swift 5 mode, as Xcode makes new projects: Apple's `LAContext.evaluatePolicy` takes a `@Sendable`
// reply, the app's `BiometricAuthContext` protocol a plain one, a mismatch Swift 6 mode rejects there (Keystone's
// LAContext accepts a plain reply, for such protocols). The script type-checks the same files against the Apple SDK
// stand-in in Swift 5 mode. The tests are in Swift 5 mode here too: they call XCTest's `waitForExpectations(timeout:)`,
// which is main-actor isolated, from nonisolated test methods, an error in Swift 6 mode.

let linux: [Platform] = [.linux]

let package = Package(
    name: "UnchangedAppleApp",
    platforms: [.macOS(.v13), .iOS(.v16)],
    dependencies: [
        // The repository's root; default traits (none of these products needs the NIO trait).
        .package(name: "Keystone", path: "../.."),
    ],
    targets: [
        .target(name: "MyApp", dependencies: [
            .product(name: "Security", package: "Keystone", condition: .when(platforms: linux)),
            .product(name: "LocalAuthentication", package: "Keystone", condition: .when(platforms: linux)),
            .product(name: "CryptoKit", package: "Keystone", condition: .when(platforms: linux)),
        ]),
        .testTarget(name: "MyAppTests", dependencies: [
            "MyApp",
            .product(name: "CryptoKit", package: "Keystone", condition: .when(platforms: linux)),
        ], swiftSettings: [.swiftLanguageMode(.v5)]),
    ]
)
