#if os(Linux)
import CTPM
import Foundation
import SwiftASN1

// "TSS2 PRIVATE KEY": the ASN.1 TPM key file format of tpm2-openssl, tpm2-tss-engine, the Linux kernel's trusted keys
// and go-tpm-keyfiles (draft-bottomley-tpm2-keys):
//
//     TPMKey ::= SEQUENCE {
//         type        OBJECT IDENTIFIER,            -- 2.23.133.10.1.3: a loadable key
//         emptyAuth   [0] EXPLICIT BOOLEAN OPTIONAL, -- TRUE: the key has no authorization value
//         policy      [1] EXPLICIT SEQUENCE OF TPMPolicy OPTIONAL,
//         secret      [2] EXPLICIT OCTET STRING OPTIONAL,
//         authPolicy  [3] EXPLICIT SEQUENCE OF TPMAuthPolicy OPTIONAL,
//         description [4] EXPLICIT UTF8String OPTIONAL,
//         rsaParent   [5] EXPLICIT BOOLEAN OPTIONAL,
//         parent      INTEGER,                      -- 0x40000001: the owner hierarchy's standard primary key
//         pubkey      OCTET STRING,                 -- TPM2B_PUBLIC, marshalled
//         privkey     OCTET STRING                  -- TPM2B_PRIVATE, marshalled
//     }
//
// Parent: Keystone's keys are children of the owner hierarchy's primary made with the TCG ECC P-256 storage template
// (AES-128-CFB, SHA-256, noDA, empty unique), which is the primary tpm2-openssl derives for parent 0x40000001: the
// same key, so no change of parent was needed (checked: a key tpm2-openssl generated loads under Keystone's primary,
// and a Keystone key signs through tpm2-openssl, see the TSS2 interop tests).

/// Export and import in the "TSS2 PRIVATE KEY" format.
extension TPMKey {
    /// The PEM type label of TSS2 keys.
    public static let tss2PEMType = "TSS2 PRIVATE KEY"
    /// The key type OID of a loadable key (`id-loadablekey`).
    static let loadableKeyOID: ASN1ObjectIdentifier = [2, 23, 133, 10, 1, 3]
    /// The owner hierarchy (`TPM_RH_OWNER`): the parent of every Keystone key.
    public static let ownerHierarchyParent: UInt32 = 0x4000_0001

    /// The key as a "TSS2 PRIVATE KEY" PEM document: the format tpm2-openssl (`openssl pkeyutl -provider tpm2
    /// -inkey key.pem`), the Linux kernel's trusted keys and go-tpm-keyfiles read. Parent `0x40000001`; `emptyAuth`
    /// TRUE, or FALSE when the key needs its PIN (``needsAuthorization``), which those tools then ask for
    /// (`openssl pkeyutl -passin pass:PIN`).
    ///
    /// - Important: The PEM holds the TPM-wrapped private part, as ``dataRepresentation`` does: useless on any other
    ///   TPM, usable by whoever can open this TPM (with the PIN, for a key that needs one). Treat it as the key.
    /// - Throws: ``TPMError`` with ``TPMError/Kind/malformedBlob`` when the data representation is damaged.
    public func tss2PEMRepresentation() throws(TPMError) -> String {
        var error = ks_tpm_error()
        var pub: UnsafeMutablePointer<UInt8>?
        var priv: UnsafeMutablePointer<UInt8>?
        var pubLength = 0
        var privLength = 0
        var needsAuth: Int32 = 0
        let status = dataRepresentation.withUnsafeBytes { blob in
            ks_tpm_blob_parts(blob.baseAddress?.assumingMemoryBound(to: UInt8.self), blob.count, &pub, &pubLength, &priv,
                              &privLength, &needsAuth, &error)
        }
        guard status == 0, let pub, let priv else { throw TPMError(error) }
        let publicBytes = Array(UnsafeBufferPointer(start: pub, count: pubLength))
        var privateBytes = Array(UnsafeBufferPointer(start: priv, count: privLength))
        memset(priv, 0, privLength)
        ks_tpm_free(pub)
        ks_tpm_free(priv)
        defer { for index in privateBytes.indices { privateBytes[index] = 0 } }
        do {
            var serializer = DER.Serializer()
            try serializer.appendConstructedNode(identifier: .sequence) { coder in
                try coder.serialize(Self.loadableKeyOID)
                // Always written, FALSE too: tpm2-openssl reads an absent emptyAuth as an empty authorization value
                // (it then never asks for the PIN and the TPM refuses the key), though the format says absent means
                // "ask"; this reader keeps the format's meaning.
                try coder.serialize(explicitlyTaggedWithTagNumber: 0, tagClass: .contextSpecific) { try $0.serialize(needsAuth == 0) }
                try coder.serialize(Int(Self.ownerHierarchyParent))
                try coder.serialize(ASN1OctetString(contentBytes: publicBytes[...]))
                try coder.serialize(ASN1OctetString(contentBytes: privateBytes[...]))
            }
            return PEMDocument(type: Self.tss2PEMType, derBytes: serializer.serializedBytes).pemString
        } catch {
            throw TPMError(kind: .other, message: "encoding the TSS2 key failed: \(error)")
        }
    }

