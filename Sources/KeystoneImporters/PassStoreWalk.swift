import Foundation
import Keystone

#if os(macOS) || os(Linux)
// Finding a pass store's entries: a walk on raw file-name bytes with lstat, refusing links that lead outside the
// store and reporting names that are not UTF-8, each as an entry of its own.

extension PassImportSource {
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
    /// - Throws: `KeychainError` with `errSecIO` when ``directory`` is not a directory.
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
}
#endif
