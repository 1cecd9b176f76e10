#if NIO
import Crypto
import Foundation
import KeychainEngine
import KeychainSealing
#if canImport(Glibc)
import Glibc
#endif

/// One change a write transaction makes, as the audit log records it: never a name or a secret.
struct EtcdAuditEvent: Sendable, Hashable {
    enum Kind: String, Sendable, CaseIterable {
        case add, update, delete, undelete, destroy, purge, read, rotate

        /// The byte an entry stores.
        var code: UInt8 {
            switch self {
            case .add: 1
            case .update: 2
            case .delete: 3
            case .undelete: 4
            case .destroy: 5
            case .purge: 6
            case .read: 7
            case .rotate: 8
            }
        }

        init?(code: UInt8) {
            guard let kind = Self.allCases.first(where: { $0.code == code }) else { return nil }
            self = kind
        }
    }
    var kind: Kind
    var itemClass: ItemClass
    /// The item's primary-key digest (64 bytes, as in its etcd key).
    var digest: Data
    /// The item's version after the change (0 when erased).
    var version: UInt64
}

/// The keychain's tamper-evident audit log: one entry per committed write transaction, written by that transaction.
///
/// **Where.** Entry `n` is the etcd key `keystone/v1/NAME/audit/<n as 16 hex digits>`, `n` the HEAD's keychain-wide
/// counter the transaction sets (``EtcdAuditEntry/counter``). It is put in the same etcd transaction as the change
/// and the HEAD: a change whose entry cannot be written (etcd refuses the key, the request is too large, the quota is
/// reached) is not applied. Fail-closed by construction, not by a check that could be skipped.
///
/// **What** (``EtcdAuditRecord``, binary, format 2): the counter; the writer's clock (milliseconds since 1970); the
/// machine (SHA-256 of `keystone-etcd-machine\0` + `/etc/machine-id`, as ``EtcdKeychain/enrollMachine(_:machineID:)``
/// names machines); the user (uid and login name); one event per item changed (operation, class, the first 12 bytes
/// of the item's primary-key digest, its version after the change); the chain hash of the previous entry; a commit id
/// (16 random bytes, new for every attempt to commit: format 1 entries, written before it, have none); and an
/// HMAC-SHA256 of everything before it and of the entry's etcd key, under the audit key (HKDF label
/// `keystone-etcd-audit`, ``EtcdKeychain/auditKey(_:)``), which only machines that unlocked the keychain hold.
///
/// **Chain.** An entry's chain hash is SHA-256 of its whole value (MAC included); the next entry holds it, and the
/// HEAD holds the last one's (``EtcdAudit/append(to:keychain:counter:previousHash:events:key:)`` returns it). The
/// first entry after a checkpoint holds the checkpoint's hash; the very first holds 32 zero bytes.
///
/// Decision: the user is stored as uid and login name, not a digest: a login name is not a secret, and a digest of
/// one hides nothing from whoever can list the machine's accounts (a small space to try), while an auditor needs to
/// read it. The item is a digest prefix under the keychain's index key: it names nothing without the keychain's keys.
///
/// Decision: the commit id makes every entry unique. Without it, two processes of one machine (or two threads) making
/// the same change from the same HEAD in the same millisecond would write byte-identical entries, and a writer whose
/// answer was lost could take the other's entry for its own (``EtcdTransaction``'s resolution of an indeterminate
/// commit looks for its entry by its bytes).
enum EtcdAudit {
    /// `errSecVerifyFailed` (-67808): a log that does not verify.
    static let verifyFailed: Int32 = -67808

    /// The label of the MAC's input and of the chain.
    static let macLabel = Data("keystone-etcd-audit-v1\u{0}".utf8)

    /// Appends the audit entry of the write transaction that makes HEAD's counter `counter` to `operations` (the
    /// transaction's success branch), and returns the new chain hash the HEAD record keeps.
    ///
    /// - Parameters:
    ///   - previousHash: the chain hash in the HEAD record the transaction read (32 zero bytes at first).
    ///   - events: what the transaction changes.
    ///   - key: ``EtcdKeychain/auditKey(_:)``.
    /// - Returns: the chain hash to store in HEAD: SHA-256 of the entry written.
    static func append(to operations: inout [EtcdOperation], keychain: EtcdKeychain, counter: UInt64, previousHash: Data,
                       events: [EtcdAuditEvent], key: SymmetricKey) throws -> Data {
        let record = EtcdAuditRecord(counter: counter, time: keychain.clock(), machine: machineDigest, uid: UInt32(getuid()),
                                     user: userName, events: events.map(EtcdAuditRecord.Event.init), previousHash: previousHash,
                                     commitID: EtcdAuditRecord.newCommitID())
        let etcdKey = keychain.keyspace.auditEntry(counter)
        let value = record.sealed(key: key, etcdKey: etcdKey)
        operations.append(.put(etcdKey, value))
        return chainHash(of: value)
    }

    /// The hash that chains an entry (or a checkpoint) to the next: SHA-256 of its stored value.
    static func chainHash(of value: Data) -> Data { Data(SHA256.hash(data: value)) }

