import Crypto
import Foundation

// The sealed path of ProtectedFiles (every platform without Data Protection): keys from the keychain, the format
// of SealedFileFormat.swift, atomic writes of AtomicFileWriter.swift.

extension ProtectedFiles {
    /// Seals `source` into a new file replacing `url`. The class key is obtained first: a locked keychain fails
    /// before any file is created.
    func writeSealed(_ source: Source, to url: URL, protection: FileProtection) throws {
        let name = url.lastPathComponent
        let salt = Data(SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) })
        let fileKey: SymmetricKey
        var header = SealedFileHeader(protection: protection, chunkSize: chunkSize, keyID: Data(), salt: salt, ephemeralPublicKey: Data())
        do {
            switch protection {
            case .complete, .completeUntilFirstUserAuthentication:
                let classKey = try keys.symmetricKey(protection, create: true)!
                header.keyID = SealedFile.keyID(of: classKey)
                fileKey = SealedFile.fileKey(classKey: classKey, salt: salt, name: name)
            case .completeUnlessOpen:
                let classPublic = try keys.agreementPublicKey()
                let ephemeral = P256.KeyAgreement.PrivateKey()
                header.keyID = SealedFile.keyID(of: classPublic)
                header.ephemeralPublicKey = ephemeral.publicKey.x963Representation
                let shared = try ephemeral.sharedSecretFromKeyAgreement(with: classPublic)
                fileKey = SealedFile.fileKey(sharedSecret: shared, salt: salt, name: name, ephemeral: header.ephemeralPublicKey,
                                             classPublic: classPublic.x963Representation)
            }
        } catch let error as KeychainError where error.isTransient {
            throw KeychainError(status: Status.interactionNotAllowed,
                                reason: "the \(protection.rawValue) class key cannot be used while the keychain is locked; \(url.path) was not written. Try again after the unlock")
        }
        let writer = try AtomicFileWriter(target: url)
        // A stream (or a large buffer) is written by a thread of its own while the next chunks are sealed.
        switch source {
        case .bytes(let data) where data.count < 1 << 20: break
        default: writer.writeInBackground()
        }
        do {
            let sealer = try ChunkSealer(key: fileKey, header: header.encoded, chunkSize: chunkSize, writer: writer)
            switch source {
            case .bytes(let data): try data.withUnsafeBytes { try sealer.consume($0) }
            case .descriptor(let fd, let path): try sealer.consume(fileDescriptor: fd, path: path)
            case .pieces(let next):
                while let piece = try next() { try piece.withUnsafeBytes { try sealer.consume($0) } }
            }
            try sealer.finish()
            try writer.commit()
        } catch {
            writer.abandon()
            throw error
        }
    }

    /// Opens the sealed file at `url`, handing each verified chunk to `body`.
    func readSealed(at url: URL, _ body: (Data) throws -> Void) throws {
        let fd: Int32
        do { fd = try FileIO.openForReading(url, what: "the protected file") } catch let error as KeychainError where error.isNotFound {
            throw KeychainError(status: Status.itemNotFound, reason: "there is no protected file at \(url.path)")
        }
        defer { close(fd) }
        let (header, headerBytes) = try SealedFileHeader.read(from: fd, path: url.path)
        let name = url.lastPathComponent
        let fileKey: SymmetricKey
        let noKey = SealedFile.damaged(url.path, "it was sealed under another keychain's key (this keychain has no \(header.protection.rawValue) class key under service \"\(service)\")")
        let otherKey = SealedFile.damaged(url.path, "it was sealed under another keychain's key (the key ids differ)")
        do {
            switch header.protection {
            case .complete, .completeUntilFirstUserAuthentication:
                guard let classKey = try keys.symmetricKey(header.protection, create: false) else { throw noKey }
                guard SealedFile.keyID(of: classKey) == header.keyID else { throw otherKey }
                fileKey = SealedFile.fileKey(classKey: classKey, salt: header.salt, name: name)
            case .completeUnlessOpen:
                guard let classPrivate = try keys.agreementPrivateKey(create: false) else { throw noKey }
                guard SealedFile.keyID(of: classPrivate.publicKey) == header.keyID else { throw otherKey }
                let ephemeral: P256.KeyAgreement.PublicKey
                do { ephemeral = try P256.KeyAgreement.PublicKey(x963Representation: header.ephemeralPublicKey) } catch {
                    throw SealedFile.damaged(url.path, "its header is damaged")
                }
                let shared = try classPrivate.sharedSecretFromKeyAgreement(with: ephemeral)
                fileKey = SealedFile.fileKey(sharedSecret: shared, salt: header.salt, name: name, ephemeral: header.ephemeralPublicKey,
                                             classPublic: classPrivate.publicKey.x963Representation)
            }
        } catch let error as KeychainError where error.isTransient {
            throw KeychainError(status: Status.interactionNotAllowed,
                                reason: "\(url.path) cannot be read while the keychain is locked (its \(header.protection.rawValue) class key is unavailable). The file is intact: try again after the unlock; do not delete it")
        }
        try openChunks(fd: fd, path: url.path, header: header, headerBytes: headerBytes, key: fileKey, body)
    }
}
