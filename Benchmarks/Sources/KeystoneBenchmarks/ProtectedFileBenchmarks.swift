import Crypto
import Foundation
import Keystone
import KeystoneProtectedFiles
import KeystoneTesting

// `keystone-benchmarks files [--megabytes N] [--rounds R] [--dir DIRECTORY]`
//
// Protected files (Keystone's sealed format, issue 13) on one N MB file (100 by default), in one run:
// - baseline: swift-crypto's `AES.GCM.seal` of the same N MB held in memory (one call), and `AES.GCM.open` of it;
// - Keystone seal: `ProtectedFiles.write(contentsOf:to:)`, file to file, streaming in 64 KiB chunks, including the
//   atomic replace (temporary file, fsync, rename, directory fsync);
// - Keystone unseal: `ProtectedFiles.read(at:to:)`, file to file, the same way;
// - the I/O floor: a plain copy of the file in 64 KiB pieces with fsync, no crypto (what the disk alone costs).
// Rounds interleave the three; each keeps its best and median. Throughput is MB/s of plaintext (1 MB = 10^6 bytes);
// the ratio is Keystone's median over the in-memory baseline's median (goal: at least 0.8).
// Peak memory: the benchmark re-executes itself (`files --child idle|stream DIR`), so the peak is a fresh process's
// own VmHWM (/proc/self/status): `idle` sets up the same keychain and protected files and seals one byte; `stream`
// does that, then seals the N MB file and unseals it, file to file. Both peaks are printed, and the difference
// (what streaming N MB adds; goal: at most 16 MB).

