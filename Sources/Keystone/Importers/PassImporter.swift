import Foundation

#if os(macOS) || os(Linux)
/// The entries of a `pass` password store (password-store.org), decrypted with `gpg`, as generic passwords.
///
/// Each `DIR/NAME.gpg` under the store (``directory``: `$PASSWORD_STORE_DIR`, else `~/.password-store`) is
/// decrypted by running `gpg --batch --quiet --decrypt FILE` (with `GNUPGHOME` and simple `PASSWORD_STORE_GPG_OPTS`
/// from ``environment``); the plaintext comes back on gpg's standard output, never through arguments or files.
///
/// The mapping (pass's own convention):
///
/// - the **first line** is the password (the secret);
/// - a `login:`, `username:` or `user:` line (any case) is the **account**; without one, the entry's name
///   (`NAME`);
/// - the **service** is the entry's directory (`web/github.com` for `web/github.com/alice.gpg`), or the entry's
///   name for an entry at the top of the store;
/// - the label is `pass: DIR/NAME`.
///
/// Decision: other lines (a URL, notes, an `otpauth://` seed) are not imported, since they often hold more secrets and the
/// keychain item has one secret: each result names what was left out (`field url`, `2 more lines`), never the
/// text. An entry gpg cannot decrypt is ``ImportProblem/Kind/invalid`` (so the import aborts before writing unless
/// told to skip it), naming the entry and gpg's exit status.
///
/// - Important: Runs one `gpg` process per entry, synchronously: call it off the main thread and off Swift's
///   cooperative pool. gpg may ask its agent for the key's passphrase (pinentry).
public struct PassImportSource: ImportSource {
    /// The password store's directory.
    public var directory: URL
    /// The environment gpg runs with (`GNUPGHOME`, `PASSWORD_STORE_GPG_OPTS`, `PATH`, `HOME`…).
    public var environment: [String: String]
    /// The gpg executable; nil finds `gpg` (else `gpg2`) on the environment's `PATH`.
    public var gpgPath: String?

    /// A pass source: `directory`, else `$PASSWORD_STORE_DIR`, else `~/.password-store`.
    public init(directory: URL? = nil, environment: [String: String] = ProcessInfo.processInfo.environment, gpgPath: String? = nil) {
        if let directory {
            self.directory = directory
        } else if let dir = environment["PASSWORD_STORE_DIR"], !dir.isEmpty {
            self.directory = URL(fileURLWithPath: dir)
        } else {
            self.directory = URL(fileURLWithPath: (environment["HOME"] ?? NSHomeDirectory()) + "/.password-store")
        }
        self.environment = environment
        self.gpgPath = gpgPath
    }

    public var name: String { "pass" }

    /// The store's entries, relative to ``directory`` without `.gpg` (`web/github.com/alice`), sorted; hidden
    /// directories (`.git`, `.extensions`) are skipped.
    public func entries() throws -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw KeychainError(status: Status.io, reason: "\(directory.path) is not a password store directory: set PASSWORD_STORE_DIR or name it (pass:DIR)")
        }
        guard let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil, options: [.skipsHiddenFiles]) else { return [] }
        let base = directory.standardizedFileURL.path
        var entries: [String] = []
        for case let url as URL in enumerator where url.pathExtension == "gpg" {
            let path = url.standardizedFileURL.path
            guard path.hasPrefix(base + "/") else { continue }
            entries.append(String(path.dropFirst(base.count + 1).dropLast(4)))
        }
        return entries.sorted()
    }

    /// Decrypts every entry.
    ///
    /// - Throws: ``KeychainError`` with `errSecIO` when the directory is not a store or gpg cannot be found,
    ///   ``KeychainError/Code/invalidItem`` for a `PASSWORD_STORE_GPG_OPTS` with quoting. Entries gpg cannot decrypt are
    ///   invalid problems.
    public func read() throws -> ImportBatch {
        let gpg = try gpgExecutable()
        let extra = try gpgOptions()
        var batch = ImportBatch()
        for entry in try entries() {
            let origin = "pass entry \(entry)"
            let plaintext: Data
            switch try decrypt(directory.appendingPathComponent(entry + ".gpg"), gpg: gpg, options: extra) {
            case .success(let data): plaintext = data
            case .failure(let failure):
                batch.problems.append(ImportProblem(.invalid, origin: origin, reason: failure.reason))
                continue
            }
            switch Self.candidate(entry: entry, plaintext: plaintext, origin: origin) {
            case .success(let candidate): batch.candidates.append(candidate)
            case .failure(let problem): batch.problems.append(problem)
            }
        }
        return batch
    }

    /// The candidate for one decrypted entry (see the mapping above).
    static func candidate(entry: String, plaintext: Data, origin: String) -> Result<ImportCandidate, ImportProblem> {
        guard let text = String(data: plaintext, encoding: .utf8) else {
            return .failure(ImportProblem(.unsupported, origin: origin, reason: "the entry is binary (pass insert of a file): not a password"))
        }
        var lines = text.components(separatedBy: "\n").map { $0.hasSuffix("\r") ? String($0.dropLast()) : $0 }
        while lines.last == "" { lines.removeLast() }
        guard let password = lines.first, !password.isEmpty else {
            return .failure(ImportProblem(.unsupported, origin: origin, reason: "the first line (the password) is empty"))
        }
        let components = entry.split(separator: "/").map(String.init)
        let name = components.last ?? entry
        let service = components.count > 1 ? components.dropLast().joined(separator: "/") : name
        var account = name
        var notes: [String] = []
        var otherLines = 0
        var foundLogin = false
        for line in lines.dropFirst() where !line.trimmingCharacters(in: .whitespaces).isEmpty {
            if let colon = line.firstIndex(of: ":"), !line[..<colon].contains(" ") {
                let field = line[..<colon].lowercased()
                if !foundLogin, ["login", "username", "user"].contains(field) {
                    account = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                    foundLogin = true
                    continue
                }
                notes.append("field \(field)")
            } else {
                otherLines += 1
            }
        }
        if otherLines > 0 { notes.append("\(otherLines) more line\(otherLines == 1 ? "" : "s")") }
        do {
            let item = try GenericPassword(service: service, account: account)
            return .success(ImportCandidate(item: .generic(item), secret: Data(password.utf8), label: "pass: \(entry)", origin: origin, notes: notes))
        } catch {
            return .failure(ImportProblem(.invalid, origin: origin, reason: KeychainError(converting: error).reason))
        }
    }

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
    }

    /// Runs gpg on `file`: the plaintext, or why it failed (never the plaintext).
    func decrypt(_ file: URL, gpg: String, options: [String]) throws -> Result<Data, DecryptionFailure> {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: gpg)
        process.arguments = options + ["--batch", "--quiet", "--decrypt", file.path]
        process.environment = environment
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw KeychainError(status: Status.io, reason: "cannot run \(gpg): check that gnupg is installed")
        }
        // gpg's messages are short; the plaintext is read to its end first, then the messages.
        let plaintext = output.fileHandleForReading.readDataToEndOfFile()
        let messages = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let last = String(decoding: messages, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
            return .failure(DecryptionFailure(reason: "gpg could not decrypt it (exit \(process.terminationStatus))" + (last.isEmpty ? "" : ": \(last)")
                            + ". Check that its key is in GNUPGHOME and unlocked"))
        }
        return .success(plaintext)
    }
}
#endif
