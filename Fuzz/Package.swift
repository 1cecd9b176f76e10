// swift-tools-version: 6.1
import PackageDescription

// libFuzzer targets for Keystone. Built with `Fuzz/run.sh`, which passes `-sanitize=fuzzer`; kept out of the root
// package so that its flags never reach a project that depends on Keystone.
let package = Package(
    name: "KeystoneFuzz",
    dependencies: [
        .package(name: "Keystone", path: ".."),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // libFuzzer's driver entry point, declared for Swift.
        .target(name: "CFuzzer"),
        // Random SecItem dictionaries against the engine: never a crash, only Apple's status codes.
        .executableTarget(name: "FuzzQuery", dependencies: ["CFuzzer", .product(name: "KeychainEngine", package: "Keystone")]),
        // Damaged keychain files: never a crash, never another item's secret.
        .executableTarget(name: "FuzzKeychainFile", dependencies: [
            "CFuzzer", .product(name: "KeychainEngine", package: "Keystone"), .product(name: "KeychainFile", package: "Keystone"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The CLI's getopt-style argument normaliser (its source file, shared by a symbolic link).
        .executableTarget(name: "FuzzArguments", dependencies: ["CFuzzer"]),
    ],
    swiftLanguageModes: [.v6]
)
