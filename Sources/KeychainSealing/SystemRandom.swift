import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Random bytes from the system's CSPRNG in as few system calls as possible.
///
/// `getentropy(3)` (the kernel's `getrandom(2)` on Linux, up to 256 bytes a call) instead of the standard library's
/// `SystemRandomNumberGenerator`, which makes one system call per 8 bytes: sealing a row takes 56 random bytes.
/// Both read the same kernel generator.
package enum SystemRandom {
    /// `count` bytes from the system's CSPRNG.
    ///
    /// Decision: where `getentropy` fails (a kernel without `getrandom(2)`, a seccomp filter refusing it), the bytes
    /// come from `SystemRandomNumberGenerator`, the standard library's CSPRNG (it traps when it has none): never
    /// from a weaker source, and never an error to handle for a call that cannot do without randomness.
    package static func bytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let filled = bytes.withUnsafeMutableBytes { buffer -> Bool in
            var offset = 0
            while offset < buffer.count {
                let chunk = min(256, buffer.count - offset)
                guard getentropy(buffer.baseAddress! + offset, chunk) == 0 else { return false }
                offset += chunk
            }
            return true
        }
        if !filled {
            var generator = SystemRandomNumberGenerator()
            for index in bytes.indices { bytes[index] = UInt8.random(in: .min ... .max, using: &generator) }
        }
        return bytes
    }

    /// Overwrites `bytes` with zeros (key material that is no longer needed).
    package static func zero(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            // A store through a pointer into a buffer still alive: not a dead store the optimizer may drop.
            _ = memset(base, 0, buffer.count)
        }
    }
}