    /// Reads a "TSS2 PRIVATE KEY" PEM document (made by tpm2-openssl's `openssl genpkey -provider tpm2`, go-tpm-keyfiles,
    /// or ``tss2PEMRepresentation()``) as a Keystone TPM key, without a TPM (``TPMDevice/checkKey(_:)`` checks that a
    /// TPM can load it). A key without `emptyAuth` TRUE needs its authorization value (``needsAuthorization``).
    ///
    /// - Throws: ``TPMError``: ``TPMError/Kind/malformedBlob`` when the text is not a TSS2 key PEM;
    ///   ``TPMError/Kind/unsupported`` for a key Keystone cannot use: another key type (an importable or sealed key),
    ///   a policy (`policy`, `authPolicy`, `secret`), a parent other than the owner hierarchy (`0x40000001`), an RSA
    ///   parent, not a P-256 key, or a signing scheme other than ECDSA with SHA-256.
    public init(tss2PEMRepresentation pem: String) throws(TPMError) {
        let document: PEMDocument
        do {
            document = try PEMDocument(pemString: pem)
        } catch {
            throw TPMError(kind: .malformedBlob, message: "not a PEM document (\(error))")
        }
        guard document.discriminator == Self.tss2PEMType else {
            throw TPMError(kind: .malformedBlob,
                           message: "a PEM \"\(document.discriminator)\", not a \"\(Self.tss2PEMType)\"")
        }
        try self.init(tss2DER: document.derBytes)
    }

    /// Reads a TSS2 key from its DER bytes (see ``init(tss2PEMRepresentation:)``).
    public init(tss2DER der: [UInt8]) throws(TPMError) {
        let parts: (emptyAuth: Bool, pub: [UInt8], priv: [UInt8])
        do {
            parts = try Self.parseTSS2(der)
        } catch let error as TPMError {
            throw error
        } catch {
            throw TPMError(kind: .malformedBlob, message: "the TSS2 key's ASN.1 is malformed (\(error))")
        }
        var error = ks_tpm_error()
        var blob: UnsafeMutablePointer<UInt8>?
        var length = 0
        var x963 = [UInt8](repeating: 0, count: 65)
        var usage: Int32 = 0
        var privateBytes = parts.priv
        defer { for index in privateBytes.indices { privateBytes[index] = 0 } }
        let status = ks_tpm_blob_from_parts(parts.pub, parts.pub.count, privateBytes, privateBytes.count,
                                            parts.emptyAuth ? 0 : 1, &blob, &length, &x963, &usage, &error)
        guard status == 0, let blob else { throw TPMError(error) }
        let data = Data(bytes: blob, count: length)
        ks_tpm_free(blob)
        try self.init(usage: TPMKeyUsage(rawValue: usage) ?? .general, dataRepresentation: data, x963: Data(x963),
                      needsAuthorization: !parts.emptyAuth)
    }

    private static func parseTSS2(_ der: [UInt8]) throws -> (emptyAuth: Bool, pub: [UInt8], priv: [UInt8]) {
        let root = try DER.parse(der)
        return try DER.sequence(root, identifier: .sequence) { nodes in
            let type = try ASN1ObjectIdentifier(derEncoded: &nodes)
            guard type == loadableKeyOID else {
                throw TPMError(kind: .unsupported,
                               message: "the TSS2 key is of type \(type), not a loadable key (2.23.133.10.1.3): importable and sealed keys are not supported")
            }
            var emptyAuth = false
            // The optional context-specific fields, in order.
            while true {
                var peek = nodes
                guard let next = peek.next(), next.identifier.tagClass == .contextSpecific else { break }
                nodes = peek
                switch next.identifier.tagNumber {
                case 0:
                    // emptyAuth. tpm2-openssl writes TRUE as 0x01 (BER), not DER's 0xFF: any non-zero byte is TRUE.
                    guard case .constructed(let inner) = next.content, let boolean = inner.first(where: { _ in true }),
                          boolean.identifier == .boolean, case .primitive(let bytes) = boolean.content, bytes.count == 1 else {
                        throw TPMError(kind: .malformedBlob, message: "the TSS2 key's emptyAuth is not a BOOLEAN")
                    }
                    emptyAuth = bytes.first != 0
                case 1, 2, 3:
                    throw TPMError(kind: .unsupported,
                                   message: "the TSS2 key carries a policy (field [\(next.identifier.tagNumber)]), which Keystone does not satisfy")
                case 4:
                    continue  // description: informative only
                case 5:
                    throw TPMError(kind: .unsupported, message: "the TSS2 key's parent is an RSA primary key; Keystone's parent is the ECC P-256 storage primary")
                default:
                    throw TPMError(kind: .malformedBlob, message: "the TSS2 key has an unknown field [\(next.identifier.tagNumber)]")
                }
            }
            let parent = try Int(derEncoded: &nodes)
            guard parent == Int(ownerHierarchyParent) else {
                throw TPMError(kind: .unsupported,
                               message: String(format: "the TSS2 key's parent is 0x%08x; Keystone loads keys under the owner hierarchy (0x40000001) only", parent))
            }
            let pub = try ASN1OctetString(derEncoded: &nodes)
            let priv = try ASN1OctetString(derEncoded: &nodes)
            return (emptyAuth, Array(pub.bytes), Array(priv.bytes))
        }
    }
}
#endif
