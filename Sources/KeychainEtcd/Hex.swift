#if NIO
import Foundation

private let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

extension Sequence where Element == UInt8 {
    /// The bytes as lowercase hexadecimal, two digits each: digests in etcd keys, the rollback marks file, messages.
    ///
    /// A table lookup per nibble: `String(format: "%02x")` per byte cost about 9% of an update's CPU (the marks file
    /// writes every digest the update saw).
    var hexString: String {
        var out: [UInt8] = []
        out.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
#endif