/// Runs the `files` benchmark (or its child); returns the exit status.
func runProtectedFileBenchmarks(_ arguments: [String]) -> Int32 {
    if arguments.first == "--child", arguments.count == 3 { return protectedFileChild(mode: arguments[1], directory: arguments[2]) }
    var megabytes = 100, rounds = 5
    var directory = FileManager.default.temporaryDirectory
    var rest = arguments[...]
    while let option = rest.popFirst() {
        guard let value = rest.popFirst() else { print("files: \(option) needs a value"); return 2 }
        switch option {
        case "--megabytes": megabytes = Int(value) ?? megabytes
        case "--rounds": rounds = Int(value) ?? rounds
        case "--dir": directory = URL(fileURLWithPath: value)
        default: print("usage: keystone-benchmarks files [--megabytes N] [--rounds R] [--dir DIRECTORY]"); return 2
        }
    }
    let work = directory.appendingPathComponent("keystone-files-bench-\(UUID().uuidString)")
    do {
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let size = megabytes * 1_000_000
        let plain = work.appendingPathComponent("plain.bin")
        var content = Data(count: size)
        content.withUnsafeMutableBytes { bytes in
            for i in stride(from: 0, to: size, by: 8) { bytes.storeBytes(of: UInt64(i) &* 0x9E37_79B9_7F4A_7C15, toByteOffset: i, as: UInt64.self) }
        }
        try content.write(to: plain)
        let files = try ProtectedFiles(keychain: Keychain(store: InMemoryKeychain()))
        let sealed = work.appendingPathComponent("sealed.kspf"), out = work.appendingPathComponent("out.bin")
        let key = SymmetricKey(size: .bits256)
        print("Protected files: \(megabytes) MB, \(rounds) interleaved rounds, files in \(work.deletingLastPathComponent().path)\n")

        func seconds(_ body: () throws -> Void) rethrows -> Double {
            let start = DispatchTime.now().uptimeNanoseconds
            try body()
            return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        }
        var baselineSeal: [Double] = [], baselineOpen: [Double] = [], keystoneSeal: [Double] = [], keystoneUnseal: [Double] = []
        var plainCopy: [Double] = []
        let copy = work.appendingPathComponent("copy.bin")
        var box: AES.GCM.SealedBox?
        for _ in 0..<rounds {
            baselineSeal.append(try seconds { box = try AES.GCM.seal(content, using: key) })
            keystoneSeal.append(try seconds { try files.write(contentsOf: plain, to: sealed) })
            baselineOpen.append(try seconds { _ = try AES.GCM.open(box!, using: key) })
            keystoneUnseal.append(try seconds { try files.read(at: sealed, to: out) })
            plainCopy.append(seconds { copyWithFsync(plain.path, copy.path) })
        }
        guard try Data(contentsOf: out) == content else { print("files: the round trip differs"); return 1 }

        func rate(_ s: Double) -> Double { Double(size) / 1e6 / s }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        func row(_ name: String, _ samples: [Double]) {
            print(name.padding(toLength: 44, withPad: " ", startingAt: 0)
                  + String(format: "best %7.0f MB/s   median %7.0f MB/s", rate(samples.min()!), rate(median(samples))))
        }
        row("swift-crypto AES.GCM.seal, in memory", baselineSeal)
        row("swift-crypto AES.GCM.open, in memory", baselineOpen)
        row("Keystone seal, file to file (streaming)", keystoneSeal)
        row("Keystone unseal, file to file (streaming)", keystoneUnseal)
        row("I/O floor: plain copy in 64 KiB, fsync", plainCopy)
        // The baseline is the in-memory seal for both directions; the in-memory open is shown as a stricter one.
        print(String(format: "ratio to the in-memory seal (goal >= 0.8): seal %.2fx, unseal %.2fx (medians); %.2fx, %.2fx (best)",
                     median(baselineSeal) / median(keystoneSeal), median(baselineSeal) / median(keystoneUnseal),
                     baselineSeal.min()! / keystoneSeal.min()!, baselineSeal.min()! / keystoneUnseal.min()!))
        print(String(format: "unseal to the in-memory open: %.2fx (medians), %.2fx (best)",
                     median(baselineOpen) / median(keystoneUnseal), baselineOpen.min()! / keystoneUnseal.min()!))

        // Peak memory in fresh child processes.
        func child(_ mode: String) throws -> Int {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            process.arguments = ["files", "--child", mode, work.path]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            guard process.terminationStatus == 0, let kb = Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw KeychainError(status: -36, reason: "the \(mode) child failed: \(output)")
            }
            return kb
        }
        let idle = try child("idle"), stream = try child("stream")
        print(String(format: "\npeak memory (VmHWM of a fresh process): idle %.1f MB, sealing + unsealing %d MB %.1f MB: streaming adds %.1f MB (goal <= 16 MB)",
                     Double(idle) / 1024, megabytes, Double(stream) / 1024, Double(stream - idle) / 1024))
        return 0
    } catch {
        print("files: failed: \(error)")
        return 1
    }
}

/// The I/O floor of a streaming file-to-file pass without crypto: read 64 KiB at a time, write, fsync, close.
private func copyWithFsync(_ source: String, _ destination: String) {
    let input = open(source, O_RDONLY), output = open(destination, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    defer { close(input); close(output) }
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
        if count <= 0 { break }
        _ = buffer.withUnsafeBytes { write(output, $0.baseAddress, count) }
    }
    fsync(output)
}

/// The child: the same setup, then (for `stream`) seal DIR/plain.bin and unseal it; prints its VmHWM in kB.
private func protectedFileChild(mode: String, directory: String) -> Int32 {
    do {
        let dir = URL(fileURLWithPath: directory)
        let files = try ProtectedFiles(keychain: Keychain(store: InMemoryKeychain()))
        let tiny = dir.appendingPathComponent("child-\(mode)-tiny.kspf")
        try files.write(Data([1]), to: tiny)
        _ = try files.read(at: tiny)
        if mode == "stream" {
            let sealed = dir.appendingPathComponent("child.kspf")
            try files.write(contentsOf: dir.appendingPathComponent("plain.bin"), to: sealed)
            try files.read(at: sealed, to: dir.appendingPathComponent("child-out.bin"))
        }
        print(peakResidentKilobytes())
        return 0
    } catch {
        print("failed: \(error)")
        return 1
    }
}
