import Foundation
import KeychainEngine
import KeychainFile
import KeychainServices
import Keystone

// `keystone-benchmarks secitem [--iterations N] [--rounds R] [--file-iterations M] [--profile MODE]`: Apple-style
// SecItem calls with `[String: Any]` dictionaries against the typed API (Keystone's `Keychain`) on the SAME engine and
// storage, with a bare `[String: Data]` as the floor, all measured in this run (issue 32, item 3: the dictionary path
// within 3× of the typed path). In memory, and on a keychain file (reads, and durable writes with the fsync floor).
// Every read shape Apple-style code passes (data; attributes; attributes and data; limit All by service) is measured
// as an app pays it on both sides: the dictionary literal made per call and the result cast it uses, against the typed
// call with its item made per call; the caller's own part (literal, `as CFDictionary`, result cast) is measured
// alone too, as it is Swift's and Foundation's work on Linux, not the keychain's.
// `--profile MODE` runs one path in a loop for a profiler (`memory-dictionary`, `memory-typed`, `memory-read`,
// `memory-attributes`, `memory-all`, `file-dictionary`).

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
      --profile MODE          loop one path for a profiler: memory-dictionary, memory-typed, memory-read, memory-attributes, memory-all, file-dictionary
    """

    static func parse(_ arguments: ArraySlice<String>) -> SecItemBenchmarkOptions? {
        var options = SecItemBenchmarkOptions()
        let ok = parseBenchmarkOptions(arguments, command: "secitem", usage: usage,
                                       valued: ["--iterations", "--rounds", "--file-iterations", "--durable-iterations", "--profile"]) { name, value in
            switch name {
            case "--profile":
                guard let value, ["memory-dictionary", "memory-typed", "memory-read", "memory-attributes", "memory-all", "file-dictionary"].contains(value) else { return "unknown profile mode" }
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

/// The read shapes Apple-style code passes, each as an app writes it: a dictionary literal per call, `as CFDictionary`,
/// `SecItemCopyMatching`, and the cast of the result it uses.
enum ReadShape: CaseIterable {
    /// `kSecReturnData` (limit One by default): `result as? Data`.
    case data
    /// `kSecReturnAttributes`: `result as? [String: Any]`.
    case attributes
    /// `kSecReturnAttributes` + `kSecReturnData` + `kSecMatchLimitOne`: `result as? [String: Any]`, then its `v_Data`.
    case attributesAndData
    /// `kSecMatchLimitAll` + `kSecReturnAttributes` by service: `result as? [[String: Any]]`.
    case all

    var name: String {
        switch self {
        case .data: return "kSecReturnData"
        case .attributes: return "kSecReturnAttributes"
        case .attributesAndData: return "kSecReturnAttributes+Data, limit One"
        case .all: return "limit All + attributes, by service (\(allItems) items)"
        }
    }

    /// The dictionary literal an app writes for this shape.
    @inline(__always)
    func query(account: String) -> [String: Any] {
        switch self {
        case .data:
            return [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                    kSecAttrAccount as String: account, kSecReturnData as String: true]
        case .attributes:
            return [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                    kSecAttrAccount as String: account, kSecReturnAttributes as String: true]
        case .attributesAndData:
            return [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                    kSecAttrAccount as String: account, kSecReturnAttributes as String: true, kSecReturnData as String: true,
                    kSecMatchLimit as String: kSecMatchLimitOne]
        case .all:
            return [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench-all",
                    kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true]
        }
    }

    /// What the app does with the result: true when it got what it asked for.
    @inline(__always)
    func use(_ result: AnyObject?) -> Bool {
        switch self {
        case .data: return (result as? Data) != nil
        case .attributes: return (result as? [String: Any])?[kSecAttrAccount as String] != nil
        case .attributesAndData: return ((result as? [String: Any])?[kSecValueData as String] as? Data) != nil
        case .all: return (result as? [[String: Any]])?.count == allItems
        }
    }

    /// One read through SecItem, as an app writes it.
    @inline(never)
    func read(account: String) -> Bool {
        var result: CFTypeRef?
        return SecItemCopyMatching(query(account: account) as CFDictionary, &result) == errSecSuccess && use(result)
    }

    /// The caller's own part of `read`, without any keychain: the literal, `as CFDictionary` (on Linux an upcast to
    /// `[AnyHashable: Any]` that rehashes every key) and the cast of a result `SecItemCopyMatching` returned.
    @inline(never)
    func callerOnly(account: String, returned: AnyObject) -> Bool {
        let dictionary = query(account: account) as CFDictionary
        return dictionary.count > 1 && use(returned)
    }

    /// The same read through the typed API, with the item made per call as the literal is: `data(for:)`,
    /// `attributes(for:)`, both, or `accounts(service:)`.
    @inline(never)
    func typedRead(_ keychain: Keychain, account: String) -> Bool {
        switch self {
        case .data: return ((try? keychain.data(for: GenericPassword(service: "bench", account: account))) ?? nil) != nil
        case .attributes: return ((try? keychain.attributes(for: GenericPassword(service: "bench", account: account))) ?? nil) != nil
        case .attributesAndData:
            guard let item = try? GenericPassword(service: "bench", account: account) else { return false }
            return ((try? keychain.attributes(for: item)) ?? nil) != nil && ((try? keychain.data(for: item)) ?? nil) != nil
        case .all: return (try? keychain.accounts(service: "bench-all"))?.count == allItems
        }
    }
}

/// Items under the service `bench-all` (the limit-All read).
let allItems = 10

/// One read through SecItem with a query dictionary made once (`let query: CFDictionary` kept by the app), so only the
/// call and `as? Data` are per read.
@inline(never)
private func prebuiltRead(_ query: CFDictionary) -> Data? {
    var result: CFTypeRef?
    _ = SecItemCopyMatching(query, &result)
    return result as? Data
}

/// Measures every read shape, typed against dictionary, with the caller's own part, on the default keychain (which
/// `keychain` uses too).
private func measureReadShapes(_ report: inout Report, storage: String, keychain: Keychain, accounts: [String], iterations: Int, rounds: Int) {
    for shape in ReadShape.allCases {
        let n = shape == .all ? max(iterations / 50, 20) : shape == .data ? iterations : max(iterations / 4, 20)
        let step = storage == "memory" ? 1 : 7
        let typed = measure(n, rounds: rounds) { i in _ = shape.typedRead(keychain, account: accounts[(i &* step) % accounts.count]) }
        let dictionary = measure(n, rounds: rounds) { i in _ = shape.read(account: accounts[(i &* step) % accounts.count]) }
        var returned: CFTypeRef?
        _ = SecItemCopyMatching(shape.query(account: accounts[0]) as CFDictionary, &returned)
        report.add("\(storage) \(shape.name): typed", formatNanos(typed))
        guard let returned, shape.use(returned) else {
            report.add("\(storage) \(shape.name): SecItemCopyMatching", "failed")
            continue
        }
        let caller = measure(n, rounds: rounds) { i in _ = shape.callerOnly(account: accounts[(i &* step) % accounts.count], returned: returned) }
        report.add("\(storage) \(shape.name): SecItemCopyMatching", formatNanos(dictionary),
                   String(format: "%.2f× typed (goal ≤ 3×); the caller's literal + as CFDictionary + result cast: %@ (%.2f× typed)",
                          dictionary / typed, formatNanos(caller), caller / typed))
    }
    let query = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench", kSecAttrAccount as String: accounts[0],
                 kSecReturnData as String: true] as CFDictionary
    let typedOne = measure(iterations, rounds: rounds) { _ in _ = ReadShape.data.typedRead(keychain, account: accounts[0]) }
    let prebuilt = measure(iterations, rounds: rounds) { _ in _ = prebuiltRead(query) }
    report.add("\(storage) kSecReturnData, query made once: SecItemCopyMatching", formatNanos(prebuilt),
               String(format: "%.2f× typed (%@, same item)", prebuilt / typedOne, formatNanos(typedOne)))
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
    for i in 0..<allItems { try? memoryKeychain.save(payload, for: GenericPassword(service: "bench-all", account: "all-\(i)")) }

    if let profile = options.profile {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-secitem-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        if profile == "file-dictionary" {
            try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            guard let file = try? KeychainFile.create(at: dir.appendingPathComponent("p.keychain-db").path, password: "bench") else { return 1 }
            let engine = KeychainEngine(storage: file, configuration: KeychainServicesDefaults.standardConfiguration())
            for item in items { try? Keychain(store: engine).save(payload, for: item) }
            KeychainServicesDefaults.setEngine(engine)
            for i in 0..<n { _ = ReadShape.data.read(account: accounts[i % 1000]) }
            return 0
        }
        for i in 0..<n {
            if profile == "memory-attributes" {
                _ = ReadShape.attributesAndData.read(account: accounts[i % 1000])
            } else if profile == "memory-all" {
                _ = ReadShape.all.read(account: accounts[i % 1000])
            } else if profile == "memory-read" {
                _ = ReadShape.data.read(account: accounts[i % 1000])
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

    measureReadShapes(&report, storage: "memory", keychain: memoryKeychain, accounts: accounts, iterations: n, rounds: rounds)

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
        for i in 0..<allItems { try keychain.save(payload, for: GenericPassword(service: "bench-all", account: "all-\(i)")) }
        measureReadShapes(&report, storage: "file", keychain: keychain, accounts: accounts, iterations: m, rounds: rounds)

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
