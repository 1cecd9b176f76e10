#if !canImport(Darwin)
import Foundation
import KeychainEngine

/// The bytes of a `SecureEnclave` key's `dataRepresentation` on Linux: the Secure Enclave token's wrapped key (on a
/// TPM, the private part encrypted by the TPM itself) in a Keystone envelope that also records what kind of key it is
/// and the access control it was made with, so that `init(dataRepresentation:)` restores the requirement.
///
/// Format, version 1 (integers big-endian, nothing after the last field):
///
/// | bytes | field |
/// |---|---|
/// | 4 | magic `KSSE` (Keystone Secure Enclave) |
/// | 1 | version, 1 |
/// | 1 | kind: 1 signing, 2 key agreement |
/// | 1 + n | accessibility: n (1...8), then its `kSecAttrAccessible…` raw value (`cku`, `aku`…), ASCII |
/// | 8 | access-control flags (`SecAccessControlCreateFlags` raw value) |
/// | 2 + n | biometry domain state recorded for `.biometryCurrentSet` (n ≤ 1024; 0: none recorded) |
/// | 4 + n | the token's data representation (1 ≤ n ≤ 1 MiB) |
///
/// Version 2 (issue 31), written only for keys whose person flags the TPM enforces through a released secret (see
/// `SecureEnclaveKeySecrets` in KeychainServices), so every other key keeps version 1 and older Keystone versions
/// still read it: version 1's fields with version 2, then
///
/// | bytes | field |
/// |---|---|
/// | 1 + n | the keychain item holding the key's TPM authorization secret: its account (n = 40, lowercase hex of the key's application label), service `Keystone TPM key authorization` |
///
/// The envelope names the secret's item, never the secret. Older Keystone versions refuse version 2 ("update
/// Keystone"), which is right: they would send the TPM no secret.
///
/// Decoding never traps: anything else (another magic, a newer version, a length past the end, trailing bytes, an
/// unknown kind, accessibility or flag) is `errSecDecode`. The envelope holds no secret: the token's blob is useless
/// without the token that made it.
///
/// - Important: The envelope is not authenticated. Whoever holds the bytes can rewrite the recorded access control
///   (the token's part is protected by the token; the requirement is not): see `SecureEnclave`'s documentation.
struct KeyEnvelope: Sendable, Hashable {
    enum Kind: UInt8, Sendable {
        case signing = 1
        case keyAgreement = 2

        /// The token usage of keys of this kind.
        var usage: SecureEnclaveKeyUsage {
            switch self {
            case .signing: .signing
            case .keyAgreement: .keyAgreement
            }
        }

        /// The CryptoKit type that makes keys of this kind, for messages.
        var typeName: String {
            switch self {
            case .signing: "SecureEnclave.P256.Signing.PrivateKey"
            case .keyAgreement: "SecureEnclave.P256.KeyAgreement.PrivateKey"
            }
        }
    }

    static let magic: [UInt8] = Array("KSSE".utf8)
    static let currentVersion: UInt8 = 1
    /// The version of envelopes that name their secret's keychain item.
    static let secretVersion: UInt8 = 2
    static let maximumDomainStateLength = 1024
    static let maximumBlobLength = 1 << 20

    /// Every flag `SecAccessControlCreateFlags` defines; other bits are refused.
    static let knownFlags: AccessControlFlags = [
        .userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .watch, .or, .and, .privateKeyUsage,
        .applicationPassword,
    ]

    var kind: Kind
    var accessControl: AccessControl
    /// The authenticator's biometry domain state when a `.biometryCurrentSet` key was made (nil: none recorded).
    var biometryDomainState: Data?
    /// The token's data representation of the key.
    var tokenBlob: Data
    /// The account of the keychain item holding the key's TPM authorization secret (version 2); nil for version 1.
    var secretAccount: String?

    /// The envelope's bytes.
    func encoded() -> Data {
        var out = Data(Self.magic)
        out.append(secretAccount == nil ? Self.currentVersion : Self.secretVersion)
        out.append(kind.rawValue)
        let accessibility = Array(accessControl.accessibility.rawValue.utf8)
        out.append(UInt8(accessibility.count))
        out.append(contentsOf: accessibility)
        Self.append(UInt64(accessControl.flags.rawValue), bytes: 8, to: &out)
        let state = biometryDomainState ?? Data()
        Self.append(UInt64(state.count), bytes: 2, to: &out)
        out.append(state)
        Self.append(UInt64(tokenBlob.count), bytes: 4, to: &out)
        out.append(tokenBlob)
        if let secretAccount {
            let account = Array(secretAccount.utf8)
            out.append(UInt8(account.count))
            out.append(contentsOf: account)
        }
        return out
    }

