#if NIO
import Crypto
import Foundation
import KeychainEngine
import KeychainSealing

/// `errSecVerifyFailed` (-67808): what a rollback (an older value than this machine has seen) fails with.
let errSecVerifyFailedStatus: Int32 = -67808

/// The keychain-wide HEAD record (`keystone/v1/NAME/head`): the counter every committed write transaction advances
/// (compared by mod revision, so every write is ordered after every other), and the audit chain's hash.
///
/// Value: format byte (1), counter (UInt64 BE), audit chain hash (32 bytes), HMAC-SHA256 of (keychain id, counter,
/// chain hash) under ``EtcdKeychain/headKey(_:)``. An absent HEAD is counter 0 (a keychain made before issue 30).
struct EtcdHead: Sendable, Hashable {
    static let format: UInt8 = 1
    static let zeroHash = Data(repeating: 0, count: 32)

    var counter: UInt64
    var chainHash: Data

    static let empty = EtcdHead(counter: 0, chainHash: zeroHash)

    static func mac(keychainID: Data, counter: UInt64, chainHash: Data, key: SymmetricKey) -> Data {
        var message = Data("keystone-etcd-head\u{0}".utf8) + keychainID
        message.append(Data(bigEndianUnsigned: counter))
        message.append(chainHash)
        return Data(HMAC<SHA256>.authenticationCode(for: message, using: key))
    }

    func encoded(keychainID: Data, key: SymmetricKey) -> Data {
        var out = Data([Self.format])
        out.append(Data(bigEndianUnsigned: counter))
        out.append(chainHash)
        out.append(Self.mac(keychainID: keychainID, counter: counter, chainHash: chainHash, key: key))
        return out
    }

    /// Parses and authenticates a stored HEAD (nil value: absent, counter 0).
    ///
    /// - Throws: `errSecVerifyFailed` when it is malformed or its MAC does not verify (edited or planted).
    static func decode(_ value: Data?, keychainID: Data, key: SymmetricKey) throws -> EtcdHead {
        guard let value else { return .empty }
        guard value.count == 1 + 8 + 32 + 32, value.first == format,
              let counter = Data(value.dropFirst().prefix(8)).bigEndianUInt64 else {
            throw EngineError(errSecVerifyFailedStatus, "the etcd keychain's HEAD record is malformed (edited or planted in etcd); nothing was changed")
        }
        let chain = Data(value.dropFirst(9).prefix(32))
        let stored = Data(value.suffix(32))
        let expected = mac(keychainID: keychainID, counter: counter, chainHash: chain, key: key)
        guard stored.count == expected.count, zip(stored, expected).reduce(UInt8(0), { $0 | ($1.0 ^ $1.1) }) == 0 else {
            throw EngineError(errSecVerifyFailedStatus, "the etcd keychain's HEAD record fails its MAC (edited or planted in etcd); nothing was changed")
        }
        return EtcdHead(counter: counter, chainHash: chain)
    }
}

/// This machine's memory of the newest state it has seen of one etcd keychain: for each item (by class and
/// primary-key digest) the highest HEAD counter of a row it read or wrote, with that row's version, and the highest
/// HEAD counter. A row older than its item's mark, or a HEAD older than the keychain's, is a rollback: refused with
/// `errSecVerifyFailed` and logged, never returned.
///
/// Stored in `$XDG_STATE_HOME/keystone/etcd-<keychain id, hex>.highwater` (else `~/.local/state/keystone`), mode
/// 0600 in a 0700 directory: lines `i <class><digest, hex> <counter> <version>` and `h <counter>`, digests and
/// numbers only (never a name or a secret). Each raise appends one line with one `write(2)` in `O_APPEND` mode (a
/// line is written whole or not at all; a torn last line is ignored on load); when the file holds many more lines
/// than marks it is rewritten to a temporary file and renamed over (atomic). Several processes of one user share it:
/// each reads what the others appended since its last look, once per transaction (one `stat`).
///
/// Decision: the file is not fsync'ed (a raise costs one append, not a disk flush): after a power loss the newest
/// marks may be missing, which can only miss a rollback (fail-open for that window), never refuse a valid value.
final class EtcdHighWater: Sendable {
    struct Mark: Sendable, Hashable {
        var counter: UInt64
        var version: UInt64
    }

    private struct State: Sendable {
        var marks: [Data: Mark] = [:]
        var head: UInt64 = 0
        /// How far the file was read, and its inode then.
        var offset: UInt64 = 0
        var inode: UInt64 = 0
        var lines = 0
        var loaded = false
    }

