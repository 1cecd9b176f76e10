import Foundation

#if os(macOS) || os(Linux)
/// The entries of a `pass` password store (password-store.org), decrypted with `gpg`, as generic passwords.
///
/// Each `DIR/NAME.gpg` under the store (``directory``: `$PASSWORD_STORE_DIR`, else `~/.password-store`) is
/// decrypted by running `gpg --batch --quiet --decrypt` on the file, opened by Keystone and given on gpg's standard
/// input (with `GNUPGHOME` and simple `PASSWORD_STORE_GPG_OPTS` from ``environment``); the plaintext comes back on
/// gpg's standard output, never through arguments or files, and gpg is stopped when it passes
/// ``ImportLimits/maxDecryptedBytes`` (1 MiB by default).
///
/// Decisions: an entry that is a symbolic link resolving outside the store is refused (an invalid entry naming the
/// link and its target) unless ``followsSymlinksOutsideStore``; a file or directory whose name is not UTF-8 is an
/// invalid entry shown with its bytes escaped (skip it with ``ImportOptions/skipInvalid``); the others are imported.
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
    /// The size limits: ``ImportLimits/maxDecryptedBytes`` on what gpg outputs for one entry (gpg is stopped beyond
    /// it), ``ImportLimits/maxFieldBytes`` on the password line.
    public var limits: ImportLimits
    /// Whether an entry that is a symbolic link resolving outside the store (or inside a linked directory outside it)
    /// is imported. Default false: such an entry is an invalid entry naming the link and where it leads, and the file
    /// is never decrypted.
    ///
    /// - Important: A link lets whoever wrote the store import a file from elsewhere (another user's, another store's)
    ///   under a name of their choosing. Set it only for a store you wrote yourself.
    public var followsSymlinksOutsideStore: Bool

    /// A pass source: `directory`, else `$PASSWORD_STORE_DIR`, else `~/.password-store`.
    public init(directory: URL? = nil, environment: [String: String] = ProcessInfo.processInfo.environment, gpgPath: String? = nil,
                limits: ImportLimits = .default, followsSymlinksOutsideStore: Bool = false) {
        if let directory {
            self.directory = directory
        } else if let dir = environment["PASSWORD_STORE_DIR"], !dir.isEmpty {
            self.directory = URL(fileURLWithPath: dir)
        } else {
            self.directory = URL(fileURLWithPath: (environment["HOME"] ?? NSHomeDirectory()) + "/.password-store")
        }
        self.environment = environment
        self.gpgPath = gpgPath
        self.limits = limits
        self.followsSymlinksOutsideStore = followsSymlinksOutsideStore
    }

    public var name: String { "pass" }

    /// What the walk of the store found at one path.
    enum Found {
        /// An entry to decrypt: its name (relative, without `.gpg`) and file.
        case entry(name: String, file: [UInt8])
        /// A path that is not imported, and why.
        case problem(ImportProblem)
    }

    /// The store's entries, relative to ``directory`` without `.gpg` (`web/github.com/alice`), sorted; hidden
    /// files and directories (`.git`, `.extensions`) are skipped, and so are the entries ``read()`` reports as
    /// problems (a name that is not UTF-8, a link outside the store).
    ///
    /// - Throws: ``KeychainError`` with `errSecIO` when ``directory`` is not a directory.
    public func entries() throws -> [String] {
        try walk().compactMap { if case .entry(let name, _) = $0 { name } else { nil } }
    }

    /// Walks the store with `lstat`, on raw file-name bytes (a name need not be UTF-8), never following a link whose
    /// target is outside the store unless ``followsSymlinksOutsideStore``, nor a link to a directory inside it (its
    /// entries are found under their own names).
    func walk() throws -> [Found] {
        let base = Array(directory.path.utf8)
        guard let storeReal = Self.realPath(base), Self.isDirectory(storeReal) else {
            throw KeychainError(status: Status.io, reason: "\(ReportText.escaped(directory.path)) is not a password store directory: set PASSWORD_STORE_DIR or name it (pass:DIR)")
        }
        var found: [([UInt8], Found)] = []
        var visited: Set<[UInt8]> = [storeReal]
        walk(directory: base, relative: [], storeReal: storeReal, visited: &visited, into: &found)
        return found.sorted { $0.0.lexicographicallyPrecedes($1.0) }.map(\.1)
    }

    private func walk(directory: [UInt8], relative: [UInt8], storeReal: [UInt8], visited: inout Set<[UInt8]>,
                      into found: inout [([UInt8], Found)]) {
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        for name in Self.names(in: directory) where name.first != dot {
            let path = directory + [slash] + name
            let rel = relative.isEmpty ? name : relative + [slash] + name
            let isEntryFile = name.count > 4 && Array(name.suffix(4)) == Array(".gpg".utf8)
            let shownName = ReportText.escaped(bytes: isEntryFile ? Array(rel.dropLast(4)) : rel)
            var info = stat()
            guard lstat(path.map { CChar(bitPattern: $0) } + [0], &info) == 0 else { continue }
            var isDir = (info.st_mode & S_IFMT) == S_IFDIR
            var isFile = (info.st_mode & S_IFMT) == S_IFREG
            if (info.st_mode & S_IFMT) == S_IFLNK {
                guard let target = Self.realPath(path) else {
                    if isEntryFile {
                        found.append((rel, .problem(ImportProblem(.invalid, origin: "pass entry \(shownName)", reason: "a symbolic link that leads nowhere"))))
                    }
                    continue
                }
                isDir = Self.isDirectory(target)
                isFile = !isDir
                let inside = Self.isInside(target, storeReal)
                if isDir, inside {
                    // Decision: a link to a directory of the store is not followed (no loops, no entry twice).
                    continue
                }
                if !inside, !followsSymlinksOutsideStore, isDir || isEntryFile {
                    let what = isDir ? "pass directory \(shownName)" : "pass entry \(shownName)"
                    found.append((rel, .problem(ImportProblem(.invalid, origin: what, reason: "a symbolic link to \(ReportText.escaped(bytes: target)), outside the store: refused, since it would import a file from elsewhere under a name the store chose. Import it only if you trust it (followsSymlinksOutsideStore, --follow-symlinks-outside-store), or skip invalid entries"))))
                    continue
                }
                if isDir {
                    guard visited.insert(target).inserted else { continue }
                }
            }
            if isDir {
                guard String(bytes: name, encoding: .utf8) != nil else {
                    found.append((rel, .problem(ImportProblem(.invalid, origin: "pass directory \(shownName)", reason: "the directory's name is not UTF-8, so its entries cannot be named: rename it, or skip invalid entries"))))
                    continue
                }
                walk(directory: path, relative: rel, storeReal: storeReal, visited: &visited, into: &found)
            } else if isFile, isEntryFile {
                guard let entryName = String(bytes: rel.dropLast(4), encoding: .utf8) else {
                    found.append((rel, .problem(ImportProblem(.invalid, origin: "pass entry \(shownName)", reason: "the file name is not UTF-8, so it cannot name an item: rename it (pass mv), or skip invalid entries"))))
                    continue
                }
                found.append((rel, .entry(name: entryName, file: path)))
            }
        }
    }

    /// The names in a directory, as raw bytes.
    static func names(in directory: [UInt8]) -> [[UInt8]] {
        guard let handle = opendir(directory.map { CChar(bitPattern: $0) } + [0]) else { return [] }
        defer { closedir(handle) }
        var names: [[UInt8]] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            if name == [UInt8(ascii: ".")] || name == [UInt8(ascii: "."), UInt8(ascii: ".")] { continue }
            names.append(name)
        }
        return names
    }

    /// `realpath(3)` on bytes; nil when the path does not resolve.
    static func realPath(_ path: [UInt8]) -> [UInt8]? {
        guard let resolved = realpath(path.map { CChar(bitPattern: $0) } + [0], nil) else { return nil }
        defer { free(resolved) }
        return Array(UnsafeRawBufferPointer(start: resolved, count: strlen(resolved)))
    }

    static func isDirectory(_ path: [UInt8]) -> Bool {
        var info = stat()
        return stat(path.map { CChar(bitPattern: $0) } + [0], &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    static func isInside(_ path: [UInt8], _ root: [UInt8]) -> Bool {
        path.count > root.count && Array(path.prefix(root.count)) == root && path[root.count] == UInt8(ascii: "/")
    }

    /// Decrypts every entry.
    ///
    /// - Throws: ``KeychainError`` with `errSecIO` when the directory is not a store or gpg cannot be found,
    ///   ``KeychainError/Code/invalidItem`` for a `PASSWORD_STORE_GPG_OPTS` with quoting. Entries gpg cannot decrypt,
    ///   entries whose name is not UTF-8, links outside the store and entries over the ``limits`` (with
    ///   `errSecDataTooLarge` as their ``ImportProblem/status``) are invalid problems.
    public func read() throws -> ImportBatch {
        let gpg = try gpgExecutable()
        let extra = try gpgOptions()
        let storeReal = Self.realPath(Array(directory.path.utf8)) ?? []
        var batch = ImportBatch()
        for found in try walk() {
            let entry: String, file: [UInt8]
            switch found {
            case .problem(let problem):
                batch.problems.append(problem)
                continue
            case .entry(let name, let path):
                entry = name
                file = path
            }
            let origin = "pass entry \(ReportText.escaped(entry))"
            let plaintext: Data
            switch try decrypt(file, storeReal: storeReal, gpg: gpg, options: extra) {
            case .success(let data): plaintext = data
            case .failure(let failure):
                batch.problems.append(ImportProblem(.invalid, origin: origin, reason: failure.reason, status: failure.status))
                continue
            }
            switch Self.candidate(entry: entry, plaintext: plaintext, origin: origin, limits: limits) {
            case .success(let candidate): batch.candidates.append(candidate)
            case .failure(let problem): batch.problems.append(problem)
            }
        }
        return batch
    }

    /// The candidate for one decrypted entry (see the mapping above).
    static func candidate(entry: String, plaintext: Data, origin: String, limits: ImportLimits = .default) -> Result<ImportCandidate, ImportProblem> {
        guard let text = String(data: plaintext, encoding: .utf8) else {
            return .failure(ImportProblem(.unsupported, origin: origin, reason: "the entry is binary (pass insert of a file): not a password"))
        }
        var lines = text.components(separatedBy: "\n").map { $0.hasSuffix("\r") ? String($0.dropLast()) : $0 }
        while lines.last == "" { lines.removeLast() }
        guard let password = lines.first, !password.isEmpty else {
            return .failure(ImportProblem(.unsupported, origin: origin, reason: "the first line (the password) is empty"))
        }
        guard password.utf8.count <= limits.maxFieldBytes else {
            return .failure(ImportProblem(.invalid, origin: origin, reason: "the first line (the password) is over the \(ImportLimits.size(limits.maxFieldBytes)) limit for a field (ImportLimits.maxFieldBytes, --max-field-size); its value is not shown",
                                          status: Status.dataTooLarge))
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
                notes.append("field \(ReportText.escaped(field))")
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