    /// This machine, as enrollment names it: SHA-256 of "keystone-etcd-machine\0" + ``EtcdKeychain/machineID``.
    static let machineDigest: Data = Data(SHA256.hash(data: Data("keystone-etcd-machine\u{0}\(EtcdKeychain.machineID)".utf8)))

    /// This process's login name (at most 64 bytes of it), "" when the account has none: looked up once per uid (a
    /// lookup may go through NSS: not on every commit).
    static var userName: String {
        let uid = getuid()
        if let known = userNames.withLock({ $0?.uid == uid ? $0?.name : nil }) { return known }
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        var name = ""
        if getpwuid_r(uid, &entry, &buffer, buffer.count, &found) == 0, found != nil, let raw = entry.pw_name {
            name = String(String(cString: raw).utf8.prefix(64)) ?? ""
        }
        userNames.withLock { $0 = (uid, name) }
        return name
    }

    private static let userNames = Locked<(uid: uid_t, name: String)?>(nil)
}

/// One audit entry as stored (the value of `…/audit/<counter>`), before or after its MAC.
struct EtcdAuditRecord: Sendable, Hashable {
    /// The format written: 2 (with a commit id). Format 1 entries (no commit id) are still read and verified.
    static let format: UInt8 = 2
    static let formatWithoutCommitID: UInt8 = 1
    static let commitIDLength = 16

    struct Event: Sendable, Hashable {
        var kind: UInt8
        var itemClass: String
        /// The first 12 bytes of the primary-key digest: 8 of its identity part, 4 of its group part.
        var item: Data
        var version: UInt64

        init(kind: UInt8, itemClass: String, item: Data, version: UInt64) {
            self.kind = kind
            self.itemClass = itemClass
            self.item = item
            self.version = version
        }

        init(_ event: EtcdAuditEvent) {
            kind = event.kind.code
            itemClass = event.itemClass.rawValue
            item = Self.prefix(of: event.digest)
            version = event.version
        }

        /// 8 bytes of the identity digest and 4 of the group digest (the key's 64 bytes are identity then group).
        static func prefix(of digest: Data) -> Data {
            guard digest.count == 64 else { return Data(digest.prefix(12)) }
            return Data(digest.prefix(8)) + Data(digest.dropFirst(32).prefix(4))
        }
    }

    var counter: UInt64
    var time: Date
    var machine: Data
    var uid: UInt32
    var user: String
    var events: [Event]
    var previousHash: Data
    /// 16 random bytes drawn for this attempt to commit (nil: a format 1 entry).
    var commitID: Data?

    /// A fresh commit id, from the system's random generator.
    static func newCommitID() -> Data {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<commitIDLength).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }

    /// The bytes the MAC covers (after the label and the etcd key).
    var body: Data {
        var out = Data([commitID == nil ? Self.formatWithoutCommitID : Self.format])
        out.appendBigEndian(counter)
        out.appendBigEndian(UInt64(bitPattern: Int64((time.timeIntervalSince1970 * 1000).rounded())))
        out.append(machine.count == 32 ? machine : Data(SHA256.hash(data: machine)))
        out.appendBigEndian(uid)
        let name = Data(user.utf8.prefix(255))
        out.append(UInt8(name.count))
        out.append(name)
        out.appendBigEndian(UInt16(min(events.count, Int(UInt16.max))))
        for event in events.prefix(Int(UInt16.max)) {
            out.append(event.kind)
            let cls = Data(event.itemClass.utf8.prefix(255))
            out.append(UInt8(cls.count))
            out.append(cls)
            out.append(event.item.prefix(12) + Data(count: max(0, 12 - event.item.count)))
            out.appendBigEndian(event.version)
        }
        out.append(previousHash.count == 32 ? previousHash : Data(count: 32))
        if let commitID { out.append(commitID.prefix(Self.commitIDLength) + Data(count: max(0, Self.commitIDLength - commitID.count))) }
        return out
    }

    /// What the MAC authenticates: the label, the entry's etcd key (its keychain name and counter), the body.
    static func authenticated(_ body: Data, etcdKey: Data) -> Data {
        EtcdAudit.macLabel + etcdKey + Data([0]) + body
    }

    static func mac(_ body: Data, key: SymmetricKey, etcdKey: Data) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: authenticated(body, etcdKey: etcdKey), using: key))
    }

    /// The stored value: the body and its MAC.
    func sealed(key: SymmetricKey, etcdKey: Data) -> Data {
        let body = body
        return body + Self.mac(body, key: key, etcdKey: etcdKey)
    }

    /// Parses a stored value (the MAC is not checked here: ``verify(_:key:etcdKey:)``); nil when it is not one.
    init?(decoding data: Data) {
        var reader = ByteReader(data)
        guard let format = reader.byte(), format == Self.format || format == Self.formatWithoutCommitID,
              let counter = reader.integer(8), let millis = reader.integer(8),
              let machine = reader.bytes(32), let uid = reader.integer(4),
              let nameLength = reader.byte(), let name = reader.bytes(Int(nameLength)),
              let count = reader.integer(2) else { return nil }
        var events: [Event] = []
        for _ in 0..<count {
            guard let kind = reader.byte(), let clsLength = reader.byte(), let cls = reader.bytes(Int(clsLength)),
                  let item = reader.bytes(12), let version = reader.integer(8) else { return nil }
            events.append(Event(kind: kind, itemClass: String(decoding: cls, as: UTF8.self), item: item, version: version))
        }
        guard let previous = reader.bytes(32) else { return nil }
        var commitID: Data?
        if format == Self.format {
            guard let id = reader.bytes(Self.commitIDLength) else { return nil }
            commitID = id
        }
        guard let _ = reader.bytes(32), reader.isAtEnd else { return nil }
        self.counter = counter
        self.time = Date(timeIntervalSince1970: Double(Int64(bitPattern: millis)) / 1000)
        self.machine = machine
        self.uid = UInt32(uid)
        self.user = String(decoding: name, as: UTF8.self)
        self.events = events
        self.previousHash = previous
        self.commitID = commitID
    }

    init(counter: UInt64, time: Date, machine: Data, uid: UInt32, user: String, events: [Event], previousHash: Data,
         commitID: Data? = nil) {
        self.counter = counter
        self.time = time
        self.machine = machine
        self.uid = uid
        self.user = user
        self.events = events
        self.previousHash = previousHash
        self.commitID = commitID
    }

    /// Whether `value`'s MAC is right for `etcdKey` under `key`.
    static func verify(_ value: Data, key: SymmetricKey, etcdKey: Data) -> Bool {
        guard value.count > 32 else { return false }
        // Constant time: HMAC's own comparison.
        return HMAC<SHA256>.isValidAuthenticationCode(Data(value.suffix(32)),
                                                      authenticating: authenticated(Data(value.dropLast(32)), etcdKey: etcdKey),
                                                      using: key)
    }
}

