// Linux-only: SecItem with dictionaries is KeychainServices' own on Linux (Apple platforms use the Security framework).
#if !canImport(Darwin)
import DefaultKeychainLock
import Foundation
import KeychainEngine
import KeychainFile
@testable import KeychainServices
import Testing

// Differential tests of the SecItem functions' compiled path (issue 32): the same seeded, randomized sequences of calls
// run through three keychains that start empty and share one clock and configuration:
// - A: SecItem with `[String: Any]` dictionaries, as Apple-style code calls it (the compiled path where it applies);
// - B: the same dictionaries through SecItem's general path (`SecItemGeneralPath`, called directly, on an engine with a
//   hook installed so the engine's compiled operations decline too): the reference that parses, validates and runs
//   the general operations;
// - C: the engine's typed operations (`add`, `copyMatching`, `update`, `delete` with `KeychainQuery` values).
// Each step's status codes and results must be identical, and so must the three keychains' contents after it.

/// SplitMix64: a seeded generator, so a failing sequence replays from its seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func percent() -> Int { Int(next() % 100) }
    mutating func pick<T>(_ options: [T]) -> T { options[Int(next() % UInt64(options.count))] }
}

/// A dictionary value as a test writes it: in the dictionary it is the Swift or Foundation value; typed, its
/// `KeychainValue` (nil for a value no keychain attribute has).
enum DifferentialValue: CustomStringConvertible {
    case string(String), data(Data), bool(Bool), number(Int), cfBoolean(Bool), nsNumber(Int), url

    var any: Any {
        switch self {
        case .string(let s): return s
        case .data(let d): return d
        case .bool(let b): return b
        case .number(let n): return n
        case .cfBoolean(let b): return (b ? kCFBooleanTrue : kCFBooleanFalse) as Any
        case .nsNumber(let n): return NSNumber(value: n)
        case .url: return URL(string: "https://example.com")!
        }
    }

    var typed: KeychainValue? {
        switch self {
        case .string(let s): return .string(s)
        case .data(let d): return .data(d)
        case .bool(let b), .cfBoolean(let b): return .bool(b)
        case .number(let n), .nsNumber(let n): return .number(Int64(n))
        case .url: return nil
        }
    }

    var description: String {
        switch self {
        case .string(let s): return "\"\(s)\""
        case .data(let d): return "Data(\(d.count))"
        case .bool(let b): return "\(b)"
        case .number(let n): return "Int \(n)"
        case .cfBoolean(let b): return "kCFBoolean\(b ? "True" : "False")"
        case .nsNumber(let n): return "NSNumber(\(n))"
        case .url: return "URL"
        }
    }
}

/// One call of a sequence.
struct DifferentialStep: CustomStringConvertible {
    enum Operation: String { case add, copy, update, delete, lock }
    var operation: Operation
    var entries: [(String, DifferentialValue)] = []
    var changes: [(String, DifferentialValue)] = []
    var passesResult = true
    var lockState = LockState.unlocked

    var dictionary: [String: Any] { Dictionary(entries.map { ($0.0, $0.1.any) }, uniquingKeysWith: { $1 }) }
    var changesDictionary: [String: Any] { Dictionary(changes.map { ($0.0, $0.1.any) }, uniquingKeysWith: { $1 }) }

    /// The typed forms; nil when a value has no typed form.
    var typed: (query: KeychainQuery, changes: KeychainQuery)? {
        var query: KeychainQuery = [:], typedChanges: KeychainQuery = [:]
        for (key, value) in entries { guard let t = value.typed else { return nil }; query[key] = t }
        for (key, value) in changes { guard let t = value.typed else { return nil }; typedChanges[key] = t }
        return (query, typedChanges)
    }

    var description: String {
        if operation == .lock { return "lock \(lockState)" }
        func show(_ e: [(String, DifferentialValue)]) -> String { e.map { "\($0.0): \($0.1)" }.joined(separator: ", ") }
        return "\(operation) [\(show(entries))]" + (operation == .update ? " with [\(show(changes))]" : "") + (passesResult ? "" : " (nil result)")
    }
}

/// Makes random steps over a small set of items, with at most one fault per step (a missing or unknown key, a value
/// of the wrong type, a key the operation does not take), so every keychain reports the same first error whatever
/// order its dictionary is read in.
struct DifferentialGenerator {
    var random: SplitMix64
    let groups: [String]
    let locks: Bool
    private var faulted = false

