// swift-tools-version: 6.1
import PackageDescription

// keystone-benchmarks: Keystone's speed and memory against baselines measured in the same run. A package of its own
// (as swift-nio's and swift-certificates' benchmarks are), so that no product of Keystone depends on a test fixture or
// a baseline: it uses Keystone's products like any app, and builds the fixtures it shares with Keystone's tests
// (private etcd clusters, Secret Service daemons and software TPMs) from their sources under ../Tests through symbolic
// links in Sources/. Run from the repository's root:
//
//     swift run --package-path Benchmarks -c release keystone-benchmarks [--quick]
//
// It builds in its own folder (Benchmarks/.build): the first build compiles Keystone and its dependencies again.

// Swift 6 language mode (complete strict concurrency) for every target, as in Keystone's manifest.
let settings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "KeystoneBenchmarks",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .executable(name: "keystone-benchmarks", targets: ["KeystoneBenchmarks"]),
    ],
    dependencies: [
        // The NIO trait: the etcd benchmark measures KeychainEtcd, which is built on AsyncHTTPClient.
        .package(name: "Keystone", path: "..", traits: ["NIO"]),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // The etcd benchmark's raw baseline (EtcdBaselineClient): the packages KeychainEtcd's client is built on.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // `keystone-benchmarks rotation`: the ConfigReader watching KeystoneConfigProvider, as an app reads it.
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
    ],
    targets: [
        .executableTarget(name: "KeystoneBenchmarks", dependencies: [
            .product(name: "KeychainEngine", package: "Keystone"),
            .product(name: "KeychainServices", package: "Keystone"),
            .product(name: "Keystone", package: "Keystone"),
            .product(name: "KeystoneTesting", package: "Keystone"),
            // `keystone-benchmarks files`: protected files sealed and read back, file to file.
            .product(name: "KeystoneProtectedFiles", package: "Keystone"),
            .product(name: "KeychainFile", package: "Keystone"),
            // The CLI rows time the `keystone` binary built next to this one: depending on the executable product
            // builds it in the same configuration.
            .product(name: "keystone", package: "Keystone"),
            .product(name: "Crypto", package: "swift-crypto"),
            "CBaselineSQLite",
            // `keystone-benchmarks secret-service`: Keystone's Secret Service storage against plain libsecret,
            // secret-tool and Python keyring, on a private daemon.
            "SecretServiceDaemon",
            .product(name: "KeychainSecretService", package: "Keystone", condition: .when(platforms: [.linux])),
            .target(name: "CLibSecretBaseline", condition: .when(platforms: [.linux])),
            // `keystone-benchmarks tpm`: Keystone's TPM signatures against raw ESAPI and tpm2_sign, on a private swtpm.
            "Swtpm",
            .product(name: "KeychainTPM", package: "Keystone", condition: .when(platforms: [.linux])),
            .target(name: "CTPMBaseline", condition: .when(platforms: [.linux])),
            // `keystone-benchmarks etcd`: SecItem on an etcd keychain against raw puts and gets, on a private 3-member cluster.
            "EtcdCluster",
            .product(name: "KeychainEtcd", package: "Keystone", condition: .when(platforms: [.linux])),
            .target(name: "EtcdBaselineClient", condition: .when(platforms: [.linux])),
            // `keystone-benchmarks rotation`: KeystoneConfigProvider's etcd watch against a raw etcd watch (AsyncHTTPClient).
            .product(name: "KeystoneConfiguration", package: "Keystone", condition: .when(platforms: [.linux])),
            .product(name: "Configuration", package: "swift-configuration", condition: .when(platforms: [.linux])),
            .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(platforms: [.linux])),
            .product(name: "NIOCore", package: "swift-nio", condition: .when(platforms: [.linux])),
        ], swiftSettings: settings),

        // The baselines: plain C against the system libraries (not part of Keystone). The system-library targets carry
        // the libraries' pkg-config flags; they are named apart from Keystone's own (CSQLite, CLibSecret, CTSS2), which
        // are not products, because a module name is unique across the package graph.
        .systemLibrary(name: "CBaselineSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CBaselineLibSecret", pkgConfig: "libsecret-1", providers: [.apt(["libsecret-1-dev"])]),
        .systemLibrary(name: "CBaselineTSS2", pkgConfig: "tss2-esys", providers: [.apt(["libtss2-dev"])]),
        // The Secret Service benchmark's baseline: plain libsecret calls from C.
        .target(name: "CLibSecretBaseline", dependencies: ["CBaselineLibSecret"]),
        // The TPM benchmark's baseline: plain ESAPI calls from C.
        .target(name: "CTPMBaseline", dependencies: ["CBaselineTSS2"], linkerSettings: [
            .linkedLibrary("tss2-tctildr", .when(platforms: [.linux])),
            .linkedLibrary("tss2-mu", .when(platforms: [.linux])),
            .linkedLibrary("tss2-rc", .when(platforms: [.linux])),
        ]),

        // The etcd benchmark's baseline: KeychainEtcd's own etcd client (`EtcdClient`, package access in Keystone, so
        // not visible from this package) compiled again from the same files (Sources/EtcdBaselineClient/*.swift are
        // symbolic links to ../Sources/KeychainEtcd), so that raw puts and ranges go through the very client the
        // storage uses. Its files build only with Keystone's NIO trait, hence the define.
        .target(name: "EtcdBaselineClient", dependencies: [
            .product(name: "KeychainEngine", package: "Keystone"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
        ], swiftSettings: settings + [.define("NIO")]),

        // Keystone's test fixtures, built from the same sources as Keystone's tests (Sources/X -> ../../Tests/X).
        // They are targets of this package, never products of Keystone.
        // Cleans up after a fixture's daemons when the benchmark dies without doing it (swtpm).
        .target(name: "ProcessWatchdog", swiftSettings: settings),
        // A real software TPM (swtpm) of its own.
        .target(name: "Swtpm", dependencies: ["ProcessWatchdog"], swiftSettings: settings),
        // A real etcd cluster (Debian's etcd-server) on 127.0.0.1 ports, its data under a temporary directory.
        .target(name: "EtcdCluster", dependencies: ["ProcessWatchdog"], swiftSettings: settings),
        // A real, private Secret Service (its own dbus-daemon and gnome-keyring-daemon).
        .target(name: "SecretServiceDaemon", swiftSettings: settings),
    ],
    swiftLanguageModes: [.v6]
)