/// A trimmed log's starting point (`keystone/v1/NAME/audit-checkpoint`): the counter and chain hash of the last
/// entry removed, MACed like an entry, so the first entry kept must follow it.
struct EtcdAuditCheckpoint: Sendable, Hashable {
    static let format: UInt8 = 1
    var counter: UInt64
    var chainHash: Data
    var time: Date

    var body: Data {
        var out = Data([Self.format])
        out.appendBigEndian(counter)
        out.append(chainHash)
        out.appendBigEndian(UInt64(bitPattern: Int64((time.timeIntervalSince1970 * 1000).rounded())))
        return out
    }

    func sealed(key: SymmetricKey, etcdKey: Data) -> Data {
        body + EtcdAuditRecord.mac(body, key: key, etcdKey: etcdKey)
    }

    init(counter: UInt64, chainHash: Data, time: Date) {
        self.counter = counter
        self.chainHash = chainHash
        self.time = time
    }

    init?(decoding data: Data) {
        var reader = ByteReader(data)
        guard reader.byte() == Self.format, let counter = reader.integer(8), let hash = reader.bytes(32),
              let millis = reader.integer(8), reader.bytes(32) != nil, reader.isAtEnd else { return nil }
        self.counter = counter
        self.chainHash = hash
        self.time = Date(timeIntervalSince1970: Double(Int64(bitPattern: millis)) / 1000)
    }
}

/// Reads big-endian fields from bytes, nil past the end.
struct ByteReader {
    private let bytes: [UInt8]
    private var at = 0

    init(_ data: Data) { bytes = [UInt8](data) }

    var isAtEnd: Bool { at == bytes.count }

    mutating func bytes(_ n: Int) -> Data? {
        guard n >= 0, bytes.count - at >= n else { return nil }
        defer { at += n }
        return Data(bytes[at..<(at + n)])
    }

    mutating func byte() -> UInt8? { bytes(1)?.first }

    mutating func integer(_ n: Int) -> UInt64? {
        bytes(n).map { $0.reduce(0) { ($0 << 8) | UInt64($1) } }
    }
}

extension Data {
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }
}

extension EtcdKeyspace {
    /// The prefix of the audit log's entries.
    var auditEntries: Data { prefix + Data("audit/".utf8) }

    /// The key of audit entry `counter`: 16 hex digits, so that key order is counter order.
    func auditEntry(_ counter: UInt64) -> Data {
        let hex = String(counter, radix: 16)
        return auditEntries + Data((String(repeating: "0", count: max(0, 16 - hex.count)) + hex).utf8)
    }

    /// The counter a key under ``auditEntries`` names, nil when it is not an entry key.
    func auditCounter(in key: Data) -> UInt64? {
        guard key.count == auditEntries.count + 16, key.starts(with: auditEntries) else { return nil }
        let digits = String(decoding: key.suffix(16), as: UTF8.self)
        guard digits.allSatisfy({ $0.isHexDigit && !$0.isUppercase }) else { return nil }
        return UInt64(digits, radix: 16)
    }

    /// The trimmed log's checkpoint.
    var auditCheckpoint: Data { prefix + Data("audit-checkpoint".utf8) }
}
#endif