    /// Reads an envelope.
    /// - Throws: `errSecDecode` when `data` is not a version-1 envelope (see the type's format).
    static func decode(_ data: Data) throws(SecureEnclaveError) -> KeyEnvelope {
        var reader = Reader(bytes: [UInt8](data))
        guard let magic = reader.take(4), magic == Self.magic else {
            throw SecureEnclaveError(status: Status.decode,
                                     reason: "the bytes are not a Secure Enclave key's dataRepresentation (no Keystone envelope)")
        }
        guard let version = reader.take(1)?.first else { throw truncated }
        guard version == currentVersion || version == secretVersion else {
            throw SecureEnclaveError(status: Status.decode,
                                     reason: "the dataRepresentation has format version \(version), which this Keystone does not read (it reads versions \(currentVersion) and \(secretVersion)): update Keystone")
        }
        guard let kindByte = reader.take(1)?.first else { throw truncated }
        guard let kind = Kind(rawValue: kindByte) else {
            throw SecureEnclaveError(status: Status.decode, reason: "the dataRepresentation names an unknown kind of key (\(kindByte))")
        }
        guard let accessibilityLength = reader.take(1)?.first else { throw truncated }
        guard (1...8).contains(accessibilityLength) else {
            throw SecureEnclaveError(status: Status.decode, reason: "the dataRepresentation's accessibility is malformed")
        }
        guard let accessibilityBytes = reader.take(Int(accessibilityLength)) else { throw truncated }
        guard let raw = String(bytes: accessibilityBytes, encoding: .ascii), let accessibility = Accessibility(rawValue: raw) else {
            throw SecureEnclaveError(status: Status.decode, reason: "the dataRepresentation names an unknown accessibility")
        }
        guard let flagBits = reader.integer(bytes: 8) else { throw truncated }
        let flags = AccessControlFlags(rawValue: UInt(flagBits))
        guard UInt64(flags.rawValue) == flagBits, flags.isSubset(of: knownFlags) else {
            throw SecureEnclaveError(status: Status.decode, reason: "the dataRepresentation's access-control flags are unknown (0x\(String(flagBits, radix: 16)))")
        }
        guard let stateLength = reader.integer(bytes: 2) else { throw truncated }
        guard stateLength <= UInt64(maximumDomainStateLength) else {
            throw SecureEnclaveError(status: Status.decode, reason: "the dataRepresentation's biometry state is malformed")
        }
        guard let state = reader.take(Int(stateLength)) else { throw truncated }
        guard let blobLength = reader.integer(bytes: 4) else { throw truncated }
        guard blobLength >= 1, blobLength <= UInt64(maximumBlobLength) else {
            throw SecureEnclaveError(status: Status.decode, reason: "the dataRepresentation's key is malformed (\(blobLength) bytes)")
        }
        guard let blob = reader.take(Int(blobLength)) else { throw truncated }
        var account: String?
        if version == secretVersion {
            guard let accountLength = reader.take(1)?.first else { throw truncated }
            guard let accountBytes = reader.take(Int(accountLength)) else { throw truncated }
            guard accountLength == 40, accountBytes.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
                throw SecureEnclaveError(status: Status.decode, reason: "the dataRepresentation's authorization secret item is malformed")
            }
            account = String(decoding: accountBytes, as: UTF8.self)
        }
        guard reader.isAtEnd else {
            throw SecureEnclaveError(status: Status.decode, reason: "the dataRepresentation has \(reader.remaining) unexpected bytes after the key")
        }
        return KeyEnvelope(kind: kind, accessControl: AccessControl(accessibility: accessibility, flags: flags),
                           biometryDomainState: state.isEmpty ? nil : Data(state), tokenBlob: Data(blob),
                           secretAccount: account)
    }

    private static var truncated: SecureEnclaveError {
        SecureEnclaveError(status: Status.decode, reason: "the dataRepresentation is truncated")
    }

    private static func append(_ value: UInt64, bytes: Int, to out: inout Data) {
        for index in stride(from: bytes - 1, through: 0, by: -1) {
            out.append(UInt8(truncatingIfNeeded: value >> (UInt64(index) * 8)))
        }
    }

    /// Reads fields front to back; every read is bounds-checked and returns nil past the end.
    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        var remaining: Int { bytes.count - offset }
        var isAtEnd: Bool { offset == bytes.count }

        mutating func take(_ count: Int) -> [UInt8]? {
            guard count >= 0, count <= remaining else { return nil }
            defer { offset += count }
            return Array(bytes[offset..<(offset + count)])
        }

        mutating func integer(bytes count: Int) -> UInt64? {
            guard let field = take(count) else { return nil }
            return field.reduce(0) { ($0 << 8) | UInt64($1) }
        }
    }
}
#endif
