// swift-tools-version: 6.1
import PackageDescription

// Swift 6 language mode (complete strict concurrency) for every target.
let settings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

// Linux-only pieces stay out of the Apple-platform build.
let linuxOnly: [Platform] = [.linux, .android, .openbsd, .windows]

// The modules that let Apple-platform code say `import Security` / `import LocalAuthentication` on Linux. A module of
// that name must never exist in a build on a Mac: `swift build` of this package builds every target, and a module in
// the build's module directory is found before the SDK's framework, so KeychainServices' own `import Security` would
// get the empty stand-in. When the manifest is evaluated on an Apple host, the products keep their names (so a
// dependent's manifest resolves everywhere) but their modules are named apart. Decision: cross-compiling from a Mac
// to Linux therefore gets no `Security` module; such code says `import KeychainServices`.
#if canImport(Darwin)
let securityModule = "KeystoneSecurityPlaceholder"
let localAuthenticationModule = "KeystoneLocalAuthenticationPlaceholder"
let cryptoKitModule = "KeystoneCryptoKitPlaceholder"
#else
let securityModule = "Security"
let localAuthenticationModule = "LocalAuthentication"
let cryptoKitModule = "CryptoKit"
#endif

let package = Package(
    name: "Keystone",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .library(name: "KeychainEngine", targets: ["KeychainEngine"]),
        .library(name: "KeychainStorageTesting", targets: ["KeychainStorageTesting"]),  // the storage contract, for a storage's own tests
        .library(name: "KeychainServices", targets: ["KeychainServices"]),
        .library(name: "KeychainFile", targets: ["KeychainFile"]),
        .library(name: "Keystone", targets: ["Keystone"]),
        // Beside the typed API, apart so that apps that only store their own secrets build none of them.
        .library(name: "KeystoneImporters", targets: ["KeystoneImporters"]),             // CSV/JSON exports, pass, the Secret Service, other libraries' items
        .library(name: "KeystoneMigrations", targets: ["KeystoneMigrations"]),           // UserDefaults to the keychain, re-protection, fresh installs
        .library(name: "KeystoneProtectedFiles", targets: ["KeystoneProtectedFiles"]),   // files protected at rest
        // Backends an app adds and installs at start-up (`KeychainServicesDefaults.bootstrap(.secretService, …)`): each
        // needs a system library or a network stack, so an app that does not name one never builds or links it.
        .library(name: "KeychainSecretService", targets: ["KeychainSecretService"]),   // libsecret (the desktop's Secret Service)
        .library(name: "KeychainTPM", targets: ["KeychainTPM"]),                       // tpm2-tss (the TPM as the Secure Enclave)
        .library(name: "SystemAuthentication", targets: ["SystemAuthentication"]),     // libpam, GIO (LAContext on PAM, fprintd)
        .library(name: "KeychainEtcd", targets: ["KeychainEtcd"]),                     // the NIO trait: AsyncHTTPClient
        .library(name: "KeychainPKCS12", targets: ["KeychainPKCS12"]),                 // the NIO trait: swift-nio-ssl
        .library(name: "KeystoneConfiguration", targets: ["KeystoneConfiguration"]),   // the NIO trait: swift-configuration, swift-service-lifecycle
        .library(name: "KeystoneTesting", targets: ["KeystoneTesting"]),
        // SPKI certificate pinning (URLSession on Apple platforms, swift-nio-ssl on Linux): apart, so keychain-only users build no networking code.
        .library(name: "KeystonePinning", targets: ["KeystonePinning"]),
        // `import Security` and `import LocalAuthentication` on Linux. Depend on these two only on the platforms of
        // `linuxOnly` (`condition: .when(platforms: [.linux, ...])`): on Apple platforms the SDK's frameworks are meant.
        .library(name: "Security", targets: [securityModule]),
        .library(name: "LocalAuthentication", targets: [localAuthenticationModule]),
        // `import CryptoKit` on Linux: swift-crypto's Crypto and CryptoKit's SecureEnclave (on the TPM). Linux only too.
        .library(name: "CryptoKit", targets: [cryptoKitModule]),
        .executable(name: "keystone", targets: ["KeystoneCLI"]),
        // git's and docker's credential helpers (`credential.helper keystone`, `"credsStore": "keystone"`): small binaries
        // that serve an unlocked keychain file themselves and hand everything else to `keystone credential-helper`.
        .executable(name: "git-credential-keystone", targets: ["GitCredentialKeystone"]),
        .executable(name: "docker-credential-keystone", targets: ["DockerCredentialKeystone"]),
    ],
    // One trait, off by default: the products built on SwiftNIO (KeychainEtcd, KeychainPKCS12, KeystonePinning's
    // swift-nio-ssl verification on Linux). Without it an app resolves no SwiftNIO package: swift-crypto, swift-asn1,
    // swift-certificates, swift-log and swift-argument-parser only. An app that wants them:
    // `.package(url: …, from: …, traits: ["NIO"])`. This repository's own builds pass `--traits NIO`.
    // Decision: one trait, not one per product: SwiftPM passes enabled traits as `-D` flags in an order that changes
    // between evaluations of the manifest (Swift 6.3.1), and a changed order recompiles every module; one flag has one order.
    traits: [
        .trait(name: "NIO", description: "The products built on SwiftNIO: KeychainEtcd (an etcd cluster as a keychain storage, over AsyncHTTPClient), KeychainPKCS12 (SecPKCS12Import through swift-nio-ssl) and KeystonePinning's swift-nio-ssl verification on Linux."),
        .default(enabledTraits: []),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // NIOCore / NIOPosix by name (KeystonePinning, the TLS test server); swift-nio-ssl pulls it in anyway.
        // These three are used only under the NIO trait, so an app without it never resolves them.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        // The etcd storage's HTTP client (etcd's v3 JSON gateway), with TLS and connection pooling.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // KeystoneConfiguration (the NIO trait only): swift-configuration's provider and swift-service-lifecycle's service.
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // Examples/ConfigServer only (the NIO trait): the example server's HTTP framework.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    ],
    targets: [
        // The keychain as a database: Apple's SecItem rules over a storage protocol. Pure Swift, every platform.
        .target(name: "KeychainEngine", dependencies: [
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: settings),
        // The contract every KeychainStorage keeps, as clauses a storage's own tests run (as swift-nio's NIOTestUtils).
        .target(name: "KeychainStorageTesting", dependencies: ["KeychainEngine"], swiftSettings: settings),

        // SQLite, the system library (libsqlite3-dev on Debian).
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        // The Linux kernel keyring (keyctl) through raw syscalls: no libkeyutils needed.
        .target(name: "CKeyring", path: "Sources/CKeyring"),
        // getrandom(2), the kernel's CSPRNG, for SecRandomCopyBytes (Swift's Glibc module lacks <sys/random.h>).
        .target(name: "CSystemRandom", path: "Sources/CSystemRandom"),
        // Atomics and futex waits on memory shared between processes: the keychain file's cross-process group commit.
        .target(name: "CSharedMemory", path: "Sources/CSharedMemory"),
        // libsecret, the freedesktop Secret Service client (libsecret-1-dev on Debian), and Keystone's C boundary to it:
        // GLib and D-Bus stay behind plain C functions. Linux only, and only with the SecretService trait.
        .systemLibrary(name: "CLibSecret", path: "Sources/CLibSecret", pkgConfig: "libsecret-1",
                       providers: [.apt(["libsecret-1-dev"])]),
        .target(name: "CSecretService", dependencies: ["CLibSecret"], path: "Sources/CSecretService"),
        // The Secret Service (GNOME Keyring, KWallet, KeePassXC) as a keychain storage.
        .target(name: "KeychainSecretService", dependencies: [
            "KeychainEngine", "CSecretService", .target(name: "KeychainServices", condition: .when(platforms: linuxOnly)),
        ], swiftSettings: settings),
        // PAM, the system library (libpam0g-dev on Debian): the login password behind LAContext on Linux.
        .systemLibrary(name: "CPAM", path: "Sources/CPAM", providers: [.apt(["libpam0g-dev"])]),
        // GIO's D-Bus client (libglib2.0-dev), and Keystone's C boundary to fprintd on it: GLib stays behind plain C functions.
        .systemLibrary(name: "CGio", path: "Sources/CGio", pkgConfig: "gio-2.0", providers: [.apt(["libglib2.0-dev"])]),
        .target(name: "CFprintd", dependencies: ["CGio"], path: "Sources/CFprintd"),
        // The person behind LocalAuthentication on Linux: PAM, fprintd, the terminal. Linux only, and only with the
        // SystemAuthentication trait.
        .target(name: "SystemAuthentication", dependencies: [
            "KeychainEngine", .target(name: "KeychainServices", condition: .when(platforms: linuxOnly)),
            "CPAM", "CFprintd",
            .product(name: "Crypto", package: "swift-crypto"),
        ], swiftSettings: settings),
        // What the encrypted storages share: the master key and the keys derived from it, the password and Secure
        // Enclave protectors, row sealing and digests, the kernel-keyring unlock cache. Used by the keychain file and etcd.
        .target(name: "KeychainSealing", dependencies: [
            "KeychainEngine",
            .target(name: "CKeyring", condition: .when(platforms: linuxOnly)),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "CryptoExtras", package: "swift-crypto"),
        ], swiftSettings: settings),
        // The encrypted keychain file: Linux's default keychain storage.
        .target(name: "KeychainFile", dependencies: [
            "KeychainEngine", "KeychainSealing", "CSQLite", "CSharedMemory",
            .target(name: "CKeyring", condition: .when(platforms: linuxOnly)),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "CryptoExtras", package: "swift-crypto"),
        ], swiftSettings: settings),

        // An etcd cluster as a keychain storage: etcd's v3 API through its JSON gateway (AsyncHTTPClient), rows sealed
        // as in the keychain file, add and update as compare-and-swap transactions.
        // Its sources are under `#if NIO`: without the trait the module is empty and says what to add.
        .target(name: "KeychainEtcd", dependencies: [
            "KeychainEngine", "KeychainSealing", .target(name: "KeychainServices", condition: .when(platforms: linuxOnly)),
            .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["NIO"])),
            .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["NIO"])),
            .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["NIO"])),
            .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(traits: ["NIO"])),
            .product(name: "NIOFoundationCompat", package: "swift-nio", condition: .when(traits: ["NIO"])),
            .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(traits: ["NIO"])),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: settings),

        // Apple's Keychain Services API. On Apple platforms it re-exports Security.
        .target(name: "KeychainServices", dependencies: [
            // Only the keychain file and the memory storage: every other backend is a product the app installs
            // (`KeychainServicesDefaults.bootstrap`), so that this module links nothing but SQLite and the Swift runtime.
            .target(name: "KeychainEngine"),
            .target(name: "KeychainFile", condition: .when(platforms: linuxOnly)),
            .target(name: "CSystemRandom", condition: .when(platforms: linuxOnly)),
            // SecCertificate's parsing (X.509 DER, the names and extensions). Known hazard: X509's Certificate.swift
            // has `#if canImport(Security) import Security`, and X509 compiles with the build's module directory on its
            // search path. A clean build compiles X509 before the Linux `Security` shim exists, but any rebuild of X509
            // while `.build/<triple>/debug/Modules/Security.swiftmodule` exists (an existing .build directory, a
            // swift-certificates update, a touched checkout) fails: "missing required modules: 'CKeyring', 'CSQLite'".
            // Only builds that use the `Security`, `LocalAuthentication` or `CryptoKit` products have that module: an
            // app of `Keystone` / `KeychainServices` (and KeystonePinning, which imports KeychainServices) never does,
            // and scripts/check-consumer.sh rebuilds X509 in such an app's build folder. Workaround where it happens:
            // delete Modules/Security.* (or .build) and build again. (SwiftPM gives every target of a build one module
            // directory, so X509 cannot be kept from seeing a module of that name.)
            .product(name: "X509", package: "swift-certificates", condition: .when(platforms: linuxOnly)),
            .product(name: "SwiftASN1", package: "swift-asn1", condition: .when(platforms: linuxOnly)),
            // Backends that are asked for but not installed are logged.
            .product(name: "Logging", package: "swift-log"),
            // SecKey's algorithms (ECDSA, ECDH, ECIES, RSA) and certificate digests on Linux; on Apple platforms Security has them.
            .product(name: "Crypto", package: "swift-crypto", condition: .when(platforms: linuxOnly)),
            .product(name: "CryptoExtras", package: "swift-crypto", condition: .when(platforms: linuxOnly)),
        ], swiftSettings: settings),
        // SecPKCS12Import on Linux: swift-nio-ssl's NIOSSLPKCS12Bundle reads PKCS#12 with its vendored BoringSSL.
        // Installed with `KeychainServicesDefaults.bootstrap(.pkcs12)`; the NIO trait.
        .target(name: "KeychainPKCS12", dependencies: [
            .target(name: "KeychainServices", condition: .when(platforms: linuxOnly)),
            .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
        ], swiftSettings: settings),

        // KeychainServices under the names of Apple's frameworks, so Apple-platform code builds on Linux with
        // `import Security` / `import LocalAuthentication` unchanged. Empty when built for an Apple platform. Nothing
        // in this package depends on them except for `linuxOnly` platforms: an Apple build of a dependent never builds them,
        // and on an Apple host they are named apart (see `securityModule`).
        .target(name: securityModule, dependencies: ["KeychainServices"], path: "Sources/Security", swiftSettings: settings),
        .target(name: localAuthenticationModule, dependencies: ["KeychainServices"], path: "Sources/LocalAuthentication", swiftSettings: settings),
        // CryptoKit's names on Linux: swift-crypto re-exported, and `SecureEnclave` on KeychainServices' Secure
        // Enclave token (the TPM). Empty when built for an Apple platform; named apart on an Apple host.
        .target(name: cryptoKitModule, dependencies: [
            "KeychainServices", "KeychainEngine", .product(name: "Crypto", package: "swift-crypto"),
        ], path: "Sources/CryptoKit", swiftSettings: settings),

        // The typed Swift API, the same source on every platform.
        .target(name: "Keystone", dependencies: [
            "KeychainEngine", "KeychainServices",
            // CryptoKit keys in the keychain (`import Crypto`: swift-crypto, which re-exports CryptoKit on Apple platforms).
            .product(name: "Crypto", package: "swift-crypto"),
        ], swiftSettings: settings),
        // Importers into the typed API: password-manager exports (CSV, JSON), `pass` (gpg), the Secret Service's items,
        // and the items of other Swift keychain libraries (KeychainAccess, Valet, keychain-swift, SwiftKeychainWrapper).
        .target(name: "KeystoneImporters", dependencies: [
            "Keystone", .product(name: "Crypto", package: "swift-crypto"),
        ], swiftSettings: settings),
        // Launch-time migrations: UserDefaults to the keychain, re-protection, the fresh-install wipe (whose marker file
        // is written with the protected files' atomic writer; KeychainServices: whether the keychain is shared).
        .target(name: "KeystoneMigrations", dependencies: [
            "Keystone", "KeystoneProtectedFiles", "KeychainServices",
        ], swiftSettings: settings),
        // Files protected at rest: Data Protection on Apple platforms, sealed under keychain keys elsewhere.
        .target(name: "KeystoneProtectedFiles", dependencies: [
            "Keystone", .product(name: "Crypto", package: "swift-crypto"),
        ], swiftSettings: settings),
        // A swift-configuration provider over any Keystone keychain, and a swift-service-lifecycle service that unlocks it.
        // Its sources are under `#if NIO`: without the trait the module is empty (and resolves neither package).
        .target(name: "KeystoneConfiguration", dependencies: [
            "Keystone", "KeychainEngine",
            .target(name: "KeychainServices", condition: .when(platforms: linuxOnly)),
            .target(name: "KeychainFile", condition: .when(platforms: linuxOnly)),
            .target(name: "KeychainEtcd", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .product(name: "Configuration", package: "swift-configuration", condition: .when(traits: ["NIO"])),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["NIO"])),
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: settings),
        .testTarget(name: "KeystoneConfigurationTests", dependencies: [
            "KeystoneConfiguration", "Keystone", "KeychainEngine", "KeychainServices", "KeystoneTesting",
            "EtcdCluster", "SecretServiceDaemon",
            .target(name: "KeychainFile", condition: .when(platforms: linuxOnly)),
            .target(name: "KeychainSecretService", condition: .when(platforms: linuxOnly)),
            .target(name: "KeychainEtcd", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .product(name: "Configuration", package: "swift-configuration", condition: .when(traits: ["NIO"])),
            .product(name: "ConfigurationTesting", package: "swift-configuration", condition: .when(traits: ["NIO"])),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["NIO"])),
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: settings),
        // Test doubles that follow the keychain's rules.
        // KeychainServices: LocalAuthentication's names (LAContext, LAError) for ScriptedBiometricContext.
        // Crypto: the emulated Secure Enclave's P-256 keys and AES-GCM wrapping.
        .target(name: "KeystoneTesting", dependencies: [
            // KeystoneMigrations: InMemoryDefaults and InMemoryInstallMarker are its stores.
            "Keystone", "KeystoneMigrations", "KeychainEngine", "KeychainServices", .product(name: "Crypto", package: "swift-crypto"),
        ], swiftSettings: settings),

        // tpm2-tss (libtss2-dev on Debian): ESAPI, the TCTI loader, marshalling, response-code decoding. Linux only.
        .systemLibrary(name: "CTSS2", path: "Sources/CTSS2", pkgConfig: "tss2-esys", providers: [.apt(["libtss2-dev"])]),
        // Keystone's C boundary to a TPM 2.0 over ESAPI: plain C types only, TSS2 stays behind it.
        // (The module map's `link` lines reach only Swift importers, pkg-config's only tss2-esys: the C target names
        // the other libraries itself.)
        .target(name: "CTPM", dependencies: [.target(name: "CTSS2", condition: .when(platforms: linuxOnly))], path: "Sources/CTPM", linkerSettings: [
            .linkedLibrary("tss2-tctildr", .when(platforms: [.linux])),
            .linkedLibrary("tss2-mu", .when(platforms: [.linux])),
            .linkedLibrary("tss2-rc", .when(platforms: [.linux])),
        ]),
        // Hardware-bound P-256 keys in a TPM 2.0 (signing and key agreement). Linux only.
        .target(name: "KeychainTPM", dependencies: [
            "KeychainEngine", .target(name: "KeychainServices", condition: .when(platforms: linuxOnly)),
            .target(name: "CTPM", condition: .when(platforms: linuxOnly)), .product(name: "Crypto", package: "swift-crypto"),
            // "TSS2 PRIVATE KEY" PEM (the ASN.1 TPM key format of tpm2-openssl, the kernel, go-tpm-keyfiles).
            .product(name: "SwiftASN1", package: "swift-asn1"),
        ], swiftSettings: settings),

        // SPKI pinning over a trust evaluator: the policy, the URLSession delegate (Apple) and swift-nio-ssl's verification
        // callback (Linux, where NIO is the TLS stack).
        .target(name: "KeystonePinning", dependencies: [
            // SecTrust: Security on Apple platforms; on Linux, KeychainServices.
            .target(name: "KeychainServices", condition: .when(platforms: linuxOnly)),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "SwiftASN1", package: "swift-asn1"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .product(name: "NIOCore", package: "swift-nio", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .product(name: "NIOPosix", package: "swift-nio", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
        ], swiftSettings: settings),

        // git's and docker's credential-helper protocols over a keychain (KeychainFile only: the helpers start fast).
        .target(name: "KeystoneCredentialHelpers", dependencies: [
            "KeychainEngine", "KeychainFile", .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: settings),
        .executableTarget(name: "GitCredentialKeystone", dependencies: ["KeystoneCredentialHelpers"], swiftSettings: settings),
        .executableTarget(name: "DockerCredentialKeystone", dependencies: ["KeystoneCredentialHelpers"], swiftSettings: settings),
        // The `keystone` command-line tool, with macOS `security`'s verbs.
        .executableTarget(name: "KeystoneCLI", dependencies: [
            "KeychainEngine", "KeychainFile",
            "KeystoneCredentialHelpers",
            // `import --from`, `seal` / `unseal`: Keystone's importers and protected files.
            "Keystone", "KeystoneImporters", "KeystoneProtectedFiles",
            // Every backend, installed at start-up (etcd and PKCS#12 with the NIO trait).
            .target(name: "KeychainSecretService", condition: .when(platforms: linuxOnly)),
            .target(name: "SystemAuthentication", condition: .when(platforms: linuxOnly)),
            // `create-keychain --tpm` and doctor's TPM section.
            .target(name: "KeychainTPM", condition: .when(platforms: linuxOnly)),
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            // The certificate and key verbs (import, export, find-certificate, find-identity, delete-certificate,
            // delete-identity): SecCertificate / SecKey for the attributes Apple stores, swift-crypto for the PEM and
            // PKCS#8 conversions, X509 for validity dates, SwiftASN1 for PEM blocks. Linux only, as those verbs are.
            .target(name: "KeychainServices", condition: .when(platforms: linuxOnly)),
            .product(name: "Crypto", package: "swift-crypto", condition: .when(platforms: linuxOnly)),
            .product(name: "CryptoExtras", package: "swift-crypto", condition: .when(platforms: linuxOnly)),
            .product(name: "X509", package: "swift-certificates", condition: .when(platforms: linuxOnly)),
            .product(name: "SwiftASN1", package: "swift-asn1", condition: .when(platforms: linuxOnly)),
            // `keystone pin`: the chain a TLS server presents (swift-nio-ssl), and SPKI pins of certificates.
            .target(name: "KeystonePinning", condition: .when(platforms: linuxOnly)),
            // etcd keychains (`etcd://…` as the keychain argument) and doctor's etcd section.
            .target(name: "KeychainEtcd", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            // `import` of .p12 files.
            .target(name: "KeychainPKCS12", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
        ], swiftSettings: settings),

        // Examples/ConfigServer: a Hummingbird server whose database password and API token come from a Keystone keychain
        // through swift-configuration, following rotations (issue 28). Without the NIO trait it only says so.
        .executableTarget(name: "ConfigServer", dependencies: [
            "KeychainEngine",
            .target(name: "KeystoneConfiguration", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .target(name: "KeychainServices", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .target(name: "KeychainEtcd", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .product(name: "Hummingbird", package: "hummingbird", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .product(name: "Configuration", package: "swift-configuration", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "Logging", package: "swift-log"),
        ], path: "Examples/ConfigServer/Sources", swiftSettings: settings),
        // The ConfigServer example against real components: a 3-member etcd cluster, the keystone CLI and two replicas of the
        // built binary (rotation without restart, 0 failed requests); its systemd unit (systemd-analyze verify) and Dockerfile.
        .testTarget(name: "ConfigServerTests", dependencies: [
            "EtcdCluster", "ProcessWatchdog", .product(name: "Crypto", package: "swift-crypto"),
        ], swiftSettings: settings),
        // A child process for the keychain file's crash and multi-process tests.
        .executableTarget(name: "KeychainFileStress", dependencies: ["KeychainEngine", "KeychainFile"], path: "Tests/KeychainFileStress", swiftSettings: settings),
        // The library round trip of the environment matrix (KeystoneCLITests' EnvironmentMatrixTests): `Keychain()` in
        // the environment a test makes (another user, no home, no terminal, a seccomp filter).
        .executableTarget(name: "EnvironmentProbe", dependencies: [
            "Keystone", .target(name: "KeychainServices", condition: .when(platforms: linuxOnly)),
        ], path: "Tests/EnvironmentProbe", swiftSettings: settings),
        // Runs a command with keyctl/add_key/request_key refused (EPERM), as Docker's default seccomp profile does.
        .executableTarget(name: "no-keyring-exec", path: "Tests/NoKeyringExec"),
        // A child process of the etcd linearizability test: one machine running random adds, updates, deletes and reads
        // on a few items of an etcd keychain, printing each call's invocation and response (Tests/EtcdHistoryWorker).
        .executableTarget(name: "EtcdHistoryWorker", dependencies: [
            "KeychainEngine", .target(name: "KeychainEtcd", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
        ], path: "Tests/EtcdHistoryWorker", swiftSettings: settings),
        // A child process of the tpm2-abrmd concurrency tests: one broker client signing from 16 threads, in the
        // environment (session bus, KEYSTONE_TPM_TCTI) the test gives it (Tests/TPMSignWorker).
        .executableTarget(name: "TPMSignWorker", dependencies: [
            "KeychainEngine", .target(name: "KeychainTPM", condition: .when(platforms: linuxOnly)),
            .product(name: "Crypto", package: "swift-crypto"),
        ], path: "Tests/TPMSignWorker", swiftSettings: settings),
        // A child process for the migration crash tests: a defaults migration or a fresh-install wipe against a keychain
        // file and real UserDefaults, killed with SIGKILL at a given step.
        .executableTarget(name: "MigrationChild", dependencies: [
            "Keystone", "KeystoneMigrations", "KeychainEngine", .target(name: "KeychainFile", condition: .when(platforms: linuxOnly)),
        ], path: "Tests/MigrationChild", swiftSettings: settings),

        // Keychain code written as for iOS (only Foundation, Security, LocalAuthentication imported), built on Linux
        // with the two products above, exactly as a user's code is.
        .target(name: "AppleStyleKeychain", dependencies: [
            .target(name: securityModule, condition: .when(platforms: linuxOnly)),
            .target(name: localAuthenticationModule, condition: .when(platforms: linuxOnly)),
        ], path: "Tests/Fixtures/AppleStyleKeychain", swiftSettings: settings),
        // An app's signing-key provider (a Secure Enclave key, a software key where there is none) in a file that
        // imports only CryptoKit, and SecureEnclave code as iOS apps write it: only Foundation, CryptoKit, Security and
        // LocalAuthentication imported, built with those products exactly as a user's code is. Without ExistentialAny
        // (`settings`): the fixture names protocols as types without `any`, as app code does.
        .target(name: "AppleStyleCryptoKit", dependencies: [
            .target(name: cryptoKitModule, condition: .when(platforms: linuxOnly)),
            .target(name: securityModule, condition: .when(platforms: linuxOnly)),
            .target(name: localAuthenticationModule, condition: .when(platforms: linuxOnly)),
        ], path: "Tests/Fixtures/AppleStyleCryptoKit"),
        // One suite at a time owns the process-wide default keychain of the SecItem functions (tests of every target
        // run in one process, in parallel).
        .target(name: "DefaultKeychainLock", path: "Tests/DefaultKeychainLock", swiftSettings: settings),
        // Cleans up after a test fixture's daemons when the test process dies without doing it (fprintd, swtpm).
        .target(name: "ProcessWatchdog", path: "Tests/ProcessWatchdog", swiftSettings: settings),
        // A real software TPM (swtpm) per test, for every target that tests against a TPM.
        .target(name: "Swtpm", dependencies: ["ProcessWatchdog"], path: "Tests/Swtpm", swiftSettings: settings),
        // A real etcd cluster (Debian's etcd-server) on 127.0.0.1 ports, its data under a temporary directory, for tests
        // and benchmarks: members killed and restarted, TLS with client certificates, user authentication.
        .target(name: "EtcdCluster", dependencies: ["ProcessWatchdog"], path: "Tests/EtcdCluster", swiftSettings: settings),
        .testTarget(name: "KeychainEtcdTests", dependencies: [
            "KeychainEngine", "KeychainSealing", "EtcdCluster", "KeychainServices",
            .target(name: "KeychainEtcd", condition: .when(platforms: linuxOnly)),
            // The typed API's async forms on an etcd keychain (they must keep its blocking calls off the cooperative pool).
            "Keystone",
            // Machines that unlock with their TPM: a real software TPM per machine.
            "Swtpm", .target(name: "KeychainTPM", condition: .when(platforms: linuxOnly)),
        ], swiftSettings: settings),
        // A real, private Secret Service (its own dbus-daemon and gnome-keyring-daemon) for tests and benchmarks.
        .target(name: "SecretServiceDaemon", path: "Tests/SecretServiceDaemon",
                swiftSettings: settings),
        .testTarget(name: "SecretServiceDaemonTests", dependencies: ["SecretServiceDaemon"], swiftSettings: settings),
        .testTarget(name: "KeychainSecretServiceTests", dependencies: [
            "KeychainEngine", "KeychainServices", "SecretServiceDaemon",
            .target(name: "KeychainSecretService", condition: .when(platforms: linuxOnly)),
        ], swiftSettings: settings),

        .testTarget(name: "SystemAuthenticationTests", dependencies: [
            "KeychainEngine", "KeychainServices", "DefaultKeychainLock", "ProcessWatchdog",
            .target(name: "SystemAuthentication", condition: .when(platforms: linuxOnly)),
        ], swiftSettings: settings),
        // Against a real software TPM (swtpm, swtpm-tools, tpm2-tools); skipped with the reason when swtpm is missing.
        .testTarget(name: "KeychainTPMTests", dependencies: [
            "KeychainTPM", "KeychainEngine", "Swtpm", .product(name: "Crypto", package: "swift-crypto"),
        ], swiftSettings: settings),
        // CryptoKit's SecureEnclave on Linux: against a real software TPM (skipped with the reason when swtpm is missing)
        // and KeystoneTesting's emulated enclave; the software fallback of app code with and without a Secure Enclave.
        .testTarget(name: "CryptoKitTests", dependencies: [
            .target(name: cryptoKitModule, condition: .when(platforms: linuxOnly)),
            "AppleStyleCryptoKit", "KeychainServices", "KeychainEngine", "KeystoneTesting", "DefaultKeychainLock", "Swtpm",
            .target(name: "KeychainTPM", condition: .when(platforms: linuxOnly)),
            .product(name: "Crypto", package: "swift-crypto"),
        ], swiftSettings: settings),
        // One suite every SecureEnclaveToken passes: the TPM (on swtpm; skipped with the reason without it) and
        // KeystoneTesting's emulated enclave; and SigningKeyFactory on a real TPM as the process's Secure Enclave.
        .testTarget(name: "SecureEnclaveTokenContractTests", dependencies: [
            "KeychainEngine", "KeystoneTesting", "Keystone", "KeychainServices", "DefaultKeychainLock", "Swtpm",
            .target(name: "KeychainTPM", condition: .when(platforms: linuxOnly)),
            .product(name: "Crypto", package: "swift-crypto"),
        ], swiftSettings: settings),
        .testTarget(name: "KeychainEngineTests", dependencies: ["KeychainEngine"], swiftSettings: settings),
        .testTarget(name: "KeychainStorageContractTests", dependencies: [
            "KeychainEngine", "KeychainStorageTesting", "KeychainFile", "EtcdCluster",
            .target(name: "KeychainEtcd", condition: .when(platforms: linuxOnly)),
            .target(name: "KeychainSecretService", condition: .when(platforms: linuxOnly)),
            "SecretServiceDaemon",
        ], swiftSettings: settings),
        .testTarget(name: "KeychainServicesTests", dependencies: [
            "KeychainServices", "KeychainEngine", "DefaultKeychainLock", "Swtpm",
            // SecPKCS12Import (the NIO trait).
            .target(name: "KeychainPKCS12", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            // Secure Enclave SecKeys against a real software TPM (SecKeySecureEnclaveTests).
            .target(name: "KeychainTPM", condition: .when(platforms: linuxOnly)),
            // The SecKey tests convert keys to PEM / SPKI for the openssl interoperability tests.
            .product(name: "Crypto", package: "swift-crypto", condition: .when(platforms: linuxOnly)),
            .product(name: "CryptoExtras", package: "swift-crypto", condition: .when(platforms: linuxOnly)),
            // The SecTrust tests make their CA, intermediates and leaves with swift-certificates.
            .product(name: "X509", package: "swift-certificates", condition: .when(platforms: linuxOnly)),
        ], swiftSettings: settings),
        .testTarget(name: "AppleStyleKeychainTests", dependencies: ["AppleStyleKeychain", "KeychainServices", "KeychainEngine", "DefaultKeychainLock"],
                    swiftSettings: settings),
        // A throwaway gpg key and pass store: the pass importer's tests (library and CLI).
        .target(name: "PassStore", path: "Tests/PassStore", swiftSettings: settings),
        .testTarget(name: "KeystoneTests", dependencies: [
            "KeystoneImporters", "KeystoneMigrations", "KeystoneProtectedFiles",
            "Keystone", "KeystoneTesting", "KeychainEngine", "KeychainServices", "PassStore", "DefaultKeychainLock",
            .target(name: "KeychainFile", condition: .when(platforms: linuxOnly)),
            // The typed API on the Secret Service and etcd stacks (TypedStack): a private gnome-keyring, a 3-member cluster.
            "SecretServiceDaemon", "EtcdCluster",
            .target(name: "KeychainSecretService", condition: .when(platforms: linuxOnly)),
            .target(name: "KeychainEtcd", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .product(name: "Crypto", package: "swift-crypto"),
        ], swiftSettings: settings),
        .testTarget(name: "KeystoneTestingTests", dependencies: [
            "KeystoneTesting", "Keystone", "KeychainEngine", "KeychainServices", .product(name: "Crypto", package: "swift-crypto"),
        ], swiftSettings: settings),
        .testTarget(name: "KeychainFileTests", dependencies: [
            "KeychainFile", "KeychainEngine", "KeychainSealing", "CSQLite", .product(name: "Crypto", package: "swift-crypto"),
            // Keychain files sealed to KeystoneTesting's emulated enclave.
            "KeystoneTesting",
            // Keychain files sealed to a real software TPM.
            "Swtpm", .target(name: "KeychainTPM", condition: .when(platforms: linuxOnly)),
        ], swiftSettings: settings),
        .testTarget(name: "KeystoneCLITests", dependencies: ["KeychainFile", "KeychainEngine", "SecretServiceDaemon", "Swtpm", "TLSTestServer", "PassStore", "EtcdCluster",
            // verify-cert's tests make their certificates with swift-certificates.
            .product(name: "X509", package: "swift-certificates", condition: .when(platforms: linuxOnly)),
            .product(name: "Crypto", package: "swift-crypto", condition: .when(platforms: linuxOnly)),
        ], swiftSettings: settings),
        // A TLS server on 127.0.0.1 (an ephemeral port) presenting a given chain, and a private PKI made in the test.
        .target(name: "TLSTestServer", dependencies: [
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "SwiftASN1", package: "swift-asn1"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .product(name: "NIOCore", package: "swift-nio", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .product(name: "NIOPosix", package: "swift-nio", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
        ], path: "Tests/TLSTestServer", swiftSettings: settings),
        .testTarget(name: "KeystonePinningTests", dependencies: [
            "KeystonePinning", "TLSTestServer",
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .product(name: "NIOCore", package: "swift-nio", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .product(name: "NIOPosix", package: "swift-nio", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
            .product(name: "NIOTLS", package: "swift-nio", condition: .when(platforms: linuxOnly, traits: ["NIO"])),
        ], swiftSettings: settings),
    ],
    swiftLanguageModes: [.v6]
)
