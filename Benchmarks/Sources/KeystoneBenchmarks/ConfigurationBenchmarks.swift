import Foundation
#if os(Linux)
import Configuration
import Glibc
import KeychainEngine
import KeychainFile
import KeychainServices
import Keystone
import KeystoneConfiguration
#endif

// `keystone-benchmarks configuration [--reads N] [--cold N] [--items M]`
//
// KeystoneConfigProvider (issue 28), baselines in the same run:
// - warm read: `ConfigReader.string(forKey:)` of a secret from a KeystoneConfigProvider over a keychain file (the
//   snapshot loaded) against the same read from swift-configuration's InMemoryProvider holding the same secret value
//   (marked secret too). Goal: ≤ 2×. Also the provider's own `value(forKey:type:)` against InMemoryProvider's.
// - cold first read: a new provider over the open, unlocked keychain file, its first snapshot read on the calling
//   thread (`reloadBlocking()`, one limit-All query of the app's service holding that one item) and the first value
//   read, against one direct `SecItemCopyMatching` of the item (return data, limit one) on the same file engine.
//   Goal: ≤ 1.2×. The async `reload()` (a thread of its own per reload) is printed beside it.
// - memory: a provider over 10,000 items of 64-byte secrets (the memory storage, so the figure is the provider's
//   own, not a storage's cache): the resident bytes the loaded provider adds (after malloc_trim, so the reload's freed
//   transients do not count) against the secrets' own bytes. Goal: ≤ 2×.

struct ConfigurationBenchmarkOptions {
    var reads = 200_000
    var cold = 2_000
    var items = 10_000

    static let usage = "usage: keystone-benchmarks configuration [--reads N] [--cold N] [--items M]"

    static func parse(_ arguments: ArraySlice<String>) -> ConfigurationBenchmarkOptions? {
        var options = ConfigurationBenchmarkOptions()
        let parsed = parseBenchmarkOptions(arguments, command: "configuration", usage: usage, valued: ["--reads", "--cold", "--items"]) { name, value in
            guard let number = value.flatMap(Int.init), number > 0 else { return "\(name) needs a positive integer" }
            switch name {
            case "--reads": options.reads = number
            case "--cold": options.cold = number
            default: options.items = number
            }
            return nil
        }
        return parsed ? options : nil
    }
}

func runConfigurationBenchmarks(_ options: ConfigurationBenchmarkOptions) -> Int32 {
    #if os(Linux)
    do {
        var report = Report()
        print("KeystoneConfigProvider benchmarks (reads \(options.reads), cold \(options.cold), items \(options.items))\n")
        try configurationMemory(&report, items: options.items)
        try configurationReads(&report, options: options)
        report.print()
        return 0
    } catch {
        print("configuration benchmark failed: \(error)")
        return 1
    }
    #else
    print("the configuration benchmark runs on Linux")
    return 0
    #endif
}

#if os(Linux)
private let benchService = "com.example.bench"

/// Resident bytes after glibc's `malloc_trim(0)` gave freed heap pages back (looked up at run time: Swift's Glibc
/// module does not declare <malloc.h>), so memory the reload used and freed does not count.
private func trimmedResidentBytes() -> Int {
    typealias MallocTrim = @convention(c) (Int) -> Int32
    if let symbol = dlsym(nil, "malloc_trim") {  // nil: RTLD_DEFAULT
        _ = unsafeBitCast(symbol, to: MallocTrim.self)(0)
    }
    return residentBytes()
}

private func configurationMemory(_ report: inout Report, items: Int) throws {
    let engine = KeychainEngine(storage: MemoryStorage())
    let keychain = Keychain(store: engine)
    var secretBytes = 0
    for i in 0..<items {
        var bytes = [UInt8](repeating: 0, count: 64)
        for j in bytes.indices { bytes[j] = UInt8(ascii: "a") + UInt8((i &* 31 &+ j &* 7) % 26) }
        secretBytes += bytes.count
        try keychain.save(Data(bytes), for: GenericPassword(service: benchService, account: String(format: "item.%05d", i)))
    }
    // A first provider loaded and dropped: the heap has grown to what a reload's transients need.
    try KeystoneConfigProvider(engine: engine, mapping: .service(benchService), changes: .manual).reloadBlocking()
    let provider = KeystoneConfigProvider(engine: engine, mapping: .service(benchService), changes: .manual)
    let before = trimmedResidentBytes()
    try provider.reloadBlocking()
    let after = trimmedResidentBytes()
    let kept = after - before
    withExtendedLifetime(provider) {}
    report.add("memory: provider over \(items) items of 64 B", "\(kept / 1024) KiB",
               String(format: "%.2f× the secrets' %d KiB (goal ≤ 2×)", Double(kept) / Double(secretBytes), secretBytes / 1024))
}

