import CFuzzer
import Foundation
import KeychainEngine
import KeychainFile
import Logging
#if canImport(Glibc)
import Glibc
#endif

// Damaged keychain files: the input overwrites bytes of a real keychain file (pages, rows, header), which is then
// opened, unlocked and searched. Never a crash; every failure typed; and no search ever returns a secret other
// than the one stored for that very account.
//
// The file is mutated in place and restored after each input, so it keeps its inode and its unlock-cache entry:
// most inputs need no key derivation.

let secrets = ["alice": "secret-of-alice", "bob": "secret-of-bob", "carol": "secret-of-carol", "dave": "secret-of-dave"]

struct Template {
    let path: String
    let original: [UInt8]

    init() {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keystone-fuzz-\(getpid())").path
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        chmod(dir, 0o700)
        path = dir + "/fuzz.keychain-db"
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
        do {
            let file = try KeychainFile.create(at: path, password: "pw")
            let engine = KeychainEngine(storage: file)
            for (account, secret) in secrets.sorted(by: { $0.key < $1.key }) {
                try engine.add([Key.class: .string("genp"), Key.service: .string("svc"), Key.account: .string(account),
                                Key.valueData: .data(Data(secret.utf8))])
            }
            try engine.add([Key.class: .string("inet"), Key.server: .string("example.com"), Key.account: .string("alice"),
                            Key.valueData: .data(Data("inet-secret".utf8))])
        } catch {
            fatalError("cannot make the template keychain: \(error)")
        }
        // Fold the write-ahead log into the file, so the file alone holds everything.
        let checkpoint = Process()
        checkpoint.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        checkpoint.arguments = ["-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()", path]
        try? checkpoint.run()
        checkpoint.waitUntilExit()
        original = Array((try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data())
        precondition(original.count > 4096, "the template keychain is empty")
    }

    func write(_ bytes: [UInt8]) {
        let fd = open(path, O_WRONLY)
        guard fd >= 0 else { return }
        _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, bytes.count, 0) }
        ftruncate(fd, off_t(bytes.count))
        close(fd)
        truncate(path + "-wal", 0)
        unlink(path + "-shm")
    }
}

/// Damaged items are logged by design; thousands of lines a second would only slow the fuzzer.
let quiet: Void = LoggingSystem.bootstrap { _ in SwiftLogNoOpLogHandler() }
let template: Template = { _ = quiet; return Template() }()

public func fuzzKeychainFile(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = Array(UnsafeRawBufferPointer(start: start, count: count))
    var bytes = template.original
    // Each 4-byte group: an offset (3 bytes, wrapped to the file) and a byte to XOR there; a group whose first
    // byte is 0xFF copies 32 bytes from one offset to another (moving digests and keys between rows).
    var i = 0
    while i + 4 <= input.count {
        let offset = (Int(input[i]) << 16 | Int(input[i + 1]) << 8 | Int(input[i + 2])) % bytes.count
        if input[i] == 0xFF, i + 8 <= input.count {
            let from = (Int(input[i + 4]) << 8 | Int(input[i + 5])) * 7 % bytes.count
            for k in 0..<32 where offset + k < bytes.count && from + k < bytes.count { bytes[offset + k] = bytes[from + k] }
            i += 8
        } else {
            bytes[offset] ^= input[i + 3] == 0 ? 1 : input[i + 3]
            i += 4
        }
    }
    template.write(bytes)
    defer { template.write(template.original) }
    do {
        let file = try KeychainFile.open(at: template.path)
        if file.lockState != .unlocked { try file.unlock(password: "pw") }
        let engine = KeychainEngine(storage: file)
        for account in secrets.keys {
            let query: KeychainQuery = [Key.class: .string("genp"), Key.service: .string("svc"), Key.account: .string(account),
                                        Key.returnData: .bool(true)]
            if let data = try? engine.copyMatching(query)?.data {
                precondition(data == Data(secrets[account]!.utf8), "another item's secret was returned for \(account)")
            }
        }
        let all: KeychainQuery = [Key.class: .string("genp"), Key.matchLimit: .string(Key.matchLimitAll),
                                  Key.returnData: .bool(true), Key.returnAttributes: .bool(true)]
        if let items = try? engine.copyMatching(all)?.array {
            for item in items {
                guard let attributes = item.attributes, let account = attributes[Key.account]?.stringValue else { continue }
                let data = attributes[Key.valueData]?.dataValue
                precondition(data == secrets[account].map { Data($0.utf8) }, "a secret returned under the wrong account")
            }
        }
        _ = try? file.verify()
    } catch let error as EngineError {
        precondition(Status.name(for: error.status) != nil, "an unknown status \(error.status)")
    } catch {
        preconditionFailure("a failure that is not an EngineError: \(type(of: error))")
    }
    return 0
}

/// `main`, as SwiftPM names it for this executable: hands the command line to libFuzzer's driver.
@_cdecl("FuzzKeychainFile_main")
public func FuzzKeychainFileMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { data, size in
        guard let data else { return 0 }
        return fuzzKeychainFile(UnsafeRawPointer(data), size)
    }
}
