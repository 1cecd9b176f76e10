// A child process of the etcd linearizability test (Tests/KeychainEtcdTests/LinearizabilityHarnessTests.swift): one
// "machine" of a fleet, with its own etcd client and engine, running random adds, updates, deletes and reads of a few
// generic passwords of one etcd keychain, and printing each operation's invocation and response as one JSON line:
//
//   {"p":1,"k":"k2","f":"update","v":"p1-17","t0":123,"t1":456,"r":"ok"}
//
// f: add | update | delete | read; v: the value written; expected (and version): an update with check-and-set, the
// value of the version it states; r: ok | duplicate | notFound | conflict | value (with "out")
// | unknown (a write whose outcome is unknown: no t1, as Jepsen's :info) | failed (a read that got no answer: it
// changed nothing, the checker drops it). t0 is taken before the call, t1 after it returns, on CLOCK_MONOTONIC (one
// clock for every process of the machine), in nanoseconds.
//
// It stops after --operations calls, or at the first call after its standard input reaches its end (the parent closes
// it when its faults are over), whichever comes first; between calls it waits 0 to --think-ms milliseconds.
//
// --stale-reads makes it a broken client on purpose, for the test that the harness catches one: a read of an item
// this process wrote or read before answers that value from memory instead of asking etcd.
//
// usage: EtcdHistoryWorker --url URL --password-file FILE --process N --keys K --operations N --seed S [--think-ms T]
//        [--stale-reads]
#if NIO && os(Linux)
import Foundation
import Synchronization
import KeychainEngine
import KeychainEtcd

func argument(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("EtcdHistoryWorker: \(message)\n".utf8))
    exit(2)
}

func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// SplitMix64: the same seed gives the same sequence of calls.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

guard let url = argument("--url"), let passwordFile = argument("--password-file"),
      let process = argument("--process").flatMap(Int.init), let keys = argument("--keys").flatMap(Int.init),
      let operations = argument("--operations").flatMap(Int.init), let seed = argument("--seed").flatMap(UInt64.init)
else { fail("usage: EtcdHistoryWorker --url URL --password-file FILE --process N --keys K --operations N --seed S") }

let engine: KeychainEngine
let keychain: EtcdKeychain
do {
    let password = try String(contentsOfFile: passwordFile, encoding: .utf8).trimmingCharacters(in: .newlines)
    keychain = try EtcdKeychain.open(try EtcdConfiguration(url: url, environment: [:]))
    if keychain.lockState != .unlocked { try keychain.unlock(password: password) }
    engine = KeychainEngine(storage: keychain)
} catch {
    fail("cannot open the keychain: \(error)")
}

func query(_ key: String, _ extra: KeychainQuery = [:]) -> KeychainQuery {
    [Key.class: .string("genp"), Key.service: .string("linearizability"), Key.account: .string(key)].merging(extra) { $1 }
}

/// One JSON line on standard output, written at once (the parent reads them as they come).
func record(_ fields: [String: Any]) {
    guard let line = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]) else { return }
    FileHandle.standardOutput.write(line + Data("\n".utf8))
}

let think = argument("--think-ms").flatMap(Int.init) ?? 0
let staleReads = CommandLine.arguments.contains("--stale-reads")
var remembered: [String: Data] = [:]
let stop = Atomic<Bool>(false)
Thread.detachNewThread {
    _ = FileHandle.standardInput.readDataToEndOfFile()
    stop.store(true, ordering: .relaxed)
}

var random = SplitMix(state: seed &+ UInt64(process) &* 0x1000_0000)
for n in 0..<operations where !stop.load(ordering: .relaxed) {
    if think > 0 { usleep(UInt32(Int.random(in: 0...think, using: &random) * 1000)) }
    let key = "k\(Int.random(in: 0..<keys, using: &random))"
    let value = "p\(process)-\(n)"
    let roll = Int.random(in: 0..<100, using: &random)
    let function = roll < 20 ? "add" : roll < 45 ? "update" : roll < 55 ? "delete" : "read"
    var fields: [String: Any] = ["p": process, "k": key, "f": function]
    if function == "add" || function == "update" { fields["v"] = value }
    // Half the updates are check-and-sets: the item's current version, and that version's own secret (a kept version
    // never changes, so the pair is consistent even if the item moved on meanwhile). The history states the value
    // read, which names the version (every value is written once; versions never go back).
    var expectedVersion: UInt64?
    if function == "update", Bool.random(using: &random) {
        let attributes: [String: AttributeValue] = [Key.service: .string("linearizability"), Key.account: .string(key)]
        if let version = try? keychain.currentVersion(of: .genericPassword, matching: attributes),
           let stored = try? keychain.item(version: version, of: .genericPassword, matching: attributes) {
            expectedVersion = version
            fields["expected"] = String(decoding: stored.secret ?? Data(), as: UTF8.self)
            fields["version"] = version
        }
    }
    let t0 = now()
    var status: Int32 = 0
    var reason = ""
    var read: Data?
    do {
        switch function {
        case "add": _ = try engine.add(query(key, [Key.valueData: .data(Data(value.utf8))]))
        case "update":
            if let expectedVersion {
                try keychain.withCheckAndSet(expectedVersion: expectedVersion) {
                    try engine.update(query(key), with: [Key.valueData: .data(Data(value.utf8))])
                }
            } else {
                try engine.update(query(key), with: [Key.valueData: .data(Data(value.utf8))])
            }
        case "delete": try engine.delete(query(key))
        default:
            if staleReads, let value = remembered[key] {
                read = value
            } else {
                read = try engine.copyMatching(query(key, [Key.returnData: .bool(true)]))?.data
            }
        }
        if staleReads, function != "delete" { remembered[key] = read ?? Data(value.utf8) }
    } catch let error as EtcdVersionConflict {
        status = error.status
        reason = "\(error)"
    } catch let error as EngineError {
        status = error.status
        reason = error.reason
    } catch {
        status = Status.internalError
        reason = "\(error)"
    }
    let t1 = now()
    fields["t0"] = t0
    switch status {
    case Status.success:
        fields["t1"] = t1
        if function == "read" {
            fields["r"] = "value"
            fields["out"] = read.map { String(decoding: $0, as: UTF8.self) } ?? ""
        } else {
            fields["r"] = "ok"
        }
    case Status.duplicateItem: fields["t1"] = t1; fields["r"] = "duplicate"
    case Status.itemNotFound: fields["t1"] = t1; fields["r"] = "notFound"
    case Status.invalidItemRef where expectedVersion != nil: fields["t1"] = t1; fields["r"] = "conflict"
    default:
        // errSecNotAvailable (no quorum within the deadline) or anything else: a write may or may not have been
        // committed; a read changed nothing.
        fields["r"] = function == "read" ? "failed" : "unknown"
        fields["status"] = Int(status)
        fields["reason"] = reason
    }
    record(fields)
}
#else
print("EtcdHistoryWorker needs Linux and the NIO trait")
#endif
