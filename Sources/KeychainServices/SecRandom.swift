#if !canImport(Darwin)
import Foundation
#if !canImport(Darwin)
import CSystemRandom
#endif

// SecRandom.h: cryptographically secure random bytes from the system's generator.

/// A random number generator (`SecRandomRef`); the only one is ``kSecRandomDefault``, which is nil.
public typealias SecRandomRef = OpaquePointer

/// The default random number generator: nil, as on Apple platforms.
nonisolated(unsafe) public let kSecRandomDefault: SecRandomRef? = nil

/// Fills `bytes` with `count` cryptographically secure random bytes.
///
/// The bytes come from the kernel's CSPRNG through `getrandom(2)` (no flags: it blocks only until the
/// generator is seeded at boot); short reads and `EINTR` are retried until all `count` bytes are written.
///
/// - Parameters:
///   - rnd: ``kSecRandomDefault`` (nil); any other generator is `errSecParam`.
///   - count: The number of bytes to write; 0 writes nothing and succeeds.
///   - bytes: At least `count` writable bytes.
/// - Returns: `errSecSuccess`, or a non-zero status after which the buffer must not be used:
///   `errSecParam` for another generator or a negative `count`, `errSecUnimplemented` where the system
///   has no `getrandom(2)` (`ENOSYS`), `errSecInternalComponent` for any other failure of the system call.
public func SecRandomCopyBytes(_ rnd: SecRandomRef?, _ count: Int, _ bytes: UnsafeMutableRawPointer) -> Int32 {
    guard rnd == nil, count >= 0 else { return errSecParam }
    #if !canImport(Darwin)
    var written = 0
    while written < count {
        let n = csystemrandom_getrandom(bytes + written, count - written)
        if n > 0 {
            written += n
        } else if n < 0, errno == EINTR {
            continue
        } else {
            return n < 0 && errno == ENOSYS ? errSecUnimplemented : errSecInternalComponent
        }
    }
    return errSecSuccess
    #else
    // Platforms without getrandom(2): the standard library's system generator (also a CSPRNG).
    var generator = SystemRandomNumberGenerator()
    var written = 0
    while written < count {
        var word = generator.next()
        let n = min(MemoryLayout<UInt64>.size, count - written)
        withUnsafeBytes(of: &word) { (bytes + written).copyMemory(from: $0.baseAddress!, byteCount: n) }
        written += n
    }
    return errSecSuccess
    #endif
}
#endif
