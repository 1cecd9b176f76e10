#if !canImport(Darwin)
import Foundation

/// The bytes the SecItem functions hand back (`kSecReturnData`, `kSecReturnPersistentRef`, `v_Data` in a result's
/// dictionary): an `NSData`, so `result as? Data`, `as? NSData` and `as! CFData` work as on Apple platforms, that also
/// offers its bytes as one contiguous buffer (`ContiguousBytes`).
///
/// Why: on Linux, Foundation bridges an `NSData` to `Data` (`result as? Data`) with `Data`'s generic initializer,
/// which copies byte by byte through `NSData`'s collection interface (about 100 ns a byte, measured: 4 µs for a 32-byte
/// secret, two thirds of a whole `SecItemCopyMatching`) unless the object is `ContiguousBytes`: then it is one copy.
/// The object is immutable; its bytes are its own copy, freed with it.
final class SecItemData: NSData, ContiguousBytes {
    private let buffer: UnsafeMutableRawBufferPointer

    /// A copy of `data`.
    init(copying data: Data) {
        // One byte at least, so `bytes` is never null (as NSData's own empty bytes are not).
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Swift.max(data.count, 1), alignment: 16)
        data.withUnsafeBytes { source in
            if let base = source.baseAddress, source.count > 0 { buffer.baseAddress!.copyMemory(from: base, byteCount: source.count) }
        }
        self.buffer = UnsafeMutableRawBufferPointer(start: buffer.baseAddress, count: data.count)
        super.init()
    }

    /// Never decoded: SecItem results are made, not archived (an archived one decodes as a plain `NSData`).
    required init?(coder: NSCoder) { return nil }

    deinit { buffer.baseAddress.map { $0.deallocate() } }

    override var length: Int { buffer.count }
    override var bytes: UnsafeRawPointer { UnsafeRawPointer(buffer.baseAddress!) }

    func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(buffer))
    }
}
#endif
