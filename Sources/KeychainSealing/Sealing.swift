import Crypto
import Foundation
import KeychainEngine

/// The protection class of a row, as Apple's data-protection classes: which key seals it.
package enum ProtectionClass: String, CaseIterable, Sendable {
    /// `whenUnlocked`, `whenUnlockedThisDeviceOnly`, `whenPasscodeSetThisDeviceOnly`: only while unlocked.
    case a = "A"
    /// `afterFirstUnlock*`: also while locked after a first unlock.
    case c = "C"
    /// `always*`: whenever the keychain has been unlocked once in this session (as C: not before the first unlock).
    case d = "D"

    package init(_ accessibility: Accessibility) {
        switch accessibility {
        case .whenUnlocked, .whenUnlockedThisDeviceOnly, .whenPasscodeSetThisDeviceOnly: self = .a
        case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly: self = .c
        case .always, .alwaysThisDeviceOnly: self = .d
        }
    }
}

/// AES-GCM sealing and HMAC digests. Failures are `EngineError`s, never swift-crypto's errors.
package enum Sealing {
    /// AES-GCM with a random nonce: nonce, ciphertext and tag.
    ///
    /// - Throws: `errSecInternalComponent` when swift-crypto refuses (it never does for a 256-bit key).
    package static func seal(_ plaintext: Data, key: SymmetricKey, aad: Data) throws(EngineError) -> Data {
        try seal(plaintext, key: key, nonce: nil, aad: aad)
    }

    /// AES-GCM with `nonce` (12 bytes from the system's CSPRNG, ``SystemRandom``), or a random one when nil: nonce,
    /// ciphertext and tag, as ``seal(_:key:aad:)``.
    ///
    /// - Important: A nonce must never be used twice with one key: pass only fresh random bytes.
    /// - Throws: `errSecInternalComponent` when swift-crypto refuses (a nonce that is not 12 bytes).
    package static func seal<Plaintext: DataProtocol>(_ plaintext: Plaintext, key: SymmetricKey, nonce: AES.GCM.Nonce?,
                                                      aad: Data) throws(EngineError) -> Data {
        do {
            return try AES.GCM.seal(plaintext, using: key, nonce: nonce, authenticating: aad).combined!
        } catch {
            throw EngineError(.internalComponent, "AES-GCM sealing failed (\(type(of: error)))")
        }
    }

    /// Opens what ``seal(_:key:aad:)`` made.
    ///
    /// - Throws: `errSecDecode` when the bytes are not a sealed box, or fail authentication under `key` and `aad`.
    package static func open(_ combined: Data, key: SymmetricKey, aad: Data) throws(EngineError) -> Data {
        do {
            return try AES.GCM.open(AES.GCM.SealedBox(combined: combined), using: key, authenticating: aad)
        } catch {
            throw EngineError(.decode, "the sealed data failed its authentication")
        }
    }

    package static func digest<Bytes: DataProtocol>(_ bytes: Bytes, mac template: HMAC<SHA256>) -> Data {
        var mac = template
        mac.update(data: bytes)
        return Data(mac.finalize())
    }
}