    /// The file; nil when no state directory could be made (marks are then kept in memory only, and a warning logged).
    let url: URL?
    private let state = Locked(State())
    /// Serializes this process's appends and compactions (never held while another lock is).
    private let fileLock = Locked(())

    init(keychainID: Data) {
        let name = "etcd-" + keychainID.hexString + ".highwater"
        url = Self.directory().map { $0.appendingPathComponent(name) }
    }

    /// `$XDG_STATE_HOME/keystone`, else `~/.local/state/keystone`, made 0700 when missing.
    static func directory() -> URL? {
        let environment = ProcessInfo.processInfo.environment
        let base: URL
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            base = URL(fileURLWithPath: state)
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            base = URL(fileURLWithPath: home).appendingPathComponent(".local/state")
        } else {
            return nil
        }
        let directory = base.appendingPathComponent("keystone")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            KeystoneLog.logger.warning("no state directory for etcd rollback detection; marks kept in memory only", metadata: ["path": "\(directory.path)"])
            return nil
        }
        return directory
    }

    static func itemKey(_ cls: ItemClass, _ digest: Data) -> Data { Data(cls.rawValue.utf8) + digest }

    static func prefix(_ digest: Data) -> String { digest.prefix(4).hexString }

    // MARK: - Reading the file

    /// Reads what was appended since the last look (or everything, after a compaction or at first): one `stat`
    /// when nothing changed. Disk work is done outside the marks' lock.
    func refresh() {
        guard let url else { return }
        var info = stat()
        guard stat(url.path, &info) == 0 else { return }
        let inode = UInt64(info.st_ino), size = UInt64(info.st_size)
        let (offset, known) = state.withLock { ($0.offset, $0.inode) }
        let from: UInt64 = inode == known ? offset : 0
        guard size > from || inode != known else { return }
        guard let handle = try? FileHandle(forReadingFrom: url) else { return }
        defer { try? handle.close() }
        try? handle.seek(toOffset: from)
        guard let data = try? handle.readToEnd(), !data.isEmpty else { return }
        // Only whole lines count: a line being appended now is read next time.
        guard let lastNewline = data.lastIndex(of: UInt8(ascii: "\n")) else { return }
        let whole = data[data.startIndex...lastNewline]
        var parsed: [(Data?, Mark)] = []
        for line in whole.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: " ")).map { String(decoding: $0, as: UTF8.self) }
            if fields.count == 2, fields[0] == "h", let counter = UInt64(fields[1]) {
                parsed.append((nil, Mark(counter: counter, version: 0)))
            } else if fields.count == 4, fields[0] == "i", let key = Data(etcdHex: fields[1]), let counter = UInt64(fields[2]), let version = UInt64(fields[3]) {
                parsed.append((key, Mark(counter: counter, version: version)))
            }
        }
        let read = UInt64(whole.count)
        state.withLock { state in
            if inode != state.inode { state.lines = 0 }
            for (key, mark) in parsed {
                if let key {
                    if mark.counter > state.marks[key]?.counter ?? 0 || state.marks[key] == nil { state.marks[key] = mark }
                } else {
                    state.head = max(state.head, mark.counter)
                }
            }
            state.lines += parsed.count
            state.inode = inode
            state.offset = from + read
            state.loaded = true
        }
    }

    // MARK: - Checks

    /// The marks as they are now: a transaction takes them before its first read and checks what it reads against
    /// them only. A mark raised later (by another transaction of this machine) came from a revision after this
    /// transaction's snapshot, so a row of the snapshot older than it is not a rollback.
    struct Snapshot: Sendable {
        let marks: [Data: Mark]
        let head: UInt64

        func mark(_ cls: ItemClass, _ digest: Data) -> Mark? { marks[EtcdHighWater.itemKey(cls, digest)] }
    }

    /// The highest HEAD counter this machine has seen.
    var headCounter: UInt64 { state.withLock { $0.head } }

    /// The mark of an item, if this machine has one.
    func mark(_ cls: ItemClass, _ digest: Data) -> Mark? {
        state.withLock { $0.marks[Self.itemKey(cls, digest)] }
    }

    /// Reads what other processes appended, then copies the marks.
    func snapshot() -> Snapshot {
        refresh()
        return state.withLock { Snapshot(marks: $0.marks, head: $0.head) }
    }

    /// Checks an authenticated row of an item against its mark, and raises the mark when the row is newer.
    ///
    /// - Parameter counter: the row's HEAD counter (0 for a format-1 row: older than any format-2 row seen).
    /// - Throws: `errSecVerifyFailed` when the row is older than a row of that item this machine saw.
    /// - Parameter pending: where a newer row's mark goes, raised by the transaction's end in one append.
    func check(_ cls: ItemClass, _ digest: Data, counter: UInt64, version: UInt64, against marks: Snapshot, keychain: String,
               pending: inout [(Data, Mark)]?) throws {
        let key = Self.itemKey(cls, digest)
        if let seen = marks.marks[key], counter < seen.counter {
            KeystoneLog.logger.warning("etcd keychain rollback refused: an item is older than this machine has seen", metadata: [
                "keychain": "\(keychain)", "item": "\(Self.prefix(digest))", "version": "\(version)", "seen": "\(seen.version)",
            ])
            throw EngineError(errSecVerifyFailedStatus, "rollback detected: item \(Self.prefix(digest))… of class \(cls.rawValue) holds version \(version) (keychain counter \(counter)) but this machine has seen version \(seen.version) (counter \(seen.counter)); the old value is not returned. Someone with write access to etcd put an older value back: restore the newest version (keystone item-history) or, if the cluster was restored from a backup on purpose, remove this machine's marks (\(url?.path ?? "in memory"))")
        }
        if counter > 0, counter > marks.marks[key]?.counter ?? 0 { pending?.append((key, Mark(counter: counter, version: version))) }
    }

    /// Checks a HEAD read from etcd against the highest counter seen, and raises it.
    ///
    /// - Throws: `errSecVerifyFailed` when it is older.
    func checkHead(_ counter: UInt64, against marks: Snapshot, keychain: String) throws {
        let seen = marks.head
        if counter < seen {
            KeystoneLog.logger.warning("etcd keychain rollback refused: the HEAD record is older than this machine has seen", metadata: [
                "keychain": "\(keychain)", "head": "\(counter)", "seen": "\(seen)",
            ])
            throw EngineError(errSecVerifyFailedStatus, "rollback detected: the keychain's HEAD counter is \(counter) but this machine has seen \(seen); nothing was changed. Someone with write access to etcd put an older HEAD back (or the cluster was restored from a backup: if on purpose, remove this machine's marks at \(url?.path ?? "in memory"))")
        }
        raise([], head: counter)
    }

    /// Raises marks (never lowers them) and appends what rose to the file.
    func raise(_ items: [(Data, Mark)], head: UInt64) {
        var lines = ""
        let total: (lines: Int, marks: Int) = state.withLock { state in
            for (key, mark) in items where mark.counter > state.marks[key]?.counter ?? 0 {
                state.marks[key] = mark
                lines += "i \(key.hexString) \(mark.counter) \(mark.version)\n"
            }
            if head > state.head {
                state.head = head
                lines += "h \(head)\n"
            }
            return (state.lines, state.marks.count)
        }
        guard !lines.isEmpty, let url else { return }
        fileLock.withLock { _ in
            if total.lines > 4096, total.lines > 4 * (total.marks + 1) {
                compact(url)
            } else {
                append(lines, to: url)
            }
        }
    }

    private func append(_ text: String, to url: URL) {
        let fd = open(url.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            KeystoneLog.logger.warning("could not record etcd rollback marks", metadata: ["path": "\(url.path)", "errno": "\(errno)"])
            return
        }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// Rewrites the file with one line per mark: a temporary file, then a rename over the old one.
    private func compact(_ url: URL) {
        refresh()  // what other processes appended since the last look is kept
        let text: String = state.withLock { state in
            var out = "h \(state.head)\n"
            for (key, mark) in state.marks {
                out += "i \(key.hexString) \(mark.counter) \(mark.version)\n"
            }
            return out
        }
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(getpid()).tmp")
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return append(text, to: url) }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count, rename(temporary.path, url.path) == 0 else {
            unlink(temporary.path)
            return
        }
        // A line another process appends between the refresh above and the rename is lost from the file (it stays
        // in that process's memory): a narrow window that can only miss a rollback, never refuse a valid value.
        state.withLock { state in
            state.lines = state.marks.count + 1
            state.offset = UInt64(bytes.count)
            var info = stat()
            if stat(url.path, &info) == 0 { state.inode = UInt64(info.st_ino) }
        }
    }
}

extension Data {
    /// Bytes from lowercase or uppercase hex digits; nil for anything else.
    init?(etcdHex hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: c - 48
            case 97...102: c - 87
            case 65...70: c - 55
            default: nil
            }
        }
        var index = 0
        while index < digits.count {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self.init(bytes)
    }
}
#endif
