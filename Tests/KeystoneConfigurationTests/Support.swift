#if NIO && os(Linux)
import Configuration
import Foundation
import KeychainEngine
import KeychainFile
@testable import KeystoneConfiguration
import Keystone
import Logging
import Testing

let appService = "com.example.app"

/// swift-configuration's compatibility data set (ProviderCompatTest's "Required Test Data"), as items.
let compatValues: [String: ConfigContent] = [
    "string": .string("Hello"), "other.string": .string("Other Hello"),
    "int": .int(42), "other.int": .int(24),
    "double": .double(3.14), "other.double": .double(2.72),
    "bool": .bool(true), "other.bool": .bool(false),
    "bytes": .bytes(Array("magic".utf8)), "other.bytes": .bytes(Array("magic2".utf8)),
    "stringy.array": .stringArray(["Hello", "World"]), "other.stringy.array": .stringArray(["Hello", "Swift"]),
    "inty.array": .intArray([42, 24]), "other.inty.array": .intArray([16, 32]),
    "doubly.array": .doubleArray([3.14, 2.72]), "other.doubly.array": .doubleArray([0.9, 1.8]),
    "booly.array": .boolArray([true, false]), "other.booly.array": .boolArray([false, true, true]),
    "byteChunky.array": .byteChunkArray([Array("magic".utf8), Array("magic2".utf8)]),
    "other.byteChunky.array": .byteChunkArray([Array("magic".utf8), Array("magic2".utf8), Array("magic".utf8)]),
]

/// Stores `values` as the provider reads them (service ``appService``, account = the key).
func store(_ values: [String: ConfigContent], in keychain: Keychain, service: String = appService) throws {
    for (key, content) in values {
        try keychain.save(Data(ValueDecoding.encode(content)), for: GenericPassword(service: service, account: key))
    }
}

func key(_ dotted: String) -> AbsoluteConfigKey { AbsoluteConfigKey(dotted.split(separator: ".").map(String.init)) }

/// A keychain file with password "pw" in a temporary folder (never the user's), unlocked.
final class TemporaryKeychainFile: @unchecked Sendable {
    let folder: URL
    let path: String
    let file: KeychainFile
    let engine: KeychainEngine
    var keychain: Keychain { Keychain(store: engine) }
    static let password = "keystone-config-test-pw"

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        path = folder.appendingPathComponent("app.keychain-db").path
        file = try KeychainFile.create(at: path, password: Self.password)
        engine = KeychainEngine(storage: file)
    }

    deinit { try? FileManager.default.removeItem(at: folder) }
}

/// Log lines a provider or service wrote (message and metadata, rendered).
final class LogCapture: LogHandler, @unchecked Sendable {
    private let lines = Locked<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let rendered = "\(event.level) \(event.message) \(event.metadata ?? [:])"
        lines.withLock { $0.append(rendered) }
    }

    var all: [String] { lines.current }
    var logger: Logger { Logger(label: "test") { _ in self } }
}

/// What a ConfigReader's access reporter is told (each event rendered as swift-configuration's reporters render it).
final class CapturingReporter: AccessReporter, Sendable {
    private let lines = Locked<[String]>([])
    func report(_ event: AccessEvent) {
        let rendered = "\(event) \(event.result) \(event.providerResults.map { "\($0.providerName) \($0.result)" })"
        lines.withLock { $0.append(rendered) }
    }
    var all: [String] { lines.current }
}

/// The built `keystone` binary (next to the test bundle), or nil.
var keystoneBinary: String? {
    var folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = folder.appendingPathComponent("keystone").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        folder = folder.deletingLastPathComponent()
    }
    return nil
}

/// Runs the `keystone` CLI in another process, `input` on its standard input.
@discardableResult
func keystone(_ arguments: [String], input: String? = nil, home: URL) throws -> (status: Int32, stderr: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try #require(keystoneBinary, "the keystone binary is built by `swift build`"))
    process.arguments = arguments
    var environment = ProcessInfo.processInfo.environment
    environment["XDG_DATA_HOME"] = home.appendingPathComponent("data").path
    environment["XDG_CONFIG_HOME"] = home.appendingPathComponent("config").path
    environment["KEYSTONE_KEYCHAIN"] = nil
    environment["KEYSTONE_KEYCHAIN_DIR"] = nil  // it comes before XDG_DATA_HOME
    process.environment = environment
    let stdin = Pipe(), stderr = Pipe()
    process.standardInput = stdin
    process.standardError = stderr
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
    try stdin.fileHandleForWriting.close()
    let errors = stderr.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: errors, as: UTF8.self))
}

/// Waits (a hang guard of `seconds`, never an assertion) for the first update of `key` that `accept` takes.
func awaitUpdate(_ provider: KeystoneConfigProvider, _ key: AbsoluteConfigKey, as type: ConfigType = .string, seconds: Int = 60,
                 whileWatching action: @escaping @Sendable () async throws -> Void = {},
                 accept: @escaping @Sendable (Result<LookupResult, any Error>) -> Bool) async throws -> Result<LookupResult, any Error> {
    try await withThrowingTaskGroup(of: Result<LookupResult, any Error>?.self) { group in
        group.addTask {
            try await provider.watchValue(forKey: key, type: type) { updates in
                var first = true
                for await update in updates {
                    if first {
                        first = false
                        try await action()
                    }
                    if accept(update) { return update }
                }
                return nil
            }
        }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        let result = try await group.next() ?? nil
        group.cancelAll()
        return try #require(result, "no accepted update of \(key) within \(seconds) s (hang guard)")
    }
}

extension Result where Success == LookupResult {
    var string: String? {
        if case .success(let lookup) = self, case .string(let s)? = lookup.value?.content { return s }
        return nil
    }
    var configurationError: KeystoneConfigurationError? {
        if case .failure(let error as KeystoneConfigurationError) = self { return error }
        return nil
    }
}
#endif
