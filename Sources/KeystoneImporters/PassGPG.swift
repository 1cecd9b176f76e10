import Foundation
import Keystone
#if canImport(Darwin)
import Darwin   // MAXPATHLEN, F_GETPATH
#endif

#if os(macOS) || os(Linux)
// Running gpg for a pass entry: the file opened by Keystone (checked to be inside the store) on gpg's standard input,
// the plaintext read up to ImportLimits.maxDecryptedBytes, gpg killed beyond it.

extension PassImportSource {
    func gpgExecutable() throws -> String {
        if let gpgPath { return gpgPath }
        let path = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for dir in path.split(separator: ":") {
            for name in ["gpg", "gpg2"] {
                let candidate = "\(dir)/\(name)"
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            }
        }
        throw KeychainError(status: Status.io, reason: "gpg is not installed (or not on PATH): install gnupg to read a password store")
    }

    /// `PASSWORD_STORE_GPG_OPTS` split at spaces. Decision: quoting is not interpreted (that would need a shell):
    /// options with quotes or backslashes are refused rather than guessed.
    func gpgOptions() throws -> [String] {
        guard let options = environment["PASSWORD_STORE_GPG_OPTS"], !options.isEmpty else { return [] }
        guard !options.contains(where: { "\"'\\$`".contains($0) }) else {
            throw KeychainError(code: .invalidItem, reason: "PASSWORD_STORE_GPG_OPTS uses shell quoting, which is not supported here: give plain space-separated options or unset it")
        }
        return options.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
    }

    /// Why gpg could not decrypt an entry (never the plaintext).
    struct DecryptionFailure: Error {
        var reason: String
        var status: Int32?
    }

    /// Opens the entry's file for gpg: without following a link unless the walk found one, and only when the file
    /// opened is inside the store (checked on the open descriptor, so a file swapped for a link meanwhile is caught)
    /// or ``followsSymlinksOutsideStore``.
    func openEntry(_ file: [UInt8], storeReal: [UInt8]) -> Result<Int32, DecryptionFailure> {
        var info = stat()
        let path = file.map { CChar(bitPattern: $0) } + [0]
        let isLink = lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK
        let fd = open(path, O_RDONLY | O_CLOEXEC | (isLink ? 0 : O_NOFOLLOW))
        guard fd >= 0 else {
            return .failure(DecryptionFailure(reason: "cannot open it: \(String(cString: strerror(errno)))"))
        }
        if !followsSymlinksOutsideStore {
            guard let opened = Self.path(of: fd), Self.isInside(opened, storeReal) else {
                close(fd)
                return .failure(DecryptionFailure(reason: "the file opened is not inside the store (it changed into a link meanwhile?): refused"))
            }
        }
        return .success(fd)
    }

    /// The path of an open descriptor, from the kernel.
    static func path(of fd: Int32) -> [UInt8]? {
        #if canImport(Darwin)
        var buffer = [CChar](repeating: 0, count: Int(MAXPATHLEN))
        guard fcntl(fd, F_GETPATH, &buffer) == 0 else { return nil }
        return buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        #else
        return realPath(Array("/proc/self/fd/\(fd)".utf8))
        #endif
    }

    /// Runs gpg on the entry's file (given on its standard input): the plaintext, or why it failed (never the
    /// plaintext). gpg is killed as soon as its output passes ``ImportLimits/maxDecryptedBytes``.
    func decrypt(_ file: [UInt8], storeReal: [UInt8], gpg: String, options: [String]) throws -> Result<Data, DecryptionFailure> {
        let fd: Int32
        switch openEntry(file, storeReal: storeReal) {
        case .success(let opened): fd = opened
        case .failure(let failure): return .failure(failure)
        }
        let input = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        defer { try? input.close() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: gpg)
        process.arguments = options + ["--batch", "--quiet", "--decrypt"]
        process.environment = environment
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = input
        do {
            try process.run()
        } catch {
            throw KeychainError(status: Status.io, reason: "cannot run \(ReportText.escaped(gpg)): check that gnupg is installed")
        }
        // The plaintext is read to its end (or to the limit) first, then gpg's messages (short).
        var plaintext = Data()
        var overLimit = false
        let reader = output.fileHandleForReading.fileDescriptor
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { Foundation.read(reader, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            guard plaintext.count + count <= limits.maxDecryptedBytes else {
                overLimit = true
                kill(process.processIdentifier, SIGKILL)
                break
            }
            plaintext.append(contentsOf: buffer[0..<count])
        }
        for index in buffer.indices { buffer[index] = 0 }
        if overLimit {
            plaintext.resetBytes(in: 0..<plaintext.count)
            try? output.fileHandleForReading.close()
            try? errors.fileHandleForReading.close()
            process.waitUntilExit()
            return .failure(DecryptionFailure(reason: "gpg's output is over the \(ImportLimits.size(limits.maxDecryptedBytes)) limit for a pass entry (ImportLimits.maxDecryptedBytes, --max-entry-size): gpg was stopped; a password entry is never that large",
                                              status: Status.dataTooLarge))
        }
        let messages = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let last = String(decoding: messages, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
            return .failure(DecryptionFailure(reason: "gpg could not decrypt it (exit \(process.terminationStatus))" + (last.isEmpty ? "" : ": \(ReportText.escaped(last))")
                            + ". Check that its key is in GNUPGHOME and unlocked"))
        }
        return .success(plaintext)
    }
}
#endif