    init(seed: UInt64, groups: [String], locks: Bool) {
        random = SplitMix64(state: seed)
        self.groups = groups
        self.locks = locks
    }

    /// True with probability `percent`%, once per step: the step's one fault.
    private mutating func fault(_ percent: Int) -> Bool {
        guard !faulted, random.percent() < percent else { return false }
        faulted = true
        return true
    }

    private mutating func text(_ options: [String]) -> DifferentialValue {
        let value = random.pick(options)
        return random.percent() < 8 ? .data(Data(value.utf8)) : .string(value)
    }

    private mutating func identity(into entries: inout [(String, DifferentialValue)], forAdd: Bool) {
        if random.percent() < 15 {
            internetIdentity(into: &entries, forAdd: forAdd)
            return
        }
        if fault(2) {
            switch random.percent() % 4 {
            case 0: break  // no kSecClass
            case 1: entries.append((Key.class, .number(5)))
            case 2: entries.append((Key.class, .string("zzzz")))
            default: entries.append((Key.class, .string("inet")))
            }
        } else {
            entries.append((Key.class, .string("genp")))
        }
        if random.percent() < 92 { entries.append((Key.service, text(["s1", "s2"]))) }
        if fault(1) { entries.append((Key.service, .bool(true))) }
        if random.percent() < 90 { entries.append((Key.account, text(["a1", "a2", "a3"]))) }
        if fault(1) { entries.append((Key.account, .url)) }
        if random.percent() < 25 { entries.append((Key.accessGroup, .string(random.pick(groups)))) }
        if fault(1) { entries.append((Key.accessGroup, .number(1))) }
        if random.percent() < 20 {
            let options: [DifferentialValue] = [.bool(false), .bool(true), .cfBoolean(true), .cfBoolean(false), .nsNumber(1)]
            if !forAdd && random.percent() < 25 { entries.append((Key.synchronizable, .string(Key.synchronizableAny))) }
            else { entries.append((Key.synchronizable, random.pick(options))) }
        }
        if forAdd, fault(1) { entries.append((Key.synchronizable, .string(Key.synchronizableAny))) }
        if fault(1) { entries.append((Key.synchronizable, .string("x"))) }
        if random.percent() < 8 { entries.append((Key.useDataProtectionKeychain, .bool(true))) }
        if fault(1) { entries.append((Key.useDataProtectionKeychain, .string("x"))) }
        if random.percent() < 5 { entries.append((Key.label, .string(random.pick(["L1", "L2"])))) }
        if random.percent() < 3 { entries.append(("m_Foo", .string("ignored"))) }
        if fault(1) { entries.append(("zzzz", .string("x"))) }       // a four-character key no class has: errSecNoSuchAttr
        if fault(1) { entries.append(("bogus_key", .string("x"))) }  // an unknown key: errSecParam
    }

    /// An internet password's identity as Apple-style code names one: its server and account, often its protocol and
    /// port, or only its server (a read of every account on it).
    private mutating func internetIdentity(into entries: inout [(String, DifferentialValue)], forAdd: Bool) {
        entries.append((Key.class, .string("inet")))
        if random.percent() < 90 { entries.append((Key.server, .string(random.pick(["h1.example", "h2.example"])))) }
        if random.percent() < 80 { entries.append((Key.account, text(["a1", "a2"]))) }
        if random.percent() < 40 { entries.append((Key.`protocol`, .string(random.pick(["htps", "http"])))) }
        if random.percent() < 30 { entries.append((Key.port, random.pick([.number(443), .nsNumber(8443), .number(0)]))) }
        if random.percent() < 10 { entries.append((Key.path, .string("/p"))) }
        if random.percent() < 15 { entries.append((Key.accessGroup, .string(random.pick(groups)))) }
        if random.percent() < 10 {
            entries.append((Key.synchronizable, forAdd ? random.pick([.bool(true), .bool(false)]) : random.pick([.bool(true), .bool(false), .string(Key.synchronizableAny)])))
        }
        if fault(1) { entries.append((Key.port, .string("443"))) }
    }