private func configurationReads(_ report: inout Report, options: ConfigurationBenchmarkOptions) throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-bench-config-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let file = try KeychainFile.create(at: folder.appendingPathComponent("bench.keychain-db").path, password: "bench-pw")
    let engine = KeychainEngine(storage: file)
    let secret = "s3cr3t-0123456789-abcdefghijklmn"  // 32 bytes
    try Keychain(store: engine).save(secret, for: GenericPassword(service: benchService, account: "db.password"))

    // Warm reads through ConfigReader.
    let provider = KeystoneConfigProvider(engine: engine, mapping: .service(benchService), changes: .manual)
    try provider.reloadBlocking()
    let memory = InMemoryProvider(values: ["db.password": ConfigValue(.string(secret), isSecret: true)])
    let keystoneReader = ConfigReader(provider: provider)
    let memoryReader = ConfigReader(provider: memory)
    precondition(keystoneReader.string(forKey: "db.password") == secret && memoryReader.string(forKey: "db.password") == secret)
    var sink = 0
    let memoryNs = measure(options.reads) { _ in sink &+= memoryReader.string(forKey: "db.password")?.utf8.count ?? 0 }
    let keystoneNs = measure(options.reads) { _ in sink &+= keystoneReader.string(forKey: "db.password")?.utf8.count ?? 0 }
    report.add("warm read: ConfigReader ← InMemoryProvider", formatNanos(memoryNs), "baseline")
    report.add("warm read: ConfigReader ← KeystoneConfigProvider (keychain file)", formatNanos(keystoneNs),
               String(format: "%.2f× InMemoryProvider (goal ≤ 2×)", keystoneNs / memoryNs))
    let configKey = AbsoluteConfigKey(["db", "password"])
    let memoryValueNs = measure(options.reads) { _ in sink &+= (try? memory.value(forKey: configKey, type: .string).value) == nil ? 0 : 1 }
    let providerValueNs = measure(options.reads) { _ in sink &+= (try? provider.value(forKey: configKey, type: .string).value) == nil ? 0 : 1 }
    report.add("warm value(forKey:): InMemoryProvider", formatNanos(memoryValueNs), "baseline")
    report.add("warm value(forKey:): KeystoneConfigProvider", formatNanos(providerValueNs),
               String(format: "%.2f× InMemoryProvider", providerValueNs / memoryValueNs))

    // Cold first reads.
    KeychainServicesDefaults.setEngine(engine)
    defer { KeychainServicesDefaults.useMemoryKeychain() }
    let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: benchService,
                                kSecAttrAccount as String: "db.password", kSecReturnData as String: true]
    let directNs = measure(options.cold) { _ in
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        precondition(status == errSecSuccess)
        sink &+= (result as? Data)?.count ?? 0
    }
    let coldNs = try measure(options.cold) { _ in
        let fresh = KeystoneConfigProvider(engine: engine, mapping: .service(benchService), changes: .manual)
        try fresh.reloadBlocking()
        sink &+= (try fresh.value(forKey: configKey, type: .string).value == nil) ? 0 : 1
    }
    report.add("cold read: SecItemCopyMatching (keychain file)", formatNanos(directNs), "baseline")
    report.add("cold read: new provider, reloadBlocking() + value", formatNanos(coldNs),
               String(format: "%.2f× SecItemCopyMatching (goal ≤ 1.2×)", coldNs / directNs))
    // The async form: a thread of its own per reload (never the cooperative pool).
    let asyncNs = measureAsync(min(options.cold, 500)) {
        let fresh = KeystoneConfigProvider(engine: engine, mapping: .service(benchService), changes: .manual)
        try await fresh.reload()
        let value = try fresh.value(forKey: configKey, type: .string).value
        precondition(value != nil)
    }
    report.add("cold read: new provider, await reload() + value", formatNanos(asyncNs),
               String(format: "%.2f× SecItemCopyMatching", asyncNs / directNs))
    if sink == 42 { print("") }
}

/// A Double behind a lock (the async rounds hand their time to the measuring thread).
private final class ConfigurationBenchmarkBox: @unchecked Sendable {
    // @unchecked Sendable: `value` is reached only while `lock` is held.
    private let lock = NSLock()
    private var value = 0.0
    func set(_ new: Double) { lock.lock(); value = new; lock.unlock() }
    func get() -> Double { lock.lock(); defer { lock.unlock() }; return value }
}

/// `measure` for an async body, driven from this (non-async) thread: one task per round, waited on with a semaphore.
private func measureAsync(_ iterations: Int, rounds: Int = 5, _ body: @escaping @Sendable () async throws -> Void) -> Double {
    var samples: [Double] = []
    for round in 0...rounds {
        let done = DispatchSemaphore(value: 0)
        let elapsed = ConfigurationBenchmarkBox()
        Task {
            let start = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<iterations { try? await body() }
            let end = DispatchTime.now().uptimeNanoseconds
            elapsed.set(Double(end - start) / Double(iterations))
            done.signal()
        }
        done.wait()
        if round > 0 { samples.append(elapsed.get()) }  // round 0: warm-up
    }
    samples.sort()
    return samples[samples.count / 2]
}
#endif
