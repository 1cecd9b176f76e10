import Foundation

/// A compact binary form of a row's contents (attributes, secret, access control): the keychain file seals it,
/// the Secret Service storage keeps it (without the secret) beside each item.
package enum RowCodec {
    package static func canonical(_ value: AttributeValue) -> Data {
        var out = Data()
        write(value, to: &out)
        return out
    }

    package static func write(_ value: AttributeValue, to out: inout Data) {
        switch value {
        case .string(let s): out.append(1); writeBytes(Data(s.utf8), to: &out)
        case .data(let d): out.append(2); writeBytes(d, to: &out)
        case .number(let n): out.append(3); writeInt(UInt64(bitPattern: n), to: &out)
        case .bool(let b): out.append(4); out.append(b ? 1 : 0)
        case .date(let d): out.append(5); writeInt(d.timeIntervalSinceReferenceDate.bitPattern, to: &out)
        }
    }

    /// The same bytes as ``write(_:to:)-(AttributeValue,Data)``, into a byte array (digests are built this way).
    package static func write(_ value: AttributeValue, to out: inout [UInt8]) {
        func int(_ n: UInt64) { withUnsafeBytes(of: n.bigEndian) { out.append(contentsOf: $0) } }
        switch value {
        case .string(let s): out.append(1); int(UInt64(s.utf8.count)); out.append(contentsOf: s.utf8)
        case .data(let d): out.append(2); int(UInt64(d.count)); out.append(contentsOf: d)
        case .number(let n): out.append(3); int(UInt64(bitPattern: n))
        case .bool(let b): out.append(4); out.append(b ? 1 : 0)
        case .date(let d): out.append(5); int(d.timeIntervalSinceReferenceDate.bitPattern)
        }
    }

    package static func writeInt(_ n: UInt64, to out: inout Data) {
        withUnsafeBytes(of: n.bigEndian) { out.append(contentsOf: $0) }
    }

    package static func writeBytes(_ d: Data, to out: inout Data) {
        writeInt(UInt64(d.count), to: &out)
        out.append(d)
    }

    package static func encode(_ item: StoredItem) -> Data {
        // Built in a byte array (one allocation, no Data bookkeeping per append), then wrapped once.
        var out: [UInt8] = []
        out.reserveCapacity(64 + item.attributes.count * 32 + (item.secret?.count ?? 0))
        func int(_ n: UInt64) { withUnsafeBytes(of: n.bigEndian) { out.append(contentsOf: $0) } }
        out.append(1)  // codec version
        int(UInt64(item.attributes.count))
        for (key, value) in item.attributes.sorted(by: { $0.key < $1.key }) {
            int(UInt64(key.utf8.count))
            out.append(contentsOf: key.utf8)
            write(value, to: &out)
        }
        if let secret = item.secret {
            out.append(1)
            int(UInt64(secret.count))
            out.append(contentsOf: secret)
        } else {
            out.append(0)
        }
        if let ac = item.accessControl {
            out.append(1)
            int(UInt64(ac.accessibility.rawValue.utf8.count))
            out.append(contentsOf: ac.accessibility.rawValue.utf8)
            int(UInt64(ac.flags.rawValue))
        } else {
            out.append(0)
        }
        return Data(out)
    }

    package struct Reader {
        package let bytes: [UInt8]
        package var offset = 0
        package init(bytes: [UInt8], offset: Int = 0) { self.bytes = bytes; self.offset = offset }
        package mutating func byte() throws -> UInt8 {
            guard offset < bytes.count else { throw EngineError(Status.decode, "truncated row") }
            defer { offset += 1 }
            return bytes[offset]
        }
        package mutating func int() throws -> UInt64 {
            guard offset + 8 <= bytes.count else { throw EngineError(Status.decode, "truncated row") }
            var n: UInt64 = 0
            for i in 0..<8 { n = (n << 8) | UInt64(bytes[offset + i]) }
            offset += 8
            return n
        }
        package mutating func data() throws -> Data {
            let n = try int()
            guard n <= UInt64(bytes.count - offset) else { throw EngineError(Status.decode, "truncated row") }
            defer { offset += Int(n) }
            return Data(bytes[offset..<offset + Int(n)])
        }
        package mutating func string() throws -> String {
            guard let s = String(data: try data(), encoding: .utf8) else { throw EngineError(Status.decode, "bad string") }
            return s
        }
        package mutating func value() throws -> AttributeValue {
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

    package static func decode(_ data: Data, itemClass: ItemClass, rowID: Int64) throws -> StoredItem {
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
