// ConfigServer: Keystone's example server. A Hummingbird app whose database password and API token are generic
// passwords in a Keystone keychain (an etcd keychain shared by the fleet, or a keychain file), read through
// swift-configuration (KeystoneConfigProvider) and followed through the provider's watch: a rotation written on any
// machine (`keystone add-generic-password -U …`) reaches every running replica without a restart.
//
//   ConfigServer --keychain etcd://10.0.0.11:2379,10.0.0.12:2379/config-server --password-file /run/secrets/keychain-password
//
// The keychain is unlocked at start by KeystoneSecretsService (swift-service-lifecycle) from a password file, a systemd
// credential or standard input, never from the environment, and locked (its keys discarded) on SIGTERM / SIGINT after
// the server drained. See Examples/ConfigServer/README.md, Dockerfile and config-server.service.
#if NIO && os(Linux)
import Configuration
import Foundation
import Hummingbird
import KeychainEngine
import KeychainEtcd
import KeychainServices
import KeystoneConfiguration
import Logging
import ServiceLifecycle

func fail(_ message: String, status: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("ConfigServer: \(message)\n".utf8))
    exit(status)
}

let options: ServerOptions
do {
    guard let parsed = try ServerOptions.parse(CommandLine.arguments.dropFirst()) else {
        print(ServerOptions.usage)
        exit(0)
    }
    options = parsed
} catch {
    fail("\(error)\n\(ServerOptions.usage)", status: 2)
}

var logger = Logger(label: "config-server")
logger.logLevel = .info

// The settings (nothing secret): the command line first, then the environment, then the defaults.
var given: [AbsoluteConfigKey: ConfigValue] = [:]
if let host = options.host { given["http.host"] = ConfigValue(.string(host), isSecret: false) }
if let port = options.port { given["http.port"] = ConfigValue(.int(port), isSecret: false) }
if let keychain = options.keychain { given["keychain.url"] = ConfigValue(.string(keychain), isSecret: false) }
if let service = options.service { given["keychain.service"] = ConfigValue(.string(service), isSecret: false) }
if let grace = options.tokenGraceSeconds { given["token.grace"] = ConfigValue(.int(grace), isSecret: false) }
let settings = ConfigReader(providers: [
    InMemoryProvider(name: "command line", values: given),
    EnvironmentVariablesProvider(),
    InMemoryProvider(name: "defaults", values: [
        "http.host": ConfigValue(.string("127.0.0.1"), isSecret: false),
        "http.port": ConfigValue(.int(8080), isSecret: false),
        "keychain.service": ConfigValue(.string("com.example.config-server"), isSecret: false),
        "token.grace": ConfigValue(.int(30), isSecret: false),
    ]),
])
guard let keychainURL = settings.string(forKey: "keychain.url"), !keychainURL.isEmpty else {
    fail("no keychain: give --keychain etcd://HOST:PORT/NAME (or a keychain file's path)\n\(ServerOptions.usage)", status: 2)
}
let itemService = settings.string(forKey: "keychain.service", default: "com.example.config-server")
let grace = settings.int(forKey: "token.grace", default: 30)

// The keychain's engine. Opening an etcd keychain talks to the cluster: this runs on the main thread before anything
// else, never on Swift's cooperative pool.
KeychainServicesDefaults.bootstrap(.etcd)
let engine: KeychainEngine
do {
    if keychainURL.hasPrefix("etcd://") || keychainURL.hasPrefix("etcds://") {
        // Only the URL: the etcd user's password (if any) is not taken from this process's environment either.
        engine = try KeychainServicesDefaults.environmentEngine(["KEYSTONE_KEYCHAIN": keychainURL])
    } else {
        engine = try KeychainServicesDefaults.fileEngine(at: keychainURL, createIfMissing: false)
    }
} catch {
    fail("cannot open the keychain \(KeychainServicesDefaults.redacted(keychainURL)): \(error)")
}

let provider = KeystoneConfigProvider(engine: engine, mapping: .service(itemService), changes: .automatic,
                                      name: KeychainServicesDefaults.redacted(keychainURL), logger: logger)
let passwordSource: KeychainPasswordSource = switch options.password {
case .file(let path): .file(path)
case .systemdCredential(let name): .systemdCredential(name)
case .standardInput: .standardInput
case .none: .alreadyUnlocked
}
// Graceful shutdown locks the keychain (Keystone's lock: on this machine, for this user) unless told otherwise: replicas
// that share a machine AND a user with the kernel keyring would lock each other (see --no-lock-at-shutdown).
let secretsService = KeystoneSecretsService(provider: provider, password: passwordSource,
                                            lockAtShutdown: options.lockAtShutdown, logger: logger)
do {
    // Unlock and load the first snapshot before listening: a replica that cannot read its secrets never serves.
    try await secretsService.prepare()
} catch {
    fail("\(error)")
}

// The secrets: a reader over the keychain only, so that no environment variable or file can stand in for them.
let secrets = ConfigReader(provider: provider)
let verifier = TokenVerifier(grace: .seconds(grace))
if let token = secrets.string(forKey: "api.token", isSecret: true) { verifier.update(token) }
guard verifier.hasToken, secrets.string(forKey: "db.password", isSecret: true) != nil else {
    fail("the keychain \(KeychainServicesDefaults.redacted(keychainURL)) has no generic password of service \(itemService) with account api.token and db.password: add them with keystone add-generic-password -s \(itemService) -a api.token -w … (and -a db.password)")
}

let router = Router()
addRoutes(to: router, secrets: secrets, verifier: verifier)
let boundHost = settings.string(forKey: "http.host", default: "127.0.0.1")
let app = Application(
    router: router,
    configuration: ApplicationConfiguration(reader: settings.scoped(to: "http")),
    // Started in this order, shut down in the reverse one: the server drains first, then the token's watch ends, then
    // the keychain is locked and the provider's values discarded.
    services: [secretsService, TokenWatcher(secrets: secrets, verifier: verifier, logger: logger)],
    onServerRunning: { channel in
        let port = channel.localAddress?.port ?? 0
        // The ready line (tests and scripts wait for it): standard output, unbuffered.
        FileHandle.standardOutput.write(Data("ConfigServer ready on http://\(boundHost):\(port) (keychain \(KeychainServicesDefaults.redacted(keychainURL)), service \(itemService))\n".utf8))
    },
    logger: logger
)
do {
    try await app.runService()
} catch {
    fail("\(error)")
}
#else
import Foundation
FileHandle.standardError.write(Data("ConfigServer needs the NIO trait on Linux: swift build --traits NIO --product ConfigServer\n".utf8))
exit(1)
#endif