    private mutating func returnKeys(into entries: inout [(String, DifferentialValue)], percent: Int) {
        let r = random.percent()
        if r < percent { entries.append((Key.returnData, random.pick([.bool(true), .bool(true), .bool(true), .cfBoolean(true), .nsNumber(1), .bool(false)]))) }
        if random.percent() < percent / 3 { entries.append((Key.returnAttributes, .bool(true))) }
        if random.percent() < percent / 8 { entries.append((Key.returnPersistentRef, .bool(true))) }
        if random.percent() < percent / 15 { entries.append((Key.returnRef, .bool(true))) }
        if fault(1) { entries.append((Key.returnData, .string("yes"))) }
    }

    private mutating func limit(into entries: inout [(String, DifferentialValue)]) {
        if random.percent() < 30 {
            entries.append((Key.matchLimit, random.pick([.string(Key.matchLimitOne), .string(Key.matchLimitAll), .number(1), .number(2)])))
        }
        if fault(1) { entries.append((Key.matchLimit, random.pick([.number(0), .string("bogus")]))) }
    }

    mutating func next() -> DifferentialStep {
        faulted = false
        let r = random.percent()
        if locks && r < 3 {
            var step = DifferentialStep(operation: .lock)
            step.lockState = random.percent() < 60 ? .unlocked : random.pick([.lockedAfterFirstUnlock, .locked])
            return step
        }
        var step: DifferentialStep
        switch r {
        case ..<33:
            step = DifferentialStep(operation: .add)
            identity(into: &step.entries, forAdd: true)
            if random.percent() < 92 { step.entries.append((Key.valueData, .data(Data((0..<(random.next() % 9)).map { _ in UInt8(truncatingIfNeeded: random.next()) })))) }
            if fault(1) { step.entries.append((Key.valueData, .string("pw"))) }
            if random.percent() < 20 { step.entries.append((Key.accessible, .string(random.pick(["ak", "ck", "dk", "aku", "akpu"])))) }
            if fault(1) { step.entries.append((Key.accessible, .string("bogus"))) }
            returnKeys(into: &step.entries, percent: 12)
        case ..<70:
            step = DifferentialStep(operation: .copy)
            identity(into: &step.entries, forAdd: false)
            returnKeys(into: &step.entries, percent: 90)
            limit(into: &step.entries)
        case ..<90:
            step = DifferentialStep(operation: .update)
            identity(into: &step.entries, forAdd: false)
            limit(into: &step.entries)
            if fault(1) { step.entries.append((Key.returnData, .bool(true))) }
            let c = random.percent()
            if c < 80 { step.changes = [(Key.valueData, .data(Data([UInt8(truncatingIfNeeded: random.next())])))] }
            else if c < 86 { step.changes = [(Key.valueData, .data(Data([1, 2]))), (Key.label, .string("L3"))] }
            else if c < 91 { step.changes = [(Key.accessible, .string(random.pick(["ak", "ck"])))] }
            else if c < 96 { step.changes = [(Key.account, .string(random.pick(["a1", "a2", "a3"])))] }
            else { step.changes = [] }
            if fault(2) { step.changes.append(random.pick([(Key.class, .string("genp")), (Key.valueData, .string("pw")), (Key.returnData, .bool(true))])) }
        default:
            step = DifferentialStep(operation: .delete)
            identity(into: &step.entries, forAdd: false)
            if random.percent() < 5 { step.entries.append((Key.matchLimit, .string(Key.matchLimitAll))) }
            if fault(1) { step.entries.append((Key.matchLimit, .string(Key.matchLimitOne))) }
            if fault(1) { step.entries.append((Key.returnData, .bool(true))) }
        }
        if fault(2) { step.passesResult = false }
        return step
    }
}

/// Does nothing: installed on the reference engine, it makes every SecItem call take the general path.
struct GeneralPathHook: EngineHook {
    func willPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?) throws {}
    func didPerform(_ operation: KeychainOperation, query: KeychainQuery, attributesToUpdate: KeychainQuery?, status: Int32) {}
}

/// A call's outcome, comparable across the three keychains.
struct DifferentialOutcome: Equatable, CustomStringConvertible {
    var status: OSStatus
    var result: ItemResult?
    var description: String { "status \(status), result \(result.map { "\($0)" } ?? "nil")" }
}

