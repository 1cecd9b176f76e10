import Crypto
import CryptoExtras
import Foundation
import KeychainEngine

/// The protection class of a row, as Apple's data-protection classes: which key seals it.
enum ProtectionClass: String, CaseIterable {
    /// `whenUnlocked`, `whenUnlockedThisDeviceOnly`, `whenPasscodeSetThisDeviceOnly`: only while unlocked.
    case a = "A"
    /// `afterFirstUnlock*`: also while locked after a first unlock.
    case c = "C"
    /// `always*`: whenever the keychain has been unlocked once in this session.
    case d = "D"

    init(_ accessibility: Accessibility) {
        switch accessibility {
        case .whenUnlocked, .whenUnlockedThisDeviceOnly, .whenPasscodeSetThisDeviceOnly: self = .a
        case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly: self = .c
        case .always, .alwaysThisDeviceOnly: self = .d
        }
    }
}

/// scrypt parameters, stored in the file's header so they can be raised later.
struct KDFParameters: Codable, Hashable {
    var rounds: Int
    var blockSize: Int
    var parallelism: Int
    var salt: Data

    /// Today's parameters: N = 2^15, r = 8, p = 1 (32 MiB, tens of milliseconds).
    static func current() -> KDFParameters {
        KDFParameters(rounds: 1 << 15, blockSize: 8, parallelism: 1, salt: randomBytes(16))
    }

    func deriveKey(_ password: String) throws -> SymmetricKey {
        try KDF.Scrypt.deriveKey(from: Data(password.utf8), salt: salt, outputByteCount: 32,
                                 rounds: rounds, blockSize: blockSize, parallelism: parallelism,
                                 maxMemory: 128 * rounds * blockSize * parallelism + 1 << 20)
    }

    /// Whether these parameters are weaker than today's: then unlocking re-wraps with new ones.
    var isOutdated: Bool { rounds < KDFParameters.current().rounds }
}

