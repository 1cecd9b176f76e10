import Crypto
import CryptoExtras
import Foundation
import KeychainEngine

/// scrypt parameters, stored in the file's header so they can be raised later.
///
/// The header is not secret and not authenticated before the password is known, so every value read from a
/// file is checked against ``limits`` before any arithmetic: a planted or damaged header is
/// `errSecInvalidKeychain`, never a trap, an overflow or a multi-gigabyte allocation.
package struct KDFParameters: Codable, Hashable, Sendable {
    package var rounds: Int
    package var blockSize: Int
    package var parallelism: Int
    package var salt: Data

    /// What a header may hold: N a power of two in 2^10…2^22, r in 1…32, p in 1…16, a salt of 16…64 bytes,
    /// and at most 256 MiB of scrypt memory (128·N·r·p; today's parameters use 32 MiB), so an edited header
    /// cannot make an unlock exhaust memory.
    package enum Limits {
        package static let rounds = (1 << 10)...(1 << 22)
        package static let blockSize = 1...32
        package static let parallelism = 1...16
        package static let saltLength = 16...64
        package static let memory = 1 << 28
    }

    /// Today's parameters: N = 2^15, r = 8, p = 1 (32 MiB, tens of milliseconds).
    package static func current() -> KDFParameters {
        KDFParameters(rounds: 1 << 15, blockSize: 8, parallelism: 1, salt: randomBytes(16))
    }

    /// Checks every value against ``Limits``.
    ///
    /// - Throws: `EngineError` with `errSecInvalidKeychain` naming the field out of range.
    package func validate() throws(EngineError) {
        func bad(_ what: String) -> EngineError {
            EngineError(Status.invalidKeychain, "the keychain header's key-derivation \(what) is out of range")
        }
        guard Limits.rounds.contains(rounds), rounds.nonzeroBitCount == 1 else { throw bad("cost (N = \(rounds))") }
        guard Limits.blockSize.contains(blockSize) else { throw bad("block size (r = \(blockSize))") }
        guard Limits.parallelism.contains(parallelism) else { throw bad("parallelism (p = \(parallelism))") }
        guard Limits.saltLength.contains(salt.count) else { throw bad("salt length (\(salt.count) bytes)") }
        // The ranges above keep this product far from overflow: at most 2^7 · 2^22 · 2^5 · 2^4 = 2^38.
        guard 128 * rounds * blockSize * parallelism <= Limits.memory else { throw bad("memory (128·N·r·p over 256 MiB)") }
    }

    /// Derives the key that wraps the master key.
    ///
    /// - Throws: `errSecInvalidKeychain` for parameters out of range; `errSecAllocate` when scrypt fails.
    package func deriveKey(_ password: String) throws(EngineError) -> SymmetricKey {
        try validate()
        do {
            return try KDF.Scrypt.deriveKey(from: Data(password.utf8), salt: salt, outputByteCount: 32,
                                            rounds: rounds, blockSize: blockSize, parallelism: parallelism,
                                            maxMemory: 128 * rounds * blockSize * parallelism + (1 << 20))
        } catch {
            throw EngineError(Status.allocate, "key derivation failed (\(type(of: error)))")
        }
    }

    /// Whether these parameters are weaker than today's: then unlocking re-wraps with new ones.
    package var isOutdated: Bool { rounds < KDFParameters.current().rounds }
}

package func randomBytes(_ count: Int) -> Data {
    Data(SystemRandom.bytes(count))
}