/// Three keychains (see the file's header) and the sequences run on them.
struct DifferentialKeychains {
    let clock = Locked(Date(timeIntervalSinceReferenceDate: 800_000_000))
    let compiled: KeychainEngine
    let reference: KeychainEngine
    let typed: KeychainEngine

    init(entitled: [String]?, storage: () throws -> any KeychainStorage) rethrows {
        var config = KeychainServicesDefaults.standardConfiguration()
        if let entitled { config.accessGroups = .entitled(entitled) }
        let clock = self.clock
        config.now = { clock.current }
        compiled = KeychainEngine(storage: try storage(), configuration: config)
        reference = KeychainEngine(storage: try storage(), configuration: config)
        reference.addHook(GeneralPathHook())
        typed = KeychainEngine(storage: try storage(), configuration: config)
    }

    /// A SecItem result as the typed result it stands for.
    static func typedResult(_ object: AnyObject?) throws -> ItemResult? {
        guard let object else { return nil }
        if let array = object as? [AnyObject] { return .array(try array.map { try #require(try typedResult($0)) }) }
        if let dictionary = object as? [AnyHashable: Any] { return .attributes(try SecItemBridge.query(dictionary)) }
        return .data(try #require(object as? Data, "a result of type \(type(of: object))"))
    }

    /// `step` through SecItem on `engine` (the default keychain meanwhile): the public functions (the compiled path
    /// where it applies), or with `general` the general path alone.
    func secItem(_ step: DifferentialStep, on engine: KeychainEngine, general: Bool = false) throws -> DifferentialOutcome {
        KeychainServicesDefaults.setEngine(engine)
        var result: CFTypeRef?
        func withResult(_ call: (UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus) -> OSStatus {
            step.passesResult ? call(&result) : call(nil)
        }
        let status: OSStatus
        let (dictionary, changes) = (step.dictionary as CFDictionary, step.changesDictionary as CFDictionary)
        switch step.operation {
        case .add: status = withResult { general ? SecItemGeneralPath.add(dictionary, $0) : SecItemAdd(dictionary, $0) }
        case .copy: status = withResult { general ? SecItemGeneralPath.copyMatching(dictionary, $0) : SecItemCopyMatching(dictionary, $0) }
        case .update: status = general ? SecItemGeneralPath.update(dictionary, changes) : SecItemUpdate(dictionary, changes)
        case .delete: status = general ? SecItemGeneralPath.delete(dictionary) : SecItemDelete(dictionary)
        case .lock: return DifferentialOutcome(status: errSecSuccess)
        }
        if let result { try Self.checkObjectKinds(result) }
        return DifferentialOutcome(status: status, result: try Self.typedResult(result))
    }

    /// Checks that a result is made of the objects Apple-style code casts to: an `NSArray` of results, an
    /// `NSMutableDictionary` (exactly: Foundation on Linux bridges only its own classes to `[String: Any]`) with
    /// `NSString` keys, bytes that are `ContiguousBytes`. (An array's elements cannot be checked: Foundation on Linux
    /// bridges each one to a Swift value as it hands it out.)
    static func checkObjectKinds(_ object: AnyObject) throws {
        if object is NSArray {
            return
        } else if let dictionary = object as? NSDictionary {
            try #require(type(of: dictionary) == NSMutableDictionary.self, "a result dictionary of class \(type(of: dictionary))")
            for key in dictionary.allKeys { try #require(key is String, "a result key of type \(type(of: key))") }
        } else {
            try #require(object is any ContiguousBytes, "a result of type \(type(of: object))")
        }
    }

    /// `step` through the engine's typed operations; nil when a value has no typed form.
    func typedCall(_ step: DifferentialStep) -> DifferentialOutcome? {
        guard let (query, changes) = step.typed else { return nil }
        do {
            switch step.operation {
            case .add:
                let result = try typed.add(query)
                return DifferentialOutcome(status: errSecSuccess, result: step.passesResult ? result : nil)
            case .copy:
                if !step.passesResult, [Key.returnData, Key.returnAttributes, Key.returnRef, Key.returnPersistentRef].contains(where: { query[$0]?.boolValue == true }) {
                    return DifferentialOutcome(status: errSecParam)
                }
                let result = try typed.copyMatching(query)
                return DifferentialOutcome(status: errSecSuccess, result: step.passesResult ? result : nil)
            case .update: try typed.update(query, with: changes)
            case .delete: try typed.delete(query)
            case .lock: break
            }
            return DifferentialOutcome(status: errSecSuccess)
        } catch let error as EngineError {
            return DifferentialOutcome(status: error.status)
        } catch {
            return DifferentialOutcome(status: errSecInternalError)
        }
    }

    /// Every password of `engine`, attributes, data and persistent references, or the status that stops reading them.
    static func contents(_ engine: KeychainEngine) -> DifferentialOutcome {
        var all: [ItemResult] = []
        for itemClass in ["genp", "inet"] {
            do {
                if let found = try engine.copyMatching([Key.class: .string(itemClass), Key.synchronizable: .string(Key.synchronizableAny),
                                                        Key.returnAttributes: .bool(true), Key.returnData: .bool(true),
                                                        Key.returnPersistentRef: .bool(true), Key.matchLimit: .string(Key.matchLimitAll)]) {
                    all.append(found)
                }
            } catch let error as EngineError where error.status == errSecItemNotFound {
                continue
            } catch let error as EngineError {
                return DifferentialOutcome(status: error.status)
            } catch {
                return DifferentialOutcome(status: errSecInternalError)
            }
        }
        return DifferentialOutcome(status: errSecSuccess, result: .array(all))
    }

    /// Runs `steps` steps of the sequence of `seed` on the three keychains; stops at the first difference.
    ///
    /// - Parameter lock: sets the three storages' lock state (nil: the sequence has no lock steps).
    /// - Returns: how many steps the compiled path's shapes served, and the statuses seen (so a test can check what
    ///   the sequence exercised).
    @discardableResult
    func run(seed: UInt64, steps: Int, groups: [String], compareEvery: Int = 1,
             lock: ((LockState) -> Void)? = nil) throws -> (served: Int, statuses: Set<OSStatus>) {
        var generator = DifferentialGenerator(seed: seed, groups: groups, locks: lock != nil)
        var served = 0
        var statuses: Set<OSStatus> = []
        for index in 0..<steps {
            let step = generator.next()
            clock.withLock { $0 += 1 }
            if step.operation == .lock {
                lock?(step.lockState)
                continue
            }
            if Self.compiledShape(step) { served += 1 }
            let a = try secItem(step, on: compiled)
            let b = try secItem(step, on: reference, general: true)
            statuses.insert(a.status)
            let sameAsGeneral = a == b
            try #require(sameAsGeneral, "seed \(seed) step \(index): \(step)\n  SecItem (compiled path): \(a)\n  SecItem (general path):  \(b)")
            if let c = typedCall(step) {
                let sameAsTyped = a == c
                try #require(sameAsTyped, "seed \(seed) step \(index): \(step)\n  SecItem: \(a)\n  typed:   \(c)")
            } else {
                try #require(a.status == errSecParam, "seed \(seed) step \(index): \(step): a value of no keychain type gave \(a.status)")
            }
            if index % compareEvery == 0 || index == steps - 1 {
                let (contents, general, typedContents) = (Self.contents(compiled), Self.contents(reference), Self.contents(typed))
                let sameContents = contents == general, sameAsTypedContents = contents == typedContents
                try #require(sameContents, "seed \(seed) after step \(index): \(step): the compiled path's keychain differs from the general path's:\n\(Self.difference(contents, general))")
                try #require(sameAsTypedContents, "seed \(seed) after step \(index): \(step): the SecItem keychain differs from the typed one:\n\(Self.difference(contents, typedContents))")
            }
        }
        return (served, statuses)
    }

    /// The items two keychains' contents do not share, one line each (attribute values as `KeychainValue` prints them).
    static func difference(_ a: DifferentialOutcome, _ b: DifferentialOutcome) -> String {
        func lines(_ outcome: DifferentialOutcome) -> Set<String> {
            guard case .array(let classes)? = outcome.result else { return ["status \(outcome.status)"] }
            return Set(classes.flatMap { $0.array ?? [] }.map { item in
                (item.attributes ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            })
        }
        let (x, y) = (lines(a), lines(b))
        return (x.subtracting(y).sorted().map { "  only in the first:  \($0)" } + y.subtracting(x).sorted().map { "  only in the second: \($0)" })
            .joined(separator: "\n")
    }

    /// Whether the compiled path's shapes take `step` (its dictionaries read into a generic password's slots).
    static func compiledShape(_ step: DifferentialStep) -> Bool {
        let dictionary = step.dictionary as CFDictionary
        switch step.operation {
        case .add: return SecItemShape(dictionary, for: .add).map { $0.key != nil && $0.secret != nil } ?? false
        case .copy:
            return step.passesResult && ((SecItemShape(dictionary, for: .copy).map { $0.key != nil && $0.returnData } ?? false)
                                         || SecItemReadQuery.typed(dictionary) != nil)
        case .update:
            return SecItemShape(dictionary, for: .query)?.key != nil && SecItemShape(step.changesDictionary as CFDictionary, for: .changes)?.secret != nil
        case .delete: return SecItemShape(dictionary, for: .query)?.key != nil
        case .lock: return false
        }
    }
}

/// The number of steps of each sequence: `KEYSTONE_DIFFERENTIAL_STEPS` (a longer run), else `standard`.
private func differentialSteps(_ standard: Int) -> Int {
    ProcessInfo.processInfo.environment["KEYSTONE_DIFFERENTIAL_STEPS"].flatMap(Int.init) ?? standard
}

@Suite("SecItem dictionaries: the compiled path, the general path and typed queries give identical results", .serialized, .ownsDefaultKeychain)
struct SecItemDifferentialTests {
    @Test("randomized sequences in memory (any access group; seeds 1-3) agree call by call, lock states included",
          arguments: [UInt64(1), 2, 3])
    func memoryUnrestricted(seed: UInt64) throws {
        let keychains = DifferentialKeychains(entitled: nil) { MemoryStorage() }
        let steps = differentialSteps(2_000)
        let (served, statuses) = try keychains.run(seed: seed, steps: steps, groups: ["default", "g2"]) { state in
            for engine in [keychains.compiled, keychains.reference, keychains.typed] { (engine.storage as? MemoryStorage)?.lockState = state }
        }
        #expect(served * 4 > steps, "only \(served) of \(steps) steps had a shape the compiled path serves")
        let expected: Set<OSStatus> = [errSecSuccess, errSecItemNotFound, errSecDuplicateItem, errSecParam, errSecNoSuchAttr, errSecInteractionNotAllowed]
        #expect(statuses.isSuperset(of: expected), "the sequence never returned \(expected.subtracting(statuses).sorted())")
        KeychainServicesDefaults.useMemoryKeychain()
    }

    @Test("randomized sequences in memory with entitled access groups (seeds 11-12) agree call by call", arguments: [UInt64(11), 12])
    func memoryEntitled(seed: UInt64) throws {
        let keychains = DifferentialKeychains(entitled: ["g1", "g2"]) { MemoryStorage() }
        let steps = differentialSteps(2_000)
        let (served, statuses) = try keychains.run(seed: seed, steps: steps, groups: ["g1", "g2", "g3"]) { state in
            for engine in [keychains.compiled, keychains.reference, keychains.typed] { (engine.storage as? MemoryStorage)?.lockState = state }
        }
        #expect(served * 4 > steps, "only \(served) of \(steps) steps had a shape the compiled path serves")
        #expect(statuses.contains(errSecMissingEntitlement), "no call named a group outside the entitled ones")
        KeychainServicesDefaults.useMemoryKeychain()
    }

    @Test("a randomized sequence on keychain files (seed 21) agrees call by call")
    func keychainFiles() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("secitem-differential-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var made = 0
        let keychains = try DifferentialKeychains(entitled: nil) {
            made += 1
            return try KeychainFile.create(at: directory.appendingPathComponent("k\(made).keychain-db").path, password: "differential")
        }
        try keychains.run(seed: 21, steps: differentialSteps(300) / 2, groups: ["default", "g2"], compareEvery: 10)
        KeychainServicesDefaults.useMemoryKeychain()
    }

    @Test("returned bytes are an NSData that bridges to Data in one copy, with the exact bytes (empty, inline-sized, large)",
          arguments: [0, 5, 4_096])
    func returnedBytes(count: Int) throws {
        KeychainServicesDefaults.useMemoryKeychain()
        defer { KeychainServicesDefaults.useMemoryKeychain() }
        let secret = Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let item: [String: Any] = [Key.class: ItemClass.genericPassword.rawValue, Key.service: "bytes", Key.account: "a"]
        var add = item
        add[Key.valueData] = secret
        try #require(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
        var result: CFTypeRef?
        try #require(SecItemCopyMatching(item.merging([Key.returnData: true]) { $1 } as CFDictionary, &result) == errSecSuccess)
        let object = try #require(result)
        #expect(object is any ContiguousBytes, "Foundation would copy it byte by byte")
        #expect(object as? Data == secret)
        let nsData = try #require(object as? NSData)
        #expect(nsData.length == count)
        #expect(nsData.isEqual(NSData(data: secret)))
        #expect(nsData.copy() as? Data == secret)
        // In a dictionary (the general path), as Apple-style code reads it.
        var attributes: CFTypeRef?
        try #require(SecItemCopyMatching(item.merging([Key.returnData: true, Key.returnAttributes: true]) { $1 } as CFDictionary, &attributes) == errSecSuccess)
        #expect((attributes as? [String: Any])?[Key.valueData] as? Data == secret)
    }

    @Test("every read shape apps use gives the general path's status, result and objects (generic and internet passwords)",
          arguments: ["memory", "keychain file"])
    func readShapes(storage: String) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("secitem-shapes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory); KeychainServicesDefaults.useMemoryKeychain() }
        let store: any KeychainStorage = storage == "memory"
            ? MemoryStorage() : try KeychainFile.create(at: directory.appendingPathComponent("s.keychain-db").path, password: "shapes")
        KeychainServicesDefaults.setEngine(KeychainEngine(storage: store, configuration: KeychainServicesDefaults.standardConfiguration()))
        let (genp, inet) = (ItemClass.genericPassword.rawValue, ItemClass.internetPassword.rawValue)
        let items: [[String: Any]] = [
            [Key.class: genp, Key.service: "svc", Key.account: "a1", Key.valueData: Data("one".utf8), Key.label: "L"],
            [Key.class: genp, Key.service: "svc", Key.account: "a2", Key.valueData: Data("two".utf8)],
            [Key.class: genp, Key.service: "svc", Key.account: "a3", Key.valueData: Data(), Key.synchronizable: true],
            [Key.class: inet, Key.server: "h1.example", Key.account: "a1", Key.`protocol`: "htps", Key.port: 443, Key.valueData: Data("web".utf8)],
            [Key.class: inet, Key.server: "h1.example", Key.account: "a2", Key.valueData: Data("web2".utf8)],
        ]
        for item in items { try #require(SecItemAdd(item as CFDictionary, nil) == errSecSuccess) }
        let reads: [[String: Any]] = [
            [Key.class: genp, Key.service: "svc", Key.account: "a1", Key.returnData: true],
            [Key.class: genp, Key.service: "svc", Key.account: "a1", Key.returnData: true, Key.returnAttributes: true, Key.matchLimit: Key.matchLimitOne],
            [Key.class: genp, Key.service: "svc", Key.account: "a2", Key.returnAttributes: true],
            [Key.class: genp, Key.service: "svc", Key.matchLimit: Key.matchLimitAll, Key.returnAttributes: true],
            [Key.class: genp, Key.service: "svc", Key.matchLimit: Key.matchLimitAll, Key.returnAttributes: true, Key.returnData: true,
             Key.synchronizable: Key.synchronizableAny],
            [Key.class: genp, Key.service: "svc", Key.matchLimit: Key.matchLimitAll, Key.returnData: true],
            [Key.class: genp, Key.service: "svc", Key.account: "a1", Key.returnPersistentRef: true, Key.returnAttributes: true],
            [Key.class: genp, Key.service: "svc", Key.account: "none", Key.returnData: true],
            [Key.class: inet, Key.server: "h1.example", Key.account: "a1", Key.returnData: true],
            [Key.class: inet, Key.server: "h1.example", Key.account: "a1", Key.`protocol`: "htps", Key.port: 443, Key.returnData: true,
             Key.returnAttributes: true],
            [Key.class: inet, Key.server: "h1.example", Key.matchLimit: Key.matchLimitAll, Key.returnAttributes: true],
        ]
        for read in reads {
            try #require(SecItemReadQuery.typed(read as CFDictionary) != nil, "the one-pass read does not serve \(read)")
            var compiled: CFTypeRef?, general: CFTypeRef?
            let status = SecItemCopyMatching(read as CFDictionary, &compiled)
            let generalStatus = SecItemGeneralPath.copyMatching(read as CFDictionary, &general)
            #expect(status == generalStatus, "\(read)")
            if let compiled { try DifferentialKeychains.checkObjectKinds(compiled) }
            let (a, b) = (try DifferentialKeychains.typedResult(compiled), try DifferentialKeychains.typedResult(general))
            #expect(a == b, "\(read): \(String(describing: a)) against \(String(describing: b))")
            #expect(status == errSecItemNotFound || a != nil, "\(read) found nothing")
        }
    }

    @Test("reads without object references take the one-pass read; kSecValueRef, kSecReturnRef, an LAContext, a key that is no string or a value of no keychain type do not")
    func oneParseReads() {
        let genp = ItemClass.genericPassword.rawValue
        let served: [[AnyHashable: Any]] = [
            [Key.class: genp, Key.service: "s", Key.account: "a", Key.returnData: true, Key.returnAttributes: true],
            [Key.class: genp, Key.service: "s", Key.matchLimit: Key.matchLimitAll, Key.returnAttributes: true, Key.synchronizable: Key.synchronizableAny],
            [Key.class: "inet", Key.server: "h", Key.port: NSNumber(value: 443), Key.returnData: kCFBooleanTrue as Any],
        ]
        for dictionary in served {
            let typed = SecItemReadQuery.typed(dictionary)
            #expect(typed != nil, "\(dictionary)")
            #expect(typed == (try? SecItemBridge.query(dictionary)), "the one-pass read differs from the general path's for \(dictionary)")
        }
        let general: [[AnyHashable: Any]] = [
            [Key.class: genp, Key.service: "s", Key.returnRef: true],
            [Key.class: genp, Key.valueRef: "x", Key.returnData: true],
            [Key.class: genp, Key.service: "s", Key.returnData: true, Key.useAuthenticationContext: LAContext()],
            [Key.class: genp, Key.service: "s", Key.account: URL(string: "https://example.com")!, Key.returnData: true],
            [Key.class: genp, 7: "s", Key.returnData: true],
        ]
        for dictionary in general { #expect(SecItemReadQuery.typed(dictionary) == nil, "\(dictionary)") }
    }

    @Test("the shapes Apple-style code passes most are read into the compiled path's slots; any other key or type is not")
    func shapes() {
        let genp = ItemClass.genericPassword.rawValue
        let served: [[String: Any]] = [
            [Key.class: genp, Key.service: "s", Key.account: "a", Key.returnData: true],
            [Key.class: genp, Key.service: "s", Key.account: Data("a".utf8), Key.returnData: kCFBooleanTrue as Any, Key.matchLimit: Key.matchLimitOne],
            [Key.class: genp, Key.service: "s", Key.account: "a", Key.accessGroup: "g", Key.synchronizable: false, Key.returnData: true,
             Key.useDataProtectionKeychain: true],
        ]
        for dictionary in served { #expect(SecItemShape(dictionary as CFDictionary, for: .copy)?.key != nil, "\(dictionary)") }
        let general: [[String: Any]] = [
            [Key.class: genp, Key.service: "s", Key.account: "a", Key.returnData: true, Key.returnAttributes: true],
            [Key.class: genp, Key.service: "s", Key.account: "a", Key.returnData: NSNumber(value: 1)],
            [Key.class: genp, Key.service: "s", Key.account: "a", Key.returnData: true, Key.matchLimit: Key.matchLimitAll],
            [Key.class: genp, Key.service: "s", Key.account: "a", Key.returnData: true, Key.synchronizable: Key.synchronizableAny],
            [Key.class: genp, Key.service: "s", Key.account: 7, Key.returnData: true],
            [Key.class: "inet", Key.account: "a", Key.returnData: true],
            [Key.class: genp, Key.service: "s", Key.account: "a", Key.returnData: true, Key.label: "l"],
        ]
        for dictionary in general { #expect(SecItemShape(dictionary as CFDictionary, for: .copy) == nil, "\(dictionary)") }
        #expect(SecItemShape([Key.valueData: Data([1])] as CFDictionary, for: .changes)?.secret == Data([1]))
        #expect(SecItemShape([Key.valueData: Data([1]), Key.label: "l"] as CFDictionary, for: .changes) == nil)
    }
}
#endif
