import Foundation
import Keystone

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

    /// Decrypts every entry.
    ///
    /// - Throws: `KeychainError` with `errSecIO` when the directory is not a store or gpg cannot be found,
    ///   `KeychainError.Code.invalidItem` for a `PASSWORD_STORE_GPG_OPTS` with quoting. Entries gpg cannot decrypt,
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

}
#endif
