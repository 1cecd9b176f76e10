import Foundation

/// Row ids in the Secret Service: Keystone's items carry theirs; other programs' items get one from their object path.
enum RowIdentity {
    /// Bit 62 marks ids derived from an object path.
    static let foreignBit: Int64 = 1 << 62

    /// A new row id: microseconds since 1970 shifted left by 10, plus 10 random bits. Increasing with time (so
    /// rows list in creation order, as in Apple's keychain), unique across processes without a counter, below
    /// bit 62 until the year 2116.
    static func newRowID() -> Int64 {
        let microseconds = Int64(Date().timeIntervalSince1970 * 1_000_000)
        return (microseconds << 10 | Int64.random(in: 0..<1024)) & (foreignBit - 1)
    }

    static func isForeign(_ rowID: Int64) -> Bool { rowID & foreignBit != 0 }

    /// The row id of another program's item: FNV-1a of its object path, with bit 62 set.
    static func foreignRowID(path: String) -> Int64 {
        Int64(bitPattern: fnv1a(path) & UInt64(foreignBit - 1)) | foreignBit
    }
}

/// FNV-1a, 64 bits: stable names for object paths and lock files (not a cryptographic digest).
func fnv1a(_ text: String) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in text.utf8 {
        hash ^= UInt64(byte)
        hash = hash &* 0x100_0000_01b3
    }
    return hash
}
