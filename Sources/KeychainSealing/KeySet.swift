import Crypto
import Foundation
import KeychainEngine

/// The keys an unlocked keychain holds, derived from its master key.
package struct KeySet: Sendable {
    /// The master key: present only while fully unlocked (needed to re-wrap on a password change).
    package var master: SymmetricKey?
    package var classKeys: [ProtectionClass: SymmetricKey]
    /// The key of the primary-key digests (HMAC-SHA256): present whenever any class key is.
    package var index: SymmetricKey {
        didSet { indexMAC = HMAC<SHA256>(key: index) }
    }
    /// An HMAC keyed with `index`, copied for each digest (keying an HMAC costs more than using it).
    package private(set) var indexMAC: HMAC<SHA256>

    package init(master: SymmetricKey) {
        self.master = master
        var keys: [ProtectionClass: SymmetricKey] = [:]
        for cls in ProtectionClass.allCases { keys[cls] = Self.derive(master, "class-\(cls.rawValue)") }
        classKeys = keys
        let index = Self.derive(master, "index")
        self.index = index
        indexMAC = HMAC<SHA256>(key: index)
    }

    package init(classKeys: [ProtectionClass: SymmetricKey], index: SymmetricKey) {
        self.master = nil
        self.classKeys = classKeys
        self.index = index
        indexMAC = HMAC<SHA256>(key: index)
    }

    private static func derive(_ master: SymmetricKey, _ info: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: master, info: Data("keystone-v1-\(info)".utf8), outputByteCount: 32)
    }

    /// A check value proving these keys belong to the keychain whose header holds `fileID`: an HMAC under the
    /// index key (present in every non-empty key set). The header stores it, so keys from the unlock cache are
    /// verified against the file before they are used.
    package func check(fileID: Data) -> Data {
        Sealing.digest(Data("keystone-keycheck-v1".utf8) + fileID, mac: indexMAC)
    }

    /// The keys that stay after locking: class C and D and the index key (Apple: locked after first unlock).
    package var afterFirstUnlock: KeySet {
        KeySet(classKeys: classKeys.filter { $0.key != .a }, index: index)
    }

    package var lockState: LockState {
        if classKeys[.a] != nil { return .unlocked }
        return .lockedAfterFirstUnlock
    }

    // MARK: Serialisation for the kernel keyring cache

    package func serialized() -> Data {
        var out = Data()
        out.append(master == nil ? 0 : 1)
        if let master { out.append(master.withUnsafeBytes { Data($0) }) }
        for cls in ProtectionClass.allCases {
            if let key = classKeys[cls] { out.append(1); out.append(key.withUnsafeBytes { Data($0) }) } else { out.append(0) }
        }
        out.append(index.withUnsafeBytes { Data($0) })
        return out
    }

    package init?(serialized data: Data) {
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

