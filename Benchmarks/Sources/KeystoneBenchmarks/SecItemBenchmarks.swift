import Foundation
import KeychainEngine
import KeychainFile
import KeychainServices
import Keystone

// `keystone-benchmarks secitem [--iterations N] [--rounds R] [--file-iterations M] [--profile MODE]`: Apple-style
// SecItem calls with `[String: Any]` dictionaries against the typed API (Keystone's `Keychain`) on the SAME engine and
// storage, with a bare `[String: Data]` as the floor, all measured in this run (issue 32, item 3: the dictionary path
// within 3× of the typed path). In memory, and on a keychain file (reads, and durable writes with the fsync floor).
// `--profile MODE` runs one path in a loop for a profiler (`memory-dictionary`, `memory-typed`, `file-dictionary`).

/// The options of `keystone-benchmarks secitem`.
struct SecItemBenchmarkOptions {
    var iterations = 200_000
    var rounds = 5
    var fileIterations = 20_000
    var durableIterations = 300
    var profile: String?

    static let usage = """
    usage: keystone-benchmarks secitem [--iterations N] [--rounds R] [--file-iterations M] [--durable-iterations D] [--profile MODE]
      --iterations N          memory calls per round (default 200000)
      --rounds R              rounds; each figure is the median round (default 5)
      --file-iterations M     keychain-file reads per round (default 20000)
      --durable-iterations D  durable keychain-file writes (default 300)
      --profile MODE          loop one path for a profiler: memory-dictionary, memory-typed, memory-read, memory-attributes, file-dictionary
    """

    static func parse(_ arguments: ArraySlice<String>) -> SecItemBenchmarkOptions? {
        var options = SecItemBenchmarkOptions()
        let ok = parseBenchmarkOptions(arguments, command: "secitem", usage: usage,
                                       valued: ["--iterations", "--rounds", "--file-iterations", "--durable-iterations", "--profile"]) { name, value in
            switch name {
            case "--profile":
                guard let value, ["memory-dictionary", "memory-typed", "memory-read", "memory-attributes", "file-dictionary"].contains(value) else { return "unknown profile mode" }
                options.profile = value
                return nil
            default:
                guard let n = positiveNumber(value) else { return "\(name) needs a positive number" }
                switch name {
                case "--iterations": options.iterations = n
                case "--rounds": options.rounds = n
                case "--file-iterations": options.fileIterations = n
                default: options.durableIterations = n
                }
                return nil
            }
        }
        return ok ? options : nil
    }
}

/// One save + read through SecItem with dictionaries, as careful Apple-style code writes it: `SecItemUpdate`, and
/// `SecItemAdd` when the item is not there (never delete-then-add), then `SecItemCopyMatching` with
/// `kSecReturnData`.
@inline(never)
private func dictionaryRoundTrip(account: String, payload: Data) {
    let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                                kSecAttrAccount as String: account]
    if SecItemUpdate(query as CFDictionary, [kSecValueData as String: payload] as CFDictionary) == errSecItemNotFound {
        var add = query
        add[kSecValueData as String] = payload
        _ = SecItemAdd(add as CFDictionary, nil)
    }
    var read = query
    read[kSecReturnData as String] = true
    var result: CFTypeRef?
    _ = SecItemCopyMatching(read as CFDictionary, &result)
}

/// One read through SecItem with a dictionary (`kSecReturnData`).
@inline(never)
private func dictionaryRead(account: String) -> Data? {
    let read: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                               kSecAttrAccount as String: account, kSecReturnData as String: true]
    var result: CFTypeRef?
    _ = SecItemCopyMatching(read as CFDictionary, &result)
    return result as? Data
}

/// What an Apple-style read costs its caller without any keychain: the dictionary literal, `as CFDictionary` (on Linux
/// an upcast to `[AnyHashable: Any]` that rehashes every key) and `result as? Data` on an object as SecItem returns it.
@inline(never)
private func callerOwnWork(account: String, returned: AnyObject) -> Data? {
    let read: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                               kSecAttrAccount as String: account, kSecReturnData as String: true]
    let dictionary = read as CFDictionary
    return dictionary.count == 4 ? returned as? Data : nil
}

/// One read of the attributes through SecItem (`kSecReturnAttributes` + `kSecReturnData`).
@inline(never)
private func dictionaryAttributesRead(account: String) -> Bool {
    let read: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                               kSecAttrAccount as String: account, kSecReturnData as String: true,
                               kSecReturnAttributes as String: true]
    var result: CFTypeRef?
    return SecItemCopyMatching(read as CFDictionary, &result) == errSecSuccess && result is [String: Any]
}

/// The same through the typed API's general query (`attributes(for:)`), for the attributes row.
@inline(never)
private func typedAttributesRead(_ keychain: Keychain, _ item: GenericPassword) -> Bool {
    (try? keychain.attributes(for: item)) != nil
}

