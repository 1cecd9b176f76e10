import CFuzzer
import Foundation
import KeychainEngine

// Random SecItem dictionaries and operations against one engine over memory: never a crash, and every failure is
// an EngineError whose status Apple defines (one Status names).

/// Keys the dictionaries are made of: every attribute, search, return, value and use key, and unknown ones.
let keys: [String] = [
    Key.class, Key.account, Key.service, Key.accessGroup, Key.accessible, Key.accessControl, Key.label, Key.comment,
    Key.description, Key.generic, Key.creator, Key.type, Key.isInvisible, Key.isNegative, Key.synchronizable,
    Key.server, Key.protocol, Key.port, Key.path, Key.securityDomain, Key.authenticationType, Key.creationDate,
    Key.modificationDate, Key.matchLimit, Key.matchCaseInsensitive, Key.returnData, Key.returnAttributes,
    Key.returnRef, Key.returnPersistentRef, Key.valueData, Key.valuePersistentRef, Key.valueRef,
    Key.useAuthenticationUI, Key.useDataProtectionKeychain, Key.tokenID, Key.applicationTag, Key.keyClass,
    "zzzz", "m_Bogus", "u_Bogus", "nonsense", "",
]
let strings: [String] = [
    "genp", "inet", "cert", "keys", "idnt", "ak", "ck", "dk", "aku", "cku", "dku", "akpu", Key.matchLimitOne,
    Key.matchLimitAll, Key.synchronizableAny, "u_AuthUIA", "u_AuthUIF", "u_AuthUIS", "htps", "form", "svc", "alice", "",
]

struct Bytes {
    var data: [UInt8]
    var index = 0
    mutating func next() -> UInt8? {
        guard index < data.count else { return nil }
        defer { index += 1 }
        return data[index]
    }
}

let engine = KeychainEngine(storage: MemoryStorage())

public func fuzzQuery(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    var input = Bytes(data: Array(UnsafeRawBufferPointer(start: start, count: count)))
    func value() -> KeychainValue? {
        guard let kind = input.next(), let n = input.next() else { return nil }
        switch kind % 7 {
        case 0: return .string(strings[Int(n) % strings.count])
        case 1: return .data(Data((0..<Int(n % 40)).map { _ in input.next() ?? 0 }))
        case 2: return .number(Int64(Int8(bitPattern: n)) * Int64(n) * 1_000_003)
        case 3: return .bool(n & 1 == 1)
        case 4: return .date(Date(timeIntervalSinceReferenceDate: Double(Int8(bitPattern: n)) * 1e9))
        case 5: return .double(Double(Int8(bitPattern: n)) / 3)
        default: return .string(String(decoding: (0..<Int(n % 12)).map { _ in input.next() ?? 0x61 }, as: UTF8.self))
        }
    }
    func query() -> KeychainQuery {
        var q: KeychainQuery = [:]
        let size = Int(input.next() ?? 0) % 9
        for _ in 0..<size {
            guard let k = input.next(), let v = value() else { break }
            q[keys[Int(k) % keys.count]] = v
        }
        return q
    }
    while let op = input.next() {
        let q = query()
        do {
            switch op % 4 {
            case 0: _ = try engine.add(q)
            case 1: _ = try engine.copyMatching(q)
            case 2: try engine.update(q, with: query())
            default: try engine.delete(q)
            }
        } catch let error as EngineError {
            precondition(Status.name(for: error.status) != nil, "an unknown status \(error.status)")
        } catch {
            preconditionFailure("a failure that is not an EngineError: \(type(of: error))")
        }
    }
    return 0
}

/// `main`, as SwiftPM names it for this executable: hands the command line to libFuzzer's driver.
@_cdecl("FuzzQuery_main")
public func FuzzQueryMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { data, size in
        guard let data else { return 0 }
        return fuzzQuery(UnsafeRawPointer(data), size)
    }
}