func randomBytes(_ count: Int) -> Data {
    var generator = SystemRandomNumberGenerator()
    return Data((0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
}

/// The keys an unlocked keychain holds, derived from its master key.
struct KeySet {
    /// The master key: present only while fully unlocked (needed to re-wrap on a password change).
    var master: SymmetricKey?
    var classKeys: [ProtectionClass: SymmetricKey]
    /// The key of the primary-key digests (HMAC-SHA256): present whenever any class key is.
    var index: SymmetricKey {
        didSet { indexMAC = HMAC<SHA256>(key: index) }
    }
    /// An HMAC keyed with `index`, copied for each digest (keying an HMAC costs more than using it).
    private(set) var indexMAC: HMAC<SHA256>

    init(master: SymmetricKey) {
        self.master = master
        var keys: [ProtectionClass: SymmetricKey] = [:]
        for cls in ProtectionClass.allCases { keys[cls] = Self.derive(master, "class-\(cls.rawValue)") }
        classKeys = keys
        let index = Self.derive(master, "index")
        self.index = index
        indexMAC = HMAC<SHA256>(key: index)
    }

    init(classKeys: [ProtectionClass: SymmetricKey], index: SymmetricKey) {
        self.master = nil
        self.classKeys = classKeys
        self.index = index
        indexMAC = HMAC<SHA256>(key: index)
    }

    private static func derive(_ master: SymmetricKey, _ info: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: master, info: Data("keystone-v1-\(info)".utf8), outputByteCount: 32)
    }

    /// The keys that stay after locking: class C and D and the index key (Apple: locked after first unlock).
    var afterFirstUnlock: KeySet {
        KeySet(classKeys: classKeys.filter { $0.key != .a }, index: index)
    }

    var lockState: LockState {
        if classKeys[.a] != nil { return .unlocked }
        return .lockedAfterFirstUnlock
    }

    // MARK: Serialisation for the kernel keyring cache

    func serialized() -> Data {
        var out = Data()
        out.append(master == nil ? 0 : 1)
        if let master { out.append(master.withUnsafeBytes { Data($0) }) }
        for cls in ProtectionClass.allCases {
            if let key = classKeys[cls] { out.append(1); out.append(key.withUnsafeBytes { Data($0) }) } else { out.append(0) }
        }
        out.append(index.withUnsafeBytes { Data($0) })
        return out
    }

    init?(serialized data: Data) {
        var bytes = [UInt8](data)[...]
        func take(_ n: Int) -> Data? {
            guard bytes.count >= n else { return nil }
            defer { bytes = bytes.dropFirst(n) }
            return Data(bytes.prefix(n))
        }
        guard let flag = take(1)?.first else { return nil }
        var master: SymmetricKey?
        if flag == 1 { guard let m = take(32) else { return nil }; master = SymmetricKey(data: m) }
        var keys: [ProtectionClass: SymmetricKey] = [:]
        for cls in ProtectionClass.allCases {
            guard let present = take(1)?.first else { return nil }
            if present == 1 { guard let k = take(32) else { return nil }; keys[cls] = SymmetricKey(data: k) }
        }
        guard let index = take(32), bytes.isEmpty else { return nil }
        self.master = master
        self.classKeys = keys
        self.index = SymmetricKey(data: index)
        indexMAC = HMAC<SHA256>(key: self.index)
    }
}

/// AES-GCM sealing and HMAC digests.
enum Sealing {
    static func seal(_ plaintext: Data, key: SymmetricKey, aad: Data) throws -> Data {
        try AES.GCM.seal(plaintext, using: key, authenticating: aad).combined!
    }

    static func open(_ combined: Data, key: SymmetricKey, aad: Data) throws -> Data {
        try AES.GCM.open(AES.GCM.SealedBox(combined: combined), using: key, authenticating: aad)
    }

    static func digest(_ bytes: Data, mac template: HMAC<SHA256>) -> Data {
        var mac = template
        mac.update(data: bytes)
        return Data(mac.finalize())
    }
}

/// A compact binary form of a row's contents (attributes, secret, access control).
enum RowCodec {
    static func canonical(_ value: AttributeValue) -> Data {
        var out = Data()
        write(value, to: &out)
        return out
    }

    static func write(_ value: AttributeValue, to out: inout Data) {
        switch value {
        case .string(let s): out.append(1); writeBytes(Data(s.utf8), to: &out)
        case .data(let d): out.append(2); writeBytes(d, to: &out)
        case .number(let n): out.append(3); writeInt(UInt64(bitPattern: n), to: &out)
        case .bool(let b): out.append(4); out.append(b ? 1 : 0)
        case .date(let d): out.append(5); writeInt(d.timeIntervalSinceReferenceDate.bitPattern, to: &out)
        }
    }

    static func writeInt(_ n: UInt64, to out: inout Data) {
        withUnsafeBytes(of: n.bigEndian) { out.append(contentsOf: $0) }
    }

    static func writeBytes(_ d: Data, to out: inout Data) {
        writeInt(UInt64(d.count), to: &out)
        out.append(d)
    }

    static func encode(_ item: StoredItem) -> Data {
        var out = Data()
        out.append(1)  // codec version
        writeInt(UInt64(item.attributes.count), to: &out)
        for (key, value) in item.attributes.sorted(by: { $0.key < $1.key }) {
            writeBytes(Data(key.utf8), to: &out)
            write(value, to: &out)
        }
        if let secret = item.secret { out.append(1); writeBytes(secret, to: &out) } else { out.append(0) }
        if let ac = item.accessControl {
            out.append(1)
            writeBytes(Data(ac.accessibility.rawValue.utf8), to: &out)
            writeInt(UInt64(ac.flags.rawValue), to: &out)
        } else {
            out.append(0)
        }
        return out
    }

    struct Reader {
        let bytes: [UInt8]
        var offset = 0
        mutating func byte() throws -> UInt8 {
            guard offset < bytes.count else { throw EngineError(Status.decode, "truncated row") }
            defer { offset += 1 }
            return bytes[offset]
        }
        mutating func int() throws -> UInt64 {
            guard offset + 8 <= bytes.count else { throw EngineError(Status.decode, "truncated row") }
            var n: UInt64 = 0
            for i in 0..<8 { n = (n << 8) | UInt64(bytes[offset + i]) }
            offset += 8
            return n
        }
        mutating func data() throws -> Data {
            let n = try int()
            guard n <= UInt64(bytes.count - offset) else { throw EngineError(Status.decode, "truncated row") }
            defer { offset += Int(n) }
            return Data(bytes[offset..<offset + Int(n)])
        }
        mutating func string() throws -> String {
            guard let s = String(data: try data(), encoding: .utf8) else { throw EngineError(Status.decode, "bad string") }
            return s
        }
        mutating func value() throws -> AttributeValue {
            switch try byte() {
            case 1: return .string(try string())
            case 2: return .data(try data())
            case 3: return .number(Int64(bitPattern: try int()))
            case 4: return .bool(try byte() != 0)
            case 5: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try int())))
            default: throw EngineError(Status.decode, "unknown value type")
            }
        }
    }

    static func decode(_ data: Data, itemClass: ItemClass, rowID: Int64) throws -> StoredItem {
        var r = Reader(bytes: [UInt8](data))
        guard try r.byte() == 1 else { throw EngineError(Status.decode, "unknown row format") }
        var attributes: [String: AttributeValue] = [:]
        let count = try r.int()
        guard count < 10_000 else { throw EngineError(Status.decode, "bad row") }
        for _ in 0..<count {
            let key = try r.string()
            attributes[key] = try r.value()
        }
        let secret: Data? = try r.byte() == 1 ? try r.data() : nil
        var accessControl: AccessControl?
        if try r.byte() == 1 {
            guard let accessibility = Accessibility(rawValue: try r.string()) else { throw EngineError(Status.decode, "bad accessibility") }
            accessControl = AccessControl(accessibility: accessibility, flags: AccessControlFlags(rawValue: UInt(try r.int())))
        }
        return StoredItem(itemClass: itemClass, rowID: rowID, attributes: attributes, secret: secret, accessControl: accessControl)
    }
}