/// An add then a delete through SecItem with dictionaries.
@inline(never)
private func dictionaryAddDelete(account: String, payload: Data) {
    let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench-ad",
                                kSecAttrAccount as String: account]
    var add = query
    add[kSecValueData as String] = payload
    _ = SecItemAdd(add as CFDictionary, nil)
    _ = SecItemDelete(query as CFDictionary)
}

func runSecItemPathBenchmarks(_ options: SecItemBenchmarkOptions) -> Int32 {
    #if canImport(Darwin)
    print("keystone-benchmarks secitem: Linux only (on Apple platforms SecItem is the system's)")
    return 0
    #else
    let payload = Data(repeating: 0x42, count: 32)
    let n = options.iterations, rounds = options.rounds
    let accounts = (0..<1000).map { "acct-\($0)" }
    let items = accounts.compactMap { try? GenericPassword(service: "bench", account: $0) }
    let removable = accounts.compactMap { try? GenericPassword(service: "bench-ad", account: $0) }

    // One engine over memory: the typed API and SecItem both use it.
    let memoryEngine = KeychainEngine(storage: MemoryStorage(), configuration: KeychainServicesDefaults.standardConfiguration())
    KeychainServicesDefaults.setEngine(memoryEngine)
    let memoryKeychain = Keychain(store: memoryEngine)
    for item in items { try? memoryKeychain.save(payload, for: item) }

    if let profile = options.profile {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-secitem-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        if profile == "file-dictionary" {
            try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            guard let file = try? KeychainFile.create(at: dir.appendingPathComponent("p.keychain-db").path, password: "bench") else { return 1 }
            let engine = KeychainEngine(storage: file, configuration: KeychainServicesDefaults.standardConfiguration())
            for item in items { try? Keychain(store: engine).save(payload, for: item) }
            KeychainServicesDefaults.setEngine(engine)
            for i in 0..<n { _ = dictionaryRead(account: accounts[i % 1000]) }
            return 0
        }
        for i in 0..<n {
            if profile == "memory-attributes" {
                _ = dictionaryAttributesRead(account: accounts[i % 1000])
            } else if profile == "memory-read" {
                _ = dictionaryRead(account: accounts[i % 1000])
            } else if profile == "memory-typed" {
                try? memoryKeychain.save(payload, for: items[i % 1000])
                _ = try? memoryKeychain.data(for: items[i % 1000])
            } else {
                dictionaryRoundTrip(account: accounts[i % 1000], payload: payload)
            }
        }
        return 0
    }

    var report = Report()
    print("Keystone SecItem dictionary path against the typed API (same engine, same storage; median of \(rounds) rounds)\n")

    // The floor: a bare dictionary, set + get.
    var dictionary: [String: Data] = [:]
    let bare = measure(n, rounds: rounds) { i in
        let key = accounts[i % 1000]
        dictionary[key] = payload
        _ = dictionary[key]
    }
    report.add("memory set+get: [String: Data] (floor)", formatNanos(bare))

    let typed = measure(n, rounds: rounds) { i in
        try? memoryKeychain.save(payload, for: items[i % 1000])
        _ = try? memoryKeychain.data(for: items[i % 1000])
    }
    report.add("memory set+get: typed Keychain save + data(for:)", formatNanos(typed), String(format: "%.1f× floor", typed / bare))
    let dict = measure(n, rounds: rounds) { i in dictionaryRoundTrip(account: accounts[i % 1000], payload: payload) }
    report.add("memory set+get: SecItemUpdate/Add + CopyMatching", formatNanos(dict),
               String(format: "%.2f× typed (goal ≤ 3×), %.0f× floor", dict / typed, dict / bare))

    let typedRead = measure(n, rounds: rounds) { i in _ = try? memoryKeychain.data(for: items[i % 1000]) }
    report.add("memory read: typed data(for:)", formatNanos(typedRead))
    let dictRead = measure(n, rounds: rounds) { i in _ = dictionaryRead(account: accounts[i % 1000]) }
    report.add("memory read: SecItemCopyMatching kSecReturnData", formatNanos(dictRead), String(format: "%.2f× typed (goal ≤ 3×)", dictRead / typedRead))

    var returned: CFTypeRef?
    _ = SecItemCopyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                             kSecAttrAccount as String: accounts[0], kSecReturnData as String: true] as CFDictionary, &returned)
    if let returned {
        let caller = measure(n, rounds: rounds) { i in _ = callerOwnWork(account: accounts[i % 1000], returned: returned) }
        report.add("memory read: the caller's own work, no keychain", formatNanos(caller),
                   String(format: "literal + as CFDictionary + as? Data: %.0f%% of the SecItem read", 100 * caller / dictRead))
    }

    let typedAttributes = measure(n / 4, rounds: rounds) { i in _ = typedAttributesRead(memoryKeychain, items[i % 1000]) }
    report.add("memory attributes: typed attributes(for:)", formatNanos(typedAttributes))
    let dictAttributes = measure(n / 4, rounds: rounds) { i in _ = dictionaryAttributesRead(account: accounts[i % 1000]) }
    report.add("memory attributes: CopyMatching kSecReturnAttributes+Data", formatNanos(dictAttributes),
               String(format: "%.2f× typed (goal ≤ 3×)", dictAttributes / typedAttributes))

    let typedAddDelete = measure(n / 2, rounds: rounds) { i in
        try? memoryKeychain.save(payload, for: removable[i % 1000])
        _ = try? memoryKeychain.delete(removable[i % 1000])
    }
    report.add("memory add+delete: typed save + delete", formatNanos(typedAddDelete))
    let dictAddDelete = measure(n / 2, rounds: rounds) { i in dictionaryAddDelete(account: accounts[i % 1000], payload: payload) }
    report.add("memory add+delete: SecItemAdd + SecItemDelete", formatNanos(dictAddDelete),
               String(format: "%.2f× typed (goal ≤ 3×)", dictAddDelete / typedAddDelete))

    // The keychain file: one file, one engine, both paths.
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-secitem-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    chmod(dir.path, 0o700)
    defer { try? FileManager.default.removeItem(at: dir) }
    do {
        let file = try KeychainFile.create(at: dir.appendingPathComponent("secitem.keychain-db").path, password: "bench")
        let engine = KeychainEngine(storage: file, configuration: KeychainServicesDefaults.standardConfiguration())
        KeychainServicesDefaults.setEngine(engine)
        let keychain = Keychain(store: engine)
        for item in items { try keychain.save(payload, for: item) }
        let m = options.fileIterations
        let fileTyped = measure(m, rounds: rounds) { i in _ = try? keychain.data(for: items[(i &* 7) % 1000]) }
        report.add("file read (not durable): typed data(for:)", formatNanos(fileTyped))
        let fileDict = measure(m, rounds: rounds) { i in _ = dictionaryRead(account: accounts[(i &* 7) % 1000]) }
        report.add("file read (not durable): SecItemCopyMatching kSecReturnData", formatNanos(fileDict),
                   String(format: "%.2f× typed (goal ≤ 3×)", fileDict / fileTyped))

        // Durable writes: each a flush. Interleaved so both paths and the floor see the same disk.
        let floor = DiskFloor(directory: dir)
        var floorNs: UInt64 = 0, typedNs: UInt64 = 0, dictNs: UInt64 = 0
        let d = options.durableIterations
        for i in 0..<(d + 20) {
            let item = items[i % 1000], account = accounts[(i + 500) % 1000]
            var t = DispatchTime.now().uptimeNanoseconds
            floor.write()
            let f = DispatchTime.now().uptimeNanoseconds - t
            t = DispatchTime.now().uptimeNanoseconds
            try? keychain.save(payload, for: item)
            _ = try? keychain.data(for: item)
            let a = DispatchTime.now().uptimeNanoseconds - t
            t = DispatchTime.now().uptimeNanoseconds
            dictionaryRoundTrip(account: account, payload: payload)
            let b = DispatchTime.now().uptimeNanoseconds - t
            if i >= 20 { floorNs += f; typedNs += a; dictNs += b }  // the first 20 warm up
        }
        let fl = Double(floorNs) / Double(d), ty = Double(typedNs) / Double(d), di = Double(dictNs) / Double(d)
        report.add("durable write floor: pwrite 128 B + fsync", formatNanos(fl))
        report.add("file durable set+get: typed save + data(for:)", formatNanos(ty), String(format: "%.2f× floor", ty / fl))
        report.add("file durable set+get: SecItemUpdate/Add + CopyMatching", formatNanos(di),
                   String(format: "%.2f× typed (goal ≤ 3×)", di / ty))
    } catch {
        report.add("keychain file", "failed: \(error)")
    }
    report.print()
    return 0
    #endif
}

/// Apple-style SecItem calls (an add-or-update, then a read) on a memory keychain, against the same dictionary baseline.
func runSecItemBenchmarks(_ report: inout Report, n: Int, payload: Data, baseline: Double) {
    #if !canImport(Darwin)
    KeychainServicesDefaults.useMemoryKeychain()
    #endif
    let ns = measure(n) { i in dictionaryRoundTrip(account: "acct-\(i % 1000)", payload: payload) }
    report.add("memory set+get: SecItemUpdate/Add + SecItemCopyMatching", formatNanos(ns), String(format: "%.1f× dictionary", ns / baseline))
}
